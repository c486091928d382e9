//! The sockmap engine (placeholder until the eBPF loader lands): reports itself unavailable.

use std::io;

use sluice_rt::net::TcpStream;

use crate::splice::SpliceEngine;
use crate::stats::EngineStats;
use crate::{TransferOutcome, TransferRequest, TunnelOutcome};

/// Redirects bytes between sockets with an eBPF SK_SKB program.
#[derive(Debug, Clone)]
pub struct SockmapEngine {
    splice: SpliceEngine,
}

impl SockmapEngine {
    /// Loads the program and its maps.
    pub fn load(_splice: SpliceEngine) -> io::Result<Self> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }

    /// Moves one body.
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
        stats: &EngineStats,
    ) -> TransferOutcome {
        self.splice.transfer(src, dst, request, stats).await
    }

    /// Moves bytes both ways.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle: std::time::Duration,
        stats: &EngineStats,
    ) -> TunnelOutcome {
        self.splice.tunnel(client, upstream, idle, stats).await
    }
}
