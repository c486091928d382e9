//! The two units of the file: sizes ("64KiB") and durations ("5s"), as serde helpers.
//!
//! Values are typed as plain `usize` and `Duration` in the schema so the proxy needs no wrapper
//! types; these modules are named with `#[serde(with = "...")]` on each field. Writing them back
//! is exact, so `Config::to_toml_string` re-parses to the same values.

use std::fmt;
use std::time::Duration;

use serde::de::{self, Visitor};
use serde::{Deserializer, Serializer};

/// A size in bytes: a string with a unit ("64KiB", "1 MiB", "1.5KB") or a bare integer (bytes).
pub(crate) mod size {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        bytes: &usize,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&format_size(*bytes))
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<usize, D::Error> {
        deserializer.deserialize_any(SizeVisitor)
    }
}

/// An optional size: absent means "leave it to the kernel"; present parses as [`size`].
pub(crate) mod option_size {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        bytes: &Option<usize>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match bytes {
            Some(bytes) => serializer.serialize_str(&format_size(*bytes)),
            None => serializer.serialize_none(),
        }
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<usize>, D::Error> {
        // TOML has no null: a key that is present always carries a value.
        deserializer.deserialize_any(SizeVisitor).map(Some)
    }
}

/// A duration: a string with a unit ("5s", "250ms", "1m 30s"), in humantime's grammar.
pub(crate) mod duration {
    use super::*;

    pub(crate) fn serialize<S: Serializer>(
        duration: &Duration,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&humantime::format_duration(*duration).to_string())
    }

    pub(crate) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Duration, D::Error> {
        deserializer.deserialize_any(DurationVisitor)
    }
}

/// Writes `bytes` with the largest binary unit that divides it exactly ("64KiB"), or as plain
/// bytes ("1000B"), so that parsing the text gives back the same number.
pub(crate) fn format_size(bytes: usize) -> String {
    const UNITS: [&str; 4] = ["GiB", "MiB", "KiB", "B"];
    let mut divisor: usize = 1 << 30;
    for unit in UNITS {
        if bytes != 0 && bytes % divisor == 0 {
            return format!("{}{unit}", bytes / divisor);
        }
        divisor >>= 10;
    }
    format!("{bytes}B")
}

/// Parses a size string the way the config file does; used by the visitor and by tests.
pub(crate) fn parse_size(text: &str) -> Result<usize, String> {
    let hint = "write a number with a unit, such as \"64KiB\" or \"1MiB\"";
    let parsed: bytesize::ByteSize = text
        .trim()
        .parse()
        .map_err(|_| format!("invalid size \"{text}\"; {hint}"))?;
    usize::try_from(parsed.as_u64()).map_err(|_| format!("size \"{text}\" is too large"))
}

struct SizeVisitor;

impl<'de> Visitor<'de> for SizeVisitor {
    type Value = usize;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a size such as \"64KiB\" or a number of bytes")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<usize, E> {
        usize::try_from(value).map_err(|_| E::custom(format!("size {value} is negative")))
    }

    fn visit_u64<E: de::Error>(self, value: u64) -> Result<usize, E> {
        usize::try_from(value).map_err(|_| E::custom(format!("size {value} is too large")))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<usize, E> {
        parse_size(value).map_err(E::custom)
    }
}

struct DurationVisitor;

impl<'de> Visitor<'de> for DurationVisitor {
    type Value = Duration;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a duration with a unit, such as \"5s\" or \"250ms\"")
    }

    fn visit_i64<E: de::Error>(self, value: i64) -> Result<Duration, E> {
        // A bare number is refused on purpose: "5000" could be seconds or milliseconds.
        Err(E::custom(format!(
            "duration {value} has no unit; write it as a string with a unit, such as \"{value}s\" \
             or \"{value}ms\""
        )))
    }

    fn visit_str<E: de::Error>(self, value: &str) -> Result<Duration, E> {
        humantime::parse_duration(value.trim()).map_err(|error| {
            E::custom(format!(
                "invalid duration \"{value}\": {error}; write a number with a unit, such as \"5s\" \
                 or \"250ms\""
            ))
        })
    }
}
