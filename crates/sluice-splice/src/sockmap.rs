//! The sockmap engine: an eBPF SK_SKB verdict program redirects each segment arriving on the
//! source to the destination's send side in softirq context, the papers' in-kernel data path.
//! User space only sets the transfer up, watches it, and finishes the edges.
//!
//! One transfer, in order (each step handles an edge our tests found):
//! 1. The prefix is written, then the bytes already queued on the source (up to the limit) are
//!    spliced until the queue is seen empty: the program would forward a partly read segment
//!    again whole, so no segment may be partly read at insertion.
//! 2. The flow (destination slot, bytes to redirect) goes into the `flows` map, the
//!    destination and then the source into their sockmaps. Inserting fails with EOPNOTSUPP
//!    once the peer has closed: the rest then goes by splice (counted).
//! 3. A kick (SO_RCVLOWAT) makes the kernel run the program over segments that arrived between
//!    the drain and the insertion; without it they would wait for the next arrival.
//! 4. The redirect is asynchronous, so completion is reached when the destination has taken
//!    every byte into its send path: bytes_acked + SIOCOUTQ grew by the redirected count.
//! 5. A segment crossing the body end is passed up with the count of body bytes it holds
//!    (`tail`); those are read and written here once the redirected bytes are out, so order is
//!    kept. A FIN without data is passed, so the source's end is seen as EOF.
//! 6. A body longer than [`SOCKMAP_CAP`] (one connection stalled after about 2^31 bytes in
//!    verdict-only mode) leaves the map mid-body. The program is given the whole body; once it
//!    has redirected past the cap, with at least [`CAP_MARGIN`] still to come (so the body's
//!    end cannot arrive meanwhile), the source is taken out of the map *while the program still
//!    redirects*. Every segment is then either redirected, and counted in the flow, or queued
//!    on the plain socket; none is passed up to a queue the removal would discard. Once the
//!    source's byte count agrees with the flow's and the destination has taken every
//!    redirected byte, the rest is spliced, counted as a `sockmap-cap` fallback. (A first
//!    version stopped the program at the cap and read what it passed up behind it: with a
//!    source that kept sending, 14 of 100 16 MB bodies over a 300 KB cap lost bytes that way.
//!    This way, with new segments held off the psock while it goes, none of 300 did.)
//!    A close-delimited body (no count for the program) is spliced whole.
//!
//! 7. Segments past the body end were passed up into the map's per-socket queue, which the
//!    kernel discards when the socket leaves the map: they are read first and returned as
//!    [`TransferOutcome::overread`]. Bytes arriving between that read and the removal are lost
//!    with the queue; the counters of TCP_INFO show it (received in order minus still queued
//!    must equal what the program and we consumed, exactly), and the transfer then fails with
//!    the source shut down and a `sockmap-overread` fallback counted, never silently. For
//!    responses (an upstream sends nothing before the next request) this cannot happen; for
//!    chunked bodies, whose next chunk follows at once, it can (one 50 MiB chunked test in
//!    about fifteen failed that way, loudly), so transfers under [`SOCKMAP_MIN`] (every
//!    ordinary chunk) are spliced, and `auto` does not pick the sockmap. The count misses
//!    bytes that waited in the psock's backlog (the kernel holds passed-up segments there when
//!    the socket's memory is full, and retries later): FIONREAD still counts them as unread.
//!    So the check also asks how many bytes a read would really return (MSG_PEEK|MSG_TRUNC).
//!
//! Cancelling a transfer (dropping its future) drops its flow, which takes both sockets out of
//! the maps: they are plain TCP sockets again. Bytes redirected but not yet sent stay on the
//! destination's send queue; bytes passed up but not read are discarded with the map's queue.

use std::cell::RefCell;
use std::io::{self, Read};
use std::rc::Rc;
use std::time::{Duration, Instant};

use std::os::fd::AsFd;

use sluice_rt::net::TcpStream;
use sluice_rt::{sleep, timeout};

