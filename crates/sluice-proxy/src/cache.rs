//! The cache step of an exchange (docs/ARCHITECTURE.md, "Cache"): GET and HEAD are looked up in
//! the worker's memory store and answered from it when they can be; a miss goes upstream under a
//! [`Fill`], so concurrent misses for the key wait for that one fetch (collapsed forwarding) and
//! the body is copied into the store while it is relayed (`cache_fill`); a stale entry is
//! revalidated; unsafe methods invalidate; PURGE removes.
//!
//! The RFC 9111 rules themselves are `sluice_cache::policy`; this module only wires them to
//! sockets.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::SystemTime;

use sluice_cache::policy::Verdict;
use sluice_cache::policy::{self, BodySlice, NotStorableReason, Storability};
use sluice_cache::{AbortReason, CacheKey, DiskHit, Fill, Lookup, MemoryStore, StoredEntry};
use sluice_http::{BodyFraming, Method, RequestHead, ResponseHead};
use sluice_rt::timeout;

use crate::access_log::AccessRecord;
use crate::cache_fill::{self, FillMode, FillOutcome};
use crate::client::ClientConnection;
use crate::disk_hit;
use crate::error::{ProxyError, Side, Termination};
use crate::exchange::{fail, upstream_request_head, Exchange, UpstreamResponse};
use crate::route::client_allowed;
use crate::worker::{cache_stats_line, Worker};

/// Client request fields that make the answer depend on what the client holds or wants a part
/// of. A fill asks the upstream without them (so it gets the whole 200 to store) and the client
/// is answered from the stored entry by [`policy::respond`].
const CLIENT_SELECTORS: [&str; 6] = [
    "range",
    "if-range",
    "if-match",
    "if-none-match",
    "if-modified-since",
    "if-unmodified-since",
];

/// Runs the exchange through the cache when it applies (PURGE; GET and HEAD without a body while
/// the cache is on); `None` leaves it to the plain path.
pub(crate) async fn try_run(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
) -> Option<bool> {
    match &exchange.head.method {
        Method::Other(name) if name == "PURGE" => return Some(purge(exchange, conn, record).await),
        Method::Other(name) if name == "STATS" => return Some(stats(exchange, conn, record).await),
        _ => {}
    }
    let cache = exchange.worker.cache.as_ref()?;
    apply_other_workers_invalidations(exchange.worker);
    let bodiless = matches!(
        exchange.request_framing,
        BodyFraming::Empty | BodyFraming::Length(0)
    );
    if !matches!(exchange.head.method, Method::Get | Method::Head) || !bodiless {
        return None;
    }
    let key = CacheKey::from_request(exchange.head).ok()?;
    Some(serve(exchange, cache, &key, conn, record).await)
}

/// After an unsafe request got `response`, drops what RFC 9111 §4.4 says it invalidates.
pub(crate) fn invalidate_after(exchange: &Exchange<'_>, response: &ResponseHead) {
    let Some(cache) = &exchange.worker.cache else {
        return;
    };
    for key in policy::invalidated_keys(exchange.head, response) {
        let dropped = invalidate_everywhere(exchange.worker, cache, &key);
        if dropped > 0 {
            tracing::debug!(key = %key, dropped, "cache invalidated");
        }
    }
}

/// Drops `key`'s entries from this worker's memory and disk now, and from the other workers'
/// before their next lookup; returns how many this worker held.
fn invalidate_everywhere(worker: &Worker, cache: &RefCell<MemoryStore>, key: &CacheKey) -> usize {
    worker.invalidations.publish(worker.id, key);
    invalidate_here(worker, cache, key)
}

fn invalidate_here(worker: &Worker, cache: &RefCell<MemoryStore>, key: &CacheKey) -> usize {
    let on_disk = worker
        .disk
        .as_ref()
        .map_or(0, |disk| disk.borrow_mut().invalidate(key));
    cache.borrow_mut().invalidate(key) + on_disk
}

/// Applies the PURGEs and invalidations other workers handled since this one last looked.
fn apply_other_workers_invalidations(worker: &Worker) {
    let Some(cache) = &worker.cache else {
        return;
    };
    for key in worker.invalidations.take(worker.id) {
        let dropped = invalidate_here(worker, cache, &key);
        if dropped > 0 {
            tracing::debug!(key = %key, dropped, "cache invalidated by another worker");
        }
    }
}

