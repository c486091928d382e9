use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

use super::*;
use crate::policy::test_support::{at, request, response, T0};
use crate::policy::{storability, Storability};
use crate::{CacheError, Variant};

const GET: &str = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
const FRESH: &str = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v1\"\r\n\r\n";

struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

fn counting_waker() -> (Arc<CountingWaker>, Waker) {
    let counter = Arc::new(CountingWaker(AtomicUsize::new(0)));
    (Arc::clone(&counter), Waker::from(counter))
}

fn key(path: &str) -> CacheKey {
    CacheKey::new("http", "h", 80, path)
}

fn store(budget: u64) -> MemoryStore {
    MemoryStore::new(MemoryConfig {
        budget_bytes: budget,
        max_object_bytes: budget,
        max_fill_bytes: budget * 2,
        ..MemoryConfig::default()
    })
}

/// Fills `path` with `body` under `FRESH`, as the proxy would after a miss.
fn fill(store: &mut MemoryStore, path: &str, body: &[u8]) -> Committed {
    fill_with(store, path, GET, FRESH, body)
}

fn fill_with(store: &mut MemoryStore, path: &str, req: &str, res: &str, body: &[u8]) -> Committed {
    let mut fill = store.begin_fill(&key(path)).expect("no fill running");
    let Storability::Storable(variant) = storability(&request(req), &response(res)) else {
        panic!("test response must be storable");
    };
    fill.set_response(variant, &response(res), at(T0), at(T0));
    fill.append(body).expect("under the cap");
    fill.commit(store, body.len() as u64)
        .expect("length matches")
}

fn is_hit(lookup: &Lookup) -> bool {
    matches!(lookup, Lookup::Hit(_))
}

#[test]
fn committed_fill_is_a_hit() {
    let mut s = store(1 << 20);
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
    fill(&mut s, "/a", b"hello");
    let Lookup::Hit(entry) = s.lookup(&key("/a"), &request(GET), at(T0 + 1)) else {
        panic!("expected a hit");
    };
    assert_eq!(&entry.body[..], b"hello");
    let stats = s.stats();
    assert_eq!(
        (
            stats.hits,
            stats.misses,
            stats.fills_committed,
            stats.entries
        ),
        (1, 1, 1, 1)
    );
}

#[test]
fn fill_is_invisible_until_commit() {
    let mut s = store(1 << 20);
    let mut fill = s.begin_fill(&key("/a")).unwrap();
    fill.set_response(Variant::default(), &response(FRESH), at(T0), at(T0));
    fill.append(b"hel").unwrap();
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Pending(_)
    ));
    fill.append(b"lo").unwrap();
    fill.commit(&mut s, 5).unwrap();
    assert!(is_hit(&s.lookup(&key("/a"), &request(GET), at(T0))));
}

#[test]
fn length_mismatch_drops_the_entry() {
    let mut s = store(1 << 20);
    let mut fill = s.begin_fill(&key("/a")).unwrap();
    fill.set_response(Variant::default(), &response(FRESH), at(T0), at(T0));
    fill.append(b"hel").unwrap();
    let err = fill.commit(&mut s, 5).unwrap_err();
    assert!(matches!(
        err,
        CacheError::LengthMismatch {
            expected: 5,
            actual: 3
        }
    ));
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
    assert_eq!(s.stats().fills_aborted, 1);
}

#[test]
fn fill_past_cap_fails() {
    let mut s = store(100);
    let mut fill = s.begin_fill(&key("/a")).unwrap();
    assert!(matches!(
        fill.append(&[0; 201]),
        Err(CacheError::FillTooLarge { limit: 200 })
    ));
    fill.abort(&mut s, AbortReason::Failed, at(T0));
    assert_eq!(s.stats().fills_aborted, 1);
}

#[test]
fn collapsed_misses_wait_for_one_fill() {
    let mut s = store(1 << 20);
    let mut fill = s.begin_fill(&key("/a")).unwrap();
    let (counter, waker) = counting_waker();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let Lookup::Pending(mut wait) = s.lookup(&key("/a"), &request(GET), at(T0)) else {
            panic!("expected to wait");
        };
        let mut cx = Context::from_waker(&waker);
        assert_eq!(Pin::new(&mut wait).poll(&mut cx), Poll::Pending);
        waits.push(wait);
    }
    assert!(s.begin_fill(&key("/a")).is_err(), "one fill per key");
    fill.set_response(Variant::default(), &response(FRESH), at(T0), at(T0));
    fill.append(b"x").unwrap();
    fill.commit(&mut s, 1).unwrap();
    // The same waker was registered once per wait handle, all on one fill: deduplicated.
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    for wait in &waits {
        assert!(wait.is_done());
        assert!(is_hit(&s.lookup(&key("/a"), &request(GET), at(T0))));
    }
    assert_eq!((s.stats().collapsed, s.stats().misses), (5, 0));
}

