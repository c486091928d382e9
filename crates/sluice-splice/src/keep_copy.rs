//! KeepCopy: a spliced transfer that also hands every byte it forwards to a sink (the cache),
//! as in the USENIX 2003 paper's data-stream splice.
//!
//! ```text
//!  source ──splice──> pipe A ──splice──> destination
//!                       │
//!                      tee (same pages, no copy)
//!                       v
//!                     pipe B ──read──> buffer ──> sink
//! ```
//!
//! tee(2) always duplicates from the head of pipe A, so A is kept as "already teed" bytes
//! followed by "not yet teed" ones: new bytes are teed only once the teed ones have left for the
//! destination. At most `max_unread` bytes (the paper's max2cache) may wait in B, counted in
//! bytes by us since a pipe counts slots and a slot spliced from a socket can hold tens of KiB:
//! when the sink is slow, tee stops, nothing more leaves A, A fills, and the source is no
//! longer read, so a slow sink pauses forwarding instead of growing memory. The sink is called
//! only once `min_read` bytes are waiting (the paper's min2read), or at the end.
//!
//! The proxy's cache fills use it for Content-Length responses the engine would splice
//! (`sluice-proxy`'s `cache_fill.rs`). Pipe B is opened per transfer, outside the worker's pool.
//!
//! If the destination aborts, the source is still read for the sink, up to `keep_after_abort`
//! more bytes (the cache's `fill_after_abort`): a client abort need not cost the cache its copy,
//! nor make the proxy download a huge object nobody waits for.

use std::future::poll_fn;
use std::io;
use std::os::fd::AsFd;
use std::task::{Context, Poll};

use sluice_rt::net::TcpStream;
use sluice_rt::timeout;

use crate::pipe::PipeLease;
use crate::splice::{retry_source, yield_now, SpliceEngine};
use crate::stats::{EngineStats, FallbackReason, Mechanism};
use crate::sys::splice::{read_pipe, splice_from_pipe, splice_to_pipe, tee, Pipe};
use crate::{Ending, Limit, TransferRequest};

/// Where KeepCopy delivers its copy. Called from the transfer's task: return `Pending` (after
/// arranging a wake-up) to slow the transfer down; it then pauses rather than buffer more.
pub trait CopySink {
    /// Takes some of `bytes` (at least one, unless failing) and returns how many.
    fn poll_accept(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>>;
}

/// The paper's KeepCopy parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeepCopy {
    /// min2read: the sink is called once this many bytes wait for it (or at the end).
    pub min_read: usize,
    /// max2cache: bytes forwarded but not yet taken by the sink, at most, plus one read of
    /// `min_read.max(16 KiB)` that may sit in user space.
    pub max_unread: usize,
    /// Once the destination is gone, the source is read on for the sink only if at most this
    /// many bytes remain (a close-delimited body: until this many more were read).
    pub keep_after_abort: u64,
}

/// How a KeepCopy transfer ended.
#[derive(Debug)]
pub struct KeepCopyOutcome {
    /// Bytes spliced to the destination (prefix not counted).
    pub forwarded: u64,
    /// Bytes the sink took.
    pub kept: u64,
    /// Why forwarding ended; `DestinationAborted` still lets `kept` reach the whole body.
    pub ending: Ending,
    /// The system error behind the ending, if any.
    pub error: Option<io::Error>,
    /// Whether the source delivered the whole body (the limit, or EOF for `UntilClose`).
    pub source_complete: bool,
    /// Why the sink stopped taking bytes, if it failed; forwarding then went on without it.
    pub sink_error: Option<io::Error>,
    /// The most bytes that ever waited for the sink (pipe B plus the user-space buffer).
    pub peak_unread: usize,
}

