//! Start-up and shutdown: bind every listener once per worker, start the worker threads, and
//! collect their reports.

use std::io;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc;
use std::sync::Arc;
use std::thread;

use sluice_config::{Config, Engine as EngineChoice};
use sluice_rt::net::TcpListener;
use sluice_rt::{Backend, Runtime, ShutdownHandle};
use sluice_splice::{Engine, EngineSettings, WorkerEngines};

use crate::invalidation::Invalidations;
use crate::route::ListenerContext;
use crate::worker::{self, Worker, WorkerReport};

/// Pending connections the kernel queues per worker socket.
const LISTEN_BACKLOG: i32 = 1024;

/// Why the proxy could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// A listener's address could not be bound.
    #[error("listener[{index}]: cannot bind {addr}: {source} (another process on that port? see listener.address)")]
    Bind {
        /// The listener's position in the config.
        index: usize,
        /// Its address.
        addr: SocketAddr,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// A configured engine cannot run on this machine (the sockmap without root or kernel
    /// support); the reason is logged just before.
    #[error("transfer engine \"{0}\" is unavailable here (reason logged above); use \"splice\" or \"auto\"")]
    EngineUnavailable(EngineChoice),
    /// A worker thread or its event loop could not be created.
    #[error("cannot start worker {index}: {source}")]
    Worker {
        /// The worker.
        index: usize,
        /// Why.
        #[source]
        source: io::Error,
    },
}

/// A running proxy: its worker threads and the addresses it listens on.
#[derive(Debug)]
pub struct Server {
    threads: Vec<thread::JoinHandle<WorkerReport>>,
    shutdowns: Vec<ShutdownHandle>,
    addrs: Vec<SocketAddr>,
}

impl Server {
    /// Binds every listener and starts `config.workers` workers on the `backend` chosen.
    pub fn start(config: Config, backend: Backend) -> Result<Server, StartError> {
        let config = Arc::new(config);
        let engines = WorkerEngines::new(engine_settings(&config));
        for listener in &config.listeners {
            engine_for(listener.effective_engine(&config.transfer), &engines)?;
        }
        drop(engines);
        let (addrs, mut sockets) = bind_all(&config)?;
        let mut threads = Vec::with_capacity(config.workers);
        let mut shutdowns = Vec::with_capacity(config.workers);
        let invalidations = Arc::new(Invalidations::new(sockets.len()));
        for (index, worker_sockets) in sockets.drain(..).enumerate() {
            let (ready_tx, ready_rx) = mpsc::channel();
            let shared = WorkerShared {
                config: config.clone(),
                invalidations: invalidations.clone(),
            };
            let spawned = thread::Builder::new()
                .name(format!("sluice-worker-{index}"))
                .spawn(move || run_worker(index, shared, backend, worker_sockets, ready_tx));
            let worker_error = |source| StartError::Worker { index, source };
            let thread = spawned.map_err(worker_error)?;
            let shutdown = ready_rx
                .recv()
                .map_err(|_| io::Error::other("worker exited during start-up"))
                .and_then(|ready| ready)
                .map_err(worker_error)?;
            threads.push(thread);
            shutdowns.push(shutdown);
        }
        Ok(Server {
            threads,
            shutdowns,
            addrs,
        })
    }

    /// The bound address of each listener, in config order (port 0 resolved).
    pub fn local_addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// Handles that ask every worker to stop; usable from any thread (a signal handler's).
    pub fn shutdown_handles(&self) -> Vec<ShutdownHandle> {
        self.shutdowns.clone()
    }

    /// Asks every worker to stop accepting and to finish its exchanges in flight.
    pub fn shutdown(&self) {
        self.shutdowns.iter().for_each(ShutdownHandle::shutdown);
    }

    /// Waits for every worker to stop and sums their reports.
    pub fn wait(self) -> WorkerReport {
        let mut total = WorkerReport::default();
        for thread in self.threads {
            match thread.join() {
                Ok(report) => {
                    total.connections += report.connections;
                    total.exchanges += report.exchanges;
                    total.transfers += report.transfers;
                    total.engine_bytes += report.engine_bytes;
                }
                Err(_) => tracing::error!("a worker thread panicked"),
            }
        }
        total
    }
}