use crate::splice::SpliceEngine;
use crate::stats::{EngineStats, FallbackReason, Mechanism};
use crate::sys::sockmap::{
    bytes_acked, bytes_received, hold, kick, readable, receive_queue, send_queue, socket_cookie,
    FlowState, Program,
};
use crate::{Ending, Limit, TransferOutcome, TransferRequest, TunnelOutcome};

/// About the most bytes of one transfer the sockmap redirects; the rest of a longer body is
/// spliced (step 6). Half the ~2^31 bytes after which a connection was seen to stall.
pub const SOCKMAP_CAP: u64 = 1 << 30;

/// A body leaves the sockmap at the cap only with at least this much still to come; a shorter
/// rest is redirected too. Far more than can arrive in the microseconds the switch takes (at
/// most a receive window, a few MiB), so the body's end, which the program passes up, never
/// arrives during it.
pub const CAP_MARGIN: u64 = 64 << 20;

/// The smallest transfer the sockmap takes; smaller ones are spliced (a policy, not a
/// fallback, so not counted as one).
pub const SOCKMAP_MIN: u64 = 256 * 1024;

/// Transfers one worker can run through the sockmap at once (map slots).
pub const SOCKMAP_SLOTS: u32 = 1024;

/// How often a running transfer's progress is checked: the kernel does not signal completion
/// of a redirect, and the runtime's timers have millisecond resolution.
const CHECK_PERIOD: Duration = Duration::from_millis(1);

/// Redirects bodies with the eBPF program; splices what it cannot take.
#[derive(Debug, Clone)]
pub struct SockmapEngine {
    shared: Rc<Shared>,
    splice: SpliceEngine,
    /// [`SOCKMAP_CAP`] and [`CAP_MARGIN`]; tests lower them so that a small body crosses.
    cap: Cap,
}

/// Where a long body leaves the sockmap (step 6).
#[derive(Debug, Clone, Copy)]
struct Cap {
    /// Bytes redirected before the source leaves the map.
    at: u64,
    /// Bytes that must still be to come for it to leave.
    margin: u64,
}

#[derive(Debug)]
struct Shared {
    program: Program,
    free_slots: RefCell<Vec<u32>>,
}

impl SockmapEngine {
    /// The splice engine behind this one (edges, fallbacks, KeepCopy).
    pub fn splice_engine(&self) -> &SpliceEngine {
        &self.splice
    }

    /// Loads the program and its maps for one worker; fails without root (EPERM) or without
    /// kernel support. `splice` takes the transfers the sockmap cannot.
    pub fn load(splice: SpliceEngine) -> io::Result<Self> {
        let program = Program::load(SOCKMAP_SLOTS)?;
        Ok(SockmapEngine {
            shared: Rc::new(Shared {
                program,
                free_slots: RefCell::new((0..SOCKMAP_SLOTS).rev().collect()),
            }),
            splice,
            cap: Cap {
                at: SOCKMAP_CAP,
                margin: CAP_MARGIN,
            },
        })
    }

    /// This engine with the cap at `at` bytes and its margin at `margin`.
    #[cfg(test)]
    pub(crate) fn with_cap(mut self, at: u64, margin: u64) -> Self {
        self.cap = Cap { at, margin };
        self
    }