async fn serve(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    key: &CacheKey,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
) -> bool {
    // Set once this exchange filled the key itself: the next lookup's hit is our own miss, and
    // a second miss (the entry did not stay) goes upstream without a fill instead of looping.
    let mut filled = false;
    loop {
        let lookup = cache
            .borrow_mut()
            .lookup(key, exchange.head, SystemTime::now());
        let (fill, stale) = match lookup {
            Lookup::Hit(entry) => {
                let label = if filled { "MISS" } else { "HIT" };
                return answer_from_entry(exchange, conn, record, &entry, label).await;
            }
            Lookup::Pending(wait) => {
                tracing::debug!(key = %key, "cache: waiting for the fill in progress");
                wait.await;
                continue;
            }
            Lookup::GatewayTimeout => return fail(conn, record, ProxyError::NotCached).await,
            Lookup::Pass => return pass(exchange, conn, record, "pass").await,
            // HEAD fills nothing (its response has no body to store) but is answered from a
            // GET's entry above.
            Lookup::Miss if filled => return pass(exchange, conn, record, "miss").await,
            Lookup::Revalidate { .. } if filled || exchange.head.method == Method::Head => {
                return pass(exchange, conn, record, "miss").await;
            }
            Lookup::Miss if !filled => {
                if let Some(hit) = disk_lookup(exchange, key) {
                    return disk_hit::answer(exchange, conn, record, hit).await;
                }
                if exchange.head.method == Method::Head {
                    return pass(exchange, conn, record, "miss").await;
                }
                match cache.borrow_mut().begin_fill(key) {
                    Ok(fill) => (fill, None),
                    Err(wait) => {
                        drop(wait);
                        continue;
                    }
                }
            }
            Lookup::Miss => match cache.borrow_mut().begin_fill(key) {
                Ok(fill) => (fill, None),
                Err(wait) => {
                    drop(wait);
                    continue;
                }
            },
            Lookup::Revalidate { entry, request } => match cache.borrow_mut().begin_fill(key) {
                Ok(fill) => (fill, Some((entry, request))),
                Err(_) => continue,
            },
        };
        filled = true;
        match fetch_and_fill(exchange, cache, conn, record, fill, stale).await {
            Fetched::Done(keep_alive) => return keep_alive,
            Fetched::LookUpAgain => continue,
        }
    }
}

/// What a fetch under a fill left to do.
enum Fetched {
    /// The client was answered (or is gone): the exchange's result.
    Done(bool),
    /// The entry was stored without answering the client: look it up and answer from it.
    LookUpAgain,
}

async fn fetch_and_fill(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    fill: Fill,
    stale: Option<(Arc<StoredEntry>, RequestHead)>,
) -> Fetched {
    let selective = CLIENT_SELECTORS
        .iter()
        .any(|name| exchange.head.headers.contains(name));
    let request = match &stale {
        // Already without the client's preconditions and Range, with our validators.
        Some((_, request)) => request.clone(),
        None => whole_object_request(exchange.head),
    };
    let request_time = SystemTime::now();
    let bytes = upstream_request_head(exchange.worker, &request, exchange.route, conn.peer.ip());
    let response = match exchange.fetch(conn, bytes, record).await {
        Ok(response) => response,
        Err(keep_alive) => {
            fill.abort(
                &mut cache.borrow_mut(),
                AbortReason::Failed,
                SystemTime::now(),
            );
            return Fetched::Done(keep_alive);
        }
    };
    let response_time = SystemTime::now();
    if let Some((entry, _)) = stale {
        if response.head.status == 304 {
            let answer = not_modified(exchange, cache, fill, response, entry, request_time);
            let (entry, label) = answer;
            return Fetched::Done(answer_from_entry(exchange, conn, record, &entry, label).await);
        }
    }
    record.cache = "miss";
    exchange.x_cache.set(Some("MISS"));
    let variant = match policy::storability(exchange.head, &response.head) {
        Storability::Storable(variant) => variant,
        Storability::NotStorable(reason) => {
            // An interim, partial or server-error answer says nothing about the next response
            // (a 503 in an outage): fill again next time instead of passing the key for the
            // store's pass period, which would also stop collapsing misses while it recovers.
            let abort = if reason == NotStorableReason::Status || response.head.status >= 500 {
                AbortReason::Failed
            } else {
                AbortReason::Uncacheable
            };
            fill.abort(&mut cache.borrow_mut(), abort, SystemTime::now());
            return Fetched::Done(exchange.relay(conn, response, record).await);
        }
    };
    let fill_cap = exchange.worker.config.cache.fill_cap() as u64;
    let framing = response.head.body_framing(&Method::Get);
    let mode = match framing {
        Ok(BodyFraming::Length(n)) if n > fill_cap => {
            // Announced too large to keep: relay it with the listener's engine (no copy), and
            // let the next requests for the key pass straight through for a while.
            fill.abort(
                &mut cache.borrow_mut(),
                AbortReason::Uncacheable,
                SystemTime::now(),
            );
            record.cache = "pass";
            return Fetched::Done(exchange.relay(conn, response, record).await);
        }
        Ok(BodyFraming::Length(_)) if selective => FillMode::Silent,
        _ => FillMode::Relay,
    };
    let mut fill = fill;
    fill.set_response(variant, &response.head, request_time, response_time);
    if let Ok(BodyFraming::Length(len)) = framing {
        fill.reserve_body(len);
    }
    match cache_fill::run(exchange, cache, conn, response, fill, mode, record).await {
        FillOutcome::Relayed(keep_alive) => Fetched::Done(keep_alive),
        FillOutcome::Stored => Fetched::LookUpAgain,
        FillOutcome::StoredElsewhere(entry) => {
            Fetched::Done(answer_from_entry(exchange, conn, record, &entry, "MISS").await)
        }
        FillOutcome::Failed(error) => Fetched::Done(fail(conn, record, error).await),
    }
}

