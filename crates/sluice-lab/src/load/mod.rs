//! `sluice-lab load`: bounded load runs against an origin, directly or through a proxy.
//!
//! A run starts `threads` threads, each with its own single-threaded event loop and its share
//! of the clients (closed loop, `closed.rs`) or robots (open loop, `open.rs`). The calling thread
//! keeps the schedule: it samples CPU when the warm-up ends and when the window closes, prints
//! the progress line, and stops everyone at the deadline. Requests still running then get a
//! short grace period and are counted as unfinished, so `issued = completed + errors +
//! unfinished` always holds.

pub mod client;
mod closed;
mod open;
pub mod report;
pub mod series;
mod thread;
pub mod workload;

use std::io::{IsTerminal, Write};
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context};
use rand::rngs::SmallRng;
use rand::SeedableRng;
use serde::Serialize;
use tokio::task::LocalSet;

use crate::cpu::{CpuSampler, ProxyProcesses};
use crate::dist::{CountDist, SizeDist};
pub use client::Endpoint;
use report::RunReport;
use thread::{Control, LiveGuard, ThreadContext, ThreadStats};
use workload::{Mix, UrlHistory};

/// Longest run accepted: the lab runs benchmarks, not soak tests on a shared machine.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
/// How long requests still running at the deadline may take before they count as unfinished.
const GRACE: Duration = Duration::from_secs(1);

/// How requests reach the origin.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case", tag = "mode", content = "proxy")]
pub enum Via {
    /// Straight to the origin: the reference run.
    Direct,
    /// Through a forward proxy at this address: absolute-form targets, CONNECT for SSL.
    Forward(SocketAddr),
    /// Through a reverse proxy at this address: origin-form targets.
    Reverse(SocketAddr),
}

impl Via {
    /// `direct`, `forward` or `reverse`.
    pub fn name(&self) -> &'static str {
        match self {
            Via::Direct => "direct",
            Via::Forward(_) => "forward",
            Via::Reverse(_) => "reverse",
        }
    }
}

/// Whether the closed loop reuses connections.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum ConnectionMode {
    /// A new connection for every request, as the papers' HTTP/1.0 s-client.
    PerRequest,
    /// One persistent connection per client.
    KeepAlive,
}

/// Closed or open loop, with its parameters.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case", tag = "loop")]
pub enum Pattern {
    /// The s-client: `clients` each with one request outstanding, back to back.
    Closed {
        /// Emulated clients.
        clients: usize,
        /// Request types by weight.
        #[serde(serialize_with = "display")]
        mix: Mix,
        /// Body sizes.
        #[serde(serialize_with = "display")]
        sizes: SizeDist,
        /// New connection per request, or keep-alive.
        connection: ConnectionMode,
    },
    /// PolyMix-like robots at a fixed rate each.
    Open {
        /// Robots.
        robots: usize,
        /// Requests per second per robot (PolyMix-4: 0.4).
        rate: f64,
        /// Requests per persistent connection (PolyMix-4: `zipf:64`).
        #[serde(serialize_with = "display")]
        conn_requests: CountDist,
        /// Share of requests that revisit an earlier cacheable URL.
        hit_ratio: f64,
    },
}

fn display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.collect_str(v)
}

/// Everything one run needs.
#[derive(Debug, Clone, Serialize)]
pub struct LoadConfig {
    /// Origin and proxy.
    #[serde(serialize_with = "serialize_endpoint")]
    pub endpoint: Endpoint,
    /// Closed or open loop.
    pub pattern: Pattern,
    /// Measured time, after the warm-up.
    #[serde(serialize_with = "serialize_secs")]
    pub duration: Duration,
    /// Time before measuring starts; its requests are not counted.
    #[serde(serialize_with = "serialize_secs")]
    pub warmup: Duration,
    /// Most requests sent in the whole run, warm-up included.
    pub max_requests: u64,
    /// Load-generator threads.
    pub threads: usize,
    /// Longest one exchange may take before it counts as a timeout.
    #[serde(serialize_with = "serialize_secs")]
    pub timeout: Duration,
    /// Whether every body byte is checked.
    pub verify: bool,
    /// Which processes are the proxy, for CPU accounting.
    #[serde(skip)]
    pub proxy: ProxyProcesses,
    /// Whether to print a progress line on stderr (only when it is a terminal).
    #[serde(skip)]
    pub progress: bool,
}

fn serialize_endpoint<S: serde::Serializer>(e: &Endpoint, s: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeStruct;
    let mut st = s.serialize_struct("Endpoint", 2)?;
    st.serialize_field("origin", &e.origin)?;
    st.serialize_field("via", &e.via)?;
    st.end()
}

fn serialize_secs<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_f64(d.as_secs_f64())
}

impl LoadConfig {
    /// Refuses unbounded or impossible runs and targets outside loopback.
    pub fn validate(&self) -> anyhow::Result<()> {
        crate::target::ensure_loopback(self.endpoint.origin, "--target")?;
        match self.endpoint.via {
            Via::Direct => {}
            Via::Forward(proxy) | Via::Reverse(proxy) => {
                crate::target::ensure_loopback(proxy, "--proxy")?
            }
        }
        if self.duration.is_zero() || self.duration > MAX_DURATION {
            bail!(
                "--duration must be above 0 and at most {}s",
                MAX_DURATION.as_secs()
            );
        }
        if self.max_requests == 0 {
            bail!("--max-requests must be at least 1: every run is bounded by count and time");
        }
        if self.threads == 0 {
            bail!("--threads must be at least 1");
        }
        match &self.pattern {
            Pattern::Closed { clients, mix, .. } => {
                if *clients == 0 {
                    bail!("--clients must be at least 1");
                }
                if mix.has_ssl() && matches!(self.endpoint.via, Via::Reverse(_)) {
                    bail!("ssl requests need CONNECT: use --mode forward or direct, not reverse");
                }
            }
            Pattern::Open {
                robots,
                rate,
                hit_ratio,
                ..
            } => {
                if *robots == 0 || !(*rate > 0.0 && rate.is_finite()) {
                    bail!("--robots and --rate must be above zero");
                }
                if !(0.0..=1.0).contains(hit_ratio) {
                    bail!("--hit-ratio must be between 0 and 1");
                }
            }
        }
        Ok(())
    }

