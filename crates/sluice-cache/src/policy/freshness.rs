//! Freshness lifetime (RFC 9111 §4.2.1, §4.2.2), age (§4.2.3), and whether a stored response
//! may answer a request as it stands (§4.2, §5.2.1, §5.2.2).

use std::time::{Duration, SystemTime};

use sluice_http::{RequestHead, ResponseHead};

use super::storable::heuristically_cacheable;
use crate::date::parse_http_date;
use crate::directives::{MaxStale, RequestDirectives, ResponseDirectives};
use crate::EntryMeta;

/// How to guess a lifetime for responses with Last-Modified and no explicit freshness
/// (RFC 9111 §4.2.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HeuristicFreshness {
    /// Percent of the time since Last-Modified (RFC 9111 suggests at most 10).
    pub percent: u32,
    /// Upper bound, so a file unchanged for years is still checked now and then.
    pub cap: Duration,
}

impl Default for HeuristicFreshness {
    /// 10 %, capped at one day (Squid's and Varnish's usual ceiling for heuristics).
    fn default() -> Self {
        Self {
            percent: 10,
            cap: Duration::from_secs(24 * 3600),
        }
    }
}

/// What may be done with a stored response for this request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Verdict {
    /// Fresh enough for the request: serve it.
    Fresh,
    /// Stale, but the client allows it (max-stale) and the response does not forbid it.
    ServeStale,
    /// Must be validated with the origin first (conditional request, see
    /// [`revalidation_request`](super::revalidation_request)).
    Revalidate,
    /// Must be validated but the client sent `only-if-cached`: answer 504 (RFC 9111 §5.2.1.7).
    GatewayTimeout,
}

/// The freshness lifetime a shared cache gives `head` (RFC 9111 §4.2.1): s-maxage, else
/// max-age, else Expires minus Date, else the heuristic for Last-Modified when the status
/// allows one (or `public` is present), else zero. `response_time` stands in for a missing or
/// invalid Date.
pub fn freshness_lifetime(
    head: &ResponseHead,
    response_time: SystemTime,
    heuristic: HeuristicFreshness,
) -> Duration {
    let directives = ResponseDirectives::parse(&head.headers);
    if directives.conflicting_freshness {
        return Duration::ZERO;
    }
    if let Some(lifetime) = directives.s_maxage.or(directives.max_age) {
        return lifetime;
    }
    let date = date_value(head, response_time);
    if let Some(expires) = head.headers.get("expires") {
        // An invalid Expires, "0" included, means already expired (§5.3).
        return parse_http_date(expires)
            .and_then(|expires| expires.duration_since(date).ok())
            .unwrap_or(Duration::ZERO);
    }
    if !(heuristically_cacheable(head.status) || directives.public) {
        return Duration::ZERO;
    }
    let Some(last_modified) = head.headers.get("last-modified").and_then(parse_http_date) else {
        return Duration::ZERO;
    };
    let unchanged_for = date.duration_since(last_modified).unwrap_or(Duration::ZERO);
    (unchanged_for * heuristic.percent / 100).min(heuristic.cap)
}

/// The current age of a stored response (RFC 9111 §4.2.3): the corrected initial age (the
/// larger of the apparent age from Date and the Age field plus the request's round trip)
/// plus the time it has been resident since `response_time`.
pub fn current_age(
    head: &ResponseHead,
    request_time: SystemTime,
    response_time: SystemTime,
    now: SystemTime,
) -> Duration {
    let since = |later: SystemTime, earlier: SystemTime| {
        later.duration_since(earlier).unwrap_or(Duration::ZERO)
    };
    let apparent_age = since(response_time, date_value(head, response_time));
    let response_delay = since(response_time, request_time);
    let corrected_age_value = age_value(head) + response_delay;
    let corrected_initial_age = apparent_age.max(corrected_age_value);
    corrected_initial_age + since(now, response_time)
}

/// Decides whether `entry` may answer `request` at `now` (RFC 9111 §4.2, with the request's
/// no-cache, max-age, min-fresh, max-stale and only-if-cached, and the response's no-cache,
/// must-revalidate, proxy-revalidate and s-maxage).
pub fn evaluate(
    request: &RequestHead,
    entry: &EntryMeta,
    now: SystemTime,
    heuristic: HeuristicFreshness,
) -> Verdict {
    let req = RequestDirectives::parse(&request.headers);
    let verdict = verdict(&req, entry, now, heuristic);
    if verdict == Verdict::Revalidate && req.only_if_cached {
        Verdict::GatewayTimeout
    } else {
        verdict
    }
}