    /// Moves one body: through the sockmap when it can, else by splice (counted).
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        let total = match request.limit {
            // Small transfers are spliced: the setup costs more than it saves, and chunk data
            // (whose next chunk follows at once) would meet the removal race of step 7.
            Limit::Bytes(n) if n < SOCKMAP_MIN => {
                return self.splice.transfer(src, dst, request, stats).await
            }
            Limit::Bytes(n) => n,
            Limit::UntilClose => {
                stats.record_fallback(
                    FallbackReason::SockmapCap,
                    &"body of unknown size (close-delimited): the program needs a count; splicing",
                );
                return self.splice.transfer(src, dst, request, stats).await;
            }
        };
        let idle = request.idle_timeout;
        let outcome = self
            .redirect(src, dst, request.prefix, total, idle, stats)
            .await;
        if outcome.forwarded == total || outcome.ending != Ending::Done {
            return outcome;
        }
        stats.record_fallback(
            FallbackReason::SockmapCap,
            &format_args!(
                "body of {total} bytes over the sockmap's cap of {} (a connection stalls near \
                 2^31 bytes); {} bytes redirected, splicing the rest",
                self.cap.at, outcome.forwarded
            ),
        );
        let purpose = "the rest of a body past the sockmap's cap";
        let rest = total - outcome.forwarded;
        let mut spliced = (self.splice)
            .move_bytes(src, dst, rest, idle, stats, purpose)
            .await;
        spliced.forwarded += outcome.forwarded;
        spliced
    }

    /// Steps 1-7 for a `bytes`-byte body after `prefix`; a body over the cap comes back done
    /// with fewer bytes forwarded, the rest for the caller to splice. Counts the transfer:
    /// under sockmap once a flow was in the map, else under splice (the drain took everything,
    /// or the sockets could not enter the map).
    async fn redirect(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        prefix: &[u8],
        bytes: u64,
        idle: Duration,
        stats: &EngineStats,
    ) -> TransferOutcome {
        let prefix_bytes = prefix.len() as u64;
        if let Err(outcome) = write_prefix(dst, prefix, idle).await {
            stats.record(Mechanism::Splice, 0);
            return outcome;
        }
        // Step 1: drain what is queued (up to the limit) by splice.
        let (copied, emptied) = match drain_queued(&self.splice, src, dst, bytes, idle, stats).await
        {
            Ok(drained) => drained,
            Err(outcome) => {
                stats.record(Mechanism::Splice, prefix_bytes);
                return outcome;
            }
        };
        if copied == bytes {
            stats.record(Mechanism::Splice, prefix_bytes);
            return done(bytes);
        }
        let started = if emptied {
            self.start_flow(src, dst, bytes - copied)
        } else {
            Err((
                FallbackReason::SockmapInsert,
                io::Error::other(format!(
                    "the source's receive queue never emptied in {DRAIN_ROUNDS} reads"
                )),
            ))
        };
        let mut flow = match started {
            Ok(flow) => flow,
            Err((reason, error)) => {
                stats.record_fallback(reason, &format_args!("{error}; splicing the rest"));
                stats.record(Mechanism::Splice, prefix_bytes);
                let rest = bytes - copied;
                let purpose = "a body the sockmap could not take";
                let mut outcome = (self.splice)
                    .move_bytes(src, dst, rest, idle, stats, purpose)
                    .await;
                outcome.forwarded += copied;
                return outcome;
            }
        };
        let cap = self.cap;
        let leave_at = if bytes > cap.at.saturating_add(cap.margin) {
            cap.at.saturating_sub(copied)
        } else {
            u64::MAX
        };
        let (mut outcome, in_step) = match flow.watch(src, dst, idle, leave_at, cap.margin).await {
            Watched::Ended(outcome) => finish(flow, src, outcome),
            Watched::AtCap => {
                let detached = flow.detach_source(src, dst, idle).await;
                drop(flow);
                match detached {
                    Ok(redirected) => (done(redirected), true),
                    // Without a count it can trust, the source's place in its stream is lost.
                    Err(outcome) => {
                        let in_step = outcome.ending != Ending::SourceError;
                        (outcome, in_step)
                    }
                }
            }
        };
        if !in_step {
            // Out of step with what was forwarded: the source must never be read again.
            let _ = src.shutdown(std::net::Shutdown::Both);
            if let Some(error) = &outcome.error {
                stats.record_fallback(
                    FallbackReason::SockmapOverread,
                    &format_args!("{error}; source closed"),
                );
            }
        }
        // The drained bytes were counted by the splice that moved them.
        stats.record(Mechanism::Sockmap, prefix_bytes + outcome.forwarded);
        outcome.forwarded += copied;
        outcome
    }

    /// Tunnels are spliced: both directions would need the program on both sockets, and a
    /// tunnel's size is unknown (the 2^31-byte stall).
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle: Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        self.splice.tunnel(client, upstream, idle, stats).await
    }

    /// Steps 2 and 3: flow entry, both sockets in their maps, kick.
    fn start_flow(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        bytes: u64,
    ) -> Result<Flow, (FallbackReason, io::Error)> {
        let insert_failed = |error| (FallbackReason::SockmapInsert, error);
        let slot = self.shared.free_slots.borrow_mut().pop().ok_or_else(|| {
            insert_failed(io::Error::other(format!(
                "all {SOCKMAP_SLOTS} sockmap slots of this worker in use"
            )))
        })?;
        let cookie = socket_cookie(src.as_fd());
        let mut flow = Flow {
            shared: self.shared.clone(),
            slot,
            cookie: 0,
            inserted: Inserted::Nothing,
            bytes,
            base: 0,
            consumed_before: 0,
        };
        flow.cookie = cookie.map_err(insert_failed)?;
        let program = &self.shared.program;
        program
            .set_flow(flow.cookie, &FlowState::new(slot, bytes))
            .map_err(insert_failed)?;
        flow.inserted = Inserted::Flow;
        program
            .insert_destination(slot, dst.as_fd())
            .map_err(insert_failed)?;
        flow.inserted = Inserted::Destination;
        // Everything written so far (prefix, drained bytes) is in this base.
        flow.base = destination_taken(dst).map_err(insert_failed)?;
        flow.consumed_before = consumed(src).map_err(insert_failed)?;
        program
            .insert_source(slot, src.as_fd())
            .map_err(insert_failed)?;
        flow.inserted = Inserted::Both;
        kick(src.as_fd()).map_err(insert_failed)?;
        tracing::debug!(slot, bytes, "sockmap flow started");
        Ok(flow)
    }
}

