//! [`RequestTarget`] and [`Authority`]: the four forms of request-target (RFC 9112 §3.2).

use std::fmt;
use std::net::Ipv6Addr;

use crate::{Method, ParseError};

/// Port of `http` when an absolute-form target gives none (RFC 9110 §4.2.1).
const HTTP_DEFAULT_PORT: u16 = 80;

/// A host and port, as in a CONNECT target or an absolute-form target.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Authority {
    /// Host as received (compare case-insensitively): a name, an IPv4 address, or an IPv6
    /// address without its brackets.
    pub host: String,
    /// Port, explicit or the scheme's default.
    pub port: u16,
}

impl Authority {
    /// The host as written in a URI: IPv6 addresses get their brackets back.
    pub fn host_for_uri(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]", self.host)
        } else {
            self.host.clone()
        }
    }
}

impl fmt::Display for Authority {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.host_for_uri(), self.port)
    }
}

/// The request-target, parsed into the form the request used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestTarget {
    /// origin-form, `/path?query`: the usual form towards an origin or a reverse proxy.
    Origin(String),
    /// absolute-form, `http://host[:port]/path?query`: what clients send a forward proxy.
    /// Only `http` is accepted; the scheme is stored lowercase, the port defaults to 80 and
    /// an empty path becomes `/`.
    Absolute {
        /// Always `http`.
        scheme: String,
        /// Host and port of the origin.
        authority: Authority,
        /// Path and query, starting with `/`.
        path_and_query: String,
    },
    /// authority-form, `host:port` with the port required: CONNECT only.
    Authority(Authority),
    /// asterisk-form, `*`: OPTIONS only.
    Asterisk,
}

impl RequestTarget {
    /// Parses the target of a request with this method, refusing forms the method can't use.
    pub fn parse(method: &Method, raw: &[u8]) -> Result<Self, ParseError> {
        let invalid = |reason| ParseError::InvalidTarget { reason };
        // RFC 3986 URIs are ASCII without controls or space; `#` starts a fragment, which a
        // request-target never carries (RFC 9112 §3.2).
        if raw.is_empty() {
            return Err(invalid("empty"));
        }
        if !raw.iter().all(|b| (0x21..=0x7e).contains(b)) {
            return Err(invalid("control character, space or non-ASCII byte"));
        }
        if raw.contains(&b'#') {
            return Err(invalid("fragment"));
        }
        // Checked ASCII above, so this is infallible; no unwrap all the same.
        let text = std::str::from_utf8(raw).map_err(|_| invalid("non-ASCII byte"))?;

        if *method == Method::Connect {
            return parse_authority(text, PortRule::Required)
                .map(RequestTarget::Authority)
                .map_err(|_| invalid("CONNECT needs authority-form host:port"));
        }
        if text == "*" {
            return match method {
                Method::Options => Ok(RequestTarget::Asterisk),
                _ => Err(invalid("asterisk-form is for OPTIONS only")),
            };
        }
        if text.starts_with('/') {
            return Ok(RequestTarget::Origin(text.to_owned()));
        }
        if let Some((scheme, rest)) = split_scheme(text) {
            if let Some(rest) = rest.strip_prefix("//") {
                if !scheme.eq_ignore_ascii_case("http") {
                    return Err(ParseError::UnsupportedScheme {
                        scheme: scheme.to_owned(),
                    });
                }
                return parse_absolute(rest);
            }
        }
        if parse_authority(text, PortRule::Required).is_ok() {
            return Err(invalid("authority-form is for CONNECT only"));
        }
        Err(invalid(
            "not in origin, absolute, authority or asterisk form",
        ))
    }
}

impl fmt::Display for RequestTarget {
    /// Writes the target in the form it was received; absolute-form leaves out port 80.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestTarget::Origin(path) => f.write_str(path),
            RequestTarget::Absolute {
                scheme,
                authority,
                path_and_query,
            } => {
                write!(f, "{scheme}://{}", authority.host_for_uri())?;
                if authority.port != HTTP_DEFAULT_PORT {
                    write!(f, ":{}", authority.port)?;
                }
                f.write_str(path_and_query)
            }
            RequestTarget::Authority(authority) => authority.fmt(f),
            RequestTarget::Asterisk => f.write_str("*"),
        }
    }
}

