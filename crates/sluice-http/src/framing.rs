//! Where a body ends: [`BodyFraming`] from Content-Length, Transfer-Encoding, the method and
//! the status (RFC 9112 §6), with the checks that keep two parsers from disagreeing on it.

use crate::syntax::list_elements;
use crate::{Headers, Method, ParseError, RequestHead, ResponseHead, Version};

/// How the body of a message is delimited.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyFraming {
    /// No body at all.
    Empty,
    /// Exactly this many bytes (possibly 0, when Content-Length says so).
    Length(u64),
    /// Chunked transfer coding: feed the bytes after the head to a
    /// [`ChunkedDecoder`](crate::ChunkedDecoder).
    Chunked,
    /// The body runs until the upstream closes the connection (responses only); the
    /// connection can't be reused.
    UntilClose,
}

/// Which kind of message the framing fields belong to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum MessageKind {
    /// Requests: only a single `chunked` coding is accepted.
    Request,
    /// Responses: other codings are allowed; without a final `chunked` the body is
    /// close-delimited.
    Response,
}

/// What Content-Length and Transfer-Encoding say, once validated.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FramingFields {
    /// Neither field.
    Absent,
    /// Content-Length, all values agreeing.
    Length(u64),
    /// Transfer-Encoding with `chunked` as the final coding.
    Chunked,
    /// Transfer-Encoding without a final `chunked` (responses only): close-delimited.
    NotChunked,
}

/// Validates the framing fields of a head (RFC 9112 §6.1-6.3).
pub(crate) fn framing_fields(
    headers: &Headers,
    version: Version,
    kind: MessageKind,
) -> Result<FramingFields, ParseError> {
    let length = content_length(headers)?;
    if !headers.contains("transfer-encoding") {
        return Ok(length.map_or(FramingFields::Absent, FramingFields::Length));
    }
    // RFC 9112 §6.1: TE in HTTP/1.0 means faulty framing, even with a Content-Length.
    if version == Version::Http10 {
        return Err(ParseError::TransferEncodingInHttp10);
    }
    // RFC 9112 §6.1 lets a server drop Content-Length and trust TE; a proxy that did so would
    // still forward bytes an upstream may frame by Content-Length, so refuse instead.
    if length.is_some() {
        return Err(ParseError::ContentLengthWithTransferEncoding);
    }
    let codings: Vec<&[u8]> = headers
        .get_all("transfer-encoding")
        .flat_map(list_elements)
        .collect();
    // Empty elements may be ignored by some peers and not others: refuse them.
    if codings.iter().any(|coding| coding.is_empty()) {
        return Err(ParseError::InvalidTransferEncoding);
    }
    let is_chunked = |coding: &[u8]| coding.eq_ignore_ascii_case(b"chunked");
    let chunked_count = codings.iter().filter(|coding| is_chunked(coding)).count();
    let ends_chunked = codings.last().is_some_and(|coding| is_chunked(coding));
    // RFC 9112 §6.1: a sender MUST NOT apply chunked more than once.
    if chunked_count > 1 {
        return Err(ParseError::InvalidTransferEncoding);
    }
    match kind {
        MessageKind::Request if codings.len() == 1 && ends_chunked => Ok(FramingFields::Chunked),
        // A request with another coding before chunked: we don't implement it (501).
        MessageKind::Request if ends_chunked => Err(ParseError::UnsupportedTransferEncoding),
        // RFC 9112 §6.3: a request whose final coding isn't chunked has no reliable length.
        MessageKind::Request => Err(ParseError::InvalidTransferEncoding),
        MessageKind::Response if ends_chunked => Ok(FramingFields::Chunked),
        // RFC 9112 §6.3 rule 4: read until the server closes.
        MessageKind::Response => Ok(FramingFields::NotChunked),
    }
}

/// The Content-Length of a head, if any: every field and list element must be 1*DIGIT and
/// agree (RFC 9110 §8.6 allows a recipient to accept `5, 5`).
fn content_length(headers: &Headers) -> Result<Option<u64>, ParseError> {
    let mut length = None;
    for element in headers.get_all("content-length").flat_map(list_elements) {
        let value = parse_decimal(element).ok_or(ParseError::InvalidContentLength)?;
        match length {
            None => length = Some(value),
            Some(first) if first != value => {
                return Err(ParseError::DuplicateContentLength {
                    first,
                    second: value,
                });
            }
            Some(_) => {}
        }
    }
    Ok(length)
}

/// 1*DIGIT as a u64; `None` for anything else, a sign, whitespace or overflow included.
fn parse_decimal(digits: &[u8]) -> Option<u64> {
    if digits.is_empty() {
        return None;
    }
    digits.iter().try_fold(0u64, |acc, &b| {
        let digit = b.is_ascii_digit().then(|| u64::from(b - b'0'))?;
        acc.checked_mul(10)?.checked_add(digit)
    })
}

impl RequestHead {
    /// How this request's body is delimited. A request with neither Content-Length nor
    /// Transfer-Encoding has no body ([`BodyFraming::Empty`], never `UntilClose`: RFC 9112
    /// §6.3 rule 7). Fails only if the headers were changed after [`parse_request`](crate::parse_request),
    /// which checks the same rules.
    pub fn body_framing(&self) -> Result<BodyFraming, ParseError> {
        match framing_fields(&self.headers, self.version, MessageKind::Request)? {
            FramingFields::Absent => Ok(BodyFraming::Empty),
            FramingFields::Length(length) => Ok(BodyFraming::Length(length)),
            FramingFields::Chunked => Ok(BodyFraming::Chunked),
            // framing_fields refuses this for requests; kept an error rather than a panic.
            FramingFields::NotChunked => Err(ParseError::InvalidTransferEncoding),
        }
    }
}

impl ResponseHead {
    /// How this response's body is delimited, given the method of the request it answers
    /// (RFC 9112 §6.3): no body after HEAD, for 1xx, 204 and 304, nor for a 2xx to CONNECT
    /// (the connection becomes a tunnel); otherwise final chunked, then Content-Length, then
    /// until close. The framing fields are validated even when they don't count.
    pub fn body_framing(&self, request_method: &Method) -> Result<BodyFraming, ParseError> {
        let fields = framing_fields(&self.headers, self.version, MessageKind::Response)?;
        let no_body_status = matches!(self.status, 100..=199 | 204 | 304);
        let tunnel = *request_method == Method::Connect && (200..=299).contains(&self.status);
        if *request_method == Method::Head || no_body_status || tunnel {
            return Ok(BodyFraming::Empty);
        }
        Ok(match fields {
            FramingFields::Chunked => BodyFraming::Chunked,
            FramingFields::Length(length) => BodyFraming::Length(length),
            FramingFields::NotChunked | FramingFields::Absent => BodyFraming::UntilClose,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_decimal_strictly() {
        assert_eq!(parse_decimal(b"0"), Some(0));
        assert_eq!(parse_decimal(b"18446744073709551615"), Some(u64::MAX));
        for bad in [
            &b""[..],
            b"18446744073709551616",
            b"+1",
            b"-1",
            b"1 2",
            b"0x1",
            b"1e3",
        ] {
            assert_eq!(parse_decimal(bad), None, "{bad:?}");
        }
    }
}