/// How far a flow's setup got, so that dropping it undoes exactly that.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Inserted {
    Nothing,
    Flow,
    Destination,
    Both,
}

/// How watching a flow ended.
enum Watched {
    /// The flow is over: done, or failed.
    Ended(TransferOutcome),
    /// Past the cap, with enough of the body to come: the source should leave the map.
    AtCap,
}

/// One transfer in the maps. Dropping it (done, failed or cancelled) takes both sockets out.
struct Flow {
    shared: Rc<Shared>,
    slot: u32,
    cookie: u64,
    inserted: Inserted,
    /// Bytes the program was given to redirect.
    bytes: u64,
    /// bytes_acked + SIOCOUTQ of the destination before the source entered the map.
    base: u64,
    /// Bytes of the source's stream consumed (read) before it entered the map.
    consumed_before: u64,
}

impl Flow {
    /// Steps 4 and 5: waits until the destination took every byte, finishing a straddling
    /// tail; or, once `leave_at` bytes are redirected with at least `margin` to come, stops
    /// for the source to leave the map (step 6).
    async fn watch(
        &mut self,
        src: &TcpStream,
        dst: &TcpStream,
        idle: Duration,
        leave_at: u64,
        margin: u64,
    ) -> Watched {
        let program = &self.shared.program;
        let mut tail_done = 0u64;
        let mut progress = (Instant::now(), 0u64);
        loop {
            let state = match program.flow(self.cookie) {
                Ok(state) => state,
                Err(error) => return Watched::Ended(failed(0, Ending::SourceError, error)),
            };
            let redirected = self.bytes - state.remaining - state.tail;
            if redirected >= leave_at && state.remaining >= margin && state.tail == 0 {
                return Watched::AtCap;
            }
            let taken = match destination_taken(dst) {
                Ok(taken) => taken.saturating_sub(self.base),
                Err(error) => {
                    return Watched::Ended(failed(0, Ending::DestinationAborted, error));
                }
            };
            // The destination's queue holds the redirected bytes, then our tail bytes.
            let forwarded = taken.min(self.bytes);
            if forwarded == self.bytes {
                return Watched::Ended(done(self.bytes));
            }
            if let Some(error) = dst.std().take_error().ok().flatten() {
                let ending = Ending::DestinationAborted;
                return Watched::Ended(failed(forwarded, ending, error));
            }
            // Only once every redirected byte is out may bytes we write follow them.
            if taken >= redirected + tail_done {
                if state.tail > tail_done {
                    match read_now(src, state.tail - tail_done) {
                        Ok(None) => {}
                        Ok(Some(bytes)) if bytes.is_empty() => {
                            let ending = Ending::SourceClosedEarly;
                            return Watched::Ended(failed_clean(forwarded, ending));
                        }
                        Ok(Some(bytes)) => {
                            if let Err(error) = write_all(dst, &bytes, idle).await {
                                let ending = Ending::DestinationAborted;
                                return Watched::Ended(failed(forwarded, ending, error));
                            }
                            tail_done += bytes.len() as u64;
                        }
                        Err(error) => {
                            return Watched::Ended(failed(forwarded, Ending::SourceError, error));
                        }
                    }
                } else if state.remaining > 0 && at_eof(src) {
                    // With bytes left to redirect the program passes only a FIN.
                    let ending = Ending::SourceClosedEarly;
                    return Watched::Ended(failed_clean(forwarded, ending));
                }
            }
            let moved = taken + redirected + tail_done;
            if moved != progress.1 {
                progress = (Instant::now(), moved);
            } else if progress.0.elapsed() >= idle {
                return Watched::Ended(failed_clean(forwarded, Ending::Idle));
            }
            sleep(CHECK_PERIOD).await;
        }
    }

