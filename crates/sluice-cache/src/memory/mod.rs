//! [`MemoryStore`]: one worker's in-memory cache, with a hard byte budget, GDSF eviction,
//! fills visible only when complete, and collapsed forwarding.

mod cost;
mod fill;
mod stats;

use std::cell::RefCell;
use std::collections::{BTreeSet, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_http::{Method, RequestHead, ResponseHead};

use crate::directives::RequestDirectives;
use crate::policy::{evaluate, revalidation_request, HeuristicFreshness, Verdict};
use crate::{CacheKey, StoredEntry};

pub use fill::{AbortReason, Fill, FillWait};
pub use stats::CacheStats;

use cost::{entry_cost, priority, MAX_FREQUENCY};
use fill::{FillState, PendingFill};

/// Most keys remembered as uncacheable at once; passes are small but are not charged to the
/// budget, so their number is bounded here instead.
const MAX_PASSES: usize = 4096;

/// Limits and knobs of a [`MemoryStore`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryConfig {
    /// Hard limit on the bytes charged for all entries (bodies, heads, keys, index).
    pub budget_bytes: u64,
    /// Largest entry kept in memory, charged size; larger fills are handed back at commit
    /// ([`Committed::TooLargeForMemory`]) for the disk tier.
    pub max_object_bytes: u64,
    /// Largest body a fill buffers before failing; at least `max_object_bytes`, larger when
    /// a disk tier takes what memory cannot.
    pub max_fill_bytes: u64,
    /// Heuristic freshness for responses with only Last-Modified.
    pub heuristic: HeuristicFreshness,
    /// How long a key whose fill found the response uncacheable is passed straight through
    /// instead of collapsing requests onto one fill.
    pub pass_period: Duration,
}

impl Default for MemoryConfig {
    /// 256 MiB budget and a 64 MiB object cap (issue #5's defaults), 2 minutes of pass.
    fn default() -> Self {
        Self {
            budget_bytes: 256 << 20,
            max_object_bytes: 64 << 20,
            max_fill_bytes: 64 << 20,
            heuristic: HeuristicFreshness::default(),
            pass_period: Duration::from_secs(120),
        }
    }
}

/// What a lookup found.
#[derive(Debug)]
pub enum Lookup {
    /// A stored entry answers the request: build the response with
    /// [`policy::respond`](crate::policy::respond).
    Hit(Arc<StoredEntry>),
    /// A stored entry must be validated first: send `request` upstream (under a
    /// [`MemoryStore::begin_fill`]); a 304 goes to [`MemoryStore::refresh`], a 200 fills.
    Revalidate {
        /// The stored entry.
        entry: Arc<StoredEntry>,
        /// The conditional request to send.
        request: RequestHead,
    },
    /// Another request is filling this key: wait, then look up again.
    Pending(FillWait),
    /// Nothing usable: fetch it, filling if storable.
    Miss,
    /// A recent fill found this key uncacheable: forward without filling or collapsing.
    Pass,
    /// The client sent only-if-cached and nothing usable is stored: answer 504.
    GatewayTimeout,
}

/// The outcome of a successful commit.
#[derive(Debug)]
pub enum Committed {
    /// Stored; these entries were evicted to make room (hand them to the disk tier).
    Stored {
        /// Evicted entries, least valuable first.
        evicted: Vec<Arc<StoredEntry>>,
    },
    /// Complete and valid, but larger than the memory object cap: not stored here.
    TooLargeForMemory(Arc<StoredEntry>),
}

/// One entry in the store.
#[derive(Debug)]
struct Slot {
    entry: Arc<StoredEntry>,
    cost: u64,
    frequency: u64,
    priority: u64,
}

