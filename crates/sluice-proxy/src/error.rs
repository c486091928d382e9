//! What can go wrong in one exchange, who caused it, and what the client is told.
//!
//! One function ([`ProxyError::status`]) maps an error to the status we answer with, and one
//! ([`ProxyError::termination`]) to the access log's termination code, so the response body,
//! the log line and the counters agree.

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use sluice_http::ParseError;

/// Which side of the proxy ended an exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    /// The client closed, failed or sent something we refused.
    Client,
    /// The upstream closed, failed or sent something we refused.
    Upstream,
    /// The proxy's own policy (ACL, port) or limits refused it.
    Proxy,
}

/// The phase an exchange was in when it ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Reading the client's request head.
    Request,
    /// Connecting to (or resolving) the upstream.
    Connect,
    /// Sending the request and waiting for the response head.
    Headers,
    /// Moving a request or response body.
    Data,
    /// Inside a CONNECT tunnel.
    Tunnel,
}

/// How an exchange ended, as two characters in the access log (after HAProxy's "termination
/// state"): who ended it — `C` client, `S` upstream (server), `P` proxy, lowercase for a timeout,
/// `-` for a normal end — and in which phase: `R` request, `C` connect, `H` headers, `D` data,
/// `T` tunnel, `-` none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Termination {
    /// Who ended it; `None` for a normal completion.
    pub side: Option<Side>,
    /// Whether a timeout ended it.
    pub timeout: bool,
    /// The phase; `None` for a normal completion.
    pub phase: Option<Phase>,
}

impl Termination {
    /// A normal end.
    pub const NORMAL: Termination = Termination {
        side: None,
        timeout: false,
        phase: None,
    };

    /// An end caused by `side` in `phase`.
    pub fn by(side: Side, phase: Phase) -> Self {
        Termination {
            side: Some(side),
            timeout: false,
            phase: Some(phase),
        }
    }

    /// An end caused by a timeout waiting for `side` in `phase`.
    pub fn timed_out(side: Side, phase: Phase) -> Self {
        Termination {
            side: Some(side),
            timeout: true,
            phase: Some(phase),
        }
    }
}

impl fmt::Display for Termination {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let side = match self.side {
            None => '-',
            Some(Side::Client) => 'C',
            Some(Side::Upstream) => 'S',
            Some(Side::Proxy) => 'P',
        };
        let side = if self.timeout {
            side.to_ascii_lowercase()
        } else {
            side
        };
        let phase = match self.phase {
            None => '-',
            Some(Phase::Request) => 'R',
            Some(Phase::Connect) => 'C',
            Some(Phase::Headers) => 'H',
            Some(Phase::Data) => 'D',
            Some(Phase::Tunnel) => 'T',
        };
        write!(f, "{side}{phase}")
    }
}

