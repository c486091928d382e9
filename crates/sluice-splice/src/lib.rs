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
//! Only the user-space copy exists today ([`copy`]); splice(2)/tee(2) and eBPF sockmap engines
//! come behind the same interface. The engine never parses HTTP: chunked bodies are framed by the
//! caller, which hands it one chunk's data at a time.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod copy;
mod stats;

use std::fmt;
use std::io;
use std::time::Duration;

use sluice_rt::net::TcpStream;

pub use copy::CopyEngine;
pub use stats::EngineStats;

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
}

impl Engine {
    /// The engine's name in logs and config.
    pub fn name(&self) -> &'static str {
        match self {
            Engine::Copy(_) => "copy",
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
        let outcome = match self {
            Engine::Copy(engine) => engine.transfer(src, dst, request).await,
        };
        stats.record_transfer(outcome.forwarded + request.prefix.len() as u64);
        outcome
    }

    /// Moves bytes both ways between `client` and `upstream` until both directions close.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle_timeout: Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        let outcome = match self {
            Engine::Copy(engine) => engine.tunnel(client, upstream, idle_timeout).await,
        };
        stats.record_transfer(outcome.upstream_bytes + outcome.client_bytes);
        outcome
    }
}