    /// Step 6: takes the source out of the map while the program still redirects, then waits
    /// until the source's stream agrees with the flow (every byte it gave up was redirected;
    /// a segment being judged as the source left is counted a moment later) and the
    /// destination has taken every redirected byte. Returns how many that is; the next byte
    /// of the body is then the first one queued on the plain source.
    async fn detach_source(
        &mut self,
        src: &TcpStream,
        dst: &TcpStream,
        idle: Duration,
    ) -> Result<u64, TransferOutcome> {
        let program = &self.shared.program;
        let source_error = |error| failed(0, Ending::SourceError, error);
        // A segment whose judging starts as the psock goes is dropped by the kernel
        // (sk_psock_verdict_recv without a psock): 4 of 100 unpaced 16 MB bodies lost one that
        // way. Held, new segments wait on the socket instead, to be spliced after the kick.
        hold(src.as_fd()).map_err(source_error)?;
        let removed = program.remove_source(self.slot);
        let kicked = kick(src.as_fd());
        removed.and(kicked).map_err(source_error)?;
        self.inserted = Inserted::Destination;
        let mut progress = (Instant::now(), 0u64);
        loop {
            let state = program.flow(self.cookie).map_err(source_error)?;
            let redirected = self.bytes - state.remaining - state.tail;
            let given = consumed(src)
                .map_err(source_error)?
                .wrapping_sub(self.consumed_before);
            let taken = destination_taken(dst)
                .map_err(|error| failed(0, Ending::DestinationAborted, error))?
                .saturating_sub(self.base);
            let in_step = given == redirected && state.tail == 0;
            if in_step && taken >= redirected {
                return Ok(redirected);
            }
            let forwarded = taken.min(redirected);
            if let Some(error) = dst.std().take_error().ok().flatten() {
                return Err(failed(forwarded, Ending::DestinationAborted, error));
            }
            let moved = taken + redirected + given;
            if moved != progress.1 {
                progress = (Instant::now(), moved);
            } else if progress.0.elapsed() >= idle {
                return Err(if in_step {
                    failed_clean(forwarded, Ending::Idle)
                } else {
                    let error = io::Error::other(format!(
                        "the source gave {given} bytes to the sockmap, which redirected \
                         {redirected}: out of sync"
                    ));
                    failed(forwarded, Ending::SourceError, error)
                });
            }
            sleep(CHECK_PERIOD).await;
        }
    }
}

