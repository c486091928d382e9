//! Building the response a client gets from a stored entry: its own preconditions (RFC 9110
//! §13.2.2), HEAD, and a single byte range (§14).

use std::time::SystemTime;

use sluice_http::{Method, RequestHead, ResponseHead, Version};

use super::etag::{EntityTag, EntityTags};
use super::freshness::current_age;
use super::range::{resolve_range, RangeOutcome};
use crate::date::parse_http_date;
use crate::EntryMeta;

/// Fields a 304 carries over from the stored 200 (RFC 9110 §15.4.5).
const NOT_MODIFIED_FIELDS: [&str; 6] = [
    "cache-control",
    "content-location",
    "date",
    "etag",
    "expires",
    "vary",
];

/// The response to send a client for a stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HitResponse {
    /// Status line and fields, Age and Content-Length set; write it with
    /// [`ResponseHead::write_to`].
    pub head: ResponseHead,
    /// Which bytes of the stored body follow the head.
    pub body: BodySlice,
}

/// Which part of a stored body to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodySlice {
    /// No body: HEAD, 304, 412 and 416.
    Empty,
    /// `len` bytes from `offset` of the stored body (the whole of it for a 200).
    Bytes {
        /// First byte, from the start of the body.
        offset: u64,
        /// How many bytes.
        len: u64,
    },
}

/// Answers `request` from `entry` at `now`. The caller has already decided the entry may be
/// used ([`evaluate`](super::evaluate) said fresh, stale-allowed, or it was just validated).
///
/// In RFC 9110 §13.2.2 order: If-Match, else If-Unmodified-Since (412 when failing); then
/// If-None-Match, else If-Modified-Since (304 when the client's copy is current); then, for
/// GET, If-Range and a single Range (206, or 416 past the end; several ranges get the whole
/// 200). HEAD gets the GET head without a body.
///
/// A stored 404 or 301 is answered as stored: preconditions apply only where the answer would
/// otherwise be 2xx (§13.2.1), and a Range only where it would be 200 (§14.2), so no client
/// gets a 304 for an error page or a 206 slice of one.
pub fn respond(request: &RequestHead, entry: &EntryMeta, now: SystemTime) -> HitResponse {
    let age = current_age(&entry.head, entry.request_time, entry.response_time, now);
    let len = entry.body_len;
    let stored = &entry.head;
    let current_tag = stored.headers.get("etag").and_then(EntityTag::parse);
    let last_modified = stored
        .headers
        .get("last-modified")
        .and_then(parse_http_date);

    let preconditions_apply = (200..300).contains(&stored.status);
    let mut head = if preconditions_apply
        && precondition_fails(request, current_tag.as_ref(), last_modified)
    {
        status_only(stored, 412, "Precondition Failed")
    } else if preconditions_apply
        && client_copy_current(request, current_tag.as_ref(), last_modified)
    {
        not_modified(stored)
    } else {
        let mut head = stored.clone();
        head.version = Version::Http11;
        head
    };
    head.headers.set("Age", age.as_secs().to_string());
    if head.status != stored.status {
        return HitResponse {
            head,
            body: BodySlice::Empty,
        };
    }

    let range = match request.headers.get("range") {
        Some(value)
            if request.method == Method::Get
                && stored.status == 200
                && if_range_holds(request, stored) =>
        {
            resolve_range(value, len)
        }
        _ => RangeOutcome::Full,
    };
    let (offset, sent) = match range {
        RangeOutcome::Full => (0, len),
        RangeOutcome::Single { first, last } => {
            head.status = 206;
            head.reason = "Partial Content".to_owned();
            head.headers
                .set("Content-Range", format!("bytes {first}-{last}/{len}"));
            (first, last - first + 1)
        }
        RangeOutcome::Unsatisfiable => {
            let mut head = status_only(stored, 416, "Range Not Satisfiable");
            head.headers.set("Content-Range", format!("bytes */{len}"));
            head.headers.set("Age", age.as_secs().to_string());
            return HitResponse {
                head,
                body: BodySlice::Empty,
            };
        }
    };
    head.headers.set("Content-Length", sent.to_string());
    let body = if request.method == Method::Head {
        BodySlice::Empty
    } else {
        BodySlice::Bytes { offset, len: sent }
    };
    HitResponse { head, body }
}