#[test]
fn aborted_fill_wakes_waiters_into_a_miss() {
    let mut s = store(1 << 20);
    let fill = s.begin_fill(&key("/a")).unwrap();
    let Lookup::Pending(wait) = s.lookup(&key("/a"), &request(GET), at(T0)) else {
        panic!("expected to wait");
    };
    let (counter, waker) = counting_waker();
    assert!(wait.register(&waker));
    fill.abort(&mut s, AbortReason::Failed, at(T0));
    assert_eq!(counter.0.load(Ordering::SeqCst), 1);
    assert!(!wait.register(&waker), "done: nothing to wait for");
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
}

#[test]
fn dropped_fill_wakes_waiters_and_counts_an_abort() {
    let mut s = store(1 << 20);
    let fill = s.begin_fill(&key("/a")).unwrap();
    let Lookup::Pending(wait) = s.lookup(&key("/a"), &request(GET), at(T0)) else {
        panic!("expected to wait");
    };
    drop(fill);
    assert!(wait.is_done());
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
    assert_eq!(s.stats().fills_aborted, 1);
}

#[test]
fn uncacheable_abort_passes_the_key_for_a_while() {
    let mut s = store(1 << 20);
    let fill = s.begin_fill(&key("/a")).unwrap();
    fill.abort(&mut s, AbortReason::Uncacheable, at(T0));
    assert_eq!(
        (s.stats().fills_uncacheable, s.stats().fills_aborted),
        (1, 0),
        "a response that may not be stored is no failed fill"
    );
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0 + 1)),
        Lookup::Pass
    ));
    let later = at(T0) + s.config().pass_period + Duration::from_secs(1);
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), later),
        Lookup::Miss
    ));
}

#[test]
fn stale_entry_asks_for_revalidation_with_validators() {
    let mut s = store(1 << 20);
    fill(&mut s, "/a", b"x");
    let Lookup::Revalidate {
        request: conditional,
        ..
    } = s.lookup(&key("/a"), &request(GET), at(T0 + 61))
    else {
        panic!("expected revalidation");
    };
    assert_eq!(
        conditional.headers.get("if-none-match"),
        Some(&b"\"v1\""[..])
    );
    // While one request revalidates under a fill, the others wait for it.
    let revalidating = s.begin_fill(&key("/a")).unwrap();
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0 + 61)),
        Lookup::Pending(_)
    ));
    revalidating.release(&mut s);
}

#[test]
fn refresh_after_304_updates_head_and_keeps_body() {
    let mut s = store(1 << 20);
    fill(&mut s, "/a", b"body");
    let Lookup::Revalidate { entry, .. } = s.lookup(&key("/a"), &request(GET), at(T0 + 61)) else {
        panic!("expected revalidation");
    };
    let not_modified = response("HTTP/1.1 304 Not Modified\r\nCache-Control: max-age=600\r\n\r\n");
    let head = crate::policy::merge_not_modified(&entry.meta.head, &not_modified).unwrap();
    let refreshed = s.refresh(&entry, head, at(T0 + 61), at(T0 + 61)).unwrap();
    assert!(Arc::ptr_eq(&refreshed.body, &entry.body));
    assert!(is_hit(&s.lookup(&key("/a"), &request(GET), at(T0 + 300))));
    assert_eq!(s.stats().entries, 1);
}

#[test]
fn only_if_cached_miss_is_504() {
    let mut s = store(1 << 20);
    let req = request("GET /a HTTP/1.1\r\nHost: h\r\nCache-Control: only-if-cached\r\n\r\n");
    assert!(matches!(
        s.lookup(&key("/a"), &req, at(T0)),
        Lookup::GatewayTimeout
    ));
}

#[test]
fn vary_keeps_one_entry_per_variant() {
    let mut s = store(1 << 20);
    let res = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: Accept-Language\r\n\r\n";
    let fr = "GET /a HTTP/1.1\r\nHost: h\r\nAccept-Language: fr\r\n\r\n";
    let en = "GET /a HTTP/1.1\r\nHost: h\r\nAccept-Language: en\r\n\r\n";
    fill_with(&mut s, "/a", fr, res, b"bonjour");
    assert!(matches!(
        s.lookup(&key("/a"), &request(en), at(T0)),
        Lookup::Miss
    ));
    fill_with(&mut s, "/a", en, res, b"hello");
    let Lookup::Hit(entry) = s.lookup(&key("/a"), &request(fr), at(T0)) else {
        panic!("fr variant");
    };
    assert_eq!(&entry.body[..], b"bonjour");
    let Lookup::Hit(entry) = s.lookup(&key("/a"), &request(en), at(T0)) else {
        panic!("en variant");
    };
    assert_eq!(&entry.body[..], b"hello");
    // The same variant again replaces, not adds.
    fill_with(&mut s, "/a", en, res, b"hi");
    assert_eq!(s.stats().entries, 2);
}

