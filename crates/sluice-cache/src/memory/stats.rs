//! [`CacheStats`]: counters for logs and the stats endpoint.

/// A snapshot of a store's counters. Per worker; the proxy sums workers for reporting.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CacheStats {
    /// Entries (variants) stored now.
    pub entries: u64,
    /// Bytes charged against the budget now (see the crate docs for what counts).
    pub bytes: u64,
    /// Lookups answered from a stored entry, fresh or allowed stale.
    pub hits: u64,
    /// Lookups that found a stored entry needing validation.
    pub revalidations: u64,
    /// Lookups that found nothing usable and no fill to wait for.
    pub misses: u64,
    /// Lookups told to wait for another request's fill (collapsed forwarding).
    pub collapsed: u64,
    /// Fills that became entries.
    pub fills_committed: u64,
    /// Fills dropped: length mismatch, upstream or client failure, invalidated meanwhile, or
    /// dropped unfinished.
    pub fills_aborted: u64,
    /// Fills ended because the response turned out not storable (`no-store`, `private`, an
    /// uncacheable status...): not a failure, the response was simply passed on.
    pub fills_uncacheable: u64,
    /// Fills too large for memory, handed back for the disk tier.
    pub fills_oversize: u64,
    /// Entries evicted to stay within the budget.
    pub evictions: u64,
    /// Entries removed by invalidation or purge.
    pub invalidations: u64,
}
