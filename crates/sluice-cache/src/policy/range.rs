//! Single byte ranges (RFC 9110 §14.1.2): `bytes=a-b`, `bytes=a-`, `bytes=-n`.

/// What a Range field asks of a representation of known length.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum RangeOutcome {
    /// No usable Range: a missing, malformed, non-bytes or multi-range field. Serve the whole
    /// representation with 200 (RFC 9110 §14.2 lets a server ignore Range; we do for several
    /// ranges rather than build multipart/byteranges).
    Full,
    /// One satisfiable range: `first..=last`.
    Single {
        /// First byte offset.
        first: u64,
        /// Last byte offset, inclusive.
        last: u64,
    },
    /// The range starts past the end (or is an empty suffix): 416.
    Unsatisfiable,
}

/// Reads `value` against a representation of `len` bytes.
pub(crate) fn resolve_range(value: &[u8], len: u64) -> RangeOutcome {
    let Some(spec) = std::str::from_utf8(value)
        .ok()
        .and_then(|text| text.trim().strip_prefix("bytes="))
    else {
        return RangeOutcome::Full;
    };
    if spec.contains(',') {
        return RangeOutcome::Full;
    }
    let Some((first, last)) = spec.trim().split_once('-') else {
        return RangeOutcome::Full;
    };
    match (number(first), number(last), first.is_empty()) {
        // bytes=-n: the last n bytes.
        (None, Some(suffix), true) => {
            if suffix == 0 || len == 0 {
                RangeOutcome::Unsatisfiable
            } else {
                RangeOutcome::Single {
                    first: len - suffix.min(len),
                    last: len - 1,
                }
            }
        }
        // bytes=a- and bytes=a-b.
        (Some(first), last, false) if last.is_none_or(|last| last >= first) => {
            if last.is_none() && !last_is_empty(spec) {
                return RangeOutcome::Full;
            }
            if first >= len {
                RangeOutcome::Unsatisfiable
            } else {
                RangeOutcome::Single {
                    first,
                    last: last.map_or(len - 1, |last| last.min(len - 1)),
                }
            }
        }
        _ => RangeOutcome::Full,
    }
}

fn last_is_empty(spec: &str) -> bool {
    spec.trim().ends_with('-')
}

fn number(digits: &str) -> Option<u64> {
    let digits = digits.trim();
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use RangeOutcome::*;

    #[test]
    fn reads_first_to_last() {
        assert_eq!(
            resolve_range(b"bytes=0-4", 10),
            Single { first: 0, last: 4 }
        );
        assert_eq!(
            resolve_range(b"bytes=5-99", 10),
            Single { first: 5, last: 9 }
        );
    }

    #[test]
    fn reads_open_ended() {
        assert_eq!(resolve_range(b"bytes=3-", 10), Single { first: 3, last: 9 });
    }

    #[test]
    fn reads_suffix() {
        assert_eq!(resolve_range(b"bytes=-3", 10), Single { first: 7, last: 9 });
        assert_eq!(
            resolve_range(b"bytes=-30", 10),
            Single { first: 0, last: 9 }
        );
    }

    #[test]
    fn start_past_end_is_unsatisfiable() {
        assert_eq!(resolve_range(b"bytes=10-", 10), Unsatisfiable);
        assert_eq!(resolve_range(b"bytes=-0", 10), Unsatisfiable);
        assert_eq!(resolve_range(b"bytes=-5", 0), Unsatisfiable);
    }

    #[test]
    fn multi_range_and_malformed_serve_full() {
        for value in [
            "bytes=0-1,3-4",
            "bytes=5-1",
            "items=0-1",
            "bytes=a-b",
            "bytes=1-x",
            "bytes=-",
        ] {
            assert_eq!(resolve_range(value.as_bytes(), 10), Full, "{value}");
        }
    }
}