/// Whether an authority must carry a port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PortRule {
    /// CONNECT: `host:port`, port required (RFC 9110 §9.3.6).
    Required,
    /// absolute-form and Host: the port may be left out (or empty), giving this default.
    Default(u16),
}

/// Splits `scheme:rest` when the text starts with a syntactically valid scheme (RFC 3986 §3.1).
fn split_scheme(text: &str) -> Option<(&str, &str)> {
    let (scheme, rest) = text.split_once(':')?;
    let mut chars = scheme.bytes();
    let first_is_alpha = chars.next().is_some_and(|b| b.is_ascii_alphabetic());
    let rest_valid = chars.all(|b| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'-' | b'.'));
    (first_is_alpha && rest_valid).then_some((scheme, rest))
}

/// Parses what follows `http://`: authority, then path-abempty and query.
fn parse_absolute(rest: &str) -> Result<RequestTarget, ParseError> {
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, path_and_query) = rest.split_at(end);
    let authority = parse_authority(authority, PortRule::Default(HTTP_DEFAULT_PORT))
        .map_err(|reason| ParseError::InvalidTarget { reason })?;
    let path_and_query = if path_and_query.starts_with('/') {
        path_and_query.to_owned()
    } else {
        // Empty path (RFC 9112 §3.2.2 says an empty path is sent as "/"), maybe with a query.
        format!("/{path_and_query}")
    };
    Ok(RequestTarget::Absolute {
        scheme: "http".to_owned(),
        authority,
        path_and_query,
    })
}

/// Parses `host[:port]` (RFC 3986 §3.2 without userinfo, which RFC 9110 §4.2.4 deprecates).
pub(crate) fn parse_authority(text: &str, rule: PortRule) -> Result<Authority, &'static str> {
    if text.contains('@') {
        return Err("userinfo in authority");
    }
    let (host, port) = if let Some(bracketed) = text.strip_prefix('[') {
        let (inner, after) = bracketed.split_once(']').ok_or("unclosed IPv6 bracket")?;
        inner
            .parse::<Ipv6Addr>()
            .map_err(|_| "invalid IPv6 address")?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':').ok_or("junk after IPv6 address")?),
        };
        (inner, port)
    } else {
        match text.split_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() {
        return Err("empty host");
    }
    if !text.starts_with('[') && !is_reg_name(host) {
        return Err("invalid host");
    }
    let port = match (port, rule) {
        (None | Some(""), PortRule::Required) => return Err("missing port"),
        (None | Some(""), PortRule::Default(default)) => default,
        (Some(digits), _) => parse_port(digits)?,
    };
    Ok(Authority {
        host: host.to_owned(),
        port,
    })
}

/// reg-name (RFC 3986 §3.2.2): unreserved, pct-encoded and sub-delims. Also covers IPv4.
fn is_reg_name(host: &str) -> bool {
    let bytes = host.as_bytes();
    let mut i = 0;
    while let Some(&b) = bytes.get(i) {
        if b == b'%' {
            let hex = bytes.get(i + 1..i + 3);
            if !hex.is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit)) {
                return false;
            }
            i += 3;
            continue;
        }
        let unreserved = b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
        let sub_delim = matches!(b, b'!' | b'$' | b'&' | b'\'' | b'(' | b')' | b'*' | b'+')
            || matches!(b, b',' | b';' | b'=');
        if !unreserved && !sub_delim {
            return false;
        }
        i += 1;
    }
    true
}

