//! [`Method`]: the request method (RFC 9110 §9).

use std::fmt;

use crate::syntax::is_token;
use crate::ParseError;

/// A request method. Methods are case-sensitive (RFC 9110 §9.1): `get` is [`Method::Other`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Method {
    /// GET
    Get,
    /// HEAD: the response has no body whatever its framing fields say.
    Head,
    /// POST
    Post,
    /// PUT
    Put,
    /// DELETE
    Delete,
    /// CONNECT: target in authority-form; a 2xx response turns the connection into a tunnel.
    Connect,
    /// OPTIONS: the only method that may use the asterisk-form target.
    Options,
    /// TRACE
    Trace,
    /// PATCH (RFC 5789)
    Patch,
    /// Any other token, as received.
    Other(String),
}

impl Method {
    /// Parses a method token; anything but a non-empty token is [`ParseError::InvalidMethod`].
    pub fn parse(token: &[u8]) -> Result<Self, ParseError> {
        Ok(match token {
            b"GET" => Method::Get,
            b"HEAD" => Method::Head,
            b"POST" => Method::Post,
            b"PUT" => Method::Put,
            b"DELETE" => Method::Delete,
            b"CONNECT" => Method::Connect,
            b"OPTIONS" => Method::Options,
            b"TRACE" => Method::Trace,
            b"PATCH" => Method::Patch,
            other if is_token(other) => {
                // A token is ASCII, so this conversion cannot fail; map it anyway, no unwrap.
                let name = std::str::from_utf8(other).map_err(|_| ParseError::InvalidMethod)?;
                Method::Other(name.to_owned())
            }
            _ => return Err(ParseError::InvalidMethod),
        })
    }

    /// The method as sent on the wire.
    pub fn as_str(&self) -> &str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Connect => "CONNECT",
            Method::Options => "OPTIONS",
            Method::Trace => "TRACE",
            Method::Patch => "PATCH",
            Method::Other(name) => name,
        }
    }

    /// Safe methods (RFC 9110 §9.2.1): GET, HEAD, OPTIONS, TRACE.
    pub fn is_safe(&self) -> bool {
        matches!(
            self,
            Method::Get | Method::Head | Method::Options | Method::Trace
        )
    }

    /// Idempotent methods (RFC 9110 §9.2.2): the safe ones plus PUT and DELETE. A request with
    /// one of these may be retried on a new upstream connection.
    pub fn is_idempotent(&self) -> bool {
        self.is_safe() || matches!(self, Method::Put | Method::Delete)
    }
}

impl fmt::Display for Method {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_known_and_other_methods() {
        assert_eq!(Method::parse(b"GET"), Ok(Method::Get));
        assert_eq!(Method::parse(b"get"), Ok(Method::Other("get".into())));
        assert_eq!(
            Method::parse(b"PROPFIND"),
            Ok(Method::Other("PROPFIND".into()))
        );
    }

    #[test]
    fn rejects_invalid_method_token() {
        for bad in [&b""[..], b"GE T", b"GET(", b"G\x00T", b"G\xc3\xa9T"] {
            assert_eq!(
                Method::parse(bad),
                Err(ParseError::InvalidMethod),
                "{bad:?}"
            );
        }
    }
}
