//! What a request asks of the origin, and the response head that answers it. No I/O.
//!
//! A request names its body by path and query:
//!
//! - size: a `/size/N` path segment (`/size/65536/img/7`), else an `X-Size: N` header; `N` takes
//!   the units of [`crate::dist::parse_bytes`];
//! - `cache=N` in the query: cacheable, `Cache-Control: max-age=N`, with an `ETag` and a fixed
//!   `Last-Modified`; `cache=no-store` or no `cache`: `Cache-Control: no-store`, no validators;
//! - `frame=length` (default), `frame=chunked` or `frame=close`: how the body's end is marked;
//! - `think=SPEC` (a [`DelayDist`]): wait that long before answering, instead of the origin's
//!   default think time.
//!
//! Other query parameters are ignored, so URLs can carry object ids. Both sides hash the
//! origin-form target (path and query, as sent to the origin) to pick the body's bytes.

use crate::body::{fnv1a64, BodyPattern};
use crate::dist::{parse_bytes, DelayDist};

/// The fixed `Last-Modified` of every cacheable body: bodies never change.
pub const LAST_MODIFIED: &str = "Mon, 01 Jan 2024 00:00:00 GMT";

/// Methods the origin answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Method {
    /// Headers and body.
    Get,
    /// Headers only.
    Head,
}

/// Whether the response may be cached.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CachePolicy {
    /// `Cache-Control: no-store`.
    NoStore,
    /// `Cache-Control: max-age=N`, with validators.
    MaxAge(u64),
}

/// How the body's end is marked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Framing {
    /// `Content-Length`.
    Length,
    /// `Transfer-Encoding: chunked` (HTTP/1.1 clients only; 1.0 gets [`Framing::Close`]).
    Chunked,
    /// No length: the origin closes the connection after the body.
    Close,
}

/// A parsed request, ready to answer.
#[derive(Debug, Clone, PartialEq)]
pub struct OriginRequest {
    /// GET or HEAD.
    pub method: Method,
    /// Origin-form target: path and query.
    pub target: String,
    /// Body length in bytes.
    pub size: u64,
    /// Cacheability.
    pub cache: CachePolicy,
    /// Body framing, already downgraded for HTTP/1.0 clients.
    pub framing: Framing,
    /// Think time asked for by the request, overriding the origin's default.
    pub think: Option<DelayDist>,
    /// Whether the client wants the connection kept open after this response.
    pub keep_alive: bool,
    /// Whether `If-None-Match` or `If-Modified-Since` matches this body's validators.
    pub not_modified: bool,
}

/// A request the origin refuses: the status and a one-line reason for the body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejection {
    /// 400, 405, 413 or 431.
    pub status: u16,
    /// One line saying why.
    pub reason: String,
}

fn reject(status: u16, reason: impl Into<String>) -> Rejection {
    Rejection {
        status,
        reason: reason.into(),
    }
}

/// Parses what `request` asks for; bodies above `max_size` are refused with 413.
pub fn parse(
    request: &httparse::Request<'_, '_>,
    max_size: u64,
) -> Result<OriginRequest, Rejection> {
    let method = match request.method {
        Some("GET") => Method::Get,
        Some("HEAD") => Method::Head,
        Some(other) => return Err(reject(405, format!("method {other} not served, use GET"))),
        None => return Err(reject(400, "no method")),
    };
    let target = origin_form(request.path.unwrap_or("/"));
    let http11 = request.version == Some(1);
    let header = |name: &str| {
        request
            .headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .and_then(|h| std::str::from_utf8(h.value).ok())
            .map(str::trim)
    };
    let (path, query) = target.split_once('?').unwrap_or((&target, ""));
    let size_text = size_from_path(path)
        .or_else(|| header("x-size"))
        .ok_or_else(|| {
            reject(
                400,
                "say the body size: a /size/N path segment or X-Size: N",
            )
        })?;
    let size = parse_bytes(size_text).map_err(|e| reject(400, format!("size: {e}")))?;
    // GET and HEAD only: a request body would have to be skipped, so refuse one.
    let has_body =
        header("transfer-encoding").is_some() || header("content-length").is_some_and(|v| v != "0");
    if has_body {
        return Err(reject(400, "request bodies are not accepted"));
    }
    if size > max_size {
        return Err(reject(
            413,
            format!("size {size} above the origin's --max-size {max_size}"),
        ));
    }

    let mut cache = CachePolicy::NoStore;
    let mut framing = Framing::Length;
    let mut think = None;
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
        match key {
            "cache" => cache = parse_cache(value)?,
            "frame" => framing = parse_framing(value)?,
            "think" => {
                let value = value.replace("%2C", ",").replace("%2c", ",");
                think = Some(
                    value
                        .parse()
                        .map_err(|e| reject(400, format!("think: {e}")))?,
                )
            }
            _ => {}
        }
    }
    if framing == Framing::Chunked && !http11 {
        framing = Framing::Close;
    }

    let connection = header("connection").unwrap_or("");
    let has_token = |token: &str| {
        connection
            .split(',')
            .any(|t| t.trim().eq_ignore_ascii_case(token))
    };
    let keep_alive = if http11 {
        !has_token("close")
    } else {
        has_token("keep-alive")
    };

    let not_modified = match cache {
        CachePolicy::NoStore => false,
        CachePolicy::MaxAge(_) => {
            let tag = etag(&target, size);
            let inm = header("if-none-match")
                .is_some_and(|v| v.split(',').any(|t| t.trim() == tag || t.trim() == "*"));
            // Exact match only: the only date we ever send is LAST_MODIFIED, so a cache that
            // revalidates echoes it back unchanged.
            let ims = header("if-modified-since") == Some(LAST_MODIFIED);
            inm || ims
        }
    };

    Ok(OriginRequest {
        method,
        target,
        size,
        cache,
        framing,
        think,
        keep_alive,
        not_modified,
    })
}