/// If-Match fails (strong comparison), or without it If-Unmodified-Since is older than
/// Last-Modified (RFC 9110 §13.1.1, §13.1.4).
fn precondition_fails(
    request: &RequestHead,
    current: Option<&EntityTag>,
    last_modified: Option<SystemTime>,
) -> bool {
    if request.headers.contains("if-match") {
        return match EntityTags::parse(request.headers.get_all("if-match")) {
            EntityTags::Any => false,
            EntityTags::List(tags) => !current.is_some_and(|c| tags.iter().any(|t| t.strong_eq(c))),
        };
    }
    match request
        .headers
        .get("if-unmodified-since")
        .and_then(parse_http_date)
    {
        Some(since) => last_modified.is_none_or(|modified| modified > since),
        None => false,
    }
}

/// If-None-Match matches (weak comparison), or without it the stored Last-Modified is not
/// after If-Modified-Since (RFC 9110 §13.1.2, §13.1.3).
fn client_copy_current(
    request: &RequestHead,
    current: Option<&EntityTag>,
    last_modified: Option<SystemTime>,
) -> bool {
    if request.headers.contains("if-none-match") {
        return EntityTags::parse(request.headers.get_all("if-none-match")).weak_match(current);
    }
    match request
        .headers
        .get("if-modified-since")
        .and_then(parse_http_date)
    {
        Some(since) => last_modified.is_some_and(|modified| modified <= since),
        None => false,
    }
}

/// If-Range (RFC 9110 §13.1.5): a strong ETag equal to the stored one, or a date equal to the
/// stored Last-Modified. Without If-Range, the Range applies.
fn if_range_holds(request: &RequestHead, stored: &ResponseHead) -> bool {
    let Some(value) = request.headers.get("if-range") else {
        return true;
    };
    if let Some(tag) = EntityTag::parse(value) {
        let current = stored.headers.get("etag").and_then(EntityTag::parse);
        return current.is_some_and(|current| current.strong_eq(&tag));
    }
    let stored_date = stored
        .headers
        .get("last-modified")
        .and_then(parse_http_date);
    stored_date.is_some() && stored_date == parse_http_date(value)
}

fn not_modified(stored: &ResponseHead) -> ResponseHead {
    let mut head = status_only(stored, 304, "Not Modified");
    for name in NOT_MODIFIED_FIELDS {
        for value in stored.headers.get_all(name) {
            head.headers.append(name, value);
        }
    }
    // Last-Modified guides the client's cache when there is no ETag (§15.4.5).
    if !stored.headers.contains("etag") {
        if let Some(value) = stored.headers.get("last-modified") {
            head.headers.append("Last-Modified", value);
        }
    }
    head
}