impl SpliceEngine {
    /// Like [`SpliceEngine::transfer`], and every byte read from the source also goes to
    /// `sink` (the prefix does not: the caller has it). Needs a pipe from the pool and one of
    /// `keep.max_unread` bytes; without them it sends nothing, counts the fallback (`no-pipe`
    /// or `pipe-create`) and fails, and the caller copies the body instead.
    pub async fn transfer_keeping_copy<S: CopySink>(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        keep: KeepCopy,
        sink: &mut S,
        stats: &EngineStats,
    ) -> io::Result<KeepCopyOutcome> {
        let forward = self
            .pool()
            .acquire(stats, "a KeepCopy transfer")
            .map_err(|reason| {
                io::Error::new(io::ErrorKind::WouldBlock, format!("no pipe: {reason}"))
            })?;
        let copy = match Pipe::open(keep.max_unread.max(4096)) {
            Ok(new) => new.pipe,
            Err(error) => {
                stats.record_fallback(
                    FallbackReason::PipeCreate,
                    &format_args!("cannot open KeepCopy's copy pipe: {error}; copying"),
                );
                return Err(error);
            }
        };
        let idle = request.idle_timeout;
        if !request.prefix.is_empty() {
            let sent = timeout(idle, dst.write_all(request.prefix)).await;
            if let Err(error) = sent.unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into())) {
                return Ok(KeepCopyOutcome {
                    forwarded: 0,
                    kept: 0,
                    ending: Ending::DestinationAborted,
                    error: Some(error),
                    source_complete: false,
                    sink_error: None,
                    peak_unread: 0,
                });
            }
        }
        let mut flow = Keeping {
            forward,
            copy,
            copy_held: 0,
            teed_in_forward: 0,
            buffer: Vec::with_capacity(keep.min_read.max(16 * 1024)),
            buffer_pos: 0,
            read_chunk: keep.min_read.max(16 * 1024),
            max_unread: keep.max_unread.max(1),
            min_read: keep.min_read.max(1),
            keep_after_abort: keep.keep_after_abort,
            taken_at_abort: None,
            limit: request.limit,
            taken: 0,
            forwarded: 0,
            kept: 0,
            source_closed: false,
            in_blocked_with_data: false,
            retry_in: false,
            destination_error: None,
            sink_error: None,
            peak_unread: 0,
        };
        let mut steps = 0u32;
        let finished = loop {
            let step = timeout(idle, poll_fn(|cx| flow.poll_step(cx, src, dst, sink))).await;
            match step {
                Err(_) => break Err((Ending::Idle, None)),
                Ok(Poll::Pending) => {}
                Ok(Poll::Ready(result)) => break result,
            }
            steps += 1;
            if steps % 16 == 0 {
                yield_now().await;
            }
        };
        let (ending, error) = match finished {
            Ok(()) => match flow.destination_error.take() {
                Some(error) => (Ending::DestinationAborted, Some(error)),
                None => (Ending::Done, None),
            },
            Err((ending, error)) => (ending, error),
        };
        let source_complete = flow.input_complete();
        let ending = match (ending, flow.limit) {
            (Ending::Done, Limit::Bytes(_)) if !source_complete => Ending::SourceClosedEarly,
            (ending, _) => ending,
        };
        stats.record(
            Mechanism::Splice,
            flow.forwarded + request.prefix.len() as u64,
        );
        Ok(KeepCopyOutcome {
            forwarded: flow.forwarded,
            kept: flow.kept,
            ending,
            error,
            source_complete,
            sink_error: flow.sink_error,
            peak_unread: flow.peak_unread,
        })
    }
}

type Finish = Result<(), (Ending, Option<io::Error>)>;

/// The state of one KeepCopy transfer.
struct Keeping {
    /// Pipe A: source -> destination.
    forward: PipeLease,
    /// Pipe B: the copy waiting for the sink.
    copy: Pipe,
    copy_held: usize,
    /// Bytes at the head of A already duplicated into B.
    teed_in_forward: usize,
    buffer: Vec<u8>,
    buffer_pos: usize,
    read_chunk: usize,
    max_unread: usize,
    min_read: usize,
    limit: Limit,
    taken: u64,
    forwarded: u64,
    kept: u64,
    source_closed: bool,
    /// As in the splice engine's flow: EAGAIN from the source while A held bytes.
    in_blocked_with_data: bool,
    retry_in: bool,
    destination_error: Option<io::Error>,
    keep_after_abort: u64,
    /// Source bytes taken when the destination failed.
    taken_at_abort: Option<u64>,
    sink_error: Option<io::Error>,
    peak_unread: usize,
}

