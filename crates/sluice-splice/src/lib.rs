//! Body engines: the ways Sluice moves a body or a tunnel from one socket to another.
//!
//! `sluice-proxy` parses heads in user space and hands every body to [`Engine::transfer`] (one
//! direction, a byte count or until the source closes, with bytes already read sent first) and
//! every CONNECT tunnel to [`Engine::tunnel`] (both directions until both close). The result says
//! how many bytes moved and why the transfer ended, so the proxy can tell a complete response
//! from an aborted one and decide whether a connection may be reused.
//!
//! Start with [`Engine`], [`Limit`] and [`TransferOutcome`].
//!
//! Engines: [`copy`] (user-space read/write, the baseline and the fallback), [`splice`] (socket
//! -> pipe -> socket with splice(2), pipes from a per-worker [`PipePool`]), [`sockmap`] (an eBPF
//! SK_SKB verdict program redirects segments between sockets in softirq context; needs root)
//! and [`auto`] (picks one per transfer by size). [`keep_copy`] adds the papers' KeepCopy to a
//! spliced transfer: the forwarded bytes also go to a sink, such as the cache. Each worker builds
//! its engines from one [`WorkerEngines`], so its listeners share one pipe pool and one sockmap.
//! Every fallback from a kernel mechanism is counted in [`EngineStats`] by reason and logged.
//!
//! The engine never parses HTTP: chunked bodies are framed by the caller, which hands it one
//! chunk's data at a time.
//!
//! # The papers' data-stream splice, in this API
//!
//! - *Request*: [`TransferRequest`] for one direction, with the bytes already read as its
//!   `prefix` and its termination as [`Limit`] (a payload limit, or until the source closes);
//!   [`Engine::tunnel`] for both directions until both close. *KeepCopy* with its min2read and
//!   max2cache is [`SpliceEngine::transfer_keeping_copy`] with a [`KeepCopy`].
//! - *Result*: [`TransferOutcome`] (bytes forwarded, why it ended) or [`TunnelOutcome`] (bytes
//!   each way), returned when the transfer ends.
//! - *AutoRelease* is always on: a transfer releases what it holds when it ends, whatever the
//!   ending. Its pipe goes back to the worker's pool if empty and is closed otherwise (see
//!   [`PipePool`]); its sockmap entries are removed. A finished transfer never needs to be
//!   unspliced, and the sockets are plain sockets again.
//! - *Unsplice* is dropping the transfer's future, at any await point (race it against
//!   something else with `futures_lite::future::or`). Dropping releases exactly as above.
//!   Afterwards both sockets work: the source continues at the first byte the transfer did not
//!   take; the destination takes plain writes after what it was sent. Bytes taken but not yet
//!   sent are gone: a pipe's bytes are discarded with the pipe, and bytes the sockmap program
//!   redirected still leave from the destination's send queue. So a cancelled body cannot be
//!   resumed; the connection that carried it should close. The unit tests
//!   `a_cancelled_transfer_*` and `a_transfer_cancelled_with_bytes_in_its_pipe_*` show this.
//! - *Byte counts* come only from the outcome, so a cancelled transfer reports none. The proxy
//!   never cancels one mid-body: transfers end on their own (the limit, end of stream, an
//!   error, `idle_timeout`). Only at shutdown, past its grace period, does a worker drop the
//!   exchanges still running, and their access-log lines with them. A progress counter would
//!   have no reader, so there is none.
//!
//! Every system call beyond plain reads and writes lives in `sys/`, one file per mechanism; the
//! rest of the crate has no `unsafe`.
#![deny(unsafe_code)]
#![deny(unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]
#![warn(missing_docs)]

pub mod auto;
pub mod copy;
pub mod keep_copy;
mod pipe;
pub mod sockmap;
pub mod splice;
mod stats;
mod sys;
#[cfg(test)]
mod test_sockets;

use std::fmt;
use std::io;
use std::time::Duration;

use sluice_rt::net::TcpStream;

pub use auto::AutoEngine;
pub use copy::CopyEngine;
pub use keep_copy::{CopySink, KeepCopy, KeepCopyOutcome};
pub use pipe::PipePool;
pub use sockmap::SockmapEngine;
pub use splice::SpliceEngine;
pub use stats::{EngineStats, FallbackReason, Mechanism, FALLBACK_LOG_PERIOD};

/// Where a unidirectional transfer ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Limit {
    /// After exactly this many bytes from the source (a Content-Length body, one chunk).
    Bytes(u64),
    /// When the source closes (a close-delimited response).
    UntilClose,
}

