//! [`remove_hop_by_hop`]: the fields a proxy must not forward (RFC 9110 §7.6.1).

use crate::syntax::list_elements;
use crate::Headers;

/// Fields that are hop-by-hop whether or not Connection lists them.
const ALWAYS_HOP_BY_HOP: [&str; 6] = [
    "connection",
    "keep-alive",
    "proxy-connection",
    "te",
    "trailer",
    "upgrade",
];

/// Fields that Connection may not remove. A client listing `Content-Length` or
/// `Transfer-Encoding` in Connection would otherwise have the proxy forward a body without
/// its framing, so the upstream would read the body as the next request; Host is needed to
/// route.
const NEVER_REMOVED_BY_CONNECTION: [&str; 3] = ["content-length", "transfer-encoding", "host"];

/// Removes hop-by-hop fields: Connection and every name it lists, Keep-Alive,
/// Proxy-Connection, TE, Trailer, Upgrade, and Proxy-Authorization unless
/// `keep_proxy_authorization`.
///
/// Transfer-Encoding is not removed: the proxy decides framing. Names listed in Connection
/// never remove Content-Length, Transfer-Encoding or Host (a hop-by-hop abuse), nor
/// Proxy-Authorization when it is kept.
pub fn remove_hop_by_hop(headers: &mut Headers, keep_proxy_authorization: bool) {
    let listed: Vec<String> = headers
        .get_all("connection")
        .flat_map(list_elements)
        .filter_map(|name| std::str::from_utf8(name).ok())
        .filter(|name| !name.is_empty())
        .map(str::to_ascii_lowercase)
        .filter(|name| !NEVER_REMOVED_BY_CONNECTION.contains(&name.as_str()))
        .filter(|name| !(keep_proxy_authorization && name == "proxy-authorization"))
        .collect();
    headers.retain(|field| {
        let name = field.name.to_ascii_lowercase();
        let hop = ALWAYS_HOP_BY_HOP.contains(&name.as_str())
            || listed.contains(&name)
            || (!keep_proxy_authorization && name == "proxy-authorization");
        !hop
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(headers: &Headers) -> Vec<&str> {
        headers.iter().map(|f| f.name.as_str()).collect()
    }

    fn sample() -> Headers {
        let mut h = Headers::new();
        for (name, value) in [
            ("Host", "h"),
            (
                "Connection",
                "keep-alive, X-Secret, content-length, Transfer-Encoding, host",
            ),
            ("Keep-Alive", "timeout=5"),
            ("Proxy-Connection", "keep-alive"),
            ("TE", "trailers"),
            ("Trailer", "X-T"),
            ("Upgrade", "websocket"),
            ("Proxy-Authorization", "Basic eA=="),
            ("x-secret", "1"),
            ("Content-Length", "3"),
            ("Transfer-Encoding", "chunked"),
            ("Accept", "*/*"),
        ] {
            h.append(name, value);
        }
        h
    }

    #[test]
    fn removes_hop_by_hop_and_listed_fields() {
        let mut h = sample();
        remove_hop_by_hop(&mut h, false);
        assert_eq!(
            names(&h),
            ["Host", "Content-Length", "Transfer-Encoding", "Accept"]
        );
    }

    #[test]
    fn keeps_proxy_authorization_when_asked() {
        let mut h = sample();
        h.append("Connection", "Proxy-Authorization");
        remove_hop_by_hop(&mut h, true);
        assert!(h.contains("proxy-authorization"));
        assert!(!h.contains("x-secret"));
    }
}
