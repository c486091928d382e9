//! Relaying a cacheable response while its body goes into a [`Fill`] as well (the USENIX 2003
//! paper's KeepCopy). Two paths:
//!
//! - **spliced**: a Content-Length body the listener's engine would splice (or send through
//!   the sockmap) is spliced to the client, and `tee(2)` duplicates it into a second pipe that
//!   is drained into the fill ([`SpliceEngine::transfer_keeping_copy`]); the body crosses into
//!   user space once, for the cache, and never for the client.
//! - **copied**: everything else (chunked and close-delimited bodies, small bodies `auto`
//!   copies, the copy engine, no pipe left): each piece read from the upstream goes to the
//!   client as framed and, transfer coding removed, into the fill.
//!
//! Either way the fill is committed with the length the framing promised only when the body
//! ended as framed, and aborted on any failure, so no partial entry is ever servable. If the
//! client goes away, reading continues into the fill while at most `cache.fill_after_abort`
//! bytes remain; a longer rest drops the fill.

use std::cell::RefCell;
use std::io;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::SystemTime;

use sluice_cache::{AbortReason, Committed, Fill, MemoryStore, StoredEntry};
use sluice_http::{BodyFraming, ChunkStep, ChunkedDecoder};
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;
use sluice_splice::{
    CopySink, Ending, KeepCopy, KeepCopyOutcome, Limit, Mechanism, SpliceEngine, TransferRequest,
};

use crate::access_log::AccessRecord;
use crate::body::BodyFailure;
use crate::client::ClientConnection;
use crate::error::{Phase, ProxyError, Side, Termination};
use crate::exchange::{describe, response_failure_termination, Exchange, UpstreamResponse};
use crate::worker::Worker;

/// KeepCopy's min2read: the fill is handed the copy in pieces of at least this many bytes.
const KEEP_MIN_READ: usize = 64 * 1024;
/// KeepCopy's max2cache: body bytes teed but not yet in the fill, at most. A slower fill
/// pauses the transfer rather than letting the copy grow; 1 MiB keeps one pipe's worth moving.
const KEEP_MAX_UNREAD: usize = 1 << 20;

/// Whether the client sees the response as it arrives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FillMode {
    /// Relay head and body to the client while filling.
    Relay,
    /// Fill only; the caller answers the client from the stored entry (Range, conditionals).
    Silent,
}

/// How a fill ended, for the caller.
pub(crate) enum FillOutcome {
    /// [`FillMode::Relay`]: the client got the response (or went away); the exchange's result.
    Relayed(bool),
    /// [`FillMode::Silent`]: the entry is in the store.
    Stored,
    /// [`FillMode::Silent`]: complete, but too large for the store: answer from it once.
    StoredElsewhere(Arc<StoredEntry>),
    /// [`FillMode::Silent`]: the body did not arrive whole; nothing was sent to the client.
    Failed(ProxyError),
}

