//! What a run reports, as JSON and as a table, and summaries over repeated runs.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;

use super::thread::ThreadStats;
use crate::cpu::CpuUsage;
use crate::stats::Interval;

/// Response times of completed requests, in microseconds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct Latency {
    /// Mean.
    pub mean_us: f64,
    /// Median.
    pub p50_us: u64,
    /// 90th percentile.
    pub p90_us: u64,
    /// 99th percentile.
    pub p99_us: u64,
    /// Largest.
    pub max_us: u64,
}

/// CPU per completed request, in microseconds of CPU time.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct CpuPerRequest {
    /// Whole machine (every process and the kernel).
    pub machine_us: f64,
    /// The proxy's processes (their user plus system time); `None` when none were named.
    pub proxy_us: Option<f64>,
    /// This process: the load generator, and the origin when in-process.
    pub lab_us: f64,
    /// Machine utilisation over the window, 0 to 1 (busy over busy plus idle).
    pub machine_utilisation: f64,
}

/// One run's results.
#[derive(Debug, Clone, Serialize)]
pub struct RunReport {
    /// Measured window in seconds: from the end of warm-up to the deadline, or to the last
    /// response when the request cap ended the run first.
    pub window_s: f64,
    /// Measured requests started.
    pub issued: u64,
    /// Of those, completed with a correct response.
    pub completed: u64,
    /// Of those, failed, by kind.
    pub errors: BTreeMap<String, u64>,
    /// Sum of `errors`.
    pub error_total: u64,
    /// Of those, still running after the grace period at the end.
    pub unfinished: u64,
    /// Requests completed inside the window (warm-up ones included), divided by the window.
    pub req_per_s: f64,
    /// The numerator of `req_per_s`, and the denominator of `cpu_per_request`.
    pub completed_in_window: u64,
    /// Body bytes of completed requests.
    pub body_bytes: u64,
    /// Body bytes per second over the window, in MB (10^6 bytes).
    pub body_mb_per_s: f64,
    /// Response times.
    pub latency: Latency,
    /// TCP connections opened, warm-up included.
    pub connections: u64,
    /// Requests retried once because a reused connection closed before answering.
    pub retries: u64,
    /// Completed full SSL handshakes.
    pub ssl_full: u64,
    /// Completed abbreviated SSL handshakes.
    pub ssl_abbreviated: u64,
    /// Completed open-loop requests that revisited a cacheable URL (hits for an ideal cache).
    pub revisits: u64,
    /// CPU time over the window.
    pub cpu: CpuUsage,
    /// CPU time per completed request.
    pub cpu_per_request: CpuPerRequest,
}

impl RunReport {
    /// Builds the report from merged counters.
    pub(super) fn new(stats: &ThreadStats, window: Duration, cpu: CpuUsage) -> RunReport {
        let window_s = window.as_secs_f64();
        let per_s = |n: f64| if window_s > 0.0 { n / window_s } else { 0.0 };
        let h = &stats.histogram;
        let latency = if h.is_empty() {
            Latency::default()
        } else {
            Latency {
                mean_us: h.mean(),
                p50_us: h.value_at_quantile(0.50),
                p90_us: h.value_at_quantile(0.90),
                p99_us: h.value_at_quantile(0.99),
                max_us: h.max(),
            }
        };
        let requests = stats.completed_in_window.max(1) as f64;
        let cpu_per_request = CpuPerRequest {
            machine_us: cpu.machine_busy_s * 1e6 / requests,
            proxy_us: cpu.proxy_s.map(|s| s * 1e6 / requests),
            lab_us: cpu.lab_s * 1e6 / requests,
            machine_utilisation: if cpu.machine_total_s > 0.0 {
                cpu.machine_busy_s / cpu.machine_total_s
            } else {
                0.0
            },
        };
        RunReport {
            window_s,
            issued: stats.issued,
            completed: stats.completed,
            error_total: stats.errors.values().sum(),
            errors: stats.errors.clone(),
            unfinished: stats.in_flight,
            req_per_s: per_s(stats.completed_in_window as f64),
            completed_in_window: stats.completed_in_window,
            body_bytes: stats.body_bytes,
            body_mb_per_s: per_s(stats.body_bytes as f64) / 1e6,
            latency,
            connections: stats.connections,
            retries: stats.retries,
            ssl_full: stats.ssl_full,
            ssl_abbreviated: stats.ssl_abbreviated,
            revisits: stats.revisits,
            cpu,
            cpu_per_request,
        }
    }