fn status_only(stored: &ResponseHead, status: u16, reason: &str) -> ResponseHead {
    let mut head = ResponseHead {
        version: Version::Http11,
        status,
        reason: reason.to_owned(),
        headers: Default::default(),
    };
    if status != 304 {
        head.headers.append("Content-Length", "0");
    }
    if let Some(date) = stored.headers.get("date") {
        head.headers.append("Date", date);
    }
    head
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{at, entry, request, T0};

    const STORED: &str =
        "HTTP/1.1 200 OK\r\nETag: \"v1\"\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n\
                          Cache-Control: max-age=60\r\nContent-Length: 10\r\nX-Extra: 1\r\n\r\n";

    fn answer(req: &str) -> HitResponse {
        respond(
            &request(req),
            &entry(STORED, b"0123456789").meta,
            at(T0 + 3),
        )
    }

    fn get(extra: &str) -> String {
        format!("GET /a HTTP/1.1\r\nHost: h\r\n{extra}\r\n")
    }

    #[test]
    fn plain_get_is_full_200_with_age() {
        let out = answer(&get(""));
        assert_eq!(out.head.status, 200);
        assert_eq!(out.head.headers.get("age"), Some(&b"3"[..]));
        assert_eq!(out.head.headers.get("content-length"), Some(&b"10"[..]));
        assert_eq!(out.body, BodySlice::Bytes { offset: 0, len: 10 });
    }

    #[test]
    fn head_gets_headers_without_body() {
        let out = answer("HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n");
        assert_eq!(out.head.status, 200);
        assert_eq!(out.head.headers.get("content-length"), Some(&b"10"[..]));
        assert_eq!(out.body, BodySlice::Empty);
    }

    #[test]
    fn if_none_match_weak_match_gives_304() {
        let out = answer(&get("If-None-Match: \"x\", W/\"v1\"\r\n"));
        assert_eq!(out.head.status, 304);
        assert_eq!(out.body, BodySlice::Empty);
        assert_eq!(out.head.headers.get("etag"), Some(&b"\"v1\""[..]));
        assert!(!out.head.headers.contains("x-extra"));
        assert!(!out.head.headers.contains("content-length"));
    }

    #[test]
    fn if_none_match_mismatch_gives_200_even_if_modified_since_matches() {
        let out = answer(&get(
            "If-None-Match: \"v2\"\r\nIf-Modified-Since: Thu, 01 Jan 2026 00:00:00 GMT\r\n",
        ));
        assert_eq!(out.head.status, 200);
    }

    #[test]
    fn if_modified_since_not_modified_gives_304() {
        let same = answer(&get("If-Modified-Since: Thu, 01 Jan 2026 00:00:00 GMT\r\n"));
        assert_eq!(same.head.status, 304);
        let older = answer(&get("If-Modified-Since: Wed, 31 Dec 2025 00:00:00 GMT\r\n"));
        assert_eq!(older.head.status, 200);
    }

    #[test]
    fn failed_if_match_gives_412() {
        assert_eq!(answer(&get("If-Match: \"v2\"\r\n")).head.status, 412);
        assert_eq!(answer(&get("If-Match: \"v1\"\r\n")).head.status, 200);
        let before = "If-Unmodified-Since: Wed, 31 Dec 2025 00:00:00 GMT\r\n";
        assert_eq!(answer(&get(before)).head.status, 412);
    }

    #[test]
    fn single_range_gives_206() {
        let out = answer(&get("Range: bytes=2-4\r\n"));
        assert_eq!(out.head.status, 206);
        assert_eq!(
            out.head.headers.get("content-range"),
            Some(&b"bytes 2-4/10"[..])
        );
        assert_eq!(out.head.headers.get("content-length"), Some(&b"3"[..]));
        assert_eq!(out.body, BodySlice::Bytes { offset: 2, len: 3 });
    }

    #[test]
    fn unsatisfiable_range_gives_416() {
        let out = answer(&get("Range: bytes=10-\r\n"));
        assert_eq!(out.head.status, 416);
        assert_eq!(
            out.head.headers.get("content-range"),
            Some(&b"bytes */10"[..])
        );
        assert_eq!(out.body, BodySlice::Empty);
    }

    #[test]
    fn multi_range_gives_full_200() {
        let out = answer(&get("Range: bytes=0-1,4-5\r\n"));
        assert_eq!(out.head.status, 200);
        assert_eq!(out.body, BodySlice::Bytes { offset: 0, len: 10 });
    }

    #[test]
    fn if_range_mismatch_gives_full_200() {
        let weak = answer(&get("Range: bytes=0-1\r\nIf-Range: W/\"v1\"\r\n"));
        assert_eq!(weak.head.status, 200);
        let strong = answer(&get("Range: bytes=0-1\r\nIf-Range: \"v1\"\r\n"));
        assert_eq!(strong.head.status, 206);
        let date = answer(&get(
            "Range: bytes=0-1\r\nIf-Range: Thu, 01 Jan 2026 00:00:00 GMT\r\n",
        ));
        assert_eq!(date.head.status, 206);
    }

    #[test]
    fn a_stored_error_ignores_preconditions_and_range() {
        let stored = "HTTP/1.1 404 Not Found\r\nETag: \"v1\"\r\n\
                      Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\nContent-Length: 10\r\n\r\n";
        let entry = entry(stored, b"not found!");
        for extra in [
            "If-None-Match: \"v1\"\r\n",
            "If-Modified-Since: Thu, 01 Jan 2026 00:00:00 GMT\r\n",
            "If-Match: \"other\"\r\n",
            "Range: bytes=0-3\r\n",
        ] {
            let out = respond(&request(&get(extra)), &entry.meta, at(T0 + 3));
            assert_eq!(out.head.status, 404, "{extra}");
            assert_eq!(out.body, BodySlice::Bytes { offset: 0, len: 10 }, "{extra}");
        }
    }

    #[test]
    fn a_stored_203_still_honours_preconditions_but_not_range() {
        let stored = "HTTP/1.1 203 Non-Authoritative Information\r\nETag: \"v1\"\r\n\
                      Content-Length: 10\r\n\r\n";
        let entry = entry(stored, b"0123456789");
        let answer = |extra: &str| respond(&request(&get(extra)), &entry.meta, at(T0 + 3));
        assert_eq!(answer("If-None-Match: \"v1\"\r\n").head.status, 304);
        assert_eq!(answer("Range: bytes=0-3\r\n").head.status, 203);
    }

    #[test]
    fn range_on_head_is_ignored() {
        let out = answer("HEAD /a HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n\r\n");
        assert_eq!(out.head.status, 200);
        assert_eq!(out.body, BodySlice::Empty);
    }
}
