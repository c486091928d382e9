//! [`Headers`]: the field lines of a head, in order, names as received.

use crate::syntax::list_elements;

/// One field line: the name as received (case kept) and the raw value, OWS trimmed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HeaderField {
    /// Field name, case as received; compare with `eq_ignore_ascii_case`.
    pub name: String,
    /// Field value without surrounding whitespace. May hold obs-text, so bytes, not `String`.
    pub value: Vec<u8>,
}

/// The field lines of a head, in the order received, duplicates kept.
///
/// Lookups are case-insensitive and linear: heads have tens of fields, so a scan beats a map.
/// Values added with [`append`](Headers::append) or [`set`](Headers::set) are written as given:
/// callers must not put CR, LF or NUL in them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Headers {
    fields: Vec<HeaderField>,
}

impl Headers {
    /// An empty set of fields.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of the first field named `name`, case-insensitive.
    pub fn get(&self, name: &str) -> Option<&[u8]> {
        self.fields
            .iter()
            .find(|f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value.as_slice())
    }

    /// The values of every field named `name`, case-insensitive, in order.
    pub fn get_all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a [u8]> {
        self.fields
            .iter()
            .filter(move |f| f.name.eq_ignore_ascii_case(name))
            .map(|f| f.value.as_slice())
    }

    /// True when at least one field is named `name`, case-insensitive.
    pub fn contains(&self, name: &str) -> bool {
        self.fields
            .iter()
            .any(|f| f.name.eq_ignore_ascii_case(name))
    }

    /// Removes every field named `name`, case-insensitive.
    pub fn remove(&mut self, name: &str) {
        self.fields.retain(|f| !f.name.eq_ignore_ascii_case(name));
    }

    /// Adds a field at the end, after any of the same name.
    pub fn append(&mut self, name: &str, value: impl Into<Vec<u8>>) {
        self.fields.push(HeaderField {
            name: name.to_owned(),
            value: value.into(),
        });
    }

    /// Replaces every field named `name` with one holding `value`, at the place of the first
    /// (or at the end if there was none), so the order of the others is kept.
    pub fn set(&mut self, name: &str, value: impl Into<Vec<u8>>) {
        let value = value.into();
        match self
            .fields
            .iter()
            .position(|f| f.name.eq_ignore_ascii_case(name))
        {
            Some(first) => {
                self.fields[first].value = value;
                let mut index = 0;
                self.fields.retain(|f| {
                    let keep = index <= first || !f.name.eq_ignore_ascii_case(name);
                    index += 1;
                    keep
                });
            }
            None => self.append(name, value),
        }
    }

    /// The fields in order.
    pub fn iter(&self) -> impl Iterator<Item = &HeaderField> {
        self.fields.iter()
    }

    /// How many field lines there are (duplicates count each).
    pub fn len(&self) -> usize {
        self.fields.len()
    }

    /// True when there is no field.
    pub fn is_empty(&self) -> bool {
        self.fields.is_empty()
    }

    /// True when a comma-separated field (e.g. Connection) lists this token, case-insensitive,
    /// in any of its field lines.
    pub fn has_token(&self, name: &str, token: &str) -> bool {
        self.get_all(name)
            .flat_map(list_elements)
            .any(|element| element.eq_ignore_ascii_case(token.as_bytes()))
    }

    /// Adds an already parsed field; used by the head parser.
    pub(crate) fn push(&mut self, field: HeaderField) {
        self.fields.push(field);
    }

    /// Keeps only the fields for which `keep` is true.
    pub(crate) fn retain(&mut self, keep: impl FnMut(&HeaderField) -> bool) {
        self.fields.retain(keep);
    }
}

impl<'a> IntoIterator for &'a Headers {
    type Item = &'a HeaderField;
    type IntoIter = std::slice::Iter<'a, HeaderField>;

    fn into_iter(self) -> Self::IntoIter {
        self.fields.iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Headers {
        let mut h = Headers::new();
        h.append("Host", "a");
        h.append("X-Dup", "1");
        h.append("Accept", "*/*");
        h.append("x-dup", "2");
        h
    }

    #[test]
    fn get_is_case_insensitive_and_first() {
        let h = sample();
        assert_eq!(h.get("HOST"), Some(&b"a"[..]));
        assert_eq!(h.get("X-DUP"), Some(&b"1"[..]));
        assert_eq!(h.get("missing"), None);
        assert_eq!(h.get_all("x-dup").collect::<Vec<_>>(), [&b"1"[..], b"2"]);
    }

    #[test]
    fn remove_drops_every_field_of_that_name() {
        let mut h = sample();
        h.remove("X-Dup");
        assert!(!h.contains("x-dup"));
        assert_eq!(h.len(), 2);
    }

    #[test]
    fn set_replaces_all_in_place_of_the_first() {
        let mut h = sample();
        h.set("x-DUP", "3");
        let names: Vec<&str> = h.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["Host", "X-Dup", "Accept"]);
        assert_eq!(h.get("x-dup"), Some(&b"3"[..]));
        h.set("New", "v");
        assert_eq!(h.len(), 4);
    }

    #[test]
    fn has_token_reads_lists_across_lines() {
        let mut h = Headers::new();
        h.append("Connection", "keep-alive , Upgrade");
        h.append("connection", "X-Foo");
        assert!(h.has_token("Connection", "upgrade"));
        assert!(h.has_token("Connection", "x-foo"));
        assert!(!h.has_token("Connection", "close"));
        assert!(!h.has_token("Connection", "keep"));
    }
}
