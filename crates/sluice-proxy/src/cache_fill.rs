//! Relaying a cacheable response while copying its body into a [`Fill`] (KeepCopy in user
//! space): each piece read from the upstream goes to the client as framed and, transfer coding
//! removed, into the fill; the fill is committed with the length the framing promised only when
//! the body ended as framed, and aborted on any failure, so no partial entry is ever servable.
//!
//! Cacheable responses take this copy path whatever the listener's engine: the kernel engines
//! never show the bytes to user space. (Splicing with a `tee` into the cache is the next step.)
//!
//! If the client goes away, reading continues into the fill for up to `cache.fill_after_abort`
//! more bytes; a longer rest drops the fill.

use std::cell::RefCell;
use std::sync::Arc;
use std::time::SystemTime;

use sluice_cache::{AbortReason, Committed, Fill, MemoryStore, StoredEntry};
use sluice_http::{BodyFraming, ChunkStep, ChunkedDecoder};
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;

use crate::access_log::AccessRecord;
use crate::body::BodyFailure;
use crate::client::ClientConnection;
use crate::error::{Phase, ProxyError, Side, Termination};
use crate::exchange::{describe, response_failure_termination, Exchange, UpstreamResponse};

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
    record.engine = "copy";
    let relay = mode == FillMode::Relay;
    let out = if relay {
        exchange.client_response_head(head, plan.keep_client, plan.dechunk)
    } else {
        Vec::new()
    };
    let config = &exchange.worker.config;
    let mut copy = KeepCopy {
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
        fill: Some(fill),
        verbatim: !plan.dechunk,
        written: 0,
        charged: 0,
    };
    let result = copy.transfer(plan.framing, buf).await;
    record.bytes += copy.written;
    let fill = copy.fill.take();
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

struct KeepCopy<'a> {
    upstream: &'a TcpStream,
    client: &'a TcpStream,
    exchange: &'a Exchange<'a>,
    /// Bytes for the client not yet written.
    out: Vec<u8>,
    /// False once the client failed (or from the start in silent mode).
    client_open: bool,
    /// Body bytes still allowed to be read after the client went away.
    after_abort: u64,
    /// `None` once the fill failed (the body passed `cache.max_object`) and was aborted.
    fill: Option<Fill>,
    /// Chunked framing goes to the client as received (false: an HTTP/1.0 client gets only the
    /// payload).
    verbatim: bool,
    written: u64,
    /// Bytes this fill added to `Worker::fill_bytes`, given back when the transfer ends.
    charged: u64,
}

impl Drop for KeepCopy<'_> {
    fn drop(&mut self) {
        let worker = self.exchange.worker;
        worker
            .fill_bytes
            .set(worker.fill_bytes.get().saturating_sub(self.charged));
    }
}

impl KeepCopy<'_> {
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
            self.keep_going()?;
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
            self.keep_going()?;
            self.read_more(&mut input).await?;
        }
    }

    /// Body payload (transfer coding removed) into the fill.
    fn payload(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        let Some(fill) = self.fill.as_mut() else {
            return;
        };
        let worker = self.exchange.worker;
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
    fn keep_going(&self) -> Step {
        if self.client_open {
            return Ok(());
        }
        if self.fill.is_none() || self.after_abort == 0 {
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