/// Runs the transfer of `response`'s body into `fill` (and to the client in relay mode).
pub(crate) async fn run(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    conn: &mut ClientConnection,
    response: UpstreamResponse,
    fill: Fill,
    mode: FillMode,
    record: &mut AccessRecord,
) -> FillOutcome {
    let plan = match exchange.plan(&response) {
        Ok(plan) => plan,
        Err(error) => {
            fill.abort(
                &mut cache.borrow_mut(),
                AbortReason::Failed,
                SystemTime::now(),
            );
            return match mode {
                FillMode::Relay => {
                    FillOutcome::Relayed(crate::exchange::fail(conn, record, error).await)
                }
                FillMode::Silent => FillOutcome::Failed(error),
            };
        }
    };
    let UpstreamResponse {
        stream: upstream,
        addr,
        head,
        buf,
    } = response;
    let relay = mode == FillMode::Relay;
    let config = &exchange.worker.config;
    let mut sink = FillSink {
        worker: exchange.worker,
        fill: Some(fill),
        charged: 0,
    };
    let body_limit = match plan.framing {
        BodyFraming::Length(n) => {
            let buffered = usize::try_from(n).unwrap_or(usize::MAX).min(buf.len());
            Some((n, buffered))
        }
        _ => None,
    };
    let out = if relay {
        exchange.client_response_head(head, plan.keep_client, plan.dechunk)
    } else {
        Vec::new()
    };
    // The spliced path, for a relayed Content-Length body with more to read than is buffered,
    // when the listener's engine would not copy that rest.
    let spliceable = body_limit.filter(|&(n, buffered)| relay && n > buffered as u64);
    let splice = spliceable.and_then(|(n, buffered)| {
        (exchange.listener.engine).splice_for_keep_copy(Limit::Bytes(n - buffered as u64))
    });
    if let (Some(splice), Some((n, buffered))) = (splice, spliceable) {
        let body_start = &buf[..buffered];
        let run = relay_spliced(
            exchange, splice, &upstream, conn, &out, body_start, n, &mut sink,
        );
        if let Some((outcome, written)) = run.await {
            record.engine = "splice";
            record.bytes += written;
            let fill = sink.fill.take();
            // Gives back the fill's share of `Worker::fill_bytes`.
            drop(sink);
            let reusable = plan.upstream_persistent && buf.len() == buffered;
            let framed = finish_spliced(exchange, cache, fill, n, outcome, record);
            if framed && reusable {
                exchange.worker.pool.borrow_mut().put(addr, upstream);
            }
            return FillOutcome::Relayed(framed && plan.keep_client);
        }
        // No pipe for the copy: the copy path below, nothing sent yet.
    }
    record.engine = "copy";
    let mut copy = CopyRelay {
        upstream: &upstream,
        client: &conn.stream,
        exchange,
        out,
        client_open: relay,
        after_abort: if relay {
            config.cache.fill_after_abort as u64
        } else {
            u64::MAX
        },
        sink,
        verbatim: !plan.dechunk,
        written: 0,
        payload: 0,
    };
    let result = copy.transfer(plan.framing, buf).await;
    record.bytes += copy.written;
    // No engine ran, so this copy is counted here, as the engines count theirs: what reached
    // the client, or, for a silent fill, what reached the fill.
    let moved = if relay { copy.written } else { copy.payload };
    exchange.worker.stats.record(Mechanism::Copy, moved);
    let fill = copy.sink.fill.take();
    let client_open = copy.client_open;
    // Gives back the fill's share of `Worker::fill_bytes` and the borrows of both sockets.
    drop(copy);
    match result {
        Ok(leftover) => {
            let committed = fill.map(|fill| commit(exchange, cache, fill));
            if plan.upstream_persistent && leftover.is_empty() {
                exchange.worker.pool.borrow_mut().put(addr, upstream);
            }
            match mode {
                FillMode::Relay => {
                    if !client_open {
                        record.termination = Termination::by(Side::Client, Phase::Data);
                        record.error = Some(String::from(
                            "client went away; the body was read on into the cache",
                        ));
                    }
                    FillOutcome::Relayed(client_open && plan.keep_client)
                }
                FillMode::Silent => match committed {
                    Some(Ok(Committed::Stored { .. })) => FillOutcome::Stored,
                    Some(Ok(Committed::TooLargeForMemory(entry))) => {
                        FillOutcome::StoredElsewhere(entry)
                    }
                    Some(Err(error)) => FillOutcome::Failed(ProxyError::FillFailed {
                        addr,
                        reason: error.to_string(),
                    }),
                    None => FillOutcome::Failed(ProxyError::FillFailed {
                        addr,
                        reason: String::from("the body passed cache.max_object"),
                    }),
                },
            }
        }
        Err(failure) => {
            if let Some(fill) = fill {
                fill.abort(
                    &mut cache.borrow_mut(),
                    AbortReason::Failed,
                    SystemTime::now(),
                );
            }
            match mode {
                FillMode::Relay => {
                    // As in the plain path: the client's connection closes, so a cut body is
                    // never taken for a whole one.
                    record.termination = if client_open {
                        response_failure_termination(&failure)
                    } else {
                        Termination::by(Side::Client, Phase::Data)
                    };
                    record.error = Some(format!("response body: {}", describe(&failure)));
                    FillOutcome::Relayed(false)
                }
                FillMode::Silent => FillOutcome::Failed(ProxyError::FillFailed {
                    addr,
                    reason: describe(&failure),
                }),
            }
        }
    }
}

