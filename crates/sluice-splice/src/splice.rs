//! The splice engine: socket -> pipe -> socket with splice(2), so body bytes never enter user
//! space. Both halves are non-blocking (SPLICE_F_NONBLOCK) and driven by the worker's reactor:
//! the source's read readiness for socket -> pipe, the destination's write readiness for
//! pipe -> socket. Each transfer borrows a pipe from the worker's [`PipePool`]; when none is
//! left, or when the kernel refuses to splice these fds, the transfer is copied instead and the
//! fallback counted.
//!
//! The transfer ends exactly at its byte limit (each splice into the pipe asks for at most the
//! bytes left), so the source is left at the response boundary and a persistent connection can
//! carry the next exchange: the papers' unidirectional splice with a payload limit.

use std::cell::Cell;
use std::future::poll_fn;
use std::io;
use std::net::Shutdown;
use std::os::fd::AsFd;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use sluice_rt::net::TcpStream;
use sluice_rt::{sleep_until, timeout};

use crate::copy::CopyEngine;
use crate::pipe::{PipeLease, PipePool};
use crate::stats::{EngineStats, FallbackReason, Mechanism};
use crate::sys::splice::{send_more, splice_from_pipe, splice_to_pipe};
use crate::{Ending, Limit, TransferOutcome, TransferRequest, TunnelOutcome};

/// Polls of one transfer in a row before it lets the worker's other tasks run: a fast loopback
/// source is always ready, and one 50 MiB body must not stall every other connection.
const STEPS_BEFORE_YIELD: u32 = 16;

/// Moves bodies through pipes with splice(2).
#[derive(Debug, Clone)]
pub struct SpliceEngine {
    pool: PipePool,
    copy: CopyEngine,
}

impl SpliceEngine {
    /// A splice engine borrowing pipes from `pool`, copying with `copy` when it must fall back.
    pub fn new(pool: PipePool, copy: CopyEngine) -> Self {
        SpliceEngine { pool, copy }
    }

    /// The pool this engine borrows pipes from.
    pub fn pool(&self) -> &PipePool {
        &self.pool
    }

    /// Moves `request.prefix` and then the body from `src` to `dst`, recording the transfer in
    /// `stats` under the mechanism that really moved it.
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        if request.limit == Limit::Bytes(0) {
            // Nothing to splice: the prefix is all there is.
            return self.copy_recorded(src, dst, request, stats).await;
        }
        let Ok(lease) = self.pool.acquire(stats, "a body") else {
            return self.copy_recorded(src, dst, request, stats).await;
        };
        let mut flow = Flow::new(lease, request.limit);
        match flow
            .start(src, dst, request.prefix, request.idle_timeout)
            .await
        {
            Start::Spliced => {}
            Start::Unsupported(error) => {
                stats.record_fallback(
                    FallbackReason::SpliceUnsupported,
                    &format_args!("splice(2) refused the source socket: {error}; copying"),
                );
                drop(flow);
                return self.copy_recorded(src, dst, request, stats).await;
            }
            Start::Failed(outcome) => {
                stats.record(Mechanism::Splice, request.prefix.len() as u64);
                return outcome;
            }
        }
        let outcome = flow.finish(src, dst, request.idle_timeout).await;
        stats.record(
            Mechanism::Splice,
            outcome.forwarded + request.prefix.len() as u64,
        );
        outcome
    }

    /// Moves exactly `bytes` from `src` to `dst` through a pipe (a copy when none is left): a
    /// step inside another engine's transfer (the sockmap's drain and its rest past the cap),
    /// so it counts the bytes under the mechanism that moved them but no transfer. `purpose`
    /// names the step in the fallback's log line.
    pub(crate) async fn move_bytes(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        bytes: u64,
        idle: Duration,
        stats: &EngineStats,
        purpose: &str,
    ) -> TransferOutcome {
        let limit = Limit::Bytes(bytes);
        let (mechanism, outcome) = match self.pool.acquire(stats, purpose) {
            Ok(lease) => {
                let outcome = Flow::new(lease, limit).finish(src, dst, idle).await;
                (Mechanism::Splice, outcome)
            }
            Err(_) => {
                let request = TransferRequest {
                    prefix: &[],
                    limit,
                    idle_timeout: idle,
                };
                (Mechanism::Copy, self.copy.transfer(src, dst, request).await)
            }
        };
        stats.record_bytes(mechanism, outcome.forwarded);
        outcome
    }

    async fn copy_recorded(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        let outcome = self.copy.transfer(src, dst, request).await;
        stats.record(
            Mechanism::Copy,
            outcome.forwarded + request.prefix.len() as u64,
        );
        outcome
    }

    /// Splices both ways until both directions have closed, or nothing moved for `idle`. Each
    /// direction has its own pipe; without two pipes the tunnel is copied.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle: Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        let leases = self
            .pool
            .acquire(stats, "a tunnel")
            .and_then(|up| Ok((up, self.pool.acquire(stats, "a tunnel")?)));
        let (up_lease, down_lease) = match leases {
            Ok(pair) => pair,
            Err(_) => {
                let outcome = self.copy.tunnel(client, upstream, idle).await;
                stats.record(
                    Mechanism::Copy,
                    outcome.upstream_bytes + outcome.client_bytes,
                );
                return outcome;
            }
        };
        let activity = Cell::new(Instant::now());
        let to_upstream = pump(
            Flow::new(up_lease, Limit::UntilClose),
            client,
            upstream,
            &activity,
        );
        let to_client = pump(
            Flow::new(down_lease, Limit::UntilClose),
            upstream,
            client,
            &activity,
        );
        let outcome = tunnel_until_idle(to_upstream, to_client, &activity, idle).await;
        stats.record(
            Mechanism::Splice,
            outcome.upstream_bytes + outcome.client_bytes,
        );
        outcome
    }
}

