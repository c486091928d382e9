//! Per-worker counters of what the engines moved.

use std::cell::Cell;

/// Counters one worker keeps for its engines; summed across workers at shutdown.
#[derive(Debug, Default)]
pub struct EngineStats {
    transfers: Cell<u64>,
    bytes: Cell<u64>,
}

impl EngineStats {
    pub(crate) fn record_transfer(&self, bytes: u64) {
        self.transfers.set(self.transfers.get() + 1);
        self.bytes.set(self.bytes.get() + bytes);
    }

    /// Transfers (bodies, chunks and tunnels) completed or ended.
    pub fn transfers(&self) -> u64 {
        self.transfers.get()
    }

    /// Bytes moved, prefixes included.
    pub fn bytes(&self) -> u64 {
        self.bytes.get()
    }
}
