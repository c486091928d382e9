//! What the load generator's threads share (the run's [`Control`]) and what each keeps to
//! itself ([`ThreadContext`], [`ThreadStats`]): a thread's clients run on its own
//! single-threaded loop, so their counters and histogram need no locks.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use rand::rngs::SmallRng;

use super::client::{Conn, Failure, Response};
use super::workload::{PlannedRequest, RequestKind, UrlHistory};
use super::{LoadConfig, Via};
use crate::ssl::Handshake;

/// Largest response time the histograms hold, in microseconds (one hour); longer ones are
/// clamped, and `--timeout` is far below it.
const HISTOGRAM_MAX_US: u64 = 3_600_000_000;

/// The run's shared state: the schedule, the request cap, the stop flag, live counters.
#[derive(Debug)]
pub struct Control {
    /// When the run started (warm-up included).
    pub started_at: Instant,
    /// Requests started from here on are measured (end of warm-up).
    pub measure_start: Instant,
    /// No request starts after this.
    pub deadline: Instant,
    stop: AtomicBool,
    started: AtomicU64,
    cap: u64,
    /// Client loops and open-loop request tasks still running.
    pub live: AtomicUsize,
    /// Requests completed, warm-up included, for the progress line.
    pub completed: AtomicU64,
    /// Requests failed, warm-up included, for the progress line.
    pub failed: AtomicU64,
}

impl Control {
    /// A run of `warmup` then `duration` from now, at most `cap` requests.
    pub fn new(warmup: Duration, duration: Duration, cap: u64) -> Control {
        let now = Instant::now();
        Control {
            started_at: now,
            measure_start: now + warmup,
            deadline: now + warmup + duration,
            stop: AtomicBool::new(false),
            started: AtomicU64::new(0),
            cap,
            live: AtomicUsize::new(0),
            completed: AtomicU64::new(0),
            failed: AtomicU64::new(0),
        }
    }

    /// Takes a ticket for one request: `None` once stopped, past the deadline or at the cap;
    /// otherwise whether the request is measured (started after warm-up).
    pub fn begin(&self) -> Option<bool> {
        let now = Instant::now();
        if self.stop.load(Ordering::Relaxed) || now >= self.deadline {
            return None;
        }
        if self.started.fetch_add(1, Ordering::Relaxed) >= self.cap {
            return None;
        }
        Some(now >= self.measure_start)
    }