/// Splices the head, the buffered `body_start` and the rest of a `body_len`-byte body to the
/// client, teeing the body into `sink`. `None` when the transfer could not start (no pipe left),
/// with nothing sent and nothing given to the sink; otherwise the outcome and the bytes written.
#[allow(clippy::too_many_arguments)]
async fn relay_spliced(
    exchange: &Exchange<'_>,
    splice: &SpliceEngine,
    upstream: &TcpStream,
    conn: &ClientConnection,
    head: &[u8],
    body_start: &[u8],
    body_len: u64,
    sink: &mut FillSink<'_>,
) -> Option<(KeepCopyOutcome, u64)> {
    let keep = KeepCopy {
        min_read: KEEP_MIN_READ,
        max_unread: KEEP_MAX_UNREAD,
        keep_after_abort: exchange.worker.config.cache.fill_after_abort as u64,
    };
    let mut prefix = Vec::with_capacity(head.len() + body_start.len());
    prefix.extend_from_slice(head);
    prefix.extend_from_slice(body_start);
    let request = TransferRequest {
        prefix: &prefix,
        limit: Limit::Bytes(body_len - body_start.len() as u64),
        idle_timeout: exchange.worker.config.timeouts.body_idle,
    };
    // The buffered body bytes are the fill's first bytes, given to it only once the transfer
    // runs: if it cannot start, the copy path fills from the start.
    let mut sink = AfterBuffered {
        buffered: Some(body_start),
        sink,
    };
    let stats = &exchange.worker.stats;
    let transfer =
        splice.transfer_keeping_copy(upstream, &conn.stream, request, keep, &mut sink, stats);
    match transfer.await {
        Ok(outcome) => {
            if let Some(buffered) = sink.buffered.take() {
                sink.sink.payload(buffered);
            }
            let sent_prefix = outcome.forwarded > 0 || outcome.ending == Ending::Done;
            let written = outcome.forwarded + if sent_prefix { prefix.len() as u64 } else { 0 };
            Some((outcome, written))
        }
        Err(error) => {
            // The engine counted the fallback and logged it; the copy path counts the copy.
            tracing::debug!(%error, "cache: KeepCopy could not start; copying instead");
            None
        }
    }
}

/// Commits `fill` if the whole `body_len`-byte body reached it (aborts it otherwise) and logs
/// how the spliced relay ended. True when the body ended as framed for the client too (the
/// upstream connection may be reused); false when the client's connection must close.
fn finish_spliced(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    fill: Option<Fill>,
    body_len: u64,
    outcome: KeepCopyOutcome,
    record: &mut AccessRecord,
) -> bool {
    let whole = outcome.source_complete && outcome.sink_error.is_none();
    match fill {
        Some(fill) if whole && fill.len() == body_len => {
            let _ = commit(exchange, cache, fill);
        }
        Some(fill) => fill.abort(
            &mut cache.borrow_mut(),
            AbortReason::Failed,
            SystemTime::now(),
        ),
        None => {}
    }
    let failure = match crate::body::ending_to_result(outcome.ending, outcome.error) {
        Ok(()) => return true,
        Err(failure) => failure,
    };
    if outcome.ending == Ending::DestinationAborted {
        record.termination = Termination::by(Side::Client, Phase::Data);
        record.error = Some(String::from(if whole {
            "client went away; the body was read on into the cache"
        } else {
            "client went away"
        }));
    } else {
        // The client's connection closes: a cut body is never taken for a whole one.
        record.termination = response_failure_termination(&failure);
        record.error = Some(format!("response body: {}", describe(&failure)));
    }
    false
}

/// A [`FillSink`] that first takes the body bytes already read with the head.
struct AfterBuffered<'s, 'a> {
    buffered: Option<&'s [u8]>,
    sink: &'s mut FillSink<'a>,
}

impl CopySink for AfterBuffered<'_, '_> {
    fn poll_accept(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(buffered) = self.buffered.take() {
            self.sink.payload(buffered);
        }
        self.sink.poll_accept(cx, bytes)
    }
}

/// Commits `fill` with the length it received: the framing already checked that the body
/// ended where it was announced to.
fn commit(
    exchange: &Exchange<'_>,
    cache: &RefCell<MemoryStore>,
    fill: Fill,
) -> Result<Committed, sluice_cache::CacheError> {
    let mut store = cache.borrow_mut();
    let key = fill.key().clone();
    let len = fill.len();
    let committed = fill.commit(&mut store, len);
    let budget = store.config().budget_bytes;
    drop(store);
    if let Some(disk) = &exchange.worker.disk {
        // What memory gives up, or never took, goes to disk; the writes run on the tier's
        // own threads.
        let for_disk: Vec<Arc<StoredEntry>> = match &committed {
            Ok(Committed::Stored { evicted }) => evicted.clone(),
            Ok(Committed::TooLargeForMemory(entry)) => vec![Arc::clone(entry)],
            Err(_) => Vec::new(),
        };
        let mut disk = disk.borrow_mut();
        for entry in for_disk {
            if let Err(error) = disk.store(entry) {
                tracing::debug!(%error, "disk cache: not stored");
            }
        }
    }
    let store = cache.borrow();
    match &committed {
        Ok(Committed::Stored { evicted }) => tracing::debug!(
            key = %key,
            body_bytes = len,
            evicted = evicted.len(),
            used = store.used_bytes(),
            budget,
            "cache stored"
        ),
        Ok(Committed::TooLargeForMemory(_)) => {
            tracing::debug!(key = %key, body_bytes = len, "cache: too large for memory")
        }
        Err(error) => tracing::debug!(key = %key, %error, "cache fill dropped"),
    }
    committed
}

