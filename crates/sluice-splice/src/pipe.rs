//! The per-worker pipe pool: pipes sized once with F_SETPIPE_SZ and reused across transfers.
//!
//! The pool is bounded (`transfer.pipe_pool` pipes in existence per worker, lent or idle)
//! because the kernel accounts pipe pages per user: past `/proc/sys/fs/pipe-user-pages-soft` an
//! unprivileged user's new pipes shrink to one page, past `-hard` F_SETPIPE_SZ fails. When the
//! pool is at its bound, the transfer falls back to copy and the fallback is counted.
//!
//! A pipe goes back to the pool only when empty: a lease counts the bytes its transfer put in
//! and took out, and a pipe dropped with bytes still inside (a cancelled or failed transfer) is
//! closed, so the next transfer can never send a stranger's bytes.

use std::cell::{Cell, RefCell};
use std::fmt;
use std::rc::Rc;

use crate::stats::{EngineStats, FallbackReason};
use crate::sys::splice::Pipe;

/// Pipes shared by one worker's transfers.
#[derive(Clone)]
pub struct PipePool {
    inner: Rc<PoolInner>,
}

struct PoolInner {
    idle: RefCell<Vec<Pipe>>,
    /// Pipes in existence, lent or idle.
    open: Cell<usize>,
    bound: usize,
    size: usize,
}

impl fmt::Debug for PipePool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipePool")
            .field("size", &self.inner.size)
            .field("bound", &self.inner.bound)
            .field("open", &self.inner.open.get())
            .field("idle", &self.inner.idle.borrow().len())
            .finish()
    }
}

impl PipePool {
    /// A pool of at most `bound` pipes of `size` bytes each (config `transfer.pipe_pool`,
    /// `transfer.pipe_size`). Pipes are opened on first use.
    pub fn new(size: usize, bound: usize) -> Self {
        PipePool {
            inner: Rc::new(PoolInner {
                idle: RefCell::new(Vec::new()),
                open: Cell::new(0),
                bound,
                size,
            }),
        }
    }

    /// The capacity asked for each pipe.
    pub fn pipe_size(&self) -> usize {
        self.inner.size
    }

    /// Pipes in existence (lent or idle).
    pub fn open(&self) -> usize {
        self.inner.open.get()
    }

    /// Pipes idle in the pool.
    pub fn idle(&self) -> usize {
        self.inner.idle.borrow().len()
    }

    /// Lends an empty pipe: an idle one, or a new one while under the bound. Every failure is
    /// counted and logged here, as a fallback to copying `what` (e.g. "a body"): an empty pool
    /// (`NoPipe`), a pipe that would not open (`PipeCreate`). A pipe the kernel would not size
    /// as asked is still lent, at its real size, and the refusal is counted.
    pub(crate) fn acquire(
        &self,
        stats: &EngineStats,
        what: &str,
    ) -> Result<PipeLease, FallbackReason> {
        let inner = &self.inner;
        if let Some(pipe) = inner.idle.borrow_mut().pop() {
            return Ok(self.lease(pipe));
        }
        if inner.open.get() >= inner.bound {
            stats.record_fallback(
                FallbackReason::NoPipe,
                &format_args!(
                    "all {} pipes of this worker in use (transfer.pipe_pool); copying {what}",
                    inner.open.get()
                ),
            );
            return Err(FallbackReason::NoPipe);
        }
        let new = match Pipe::open(inner.size) {
            Ok(new) => new,
            Err(error) => {
                stats.record_fallback(
                    FallbackReason::PipeCreate,
                    &format_args!("cannot open a pipe: {error}"),
                );
                return Err(FallbackReason::PipeCreate);
            }
        };
        if let Some(error) = &new.size_error {
            stats.record_fallback(
                FallbackReason::PipeSize,
                &format_args!(
                    "pipe of {} bytes instead of transfer.pipe_size {}: {error} (see \
                     /proc/sys/fs/pipe-max-size and pipe-user-pages-soft)",
                    new.pipe.capacity(),
                    inner.size
                ),
            );
        }
        inner.open.set(inner.open.get() + 1);
        Ok(self.lease(new.pipe))
    }

    fn lease(&self, pipe: Pipe) -> PipeLease {
        PipeLease {
            pipe: Some(pipe),
            held: 0,
            pool: self.inner.clone(),
        }
    }
}

/// A pipe lent to one transfer, with the count of bytes it holds.
pub(crate) struct PipeLease {
    pipe: Option<Pipe>,
    held: usize,
    pool: Rc<PoolInner>,
}

impl PipeLease {
    pub(crate) fn pipe(&self) -> &Pipe {
        self.pipe.as_ref().expect("the pipe is only taken in drop")
    }

    /// Bytes in the pipe now.
    pub(crate) fn held(&self) -> usize {
        self.held
    }

    /// Room left before the pipe is full.
    pub(crate) fn room(&self) -> usize {
        self.pipe().capacity().saturating_sub(self.held)
    }

    pub(crate) fn filled(&mut self, n: usize) {
        self.held += n;
    }

    pub(crate) fn drained(&mut self, n: usize) {
        self.held -= n;
    }
}

impl fmt::Debug for PipeLease {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PipeLease")
            .field("held", &self.held)
            .finish()
    }
}

impl Drop for PipeLease {
    fn drop(&mut self) {
        let Some(pipe) = self.pipe.take() else { return };
        if self.held == 0 {
            self.pool.idle.borrow_mut().push(pipe);
        } else {
            // Bytes of an unfinished transfer: close the pipe rather than risk sending them on
            // someone else's connection.
            drop(pipe);
            self.pool.open.set(self.pool.open.get() - 1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pool_is_bounded_and_reuses_only_empty_pipes() {
        let stats = EngineStats::default();
        let pool = PipePool::new(64 * 1024, 2);
        let a = pool.acquire(&stats, "a test").unwrap();
        let mut b = pool.acquire(&stats, "a test").unwrap();
        assert!(a.pipe().capacity() >= 64 * 1024);
        assert_eq!(
            pool.acquire(&stats, "a test").unwrap_err(),
            FallbackReason::NoPipe
        );
        drop(a);
        assert_eq!((pool.open(), pool.idle()), (2, 1));
        b.filled(10);
        drop(b);
        assert_eq!(
            (pool.open(), pool.idle()),
            (1, 1),
            "a pipe holding bytes is closed"
        );
        let _c = pool.acquire(&stats, "a test").unwrap();
        let _d = pool.acquire(&stats, "a test").unwrap();
        assert_eq!(pool.open(), 2);
    }
}
