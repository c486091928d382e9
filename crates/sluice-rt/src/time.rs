//! Timers: a deadline heap per runtime, [`sleep`] and [`timeout`].

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use slab::Slab;

use crate::executor::{try_with_core, with_core};

#[derive(Debug)]
struct TimerEntry {
    deadline: Instant,
    waker: Option<Waker>,
}

/// Pending deadlines of one runtime.
///
/// A cancelled timer (its future dropped) leaves its heap node behind; nodes are matched to live
/// entries by key and deadline when popped, and the heap is rebuilt when stale nodes outnumber
/// live ones, because every request arms and drops several timeouts.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    entries: Slab<TimerEntry>,
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl Timers {
    fn insert(&mut self, deadline: Instant, waker: Waker) -> usize {
        let key = self.entries.insert(TimerEntry {
            deadline,
            waker: Some(waker),
        });
        self.heap.push(Reverse((deadline, key)));
        if self.heap.len() > 1024 && self.heap.len() > 2 * self.entries.len() {
            self.heap = self
                .entries
                .iter()
                .map(|(k, e)| Reverse((e.deadline, k)))
                .collect();
        }
        key
    }

    /// The earliest live deadline.
    pub(crate) fn next_deadline(&self) -> Option<Instant> {
        // The top may be stale; it is then merely an early wake-up.
        self.heap.peek().map(|Reverse((deadline, _))| *deadline)
    }

    /// Removes the nodes due at `now` and returns the wakers of the live ones.
    pub(crate) fn take_expired(&mut self, now: Instant) -> Vec<Waker> {
        let mut wakers = Vec::new();
        while let Some(Reverse((deadline, key))) = self.heap.peek().copied() {
            if deadline > now {
                break;
            }
            self.heap.pop();
            if let Some(entry) = self.entries.get_mut(key) {
                if entry.deadline == deadline {
                    wakers.extend(entry.waker.take());
                }
            }
        }
        wakers
    }
}

/// Completes at `deadline`.
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep {
        deadline,
        key: None,
    }
}

/// Completes after `duration`.
pub fn sleep(duration: Duration) -> Sleep {
    sleep_until(Instant::now() + duration)
}

/// The future returned by [`sleep`] and [`sleep_until`].
#[derive(Debug)]
pub struct Sleep {
    deadline: Instant,
    key: Option<usize>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            self.cancel();
            return Poll::Ready(());
        }
        let deadline = self.deadline;
        match self.key {
            Some(key) => with_core(|core| {
                if let Some(entry) = core.timers.borrow_mut().entries.get_mut(key) {
                    match &entry.waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        _ => entry.waker = Some(cx.waker().clone()),
                    }
                }
            }),
            None => {
                let key = with_core(|core| {
                    core.timers
                        .borrow_mut()
                        .insert(deadline, cx.waker().clone())
                });
                self.key = Some(key);
            }
        }
        Poll::Pending
    }
}

impl Sleep {
    fn cancel(&mut self) {
        if let Some(key) = self.key.take() {
            try_with_core(|core| core.timers.borrow_mut().entries.try_remove(key));
        }
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        self.cancel();
    }
}

/// The error of a [`timeout`] whose duration passed first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Elapsed;

impl fmt::Display for Elapsed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline elapsed")
    }
}

impl std::error::Error for Elapsed {}

/// Runs `future` for at most `duration`.
pub async fn timeout<F: Future>(duration: Duration, future: F) -> Result<F::Output, Elapsed> {
    let mut future = std::pin::pin!(future);
    let mut timer = std::pin::pin!(sleep(duration));
    std::future::poll_fn(|cx| {
        if let Poll::Ready(output) = future.as_mut().poll(cx) {
            return Poll::Ready(Ok(output));
        }
        timer.as_mut().poll(cx).map(|()| Err(Elapsed))
    })
    .await
}