#[test]
fn invalidate_drops_every_variant() {
    let mut s = store(1 << 20);
    let res = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nVary: Accept\r\n\r\n";
    fill_with(
        &mut s,
        "/a",
        "GET /a HTTP/1.1\r\nHost: h\r\nAccept: x\r\n\r\n",
        res,
        b"1",
    );
    fill_with(
        &mut s,
        "/a",
        "GET /a HTTP/1.1\r\nHost: h\r\nAccept: y\r\n\r\n",
        res,
        b"2",
    );
    assert_eq!(s.invalidate(&key("/a")), 2);
    assert_eq!((s.stats().entries, s.used_bytes()), (0, 0));
}

#[test]
fn a_fill_running_when_its_key_is_invalidated_never_commits() {
    let mut s = store(1 << 20);
    let mut fill = s.begin_fill(&key("/a")).unwrap();
    let Lookup::Pending(wait) = s.lookup(&key("/a"), &request(GET), at(T0)) else {
        panic!("expected to wait");
    };
    s.invalidate(&key("/a"));
    // A request after the invalidation does not wait on the doomed fill.
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
    fill.set_response(Variant::default(), &response(FRESH), at(T0), at(T0));
    fill.append(b"old").unwrap();
    assert!(matches!(
        fill.commit(&mut s, 3),
        Err(CacheError::InvalidatedWhileFilling)
    ));
    assert!(wait.is_done(), "waiters are woken to look up again");
    assert!(matches!(
        s.lookup(&key("/a"), &request(GET), at(T0)),
        Lookup::Miss
    ));
    assert_eq!((s.stats().entries, s.stats().fills_aborted), (0, 1));
}

#[test]
fn head_is_served_from_get_entry() {
    let mut s = store(1 << 20);
    fill(&mut s, "/a", b"x");
    let head = request("HEAD /a HTTP/1.1\r\nHost: h\r\n\r\n");
    assert!(is_hit(&s.lookup(&key("/a"), &head, at(T0))));
}

#[test]
fn budget_holds_under_many_fills() {
    let budget = 64 * 1024;
    let mut s = store(budget);
    let mut evicted = 0;
    for i in 0..400u64 {
        let size = (i * 7919 % 3000) as usize;
        if let Committed::Stored { evicted: out } = fill(&mut s, &format!("/o{i}"), &vec![7; size])
        {
            evicted += out.len();
        }
        assert!(s.used_bytes() <= budget, "over budget after fill {i}");
    }
    assert!(evicted > 0);
    assert_eq!(s.stats().evictions, evicted as u64);
    assert!(s.stats().entries > 10);
}

#[test]
fn object_over_cap_is_handed_back() {
    let mut s = MemoryStore::new(MemoryConfig {
        max_object_bytes: 1000,
        max_fill_bytes: 10_000,
        ..MemoryConfig::default()
    });
    let out = fill(&mut s, "/big", &[1; 5000]);
    let Committed::TooLargeForMemory(entry) = out else {
        panic!("expected oversize");
    };
    assert_eq!(entry.meta.body_len, 5000);
    assert_eq!((s.stats().entries, s.stats().fills_oversize), (0, 1));
}

#[test]
fn gdsf_evicts_large_cold_objects_before_small_hot_ones() {
    let mut s = store(20_000);
    fill(&mut s, "/small", &[0; 100]);
    fill(&mut s, "/large", &[0; 8000]);
    for _ in 0..3 {
        assert!(is_hit(&s.lookup(&key("/small"), &request(GET), at(T0))));
    }
    let Committed::Stored { evicted } = fill(&mut s, "/next", &[0; 11_000]) else {
        panic!("fits");
    };
    let evicted: Vec<&str> = evicted
        .iter()
        .map(|e| e.meta.key.path_and_query())
        .collect();
    assert_eq!(evicted, ["/large"]);
}

#[test]
fn entry_cost_counts_heads_keys_and_index() {
    let mut s = store(1 << 20);
    fill(&mut s, "/a", &[0; 1000]);
    let head_bytes: u64 = response(FRESH)
        .headers
        .iter()
        .map(|f| (f.name.len() + f.value.len()) as u64)
        .sum();
    // Beyond body and raw field bytes: field structs, key twice, entry, map slots, allocations.
    assert!(
        s.used_bytes() > 1000 + head_bytes + 400,
        "charged {}",
        s.used_bytes()
    );
}

#[test]
fn a_fill_invalidated_then_dropped_unfinished_counts_one_abort() {
    let mut s = store(1 << 20);
    let fill = s.begin_fill(&key("/a")).unwrap();
    s.invalidate(&key("/a"));
    drop(fill);
    let other = s.begin_fill(&key("/b")).unwrap();
    s.invalidate(&key("/b"));
    other.abort(&mut s, AbortReason::Uncacheable, at(T0));
    let stats = s.stats();
    assert_eq!((stats.fills_aborted, stats.fills_uncacheable), (2, 0));
}