impl Keeping {
    /// Whether reading on after the destination failed would pass `keep_after_abort`.
    fn past_abort_allowance(&self) -> bool {
        let Some(at) = self.taken_at_abort else {
            return false;
        };
        let rest = match self.limit {
            Limit::Bytes(total) => total - at,
            Limit::UntilClose => self.taken - at,
        };
        rest > self.keep_after_abort
    }

    fn keeping(&self) -> bool {
        self.sink_error.is_none()
    }

    /// The source has given everything it will give.
    fn input_complete(&self) -> bool {
        match self.limit {
            Limit::Bytes(total) => self.taken == total,
            Limit::UntilClose => self.source_closed,
        }
    }

    fn input_over(&self) -> bool {
        self.input_complete() || self.source_closed
    }

    fn unread(&self) -> usize {
        self.copy_held + (self.buffer.len() - self.buffer_pos)
    }

    /// One round over the four moves (out, tee, in, sink) until none moves; `Ready(Pending)`
    /// means progress was made, `Pending` that every party is waiting for readiness.
    fn poll_step<S: CopySink>(
        &mut self,
        cx: &mut Context<'_>,
        src: &TcpStream,
        dst: &TcpStream,
        sink: &mut S,
    ) -> Poll<Poll<Finish>> {
        let mut progressed = false;
        loop {
            if self.destination_error.is_some() && (!self.keeping() || self.past_abort_allowance())
            {
                // Neither the client nor the sink wants the rest (or not that much of it).
                let error = self.destination_error.take();
                return Poll::Ready(Poll::Ready(Err((Ending::DestinationAborted, error))));
            }
            let mut moved = false;
            match self.poll_out(cx, dst) {
                Ok(n) => moved |= n > 0,
                Err(finish) => return Poll::Ready(Poll::Ready(finish)),
            }
            moved |= self.tee_more();
            match self.poll_in(cx, src) {
                Ok(n) => moved |= n,
                Err(finish) => return Poll::Ready(Poll::Ready(finish)),
            }
            moved |= self.poll_sink(cx, sink);
            self.peak_unread = self.peak_unread.max(self.unread());
            let drained = self.forward.held() == 0 && (!self.keeping() || self.unread() == 0);
            if self.input_over() && drained {
                return Poll::Ready(Poll::Ready(Ok(())));
            }
            if !moved {
                return if progressed {
                    Poll::Ready(Poll::Pending)
                } else {
                    Poll::Pending
                };
            }
            progressed = true;
        }
    }

    /// Sends teed bytes from A to the destination, or discards them once it is gone.
    fn poll_out(&mut self, cx: &mut Context<'_>, dst: &TcpStream) -> Result<usize, Finish> {
        let ready = if self.keeping() {
            self.teed_in_forward
        } else {
            self.forward.held()
        };
        if ready == 0 {
            return Ok(0);
        }
        if self.destination_error.is_some() {
            // Already in B (or nobody wants them): drop them from A.
            let mut scratch = [0u8; 16 * 1024];
            let n = read_pipe(self.forward.pipe(), &mut scratch[..ready.min(16 * 1024)])
                .map_err(|error| Err((Ending::SourceError, Some(error))))?;
            self.forward.drained(n);
            self.teed_in_forward = self.teed_in_forward.saturating_sub(n);
            self.retry_in |= std::mem::take(&mut self.in_blocked_with_data);
            return Ok(n);
        }
        let pipe = self.forward.pipe();
        let out = dst
            .as_async()
            .poll_write_with(cx, |s| splice_from_pipe(pipe, s.as_fd(), ready));
        match out {
            Poll::Ready(Ok(n)) => {
                self.forward.drained(n);
                self.teed_in_forward = self.teed_in_forward.saturating_sub(n);
                self.forwarded += n as u64;
                self.retry_in |= std::mem::take(&mut self.in_blocked_with_data);
                Ok(n)
            }
            Poll::Ready(Err(error)) if self.keeping() => {
                // The client went away: keep reading for the sink.
                self.destination_error = Some(error);
                self.taken_at_abort = Some(self.taken);
                Ok(1)
            }
            Poll::Ready(Err(error)) => Err(Err((Ending::DestinationAborted, Some(error)))),
            Poll::Pending => Ok(0),
        }
    }