/// Why the transfer loop stops early.
type Step = Result<(), BodyFailure>;

struct CopyRelay<'a> {
    upstream: &'a TcpStream,
    client: &'a TcpStream,
    exchange: &'a Exchange<'a>,
    /// Bytes for the client not yet written.
    out: Vec<u8>,
    /// False once the client failed (or from the start in silent mode).
    client_open: bool,
    /// Body bytes still allowed to be read after the client went away.
    after_abort: u64,
    sink: FillSink<'a>,
    /// Chunked framing goes to the client as received (false: an HTTP/1.0 client gets only the
    /// payload).
    verbatim: bool,
    written: u64,
    /// Body payload read from the upstream (transfer coding removed).
    payload: u64,
}

impl CopyRelay<'_> {
    /// Moves the whole body; returns the bytes read past its end.
    async fn transfer(
        &mut self,
        framing: BodyFraming,
        input: Vec<u8>,
    ) -> Result<Vec<u8>, BodyFailure> {
        match framing {
            BodyFraming::Chunked => self.chunked(input).await,
            BodyFraming::Empty => self.plain(Some(0), input).await,
            BodyFraming::Length(n) => self.plain(Some(n), input).await,
            BodyFraming::UntilClose => self.plain(None, input).await,
        }
    }

    /// A Content-Length body (`Some`) or one delimited by the upstream closing (`None`).
    async fn plain(
        &mut self,
        mut remaining: Option<u64>,
        mut input: Vec<u8>,
    ) -> Result<Vec<u8>, BodyFailure> {
        loop {
            let take = match remaining {
                Some(left) => usize::try_from(left).unwrap_or(usize::MAX).min(input.len()),
                None => input.len(),
            };
            let piece: Vec<u8> = input.drain(..take).collect();
            self.payload(&piece);
            self.for_client(&piece);
            if let Some(left) = remaining.as_mut() {
                *left -= take as u64;
            }
            self.flush().await;
            if remaining == Some(0) {
                return Ok(input);
            }
            self.keep_going(remaining)?;
            match self.read_more(&mut input).await {
                Ok(()) => {}
                // A close-delimited body ends when the upstream closes (RFC 9112 §6.3, rule 8).
                Err(BodyFailure::SourceClosed) if remaining.is_none() => return Ok(input),
                Err(failure) => return Err(failure),
            }
        }
    }

    async fn chunked(&mut self, mut input: Vec<u8>) -> Result<Vec<u8>, BodyFailure> {
        let mut decoder = ChunkedDecoder::with_limits(&self.exchange.worker.http_limits);
        loop {
            let mut pos = 0;
            let done = loop {
                let rest = input.get(pos..).unwrap_or_default();
                let (framing, step) = decoder.advance(rest).map_err(BodyFailure::Parse)?;
                if self.verbatim {
                    let framing_bytes = rest.get(..framing).unwrap_or_default().to_vec();
                    self.for_client(&framing_bytes);
                }
                pos += framing;
                match step {
                    ChunkStep::NeedMore => break false,
                    ChunkStep::Done => break true,
                    ChunkStep::Data { remaining } => {
                        let available = input.len() - pos;
                        if available == 0 {
                            break false;
                        }
                        let take = usize::try_from(remaining)
                            .unwrap_or(usize::MAX)
                            .min(available);
                        let data = input.get(pos..pos + take).unwrap_or_default().to_vec();
                        self.payload(&data);
                        self.for_client(&data);
                        decoder.consume_data(take as u64);
                        pos += take;
                    }
                }
            };
            input.drain(..pos);
            self.flush().await;
            if done {
                return Ok(input);
            }
            self.keep_going(None)?;
            self.read_more(&mut input).await?;
        }
    }

    fn payload(&mut self, bytes: &[u8]) {
        self.payload += bytes.len() as u64;
        self.sink.payload(bytes);
    }

    fn for_client(&mut self, bytes: &[u8]) {
        if self.client_open {
            self.out.extend_from_slice(bytes);
        }
    }

    /// Writes what is pending for the client; a failed write ends only the client's side.
    async fn flush(&mut self) {
        if !self.client_open || self.out.is_empty() {
            self.out.clear();
            return;
        }
        let idle = self.exchange.worker.config.timeouts.body_idle;
        match timeout(idle, self.client.write_all(&self.out)).await {
            Ok(Ok(())) => self.written += self.out.len() as u64,
            _ => self.client_open = false,
        }
        self.out.clear();
    }

    /// Whether reading on is worth it: for the client, or for a fill within its allowance.
    /// With `remaining` known (Content-Length), a body with more left than the allowance is
    /// given up at once, as the spliced path does, rather than read up to the allowance and
    /// then dropped.
    fn keep_going(&self, remaining: Option<u64>) -> Step {
        if self.client_open {
            return Ok(());
        }
        let beyond_allowance = remaining.is_some_and(|left| left > self.after_abort);
        if self.sink.fill.is_none() || self.after_abort == 0 || beyond_allowance {
            return Err(BodyFailure::Destination(
                std::io::ErrorKind::BrokenPipe.into(),
            ));
        }
        Ok(())
    }

    /// Appends at least one byte read from the upstream to `input`.
    async fn read_more(&mut self, input: &mut Vec<u8>) -> Step {
        let read_size = self.exchange.worker.config.transfer.copy_buffer;
        let idle = self.exchange.worker.config.timeouts.body_idle;
        let start = input.len();
        input.resize(start + read_size, 0);
        let read = timeout(idle, self.upstream.read(&mut input[start..])).await;
        let n = match read {
            Err(_) => Err(BodyFailure::Idle),
            Ok(Err(error)) => Err(BodyFailure::Source(error)),
            Ok(Ok(0)) => Err(BodyFailure::SourceClosed),
            Ok(Ok(n)) => Ok(n),
        };
        input.truncate(start + *n.as_ref().unwrap_or(&0));
        let n = n?;
        if !self.client_open {
            self.after_abort = self.after_abort.saturating_sub(n as u64);
        }
        Ok(())
    }
}

