//! Cache-Control (RFC 9111 §5.2) parsed into typed directives, for responses and requests.

use std::time::Duration;

use sluice_http::Headers;

/// RFC 9111 §1.2.2: a delta-seconds too large to represent is taken as 2^31 seconds.
const DELTA_SECONDS_MAX: u64 = 1 << 31;

/// The response directives a shared cache acts on (RFC 9111 §5.2.2).
///
/// Field-qualified `no-cache="..."` and `private="..."` are read as their unqualified forms:
/// stricter than required, and it spares us storing responses minus some fields.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResponseDirectives {
    /// `no-store`: never store.
    pub no_store: bool,
    /// `no-cache`: store, but validate before every reuse.
    pub no_cache: bool,
    /// `private`: a shared cache must not store it.
    pub private: bool,
    /// `public`: storable even with Authorization, and heuristically cacheable whatever the status.
    pub public: bool,
    /// `must-revalidate`: never serve stale.
    pub must_revalidate: bool,
    /// `proxy-revalidate`: never serve stale from a shared cache.
    pub proxy_revalidate: bool,
    /// `max-age=N`.
    pub max_age: Option<Duration>,
    /// `s-maxage=N`: overrides max-age in a shared cache and implies proxy-revalidate.
    pub s_maxage: Option<Duration>,
    /// A freshness directive was malformed or repeated with different values: RFC 9111 §4.2.1
    /// says to treat the response as stale.
    pub conflicting_freshness: bool,
}

/// The request directives a cache acts on (RFC 9111 §5.2.1).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RequestDirectives {
    /// `no-cache` (or `Pragma: no-cache` with no Cache-Control, §5.4): validate first.
    pub no_cache: bool,
    /// `no-store`: do not store the response to this request.
    pub no_store: bool,
    /// `max-age=N`: the client accepts nothing older.
    pub max_age: Option<Duration>,
    /// `max-stale[=N]`: the client accepts stale responses, by at most N when given.
    pub max_stale: Option<MaxStale>,
    /// `min-fresh=N`: the client wants at least N seconds of freshness left.
    pub min_fresh: Option<Duration>,
    /// `only-if-cached`: answer from the cache or with 504.
    pub only_if_cached: bool,
}

/// How stale a client accepts a response to be.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MaxStale {
    /// `max-stale` with no value: any staleness.
    Any,
    /// `max-stale=N`.
    AtMost(Duration),
}

impl ResponseDirectives {
    /// Reads every Cache-Control line of a response.
    pub fn parse(headers: &Headers) -> Self {
        let mut out = Self::default();
        for (name, value) in directives(headers) {
            match name.as_str() {
                "no-store" => out.no_store = true,
                "no-cache" => out.no_cache = true,
                "private" => out.private = true,
                "public" => out.public = true,
                "must-revalidate" => out.must_revalidate = true,
                "proxy-revalidate" => out.proxy_revalidate = true,
                "max-age" => set_delta(&mut out.max_age, value, &mut out.conflicting_freshness),
                "s-maxage" => set_delta(&mut out.s_maxage, value, &mut out.conflicting_freshness),
                _ => {}
            }
        }
        out
    }
}

impl RequestDirectives {
    /// Reads every Cache-Control line of a request, and Pragma when there is none.
    pub fn parse(headers: &Headers) -> Self {
        let mut out = Self::default();
        let mut ignored = false;
        for (name, value) in directives(headers) {
            match name.as_str() {
                "no-cache" => out.no_cache = true,
                "no-store" => out.no_store = true,
                "only-if-cached" => out.only_if_cached = true,
                "max-age" => set_delta(&mut out.max_age, value, &mut ignored),
                "min-fresh" => set_delta(&mut out.min_fresh, value, &mut ignored),
                "max-stale" => {
                    out.max_stale = match value {
                        None => Some(MaxStale::Any),
                        Some(value) => delta_seconds(&value).map(MaxStale::AtMost),
                    }
                }
                _ => {}
            }
        }
        if !headers.contains("cache-control") && headers.has_token("pragma", "no-cache") {
            out.no_cache = true;
        }
        out
    }
}

/// Records a delta-seconds directive; a malformed value, or a second one that disagrees,
/// sets `conflict`.
fn set_delta(slot: &mut Option<Duration>, value: Option<String>, conflict: &mut bool) {
    match value.as_deref().and_then(delta_seconds) {
        Some(parsed) if slot.is_none_or(|old| old == parsed) => *slot = Some(parsed),
        Some(_) | None => *conflict = true,
    }
}

