//! [`CacheKey`], the primary key (RFC 9111 §2: the target URI), and [`Variant`], the secondary
//! key a `Vary` response adds (§4.1).

use std::fmt;

use sluice_http::{Headers, RequestHead, RequestTarget};

use crate::CacheError;

/// The primary cache key: `http://host[:port]/path?query`, with the scheme and host in
/// lowercase and port 80 left out, so `http://Example.com:80/a` and `/a` with `Host:
/// example.com` share one key. The path and query are kept byte for byte (no percent-decoding:
/// RFC 9111 §4 leaves URI normalization to the cache, and byte equality never merges two
/// resources an origin tells apart).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct CacheKey {
    text: String,
    /// Length of `http://host[:port]`, where the path starts.
    origin_len: usize,
}

impl CacheKey {
    /// The key of a request: its absolute-form target, or origin-form plus Host. CONNECT and
    /// OPTIONS `*` have no key.
    pub fn from_request(request: &RequestHead) -> Result<Self, CacheError> {
        match &request.target {
            RequestTarget::Absolute {
                scheme,
                authority,
                path_and_query,
            } => Ok(Self::new(
                scheme,
                &authority.host,
                authority.port,
                path_and_query,
            )),
            RequestTarget::Origin(path_and_query) => {
                let host = request.host().ok_or(CacheError::MissingHost)?;
                let (host, port) = parse_host(host).ok_or(CacheError::InvalidHost)?;
                Ok(Self::new("http", &host, port, path_and_query))
            }
            RequestTarget::Authority(_) | RequestTarget::Asterisk => Err(CacheError::NoCacheKey {
                method: request.method.to_string(),
            }),
        }
    }

    /// Builds a key from its parts; `host` may be an IPv6 address without brackets.
    pub fn new(scheme: &str, host: &str, port: u16, path_and_query: &str) -> Self {
        let mut text = scheme.to_ascii_lowercase();
        text.push_str("://");
        if host.contains(':') {
            text.push('[');
            text.push_str(&host.to_ascii_lowercase());
            text.push(']');
        } else {
            text.push_str(&host.to_ascii_lowercase());
        }
        if port != 80 {
            text.push(':');
            text.push_str(&port.to_string());
        }
        let origin_len = text.len();
        if !path_and_query.starts_with('/') {
            text.push('/');
        }
        text.push_str(path_and_query);
        Self { text, origin_len }
    }

    /// The key as text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// `http://host[:port]`, for same-origin checks.
    pub fn origin(&self) -> &str {
        self.text.get(..self.origin_len).unwrap_or_default()
    }

    /// `/path?query`.
    pub fn path_and_query(&self) -> &str {
        self.text.get(self.origin_len..).unwrap_or_default()
    }

    /// Resolves a URI reference (a Location or Content-Location value) against this key:
    /// absolute `http://` URIs, absolute paths and relative paths. `None` for other schemes,
    /// network-path references (`//host/x`) and values that are not ASCII.
    pub fn resolve(&self, reference: &[u8]) -> Option<Self> {
        let text = std::str::from_utf8(reference).ok()?.trim();
        let text = text.split('#').next()?;
        if text.is_empty() || !text.is_ascii() || text.starts_with("//") {
            return None;
        }
        if let Some((scheme, rest)) = text.split_once("://") {
            if !scheme.eq_ignore_ascii_case("http") {
                return None;
            }
            let end = rest.find(['/', '?']).unwrap_or(rest.len());
            let (authority, path) = rest.split_at(end);
            let (host, port) = parse_host(authority.as_bytes())?;
            return Some(Self::new("http", &host, port, path));
        }
        if text.contains(':') && !text.starts_with('/') && !text.starts_with('.') {
            // Another scheme (mailto:, https:); a colon in a relative path's first segment is
            // not valid (RFC 3986 §4.2).
            return None;
        }
        let path = if text.starts_with('/') {
            text.to_owned()
        } else {
            let base = self.path_and_query().split('?').next().unwrap_or("/");
            let dir = base.rfind('/').map_or("/", |slash| &base[..=slash]);
            format!("{dir}{text}")
        };
        Some(Self {
            text: format!("{}{}", self.origin(), path),
            origin_len: self.origin_len,
        })
    }