/// What the engines need from `[transfer]`.
fn engine_settings(config: &Config) -> EngineSettings {
    let transfer = &config.transfer;
    EngineSettings {
        copy_buffer: transfer.copy_buffer,
        pipe_size: transfer.pipe_size,
        pipe_pool: transfer.pipe_pool,
        splice_threshold: transfer.splice_threshold as u64,
    }
}

/// The engine a listener uses, from its worker's set. "sockmap" refuses to start when the eBPF
/// program cannot be loaded (not root, no kernel support); "auto" then leaves it out.
fn engine_for(choice: EngineChoice, engines: &WorkerEngines) -> Result<Engine, StartError> {
    match choice {
        EngineChoice::Copy => Ok(engines.copy()),
        EngineChoice::Splice => Ok(engines.splice()),
        EngineChoice::Auto => Ok(engines.auto()),
        EngineChoice::Sockmap => engines.sockmap().map_err(|error| {
            tracing::error!(%error, "cannot start the sockmap engine");
            StartError::EngineUnavailable(choice)
        }),
    }
}

/// Binds each listener once per worker with SO_REUSEPORT. The first bind of a port-0 address
/// picks the port; the other workers bind that same port.
fn bind_all(
    config: &Config,
) -> Result<(Vec<SocketAddr>, Vec<Vec<std::net::TcpListener>>), StartError> {
    let mut per_worker: Vec<Vec<std::net::TcpListener>> =
        (0..config.workers).map(|_| Vec::new()).collect();
    let mut addrs = Vec::with_capacity(config.listeners.len());
    for (index, listener) in config.listeners.iter().enumerate() {
        let mut addr = listener.address;
        if addr.port() != 0 {
            // SO_REUSEPORT would let us join a port another sluice already listens on, and the
            // kernel would split clients between the two: bind once without it first, so that
            // a second start fails with EADDRINUSE instead.
            std::net::TcpListener::bind(addr).map_err(|source| StartError::Bind {
                index,
                addr,
                source,
            })?;
        }
        for sockets in per_worker.iter_mut() {
            let bind_error = |source| StartError::Bind {
                index,
                addr,
                source,
            };
            let socket = TcpListener::bind_std(addr, LISTEN_BACKLOG).map_err(bind_error)?;
            addr = socket.local_addr().map_err(bind_error)?;
            sockets.push(socket);
        }
        addrs.push(addr);
    }
    Ok((addrs, per_worker))
}

/// What every worker shares with the others.
struct WorkerShared {
    config: Arc<Config>,
    invalidations: Arc<Invalidations>,
}

fn run_worker(
    index: usize,
    shared: WorkerShared,
    backend: Backend,
    sockets: Vec<std::net::TcpListener>,
    ready: mpsc::Sender<io::Result<ShutdownHandle>>,
) -> WorkerReport {
    let WorkerShared {
        config,
        invalidations,
    } = shared;
    let runtime = match Runtime::new(backend) {
        Ok(runtime) => runtime,
        Err(error) => {
            let _ = ready.send(Err(error));
            return WorkerReport::default();
        }
    };
    let shutdown = runtime.shutdown_handle();
    let _ = ready.send(Ok(shutdown.clone()));
    let mut listeners = Vec::with_capacity(sockets.len());
    // One set per worker: its listeners share one pipe pool and one sockmap.
    let engines = WorkerEngines::new(engine_settings(&config));
    for ((listener_index, listener), socket) in config.listeners.iter().enumerate().zip(sockets) {
        let engine = engine_for(listener.effective_engine(&config.transfer), &engines)
            .expect("engines were checked before the workers started");
        let context = ListenerContext::new(
            listener_index,
            listener.mode,
            listener.upstreams.clone(),
            engine,
        );
        listeners.push((Rc::new(context), socket));
    }
    runtime.block_on(async move {
        let worker = Rc::new(Worker::new(index, config, shutdown, invalidations));
        worker::run(worker, listeners).await
    })
}