/// delta-seconds = 1*DIGIT (RFC 9111 §1.2.2), saturating at 2^31.
fn delta_seconds(value: &str) -> Option<Duration> {
    if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let secs = value.parse::<u64>().unwrap_or(DELTA_SECONDS_MAX);
    Some(Duration::from_secs(secs.min(DELTA_SECONDS_MAX)))
}

/// Every `name[=value]` of every Cache-Control line, names lowercased, quotes removed from
/// values. Commas inside a quoted string do not split (`no-cache="a, b"`).
fn directives(headers: &Headers) -> Vec<(String, Option<String>)> {
    let mut out = Vec::new();
    for line in headers.get_all("cache-control") {
        let text = String::from_utf8_lossy(line);
        for element in split_outside_quotes(&text) {
            let element = element.trim();
            if element.is_empty() {
                continue;
            }
            let (name, value) = match element.split_once('=') {
                Some((name, value)) => {
                    let value = value.trim();
                    let value = value
                        .strip_prefix('"')
                        .and_then(|v| v.strip_suffix('"'))
                        .unwrap_or(value);
                    (name.trim(), Some(value.to_owned()))
                }
                None => (element, None),
            };
            out.push((name.to_ascii_lowercase(), value));
        }
    }
    out
}

fn split_outside_quotes(text: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let mut start = 0;
    let mut quoted = false;
    for (index, ch) in text.char_indices() {
        match ch {
            '"' => quoted = !quoted,
            ',' if !quoted => {
                parts.push(&text[start..index]);
                start = index + 1;
            }
            _ => {}
        }
    }
    parts.push(&text[start..]);
    parts
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(lines: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (name, value) in lines {
            h.append(name, *value);
        }
        h
    }

    fn secs(n: u64) -> Option<Duration> {
        Some(Duration::from_secs(n))
    }

    #[test]
    fn reads_response_directives_across_lines_case_insensitively() {
        let h = headers(&[
            ("Cache-Control", "Public, MAX-AGE=60"),
            ("cache-control", "s-maxage=\"10\""),
        ]);
        let d = ResponseDirectives::parse(&h);
        assert!(d.public);
        assert_eq!(d.max_age, secs(60));
        assert_eq!(d.s_maxage, secs(10));
        assert!(!d.conflicting_freshness);
    }

    #[test]
    fn quoted_commas_do_not_split_directives() {
        let h = headers(&[("Cache-Control", "no-cache=\"Set-Cookie, X-A\", max-age=5")]);
        let d = ResponseDirectives::parse(&h);
        assert!(d.no_cache);
        assert_eq!(d.max_age, secs(5));
    }

    #[test]
    fn conflicting_max_age_marks_conflict() {
        for value in ["max-age=5, max-age=6", "max-age=abc", "max-age"] {
            let d = ResponseDirectives::parse(&headers(&[("Cache-Control", value)]));
            assert!(d.conflicting_freshness, "{value}");
        }
    }

    #[test]
    fn huge_delta_seconds_saturate() {
        let d = ResponseDirectives::parse(&headers(&[(
            "Cache-Control",
            "max-age=99999999999999999999",
        )]));
        assert_eq!(d.max_age, secs(DELTA_SECONDS_MAX));
    }

    #[test]
    fn reads_request_directives() {
        let h = headers(&[(
            "Cache-Control",
            "max-stale, min-fresh=3, max-age=9, only-if-cached",
        )]);
        let d = RequestDirectives::parse(&h);
        assert_eq!(d.max_stale, Some(MaxStale::Any));
        assert_eq!(d.min_fresh, secs(3));
        assert_eq!(d.max_age, secs(9));
        assert!(d.only_if_cached);
        let d = RequestDirectives::parse(&headers(&[("Cache-Control", "max-stale=7")]));
        assert_eq!(d.max_stale, Some(MaxStale::AtMost(Duration::from_secs(7))));
    }

    #[test]
    fn pragma_no_cache_counts_only_without_cache_control() {
        assert!(RequestDirectives::parse(&headers(&[("Pragma", "no-cache")])).no_cache);
        let both = headers(&[("Pragma", "no-cache"), ("Cache-Control", "max-age=5")]);
        assert!(!RequestDirectives::parse(&both).no_cache);
    }
}