    /// Duplicates the untouched head of A into B; fails quietly (EAGAIN) while B is full.
    fn tee_more(&mut self) -> bool {
        if !self.keeping() || self.teed_in_forward > 0 || self.forward.held() == 0 {
            return false;
        }
        // Pipes count slots, not bytes, and a slot filled from a socket may hold far more than a
        // page (skb fragments): bound the copy in bytes here.
        let room = self.max_unread.saturating_sub(self.copy_held);
        if room == 0 {
            return false;
        }
        match tee(
            self.forward.pipe(),
            &self.copy,
            self.forward.held().min(room),
        ) {
            Ok(n) => {
                self.teed_in_forward = n;
                self.copy_held += n;
                n > 0
            }
            Err(_) => false,
        }
    }

    fn poll_in(&mut self, cx: &mut Context<'_>, src: &TcpStream) -> Result<bool, Finish> {
        let left = match self.limit {
            Limit::Bytes(total) => usize::try_from(total - self.taken).unwrap_or(usize::MAX),
            Limit::UntilClose => usize::MAX,
        };
        let wanted = left.min(self.forward.room());
        if self.source_closed || wanted == 0 {
            return Ok(false);
        }
        let pipe = self.forward.pipe();
        let into = if std::mem::take(&mut self.retry_in) {
            retry_source(src, pipe, wanted)
        } else {
            src.as_async()
                .poll_read_with(cx, |s| splice_to_pipe(s.as_fd(), pipe, wanted))
        };
        match into {
            Poll::Ready(Ok(0)) => {
                self.source_closed = true;
                Ok(true)
            }
            Poll::Ready(Ok(n)) => {
                self.taken += n as u64;
                self.forward.filled(n);
                Ok(true)
            }
            Poll::Ready(Err(error)) => Err(Err((Ending::SourceError, Some(error)))),
            Poll::Pending => {
                self.in_blocked_with_data = self.forward.held() > 0;
                Ok(false)
            }
        }
    }

    /// Refills the buffer from B once `min_read` bytes wait (or the input is over), and offers
    /// it to the sink.
    fn poll_sink<S: CopySink>(&mut self, cx: &mut Context<'_>, sink: &mut S) -> bool {
        if !self.keeping() {
            return false;
        }
        let mut moved = false;
        let all_teed = self.forward.held() == self.teed_in_forward || !self.keeping();
        let at_end = self.input_over() && all_teed;
        if self.buffer_pos == self.buffer.len()
            && self.copy_held > 0
            && (self.copy_held >= self.min_read || at_end)
        {
            self.buffer.clear();
            self.buffer_pos = 0;
            self.buffer.resize(self.read_chunk.min(self.copy_held), 0);
            match read_pipe(&self.copy, &mut self.buffer) {
                Ok(n) => {
                    self.buffer.truncate(n);
                    self.copy_held -= n;
                    moved = n > 0;
                }
                Err(error) => {
                    self.buffer.clear();
                    self.sink_error = Some(error);
                    return true;
                }
            }
        }
        while self.buffer_pos < self.buffer.len() {
            match sink.poll_accept(cx, &self.buffer[self.buffer_pos..]) {
                Poll::Ready(Ok(0)) => {
                    self.sink_error = Some(io::ErrorKind::WriteZero.into());
                    return true;
                }
                Poll::Ready(Ok(n)) => {
                    self.buffer_pos += n;
                    self.kept += n as u64;
                    moved = true;
                }
                Poll::Ready(Err(error)) => {
                    self.sink_error = Some(error);
                    return true;
                }
                Poll::Pending => break,
            }
        }
        moved
    }
}

#[cfg(test)]
mod tests;