    fn workers(&self) -> usize {
        match self.pattern {
            Pattern::Closed { clients, .. } => clients,
            Pattern::Open { robots, .. } => robots,
        }
    }
}

/// Runs one bounded load and reports it.
pub fn run(config: &LoadConfig) -> anyhow::Result<RunReport> {
    config.validate()?;
    let config = Arc::new(config.clone());
    let sampler = CpuSampler::new(config.proxy.clone());
    let control = Arc::new(Control::new(
        config.warmup,
        config.duration,
        config.max_requests,
    ));
    let workers = config.workers();
    // Counted here, before any thread starts, so "no live clients" cannot be seen early.
    control.live.fetch_add(workers, Ordering::Relaxed);
    let mut threads = Vec::new();
    for index in 0..config.threads {
        let share = workers / config.threads + usize::from(index < workers % config.threads);
        let (config, control) = (config.clone(), control.clone());
        let thread = std::thread::Builder::new()
            .name(format!("load-{index}"))
            .spawn(move || run_thread(index, share, config, control))
            .context("cannot start a load thread")?;
        threads.push(thread);
    }

    let progress = config.progress && std::io::stderr().is_terminal();
    let mut cpu_start = None;
    let mut next_progress = Instant::now() + Duration::from_secs(1);
    let mut last_completed = 0;
    let ended_early = loop {
        let now = Instant::now();
        if cpu_start.is_none() && now >= control.measure_start {
            cpu_start = Some(sampler.sample());
        }
        if control.live.load(Ordering::Relaxed) == 0 {
            break true;
        }
        if now >= control.deadline {
            break false;
        }
        if progress && now >= next_progress {
            last_completed = print_progress(&control, now, last_completed);
            next_progress += Duration::from_secs(1);
        }
        std::thread::sleep(Duration::from_millis(5));
    };
    let cpu_end = sampler.sample();
    control.stop();
    if progress {
        eprintln!();
    }

    let mut stats = ThreadStats::default();
    for thread in threads {
        let thread_stats = thread
            .join()
            .map_err(|_| anyhow::anyhow!("a load thread panicked"))??;
        stats.merge(&thread_stats);
    }
    let cpu_start = cpu_start.unwrap_or_else(|| cpu_end.clone());
    let window_end = match (ended_early, stats.last_completion) {
        (true, Some(last)) => last.min(control.deadline),
        _ => control.deadline,
    };
    let window = window_end.saturating_duration_since(control.measure_start);
    Ok(RunReport::new(
        &stats,
        window,
        sampler.usage(&cpu_start, &cpu_end),
    ))
}

/// One progress line: time since start, completions so far, their rate over the last second,
/// failures; returns the completion count for the next call.
fn print_progress(control: &Control, now: Instant, last_completed: u64) -> u64 {
    let elapsed = now
        .saturating_duration_since(control.started_at)
        .as_secs_f64();
    let completed = control.completed.load(Ordering::Relaxed);
    let failed = control.failed.load(Ordering::Relaxed);
    let phase = if now < control.measure_start {
        " (warm-up)"
    } else {
        ""
    };
    let mut err = std::io::stderr();
    let _ = write!(
        err,
        "\r[{elapsed:5.1}s] {completed} ok  {} req/s  {failed} errors{phase}    ",
        completed - last_completed
    );
    let _ = err.flush();
    completed
}

fn run_thread(
    index: usize,
    share: usize,
    config: Arc<LoadConfig>,
    control: Arc<Control>,
) -> anyhow::Result<ThreadStats> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot build a load event loop")?;
    let local = LocalSet::new();
    let ctx = Rc::new(ThreadContext {
        control: control.clone(),
        config: config.clone(),
        stats: Default::default(),
        rng: std::cell::RefCell::new(SmallRng::from_rng(&mut rand::rng())),
        history: std::cell::RefCell::new(UrlHistory::new(100_000, format!("t{index}-"))),
    });
    local.block_on(&runtime, async {
        for _ in 0..share {
            // The count was added up front by `run`; this guard takes it back at the end.
            let live = LiveGuard(control.clone());
            match config.pattern {
                Pattern::Closed { .. } => {
                    tokio::task::spawn_local(closed::client(ctx.clone(), live))
                }
                Pattern::Open { .. } => tokio::task::spawn_local(open::robot(ctx.clone(), live)),
            };
        }
        while !control.stopped() && control.live.load(Ordering::Relaxed) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        let grace_end = Instant::now() + GRACE.min(config.timeout);
        while ctx.stats.borrow().in_flight > 0 && Instant::now() < grace_end {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    });
    // Dropping the tasks' set cancels whatever still runs; its requests stay in `in_flight`.
    drop(local);
    let stats = ctx.stats.borrow().clone();
    Ok(stats)
}
