//! The per-core event loop: one single-threaded executor and one readiness reactor per worker.
//!
//! `sluice-proxy` runs each worker thread inside a [`Runtime`]; every socket it owns is wrapped in
//! [`Async`], whose `read_with`/`write_with` try a non-blocking system call and park the task
//! until the reactor reports readiness. Timers ([`sleep`], [`timeout`]) bound every wait, and
//! [`spawn_blocking`] moves the few blocking calls (name resolution) off the worker.
//!
//! Start with [`Runtime`], [`spawn`], [`Async`] and [`net::TcpStream`].
//!
//! What it deliberately does not do: move work between threads (a connection lives and dies on
//! the worker that accepted it, as HAProxy's core principles say), or issue I/O through the
//! backend. The backend only reports readiness, so socket I/O stays direct non-blocking system
//! calls (recv/send/writev, later splice/tee): io_uring's own splice op runs on kernel worker
//! threads and measured 3x slower than splice(2) on this project's machine.
//!
//! The readiness mechanism is chosen at start-up through [`Backend`]; every backend implements
//! [`reactor::Reactor`]. Only epoll exists today.
//!
//! ```
//! use std::time::Duration;
//! let runtime = sluice_rt::Runtime::new(sluice_rt::Backend::Epoll).unwrap();
//! let answer = runtime.block_on(async {
//!     let task = sluice_rt::spawn(async { 6 * 7 });
//!     sluice_rt::sleep(Duration::from_millis(1)).await;
//!     task.await
//! });
//! assert_eq!(answer, 42);
//! ```
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod blocking;
mod executor;
mod io;
pub mod net;
pub mod reactor;
mod sys;
mod time;

pub use blocking::{spawn_blocking, BlockingTask};
pub use executor::{spawn, Backend, JoinHandle, Runtime, ShutdownHandle};
pub use io::Async;
pub use time::{sleep, sleep_until, timeout, Elapsed};