    /// Rebuilds a key from [`as_str`](Self::as_str) (the disk tier stores keys as text).
    pub(crate) fn from_text(text: &str) -> Option<Self> {
        let after_scheme = text.find("://")? + 3;
        let origin_len = text[after_scheme..]
            .find('/')
            .map_or(text.len(), |slash| after_scheme + slash);
        Some(Self {
            text: text.to_owned(),
            origin_len,
        })
    }
}

impl fmt::Display for CacheKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// `host[:port]` from a Host field or URI authority: host lowercased, port 80 by default.
fn parse_host(value: &[u8]) -> Option<(String, u16)> {
    let text = std::str::from_utf8(value).ok()?;
    let (host, port) = if let Some(inner) = text.strip_prefix('[') {
        let (host, after) = inner.split_once(']')?;
        (host, after.strip_prefix(':'))
    } else {
        match text.rsplit_once(':') {
            Some((host, port)) => (host, Some(port)),
            None => (text, None),
        }
    };
    if host.is_empty() || host.contains(['/', '@', ' ']) {
        return None;
    }
    let port = match port {
        None | Some("") => 80,
        Some(digits) => digits.parse().ok()?,
    };
    Some((host.to_ascii_lowercase(), port))
}

/// The secondary key of a stored response: for each field its `Vary` names, the value the
/// request that caused it carried (RFC 9111 §4.1). Values are normalized by joining field
/// lines and dropping whitespace around commas, so `a,b` and `a, b` select the same variant;
/// an absent field only matches an absent field.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Variant {
    fields: Vec<(String, Option<Vec<u8>>)>,
}

/// What a response's `Vary` makes of the request that caused it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VaryOutcome {
    /// The response can be reused for requests that match this variant.
    Variant(Variant),
    /// `Vary: *`: no later request ever matches (RFC 9111 §4.1).
    NeverMatches,
}

