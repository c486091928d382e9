//! The readiness backend interface: what every mechanism (epoll today; poll(2) and io_uring
//! later) must provide to the executor.
//!
//! Registrations are edge-triggered in spirit: a backend reports that a source *became* readable
//! or writable, and the executor remembers it until an operation on the source returns
//! `WouldBlock`. A level-triggered backend may report more often; that only costs a spurious wake.

use std::io;
use std::os::fd::BorrowedFd;
use std::time::Duration;

/// Identifies one registered source; the executor's index into its I/O table.
pub type Token = usize;

/// What a wait reported for one source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Readiness {
    /// The source that changed.
    pub token: Token,
    /// Readable, or the peer closed, or an error is pending (a read will not block).
    pub readable: bool,
    /// Writable, or an error is pending (a write will not block).
    pub writable: bool,
}

/// A readiness mechanism. One instance per worker thread; never shared.
pub trait Reactor {
    /// Starts watching `fd` for both readability and writability under `token`.
    fn register(&mut self, fd: BorrowedFd<'_>, token: Token) -> io::Result<()>;
    /// Stops watching `fd`. Called before the fd is closed.
    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()>;
    /// Waits up to `timeout` (forever if `None`) and appends what became ready to `out`.
    fn wait(&mut self, out: &mut Vec<Readiness>, timeout: Option<Duration>) -> io::Result<()>;
    /// A short name for logs: "epoll".
    fn name(&self) -> &'static str;
}