    /// Whether the counts add up: every measured request completed, failed or is unfinished.
    pub fn counts_add_up(&self) -> bool {
        self.issued == self.completed + self.error_total + self.unfinished
    }
}

/// Means and 90% intervals of the figures that matter, over repeated runs of one setup.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Requests per second.
    pub req_per_s: Interval,
    /// Mean response time, µs.
    pub mean_us: Interval,
    /// Median response time, µs.
    pub p50_us: Interval,
    /// 99th percentile, µs.
    pub p99_us: Interval,
    /// Machine CPU per request, µs.
    pub machine_us_per_req: Interval,
    /// Proxy processes' CPU per request, µs, when they were named.
    pub proxy_us_per_req: Option<Interval>,
    /// Errors over all runs.
    pub errors: u64,
}

impl Summary {
    /// Summarises `runs`; `None` when there are none.
    pub fn of(runs: &[&RunReport]) -> Option<Summary> {
        let pick = |f: &dyn Fn(&RunReport) -> f64| {
            Interval::of(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
        };
        let proxy: Option<Vec<f64>> = runs.iter().map(|r| r.cpu_per_request.proxy_us).collect();
        Some(Summary {
            req_per_s: pick(&|r| r.req_per_s)?,
            mean_us: pick(&|r| r.latency.mean_us)?,
            p50_us: pick(&|r| r.latency.p50_us as f64)?,
            p99_us: pick(&|r| r.latency.p99_us as f64)?,
            machine_us_per_req: pick(&|r| r.cpu_per_request.machine_us)?,
            proxy_us_per_req: proxy.and_then(|v| Interval::of(&v)),
            errors: runs.iter().map(|r| r.error_total).sum(),
        })
    }
}

/// Where and when figures were taken, so a table can be traced to its machine and command.
#[derive(Debug, Clone, Serialize)]
pub struct Provenance {
    /// UTC, RFC 3339.
    pub date: String,
    /// The command line as run.
    pub command: String,
    /// `git rev-parse HEAD` of the current directory, if it is a repository.
    pub commit: Option<String>,
    /// CPU model from /proc/cpuinfo.
    pub cpu_model: Option<String>,
    /// CPUs available to this process.
    pub cpus: usize,
    /// Kernel release.
    pub kernel: Option<String>,
    /// cpufreq governor of CPU 0, if the machine exposes one.
    pub governor: Option<String>,
    /// sluice-lab's version.
    pub lab_version: &'static str,
}

impl Provenance {
    /// Reads the machine's description now.
    pub fn collect() -> Provenance {
        let read = |path: &str| {
            std::fs::read_to_string(path)
                .ok()
                .map(|s| s.trim().to_owned())
        };
        let cpu_model = std::fs::read_to_string("/proc/cpuinfo")
            .ok()
            .and_then(|text| {
                text.lines()
                    .find(|l| l.starts_with("model name"))
                    .and_then(|l| l.split_once(':'))
                    .map(|(_, v)| v.trim().to_owned())
            });
        let commit = std::process::Command::new("git")
            .args(["rev-parse", "--short=12", "HEAD"])
            .output()
            .ok()
            .filter(|o| o.status.success())
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .map(|s| s.trim().to_owned());
        Provenance {
            date: rfc3339_now(),
            command: std::env::args().collect::<Vec<_>>().join(" "),
            commit,
            cpu_model,
            cpus: crate::cli::cpu_count(),
            kernel: read("/proc/sys/kernel/osrelease"),
            governor: read("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor"),
            lab_version: env!("CARGO_PKG_VERSION"),
        }
    }