/// A 304 to our revalidation: the stored entry gets the 304's fields (RFC 9111 §4.3.4) and
/// answers the client. A 304 for another representation leaves the entry as it was (the
/// client still gets it: it is what the upstream had a moment ago).
fn not_modified(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    fill: Fill,
    response: UpstreamResponse,
    entry: Arc<StoredEntry>,
    request_time: SystemTime,
) -> (Arc<StoredEntry>, &'static str) {
    let now = SystemTime::now();
    let merged = policy::merge_not_modified(&entry.meta.head, &response.head);
    let reusable = response.head.keep_alive() && response.buf.is_empty();
    if reusable {
        exchange
            .worker
            .pool
            .borrow_mut()
            .put(response.addr, response.stream);
    }
    let mut store = cache.borrow_mut();
    match merged {
        Ok(head) => {
            let refreshed = store.refresh(&entry, head, request_time, now);
            fill.release(&mut store);
            (refreshed.unwrap_or(entry), "REVALIDATED")
        }
        Err(error) => {
            tracing::debug!(key = %entry.meta.key, %error, "304 names another representation");
            fill.abort(&mut store, AbortReason::Failed, now);
            (entry, "STALE")
        }
    }
}

/// The client's request without the fields that select part of the object or make the answer
/// conditional, so the upstream sends the whole object to store.
fn whole_object_request(head: &RequestHead) -> RequestHead {
    let mut request = head.clone();
    for name in CLIENT_SELECTORS {
        request.headers.remove(name);
    }
    request
}

/// Forwards the request without the cache taking part (no fill, no collapsing).
async fn pass(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    label: &'static str,
) -> bool {
    record.cache = label;
    exchange.x_cache.set(Some("MISS"));
    let bytes = upstream_request_head(
        exchange.worker,
        exchange.head,
        exchange.route,
        conn.peer.ip(),
    );
    exchange.run(conn, bytes, record).await
}

/// Answers the client from `entry` with [`policy::respond`]: its own conditionals, HEAD and a
/// single Range are decided there; the head and the body slice leave in one `writev`.
async fn answer_from_entry(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    entry: &StoredEntry,
    label: &'static str,
) -> bool {
    let hit = policy::respond(exchange.head, &entry.meta, SystemTime::now());
    record.status = hit.head.status;
    record.cache = match label {
        "HIT" => "hit",
        "REVALIDATED" => "revalidated",
        "STALE" => "stale",
        _ => "miss",
    };
    exchange.x_cache.set(Some(label));
    let keep_client = exchange.head.keep_alive() && !exchange.worker.shutdown.is_requested();
    let head = exchange.client_response_head(hit.head, keep_client, false);
    let body = match hit.body {
        BodySlice::Empty => &[][..],
        BodySlice::Bytes { offset, len } => {
            let range = usize::try_from(offset)
                .ok()
                .zip(usize::try_from(offset.saturating_add(len)).ok());
            match range.and_then(|(start, end)| entry.body.get(start..end)) {
                Some(body) => body,
                // respond() slices within body_len, which is the body's length.
                None => &[][..],
            }
        }
    };
    let idle = exchange.worker.config.timeouts.body_idle;
    match timeout(idle, conn.stream.write_all_vectored(&head, body)).await {
        Ok(Ok(())) => {
            record.bytes += (head.len() + body.len()) as u64;
            keep_client
        }
        _ => {
            record.termination = Termination::by(Side::Client, crate::error::Phase::Data);
            record.error = Some(String::from(
                "client write failed while answering from cache",
            ));
            false
        }
    }
}