/// Runs both directions of a tunnel until both end or `activity` is older than `idle`.
pub(crate) async fn tunnel_until_idle(
    to_upstream: impl std::future::Future<Output = (u64, Ending)>,
    to_client: impl std::future::Future<Output = (u64, Ending)>,
    activity: &Cell<Instant>,
    idle: Duration,
) -> TunnelOutcome {
    let both = futures_lite::future::zip(to_upstream, to_client);
    let watchdog = async {
        loop {
            let deadline = activity.get() + idle;
            if Instant::now() >= deadline {
                return ((0, Ending::Idle), (0, Ending::Idle));
            }
            sleep_until(deadline).await;
        }
    };
    let ((upstream_bytes, up_end), (client_bytes, down_end)) =
        futures_lite::future::or(both, watchdog).await;
    let ending = if up_end == Ending::Idle {
        Ending::Idle
    } else if up_end != Ending::Done {
        up_end
    } else {
        down_end
    };
    TunnelOutcome {
        upstream_bytes,
        client_bytes,
        ending,
    }
}

/// One direction of a spliced tunnel: until EOF, then half-close the destination.
async fn pump(
    mut flow: Flow,
    src: &TcpStream,
    dst: &TcpStream,
    activity: &Cell<Instant>,
) -> (u64, Ending) {
    let mut steps = 0;
    loop {
        match poll_fn(|cx| flow.poll_step(cx, src, dst)).await {
            Step::Progress => activity.set(Instant::now()),
            Step::Finished(Ending::Done, _) => {
                let _ = dst.shutdown(Shutdown::Write);
                return (flow.forwarded, Ending::Done);
            }
            Step::Finished(Ending::DestinationAborted, _) => {
                let _ = src.shutdown(Shutdown::Both);
                return (flow.forwarded, Ending::DestinationAborted);
            }
            Step::Finished(ending, _) => {
                let _ = dst.shutdown(Shutdown::Both);
                return (flow.forwarded, ending);
            }
        }
        steps += 1;
        if steps % STEPS_BEFORE_YIELD == 0 {
            yield_now().await;
        }
    }
}

/// How the first moments of a spliced transfer went.
pub(crate) enum Start {
    /// The prefix is out and splicing works: call [`Flow::finish`].
    Spliced,
    /// splice(2) refused the source before anything moved: copy the whole request instead.
    Unsupported(io::Error),
    /// The transfer already ended (the prefix could not be written).
    Failed(TransferOutcome),
}