fn verdict(
    req: &RequestDirectives,
    entry: &EntryMeta,
    now: SystemTime,
    heuristic: HeuristicFreshness,
) -> Verdict {
    let res = ResponseDirectives::parse(&entry.head.headers);
    if req.no_cache || res.no_cache {
        return Verdict::Revalidate;
    }
    let lifetime = freshness_lifetime(&entry.head, entry.response_time, heuristic);
    let age = current_age(&entry.head, entry.request_time, entry.response_time, now);
    if req.max_age.is_some_and(|max_age| age > max_age) {
        return Verdict::Revalidate;
    }
    if lifetime > age {
        let left = lifetime - age;
        return if req.min_fresh.is_some_and(|min_fresh| left < min_fresh) {
            Verdict::Revalidate
        } else {
            Verdict::Fresh
        };
    }
    // s-maxage implies proxy-revalidate for a shared cache (§5.2.2.10).
    let stale_forbidden = res.must_revalidate || res.proxy_revalidate || res.s_maxage.is_some();
    let staleness = age - lifetime;
    let client_accepts = match req.max_stale {
        Some(MaxStale::Any) => true,
        Some(MaxStale::AtMost(limit)) => staleness <= limit,
        None => false,
    };
    if client_accepts && !stale_forbidden {
        Verdict::ServeStale
    } else {
        Verdict::Revalidate
    }
}

/// Date, or `response_time` when it is missing or invalid.
fn date_value(head: &ResponseHead, response_time: SystemTime) -> SystemTime {
    head.headers
        .get("date")
        .and_then(parse_http_date)
        .unwrap_or(response_time)
}

