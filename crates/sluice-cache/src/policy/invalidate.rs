//! Invalidation after unsafe methods (RFC 9111 §4.4).

use sluice_http::{RequestHead, ResponseHead};

use crate::CacheKey;

/// The keys to drop after `response` answered `request`: for an unsafe method with a 2xx or
/// 3xx answer, the target URI, and the Location and Content-Location URIs when they share its
/// origin (RFC 9111 §4.4; other origins are left alone so one site cannot purge another's
/// entries). Drop every variant of each key.
pub fn invalidated_keys(request: &RequestHead, response: &ResponseHead) -> Vec<CacheKey> {
    if request.method.is_safe() || !(200..400).contains(&response.status) {
        return Vec::new();
    }
    let Ok(target) = CacheKey::from_request(request) else {
        return Vec::new();
    };
    let mut keys = vec![target.clone()];
    for name in ["location", "content-location"] {
        let Some(value) = response.headers.get(name) else {
            continue;
        };
        if let Some(key) = target.resolve(value) {
            if key.origin() == target.origin() && !keys.contains(&key) {
                keys.push(key);
            }
        }
    }
    keys
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{request, response};

    fn keys(req: &str, res: &str) -> Vec<String> {
        invalidated_keys(&request(req), &response(res))
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    const POST: &str = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n";

    #[test]
    fn unsafe_method_invalidates_target() {
        assert_eq!(keys(POST, "HTTP/1.1 200 OK\r\n\r\n"), ["http://h/a"]);
        let delete = "DELETE /a HTTP/1.1\r\nHost: h\r\n\r\n";
        assert_eq!(
            keys(delete, "HTTP/1.1 204 No Content\r\n\r\n"),
            ["http://h/a"]
        );
    }

    #[test]
    fn safe_methods_invalidate_nothing() {
        assert!(keys(
            "GET /a HTTP/1.1\r\nHost: h\r\n\r\n",
            "HTTP/1.1 200 OK\r\n\r\n"
        )
        .is_empty());
    }

    #[test]
    fn error_responses_invalidate_nothing() {
        assert!(keys(POST, "HTTP/1.1 500 Oops\r\n\r\n").is_empty());
    }

    #[test]
    fn same_origin_location_and_content_location_are_invalidated() {
        let res =
            "HTTP/1.1 201 Created\r\nLocation: /a/1\r\nContent-Location: http://H/a/1?v\r\n\r\n";
        assert_eq!(
            keys(POST, res),
            ["http://h/a", "http://h/a/1", "http://h/a/1?v"]
        );
    }

    #[test]
    fn other_origin_location_is_not_invalidated() {
        let res = "HTTP/1.1 303 See Other\r\nLocation: http://other/x\r\n\r\n";
        assert_eq!(keys(POST, res), ["http://h/a"]);
    }
}