/// Strips `http://authority` from an absolute-form target (a proxy may pass one on).
fn origin_form(target: &str) -> String {
    let lower = target.get(..8).unwrap_or(target).to_ascii_lowercase();
    let rest = if lower.starts_with("http://") {
        &target[7..]
    } else if lower.starts_with("https://") {
        &target[8..]
    } else {
        return target.to_owned();
    };
    match rest.find('/') {
        Some(slash) => rest[slash..].to_owned(),
        None => "/".to_owned(),
    }
}

fn size_from_path(path: &str) -> Option<&str> {
    let mut segments = path.split('/');
    segments.by_ref().find(|s| *s == "size")?;
    segments.next().filter(|s| !s.is_empty())
}

fn parse_cache(value: &str) -> Result<CachePolicy, Rejection> {
    if value == "no-store" {
        return Ok(CachePolicy::NoStore);
    }
    value
        .parse()
        .map(CachePolicy::MaxAge)
        .map_err(|_| reject(400, format!("cache={value}: expected seconds or no-store")))
}

fn parse_framing(value: &str) -> Result<Framing, Rejection> {
    match value {
        "length" => Ok(Framing::Length),
        "chunked" => Ok(Framing::Chunked),
        "close" => Ok(Framing::Close),
        _ => Err(reject(
            400,
            format!("frame={value}: expected length, chunked or close"),
        )),
    }
}

/// The strong validator of a body: a hash of its target and its size.
pub fn etag(target: &str, size: u64) -> String {
    format!("\"{:016x}-{size}\"", fnv1a64(target.as_bytes()))
}

/// Where in the body pattern this request's body starts.
pub fn body_start(request: &OriginRequest) -> usize {
    BodyPattern::start_offset(&request.target)
}

/// The response head for `request`; `last_on_connection` adds `Connection: close`.
pub fn response_head(request: &OriginRequest, last_on_connection: bool, date: &str) -> Vec<u8> {
    let status = if request.not_modified {
        "304 Not Modified"
    } else {
        "200 OK"
    };
    let mut head = format!("HTTP/1.1 {status}\r\nServer: sluice-lab\r\nDate: {date}\r\n");
    match request.cache {
        CachePolicy::NoStore => head.push_str("Cache-Control: no-store\r\n"),
        CachePolicy::MaxAge(age) => {
            head.push_str(&format!(
                "Cache-Control: max-age={age}\r\nETag: {}\r\nLast-Modified: {LAST_MODIFIED}\r\n",
                etag(&request.target, request.size)
            ));
        }
    }
    let closes = last_on_connection || !request.keep_alive || closes_after_body(request);
    if !request.not_modified {
        head.push_str("Content-Type: application/octet-stream\r\n");
        match request.framing {
            Framing::Length => head.push_str(&format!("Content-Length: {}\r\n", request.size)),
            Framing::Chunked => head.push_str("Transfer-Encoding: chunked\r\n"),
            Framing::Close => {}
        }
    }
    head.push_str(if closes {
        "Connection: close\r\n\r\n"
    } else {
        "Connection: keep-alive\r\n\r\n"
    });
    head.into_bytes()
}

/// Whether the body's end is marked by closing the connection.
pub fn closes_after_body(request: &OriginRequest) -> bool {
    request.framing == Framing::Close && !request.not_modified && request.method == Method::Get
}

/// A refusal: status line, headers and the reason as a one-line body; always closes.
pub fn rejection_response(rejection: &Rejection, date: &str) -> Vec<u8> {
    let reason = match rejection.status {
        405 => "Method Not Allowed",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Bad Request",
    };
    let body = format!("{}\n", rejection.reason);
    format!(
        "HTTP/1.1 {} {reason}\r\nServer: sluice-lab\r\nDate: {date}\r\nContent-Type: text/plain\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n{body}",
        rejection.status,
        body.len()
    )
    .into_bytes()
}

