//! Line-level checks on a head before any field is parsed: where the head ends, the size
//! limits, and the byte-level rules whose violation lets two parsers split a stream differently
//! (NUL, bare CR, bare LF, obs-fold, whitespace before the colon).
//!
//! httparse runs after this scan as a second opinion; doing these checks here first gives each
//! rule its own [`ParseError`] variant and lets limits fire before the head is complete.

use crate::syntax::{is_field_value_byte, is_ows, is_token};
use crate::{Limits, ParseError};

/// Which start line the head has; requests are held to stricter rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HeadKind {
    /// Request line, bare LF refused, request-line limit applied.
    Request,
    /// Status line, bare LF accepted as RFC 9112 §2.2 allows.
    Response,
}

/// Where the parts of a complete head are in the buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HeadLayout {
    /// Bytes of the head including the empty line that ends it (and any leading empty lines).
    pub len: usize,
    /// Byte range of the start line, without its line end.
    pub start_line: std::ops::Range<usize>,
    /// How many field lines follow the start line.
    pub fields: usize,
}

/// Scans `buf` for a complete head. `Ok(None)` means more bytes are needed; limits are
/// enforced on the bytes seen so far, so an oversized head fails before it is complete.
pub(crate) fn scan_head(
    buf: &[u8],
    limits: &Limits,
    kind: HeadKind,
) -> Result<Option<HeadLayout>, ParseError> {
    let mut pos = 0;
    let mut start_line = None;
    let mut fields = 0;
    loop {
        let rest = buf.get(pos..).unwrap_or_default();
        let Some(lf) = rest.iter().position(|&b| b == b'\n') else {
            check_partial_line(rest, start_line.is_none(), limits, kind)?;
            if buf.len() > limits.max_header_bytes {
                return Err(ParseError::HeadersTooLarge {
                    limit: limits.max_header_bytes,
                });
            }
            return Ok(None);
        };
        let line = match rest.get(..lf) {
            Some([line @ .., b'\r']) => line,
            Some(line) if kind == HeadKind::Response => line,
            _ => return Err(ParseError::BareLineFeed),
        };
        check_line_bytes(line)?;
        let line_start = pos;
        pos += lf + 1;
        if pos > limits.max_header_bytes {
            return Err(ParseError::HeadersTooLarge {
                limit: limits.max_header_bytes,
            });
        }
        if start_line.is_none() {
            // RFC 9112 §2.2: empty lines before the start line are ignored (robustness for
            // clients that send an extra CRLF after a POST body).
            if line.is_empty() {
                continue;
            }
            if kind == HeadKind::Request && line.len() > limits.max_request_line {
                return Err(ParseError::RequestLineTooLong {
                    limit: limits.max_request_line,
                });
            }
            start_line = Some(line_start..line_start + line.len());
            continue;
        }
        if line.is_empty() {
            let start_line = start_line.unwrap_or_default();
            return Ok(Some(HeadLayout {
                len: pos,
                start_line,
                fields,
            }));
        }
        check_field_line(line)?;
        fields += 1;
        if fields > limits.max_headers {
            return Err(ParseError::TooManyHeaders {
                limit: limits.max_headers,
            });
        }
    }
}

/// Checks the line still being received: bytes already there, and the request-line limit.
fn check_partial_line(
    rest: &[u8],
    is_start_line: bool,
    limits: &Limits,
    kind: HeadKind,
) -> Result<(), ParseError> {
    // A CR as the last byte may yet be followed by its LF.
    let settled = match rest {
        [before @ .., b'\r'] => before,
        _ => rest,
    };
    check_line_bytes(settled)?;
    if is_start_line && kind == HeadKind::Request && settled.len() > limits.max_request_line {
        return Err(ParseError::RequestLineTooLong {
            limit: limits.max_request_line,
        });
    }
    Ok(())
}

/// NUL and CR inside a line (its CRLF already removed) are never valid in a head.
fn check_line_bytes(line: &[u8]) -> Result<(), ParseError> {
    for &b in line {
        match b {
            0 => return Err(ParseError::NulByte),
            b'\r' => return Err(ParseError::BareCarriageReturn),
            _ => {}
        }
    }
    Ok(())
}

/// field-line = field-name ":" OWS field-value OWS (RFC 9112 §5).
fn check_field_line(line: &[u8]) -> Result<(), ParseError> {
    if line.first().is_some_and(|&b| is_ows(b)) {
        return Err(ParseError::ObsoleteLineFolding);
    }
    let colon = line
        .iter()
        .position(|&b| b == b':')
        .ok_or(ParseError::InvalidHeaderName)?;
    let (name, value) = line.split_at(colon);
    if name.last().is_some_and(|&b| is_ows(b)) {
        return Err(ParseError::WhitespaceBeforeColon);
    }
    if !is_token(name) {
        return Err(ParseError::InvalidHeaderName);
    }
    if !value.iter().skip(1).all(|&b| is_field_value_byte(b)) {
        let name = String::from_utf8_lossy(name).into_owned();
        return Err(ParseError::InvalidHeaderValue { name });
    }
    Ok(())
}