/// Why a transfer ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The limit was reached, or the source closed for [`Limit::UntilClose`].
    Done,
    /// The source closed before the limit: the body is truncated.
    SourceClosedEarly,
    /// Reading from the source failed.
    SourceError,
    /// Writing to the destination failed (the peer went away).
    DestinationAborted,
    /// Nothing moved for the idle timeout.
    Idle,
}

impl Ending {
    /// A short word for logs and counters.
    pub fn as_str(self) -> &'static str {
        match self {
            Ending::Done => "done",
            Ending::SourceClosedEarly => "source-closed-early",
            Ending::SourceError => "source-error",
            Ending::DestinationAborted => "destination-aborted",
            Ending::Idle => "idle",
        }
    }
}

impl fmt::Display for Ending {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The result of one unidirectional transfer.
#[derive(Debug)]
pub struct TransferOutcome {
    /// Bytes read from the source and written to the destination, not counting the prefix.
    pub forwarded: u64,
    /// Why it ended.
    pub ending: Ending,
    /// The system error behind a `SourceError` or `DestinationAborted`.
    pub error: Option<io::Error>,
    /// Bytes read from the source past the limit: the start of whatever follows the body on
    /// that connection (the next chunk's framing, a pipelined request). Only the sockmap engine
    /// produces them, when one segment crosses the body end; the caller must treat them as read
    /// from the source before reading it again.
    pub overread: Vec<u8>,
}

/// The result of a bidirectional tunnel.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TunnelOutcome {
    /// Bytes from the client side to the upstream side.
    pub upstream_bytes: u64,
    /// Bytes from the upstream side to the client side.
    pub client_bytes: u64,
    /// Done when both sides closed; Idle on the tunnel timeout; otherwise the first failure.
    pub ending: Ending,
}

/// One transfer's request: what to move and how long to wait for progress.
#[derive(Debug, Clone, Copy)]
pub struct TransferRequest<'a> {
    /// Bytes already read (a head plus the first body bytes) to send before anything else, in
    /// the same system call as the first body bytes where the engine can.
    pub prefix: &'a [u8],
    /// Where the transfer ends, counted from the source after the prefix.
    pub limit: Limit,
    /// How long a transfer may make no progress before it ends with [`Ending::Idle`].
    pub idle_timeout: Duration,
}

/// A way of moving bytes between sockets, chosen per listener.
#[derive(Debug, Clone)]
pub enum Engine {
    /// Read into a user-space buffer, write it out.
    Copy(CopyEngine),
    /// splice(2) through a pipe from the worker's pool; copies when no pipe is left.
    Splice(SpliceEngine),
    /// Copy, splice or sockmap per transfer, by size.
    Auto(AutoEngine),
    /// eBPF sockmap redirect, finished with splice at the edges.
    Sockmap(SockmapEngine),
}

impl Engine {
    /// The engine's name in logs and config.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Copy(_) => "copy",
            Engine::Splice(_) => "splice",
            Engine::Auto(_) => "auto",
            Engine::Sockmap(_) => "sockmap",
        }
    }

    /// The name for logs of what moves a body with `limit` left: `auto` resolved to the
    /// mechanism it picks for that size (a fallback for want of a pipe is counted in the
    /// engine stats, not here).
    pub fn name_for(&self, limit: Limit) -> &'static str {
        match self {
            Engine::Auto(engine) => engine.choose(limit).as_str(),
            other => other.name(),
        }
    }

    /// Moves one body (or chunk) from `src` to `dst`.
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        match self {
            Engine::Copy(engine) => {
                let outcome = engine.transfer(src, dst, request).await;
                stats.record(
                    Mechanism::Copy,
                    outcome.forwarded + request.prefix.len() as u64,
                );
                outcome
            }
            Engine::Splice(engine) => engine.transfer(src, dst, request, stats).await,
            Engine::Auto(engine) => engine.transfer(src, dst, request, stats).await,
            Engine::Sockmap(engine) => engine.transfer(src, dst, request, stats).await,
        }
    }

    /// The splice engine to run a KeepCopy transfer (splice plus tee) on, for a body with
    /// `limit` left to read; `None` when this engine would copy it, where the caller can keep
    /// its copy without a second pipe. The sockmap engine gives its splice engine: a redirected
    /// body never passes through user space, so it could not be kept.
    pub fn splice_for_keep_copy(&self, limit: Limit) -> Option<&SpliceEngine> {
        match self {
            Engine::Copy(_) => None,
            Engine::Splice(engine) => Some(engine),
            Engine::Auto(engine) => engine.splice_for(limit),
            Engine::Sockmap(engine) => Some(engine.splice_engine()),
        }
    }

    /// Moves bytes both ways between `client` and `upstream` until both directions close.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle_timeout: Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        match self {
            Engine::Copy(engine) => {
                let outcome = engine.tunnel(client, upstream, idle_timeout).await;
                stats.record(
                    Mechanism::Copy,
                    outcome.upstream_bytes + outcome.client_bytes,
                );
                outcome
            }
            Engine::Splice(engine) => engine.tunnel(client, upstream, idle_timeout, stats).await,
            Engine::Auto(engine) => engine.tunnel(client, upstream, idle_timeout, stats).await,
            Engine::Sockmap(engine) => engine.tunnel(client, upstream, idle_timeout, stats).await,
        }
    }
}