    /// Tells every thread to stop starting requests.
    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether [`Control::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }
}

/// Decrements [`Control::live`] when dropped, so a cancelled task still counts as ended.
#[derive(Debug)]
pub struct LiveGuard(pub Arc<Control>);

impl LiveGuard {
    /// Counts one more live task.
    pub fn enter(control: &Arc<Control>) -> LiveGuard {
        control.live.fetch_add(1, Ordering::Relaxed);
        LiveGuard(control.clone())
    }
}

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.live.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One thread's counters; merged after the run.
#[derive(Debug, Clone)]
pub struct ThreadStats {
    /// Response times of completed measured requests, in microseconds.
    pub histogram: Histogram<u64>,
    /// Measured requests started.
    pub issued: u64,
    /// Of those, completed with a correct response.
    pub completed: u64,
    /// Requests completed inside the measured window, warm-up ones included (the rate's
    /// numerator and the CPU figures' denominator).
    pub completed_in_window: u64,
    /// Measured requests still running; after the grace period, the unfinished ones.
    pub in_flight: u64,
    /// Failed measured requests by kind.
    pub errors: BTreeMap<String, u64>,
    /// Body bytes of completed measured requests.
    pub body_bytes: u64,
    /// TCP connections opened (warm-up included).
    pub connections: u64,
    /// Requests retried on a new connection after a reused one closed first.
    pub retries: u64,
    /// Completed full SSL handshakes.
    pub ssl_full: u64,
    /// Completed abbreviated SSL handshakes.
    pub ssl_abbreviated: u64,
    /// Completed open-loop requests that revisited a cacheable URL.
    pub revisits: u64,
    /// When the last measured request ended.
    pub last_completion: Option<Instant>,
}

impl Default for ThreadStats {
    fn default() -> ThreadStats {
        ThreadStats {
            histogram: Histogram::new_with_bounds(1, HISTOGRAM_MAX_US, 3)
                .expect("constant bounds are valid"),
            issued: 0,
            completed: 0,
            completed_in_window: 0,
            in_flight: 0,
            errors: BTreeMap::new(),
            body_bytes: 0,
            connections: 0,
            retries: 0,
            ssl_full: 0,
            ssl_abbreviated: 0,
            revisits: 0,
            last_completion: None,
        }
    }
}

impl ThreadStats {
    /// Adds another thread's counters to these.
    pub fn merge(&mut self, other: &ThreadStats) {
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.histogram.add(&other.histogram);
        self.issued += other.issued;
        self.completed += other.completed;
        self.completed_in_window += other.completed_in_window;
        self.in_flight += other.in_flight;
        for (kind, n) in &other.errors {
            *self.errors.entry(kind.clone()).or_default() += n;
        }
        self.body_bytes += other.body_bytes;
        self.connections += other.connections;
        self.retries += other.retries;
        self.ssl_full += other.ssl_full;
        self.ssl_abbreviated += other.ssl_abbreviated;
        self.revisits += other.revisits;
        self.last_completion = self.last_completion.max(other.last_completion);
    }
}

/// How one request ended, for [`ThreadContext::finish`].
#[derive(Debug)]
pub struct Finished<'a> {
    /// Whether it started after warm-up.
    pub measured: bool,
    /// When its clock started: the send for the closed loop, the schedule for the open loop.
    pub started: Instant,
    /// What was asked.
    pub plan: &'a PlannedRequest,
    /// Open loop: whether it revisited a cacheable URL.
    pub revisit: bool,
    /// The response or the failure.
    pub result: &'a Result<Response, Failure>,
}

/// Everything a thread's tasks share, behind an `Rc`.
#[derive(Debug)]
pub struct ThreadContext {
    /// The run's shared state.
    pub control: Arc<Control>,
    /// The run's settings.
    pub config: Arc<LoadConfig>,
    /// This thread's counters.
    pub stats: RefCell<ThreadStats>,
    /// This thread's random numbers; borrowed briefly, never across an await.
    pub rng: RefCell<SmallRng>,
    /// Open loop: cacheable URLs to revisit.
    pub history: RefCell<UrlHistory>,
}

impl ThreadContext {
    /// Opens a connection to the proxy (or the origin when direct), counting it.
    pub async fn connect(&self) -> Result<Conn, Failure> {
        self.stats.borrow_mut().connections += 1;
        Conn::connect(self.config.endpoint.connect_addr()).await
    }

    /// Counts a measured request as started.
    pub fn start(&self, measured: bool) {
        if measured {
            let mut stats = self.stats.borrow_mut();
            stats.issued += 1;
            stats.in_flight += 1;
        }
    }

    /// Records how a request ended. A warm-up request only counts towards the rate, when it
    /// completes inside the window: with long think times many do, and leaving them out would
    /// understate the steady-state rate.
    pub fn finish(&self, done: Finished<'_>) {
        let now = Instant::now();
        let progress = if done.result.is_ok() {
            &self.control.completed
        } else {
            &self.control.failed
        };
        progress.fetch_add(1, Ordering::Relaxed);
        if !done.measured {
            let in_window = now >= self.control.measure_start && now <= self.control.deadline;
            if in_window && done.result.is_ok() {
                self.stats.borrow_mut().completed_in_window += 1;
            }
            return;
        }
        let mut stats = self.stats.borrow_mut();
        stats.in_flight -= 1;
        stats.last_completion = Some(now);
        match done.result {
            Ok(response) => {
                stats.completed += 1;
                if now <= self.control.deadline {
                    stats.completed_in_window += 1;
                }
                stats.body_bytes += response.body_bytes;
                let micros = now.duration_since(done.started).as_micros();
                let micros = u64::try_from(micros)
                    .unwrap_or(u64::MAX)
                    .clamp(1, HISTOGRAM_MAX_US);
                stats.histogram.saturating_record(micros);
                match done.plan.kind {
                    RequestKind::Ssl(Handshake::Full) => stats.ssl_full += 1,
                    RequestKind::Ssl(Handshake::Abbreviated) => stats.ssl_abbreviated += 1,
                    _ => {}
                }
                stats.revisits += u64::from(done.revisit);
            }
            Err(failure) => {
                *stats.errors.entry(failure.key()).or_default() += 1;
            }
        }
    }

    /// Sends `plan` on `conn` (opening one if there is none) and reads the response. A reused
    /// connection that closes before any response byte (the server timed it out) is retried
    /// once on a new one, as browsers do. `conn` is left holding a reusable connection.
    pub async fn exchange(
        &self,
        conn: &mut Option<Conn>,
        plan: &PlannedRequest,
        keep_alive: bool,
    ) -> Result<Response, Failure> {
        let endpoint = &self.config.endpoint;
        let verify = self.config.verify;
        if let RequestKind::Ssl(handshake) = plan.kind {
            *conn = None;
            let mut tunnel = self.connect().await?;
            if let Via::Forward(_) = endpoint.via {
                tunnel.open_tunnel(endpoint).await?;
            }
            tunnel.handshake(handshake).await?;
            return tunnel
                .get(endpoint, &plan.target, plan.size, false, verify, true)
                .await;
        }
        let reused = conn.is_some();
        let mut current = match conn.take() {
            Some(c) => c,
            None => self.connect().await?,
        };
        let result = current
            .get(endpoint, &plan.target, plan.size, keep_alive, verify, false)
            .await;
        let result = match result {
            Err(Failure::Closed {
                after_response_started: false,
            }) if reused => {
                self.stats.borrow_mut().retries += 1;
                current = self.connect().await?;
                current
                    .get(endpoint, &plan.target, plan.size, keep_alive, verify, false)
                    .await
            }
            other => other,
        };
        if matches!(result, Ok(r) if r.reusable) {
            *conn = Some(current);
        }
        result
    }
}
