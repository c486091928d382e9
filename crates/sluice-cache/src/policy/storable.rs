//! Whether a response may be stored (RFC 9111 §3), and what of its head is kept (§3.1).

use sluice_http::{remove_hop_by_hop, Method, RequestHead, ResponseHead};

use crate::directives::{RequestDirectives, ResponseDirectives};
use crate::key::{Variant, VaryOutcome};

/// Status codes heuristically cacheable (RFC 9110 §15.1), minus 206: we store only whole
/// representations.
const HEURISTICALLY_CACHEABLE: [u16; 11] = [200, 203, 204, 300, 301, 308, 404, 405, 410, 414, 501];

/// Whether a response may be stored, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Storability {
    /// Store it under this variant.
    Storable(Variant),
    /// Do not store it; splice it without a copy.
    NotStorable(NotStorableReason),
}

/// Why a response is not stored; each names the rule, for logs and counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NotStorableReason {
    /// Only GET responses are stored (HEAD is answered from them).
    Method,
    /// 1xx, 206 and 304 are not stored (§3: a cache stores final, complete responses;
    /// 304 only refreshes, §4.3.4).
    Status,
    /// `no-store` in the request or the response (§5.2.1.5, §5.2.2.5).
    NoStore,
    /// `private`: a shared cache must not store it (§5.2.2.7).
    Private,
    /// The request had Authorization and the response none of must-revalidate, public or
    /// s-maxage (§3.5).
    Authorization,
    /// No explicit freshness, and the status is not heuristically cacheable nor marked
    /// public (§3, last bullet).
    NoFreshnessInformation,
    /// `Vary: *` always fails to match (§4.1), so storing it would only waste memory.
    VaryStar,
}

/// Decides whether the response to `request` may be stored by a shared cache (RFC 9111 §3).
pub fn storability(request: &RequestHead, response: &ResponseHead) -> Storability {
    let req = RequestDirectives::parse(&request.headers);
    let res = ResponseDirectives::parse(&response.headers);
    let reason = if request.method != Method::Get {
        Some(NotStorableReason::Method)
    } else if response.status < 200 || matches!(response.status, 206 | 304) {
        Some(NotStorableReason::Status)
    } else if req.no_store || res.no_store {
        Some(NotStorableReason::NoStore)
    } else if res.private {
        Some(NotStorableReason::Private)
    } else if request.headers.contains("authorization")
        && !(res.must_revalidate || res.public || res.s_maxage.is_some())
    {
        Some(NotStorableReason::Authorization)
    } else if !(res.public
        || res.s_maxage.is_some()
        || res.max_age.is_some()
        || response.headers.contains("expires")
        || heuristically_cacheable(response.status))
    {
        Some(NotStorableReason::NoFreshnessInformation)
    } else {
        None
    };
    if let Some(reason) = reason {
        return Storability::NotStorable(reason);
    }
    match Variant::of(&response.headers, &request.headers) {
        VaryOutcome::Variant(variant) => Storability::Storable(variant),
        VaryOutcome::NeverMatches => Storability::NotStorable(NotStorableReason::VaryStar),
    }
}

/// True for status codes a cache may give a heuristic lifetime (RFC 9110 §15.1).
pub fn heuristically_cacheable(status: u16) -> bool {
    HEURISTICALLY_CACHEABLE.contains(&status)
}

