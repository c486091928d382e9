//! [`Fill`]: a response being copied into the cache, invisible until committed; and
//! [`FillWait`]: how later requests for the same key wait for it (collapsed forwarding).

use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::SystemTime;

use sluice_http::ResponseHead;

use super::{Committed, MemoryStore};
use crate::policy::storable_head;
use crate::{CacheError, CacheKey, EntryMeta, StoredEntry, Variant};

/// Where a fill stands, shared between the [`Fill`], the store's pending table and every
/// [`FillWait`]. `Rc<RefCell<_>>`, not a lock: a store and its fills live on one worker.
#[derive(Debug)]
pub(super) struct PendingFill {
    pub(super) state: FillState,
    /// Set when the key is invalidated or purged mid-fill: the commit is then refused.
    pub(super) invalidated: bool,
    wakers: Vec<Waker>,
}

/// The life of a fill.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FillState {
    /// Body still arriving.
    Filling,
    /// Committed, released or aborted: waiters look up again.
    Done,
    /// Dropped without commit, release or abort (a bug or a panic in the caller): counted
    /// as an aborted fill when the store next sees it.
    Abandoned,
}

impl PendingFill {
    pub(super) fn new() -> Rc<RefCell<Self>> {
        Rc::new(RefCell::new(Self {
            state: FillState::Filling,
            invalidated: false,
            wakers: Vec::new(),
        }))
    }

    /// Moves to `state` and wakes every waiter.
    pub(super) fn finish(this: &RefCell<Self>, state: FillState) {
        let wakers = {
            let mut pending = this.borrow_mut();
            pending.state = state;
            std::mem::take(&mut pending.wakers)
        };
        for waker in wakers {
            waker.wake();
        }
    }
}

/// Why a fill ends without an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AbortReason {
    /// The response turned out not storable: for the store's pass period, lookups of this key
    /// answer [`Lookup::Pass`](super::Lookup::Pass) so requests stop waiting on each other
    /// for a resource that is never cached (Varnish's hit-for-pass).
    Uncacheable,
    /// The transfer failed: the upstream closed early, the body passed the cap, the client
    /// went away past `fill_after_abort`. The next request fills again.
    Failed,
}

/// A response on its way into a [`MemoryStore`]: created by [`MemoryStore::begin_fill`]
/// before the request goes upstream (so concurrent misses wait for it), given the response
/// head with [`set_response`](Self::set_response), fed the body with
/// [`append`](Self::append), and ended by exactly one of [`commit`](Self::commit),
/// [`release`](Self::release) or [`abort`](Self::abort). Nothing is visible to lookups until
/// commit, and only if the body length is the announced one.
///
/// Dropping a fill unfinished wakes its waiters and counts as an abort.
#[derive(Debug)]
pub struct Fill {
    pub(super) key: CacheKey,
    pub(super) pending: Rc<RefCell<PendingFill>>,
    response: Option<ResponseParts>,
    body: Vec<u8>,
    limit: u64,
    /// Set once the body passed `limit`: every later append fails too, so a fill can never
    /// resume with a hole in its body.
    overflowed: bool,
}

#[derive(Debug)]
struct ResponseParts {
    variant: Variant,
    head: ResponseHead,
    request_time: SystemTime,
    response_time: SystemTime,
}

impl Fill {
    pub(super) fn new(key: CacheKey, pending: Rc<RefCell<PendingFill>>, limit: u64) -> Self {
        Self {
            key,
            pending,
            response: None,
            body: Vec::new(),
            limit,
            overflowed: false,
        }
    }

    /// The key being filled.
    pub fn key(&self) -> &CacheKey {
        &self.key
    }

    /// Records the response to store: its variant (from
    /// [`storability`](crate::policy::storability)), its head (stored without the fields RFC
    /// 9111 §3.1 excepts) and the exchange's times. Call again to replace them.
    pub fn set_response(
        &mut self,
        variant: Variant,
        head: &ResponseHead,
        request_time: SystemTime,
        response_time: SystemTime,
    ) {
        self.response = Some(ResponseParts {
            variant,
            head: storable_head(head),
            request_time,
            response_time,
        });
    }

    /// Makes room for a body announced as `len` bytes (Content-Length), so that appending it
    /// never regrows and moves the buffer. Beyond the fill limit nothing is reserved: such a
    /// body fails at append anyway.
    pub fn reserve_body(&mut self, len: u64) {
        if len <= self.limit {
            if let Ok(len) = usize::try_from(len) {
                // Only a hint: without the memory, the body grows as it arrives instead.
                let _ = self
                    .body
                    .try_reserve_exact(len.saturating_sub(self.body.len()));
            }
        }
    }