/// The Age field in seconds; missing or invalid is zero (§5.1 says to ignore it).
fn age_value(head: &ResponseHead) -> Duration {
    head.headers
        .get("age")
        .and_then(|value| std::str::from_utf8(value).ok())
        .and_then(|value| value.trim().parse::<u64>().ok())
        .map_or(Duration::ZERO, Duration::from_secs)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::{at, entry, request, response, T0};

    const H: HeuristicFreshness = HeuristicFreshness {
        percent: 10,
        cap: Duration::from_secs(86_400),
    };

    fn lifetime(raw: &str) -> u64 {
        freshness_lifetime(&response(raw), at(T0), H).as_secs()
    }

    #[test]
    fn s_maxage_wins_over_max_age() {
        assert_eq!(
            lifetime("HTTP/1.1 200 OK\r\nCache-Control: max-age=10, s-maxage=20\r\n\r\n"),
            20
        );
    }

    #[test]
    fn max_age_wins_over_expires() {
        let raw = "HTTP/1.1 200 OK\r\nCache-Control: max-age=10\r\n\
                   Date: Thu, 01 Jan 2026 00:00:00 GMT\r\n\
                   Expires: Thu, 01 Jan 2026 01:00:00 GMT\r\n\r\n";
        assert_eq!(lifetime(raw), 10);
    }

    #[test]
    fn expires_minus_date() {
        let raw = "HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\
                   Expires: Thu, 01 Jan 2026 01:00:00 GMT\r\n\r\n";
        assert_eq!(lifetime(raw), 3600);
    }

    #[test]
    fn invalid_expires_is_already_expired() {
        let raw =
            "HTTP/1.1 200 OK\r\nExpires: 0\r\nLast-Modified: Thu, 01 Jan 2015 00:00:00 GMT\r\n\r\n";
        assert_eq!(lifetime(raw), 0);
    }

    #[test]
    fn heuristic_is_ten_percent_of_date_minus_last_modified() {
        let raw = "HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 2026 10:00:00 GMT\r\n\
                   Last-Modified: Thu, 01 Jan 2026 00:00:00 GMT\r\n\r\n";
        assert_eq!(lifetime(raw), 3600);
    }

    #[test]
    fn heuristic_is_capped() {
        let raw = "HTTP/1.1 200 OK\r\nDate: Thu, 01 Jan 2026 00:00:00 GMT\r\n\
                   Last-Modified: Thu, 01 Jan 2015 00:00:00 GMT\r\n\r\n";
        assert_eq!(lifetime(raw), 86_400);
    }

    #[test]
    fn heuristic_only_for_heuristically_cacheable_status() {
        let lm =
            "Date: Thu, 01 Jan 2026 10:00:00 GMT\r\nLast-Modified: Thu, 01 Jan 2026 00:00:00 GMT";
        assert_eq!(lifetime(&format!("HTTP/1.1 302 Found\r\n{lm}\r\n\r\n")), 0);
        assert_eq!(
            lifetime(&format!(
                "HTTP/1.1 302 Found\r\nCache-Control: public\r\n{lm}\r\n\r\n"
            )),
            3600
        );
    }

    #[test]
    fn conflicting_freshness_is_stale() {
        assert_eq!(
            lifetime("HTTP/1.1 200 OK\r\nCache-Control: max-age=5, max-age=50\r\n\r\n"),
            0
        );
    }

    #[test]
    fn age_uses_corrected_age_value_and_resident_time() {
        // Sent at T0, received 2 s later with Age: 10 and a Date equal to the receive time,
        // now 5 s after that: 10 + 2 (delay) + 5 (resident).
        let head = response("HTTP/1.1 200 OK\r\nAge: 10\r\n\r\n");
        assert_eq!(
            current_age(&head, at(T0), at(T0 + 2), at(T0 + 7)).as_secs(),
            17
        );
    }

    #[test]
    fn age_uses_apparent_age_when_larger() {
        // Date is 100 s before the response arrived; no Age field.
        let date = crate::date::format_http_date(at(T0 - 100));
        let head = response(&format!("HTTP/1.1 200 OK\r\nDate: {date}\r\n\r\n"));
        assert_eq!(
            current_age(&head, at(T0), at(T0), at(T0 + 1)).as_secs(),
            101
        );
    }

    fn judge(req: &str, res: &str, now: u64) -> Verdict {
        evaluate(&request(req), &entry(res, &[]).meta, at(T0 + now), H)
    }

    const GET: &str = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
    const MAX_AGE_60: &str = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\n\r\n";

    #[test]
    fn fresh_within_lifetime_stale_after() {
        assert_eq!(judge(GET, MAX_AGE_60, 59), Verdict::Fresh);
        assert_eq!(judge(GET, MAX_AGE_60, 60), Verdict::Revalidate);
    }

    #[test]
    fn response_no_cache_always_revalidates() {
        let res = "HTTP/1.1 200 OK\r\nCache-Control: no-cache, max-age=60\r\n\r\n";
        assert_eq!(judge(GET, res, 0), Verdict::Revalidate);
    }

    #[test]
    fn request_no_cache_and_pragma_revalidate() {
        let cc = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: no-cache\r\n\r\n";
        let pragma = "GET /a HTTP/1.1\r\nHost: h\r\nPragma: no-cache\r\n\r\n";
        assert_eq!(judge(cc, MAX_AGE_60, 0), Verdict::Revalidate);
        assert_eq!(judge(pragma, MAX_AGE_60, 0), Verdict::Revalidate);
    }

    #[test]
    fn request_max_age_limits_age() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: max-age=10\r\n\r\n";
        assert_eq!(judge(req, MAX_AGE_60, 10), Verdict::Fresh);
        assert_eq!(judge(req, MAX_AGE_60, 11), Verdict::Revalidate);
    }

    #[test]
    fn request_min_fresh_needs_freshness_left() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: min-fresh=30\r\n\r\n";
        assert_eq!(judge(req, MAX_AGE_60, 30), Verdict::Fresh);
        assert_eq!(judge(req, MAX_AGE_60, 31), Verdict::Revalidate);
    }

    #[test]
    fn request_max_stale_allows_stale() {
        let any = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: max-stale\r\n\r\n";
        let ten = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: max-stale=10\r\n\r\n";
        assert_eq!(judge(any, MAX_AGE_60, 9999), Verdict::ServeStale);
        assert_eq!(judge(ten, MAX_AGE_60, 70), Verdict::ServeStale);
        assert_eq!(judge(ten, MAX_AGE_60, 71), Verdict::Revalidate);
    }

    #[test]
    fn must_revalidate_proxy_revalidate_and_s_maxage_forbid_stale() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: max-stale\r\n\r\n";
        for cc in [
            "max-age=60, must-revalidate",
            "max-age=60, proxy-revalidate",
            "s-maxage=60",
        ] {
            let res = format!("HTTP/1.1 200 OK\r\nCache-Control: {cc}\r\n\r\n");
            assert_eq!(judge(req, &res, 61), Verdict::Revalidate, "{cc}");
        }
    }

    #[test]
    fn only_if_cached_turns_revalidate_into_504() {
        let req = "GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: only-if-cached\r\n\r\n";
        assert_eq!(judge(req, MAX_AGE_60, 1), Verdict::Fresh);
        assert_eq!(judge(req, MAX_AGE_60, 61), Verdict::GatewayTimeout);
    }
}
