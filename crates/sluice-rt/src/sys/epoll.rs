//! The epoll(7) backend, edge-triggered.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::time::Duration;

use rustix::event::epoll;
use rustix::event::Timespec;

use crate::reactor::{Reactor, Readiness, Token};

/// How many events one epoll_wait may return; more stay queued in the kernel for the next call.
const EVENTS_PER_WAIT: usize = 256;

/// An epoll instance with every source registered edge-triggered for input and output.
pub struct EpollReactor {
    epoll: OwnedFd,
    events: Vec<epoll::Event>,
}

impl std::fmt::Debug for EpollReactor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EpollReactor")
            .field("epoll", &self.epoll)
            .finish_non_exhaustive()
    }
}

impl EpollReactor {
    /// Creates the epoll instance (close-on-exec).
    pub fn new() -> io::Result<Self> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        Ok(Self {
            epoll,
            events: Vec::with_capacity(EVENTS_PER_WAIT),
        })
    }
}

impl Reactor for EpollReactor {
    fn register(&mut self, fd: BorrowedFd<'_>, token: Token) -> io::Result<()> {
        // Edge-triggered, both directions at once: one epoll_ctl per socket lifetime instead of
        // one per direction change. RDHUP so a half-closed peer wakes a reader.
        let flags = epoll::EventFlags::IN
            | epoll::EventFlags::OUT
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::ET;
        epoll::add(
            &self.epoll,
            fd,
            epoll::EventData::new_u64(token as u64),
            flags,
        )?;
        Ok(())
    }

    fn deregister(&mut self, fd: BorrowedFd<'_>) -> io::Result<()> {
        epoll::delete(&self.epoll, fd)?;
        Ok(())
    }

    fn wait(&mut self, out: &mut Vec<Readiness>, timeout: Option<Duration>) -> io::Result<()> {
        // epoll's resolution is 1 ms; round up so a timer is never woken early and re-armed in a
        // busy loop (mio does the same).
        let timespec = timeout.map(|t| {
            let t = if t.subsec_nanos() % 1_000_000 != 0 {
                t + Duration::from_nanos(1_000_000 - u64::from(t.subsec_nanos() % 1_000_000))
            } else {
                t
            };
            Timespec {
                tv_sec: t.as_secs() as i64,
                tv_nsec: i64::from(t.subsec_nanos()),
            }
        });
        self.events.clear();
        let buffer = rustix::buffer::spare_capacity(&mut self.events);
        match epoll::wait(&self.epoll, buffer, timespec.as_ref()) {
            Ok(_) => {}
            Err(rustix::io::Errno::INTR) => return Ok(()),
            Err(e) => return Err(e.into()),
        }
        let readable = epoll::EventFlags::IN
            | epoll::EventFlags::RDHUP
            | epoll::EventFlags::HUP
            | epoll::EventFlags::ERR;
        let writable = epoll::EventFlags::OUT | epoll::EventFlags::HUP | epoll::EventFlags::ERR;
        out.extend(self.events.iter().map(|event| {
            // epoll_event is packed on x86_64: copy the fields out instead of borrowing them.
            let (flags, data) = (event.flags, event.data);
            Readiness {
                token: data.u64() as Token,
                readable: flags.intersects(readable),
                writable: flags.intersects(writable),
            }
        }));
        Ok(())
    }

    fn name(&self) -> &'static str {
        "epoll"
    }
}