/// What one poll of a flow achieved.
pub(crate) enum Step {
    /// Bytes moved; more to do.
    Progress,
    /// The flow ended.
    Finished(Ending, Option<io::Error>),
}

/// One direction's state: the pipe and the counts on both of its sides.
pub(crate) struct Flow {
    pub(crate) lease: PipeLease,
    limit: Limit,
    /// Bytes spliced from the source into the pipe.
    pub(crate) taken: u64,
    /// Bytes spliced from the pipe to the destination.
    pub(crate) forwarded: u64,
    source_closed: bool,
    /// The last splice into the pipe said EAGAIN while the pipe held bytes: the pipe may have
    /// been out of slots rather than the source empty (see [`retry_source`]).
    in_blocked_with_data: bool,
}

impl Flow {
    pub(crate) fn new(lease: PipeLease, limit: Limit) -> Self {
        Flow {
            lease,
            limit,
            taken: 0,
            forwarded: 0,
            source_closed: false,
            in_blocked_with_data: false,
        }
    }

    /// Bytes the source may still give into the pipe now.
    fn wanted(&self) -> usize {
        let left = match self.limit {
            Limit::Bytes(total) => usize::try_from(total - self.taken).unwrap_or(usize::MAX),
            Limit::UntilClose => usize::MAX,
        };
        if self.source_closed {
            0
        } else {
            left.min(self.lease.room())
        }
    }

    fn limit_reached(&self) -> bool {
        matches!(self.limit, Limit::Bytes(total) if self.taken == total)
    }

    /// Sends the prefix. When body bytes are already queued on the source, they are first
    /// spliced into the pipe and the prefix goes with MSG_MORE, so that head and first body
    /// bytes leave in one segment (TCP_NODELAY would otherwise send the head alone).
    pub(crate) async fn start(
        &mut self,
        src: &TcpStream,
        dst: &TcpStream,
        prefix: &[u8],
        idle: Duration,
    ) -> Start {
        let first = splice_to_pipe(src.as_fd(), self.lease.pipe(), self.wanted());
        let body_waiting = match first {
            Ok(0) => {
                self.source_closed = true;
                false
            }
            Ok(n) => {
                self.taken += n as u64;
                self.lease.filled(n);
                true
            }
            Err(error) if error.kind() == io::ErrorKind::WouldBlock => false,
            Err(error) if is_unsupported(&error) => return Start::Unsupported(error),
            // A reset source: let the main loop meet the error again and report it.
            Err(_) => false,
        };
        if prefix.is_empty() {
            return Start::Spliced;
        }
        let sent = if body_waiting {
            write_all_more(dst, prefix, idle).await
        } else {
            timeout(idle, dst.write_all(prefix))
                .await
                .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
        };
        match sent {
            Ok(()) => Start::Spliced,
            Err(error) => Start::Failed(TransferOutcome {
                forwarded: 0,
                ending: Ending::DestinationAborted,
                error: Some(error),
                overread: Vec::new(),
            }),
        }
    }

    /// Runs the flow to its end; each wait for readiness is bounded by `idle`.
    pub(crate) async fn finish(
        &mut self,
        src: &TcpStream,
        dst: &TcpStream,
        idle: Duration,
    ) -> TransferOutcome {
        let mut steps = 0;
        loop {
            let step = timeout(idle, poll_fn(|cx| self.poll_step(cx, src, dst))).await;
            match step {
                Err(_) => return self.outcome(Ending::Idle, None),
                Ok(Step::Progress) => {}
                Ok(Step::Finished(ending, error)) => return self.outcome(ending, error),
            }
            steps += 1;
            if steps % STEPS_BEFORE_YIELD == 0 {
                yield_now().await;
            }
        }
    }

    fn outcome(&self, ending: Ending, error: Option<io::Error>) -> TransferOutcome {
        TransferOutcome {
            forwarded: self.forwarded,
            ending,
            error,
            overread: Vec::new(),
        }
    }