/// The head to store: hop-by-hop fields, Proxy-Authenticate, Proxy-Authentication-Info and
/// Proxy-Authorization removed (RFC 9111 §3.1), and Transfer-Encoding, since the stored body
/// is already decoded and served with a Content-Length.
pub fn storable_head(response: &ResponseHead) -> ResponseHead {
    let mut head = response.clone();
    remove_hop_by_hop(&mut head.headers, false);
    for name in [
        "proxy-authenticate",
        "proxy-authentication-info",
        "transfer-encoding",
    ] {
        head.headers.remove(name);
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{request, response};

    fn verdict(req: &str, res: &str) -> Result<(), NotStorableReason> {
        match storability(&request(req), &response(res)) {
            Storability::Storable(_) => Ok(()),
            Storability::NotStorable(reason) => Err(reason),
        }
    }

    const GET: &str = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";

    #[test]
    fn stores_plain_200() {
        assert_eq!(verdict(GET, "HTTP/1.1 200 OK\r\n\r\n"), Ok(()));
    }

    #[test]
    fn refuses_non_get_methods() {
        let post = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";
        let head = "HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n";
        let ok = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n\r\n";
        assert_eq!(verdict(post, ok), Err(NotStorableReason::Method));
        assert_eq!(verdict(head, ok), Err(NotStorableReason::Method));
    }

    #[test]
    fn refuses_partial_and_not_modified() {
        for status in ["206 Partial", "304 Not Modified", "101 Switching"] {
            let res = format!("HTTP/1.1 {status}\r\nCache-Control: max-age=60\r\n\r\n");
            assert_eq!(
                verdict(GET, &res),
                Err(NotStorableReason::Status),
                "{status}"
            );
        }
    }

    #[test]
    fn refuses_no_store_in_request_or_response() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: no-store\r\n\r\n";
        assert_eq!(
            verdict(req, "HTTP/1.1 200 OK\r\n\r\n"),
            Err(NotStorableReason::NoStore)
        );
        let res = "HTTP/1.1 200 OK\r\nCache-Control: no-store, max-age=9\r\n\r\n";
        assert_eq!(verdict(GET, res), Err(NotStorableReason::NoStore));
    }

    #[test]
    fn refuses_private_in_shared_cache() {
        let res = "HTTP/1.1 200 OK\r\nCache-Control: private, max-age=60\r\n\r\n";
        assert_eq!(verdict(GET, res), Err(NotStorableReason::Private));
    }

    #[test]
    fn authorization_needs_public_s_maxage_or_must_revalidate() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: Basic eA==\r\n\r\n";
        let plain = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n\r\n";
        assert_eq!(verdict(req, plain), Err(NotStorableReason::Authorization));
        for cc in ["public", "s-maxage=5", "must-revalidate, max-age=5"] {
            let res = format!("HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\n\r\n");
            assert_eq!(verdict(req, &res), Ok(()), "{cc}");
        }
    }

    #[test]
    fn non_heuristic_status_needs_explicit_freshness() {
        assert_eq!(
            verdict(GET, "HTTP/1.1 302 Found\r\n\r\n"),
            Err(NotStorableReason::NoFreshnessInformation)
        );
        assert_eq!(
            verdict(
                GET,
                "HTTP/1.1 302 Found\r\nCache-Control: max-age=5\r\n\r\n"
            ),
            Ok(())
        );
        assert_eq!(
            verdict(
                GET,
                "HTTP/1.1 500 Oops\r\nExpires: Thu, 01 Jan 2099 00:00:00 GMT\r\n\r\n"
            ),
            Ok(())
        );
        assert_eq!(verdict(GET, "HTTP/1.1 404 Not Found\r\n\r\n"), Ok(()));
    }

    #[test]
    fn no_cache_responses_are_storable() {
        let res = "HTTP/1.1 200 OK\r\nCache-Control: no-cache\r\n\r\n";
        assert_eq!(verdict(GET, res), Ok(()));
    }

    #[test]
    fn refuses_vary_star() {
        let res = "HTTP/1.1 200 OK\r\nVary: *\r\n\r\n";
        assert_eq!(verdict(GET, res), Err(NotStorableReason::VaryStar));
    }

    #[test]
    fn stored_head_drops_hop_by_hop_and_proxy_fields() {
        let res = response(
            "HTTP/1.1 200 OK\r\nConnection: close, X-Hop\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\n\
             Proxy-Authenticate: Basic\r\nTransfer-Encoding: chunked\r\nETag: \"a\"\r\n\r\n",
        );
        let head = storable_head(&res);
        let names: Vec<&str> = head.headers.iter().map(|f| f.name.as_str()).collect();
        assert_eq!(names, ["ETag"]);
    }
}
