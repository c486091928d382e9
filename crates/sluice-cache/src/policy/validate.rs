//! Validation with the origin (RFC 9111 §4.3): the conditional request for a stale entry, and
//! merging the 304 that answers it into the stored head.

use sluice_http::{Method, RequestHead, ResponseHead};

use super::etag::EntityTag;
use super::storable::storable_head;
use crate::CacheError;

/// Fields of the client's request that must not reach the origin in our revalidation: its
/// own preconditions and Range are about the client's copy, not ours (we need a full 200 or a
/// 304 for the stored entry).
const CLIENT_PRECONDITIONS: [&str; 6] = [
    "if-none-match",
    "if-modified-since",
    "if-match",
    "if-unmodified-since",
    "if-range",
    "range",
];

/// The request to send the origin to validate `stored` for `client` (RFC 9111 §4.3.1): a GET
/// (a HEAD client is revalidated with GET, so a 200 refills the entry) with the client's
/// preconditions and Range removed, and If-None-Match from the stored ETag and
/// If-Modified-Since from the stored Last-Modified. With neither validator it is a plain GET,
/// and the origin's 200 replaces the entry.
pub fn revalidation_request(client: &RequestHead, stored: &ResponseHead) -> RequestHead {
    let mut request = client.clone();
    request.method = Method::Get;
    for name in CLIENT_PRECONDITIONS {
        request.headers.remove(name);
    }
    if let Some(etag) = stored.headers.get("etag") {
        request.headers.append("If-None-Match", etag);
    }
    if let Some(last_modified) = stored.headers.get("last-modified") {
        request.headers.append("If-Modified-Since", last_modified);
    }
    request
}

/// The stored head refreshed by a 304 (RFC 9111 §3.2, §4.3.4): every field of the 304 replaces
/// the stored fields of that name, except the ones §3.1 never stores and Content-Length (the
/// stored body is what it was). Status, reason and version stay the stored ones.
///
/// The 304 must name the stored representation: its ETag must match the stored one (weak
/// comparison), or without ETag its Last-Modified must equal the stored one; otherwise
/// [`CacheError::ValidatorMismatch`] and the caller fetches the full response. A 304 with no
/// validator at all is taken as answering the conditional request we sent for this entry.
pub fn merge_not_modified(
    stored: &ResponseHead,
    not_modified: &ResponseHead,
) -> Result<ResponseHead, CacheError> {
    check_same_representation(stored, not_modified)?;
    let update = storable_head(not_modified);
    let mut merged = stored.clone();
    let mut replaced: Vec<String> = Vec::new();
    for field in update.headers.iter() {
        let name = field.name.to_ascii_lowercase();
        if name == "content-length" {
            continue;
        }
        if !replaced.contains(&name) {
            merged.headers.remove(&name);
            replaced.push(name);
        }
        merged.headers.append(&field.name, field.value.clone());
    }
    Ok(merged)
}

fn check_same_representation(
    stored: &ResponseHead,
    not_modified: &ResponseHead,
) -> Result<(), CacheError> {
    if let Some(new_tag) = not_modified.headers.get("etag") {
        let stored_tag = stored.headers.get("etag").and_then(EntityTag::parse);
        let new_tag = EntityTag::parse(new_tag);
        return match (stored_tag, new_tag) {
            (Some(stored_tag), Some(new_tag)) if stored_tag.weak_eq(&new_tag) => Ok(()),
            _ => Err(CacheError::ValidatorMismatch),
        };
    }
    if let Some(new_lm) = not_modified.headers.get("last-modified") {
        return match stored.headers.get("last-modified") {
            Some(stored_lm) if stored_lm == new_lm => Ok(()),
            _ => Err(CacheError::ValidatorMismatch),
        };
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{request, response};

    #[test]
    fn conditional_request_carries_stored_validators() {
        let client = request(
            "HEAD /a HTTP/1.1\r\nHost: h\r\nIf-None-Match: \"client\"\r\nRange: bytes=0-1\r\n\r\n",
        );
        let stored = response(
            "HTTP/1.1 200 OK\r\nETag: \"v1\"\r\n\
             Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n",
        );
        let out = revalidation_request(&client, &stored);
        assert_eq!(out.method, Method::Get);
        assert_eq!(out.headers.get("if-none-match"), Some(&b"\"v1\""[..]));
        assert_eq!(
            out.headers.get("if-modified-since"),
            Some(&b"Thu, 01 Jan 2026 00:00:00 GMT"[..])
        );
        assert!(!out.headers.contains("range"));
        assert_eq!(out.headers.get("host"), Some(&b"h"[..]));
    }

    #[test]
    fn conditional_request_without_validators_is_plain() {
        let client = request("GET /a HTTP/1.1\r\nHost: h\r\nIf-Modified-Since: x\r\n\r\n");
        let out = revalidation_request(&client, &response("HTTP/1.1 200 OK\r\n\r\n"));
        assert!(!out.headers.contains("if-none-match"));
        assert!(!out.headers.contains("if-modified-since"));
    }

    #[test]
    fn not_modified_updates_stored_fields() {
        let stored = response(
            "HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nCache-Control: max-age=1\r\nContent-Length: 5\r\n\
             X-Kept: a\r\n\r\n",
        );
        let not_modified = response(
            "HTTP/1.1 304 Not Modified\r\nETag: W/\"v1\"\r\nCache-Control: max-age=99\r\n\
             Content-Length: 0\r\nConnection: close\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n",
        );
        let merged = merge_not_modified(&stored, &not_modified).unwrap();
        assert_eq!(merged.status, 200);
        assert_eq!(
            merged.headers.get("cache-control"),
            Some(&b"max-age=99"[..])
        );
        assert_eq!(merged.headers.get("content-length"), Some(&b"5"[..]));
        assert_eq!(merged.headers.get("x-kept"), Some(&b"a"[..]));
        assert!(merged.headers.contains("date"));
        assert!(!merged.headers.contains("connection"));
    }

    #[test]
    fn not_modified_for_another_etag_is_refused() {
        let stored = response("HTTP/1.1 200 OK\r\nETag: \"v1\"\r\n\r\n");
        let other = response("HTTP/1.1 304 Not Modified\r\nETag: \"v2\"\r\n\r\n");
        assert!(matches!(
            merge_not_modified(&stored, &other),
            Err(CacheError::ValidatorMismatch)
        ));
    }

    #[test]
    fn not_modified_for_another_last_modified_is_refused() {
        let stored =
            response("HTTP/1.1 200 OK\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n");
        let other = response(
            "HTTP/1.1 304 Not Modified\r\nLast-Modified: Fri, 02 Jan 2026 00:00:00 GMT\r\n\r\n",
        );
        assert!(matches!(
            merge_not_modified(&stored, &other),
            Err(CacheError::ValidatorMismatch)
        ));
    }
}