    /// Moves what it can in both halves; `Pending` only when neither half can move and both
    /// have registered for readiness.
    pub(crate) fn poll_step(
        &mut self,
        cx: &mut Context<'_>,
        src: &TcpStream,
        dst: &TcpStream,
    ) -> Poll<Step> {
        let mut progressed = false;
        let mut retry_in = false;
        loop {
            let mut moved = false;
            if self.lease.held() > 0 {
                let held = self.lease.held();
                let pipe = self.lease.pipe();
                let out = dst
                    .as_async()
                    .poll_write_with(cx, |s| splice_from_pipe(pipe, s.as_fd(), held));
                match out {
                    Poll::Ready(Ok(n)) => {
                        self.lease.drained(n);
                        self.forwarded += n as u64;
                        moved = true;
                        retry_in = std::mem::take(&mut self.in_blocked_with_data);
                    }
                    Poll::Ready(Err(error)) => {
                        return Poll::Ready(Step::Finished(Ending::DestinationAborted, Some(error)))
                    }
                    Poll::Pending => {}
                }
            }
            let wanted = self.wanted();
            if wanted > 0 {
                let pipe = self.lease.pipe();
                let into = if std::mem::take(&mut retry_in) {
                    retry_source(src, pipe, wanted)
                } else {
                    src.as_async()
                        .poll_read_with(cx, |s| splice_to_pipe(s.as_fd(), pipe, wanted))
                };
                match into {
                    Poll::Ready(Ok(0)) => {
                        self.source_closed = true;
                        moved = true;
                    }
                    Poll::Ready(Ok(n)) => {
                        self.taken += n as u64;
                        self.lease.filled(n);
                        moved = true;
                    }
                    Poll::Ready(Err(error)) => {
                        return Poll::Ready(Step::Finished(Ending::SourceError, Some(error)))
                    }
                    Poll::Pending => self.in_blocked_with_data = self.lease.held() > 0,
                }
            }
            if self.lease.held() == 0 {
                if self.limit_reached() {
                    return Poll::Ready(Step::Finished(Ending::Done, None));
                }
                if self.source_closed {
                    let ending = match self.limit {
                        Limit::UntilClose => Ending::Done,
                        Limit::Bytes(_) => Ending::SourceClosedEarly,
                    };
                    return Poll::Ready(Step::Finished(ending, None));
                }
            }
            if !moved {
                return if progressed {
                    Poll::Ready(Step::Progress)
                } else {
                    Poll::Pending
                };
            }
            progressed = true;
        }
    }
}

/// One splice into the pipe, bypassing the reactor's readiness.
///
/// splice(2) says EAGAIN both when the source has nothing and when the pipe is out of slots (a
/// pipe counts slots, and a slot filled from a socket may hold a single small segment). In the
/// second case the reactor cleared the source's readiness although bytes wait in its receive
/// queue, and if the peer has already sent everything no new edge will ever come. So once the
/// pipe drains after such an EAGAIN, the source is tried once directly. A WouldBlock here is a
/// real one, and the next poll through the reactor registers for the next edge.
pub(crate) fn retry_source(
    src: &TcpStream,
    pipe: &crate::sys::splice::Pipe,
    wanted: usize,
) -> Poll<io::Result<usize>> {
    match splice_to_pipe(src.as_fd(), pipe, wanted) {
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => Poll::Pending,
        result => Poll::Ready(result),
    }
}

/// Whether splice(2) refused these fds outright rather than failing on this connection:
/// EINVAL (a socket type or kernel without splice support), ENOSYS.
fn is_unsupported(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(code) if code == rustix::io::Errno::INVAL.raw_os_error()
            || code == rustix::io::Errno::NOSYS.raw_os_error()
    )
}

/// Writes all of `buf` with MSG_MORE.
async fn write_all_more(dst: &TcpStream, mut buf: &[u8], idle: Duration) -> io::Result<()> {
    while !buf.is_empty() {
        let sent = timeout(
            idle,
            dst.as_async().write_with(|s| send_more(s.as_fd(), buf)),
        )
        .await;
        let n = sent.unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))?;
        if n == 0 {
            return Err(io::ErrorKind::WriteZero.into());
        }
        buf = &buf[n..];
    }
    Ok(())
}

/// Lets the worker's other ready tasks run once.
pub(crate) async fn yield_now() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await
}

#[cfg(test)]
mod tests;
