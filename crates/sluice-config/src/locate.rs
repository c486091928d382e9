//! Maps between key paths (`listener[0].mode`) and byte spans of the TOML text, so that both
//! deserializer errors (which carry a span) and semantic errors (which know a key) can say
//! `file:line:column: key: reason`.

use std::fmt;
use std::ops::Range;

use toml::de::{DeTable, DeValue};
use toml::Spanned;

/// One step of a key path: a table key or an array index.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Segment {
    Key(String),
    Index(usize),
}

/// A path from the root table to a value, displayed as `listener[0].mode`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct KeyPath(Vec<Segment>);

impl KeyPath {
    /// The path of a top-level key.
    pub(crate) fn top(key: &str) -> KeyPath {
        KeyPath(vec![Segment::Key(key.to_owned())])
    }

    /// This path extended by a table key.
    pub(crate) fn key(&self, key: &str) -> KeyPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Key(key.to_owned()));
        KeyPath(segments)
    }

    /// This path extended by an array index.
    pub(crate) fn index(&self, index: usize) -> KeyPath {
        let mut segments = self.0.clone();
        segments.push(Segment::Index(index));
        KeyPath(segments)
    }
}

impl fmt::Display for KeyPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.0.is_empty() {
            return f.write_str("<top level>");
        }
        for (position, segment) in self.0.iter().enumerate() {
            match segment {
                Segment::Key(key) if position == 0 => f.write_str(key)?,
                Segment::Key(key) => write!(f, ".{key}")?,
                Segment::Index(index) => write!(f, "[{index}]")?,
            }
        }
        Ok(())
    }
}

/// A parsed document that keeps the span of every key and value.
pub(crate) struct Document<'i> {
    root: Spanned<DeTable<'i>>,
}

impl<'i> Document<'i> {
    /// Parses `text`; the error is the TOML syntax error, with its span.
    pub(crate) fn parse(text: &'i str) -> Result<Document<'i>, toml::de::Error> {
        DeTable::parse(text).map(|root| Document { root })
    }

    /// Whether the file itself sets the value at `path` (rather than leaving it to a default).
    pub(crate) fn contains(&self, path: &KeyPath) -> bool {
        self.value(path).is_some()
    }

    /// The span of the value at `path`, or of its deepest ancestor the file does contain;
    /// `None` when not even the first key is in the file.
    pub(crate) fn span_of(&self, path: &KeyPath) -> Option<Range<usize>> {
        (1..=path.0.len()).rev().find_map(|len| {
            let ancestor = KeyPath(path.0[..len].to_vec());
            self.value(&ancestor).map(Spanned::span)
        })
    }

    /// The key path of the smallest key or value whose span contains `offset`.
    pub(crate) fn path_at(&self, offset: usize) -> KeyPath {
        let mut best: Option<(usize, KeyPath)> = None;
        visit_table(
            self.root.get_ref(),
            &KeyPath::default(),
            &mut |path, span| {
                let contains = span.start <= offset && offset < span.end.max(span.start + 1);
                let better = best.as_ref().is_none_or(|(len, _)| span.len() <= *len);
                if contains && better {
                    best = Some((span.len(), path.clone()));
                }
            },
        );
        best.map(|(_, path)| path).unwrap_or_default()
    }

    fn value(&self, path: &KeyPath) -> Option<&Spanned<DeValue<'i>>> {
        let mut segments = path.0.iter();
        let Some(Segment::Key(first)) = segments.next() else {
            return None;
        };
        let mut current = table_get(self.root.get_ref(), first)?;
        for segment in segments {
            current = match (segment, current.get_ref()) {
                (Segment::Key(key), DeValue::Table(table)) => table_get(table, key)?,
                (Segment::Index(index), DeValue::Array(array)) => array.get(*index)?,
                _ => return None,
            };
        }
        Some(current)
    }
}

fn table_get<'a, 'i>(table: &'a DeTable<'i>, key: &str) -> Option<&'a Spanned<DeValue<'i>>> {
    table
        .iter()
        .find(|(name, _)| name.get_ref() == key)
        .map(|(_, value)| value)
}

/// Calls `found` with the path and span of every key and value under `table`.
fn visit_table(table: &DeTable<'_>, path: &KeyPath, found: &mut dyn FnMut(&KeyPath, Range<usize>)) {
    for (key, value) in table.iter() {
        let path = path.key(key.get_ref());
        found(&path, key.span());
        visit_value(value, &path, found);
    }
}

fn visit_value(
    value: &Spanned<DeValue<'_>>,
    path: &KeyPath,
    found: &mut dyn FnMut(&KeyPath, Range<usize>),
) {
    found(path, value.span());
    match value.get_ref() {
        DeValue::Table(table) => visit_table(table, path, found),
        DeValue::Array(array) => {
            for (index, item) in array.iter().enumerate() {
                visit_value(item, &path.index(index), found);
            }
        }
        _ => {}
    }
}