/// Step 7 for a flow that ran to its end: reads what the program passed up past the body,
/// takes the sockets out of the maps, and checks that no byte was lost on the way. False when
/// the source's stream is out of step (the outcome is then a `SourceError`).
fn finish(flow: Flow, src: &TcpStream, mut outcome: TransferOutcome) -> (TransferOutcome, bool) {
    if outcome.ending != Ending::Done {
        return (outcome, true);
    }
    outcome.overread = take_passed(src);
    let consumed_before = flow.consumed_before;
    let expected = flow.bytes + outcome.overread.len() as u64;
    // Out of the maps before counting: from here on the socket is plain TCP again.
    drop(flow);
    if let Err(error) = check_nothing_lost(src, consumed_before, expected) {
        outcome.ending = Ending::SourceError;
        outcome.error = Some(error);
        return (outcome, false);
    }
    (outcome, true)
}

impl Drop for Flow {
    fn drop(&mut self) {
        let program = &self.shared.program;
        // Source first: once it is out, nothing more is redirected to the destination.
        if self.inserted == Inserted::Both {
            let _ = program.remove_source(self.slot);
        }
        if matches!(self.inserted, Inserted::Both | Inserted::Destination) {
            let _ = program.remove_destination(self.slot);
        }
        if self.inserted != Inserted::Nothing {
            let _ = program.remove_flow(self.cookie);
        }
        self.shared.free_slots.borrow_mut().push(self.slot);
    }
}

/// Bytes the destination socket has taken into its send path so far: acknowledged plus still
/// queued. The two come from two system calls, and an ACK landing between them would make the
/// sum short by what it acknowledged; a base read short makes every later count long, and a
/// transfer then looked complete while its last bytes were still on the source (a 502 on the
/// next exchange of that upstream connection, found by `sluice-lab peers --verify`). So the
/// acknowledged count is read on both sides of the queue and the read repeated until it held.
fn destination_taken(dst: &TcpStream) -> io::Result<u64> {
    loop {
        let acked = bytes_acked(dst.as_fd())?;
        let queued = send_queue(dst.as_fd())?;
        if bytes_acked(dst.as_fd())? == acked {
            return Ok(acked + queued);
        }
    }
}

/// Everything the program passed up past the body end, read before the socket leaves the map
/// (the kernel discards the map's per-socket queue then).
fn take_passed(src: &TcpStream) -> Vec<u8> {
    let mut passed = Vec::new();
    while let Ok(Some(bytes)) = read_now(src, 64 * 1024) {
        if bytes.is_empty() {
            break;
        }
        passed.extend_from_slice(&bytes);
    }
    passed
}

/// Bytes of the source's stream consumed so far: received in order minus still queued. The
/// queue is read on both sides of the counter, and again until it holds still, so that a
/// segment arriving in between cannot skew the difference.
fn consumed(src: &TcpStream) -> io::Result<u64> {
    loop {
        let queued = receive_queue(src.as_fd())?;
        let received = bytes_received(src.as_fd())?;
        if receive_queue(src.as_fd())? == queued {
            return Ok(received.wrapping_sub(queued));
        }
    }
}

/// After the source left the map: the program and our reads together must account for every
/// byte it consumed, no more and no less. More: a segment that arrived between our last read
/// of the map's queue and the removal was discarded with that queue. Less: body bytes are
/// still on the source. Either way the stream is out of sync and must not be used again (and a
/// receive queue the kernel reports negative, seen on 6.18 after removal, counts as out of
/// sync too).
fn check_nothing_lost(src: &TcpStream, consumed_before: u64, expected: u64) -> io::Result<()> {
    // Bytes the map's queues held (passed up, or waiting in the psock's backlog) are still
    // unread for FIONREAD but were discarded with the queues: the count alone misses them.
    let unread = receive_queue(src.as_fd())?;
    let readable = readable(src.as_fd(), unread)?;
    if readable < unread {
        return Err(io::Error::other(format!(
            "the source's stream has {unread} bytes unread but {readable} readable: the rest \
             were dropped with the sockmap's queues"
        )));
    }
    let after = consumed(src)?;
    let processed = after.wrapping_sub(consumed_before);
    tracing::debug!(processed, expected, "sockmap flow accounted");
    if processed != expected {
        return Err(io::Error::other(format!(
            "the source's stream moved {processed} bytes through the sockmap, {expected} \
             accounted for: out of sync"
        )));
    }
    Ok(())
}

