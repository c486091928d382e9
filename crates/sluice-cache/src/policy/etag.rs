//! Entity tags (RFC 9110 §8.8.3) and their two comparisons (§8.8.3.2).

/// One entity tag: `"opaque"` or `W/"opaque"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct EntityTag {
    weak: bool,
    opaque: Vec<u8>,
}

/// An If-None-Match or If-Match value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum EntityTags {
    /// `*`: any current representation.
    Any,
    /// A list of tags; malformed members are skipped.
    List(Vec<EntityTag>),
}

impl EntityTag {
    /// Parses one tag; `None` unless quoted as the grammar says.
    pub(crate) fn parse(value: &[u8]) -> Option<Self> {
        let value = value.trim_ascii();
        let (weak, quoted) = match value.strip_prefix(b"W/") {
            Some(rest) => (true, rest),
            None => (false, value),
        };
        let opaque = quoted.strip_prefix(b"\"")?.strip_suffix(b"\"")?;
        if opaque.contains(&b'"') {
            return None;
        }
        Some(Self {
            weak,
            opaque: opaque.to_vec(),
        })
    }

    /// Weak comparison: the opaque parts are equal, weakness ignored (If-None-Match, 304s).
    pub(crate) fn weak_eq(&self, other: &Self) -> bool {
        self.opaque == other.opaque
    }

    /// Strong comparison: both strong and equal (If-Range).
    pub(crate) fn strong_eq(&self, other: &Self) -> bool {
        !self.weak && !other.weak && self.opaque == other.opaque
    }
}

impl EntityTags {
    /// Parses every line of a list-valued field such as If-None-Match.
    pub(crate) fn parse<'a>(lines: impl Iterator<Item = &'a [u8]>) -> Self {
        let mut tags = Vec::new();
        for line in lines {
            if line.trim_ascii() == b"*" {
                return EntityTags::Any;
            }
            // Opaque tags cannot hold a DQUOTE, so splitting on commas between tags is safe
            // once we only split outside quotes.
            let mut quoted = false;
            let mut start = 0;
            for (index, &byte) in line.iter().enumerate() {
                match byte {
                    b'"' => quoted = !quoted,
                    b',' if !quoted => {
                        tags.extend(line.get(start..index).and_then(EntityTag::parse));
                        start = index + 1;
                    }
                    _ => {}
                }
            }
            tags.extend(line.get(start..).and_then(EntityTag::parse));
        }
        EntityTags::List(tags)
    }

    /// True when `current` matches under weak comparison (`*` matches any tag).
    pub(crate) fn weak_match(&self, current: Option<&EntityTag>) -> bool {
        match (self, current) {
            (EntityTags::Any, _) => true,
            (EntityTags::List(tags), Some(current)) => tags.iter().any(|t| t.weak_eq(current)),
            (EntityTags::List(_), None) => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tag(raw: &str) -> EntityTag {
        EntityTag::parse(raw.as_bytes()).expect("valid test tag")
    }

    #[test]
    fn weak_comparison_ignores_weakness() {
        assert!(tag("W/\"a\"").weak_eq(&tag("\"a\"")));
        assert!(!tag("\"a\"").weak_eq(&tag("\"b\"")));
    }

    #[test]
    fn strong_comparison_needs_both_strong() {
        assert!(tag("\"a\"").strong_eq(&tag("\"a\"")));
        assert!(!tag("W/\"a\"").strong_eq(&tag("\"a\"")));
    }

    #[test]
    fn rejects_unquoted_tags() {
        assert_eq!(EntityTag::parse(b"abc"), None);
        assert_eq!(EntityTag::parse(b"\"a\"b\""), None);
    }

    #[test]
    fn list_splits_outside_quotes_and_reads_star() {
        let list = EntityTags::parse([&b"\"a,b\", W/\"c\""[..]].into_iter());
        assert!(list.weak_match(Some(&tag("\"a,b\""))));
        assert!(list.weak_match(Some(&tag("\"c\""))));
        assert!(!list.weak_match(Some(&tag("\"a\""))));
        assert!(EntityTags::parse([&b"*"[..]].into_iter()).weak_match(None));
    }
}