    /// Appends body bytes (after transfer decoding). Past the fill limit this fails with
    /// [`CacheError::FillTooLarge`], now and for every later append and commit, and frees
    /// what it held: the caller should [`abort`](Self::abort).
    pub fn append(&mut self, bytes: &[u8]) -> Result<(), CacheError> {
        let total = self.body.len() as u64 + bytes.len() as u64;
        if self.overflowed || total > self.limit {
            self.overflowed = true;
            self.body = Vec::new();
            return Err(CacheError::FillTooLarge { limit: self.limit });
        }
        self.body.extend_from_slice(bytes);
        Ok(())
    }

    /// Body bytes received so far.
    pub fn len(&self) -> u64 {
        self.body.len() as u64
    }

    /// True before the first body byte.
    pub fn is_empty(&self) -> bool {
        self.body.is_empty()
    }

    /// Makes the entry visible if the body is exactly `expected_len` bytes and a response was
    /// set; otherwise drops it ([`CacheError::LengthMismatch`],
    /// [`CacheError::FillWithoutResponse`]) and counts an aborted fill.
    /// Waiters are woken either way.
    pub fn commit(
        mut self,
        store: &mut MemoryStore,
        expected_len: u64,
    ) -> Result<Committed, CacheError> {
        let actual = self.len();
        let response = self.response.take();
        let mut body = std::mem::take(&mut self.body);
        let key = self.key.clone();
        if self.overflowed {
            store.finish_fill(&self, FillState::Done, Some(AbortReason::Failed));
            return Err(CacheError::FillTooLarge { limit: self.limit });
        }
        let Some(response) = response else {
            store.finish_fill(&self, FillState::Done, Some(AbortReason::Failed));
            return Err(CacheError::FillWithoutResponse);
        };
        if actual != expected_len {
            store.finish_fill(&self, FillState::Done, Some(AbortReason::Failed));
            return Err(CacheError::LengthMismatch {
                expected: expected_len,
                actual,
            });
        }
        if self.pending.borrow().invalidated {
            store.finish_fill(&self, FillState::Done, Some(AbortReason::Failed));
            return Err(CacheError::InvalidatedWhileFilling);
        }
        // The budget charges `body_len`: give back any unused tail (a chunked body grew by
        // doubling; large buffers shrink by mremap, without a copy).
        body.shrink_to_fit();
        let entry = StoredEntry {
            meta: EntryMeta {
                key,
                variant: response.variant,
                head: response.head,
                request_time: response.request_time,
                response_time: response.response_time,
                body_len: actual,
            },
            body: Arc::new(body),
        };
        let committed = store.insert(Arc::new(entry));
        if matches!(committed, Committed::Stored { .. }) {
            store.stats.fills_committed += 1;
        }
        store.finish_fill(&self, FillState::Done, None);
        Ok(committed)
    }

    /// Ends the fill without an entry and without counting an abort: for a revalidation that
    /// got a 304 and refreshed the stored entry with [`MemoryStore::refresh`] instead.
    pub fn release(self, store: &mut MemoryStore) {
        store.release_fill(&self);
    }

    /// Ends the fill without an entry; see [`AbortReason`].
    pub fn abort(self, store: &mut MemoryStore, reason: AbortReason, now: SystemTime) {
        store.abort_fill(&self, reason, now);
    }
}

impl Drop for Fill {
    fn drop(&mut self) {
        let filling = self.pending.borrow().state == FillState::Filling;
        if filling {
            PendingFill::finish(&self.pending, FillState::Abandoned);
        }
    }
}

/// A pending fill for the key a request looked up: await it (it is a `Future`), or
/// [`register`](Self::register) a waker, then look up again. The fill may have committed a
/// matching entry (a hit), one for another Vary variant, or nothing (a miss: fill it
/// yourself).
#[derive(Debug, Clone)]
pub struct FillWait {
    pub(super) pending: Rc<RefCell<PendingFill>>,
}

impl FillWait {
    /// True once the fill has ended.
    pub fn is_done(&self) -> bool {
        self.pending.borrow().state != FillState::Filling
    }

    /// Asks to have `waker` woken when the fill ends; returns false (and keeps nothing) when
    /// it already has.
    pub fn register(&self, waker: &Waker) -> bool {
        let mut pending = self.pending.borrow_mut();
        if pending.state != FillState::Filling {
            return false;
        }
        if !pending.wakers.iter().any(|known| known.will_wake(waker)) {
            pending.wakers.push(waker.clone());
        }
        true
    }
}

impl Future for FillWait {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.register(cx.waker()) {
            Poll::Pending
        } else {
            Poll::Ready(())
        }
    }
}