/// A port: 1 to 5 digits, 1 to 65535. Port 0 can't be connected to.
fn parse_port(digits: &str) -> Result<u16, &'static str> {
    if digits.is_empty() || digits.len() > 5 || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return Err("invalid port");
    }
    match digits.parse::<u16>() {
        Ok(0) | Err(_) => Err("port out of range"),
        Ok(port) => Ok(port),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(method: Method, raw: &str) -> Result<RequestTarget, ParseError> {
        RequestTarget::parse(&method, raw.as_bytes())
    }

    fn authority(host: &str, port: u16) -> Authority {
        Authority {
            host: host.to_owned(),
            port,
        }
    }

    #[test]
    fn accepts_the_four_forms() {
        let cases = [
            (
                Method::Get,
                "/a/b?q=1",
                RequestTarget::Origin("/a/b?q=1".into()),
            ),
            (Method::Options, "*", RequestTarget::Asterisk),
            (
                Method::Connect,
                "example.com:443",
                RequestTarget::Authority(authority("example.com", 443)),
            ),
            (
                Method::Connect,
                "[::1]:8443",
                RequestTarget::Authority(authority("::1", 8443)),
            ),
            (
                Method::Get,
                "http://example.com",
                RequestTarget::Absolute {
                    scheme: "http".into(),
                    authority: authority("example.com", 80),
                    path_and_query: "/".into(),
                },
            ),
            (
                Method::Get,
                "HTTP://h:8080?x",
                RequestTarget::Absolute {
                    scheme: "http".into(),
                    authority: authority("h", 8080),
                    path_and_query: "/?x".into(),
                },
            ),
            (
                Method::Get,
                "http://[2001:db8::1]:81/p",
                RequestTarget::Absolute {
                    scheme: "http".into(),
                    authority: authority("2001:db8::1", 81),
                    path_and_query: "/p".into(),
                },
            ),
            (
                Method::Get,
                "http://h:/p",
                RequestTarget::Absolute {
                    scheme: "http".into(),
                    authority: authority("h", 80),
                    path_and_query: "/p".into(),
                },
            ),
        ];
        for (method, raw, expected) in cases {
            assert_eq!(parse(method, raw), Ok(expected), "{raw}");
        }
    }

    #[test]
    fn rejects_invalid_targets() {
        let cases = [
            (Method::Get, "example.com:80"),    // authority-form for non-CONNECT
            (Method::Connect, "/path"),         // CONNECT with origin-form
            (Method::Connect, "example.com"),   // CONNECT without port
            (Method::Connect, "example.com:0"), // port 0
            (Method::Connect, "example.com:70000"),
            (Method::Connect, "http://example.com:443/"),
            (Method::Get, "*"),       // asterisk-form for non-OPTIONS
            (Method::Get, "/a\x01b"), // control character
            (Method::Get, "/a\x7fb"),
            (Method::Get, "/caf\u{e9}"), // non-ASCII
            (Method::Get, "/a#frag"),
            (Method::Get, "relative/path"),
            (Method::Get, "http://user@h/"), // userinfo
            (Method::Get, "http:///p"),      // empty host
            (Method::Get, "http://[::1/p"),
            (Method::Get, "http://h:8x/"),
            (Method::Get, ""),
        ];
        for (method, raw) in cases {
            let result = parse(method, raw);
            assert!(
                matches!(result, Err(ParseError::InvalidTarget { .. })),
                "{raw}: {result:?}"
            );
        }
    }

    #[test]
    fn rejects_https_absolute_form() {
        assert_eq!(
            parse(Method::Get, "https://example.com/"),
            Err(ParseError::UnsupportedScheme {
                scheme: "https".into()
            })
        );
    }

    #[test]
    fn display_restores_brackets_and_drops_default_port() {
        assert_eq!(authority("::1", 443).to_string(), "[::1]:443");
        let target = parse(Method::Get, "http://[::1]:80/x").unwrap();
        assert_eq!(target.to_string(), "http://[::1]/x");
        let target = parse(Method::Get, "http://h:8080/x?y").unwrap();
        assert_eq!(target.to_string(), "http://h:8080/x?y");
    }
}