/// What the engines take from the `[transfer]` config, in their own terms.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineSettings {
    /// The copy engine's buffer per direction (`transfer.copy_buffer`).
    pub copy_buffer: usize,
    /// Capacity asked for each pipe (`transfer.pipe_size`).
    pub pipe_size: usize,
    /// Most pipes per worker (`transfer.pipe_pool`).
    pub pipe_pool: usize,
    /// `auto` splices remainders at least this large (`transfer.splice_threshold`).
    pub splice_threshold: u64,
}

/// One worker's engines: every listener of the worker gets its [`Engine`] from here, so they
/// share one pipe pool and one sockmap. Build it on the worker's thread.
#[derive(Debug)]
pub struct WorkerEngines {
    settings: EngineSettings,
    pool: PipePool,
    /// Loaded on first use: most configs never need the program.
    sockmap: std::cell::OnceCell<Result<SockmapEngine, std::sync::Arc<io::Error>>>,
}

/// Why an engine asked for by the config cannot run on this machine.
#[derive(Debug, thiserror::Error)]
#[error("the sockmap engine is unavailable: {source} (needs root or CAP_BPF+CAP_NET_ADMIN and a kernel with BPF sockmap; use engine = \"splice\" or \"auto\")")]
pub struct SockmapUnavailable {
    /// What failed while loading the program or its maps.
    #[source]
    pub source: std::sync::Arc<io::Error>,
}

impl WorkerEngines {
    /// Sets up the pool; pipes open on first use, the sockmap program on first request.
    pub fn new(settings: EngineSettings) -> Self {
        WorkerEngines {
            pool: PipePool::new(settings.pipe_size, settings.pipe_pool),
            settings,
            sockmap: std::cell::OnceCell::new(),
        }
    }

    fn loaded_sockmap(&self) -> &Result<SockmapEngine, std::sync::Arc<io::Error>> {
        self.sockmap
            .get_or_init(|| SockmapEngine::load(self.splice_engine()).map_err(std::sync::Arc::new))
    }

    fn copy_engine(&self) -> CopyEngine {
        CopyEngine::new(self.settings.copy_buffer)
    }

    fn splice_engine(&self) -> SpliceEngine {
        SpliceEngine::new(self.pool.clone(), self.copy_engine())
    }

    /// The user-space copy.
    pub fn copy(&self) -> Engine {
        Engine::Copy(self.copy_engine())
    }

    /// splice(2), copying when the pool is empty.
    pub fn splice(&self) -> Engine {
        Engine::Splice(self.splice_engine())
    }

    /// The size-based policy. It loads the sockmap only if its threshold says it may ever be
    /// picked, and leaves it out, with a warning, when it cannot load.
    pub fn auto(&self) -> Engine {
        let sockmap = match auto::SOCKMAP_THRESHOLD {
            None => None,
            Some(_) => match self.loaded_sockmap() {
                Ok(engine) => Some(engine.clone()),
                Err(error) => {
                    // Not one transfer's fallback, so not counted; but not silent either.
                    tracing::warn!(%error, "auto: no sockmap engine; its bodies go by splice");
                    None
                }
            },
        };
        Engine::Auto(AutoEngine::new(
            self.copy_engine(),
            self.splice_engine(),
            sockmap,
            self.settings.splice_threshold,
            auto::SOCKMAP_THRESHOLD.unwrap_or(u64::MAX),
        ))
    }

    /// The sockmap engine, if its program loads (root, BPF sockmap in the kernel).
    pub fn sockmap(&self) -> Result<Engine, SockmapUnavailable> {
        match self.loaded_sockmap() {
            Ok(engine) => Ok(Engine::Sockmap(engine.clone())),
            Err(source) => Err(SockmapUnavailable {
                source: source.clone(),
            }),
        }
    }
}