    /// One line for the top of a human report.
    pub fn line(&self) -> String {
        format!(
            "{} | {} | {} CPUs | kernel {} | governor {} | commit {}",
            self.date,
            self.cpu_model.as_deref().unwrap_or("unknown CPU"),
            self.cpus,
            self.kernel.as_deref().unwrap_or("?"),
            self.governor.as_deref().unwrap_or("n/a"),
            self.commit.as_deref().unwrap_or("n/a"),
        )
    }
}

fn rfc3339_now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let date = crate::origin::request::http_date(secs);
    // "Thu, 01 Jan 1970 00:00:00 GMT" -> "1970-01-01T00:00:00Z"
    let parts: Vec<&str> = date.split_whitespace().collect();
    let month = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ]
    .iter()
    .position(|m| Some(m) == parts.get(2))
    .map_or(0, |i| i + 1);
    format!(
        "{}-{:02}-{}T{}Z",
        parts.get(3).unwrap_or(&"?"),
        month,
        parts.get(1).unwrap_or(&"?"),
        parts.get(4).unwrap_or(&"?")
    )
}

/// A labelled run, as the table and the JSON list them.
#[derive(Debug, Clone, Serialize)]
pub struct LabelledRun {
    /// `direct` or `proxied`.
    pub label: String,
    /// 1-based repetition.
    pub repetition: usize,
    /// The results.
    #[serde(flatten)]
    pub report: RunReport,
}

/// Header of the per-run table; see docs/TESTBED.md for every column.
pub const TABLE_HEADER: &str = "| run | via | req/s | mean ms | p50 ms | p90 ms | p99 ms | max ms \
     | MB/s | errors | machine µs/req | proxy µs/req | util |\n\
     |---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";

fn ms(us: f64) -> String {
    format!("{:.3}", us / 1000.0)
}

/// One table row.
pub fn table_row(run: &LabelledRun) -> String {
    let r = &run.report;
    let errors = if r.error_total == 0 {
        "0".to_owned()
    } else {
        r.errors
            .iter()
            .map(|(k, v)| format!("{k}:{v}"))
            .collect::<Vec<_>>()
            .join(" ")
    };
    format!(
        "| {} | {} | {:.0} | {} | {} | {} | {} | {} | {:.1} | {} | {:.1} | {} | {:.0}% |\n",
        run.repetition,
        run.label,
        r.req_per_s,
        ms(r.latency.mean_us),
        ms(r.latency.p50_us as f64),
        ms(r.latency.p90_us as f64),
        ms(r.latency.p99_us as f64),
        ms(r.latency.max_us as f64),
        r.body_mb_per_s,
        errors,
        r.cpu_per_request.machine_us,
        r.cpu_per_request
            .proxy_us
            .map_or("-".to_owned(), |v| format!("{v:.1}")),
        r.cpu_per_request.machine_utilisation * 100.0,
    )
}

/// Summary lines: mean ± 90% interval per label, and the proxy's overhead.
pub fn summary_lines(label: &str, summary: &Summary) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{label}: {} req/s, mean {} µs, p50 {} µs, p99 {} µs, machine {} µs/req{}, {} errors \
         (mean ± 90% CI over {} runs)",
        summary.req_per_s.display(0),
        summary.mean_us.display(0),
        summary.p50_us.display(0),
        summary.p99_us.display(0),
        summary.machine_us_per_req.display(1),
        summary.proxy_us_per_req.map_or(String::new(), |p| format!(
            ", proxy {} µs/req",
            p.display(1)
        )),
        summary.errors,
        summary.req_per_s.runs,
    );
    out
}
