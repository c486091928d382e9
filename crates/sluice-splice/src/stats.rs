//! Per-worker counters of what the engines moved, and of every fallback from a kernel engine to
//! a slower one. A fallback is never silent: it is counted here by reason, and logged at `warn`
//! the first time a reason occurs on a worker and then at most once per [`FALLBACK_LOG_PERIOD`],
//! with the count so far.
//!
//! A transfer is counted once, under the mechanism that carried its body; bytes are counted
//! under the mechanism that moved them. The two differ only inside a sockmap transfer, whose
//! drained start and whose rest past the cap go by splice (or copy, without a pipe): so the
//! byte counters show how much the sockmap itself redirected.

use std::cell::Cell;
use std::fmt;
use std::time::{Duration, Instant};

/// The least time between two `warn` lines for one fallback reason on one worker.
pub const FALLBACK_LOG_PERIOD: Duration = Duration::from_secs(60);

/// The mechanism that actually moved a transfer (after the policy and any fallback).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mechanism {
    /// User-space read and write.
    Copy,
    /// splice(2) through a pipe.
    Splice,
    /// eBPF sockmap redirect: transfers that had a flow in the map, and the bytes the program
    /// redirected plus those finished in user space around them (prefix, a straddling tail).
    /// A sockmap-engine transfer that never got into the map counts under splice.
    Sockmap,
}

impl Mechanism {
    const ALL: [Mechanism; 3] = [Mechanism::Copy, Mechanism::Splice, Mechanism::Sockmap];

    /// The mechanism's name in logs and config.
    pub fn as_str(self) -> &'static str {
        match self {
            Mechanism::Copy => "copy",
            Mechanism::Splice => "splice",
            Mechanism::Sockmap => "sockmap",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a transfer did not use the engine that was asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FallbackReason {
    /// The worker's pipe pool was at its bound (`transfer.pipe_pool`): copied instead.
    NoPipe,
    /// Creating a pipe failed (EMFILE, ENFILE): copied instead.
    PipeCreate,
    /// The kernel clamped or refused F_SETPIPE_SZ (pipe-user-pages-soft/-hard or
    /// pipe-max-size): the pipe was used at the size the kernel gave.
    PipeSize,
    /// splice(2) refused these fds (EINVAL, ENOSYS): copied instead.
    SpliceUnsupported,
    /// Inserting a socket into the sockmap failed (EOPNOTSUPP once the peer closed): splice
    /// instead.
    SockmapInsert,
    /// A body of unknown size was spliced instead, or the rest of one over the sockmap's cap (a
    /// connection stalls near 2^31 bytes) was spliced after the capped part.
    SockmapCap,
    /// Bytes past a body's end arrived in its last segment and could not be handed back: the
    /// source connection was closed so it is not reused out of sync.
    SockmapOverread,
}

impl FallbackReason {
    const ALL: [FallbackReason; 7] = [
        FallbackReason::NoPipe,
        FallbackReason::PipeCreate,
        FallbackReason::PipeSize,
        FallbackReason::SpliceUnsupported,
        FallbackReason::SockmapInsert,
        FallbackReason::SockmapCap,
        FallbackReason::SockmapOverread,
    ];

    /// A short name for logs and counters.
    pub fn as_str(self) -> &'static str {
        match self {
            FallbackReason::NoPipe => "no-pipe",
            FallbackReason::PipeCreate => "pipe-create",
            FallbackReason::PipeSize => "pipe-size",
            FallbackReason::SpliceUnsupported => "splice-unsupported",
            FallbackReason::SockmapInsert => "sockmap-insert",
            FallbackReason::SockmapCap => "sockmap-cap",
            FallbackReason::SockmapOverread => "sockmap-overread",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for FallbackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Default)]
struct FallbackCounter {
    count: Cell<u64>,
    logged_at: Cell<Option<Instant>>,
}

/// Counters one worker keeps for its engines; summed across workers at shutdown.
#[derive(Debug, Default)]
pub struct EngineStats {
    transfers: [Cell<u64>; 3],
    bytes: [Cell<u64>; 3],
    fallbacks: [FallbackCounter; FallbackReason::ALL.len()],
}

impl EngineStats {
    /// Counts one transfer that `mechanism` carried, and the `bytes` it moved (prefix
    /// included). The engines count their own transfers; a caller that moves a body itself
    /// (the cache's copy path) counts it here, so the counters cover every body.
    pub fn record(&self, mechanism: Mechanism, bytes: u64) {
        let i = mechanism.index();
        self.transfers[i].set(self.transfers[i].get() + 1);
        self.record_bytes(mechanism, bytes);
    }

    /// Counts `bytes` that `mechanism` moved within a transfer counted elsewhere.
    pub(crate) fn record_bytes(&self, mechanism: Mechanism, bytes: u64) {
        let i = mechanism.index();
        self.bytes[i].set(self.bytes[i].get() + bytes);
    }

    /// Counts one fallback and logs it at `warn` if this reason was not logged recently.
    pub(crate) fn record_fallback(&self, reason: FallbackReason, detail: &dyn fmt::Display) {
        let counter = &self.fallbacks[reason.index()];
        let count = counter.count.get() + 1;
        counter.count.set(count);
        let now = Instant::now();
        let due = counter
            .logged_at
            .get()
            .is_none_or(|at| now.duration_since(at) >= FALLBACK_LOG_PERIOD);
        if due {
            counter.logged_at.set(Some(now));
            tracing::warn!(
                reason = reason.as_str(),
                count,
                "engine fell back: {detail} (counted; logged at most once a minute per reason)"
            );
        }
    }

    /// Transfers (bodies, chunks and tunnels) completed or ended, all mechanisms together.
    pub fn transfers(&self) -> u64 {
        self.transfers.iter().map(Cell::get).sum()
    }

    /// Bytes moved, prefixes included, all mechanisms together.
    pub fn bytes(&self) -> u64 {
        self.bytes.iter().map(Cell::get).sum()
    }

    /// Transfers that `mechanism` moved.
    pub fn transfers_by(&self, mechanism: Mechanism) -> u64 {
        self.transfers[mechanism.index()].get()
    }

    /// Bytes that `mechanism` moved.
    pub fn bytes_by(&self, mechanism: Mechanism) -> u64 {
        self.bytes[mechanism.index()].get()
    }

    /// How many times `reason` made a transfer fall back.
    pub fn fallbacks(&self, reason: FallbackReason) -> u64 {
        self.fallbacks[reason.index()].count.get()
    }

    /// A one-line summary for the shutdown log: per mechanism transfers and bytes, then every
    /// fallback reason that occurred, e.g.
    /// `copy 3/1200B splice 10/52428800B sockmap 0/0B fallbacks: no-pipe=2`.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        for mechanism in Mechanism::ALL {
            out.push_str(&format!(
                "{} {}/{}B ",
                mechanism.as_str(),
                self.transfers_by(mechanism),
                self.bytes_by(mechanism)
            ));
        }
        out.push_str("fallbacks:");
        let mut any = false;
        for reason in FallbackReason::ALL {
            let count = self.fallbacks(reason);
            if count > 0 {
                out.push_str(&format!(" {reason}={count}"));
                any = true;
            }
        }
        if !any {
            out.push_str(" none");
        }
        out
    }