impl Variant {
    /// The variant of `response_headers` (its Vary) selected by `request_headers`.
    pub fn of(response_headers: &Headers, request_headers: &Headers) -> VaryOutcome {
        let mut names: Vec<String> = Vec::new();
        for line in response_headers.get_all("vary") {
            for name in String::from_utf8_lossy(line).split(',') {
                let name = name.trim().to_ascii_lowercase();
                if name == "*" {
                    return VaryOutcome::NeverMatches;
                }
                if !name.is_empty() && !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names.sort();
        let fields = names
            .into_iter()
            .map(|name| {
                let value = normalized_value(request_headers, &name);
                (name, value)
            })
            .collect();
        VaryOutcome::Variant(Self { fields })
    }

    /// Builds a variant from stored `(name, value)` pairs, names lowercase.
    pub(crate) fn from_fields(fields: Vec<(String, Option<Vec<u8>>)>) -> Self {
        Self { fields }
    }

    /// The `(name, value)` pairs, names lowercase and sorted.
    pub fn fields(&self) -> &[(String, Option<Vec<u8>>)] {
        &self.fields
    }

    /// True when `request_headers` select this variant.
    pub fn matches(&self, request_headers: &Headers) -> bool {
        self.fields
            .iter()
            .all(|(name, value)| normalized_value(request_headers, name) == *value)
    }

    /// Bytes held, for memory accounting.
    pub(crate) fn heap_bytes(&self) -> usize {
        self.fields
            .iter()
            .map(|(name, value)| name.len() + value.as_ref().map_or(0, Vec::len) + 48)
            .sum()
    }
}

fn normalized_value(headers: &Headers, name: &str) -> Option<Vec<u8>> {
    let mut lines = headers.get_all(name).peekable();
    lines.peek()?;
    let mut out = Vec::new();
    for element in lines.flat_map(|line| line.split(|&b| b == b',')) {
        if !out.is_empty() {
            out.push(b',');
        }
        out.extend_from_slice(element.trim_ascii());
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_http::{parse_request, Limits, Parsed};

    fn request(raw: &str) -> RequestHead {
        match parse_request(raw.as_bytes(), &Limits::default()) {
            Ok(Parsed::Complete { head, .. }) => head,
            other => panic!("bad test request: {other:?}"),
        }
    }

    fn headers(lines: &[(&str, &str)]) -> Headers {
        let mut h = Headers::new();
        for (name, value) in lines {
            h.append(name, *value);
        }
        h
    }

    #[test]
    fn key_lowercases_host_and_drops_default_port() {
        let a = request("GET http://EXAMPLE.com:80/a?b HTTP/1.1\r\nHost: x\r\n\r\n");
        let b = request("GET /a?b HTTP/1.1\r\nHost: Example.COM\r\n\r\n");
        assert_eq!(
            CacheKey::from_request(&a).unwrap().as_str(),
            "http://example.com/a?b"
        );
        assert_eq!(
            CacheKey::from_request(&a).unwrap(),
            CacheKey::from_request(&b).unwrap()
        );
    }

    #[test]
    fn key_keeps_path_case_and_other_ports() {
        let r = request("GET /A/b HTTP/1.1\r\nHost: h:8080\r\n\r\n");
        let key = CacheKey::from_request(&r).unwrap();
        assert_eq!(key.as_str(), "http://h:8080/A/b");
        assert_eq!(key.origin(), "http://h:8080");
        assert_eq!(key.path_and_query(), "/A/b");
        assert_eq!(CacheKey::from_text(key.as_str()), Some(key));
    }

    #[test]
    fn key_needs_host_for_origin_form() {
        let r = request("GET /a HTTP/1.0\r\n\r\n");
        assert!(matches!(
            CacheKey::from_request(&r),
            Err(CacheError::MissingHost)
        ));
    }

    #[test]
    fn resolves_location_references() {
        let base = CacheKey::new("http", "h", 80, "/dir/page?q");
        let resolve = |r: &str| base.resolve(r.as_bytes()).map(|k| k.to_string());
        assert_eq!(resolve("/other").as_deref(), Some("http://h/other"));
        assert_eq!(resolve("sibling").as_deref(), Some("http://h/dir/sibling"));
        assert_eq!(resolve("http://H/x").as_deref(), Some("http://h/x"));
        assert_eq!(resolve("http://other/x").as_deref(), Some("http://other/x"));
        assert_eq!(resolve("https://h/x"), None);
        assert_eq!(resolve("//h/x"), None);
    }

    #[test]
    fn vary_selects_by_normalized_request_values() {
        let response = headers(&[("Vary", "Accept-Encoding, accept-language")]);
        let req = headers(&[("Accept-Encoding", "gzip,br")]);
        let VaryOutcome::Variant(variant) = Variant::of(&response, &req) else {
            panic!("not star");
        };
        assert!(variant.matches(&headers(&[("accept-encoding", "gzip, br")])));
        assert!(!variant.matches(&headers(&[("Accept-Encoding", "gzip")])));
        // Accept-Language was absent: a request that sends it selects another variant.
        assert!(!variant.matches(&headers(&[
            ("Accept-Encoding", "gzip,br"),
            ("Accept-Language", "fr")
        ])));
    }

    #[test]
    fn vary_star_never_matches() {
        let response = headers(&[("Vary", "Accept, *")]);
        assert_eq!(
            Variant::of(&response, &Headers::new()),
            VaryOutcome::NeverMatches
        );
    }

    #[test]
    fn no_vary_matches_every_request() {
        let VaryOutcome::Variant(variant) = Variant::of(&Headers::new(), &Headers::new()) else {
            panic!("not star");
        };
        assert!(variant.matches(&headers(&[("Accept", "x")])));
    }
}