/// The fill's end of a transfer: body payload into the [`Fill`], charged to the worker's
/// `fill_bytes` (given back on drop) so that all fills together stay within the store's budget.
struct FillSink<'a> {
    worker: &'a Worker,
    /// `None` once the fill failed (the body passed `cache.max_object`) and was aborted.
    fill: Option<Fill>,
    /// Bytes this fill added to `Worker::fill_bytes`.
    charged: u64,
}

impl Drop for FillSink<'_> {
    fn drop(&mut self) {
        let worker = self.worker;
        worker
            .fill_bytes
            .set(worker.fill_bytes.get().saturating_sub(self.charged));
    }
}

impl FillSink<'_> {
    /// Body payload (transfer coding removed) into the fill.
    fn payload(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let Some(fill) = self.fill.as_mut() else {
            return;
        };
        let worker = self.worker;
        let budget = worker
            .cache
            .as_ref()
            .map_or(0, |cache| cache.borrow().config().budget_bytes);
        let held = worker.fill_bytes.get() + bytes.len() as u64;
        // Past cache.max_object, or all fills together past the store's budget: drop this fill
        // (it stays failed); the client still gets the whole body.
        if held > budget || fill.append(bytes).is_err() {
            if held > budget {
                tracing::debug!(key = %fill.key(), "cache: fills in progress at the budget");
            }
            if let (Some(fill), Some(cache)) = (self.fill.take(), worker.cache.as_ref()) {
                fill.abort(
                    &mut cache.borrow_mut(),
                    AbortReason::Failed,
                    SystemTime::now(),
                );
            }
            return;
        }
        worker.fill_bytes.set(held);
        self.charged += bytes.len() as u64;
    }
}

impl CopySink for FillSink<'_> {
    fn poll_accept(&mut self, _: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        self.payload(bytes);
        Poll::Ready(match self.fill {
            Some(_) => Ok(bytes.len()),
            // The transfer goes on for the client without a copy.
            None => Err(io::Error::other("the cache fill was dropped")),
        })
    }
}
