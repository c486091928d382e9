//! What of RFC 9111 this crate implements, what it leaves out, and why.
//!
//! This module holds no code: it is the record the issue asks for, kept beside the code so a
//! change to one shows in review of the other.
//!
//! # Implemented
//!
//! - §2 cache key: target URI, host lowercased, default port dropped:
//!   [`CacheKey`](crate::CacheKey).
//! - §3 storing: method, final status, no-store, private, explicit or heuristic freshness;
//!   §3.5 Authorization needs public, s-maxage or must-revalidate:
//!   [`storability`](crate::policy::storability).
//! - §3.1 fields never stored (hop-by-hop, Proxy-*):
//!   [`storable_head`](crate::policy::storable_head).
//! - §3.2, §4.3.4 updating stored fields from a 304:
//!   [`merge_not_modified`](crate::policy::merge_not_modified).
//! - §4.1 Vary as a secondary key, `*` never matching: [`Variant`](crate::Variant).
//! - §4.2.1 lifetime (s-maxage, max-age, Expires - Date, invalid Expires is expired) and
//!   §4.2.2 heuristic (10 % of Date - Last-Modified, capped, for heuristically cacheable
//!   statuses or public): [`freshness_lifetime`](crate::policy::freshness_lifetime).
//! - §4.2.3 age from Age, Date, request and response times:
//!   [`current_age`](crate::policy::current_age).
//! - §4.3.1 conditional request from ETag and Last-Modified:
//!   [`revalidation_request`](crate::policy::revalidation_request).
//! - §4.3.2 answering clients' If-None-Match and If-Modified-Since (and If-Match,
//!   If-Unmodified-Since, If-Range), HEAD from GET, RFC 9110 §14 single byte ranges (206, 416):
//!   [`respond`](crate::policy::respond).
//! - §4.4 invalidation of the target and same-origin Location and Content-Location:
//!   [`invalidated_keys`](crate::policy::invalidated_keys).
//! - §5.2.1 request no-cache (and Pragma, §5.4), max-age, max-stale, min-fresh,
//!   only-if-cached; §5.2.2 response no-cache, must-revalidate, proxy-revalidate, s-maxage:
//!   [`evaluate`](crate::policy::evaluate).
//!
//! # Left out
//!
//! - **Storing and combining partial content (§3.3, §3.4).** Only complete 200-class
//!   responses are stored, and ranges are cut from them. Storing 206s needs a sparse object
//!   store and range bookkeeping for little gain when objects are usually fetched whole.
//! - **Multiple ranges.** Served as the full 200 (RFC 9110 §14.2 allows ignoring Range):
//!   multipart/byteranges costs a copy of the body for a rare request shape.
//! - **Responses to methods other than GET (§3, §4.3.5).** HEAD is answered from GET entries,
//!   but HEAD responses neither fill nor refresh entries; POST responses with explicit
//!   freshness and Content-Location are not stored. Both are rare and each would need its own
//!   fill path.
//! - **Field-qualified `no-cache="f"` and `private="f"` (§5.2.2.4, §5.2.2.7).** Read as the
//!   unqualified directives: always revalidate, never store. Stricter than required, and it
//!   spares storing a response minus some fields.
//! - **`must-understand` (§5.2.2.3).** Ignored; `no-store` is always obeyed, which is the
//!   behaviour of a cache that understands no status code: safe, sometimes a missed store.
//! - **Serving stale when the origin is unreachable (§4.2.4).** Stale is served only when the
//!   client's max-stale allows it. Serving stale on error is RFC 5861's `stale-if-error`
//!   territory and needs the proxy's error path; `stale-while-revalidate` likewise.
//! - **304s without any validator.** §4.3.4 updates a stored response from a validator-less
//!   304 only if the stored one has no validator either; we accept it for the entry we sent
//!   the conditional request for, since our request named that entry's validators. Servers
//!   that drop ETag from 304s are common; refusing would turn each into a full refetch.
//! - **Storing `Vary: *` responses.** Allowed, but they can never be reused by a shared
//!   cache, so they are not stored at all.
//! - **Vary normalization beyond whitespace and line joining (§4.1).** `gzip, br` and
//!   `gzip,br` match; `br, gzip` and q-values do not. Semantic normalization per field is
//!   left for when a workload shows variant explosion.
//! - **Cross-worker effects.** Invalidation (§4.4) and PURGE reach only the worker's own
//!   store here; the proxy broadcasts them to the other workers (`sluice-proxy`'s
//!   `invalidation.rs`). Collapsed forwarding is per worker.
//! - **Passing a client's Range through on a miss.** The miss fetches the whole object (the
//!   proxy drops Range and the client's preconditions) so that it can be stored, and the
//!   client is answered from the entry. When the response turns out not storable, or larger
//!   than the fill cap, the client gets the full 200 (RFC 9110 §14.2 lets a server ignore
//!   Range): correct, but a range of a large uncacheable object costs the whole object once.
//!   Later requests for that key pass for the pass period, Range and all.
//! - **Detecting a truncated close-delimited body.** A response without Content-Length or
//!   chunking ends when the upstream closes (RFC 9112 §6.3); a clean close mid-body cannot be
//!   told from the end, so such a body is stored as received (a reset or a read error still
//!   aborts the fill). Squid and Varnish do the same; HTTP/1.1 origins rarely send them.
//! - **Revalidating disk entries (§4.3).** A stale entry on disk is fetched again in full
//!   instead of with a conditional request: its head would have to be rewritten in the file
//!   after a 304. Disk entries are what memory gave up, so they are rarely the hot ones.
//! - **The Warning field.** Obsoleted by RFC 9111; not generated.
//! - **Request `no-transform`, response `no-transform`, `immutable`.** We never transform,
//!   so the first two are satisfied; `immutable` (RFC 8246) only affects client reloads.
//! - **Adding Date to responses that lack one.** The proxy's job when it forwards; the cache
//!   uses `response_time` in its place (RFC 9110 §6.6.1).