    /// Logs [`EngineStats::summary`] at `info`, for the end of a worker.
    pub fn log_summary(&self, worker: usize) {
        tracing::info!(worker, "engine counters: {}", self.summary());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn summary_names_each_mechanism_and_only_fallbacks_that_happened() {
        let stats = EngineStats::default();
        stats.record(Mechanism::Splice, 100);
        stats.record(Mechanism::Copy, 5);
        stats.record_fallback(FallbackReason::NoPipe, &"pool empty");
        stats.record_fallback(FallbackReason::NoPipe, &"pool empty");
        assert_eq!(stats.transfers(), 2);
        assert_eq!(stats.bytes(), 105);
        assert_eq!(stats.fallbacks(FallbackReason::NoPipe), 2);
        assert_eq!(
            stats.summary(),
            "copy 1/5B splice 1/100B sockmap 0/0B fallbacks: no-pipe=2"
        );
    }

    #[test]
    fn bytes_within_a_transfer_add_to_their_mechanism_only() {
        let stats = EngineStats::default();
        stats.record(Mechanism::Sockmap, 1000);
        stats.record_bytes(Mechanism::Splice, 24);
        assert_eq!((stats.transfers(), stats.bytes()), (1, 1024));
        assert_eq!(stats.transfers_by(Mechanism::Splice), 0);
        assert_eq!(stats.bytes_by(Mechanism::Splice), 24);
    }

    /// docs/CONFIG.md's table of reasons is what operators read the `warn` lines against: it
    /// lists exactly the reasons the code can count.
    #[test]
    fn config_doc_lists_exactly_the_fallback_reasons() {
        let doc = include_str!("../../../docs/CONFIG.md");
        let table = doc
            .split("| reason | what happened |")
            .nth(1)
            .expect("the reasons table in docs/CONFIG.md");
        let documented: Vec<&str> = table
            .lines()
            .skip(2)
            .take_while(|line| line.starts_with("| `"))
            .filter_map(|line| line.split('`').nth(1))
            .collect();
        let in_code: Vec<&str> = FallbackReason::ALL.iter().map(|r| r.as_str()).collect();
        assert_eq!(documented, in_code);
    }
}
