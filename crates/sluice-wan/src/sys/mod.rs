//! The only `unsafe` in this crate: three Linux calls that neither `std` nor `rustix` wrap.
//!
//! - [`tun`]: `TUNSETIFF` on `/dev/net/tun`, which turns an open file into a TAP device.
//! - [`signal`]: a `signalfd(2)` for the wire's SIGUSR1 (counters) and SIGTERM/SIGINT (exit),
//!   so signals arrive as readable events in the same epoll loop as the frames.
//! - [`sched`]: `sched_setscheduler(2)`, so the wire is not queued behind the load it carries.
//!
//! Each function takes or returns owned/borrowed fds and `io::Result`, one file per mechanism,
//! as `sluice-rt/src/sys/` does.

pub mod sched;
pub mod signal;
pub mod tun;
