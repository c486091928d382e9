//! Request and response heads: [`parse_request`], [`parse_response`] and what a proxy asks of
//! a head (persistence, 100-continue, Host).

use std::fmt;

use crate::framing::{framing_fields, MessageKind};
use crate::scan::{scan_head, HeadKind, HeadLayout};
use crate::syntax::trim_ows;
use crate::target::{parse_authority, PortRule};
use crate::{HeaderField, Headers, Method, ParseError, RequestTarget};

/// The HTTP versions Sluice speaks; anything else is [`ParseError::UnsupportedVersion`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Version {
    /// HTTP/1.0: connections close after each exchange unless keep-alive is asked for.
    Http10,
    /// HTTP/1.1: persistent connections, Host required, chunked allowed.
    Http11,
}

impl Version {
    /// Parses `HTTP/x.y`: 1.0 and 1.1 are versions, other digits are unsupported, the rest
    /// is `None` (not a version at all).
    fn parse(raw: &[u8]) -> Option<Result<Self, ParseError>> {
        match raw {
            b"HTTP/1.1" => Some(Ok(Version::Http11)),
            b"HTTP/1.0" => Some(Ok(Version::Http10)),
            [b'H', b'T', b'T', b'P', b'/', major, b'.', minor]
                if major.is_ascii_digit() && minor.is_ascii_digit() =>
            {
                Some(Err(ParseError::UnsupportedVersion))
            }
            _ => None,
        }
    }

    /// The version as sent on the wire, `HTTP/1.1`.
    pub fn as_str(&self) -> &'static str {
        match self {
            Version::Http10 => "HTTP/1.0",
            Version::Http11 => "HTTP/1.1",
        }
    }
}

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Size limits on a head, enforced while it is still arriving.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Longest request line, without its CRLF ([`ParseError::RequestLineTooLong`], 414).
    pub max_request_line: usize,
    /// Longest head, start line to the final empty line inclusive
    /// ([`ParseError::HeadersTooLarge`], 431). Also bounds a chunked body's trailer section.
    pub max_header_bytes: usize,
    /// Most field lines in a head ([`ParseError::TooManyHeaders`], 431).
    pub max_headers: usize,
}

impl Default for Limits {
    /// 8 KiB request line, 64 KiB head, 128 fields: what common servers accept, so legitimate
    /// clients never hit them.
    fn default() -> Self {
        Self {
            max_request_line: 8 * 1024,
            max_header_bytes: 64 * 1024,
            max_headers: 128,
        }
    }
}

/// The outcome of parsing a head from the front of a buffer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed<T> {
    /// The head is not complete yet, and nothing seen so far is invalid: read more and call
    /// again with the whole buffer.
    Partial,
    /// The head, and how many bytes of the buffer it took (including the final CRLFCRLF);
    /// the body, if any, starts there.
    Complete {
        /// The parsed head.
        head: T,
        /// Bytes of the head.
        len: usize,
    },
}

/// A parsed request head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestHead {
    /// The method.
    pub method: Method,
    /// The target, in the form the client sent.
    pub target: RequestTarget,
    /// The version.
    pub version: Version,
    /// The fields, in order.
    pub headers: Headers,
}

/// A parsed response head.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResponseHead {
    /// The version.
    pub version: Version,
    /// The status code, 100 to 999.
    pub status: u16,
    /// The reason phrase, possibly empty; obs-text bytes are replaced by U+FFFD.
    pub reason: String,
    /// The fields, in order.
    pub headers: Headers,
}

/// Parses a request head from the front of `buf`.
///
/// Beyond syntax, this refuses what would let a client smuggle a request past us
/// ([`ParseError`] names each rule), including conflicting framing fields, so
/// [`RequestHead::body_framing`] only fails on a head changed after parsing.
pub fn parse_request(buf: &[u8], limits: &Limits) -> Result<Parsed<RequestHead>, ParseError> {
    let Some(layout) = scan_head(buf, limits, HeadKind::Request)? else {
        return Ok(Parsed::Partial);
    };
    let line = buf.get(layout.start_line.clone()).unwrap_or_default();
    let (method, target, version) = split_request_line(line)?;
    let method = Method::parse(method)?;
    let version = Version::parse(version).ok_or(ParseError::MalformedRequestLine)??;
    let target = RequestTarget::parse(&method, target)?;

    let mut slots = vec![httparse::EMPTY_HEADER; layout.fields];
    let mut request = httparse::Request::new(&mut slots);
    let status = request.parse(buf.get(..layout.len).unwrap_or_default())?;
    check_agreement(status, &layout)?;
    let headers = collect_headers(request.headers);

    let head = RequestHead {
        method,
        target,
        version,
        headers,
    };
    check_host(&head)?;
    framing_fields(&head.headers, head.version, MessageKind::Request)?;
    Ok(Parsed::Complete {
        head,
        len: layout.len,
    })
}

/// The method, target and version of a request line, unparsed.
type RequestLineParts<'a> = (&'a [u8], &'a [u8], &'a [u8]);

/// Splits `method SP request-target SP HTTP-version` at the first and last SP, so a space
/// inside the target is reported as an invalid target rather than a bad version.
fn split_request_line(line: &[u8]) -> Result<RequestLineParts<'_>, ParseError> {
    let first = line.iter().position(|&b| b == b' ');
    let last = line.iter().rposition(|&b| b == b' ');
    match (first, last) {
        (Some(first), Some(last)) if first < last => {
            let method = line.get(..first).unwrap_or_default();
            let target = line.get(first + 1..last).unwrap_or_default();
            let version = line.get(last + 1..).unwrap_or_default();
            Ok((method, target, version))
        }
        _ => Err(ParseError::MalformedRequestLine),
    }
}