/// Reads up to `want` bytes without waiting: `None` when nothing is there, an empty vector at
/// end of stream.
fn read_now(src: &TcpStream, want: u64) -> io::Result<Option<Vec<u8>>> {
    let mut buf = vec![0u8; usize::try_from(want.min(1 << 20)).unwrap_or(1 << 20)];
    let mut stream = src.std();
    match stream.read(&mut buf) {
        Ok(n) => {
            buf.truncate(n);
            Ok(Some(buf))
        }
        Err(error) if error.kind() == io::ErrorKind::WouldBlock => Ok(None),
        Err(error) => Err(error),
    }
}

/// Whether the source has reached end of stream (a peek, so nothing is consumed).
fn at_eof(src: &TcpStream) -> bool {
    matches!(src.std().peek(&mut [0u8; 1]), Ok(0))
}

/// How many times the drain reads the receive queue before giving up on an empty one.
const DRAIN_ROUNDS: u32 = 16;

/// Step 1: moves the bytes queued on `src` (by splice) until the queue is seen empty, at most
/// `limit`; returns how many, and whether the queue was seen empty (else the sockmap must not
/// be used).
///
/// Why empty, not merely "read what was queued": the kernel may coalesce a segment arriving
/// during our read into the last queued one (tcp_try_coalesce), leaving it partly read, and
/// the program would forward it again whole. An empty queue has no last segment to grow.
async fn drain_queued(
    splice: &SpliceEngine,
    src: &TcpStream,
    dst: &TcpStream,
    limit: u64,
    idle: Duration,
    stats: &EngineStats,
) -> Result<(u64, bool), TransferOutcome> {
    let mut moved = 0u64;
    for _ in 0..DRAIN_ROUNDS {
        let queued = receive_queue(src.as_fd()).unwrap_or(u64::MAX);
        if queued == 0 {
            return Ok((moved, true));
        }
        let take = queued.min(limit - moved);
        let purpose = "the bytes queued before the sockmap";
        let mut outcome = splice
            .move_bytes(src, dst, take, idle, stats, purpose)
            .await;
        moved += outcome.forwarded;
        if outcome.ending != Ending::Done {
            outcome.forwarded = moved;
            return Err(outcome);
        }
        if moved == limit {
            return Ok((moved, true));
        }
    }
    Ok((moved, false))
}

async fn write_prefix(
    dst: &TcpStream,
    prefix: &[u8],
    idle: Duration,
) -> Result<(), TransferOutcome> {
    write_all(dst, prefix, idle)
        .await
        .map_err(|error| failed(0, Ending::DestinationAborted, error))
}

async fn write_all(dst: &TcpStream, bytes: &[u8], idle: Duration) -> io::Result<()> {
    if bytes.is_empty() {
        return Ok(());
    }
    timeout(idle, dst.write_all(bytes))
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

fn done(forwarded: u64) -> TransferOutcome {
    failed_clean(forwarded, Ending::Done)
}

fn failed(forwarded: u64, ending: Ending, error: io::Error) -> TransferOutcome {
    TransferOutcome {
        forwarded,
        ending,
        error: Some(error),
        overread: Vec::new(),
    }
}

fn failed_clean(forwarded: u64, ending: Ending) -> TransferOutcome {
    TransferOutcome {
        forwarded,
        ending,
        error: None,
        overread: Vec::new(),
    }
}

#[cfg(test)]
mod tests;
