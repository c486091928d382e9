//! Invalidations that cross workers. Each worker owns its cache (memory store and disk tier,
//! no locks on the request path), but a PURGE or an unsafe method's invalidation arrives at one
//! worker only: the others must drop their copies too, or they would keep serving what the
//! operator or the origin said is gone.
//!
//! The worker that invalidates drops its own copies at once and leaves the key in every other
//! worker's inbox; a worker empties its inbox before each cache lookup, so no later lookup
//! anywhere sees the entry. The check on the request path is one atomic load; the inbox lock
//! is taken only when something is waiting. An inbox holds distinct keys: a worker that does no
//! lookup for a long time costs at most one key per URI invalidated meanwhile.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

use sluice_cache::CacheKey;

/// One inbox per worker, shared by all workers.
#[derive(Debug)]
pub(crate) struct Invalidations {
    inboxes: Vec<Inbox>,
}

#[derive(Debug, Default)]
struct Inbox {
    /// Set with every key left; cleared by the owner when it takes them.
    waiting: AtomicBool,
    keys: Mutex<Vec<CacheKey>>,
}

/// Past this many keys waiting in one inbox, duplicates are removed before more are added.
const DEDUP_AT: usize = 1024;

impl Invalidations {
    pub(crate) fn new(workers: usize) -> Self {
        Invalidations {
            inboxes: (0..workers).map(|_| Inbox::default()).collect(),
        }
    }

    /// Leaves `key` for every worker but `from`, which has already dropped its own copies.
    pub(crate) fn publish(&self, from: usize, key: &CacheKey) {
        for (index, inbox) in self.inboxes.iter().enumerate() {
            if index == from {
                continue;
            }
            let mut keys = inbox.keys.lock().unwrap_or_else(|e| e.into_inner());
            if keys.len() >= DEDUP_AT {
                keys.sort_unstable();
                keys.dedup();
            }
            if !keys.contains(key) || keys.len() < DEDUP_AT {
                keys.push(key.clone());
            }
            inbox.waiting.store(true, Ordering::Release);
        }
    }

    /// The keys other workers invalidated since `worker` last asked; empty, without a lock,
    /// when there are none.
    pub(crate) fn take(&self, worker: usize) -> Vec<CacheKey> {
        let Some(inbox) = self.inboxes.get(worker) else {
            return Vec::new();
        };
        if !inbox.waiting.swap(false, Ordering::Acquire) {
            return Vec::new();
        }
        let mut keys = inbox.keys.lock().unwrap_or_else(|e| e.into_inner());
        std::mem::take(&mut *keys)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_http::{parse_request, Limits, Parsed};

    fn key(url: &str) -> CacheKey {
        let raw = format!("GET {url} HTTP/1.1\r\nHost: h\r\n\r\n");
        let Ok(Parsed::Complete { head, .. }) = parse_request(raw.as_bytes(), &Limits::default())
        else {
            panic!("test request parses");
        };
        CacheKey::from_request(&head).expect("a key")
    }

    #[test]
    fn every_other_worker_gets_the_key_once() {
        let shared = Invalidations::new(3);
        shared.publish(1, &key("http://h/a"));
        assert_eq!(shared.take(0), [key("http://h/a")]);
        assert!(shared.take(0).is_empty(), "taken twice");
        assert!(shared.take(1).is_empty(), "the publisher got its own key");
        assert_eq!(shared.take(2), [key("http://h/a")]);
    }

    #[test]
    fn an_idle_worker_holds_each_key_about_once() {
        let shared = Invalidations::new(2);
        for round in 0..5 {
            for i in 0..DEDUP_AT {
                shared.publish(1, &key(&format!("http://h/{i}")));
            }
            let held = shared.inboxes[0].keys.lock().unwrap().len();
            assert!(held <= 2 * DEDUP_AT, "round {round}: {held} keys held");
        }
        let mut taken = shared.take(0);
        taken.sort();
        taken.dedup();
        assert_eq!(taken.len(), DEDUP_AT);
    }
}