/// A usable disk entry for the request: fresh, or stale but allowed. Stale ones that need
/// validation are left to a fill, whose commit (and a later eviction) replaces them.
fn disk_lookup(exchange: &Exchange<'_>, key: &CacheKey) -> Option<DiskHit> {
    let disk = exchange.worker.disk.as_ref()?;
    let hit = disk
        .borrow_mut()
        .lookup(key, exchange.head, SystemTime::now())?;
    matches!(hit.verdict, Verdict::Fresh | Verdict::ServeStale).then_some(hit)
}

/// STATS (any target): this worker's cache counters as one logfmt line, for clients in
/// `cache.purge_allow`.
async fn stats(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
) -> bool {
    record.cache = "stats";
    let Some(counters) = cache_stats_line(exchange.worker) else {
        return fail(conn, record, ProxyError::PurgeWithoutCache).await;
    };
    let peer = conn.peer.ip();
    if !client_allowed(&exchange.worker.config.cache.purge_allow, peer) {
        return fail(conn, record, ProxyError::PurgeNotAllowed(peer)).await;
    }
    let line = format!("worker={} {counters}\n", exchange.worker.id);
    answer_text(exchange, conn, record, 200, "OK", &line).await
}

/// A short text response of our own that keeps the connection when the client does.
async fn answer_text(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    status: u16,
    reason: &str,
    body: &str,
) -> bool {
    let keep_client = exchange.head.keep_alive() && !exchange.worker.shutdown.is_requested();
    let connection = if keep_client { "keep-alive" } else { "close" };
    let response = format!(
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain; charset=utf-8\r\n\
         Content-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    );
    record.status = status;
    let idle = exchange.worker.config.timeouts.body_idle;
    match timeout(idle, conn.stream.write_all(response.as_bytes())).await {
        Ok(Ok(())) => {
            record.bytes += response.len() as u64;
            keep_client
        }
        _ => false,
    }
}

/// PURGE: drops every stored variant of the target on this worker; 200 when something was
/// stored, 404 when not, 403 outside `cache.purge_allow`.
async fn purge(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
) -> bool {
    record.cache = "purge";
    let Some(cache) = &exchange.worker.cache else {
        return fail(conn, record, ProxyError::PurgeWithoutCache).await;
    };
    let peer = conn.peer.ip();
    if !client_allowed(&exchange.worker.config.cache.purge_allow, peer) {
        return fail(conn, record, ProxyError::PurgeNotAllowed(peer)).await;
    }
    let key = match CacheKey::from_request(exchange.head) {
        Ok(key) => key,
        Err(_) => return fail(conn, record, ProxyError::NotAbsoluteForm).await,
    };
    // This worker's own copies decide 200 or 404 (a store per worker, none shared); the others
    // drop theirs before their next lookup.
    let removed = invalidate_everywhere(exchange.worker, cache, &key);
    let (status, reason, body) = if removed > 0 {
        (
            200,
            "OK",
            format!("purged {removed} stored response(s) of {key}\n"),
        )
    } else {
        (404, "Not Found", format!("nothing stored for {key}\n"))
    };
    answer_text(exchange, conn, record, status, reason, &body).await
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_http::{parse_request, Limits, Parsed};

    #[test]
    fn whole_object_request_drops_range_and_preconditions_only() {
        let raw = b"GET http://h/a HTTP/1.1\r\nHost: h\r\nRange: bytes=0-1\r\n\
                    If-None-Match: \"x\"\r\nIf-Modified-Since: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
                    Accept-Encoding: gzip\r\n\r\n";
        let Ok(Parsed::Complete { head, .. }) = parse_request(raw, &Limits::default()) else {
            panic!("test request parses");
        };
        let request = whole_object_request(&head);
        for name in CLIENT_SELECTORS {
            assert!(!request.headers.contains(name), "{name} kept");
        }
        assert!(request.headers.contains("accept-encoding"));
        assert!(request.headers.contains("host"));
    }
}
