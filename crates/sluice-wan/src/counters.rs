//! The wire's counters: per direction of every wire, what came in, what went out, what was
//! dropped and why, and how late deliveries were against their due time.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

/// Counters of one direction of one wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DirectionCounters {
    /// `client->proxy` and the like.
    pub direction: String,
    /// Frames read from the sending host.
    pub frames_in: u64,
    /// Their bytes (Ethernet header included, as on a real wire).
    pub bytes_in: u64,
    /// Frames written to the receiving host.
    pub frames_out: u64,
    /// Their bytes.
    pub bytes_out: u64,
    /// Dropped by the loss model.
    pub dropped_loss: u64,
    /// Dropped because the queue held its most packets.
    pub dropped_queue_packets: u64,
    /// Dropped because the queue held its most bytes.
    pub dropped_queue_bytes: u64,
    /// Frames the receiving TAP refused (the host's device was gone or full).
    pub write_errors: u64,
    /// Frames the loss model saw right after one it dropped.
    pub after_loss: u64,
    /// Of those, how many it dropped too: `lost_after_loss / after_loss` is the measured
    /// conditional loss probability.
    pub lost_after_loss: u64,
    /// Frames the loss model judged (IP frames).
    pub loss_decisions: u64,
    /// Largest frame seen, in bytes: 1514 or less shows segmentation offloads are off.
    pub largest_frame: u32,
    /// Sum of (write time - due time) over delivered frames, in nanoseconds.
    pub late_total_ns: u64,
    /// Largest such lateness.
    pub late_max_ns: u64,
    /// Most per-flow rate limiters alive at once.
    pub flows_max: u64,
    /// Deliveries by lateness: under 50 us, 100 us, 200 us, 500 us, 1 ms, 2 ms, 5 ms, and more.
    pub late_histogram: [u64; 8],
}

/// Upper bounds of the [`DirectionCounters::late_histogram`] buckets but the last, in ns.
pub const LATE_BUCKETS_NS: [u64; 7] = [
    50_000, 100_000, 200_000, 500_000, 1_000_000, 2_000_000, 5_000_000,
];

impl DirectionCounters {
    /// Measured loss rate among frames the loss model judged.
    pub fn loss_rate(&self) -> f64 {
        self.dropped_loss as f64 / self.loss_decisions.max(1) as f64
    }

    /// Measured P(drop | previous dropped).
    pub fn conditional_loss(&self) -> f64 {
        self.lost_after_loss as f64 / self.after_loss.max(1) as f64
    }

    /// Counts a delivery `late_ns` after its due time.
    pub fn record_late(&mut self, late_ns: u64) {
        self.late_total_ns += late_ns;
        self.late_max_ns = self.late_max_ns.max(late_ns);
        let bucket = LATE_BUCKETS_NS
            .iter()
            .position(|&b| late_ns < b)
            .unwrap_or(7);
        self.late_histogram[bucket] += 1;
    }

    /// The lateness under which `share` (0.5, 0.99) of deliveries fell: a bucket bound.
    pub fn late_quantile_ns(&self, share: f64) -> u64 {
        let total: u64 = self.late_histogram.iter().sum();
        let mut seen = 0;
        for (i, count) in self.late_histogram.iter().enumerate() {
            seen += count;
            if total > 0 && seen as f64 >= share * total as f64 {
                return LATE_BUCKETS_NS.get(i).copied().unwrap_or(u64::MAX);
            }
        }
        0
    }

    /// Mean lateness of deliveries in microseconds.
    pub fn mean_late_us(&self) -> f64 {
        self.late_total_ns as f64 / self.frames_out.max(1) as f64 / 1000.0
    }
}

/// Everything the wire reports, on SIGUSR1 and at exit.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WireReport {
    /// Seconds since the wire started forwarding.
    pub uptime_s: f64,
    /// CPU seconds the wire process used (user + system).
    pub cpu_s: f64,
    /// The seed its per-direction random sources are derived from.
    pub seed: u64,
    /// One entry per direction of every wire.
    pub directions: Vec<DirectionCounters>,
    /// Forwarding delays across the proxy host (proxy layout only).
    pub forwarding: Option<crate::probe::ForwardingSummary>,
}

impl WireReport {
    /// The counters of the direction called `name`.
    pub fn direction(&self, name: &str) -> Option<&DirectionCounters> {
        self.directions.iter().find(|d| d.direction == name)
    }

    /// A table for people: one row per direction.
    pub fn human(&self) -> String {
        let mut out = format!(
            "wire: up {:.1}s, cpu {:.2}s ({:.1}%), seed {}\n",
            self.uptime_s,
            self.cpu_s,
            100.0 * self.cpu_s / self.uptime_s.max(1e-9),
            self.seed
        );
        let _ = writeln!(
            out,
            "{:<16} {:>9} {:>11} {:>9} {:>11} {:>7} {:>7} {:>7} {:>6} {:>7} {:>8} {:>8} {:>6}",
            "direction",
            "in",
            "in_bytes",
            "out",
            "out_bytes",
            "loss",
            "q_pkts",
            "q_bytes",
            "werr",
            "loss%",
            "cond%",
            "late_us",
            "max_fr"
        );
        for d in &self.directions {
            let _ = writeln!(
                out,
                "{:<16} {:>9} {:>11} {:>9} {:>11} {:>7} {:>7} {:>7} {:>6} {:>7.3} {:>8.2} {:>8.1} {:>6}",
                d.direction,
                d.frames_in,
                d.bytes_in,
                d.frames_out,
                d.bytes_out,
                d.dropped_loss,
                d.dropped_queue_packets,
                d.dropped_queue_bytes,
                d.write_errors,
                100.0 * d.loss_rate(),
                100.0 * d.conditional_loss(),
                d.mean_late_us(),
                d.largest_frame
            );
        }
        if let Some(f) = self
            .forwarding
            .as_ref()
            .filter(|f| f.requests + f.responses > 0)
        {
            let _ = writeln!(
                out,
                "proxy forwarding: {} requests mean {:.0} us median {:.0} us; {} responses mean \
                 {:.0} us median {:.0} us",
                f.requests,
                f.request_mean_us,
                f.request_median_us,
                f.responses,
                f.response_mean_us,
                f.response_median_us
            );
        }
        out
    }
}

/// CPU seconds (user + system) this process has used, from `/proc/self/stat` (proc(5), fields
/// 14 and 15, in clock ticks).
pub fn process_cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces; fields after its closing parenthesis are plain.
    let Some(rest) = stat.rsplit_once(')').map(|(_, rest)| rest) else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // rest starts at field 3, so fields 14 and 15 are at indices 11 and 12.
    let ticks: u64 = [11, 12]
        .iter()
        .filter_map(|&i| fields.get(i).and_then(|f| f.parse::<u64>().ok()))
        .sum();
    ticks as f64 / rustix::param::clock_ticks_per_second() as f64
}