/// Why the proxy answered an exchange itself instead of relaying the upstream's response.
#[derive(Debug, thiserror::Error)]
pub enum ProxyError {
    /// The request head broke HTTP/1.1's rules (the parser says which).
    #[error("invalid request: {0}")]
    BadRequest(#[from] ParseError),
    /// The client's head did not arrive in time (`timeouts.client_header`).
    #[error("request head not received within {0:?}")]
    RequestHeadTimeout(Duration),
    /// The client closed its side in the middle of a request head.
    #[error("client closed the connection in the middle of a request head")]
    IncompleteHead,
    /// The client's address is outside `access.allow`.
    #[error("client address {0} is not in access.allow")]
    ClientNotAllowed(IpAddr),
    /// CONNECT to a port outside `access.connect_ports`.
    #[error("CONNECT to port {0} is not allowed (access.connect_ports)")]
    ConnectPortNotAllowed(u16),
    /// A forward listener received a request without a target host.
    #[error("this is a forward proxy: the request target must be an absolute http:// URI")]
    NotAbsoluteForm,
    /// A reverse listener received CONNECT.
    #[error("CONNECT is not served on a reverse-proxy listener")]
    ConnectOnReverse,
    /// Name resolution failed.
    #[error("cannot resolve {host}: {source}")]
    Resolve {
        /// The name.
        host: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Connecting to the upstream failed.
    #[error("cannot connect to upstream {addr}: {source}")]
    Connect {
        /// The address tried last.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Connecting took longer than `timeouts.upstream_connect`.
    #[error("upstream {addr} did not accept the connection within {timeout:?}")]
    ConnectTimeout {
        /// The address.
        addr: SocketAddr,
        /// The limit.
        timeout: Duration,
    },
    /// Sending the request to the upstream failed.
    #[error("cannot send the request to upstream {addr}: {source}")]
    UpstreamWrite {
        /// The upstream.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// The upstream closed or failed before a complete response head.
    #[error("upstream {addr} closed the connection before a response head")]
    UpstreamClosed {
        /// The upstream.
        addr: SocketAddr,
    },
    /// The upstream's response head is not valid HTTP/1.1.
    #[error("upstream {addr} sent an invalid response: {source}")]
    BadResponse {
        /// The upstream.
        addr: SocketAddr,
        /// What was wrong.
        #[source]
        source: ParseError,
    },
    /// No response head within `timeouts.upstream_first_byte`.
    #[error("upstream {addr} did not answer within {timeout:?}")]
    FirstByteTimeout {
        /// The upstream.
        addr: SocketAddr,
        /// The limit.
        timeout: Duration,
    },
    /// The client's request body ended early or broke its framing.
    #[error("request body from the client ended early or was malformed")]
    RequestBody,
    /// PURGE or STATS from a client outside `cache.purge_allow`.
    #[error("client address {0} may not send PURGE or STATS (cache.purge_allow)")]
    PurgeNotAllowed(IpAddr),
    /// PURGE or STATS while `cache.enabled = false`.
    #[error("PURGE and STATS need the cache, which is off (cache.enabled = false)")]
    PurgeWithoutCache,
    /// The client asked for only-if-cached and nothing usable is stored (RFC 9111 §5.2.1.7).
    #[error("only-if-cached: no usable stored response")]
    NotCached,
    /// A response the proxy filled the cache with, to answer a Range or conditional request
    /// from it, ended early or did not fit.
    #[error("upstream {addr} response could not be stored to answer the request: {reason}")]
    FillFailed {
        /// The upstream.
        addr: SocketAddr,
        /// Why.
        reason: String,
    },
}

impl ProxyError {
    /// The status the client is answered with.
    pub fn status(&self) -> u16 {
        match self {
            ProxyError::BadRequest(e) => e.status(),
            ProxyError::RequestHeadTimeout(_) => 408,
            ProxyError::ClientNotAllowed(_)
            | ProxyError::ConnectPortNotAllowed(_)
            | ProxyError::PurgeNotAllowed(_) => 403,
            ProxyError::PurgeWithoutCache => 405,
            ProxyError::NotCached => 504,
            ProxyError::FillFailed { .. } => 502,
            ProxyError::NotAbsoluteForm | ProxyError::RequestBody | ProxyError::IncompleteHead => {
                400
            }
            ProxyError::ConnectOnReverse => 405,
            ProxyError::Resolve { .. }
            | ProxyError::Connect { .. }
            | ProxyError::UpstreamWrite { .. }
            | ProxyError::UpstreamClosed { .. }
            | ProxyError::BadResponse { .. } => 502,
            ProxyError::ConnectTimeout { .. } | ProxyError::FirstByteTimeout { .. } => 504,
        }
    }

    /// The access log's termination code.
    pub fn termination(&self) -> Termination {
        match self {
            ProxyError::BadRequest(_) | ProxyError::NotAbsoluteForm => {
                Termination::by(Side::Client, Phase::Request)
            }
            ProxyError::RequestBody => Termination::by(Side::Client, Phase::Data),
            ProxyError::IncompleteHead => Termination::by(Side::Client, Phase::Request),
            ProxyError::RequestHeadTimeout(_) => {
                Termination::timed_out(Side::Client, Phase::Request)
            }
            ProxyError::ClientNotAllowed(_)
            | ProxyError::ConnectPortNotAllowed(_)
            | ProxyError::ConnectOnReverse
            | ProxyError::PurgeNotAllowed(_)
            | ProxyError::PurgeWithoutCache
            | ProxyError::NotCached => Termination::by(Side::Proxy, Phase::Request),
            ProxyError::FillFailed { .. } => Termination::by(Side::Upstream, Phase::Data),
            ProxyError::Resolve { .. } | ProxyError::Connect { .. } => {
                Termination::by(Side::Upstream, Phase::Connect)
            }
            ProxyError::ConnectTimeout { .. } => {
                Termination::timed_out(Side::Upstream, Phase::Connect)
            }
            ProxyError::UpstreamWrite { .. }
            | ProxyError::UpstreamClosed { .. }
            | ProxyError::BadResponse { .. } => Termination::by(Side::Upstream, Phase::Headers),
            ProxyError::FirstByteTimeout { .. } => {
                Termination::timed_out(Side::Upstream, Phase::Headers)
            }
        }
    }

    /// The error response: a short text body saying why, and `Connection: close`.
    pub fn response(&self) -> Vec<u8> {
        error_response(self.status(), &self.to_string())
    }
}

/// A complete response of our own: status line, a one-line text body, and `Connection: close`
/// (after an error we never trust the rest of the client's stream).
pub fn error_response(status: u16, message: &str) -> Vec<u8> {
    let body = format!("{status} {}: {message}\n", reason_phrase(status));
    format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        reason_phrase(status),
        body.len()
    )
    .into_bytes()
}

/// The reason phrase of the statuses the proxy itself produces.
pub fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        403 => "Forbidden",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        414 => "URI Too Long",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        505 => "HTTP Version Not Supported",
        _ => "Error",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn termination_codes_read_as_documented() {
        assert_eq!(Termination::NORMAL.to_string(), "--");
        assert_eq!(Termination::by(Side::Client, Phase::Data).to_string(), "CD");
        assert_eq!(
            Termination::timed_out(Side::Upstream, Phase::Headers).to_string(),
            "sH"
        );
        assert_eq!(
            Termination::by(Side::Proxy, Phase::Request).to_string(),
            "PR"
        );
    }

    #[test]
    fn error_response_is_complete_and_closes() {
        let response = String::from_utf8(error_response(403, "no")).unwrap();
        assert!(response.starts_with("HTTP/1.1 403 Forbidden\r\n"));
        assert!(response.contains("Connection: close\r\n"));
        let (head, body) = response.split_once("\r\n\r\n").unwrap();
        assert!(head.contains(&format!("Content-Length: {}", body.len())));
    }

    #[test]
    fn upstream_failures_map_to_gateway_statuses() {
        let addr: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let refused = ProxyError::Connect {
            addr,
            source: io::ErrorKind::ConnectionRefused.into(),
        };
        assert_eq!(refused.status(), 502);
        let slow = ProxyError::FirstByteTimeout {
            addr,
            timeout: Duration::from_secs(1),
        };
        assert_eq!(slow.status(), 504);
        assert_eq!(ProxyError::ConnectPortNotAllowed(25).status(), 403);
    }
}
