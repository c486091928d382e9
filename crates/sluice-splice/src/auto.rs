//! The `auto` policy: per transfer, the cheapest mechanism for its size.
//!
//! What the proxy already read (the head and the first body bytes) always leaves from user
//! space as the prefix. The remainder is copied when it is smaller than the splice threshold
//! (two splice calls and a pipe cost more than one read and one write for a few KiB), spliced
//! otherwise, and sent through the sockmap when that engine is loaded and the remainder is
//! large. A close-delimited body has no known size and is spliced; tunnels are spliced.
//! The thresholds come from `docs/BENCHMARKS.md`, "Engines".

use std::time::Duration;

use sluice_rt::net::TcpStream;

use crate::copy::CopyEngine;
use crate::sockmap::SockmapEngine;
use crate::splice::SpliceEngine;
use crate::stats::{EngineStats, Mechanism};
use crate::{Limit, TransferOutcome, TransferRequest, TunnelOutcome};

/// Remainders at least this large go through the sockmap when it is loaded; `None`: never.
pub const SOCKMAP_THRESHOLD: Option<u64> = None;

/// Picks copy, splice or sockmap per transfer by the bytes left to move.
#[derive(Debug, Clone)]
pub struct AutoEngine {
    copy: CopyEngine,
    splice: SpliceEngine,
    sockmap: Option<SockmapEngine>,
    splice_threshold: u64,
    sockmap_threshold: u64,
}

impl AutoEngine {
    /// An auto engine that splices remainders of at least `splice_threshold` bytes and sends
    /// those of at least `sockmap_threshold` through `sockmap` when it is given.
    pub fn new(
        copy: CopyEngine,
        splice: SpliceEngine,
        sockmap: Option<SockmapEngine>,
        splice_threshold: u64,
        sockmap_threshold: u64,
    ) -> Self {
        AutoEngine {
            copy,
            splice,
            sockmap,
            splice_threshold,
            sockmap_threshold,
        }
    }

    /// The mechanism this policy picks for a transfer with `limit` left to read.
    pub fn choose(&self, limit: Limit) -> Mechanism {
        match limit {
            Limit::Bytes(n) if n < self.splice_threshold => Mechanism::Copy,
            Limit::Bytes(n) if n >= self.sockmap_threshold && self.sockmap.is_some() => {
                Mechanism::Sockmap
            }
            Limit::Bytes(_) | Limit::UntilClose => Mechanism::Splice,
        }
    }

    /// The splice engine, when this policy would not copy a body with `limit` left.
    pub fn splice_for(&self, limit: Limit) -> Option<&SpliceEngine> {
        (self.choose(limit) != Mechanism::Copy).then_some(&self.splice)
    }

    /// Moves one body with the mechanism [`AutoEngine::choose`] picks.
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        match (self.choose(request.limit), &self.sockmap) {
            (Mechanism::Copy, _) => {
                let outcome = self.copy.transfer(src, dst, request).await;
                stats.record(
                    Mechanism::Copy,
                    outcome.forwarded + request.prefix.len() as u64,
                );
                outcome
            }
            (Mechanism::Sockmap, Some(sockmap)) => sockmap.transfer(src, dst, request, stats).await,
            _ => self.splice.transfer(src, dst, request, stats).await,
        }
    }

    /// Tunnels are long-lived and their size unknown: spliced.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle: Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        self.splice.tunnel(client, upstream, idle, stats).await
    }
}