/// One worker's memory cache.
///
/// Not `Send`: fills and waiters share state through `Rc`, so each worker owns its store and
/// no request ever takes a lock. A response cached by one worker is a miss on another, and an
/// invalidation seen by one worker must be passed to the others by the proxy.
#[derive(Debug)]
pub struct MemoryStore {
    config: MemoryConfig,
    /// Variants of each key, oldest first.
    index: HashMap<CacheKey, Vec<u64>>,
    slots: HashMap<u64, Slot>,
    /// GDSF queue: lowest priority evicted first; ids break ties, oldest first.
    queue: BTreeSet<(u64, u64)>,
    /// GDSF inflation value L: the priority of the last eviction.
    clock: u64,
    next_id: u64,
    pending: HashMap<CacheKey, Rc<RefCell<PendingFill>>>,
    passes: HashMap<CacheKey, SystemTime>,
    stats: CacheStats,
}

impl MemoryStore {
    /// An empty store.
    pub fn new(config: MemoryConfig) -> Self {
        Self {
            config,
            index: HashMap::new(),
            slots: HashMap::new(),
            queue: BTreeSet::new(),
            clock: 0,
            next_id: 0,
            pending: HashMap::new(),
            passes: HashMap::new(),
            stats: CacheStats::default(),
        }
    }

    /// The counters now.
    pub fn stats(&self) -> CacheStats {
        self.stats
    }

    /// The configuration.
    pub fn config(&self) -> &MemoryConfig {
        &self.config
    }

    /// Looks up `request` (GET or HEAD; anything else is a [`Lookup::Miss`]) under `key` at
    /// `now`, and decides freshness with [`evaluate`].
    pub fn lookup(&mut self, key: &CacheKey, request: &RequestHead, now: SystemTime) -> Lookup {
        if !matches!(request.method, Method::Get | Method::Head) {
            return Lookup::Miss;
        }
        let pending = self.live_pending(key);
        if let Some(id) = self.matching_variant(key, request) {
            let entry = match self.slots.get(&id) {
                Some(slot) => Arc::clone(&slot.entry),
                None => return Lookup::Miss,
            };
            match evaluate(request, &entry.meta, now, self.config.heuristic) {
                Verdict::Fresh | Verdict::ServeStale => {
                    self.stats.hits += 1;
                    self.touch(id);
                    return Lookup::Hit(entry);
                }
                Verdict::GatewayTimeout => return Lookup::GatewayTimeout,
                Verdict::Revalidate => {
                    if let Some(pending) = pending {
                        self.stats.collapsed += 1;
                        return Lookup::Pending(FillWait { pending });
                    }
                    self.stats.revalidations += 1;
                    let request = revalidation_request(request, &entry.meta.head);
                    return Lookup::Revalidate { entry, request };
                }
            }
        }
        if RequestDirectives::parse(&request.headers).only_if_cached {
            return Lookup::GatewayTimeout;
        }
        if let Some(pending) = pending {
            self.stats.collapsed += 1;
            return Lookup::Pending(FillWait { pending });
        }
        match self.passes.get(key) {
            Some(until) if *until > now => return Lookup::Pass,
            Some(_) => {
                self.passes.remove(key);
            }
            None => {}
        }
        self.stats.misses += 1;
        Lookup::Miss
    }

    /// Starts filling `key`, so later lookups wait for this fill instead of going upstream.
    /// Fails with the wait handle when a fill for `key` is already running.
    pub fn begin_fill(&mut self, key: &CacheKey) -> Result<Fill, FillWait> {
        if let Some(pending) = self.live_pending(key) {
            return Err(FillWait { pending });
        }
        let pending = PendingFill::new();
        self.pending.insert(key.clone(), Rc::clone(&pending));
        let limit = self.config.max_fill_bytes.max(self.config.max_object_bytes);
        Ok(Fill::new(key.clone(), pending, limit))
    }

