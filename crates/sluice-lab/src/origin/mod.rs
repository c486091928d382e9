//! `sluice-lab origin`: the HTTP server emulator.
//!
//! Thread per core: each thread runs its own single-threaded event loop and its own listening
//! socket on the same port (`SO_REUSEPORT`), so the kernel spreads connections and no state is
//! shared between threads on the request path. What each request gets is described in
//! [`request`]; how a connection runs, in `conn.rs`.

mod conn;
pub mod request;

use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::Context;
use serde::Serialize;
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::watch;

use crate::dist::{CountDist, DelayDist};
use crate::target::ensure_loopback;
use conn::ThreadCounters;

/// How the origin behaves; per-request controls override `think`.
#[derive(Debug, Clone)]
pub struct OriginConfig {
    /// Address to listen on; port 0 picks a free one.
    pub listen: SocketAddr,
    /// Threads, each with its own event loop and listening socket.
    pub threads: usize,
    /// Think time before each response, unless the request asks for another.
    pub think: DelayDist,
    /// Requests served on one connection before the origin closes it (PolyMix-4: `zipf:16`).
    pub conn_cap: CountDist,
    /// Largest body served; larger requests get 413.
    pub max_size: u64,
}

impl Default for OriginConfig {
    fn default() -> OriginConfig {
        OriginConfig {
            listen: SocketAddr::from(([127, 0, 0, 1], 0)),
            threads: 1,
            think: DelayDist::ZERO,
            conn_cap: CountDist::Unlimited,
            max_size: 1 << 30,
        }
    }
}

/// Totals over all of the origin's threads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct OriginTotals {
    /// Connections accepted.
    pub connections: u64,
    /// Responses written in full (200 and 304).
    pub requests: u64,
    /// Of those, 304 Not Modified.
    pub not_modified: u64,
    /// Body bytes written.
    pub body_bytes: u64,
    /// Emulated SSL handshakes completed.
    pub handshakes: u64,
    /// Requests refused (400, 405, 413, 431).
    pub rejected: u64,
    /// Connections that ended mid-request or mid-response.
    pub broken: u64,
}

/// A running origin; dropping it without [`Origin::stop`] leaves its threads running.
#[derive(Debug)]
pub struct Origin {
    addr: SocketAddr,
    stop: watch::Sender<bool>,
    threads: Vec<JoinHandle<()>>,
    counters: Vec<Arc<ThreadCounters>>,
}

impl Origin {
    /// Binds every thread's socket, then starts the threads; errors come from binding.
    pub fn start(config: OriginConfig) -> anyhow::Result<Origin> {
        ensure_loopback(config.listen, "--listen")?;
        anyhow::ensure!(config.threads > 0, "--threads must be at least 1");
        let config = Arc::new(config);
        let (stop, stop_rx) = watch::channel(false);
        let mut addr = config.listen;
        let mut threads = Vec::new();
        let mut counters = Vec::new();
        for index in 0..config.threads {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("cannot build an event loop")?;
            let listener = {
                // Registering the listener needs the runtime that will poll it.
                let _guard = runtime.enter();
                bind_reuseport(addr).with_context(|| format!("cannot listen on {addr}"))?
            };
            // The first bind may have picked the port; the others share it.
            addr = listener.local_addr()?;
            let thread_counters = Arc::new(ThreadCounters::default());
            counters.push(thread_counters.clone());
            let (config, stop_rx) = (config.clone(), stop_rx.clone());
            let thread = std::thread::Builder::new()
                .name(format!("origin-{index}"))
                .spawn(move || {
                    runtime.block_on(accept_loop(listener, config, thread_counters, stop_rx));
                })
                .context("cannot start an origin thread")?;
            threads.push(thread);
        }
        Ok(Origin {
            addr,
            stop,
            threads,
            counters,
        })
    }

    /// The address the origin listens on.
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Counters summed over threads, as of now.
    pub fn totals(&self) -> OriginTotals {
        sum_counters(&self.counters)
    }

    /// Stops accepting, drops open connections, and waits for the threads to end.
    pub fn stop(self) -> OriginTotals {
        let _ = self.stop.send(true);
        for thread in self.threads {
            let _ = thread.join();
        }
        sum_counters(&self.counters)
    }
}

fn sum_counters(counters: &[Arc<ThreadCounters>]) -> OriginTotals {
    let mut totals = OriginTotals::default();
    for c in counters {
        totals.connections += c.connections.load(Ordering::Relaxed);
        totals.requests += c.requests.load(Ordering::Relaxed);
        totals.not_modified += c.not_modified.load(Ordering::Relaxed);
        totals.body_bytes += c.body_bytes.load(Ordering::Relaxed);
        totals.handshakes += c.handshakes.load(Ordering::Relaxed);
        totals.rejected += c.rejected.load(Ordering::Relaxed);
        totals.broken += c.broken.load(Ordering::Relaxed);
    }
    totals
}

fn bind_reuseport(addr: SocketAddr) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        TcpSocket::new_v4()?
    } else {
        TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.set_reuseport(true)?;
    socket.bind(addr)?;
    // The kernel caps this at net.core.somaxconn.
    socket.listen(4096)
}

async fn accept_loop(
    listener: TcpListener,
    config: Arc<OriginConfig>,
    counters: Arc<ThreadCounters>,
    mut stop: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => {
                    tokio::spawn(conn::serve(stream, config.clone(), counters.clone()));
                }
                // Out of fds or similar: back off briefly rather than spin.
                Err(_) => tokio::time::sleep(std::time::Duration::from_millis(10)).await,
            },
            _ = stop.changed() => return,
        }
    }
}
