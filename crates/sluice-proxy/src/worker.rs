//! One worker thread: its runtime, its listeners' accept loops, its upstream pool and counters.
//! Nothing here is shared with other workers.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, Instant};

use sluice_cache::{DiskConfig, DiskTier, MemoryConfig, MemoryStore};
use sluice_config::Config;
use sluice_rt::net::{StreamOptions, TcpListener};
use sluice_rt::{sleep, spawn, ShutdownHandle};
use sluice_splice::EngineStats;

use crate::client;
use crate::invalidation::Invalidations;
use crate::route::ListenerContext;
use crate::upstream::{Resolver, UpstreamPool};

/// How long a worker waits, after shutdown was asked, for its exchanges in flight to finish.
pub(crate) const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// What a worker reports when it stops.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct WorkerReport {
    /// Client connections accepted.
    pub connections: u64,
    /// Exchanges (requests and tunnels) handled.
    pub exchanges: u64,
    /// Body transfers and tunnels the engine ran.
    pub transfers: u64,
    /// Bytes the engine moved.
    pub engine_bytes: u64,
}

/// Per-worker state reached from every connection task of that worker.
#[derive(Debug)]
pub(crate) struct Worker {
    pub id: usize,
    pub config: Arc<Config>,
    pub http_limits: sluice_http::Limits,
    pub stream_options: StreamOptions,
    pub pool: RefCell<UpstreamPool>,
    pub resolver: Resolver,
    pub stats: EngineStats,
    pub shutdown: ShutdownHandle,
    /// This worker's share of the memory cache; `None` when `cache.enabled = false`.
    pub cache: Option<RefCell<MemoryStore>>,
    /// Body bytes held by this worker's fills in progress, which the store does not charge;
    /// kept within the store's budget by `cache_fill` (so the cache never holds more than about
    /// twice `memory / workers`).
    pub fill_bytes: Cell<u64>,
    /// This worker's disk tier (`cache.disk_dir/worker-N`); `None` without `disk_dir` or when
    /// it could not be opened (logged).
    pub disk: Option<RefCell<DiskTier>>,
    /// PURGEs and invalidations other workers handled, for this worker's cache to apply.
    pub invalidations: Arc<Invalidations>,
    open_connections: Cell<usize>,
    accepted: Cell<u64>,
    exchanges: Cell<u64>,
}

impl Worker {
    pub(crate) fn new(
        id: usize,
        config: Arc<Config>,
        shutdown: ShutdownHandle,
        invalidations: Arc<Invalidations>,
    ) -> Self {
        let http_limits = sluice_http::Limits {
            max_request_line: config.limits.max_request_line,
            max_header_bytes: config.limits.max_header_bytes,
            max_headers: config.limits.max_headers,
        };
        let stream_options = StreamOptions {
            send_buffer: config.socket.send_buffer,
            recv_buffer: config.socket.recv_buffer,
        };
        let pool = UpstreamPool::new(
            config.limits.upstream_idle_per_origin,
            config.timeouts.upstream_idle,
        );
        let cache = config
            .cache
            .enabled
            .then(|| RefCell::new(MemoryStore::new(memory_config(&config))));
        Worker {
            id,
            cache,
            fill_bytes: Cell::new(0),
            disk: open_disk(id, &config),
            invalidations,
            http_limits,
            stream_options,
            pool: RefCell::new(pool),
            resolver: Resolver::default(),
            stats: EngineStats::default(),
            shutdown,
            config,
            open_connections: Cell::new(0),
            accepted: Cell::new(0),
            exchanges: Cell::new(0),
        }
    }

    pub(crate) fn count_exchange(&self) {
        self.exchanges.set(self.exchanges.get() + 1);
    }

    pub(crate) fn report(&self) -> WorkerReport {
        WorkerReport {
            connections: self.accepted.get(),
            exchanges: self.exchanges.get(),
            transfers: self.stats.transfers(),
            engine_bytes: self.stats.bytes(),
        }
    }
}

/// This worker's memory store limits: an equal share of `cache.memory` per worker (stores are
/// per worker, so no request takes a lock), objects up to `cache.memory_max_object`, fills up
/// to what the disk tier may still take (a fill too large for memory is handed to it whole).
fn memory_config(config: &Config) -> MemoryConfig {
    let workers = config.workers.max(1) as u64;
    MemoryConfig {
        budget_bytes: config.cache.memory as u64 / workers,
        max_object_bytes: config.cache.memory_object_cap() as u64,
        max_fill_bytes: config.cache.fill_cap() as u64,
        ..MemoryConfig::default()
    }
}

/// Opens this worker's disk tier. Blocking (it scans and verifies the files): called once as
/// the worker starts, before it serves anything.
fn open_disk(id: usize, config: &Config) -> Option<RefCell<DiskTier>> {
    let dir = config
        .cache
        .disk_dir
        .as_ref()
        .filter(|_| config.cache.enabled)?;
    let disk = DiskConfig {
        dir: dir.join(format!("worker-{id}")),
        budget_bytes: config.cache.disk_size as u64 / config.workers.max(1) as u64,
        max_object_bytes: config.cache.max_object as u64,
        writer_threads: 1,
        sync: false,
        heuristic: MemoryConfig::default().heuristic,
    };
    match DiskTier::open(disk) {
        Ok(tier) => {
            let stats = tier.stats();
            tracing::info!(
                worker = id,
                entries = stats.entries,
                bytes = stats.bytes,
                damaged = stats.damaged,
                "disk cache opened"
            );
            Some(RefCell::new(tier))
        }
        Err(error) => {
            tracing::error!(worker = id, %error, "disk cache disabled: cannot open it");
            None
        }
    }
}