    /// Replaces a stored entry's head and times after a 304 (the head from
    /// [`merge_not_modified`](crate::policy::merge_not_modified)), keeping its body. Returns
    /// the refreshed entry, or `None` when `entry` has since been evicted or replaced.
    pub fn refresh(
        &mut self,
        entry: &Arc<StoredEntry>,
        head: ResponseHead,
        request_time: SystemTime,
        response_time: SystemTime,
    ) -> Option<Arc<StoredEntry>> {
        let id = self.find_id(entry)?;
        let slot = self.slots.get(&id)?;
        let mut refreshed = StoredEntry::clone(&slot.entry);
        refreshed.meta.head = head;
        refreshed.meta.request_time = request_time;
        refreshed.meta.response_time = response_time;
        let refreshed = Arc::new(refreshed);
        // Re-insert so the charge and the budget see the new head; the body Arc is shared.
        self.remove_id(id);
        match self.insert(Arc::clone(&refreshed)) {
            Committed::Stored { .. } => Some(refreshed),
            Committed::TooLargeForMemory(_) => None,
        }
    }

    /// Drops every variant of `key` (invalidation, RFC 9111 §4.4, or an admin purge) and
    /// returns how many there were. A fill of `key` already running will not commit: its
    /// response may predate what invalidated the key. Later lookups stop waiting on it.
    pub fn invalidate(&mut self, key: &CacheKey) -> usize {
        if let Some(pending) = self.pending.remove(key) {
            let mut pending = pending.borrow_mut();
            if pending.state == FillState::Filling {
                // Counted now: out of the pending table, the store would never see its end.
                pending.invalidated = true;
                self.stats.fills_aborted += 1;
            }
        }
        let ids = self.index.remove(key).unwrap_or_default();
        for &id in &ids {
            self.remove_slot(id);
        }
        self.stats.invalidations += ids.len() as u64;
        ids.len()
    }

    /// Bytes charged now.
    pub fn used_bytes(&self) -> u64 {
        self.stats.bytes
    }

    /// Stores a complete entry, replacing the same key and variant, evicting by GDSF until it
    /// fits. Used by [`Fill::commit`].
    fn insert(&mut self, entry: Arc<StoredEntry>) -> Committed {
        let cost = entry_cost(&entry);
        if cost > self.config.max_object_bytes || cost > self.config.budget_bytes {
            self.stats.fills_oversize += 1;
            return Committed::TooLargeForMemory(entry);
        }
        let same_variant: Vec<u64> = self
            .index
            .get(&entry.meta.key)
            .into_iter()
            .flatten()
            .copied()
            .filter(|id| {
                self.slots
                    .get(id)
                    .is_some_and(|slot| slot.entry.meta.variant == entry.meta.variant)
            })
            .collect();
        for id in same_variant {
            self.remove_id(id);
        }
        let mut evicted = Vec::new();
        while self.stats.bytes + cost > self.config.budget_bytes {
            match self.evict_one() {
                Some(victim) => evicted.push(victim),
                None => break,
            }
        }
        let id = self.next_id;
        self.next_id += 1;
        let priority = priority(self.clock, 1, cost);
        self.index
            .entry(entry.meta.key.clone())
            .or_default()
            .push(id);
        self.queue.insert((priority, id));
        self.slots.insert(
            id,
            Slot {
                entry,
                cost,
                frequency: 1,
                priority,
            },
        );
        self.stats.entries += 1;
        self.stats.bytes += cost;
        Committed::Stored { evicted }
    }

    /// Evicts the lowest-priority entry and advances the clock to its priority (GDSF aging:
    /// entries inserted from now on start above everything that was worth less).
    fn evict_one(&mut self) -> Option<Arc<StoredEntry>> {
        let (priority, id) = self.queue.pop_first()?;
        self.clock = self.clock.max(priority);
        let slot = self.slots.get(&id)?;
        let entry = Arc::clone(&slot.entry);
        self.remove_id(id);
        self.stats.evictions += 1;
        Some(entry)
    }