/// Parses a response head from the front of `buf`.
///
/// Laxer than [`parse_request`] where RFC 9112 allows and real servers need it (bare LF line
/// ends, empty or obs-text reason phrases), but framing conflicts are refused all the same.
pub fn parse_response(buf: &[u8], limits: &Limits) -> Result<Parsed<ResponseHead>, ParseError> {
    let Some(layout) = scan_head(buf, limits, HeadKind::Response)? else {
        return Ok(Parsed::Partial);
    };
    let line = buf.get(layout.start_line.clone()).unwrap_or_default();
    let (version, status, reason) = parse_status_line(line)?;

    let mut slots = vec![httparse::EMPTY_HEADER; layout.fields];
    let mut response = httparse::Response::new(&mut slots);
    let parsed = response.parse(buf.get(..layout.len).unwrap_or_default())?;
    check_agreement(parsed, &layout)?;
    let headers = collect_headers(response.headers);

    framing_fields(&headers, version, MessageKind::Response)?;
    let head = ResponseHead {
        version,
        status,
        reason,
        headers,
    };
    Ok(Parsed::Complete {
        head,
        len: layout.len,
    })
}

/// status-line = HTTP-version SP status-code SP [ reason-phrase ] (RFC 9112 §4), also
/// accepting no SP before an empty reason, as deployed servers send.
fn parse_status_line(line: &[u8]) -> Result<(Version, u16, String), ParseError> {
    let mut parts = line.splitn(3, |&b| b == b' ');
    let version = parts.next().unwrap_or_default();
    let version = Version::parse(version).ok_or(ParseError::MalformedStatusLine)??;
    let status = match parts.next() {
        Some(code @ [b'1'..=b'9', b'0'..=b'9', b'0'..=b'9']) => code
            .iter()
            .fold(0u16, |acc, &digit| acc * 10 + u16::from(digit - b'0')),
        _ => return Err(ParseError::MalformedStatusLine),
    };
    let reason = parts.next().unwrap_or_default();
    // reason-phrase = *( HTAB / SP / VCHAR / obs-text ); NUL and CR were refused by the scan.
    if reason
        .iter()
        .any(|&b| b != b'\t' && (b < 0x20 || b == 0x7f))
    {
        return Err(ParseError::MalformedStatusLine);
    }
    Ok((
        version,
        status,
        String::from_utf8_lossy(reason).into_owned(),
    ))
}

/// httparse must find the head ending where the scan did; if the two parsers disagree about
/// a message boundary, that is the very thing smuggling exploits, so refuse.
fn check_agreement(status: httparse::Status<usize>, layout: &HeadLayout) -> Result<(), ParseError> {
    match status {
        httparse::Status::Complete(len) if len == layout.len => Ok(()),
        // Not reachable with the scan's checks; NewLine is httparse's error for line ends.
        _ => Err(ParseError::Malformed(httparse::Error::NewLine)),
    }
}

fn collect_headers(parsed: &[httparse::Header<'_>]) -> Headers {
    let mut headers = Headers::new();
    for field in parsed {
        let value = trim_ows(field.value).to_vec();
        headers.push(HeaderField {
            name: field.name.to_owned(),
            value,
        });
    }
    headers
}

/// RFC 9112 §3.2: a server MUST answer 400 to an HTTP/1.1 request without Host, with more
/// than one, or with an invalid one.
fn check_host(head: &RequestHead) -> Result<(), ParseError> {
    let mut hosts = head.headers.get_all("host");
    let Some(host) = hosts.next() else {
        return match head.version {
            Version::Http11 => Err(ParseError::MissingHost),
            Version::Http10 => Ok(()),
        };
    };
    if hosts.next().is_some() {
        return Err(ParseError::DuplicateHost);
    }
    // An empty Host is allowed when the target URI has no authority (RFC 9112 §3.2).
    if host.is_empty() {
        return Ok(());
    }
    let host = std::str::from_utf8(host).map_err(|_| ParseError::InvalidHost)?;
    parse_authority(host, PortRule::Default(0)).map_err(|_| ParseError::InvalidHost)?;
    Ok(())
}

/// Persistence per RFC 9112 §9.3: HTTP/1.1 persists unless `Connection: close`; HTTP/1.0 only
/// with `Connection: keep-alive`.
fn persistent(version: Version, headers: &Headers) -> bool {
    if headers.has_token("connection", "close") {
        return false;
    }
    match version {
        Version::Http11 => true,
        Version::Http10 => headers.has_token("connection", "keep-alive"),
    }
}

impl RequestHead {
    /// True when the client wants the connection kept open after this exchange.
    pub fn keep_alive(&self) -> bool {
        persistent(self.version, &self.headers)
    }

    /// True when the client waits for `100 Continue` before sending the body. HTTP/1.0
    /// requests are never waiting: RFC 9110 §10.1.1 says to ignore the expectation there.
    pub fn expects_continue(&self) -> bool {
        self.version == Version::Http11
            && self
                .headers
                .get("expect")
                .is_some_and(|value| value.eq_ignore_ascii_case(b"100-continue"))
    }

    /// The Host field value, if any.
    pub fn host(&self) -> Option<&[u8]> {
        self.headers.get("host")
    }
}

impl ResponseHead {
    /// True when the response lets the connection be reused, by version and Connection alone.
    /// A body framed [`UntilClose`](crate::BodyFraming::UntilClose) ends the connection
    /// whatever this says.
    pub fn keep_alive(&self) -> bool {
        persistent(self.version, &self.headers)
    }
}