/// Formats seconds since the Unix epoch as an IMF-fixdate (RFC 9110 section 5.6.7).
pub fn http_date(unix_secs: u64) -> String {
    const DAYS: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MONTHS: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let days = unix_secs / 86_400;
    let secs = unix_secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's days_from_civil, inverted).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        DAYS[(days % 7) as usize],
        day,
        MONTHS[(month - 1) as usize],
        year,
        secs / 3600,
        secs / 60 % 60,
        secs % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_bytes_request(raw: &[u8]) -> Result<OriginRequest, Rejection> {
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut request = httparse::Request::new(&mut headers);
        assert!(request.parse(raw).unwrap().is_complete());
        parse(&request, 1 << 30)
    }

    #[test]
    fn size_from_path_segment() {
        let r = parse_bytes_request(b"GET /size/64KiB/img/3 HTTP/1.1\r\nHost: o\r\n\r\n").unwrap();
        assert_eq!(r.size, 65_536);
        assert_eq!(r.cache, CachePolicy::NoStore);
        assert_eq!(r.framing, Framing::Length);
        assert!(r.keep_alive);
    }

    #[test]
    fn size_from_header() {
        let r = parse_bytes_request(b"GET /x HTTP/1.1\r\nX-Size: 1000\r\n\r\n").unwrap();
        assert_eq!(r.size, 1000);
    }

    #[test]
    fn rejects_a_request_without_size() {
        let e = parse_bytes_request(b"GET /x HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.status, 400);
    }

    #[test]
    fn rejects_post() {
        let e = parse_bytes_request(b"POST /size/1 HTTP/1.1\r\n\r\n").unwrap_err();
        assert_eq!(e.status, 405);
    }

    #[test]
    fn query_controls() {
        let r = parse_bytes_request(
            b"GET /size/10?cache=60&frame=chunked&think=normal:2.5s%2C1s&obj=9 HTTP/1.1\r\n\r\n",
        )
        .unwrap();
        assert_eq!(r.cache, CachePolicy::MaxAge(60));
        assert_eq!(r.framing, Framing::Chunked);
        assert_eq!(r.think, Some("normal:2.5s,1s".parse().unwrap()));
        assert!(parse_bytes_request(b"GET /size/1?frame=gzip HTTP/1.1\r\n\r\n").is_err());
    }

    #[test]
    fn http10_gets_close_instead_of_chunked_and_no_keep_alive() {
        let r = parse_bytes_request(b"GET /size/10?frame=chunked HTTP/1.0\r\n\r\n").unwrap();
        assert_eq!(r.framing, Framing::Close);
        assert!(!r.keep_alive);
        let r = parse_bytes_request(b"GET /size/10 HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
        assert!(r.unwrap().keep_alive);
    }

    #[test]
    fn absolute_form_is_reduced_to_origin_form() {
        let r = parse_bytes_request(b"GET http://127.0.0.1:8080/size/5?a HTTP/1.1\r\n\r\n");
        assert_eq!(r.unwrap().target, "/size/5?a");
    }

    #[test]
    fn validators_give_304() {
        let tag = etag("/size/10?cache=60", 10);
        let raw = format!("GET /size/10?cache=60 HTTP/1.1\r\nIf-None-Match: {tag}\r\n\r\n");
        assert!(parse_bytes_request(raw.as_bytes()).unwrap().not_modified);
        let raw =
            format!("GET /size/10?cache=60 HTTP/1.1\r\nIf-Modified-Since: {LAST_MODIFIED}\r\n\r\n");
        assert!(parse_bytes_request(raw.as_bytes()).unwrap().not_modified);
        let raw = format!("GET /size/10 HTTP/1.1\r\nIf-None-Match: {tag}\r\n\r\n");
        assert!(
            !parse_bytes_request(raw.as_bytes()).unwrap().not_modified,
            "no-store: no 304"
        );
    }

    #[test]
    fn head_names_length_and_cacheability() {
        let r = parse_bytes_request(b"GET /size/10?cache=60 HTTP/1.1\r\n\r\n").unwrap();
        let head = String::from_utf8(response_head(&r, false, "D")).unwrap();
        assert!(head.starts_with("HTTP/1.1 200 OK\r\n"));
        assert!(head.contains("Content-Length: 10\r\n"));
        assert!(head.contains("Cache-Control: max-age=60\r\n"));
        assert!(head.contains("ETag: \""));
        assert!(head.ends_with("Connection: keep-alive\r\n\r\n"));
        let head = String::from_utf8(response_head(&r, true, "D")).unwrap();
        assert!(head.ends_with("Connection: close\r\n\r\n"));
    }

    #[test]
    fn dates_are_imf_fixdate() {
        assert_eq!(http_date(0), "Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(http_date(1_704_067_200), LAST_MODIFIED);
        assert_eq!(http_date(951_782_400), "Tue, 29 Feb 2000 00:00:00 GMT");
    }
}