    /// A hit: one more use, priority recomputed from the current clock.
    fn touch(&mut self, id: u64) {
        let clock = self.clock;
        if let Some(slot) = self.slots.get_mut(&id) {
            self.queue.remove(&(slot.priority, id));
            slot.frequency = (slot.frequency + 1).min(MAX_FREQUENCY);
            slot.priority = priority(clock, slot.frequency, slot.cost);
            self.queue.insert((slot.priority, id));
        }
    }

    fn matching_variant(&self, key: &CacheKey, request: &RequestHead) -> Option<u64> {
        let ids = self.index.get(key)?;
        ids.iter().rev().copied().find(|id| {
            self.slots
                .get(id)
                .is_some_and(|slot| slot.entry.meta.variant.matches(&request.headers))
        })
    }

    fn find_id(&self, entry: &Arc<StoredEntry>) -> Option<u64> {
        let ids = self.index.get(&entry.meta.key)?;
        ids.iter().copied().find(|id| {
            self.slots
                .get(id)
                .is_some_and(|slot| Arc::ptr_eq(&slot.entry, entry))
        })
    }

    /// Removes an entry from the slots, queue and index.
    fn remove_id(&mut self, id: u64) {
        let Some(key) = self.slots.get(&id).map(|slot| slot.entry.meta.key.clone()) else {
            return;
        };
        if let Some(ids) = self.index.get_mut(&key) {
            ids.retain(|&other| other != id);
            if ids.is_empty() {
                self.index.remove(&key);
            }
        }
        self.remove_slot(id);
    }

    /// Removes an entry from the slots and queue (the index is the caller's).
    fn remove_slot(&mut self, id: u64) {
        if let Some(slot) = self.slots.remove(&id) {
            self.queue.remove(&(slot.priority, id));
            self.stats.entries -= 1;
            self.stats.bytes -= slot.cost;
        }
    }

    /// The running fill for `key`, forgetting one that was dropped unfinished.
    fn live_pending(&mut self, key: &CacheKey) -> Option<Rc<RefCell<PendingFill>>> {
        let state = self.pending.get(key)?.borrow().state;
        match state {
            FillState::Filling => self.pending.get(key).cloned(),
            FillState::Abandoned => {
                self.pending.remove(key);
                self.stats.fills_aborted += 1;
                None
            }
            FillState::Done => {
                self.pending.remove(key);
                None
            }
        }
    }

    /// Ends `fill`: forgets it as pending, wakes waiters, counts an abort if `aborted`.
    fn finish_fill(&mut self, fill: &Fill, state: FillState, aborted: Option<AbortReason>) {
        if self
            .pending
            .get(&fill.key)
            .is_some_and(|pending| Rc::ptr_eq(pending, &fill.pending))
        {
            self.pending.remove(&fill.key);
        }
        // A fill whose key was invalidated was counted as aborted then, whatever ends it now.
        let aborted = aborted.filter(|_| !fill.pending.borrow().invalidated);
        PendingFill::finish(&fill.pending, state);
        match aborted {
            Some(AbortReason::Failed) => self.stats.fills_aborted += 1,
            Some(AbortReason::Uncacheable) => self.stats.fills_uncacheable += 1,
            None => {}
        }
    }

    fn release_fill(&mut self, fill: &Fill) {
        self.finish_fill(fill, FillState::Done, None);
    }

    fn abort_fill(&mut self, fill: &Fill, reason: AbortReason, now: SystemTime) {
        if reason == AbortReason::Uncacheable {
            if self.passes.len() >= MAX_PASSES {
                self.passes.retain(|_, until| *until > now);
                if self.passes.len() >= MAX_PASSES {
                    // Still full of live passes: forgetting them costs only some collapsing.
                    self.passes.clear();
                }
            }
            self.passes
                .insert(fill.key.clone(), now + self.config.pass_period);
        }
        self.finish_fill(fill, FillState::Done, Some(reason));
    }
}

#[cfg(test)]
mod tests;
