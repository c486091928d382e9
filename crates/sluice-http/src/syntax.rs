//! Character classes and list splitting from RFC 9110 §5.6, shared by the head parser, the
//! header helpers and the chunked decoder.

/// `tchar` (RFC 9110 §5.6.2): the characters of a token, such as a method or a field name.
pub(crate) fn is_tchar(b: u8) -> bool {
    matches!(b,
        b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_'
        | b'`' | b'|' | b'~' | b'0'..=b'9' | b'a'..=b'z' | b'A'..=b'Z')
}

/// True when `s` is a non-empty token.
pub(crate) fn is_token(s: &[u8]) -> bool {
    !s.is_empty() && s.iter().all(|&b| is_tchar(b))
}

/// A byte allowed in a field value (RFC 9110 §5.5): HTAB, SP, VCHAR and obs-text. Everything
/// else is a control character, NUL, CR and LF included.
pub(crate) fn is_field_value_byte(b: u8) -> bool {
    b == b'\t' || (0x20..=0x7e).contains(&b) || b >= 0x80
}

/// Optional whitespace (RFC 9110 §5.6.3).
pub(crate) fn is_ows(b: u8) -> bool {
    b == b' ' || b == b'\t'
}

/// `s` without leading and trailing OWS.
pub(crate) fn trim_ows(s: &[u8]) -> &[u8] {
    let start = s.iter().position(|&b| !is_ows(b)).unwrap_or(s.len());
    let end = s.iter().rposition(|&b| !is_ows(b)).map_or(start, |i| i + 1);
    s.get(start..end).unwrap_or_default()
}

/// The elements of a comma-separated list value (RFC 9110 §5.6.1), trimmed, empty elements
/// kept so callers that must refuse them can.
pub(crate) fn list_elements(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(trim_ows)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn trims_ows_both_sides() {
        assert_eq!(trim_ows(b" \t a b\t "), b"a b");
        assert_eq!(trim_ows(b"   "), b"");
        assert_eq!(trim_ows(b""), b"");
    }

    #[test]
    fn splits_lists_keeping_empty_elements() {
        let parts: Vec<&[u8]> = list_elements(b"a , b,,c").collect();
        assert_eq!(parts, [&b"a"[..], b"b", b"", b"c"]);
    }
}
