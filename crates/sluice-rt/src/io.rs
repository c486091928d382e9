//! Readiness-driven I/O on any fd: [`Async`] tries the system call first and parks the task only
//! when the kernel says it would block.

use std::fmt;
use std::future::poll_fn;
use std::io;
use std::os::fd::{AsFd, AsRawFd};
use std::task::{Context, Poll, Waker};

use slab::Slab;

use crate::executor::{try_with_core, with_core};
use crate::reactor::{Readiness, Token};

/// The readiness the executor remembers for one registered fd.
#[derive(Debug, Default)]
struct IoState {
    readable: bool,
    writable: bool,
    read_waker: Option<Waker>,
    write_waker: Option<Waker>,
}

/// Per-runtime table of registered fds, indexed by reactor token.
#[derive(Debug, Default)]
pub(crate) struct IoTable {
    sources: Slab<IoState>,
}

impl IoTable {
    /// Records what the reactor reported and returns the wakers to wake (outside the borrow).
    pub(crate) fn set_ready(&mut self, readiness: &Readiness) -> [Option<Waker>; 2] {
        let Some(state) = self.sources.get_mut(readiness.token) else {
            return [None, None];
        };
        let mut wakers = [None, None];
        if readiness.readable {
            state.readable = true;
            wakers[0] = state.read_waker.take();
        }
        if readiness.writable {
            state.writable = true;
            wakers[1] = state.write_waker.take();
        }
        wakers
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Read,
    Write,
}

/// An fd registered with the current worker's reactor.
///
/// Operations run the closure given to them (a non-blocking system call) and retry after the
/// reactor reports readiness whenever it fails with `WouldBlock`. The fd must be in
/// non-blocking mode; [`crate::net`] types make sure of that.
pub struct Async<T: AsFd> {
    io: Option<T>,
    token: Token,
}

impl<T: AsFd> fmt::Debug for Async<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fd = self.io.as_ref().map(|io| io.as_fd().as_raw_fd());
        f.debug_struct("Async")
            .field("fd", &fd)
            .field("token", &self.token)
            .finish()
    }
}

impl<T: AsFd> Async<T> {
    /// Registers `io` with the current runtime. Must be called inside [`crate::Runtime::block_on`].
    pub fn new(io: T) -> io::Result<Self> {
        let token = with_core(|core| -> io::Result<Token> {
            // Assume ready: the first operation then costs one system call, not one wait.
            let token = core.io.borrow_mut().sources.insert(IoState {
                readable: true,
                writable: true,
                ..Default::default()
            });
            if let Err(error) = core.reactor().register(io.as_fd(), token) {
                core.io.borrow_mut().sources.remove(token);
                return Err(error);
            }
            Ok(token)
        })?;
        Ok(Self {
            io: Some(io),
            token,
        })
    }

    /// The wrapped I/O object.
    pub fn get_ref(&self) -> &T {
        self.io
            .as_ref()
            .expect("io is only taken in into_inner and drop")
    }

    /// Deregisters and returns the wrapped object.
    pub fn into_inner(mut self) -> T {
        self.deregister();
        self.io
            .take()
            .expect("io is only taken in into_inner and drop")
    }

    fn deregister(&mut self) {
        if let Some(io) = &self.io {
            try_with_core(|core| {
                let _ = core.reactor().deregister(io.as_fd());
                core.io.borrow_mut().sources.try_remove(self.token);
            });
        }
    }

    fn poll_ready(&self, cx: &mut Context<'_>, direction: Direction) -> Poll<()> {
        with_core(|core| {
            let mut table = core.io.borrow_mut();
            let Some(state) = table.sources.get_mut(self.token) else {
                return Poll::Ready(());
            };
            let (ready, waker) = match direction {
                Direction::Read => (state.readable, &mut state.read_waker),
                Direction::Write => (state.writable, &mut state.write_waker),
            };
            if ready {
                return Poll::Ready(());
            }
            match waker {
                Some(w) if w.will_wake(cx.waker()) => {}
                _ => *waker = Some(cx.waker().clone()),
            }
            Poll::Pending
        })
    }

    fn clear_ready(&self, direction: Direction) {
        with_core(|core| {
            if let Some(state) = core.io.borrow_mut().sources.get_mut(self.token) {
                match direction {
                    Direction::Read => state.readable = false,
                    Direction::Write => state.writable = false,
                }
            }
        });
    }

    fn poll_op<R>(
        &self,
        cx: &mut Context<'_>,
        direction: Direction,
        op: &mut impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        loop {
            if self.poll_ready(cx, direction).is_pending() {
                return Poll::Pending;
            }
            match op(self.get_ref()) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => self.clear_ready(direction),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                result => return Poll::Ready(result),
            }
        }
    }

    /// Polls a read-side operation: runs `op` now if the fd may be readable, else parks.
    pub fn poll_read_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_op(cx, Direction::Read, &mut op)
    }

    /// Polls a write-side operation: runs `op` now if the fd may be writable, else parks.
    pub fn poll_write_with<R>(
        &self,
        cx: &mut Context<'_>,
        mut op: impl FnMut(&T) -> io::Result<R>,
    ) -> Poll<io::Result<R>> {
        self.poll_op(cx, Direction::Write, &mut op)
    }

    /// Runs a read-side operation until it does not return `WouldBlock`.
    pub async fn read_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_op(cx, Direction::Read, &mut op)).await
    }

    /// Runs a write-side operation until it does not return `WouldBlock`.
    pub async fn write_with<R>(&self, mut op: impl FnMut(&T) -> io::Result<R>) -> io::Result<R> {
        poll_fn(|cx| self.poll_op(cx, Direction::Write, &mut op)).await
    }

    /// Waits until the fd is reported writable (used to finish a non-blocking connect).
    pub async fn writable(&self) {
        poll_fn(|cx| self.poll_ready(cx, Direction::Write)).await;
    }

    /// Marks the fd as not writable so that the next [`Async::writable`] waits for the reactor.
    pub fn clear_writable(&self) {
        self.clear_ready(Direction::Write);
    }
}

impl<T: AsFd> Drop for Async<T> {
    fn drop(&mut self) {
        self.deregister();
    }
}