/// Counts a client connection as open for as long as it lives.
pub(crate) struct ConnectionGuard {
    worker: Rc<Worker>,
}

impl ConnectionGuard {
    fn new(worker: Rc<Worker>) -> Self {
        worker
            .open_connections
            .set(worker.open_connections.get() + 1);
        worker.accepted.set(worker.accepted.get() + 1);
        ConnectionGuard { worker }
    }
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.worker
            .open_connections
            .set(self.worker.open_connections.get() - 1);
    }
}

/// The worker's main task: accept on every listener until shutdown, then let exchanges in
/// flight finish for up to [`SHUTDOWN_GRACE`].
pub(crate) async fn run(
    worker: Rc<Worker>,
    listeners: Vec<(Rc<ListenerContext>, std::net::TcpListener)>,
) -> WorkerReport {
    for (context, listener) in listeners {
        match TcpListener::from_std(listener) {
            Ok(listener) => {
                spawn(accept_loop(worker.clone(), context, listener));
            }
            Err(error) => tracing::error!(worker = worker.id, %error, "cannot register listener"),
        }
    }
    spawn(sweep_pool(worker.clone()));
    if worker.cache.is_some() {
        spawn(report_cache(worker.clone()));
    }
    worker.shutdown.requested().await;
    let deadline = Instant::now() + SHUTDOWN_GRACE;
    // Shutdown is rare: polling the count beats wiring a notification through every exchange.
    while worker.open_connections.get() > 0 && Instant::now() < deadline {
        sleep(Duration::from_millis(20)).await;
    }
    if worker.open_connections.get() > 0 {
        tracing::warn!(
            worker = worker.id,
            open = worker.open_connections.get(),
            "closing connections still open after the shutdown grace period"
        );
    }
    worker.stats.log_summary(worker.id);
    log_cache_stats(&worker);
    worker.report()
}

async fn accept_loop(worker: Rc<Worker>, context: Rc<ListenerContext>, listener: TcpListener) {
    let shutdown = worker.shutdown.clone();
    loop {
        while worker.open_connections.get() >= worker.config.limits.max_connections {
            // At the limit, new clients wait in the kernel's listen backlog.
            sleep(Duration::from_millis(5)).await;
        }
        let accept = async { Some(listener.accept(&worker.stream_options).await) };
        let stop = async {
            shutdown.requested().await;
            None
        };
        match futures_lite::future::or(accept, stop).await {
            None => return,
            Some(Ok((stream, peer))) => {
                let guard = ConnectionGuard::new(worker.clone());
                spawn(client::serve(
                    worker.clone(),
                    context.clone(),
                    stream,
                    peer,
                    guard,
                ));
            }
            Some(Err(error)) => {
                // EMFILE and friends: back off instead of spinning on a listener that stays
                // readable.
                tracing::warn!(worker = worker.id, listener = context.index, %error, "accept failed");
                sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// How often a worker logs its cache counters at info (and once more at shutdown).
const CACHE_REPORT_PERIOD: Duration = Duration::from_secs(60);

async fn report_cache(worker: Rc<Worker>) {
    let stop = worker.shutdown.clone();
    let reporting = async {
        loop {
            sleep(CACHE_REPORT_PERIOD).await;
            log_cache_stats(&worker);
        }
    };
    futures_lite::future::or(reporting, stop.requested()).await;
}

fn log_cache_stats(worker: &Worker) {
    if let Some(line) = cache_stats_line(worker) {
        tracing::info!(worker = worker.id, "cache stats: {line}");
    }
}

/// This worker's cache counters as one logfmt line (`entries=.. hits=.. ... disk_hits=..`),
/// for the periodic log and the STATS method alike; `None` with the cache off.
///
/// `misses` counts memory misses, disk hits among them: the share of requests answered from
/// the cache is `(hits + disk_hits) / (hits + misses)`.
pub(crate) fn cache_stats_line(worker: &Worker) -> Option<String> {
    let cache = worker.cache.as_ref()?.borrow();
    let stats = cache.stats();
    let mut line = format!(
        "entries={} bytes={} budget={} hits={} revalidations={} misses={} collapsed={} \
         fills_committed={} fills_aborted={} fills_uncacheable={} fills_oversize={} \
         evictions={} invalidations={}",
        stats.entries,
        stats.bytes,
        cache.config().budget_bytes,
        stats.hits,
        stats.revalidations,
        stats.misses,
        stats.collapsed,
        stats.fills_committed,
        stats.fills_aborted,
        stats.fills_uncacheable,
        stats.fills_oversize,
        stats.evictions,
        stats.invalidations
    );
    if let Some(disk) = &worker.disk {
        let mut disk = disk.borrow_mut();
        disk.poll();
        let stats = disk.stats();
        line.push_str(&format!(
            " disk_entries={} disk_bytes={} disk_hits={} disk_misses={} disk_writes={} \
             disk_write_errors={} disk_evictions={} disk_damaged={}",
            stats.entries,
            stats.bytes,
            stats.hits,
            stats.misses,
            stats.writes,
            stats.write_errors,
            stats.evictions,
            stats.damaged
        ));
    }
    Some(line)
}

async fn sweep_pool(worker: Rc<Worker>) {
    let period = (worker.config.timeouts.upstream_idle / 2).max(Duration::from_millis(500));
    let stop = worker.shutdown.clone();
    let sweeping = async {
        loop {
            sleep(period).await;
            worker.pool.borrow_mut().sweep();
        }
    };
    futures_lite::future::or(sweeping, stop.requested()).await;
    let idle = worker.pool.borrow().len();
    tracing::debug!(worker = worker.id, idle, "upstream pool closed");
}
