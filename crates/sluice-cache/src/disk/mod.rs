//! [`DiskTier`]: entries evicted from memory, or too large for it, kept in files under a
//! directory with its own byte budget, and found again after a restart.

mod format;
mod scan;
mod writer;

use std::collections::{BTreeSet, HashMap};
use std::fs::{self, File};
use std::path::PathBuf;
use std::sync::mpsc::{self, Receiver, Sender};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::SystemTime;

use sluice_http::{Method, RequestHead};

use crate::policy::{evaluate, HeuristicFreshness, Verdict};
use crate::{CacheError, CacheKey, EntryMeta, StoredEntry};

use format::{encode_meta, PREAMBLE_LEN};
use writer::{spawn_writers, Job, Written};

/// Where and how big a [`DiskTier`] is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiskConfig {
    /// The directory; created if missing. Give each worker its own (`disk_dir/worker-N`):
    /// a tier's index lives in its worker, unshared.
    pub dir: PathBuf,
    /// Hard limit on the bytes of this tier's files (whole files: preamble, head, body).
    pub budget_bytes: u64,
    /// Largest file kept.
    pub max_object_bytes: u64,
    /// Writer threads; 1 is enough for most disks, more helps only with parallel devices.
    pub writer_threads: usize,
    /// `fdatasync` each file before renaming it into place (see the crate docs on crashes).
    pub sync: bool,
    /// Heuristic freshness, as in [`MemoryConfig`](crate::MemoryConfig).
    pub heuristic: HeuristicFreshness,
}

/// Counters of a disk tier.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DiskStats {
    /// Files indexed now.
    pub entries: u64,
    /// Bytes of indexed files plus writes in flight.
    pub bytes: u64,
    /// Lookups that found an entry.
    pub hits: u64,
    /// Lookups that found none.
    pub misses: u64,
    /// Files written and indexed.
    pub writes: u64,
    /// Writes that failed (the entry is simply not kept).
    pub write_errors: u64,
    /// Files deleted to stay within the budget.
    pub evictions: u64,
    /// Files found damaged (at start-up or when opened) and deleted, never served.
    pub damaged: u64,
}

/// A stored entry found on disk: the head in memory, the body in an open file, ready for
/// `sendfile(2)` or `splice(2)` from `body_offset`.
#[derive(Debug)]
pub struct DiskHit {
    /// Keys, stored head and times.
    pub meta: EntryMeta,
    /// What [`evaluate`] said: serve, serve stale, revalidate or 504.
    pub verdict: Verdict,
    /// The open file; deleting the entry later does not disturb a transfer from it.
    pub file: File,
    /// Where the body starts in `file`.
    pub body_offset: u64,
    /// Body length.
    pub body_len: u64,
}

#[derive(Debug)]
struct DiskEntry {
    meta: EntryMeta,
    path: PathBuf,
    file_len: u64,
    last_used: u64,
}

/// A write the writer threads have not finished yet.
#[derive(Debug)]
struct InFlight {
    /// Bytes reserved for the file.
    size: u64,
    entry: Arc<StoredEntry>,
    /// Its key was invalidated or purged meanwhile: delete the file once written.
    invalidated: bool,
}

/// One worker's disk tier.
///
/// The index (key to file) is owned by the worker and touched without locks. Writes go to a
/// small pool of writer threads: [`store`](Self::store) only encodes the head and enqueues,
/// and a finished write is indexed when the worker next calls [`poll`](Self::poll) (or
/// [`lookup`](Self::lookup), which polls first). Lookups cost an `open(2)` and an `fstat(2)`
/// on the worker, nothing more: the head is kept in memory, outside the memory store's budget
/// (about the size of the head per file).
///
/// Eviction is least-recently-used: files are large, few and already cold (memory evicted
/// them), so GDSF's size term has done its work upstream.
#[derive(Debug)]
pub struct DiskTier {
    config: DiskConfig,
    index: HashMap<CacheKey, Vec<u64>>,
    entries: HashMap<u64, DiskEntry>,
    /// (last use, id), least recent first.
    recency: BTreeSet<(u64, u64)>,
    /// Writes in flight, by id.
    in_flight: HashMap<u64, InFlight>,
    tick: u64,
    next_id: u64,
    stats: DiskStats,
    jobs: Option<Sender<Job>>,
    done: Receiver<Written>,
    writers: Vec<JoinHandle<()>>,
}

impl DiskTier {
    /// Opens the tier: creates the directory, rebuilds the index from the files there (each
    /// verified end to end; damaged ones and leftover temporaries deleted), trims to the
    /// budget and starts the writers. Blocking: call it at start-up, not from a worker loop.
    pub fn open(config: DiskConfig) -> Result<Self, CacheError> {
        fs::create_dir_all(&config.dir).map_err(|source| CacheError::Io {
            path: config.dir.clone(),
            source,
        })?;
        let report = scan::scan(&config.dir)?;
        let (jobs, job_queue) = mpsc::channel();
        let (done_sender, done) = mpsc::channel();
        let writers = spawn_writers(config.writer_threads, job_queue, done_sender);
        if writers.is_empty() {
            return Err(CacheError::WritersGone);
        }
        let mut tier = Self {
            config,
            index: HashMap::new(),
            entries: HashMap::new(),
            recency: BTreeSet::new(),
            in_flight: HashMap::new(),
            tick: 0,
            next_id: 0,
            stats: DiskStats {
                damaged: report.damaged,
                ..DiskStats::default()
            },
            jobs: Some(jobs),
            done,
            writers,
        };
        let mut found = report.entries;
        // Oldest first, so the newest copy of a key and variant wins and recency follows age.
        found.sort_by_key(|entry| entry.id);
        for entry in found {
            tier.next_id = tier.next_id.max(entry.id + 1);
            tier.index_entry(entry.id, entry.meta, entry.path, entry.file_len);
        }
        tier.make_room(0);
        Ok(tier)
    }

    /// The counters now.
    pub fn stats(&self) -> DiskStats {
        self.stats
    }

    /// Enqueues `entry` to be written; it becomes visible to lookups once written. Fails
    /// at once if it can never fit ([`CacheError::TooLargeForDisk`]); evicts older files to
    /// reserve room for it.
    pub fn store(&mut self, entry: Arc<StoredEntry>) -> Result<(), CacheError> {
        let meta = encode_meta(&entry.meta);
        let size = PREAMBLE_LEN + meta.len() as u64 + entry.meta.body_len;
        let limit = self.config.max_object_bytes.min(self.config.budget_bytes);
        if size > limit {
            return Err(CacheError::TooLargeForDisk { size, limit });
        }
        self.make_room(size);
        if self.stats.bytes + size > self.config.budget_bytes {
            // Writes in flight hold the rest of the budget; dropping this one is cheaper
            // than waiting for them.
            return Err(CacheError::TooLargeForDisk {
                size,
                limit: self.config.budget_bytes.saturating_sub(self.stats.bytes),
            });
        }
        let id = self.next_id;
        self.next_id += 1;
        let job = Job::Write {
            id,
            path: self.path_of(id),
            meta,
            entry: Arc::clone(&entry),
            sync: self.config.sync,
        };
        self.send(job)?;
        self.stats.bytes += size;
        self.in_flight.insert(
            id,
            InFlight {
                size,
                entry,
                invalidated: false,
            },
        );
        Ok(())
    }

    /// Indexes finished writes. Non-blocking; [`lookup`](Self::lookup) calls it first.
    pub fn poll(&mut self) {
        while let Ok(written) = self.done.try_recv() {
            self.finish_write(written);
        }
    }

    /// Blocks until every write enqueued so far is indexed: for shutdown and tests, never
    /// on a worker loop.
    pub fn wait_idle(&mut self) {
        while !self.in_flight.is_empty() {
            match self.done.recv() {
                Ok(written) => self.finish_write(written),
                Err(_) => break,
            }
        }
    }

    /// Finds the variant of `key` that `request` selects and opens its file. `None` on a
    /// miss, and for a file damaged since start-up (wrong length: deleted, never served).
    pub fn lookup(
        &mut self,
        key: &CacheKey,
        request: &RequestHead,
        now: SystemTime,
    ) -> Option<DiskHit> {
        self.poll();
        if !matches!(request.method, Method::Get | Method::Head) {
            return None;
        }
        let found = self.index.get(key).and_then(|ids| {
            ids.iter().rev().copied().find(|id| {
                self.entries
                    .get(id)
                    .is_some_and(|entry| entry.meta.variant.matches(&request.headers))
            })
        });
        let Some(id) = found else {
            self.stats.misses += 1;
            return None;
        };
        let opened = self.entries.get(&id).and_then(|entry| {
            let file = File::open(&entry.path).ok()?;
            let len = file.metadata().ok()?.len();
            (len == entry.file_len).then_some(file)
        });
        let Some(file) = opened else {
            tracing::warn!(%key, "disk cache file missing or resized since start-up, dropped");
            self.stats.damaged += 1;
            self.remove(id);
            self.stats.misses += 1;
            return None;
        };
        self.touch(id);
        self.stats.hits += 1;
        let entry = self.entries.get(&id)?;
        let body_offset = entry.file_len - entry.meta.body_len;
        Some(DiskHit {
            verdict: evaluate(request, &entry.meta, now, self.config.heuristic),
            meta: entry.meta.clone(),
            file,
            body_offset,
            body_len: entry.meta.body_len,
        })
    }

    /// Drops every variant of `key`; returns how many there were. Writes of `key` still in
    /// flight are deleted when they finish, so a purged object cannot come back from disk,
    /// not even after a restart.
    pub fn invalidate(&mut self, key: &CacheKey) -> usize {
        for write in self.in_flight.values_mut() {
            if write.entry.meta.key == *key {
                write.invalidated = true;
            }
        }
        let ids = self.index.get(key).cloned().unwrap_or_default();
        for &id in &ids {
            self.remove(id);
        }
        ids.len()
    }

    fn finish_write(&mut self, written: Written) {
        let Some(InFlight {
            size,
            entry,
            invalidated,
        }) = self.in_flight.remove(&written.id)
        else {
            return;
        };
        self.stats.bytes -= size;
        match written.result {
            Ok(()) if invalidated => self.discard(written.id),
            Ok(()) => {
                self.stats.writes += 1;
                let path = self.path_of(written.id);
                self.index_entry(written.id, entry.meta.clone(), path, size);
            }
            Err(error) => {
                self.stats.write_errors += 1;
                tracing::warn!(%error, "disk cache write failed, entry not kept");
            }
        }
    }

    /// Adds an entry to the index, replacing an older file of the same key and variant.
    fn index_entry(&mut self, id: u64, meta: EntryMeta, path: PathBuf, file_len: u64) {
        let older: Vec<u64> = self
            .index
            .get(&meta.key)
            .into_iter()
            .flatten()
            .copied()
            .filter(|other| {
                self.entries
                    .get(other)
                    .is_some_and(|e| e.meta.variant == meta.variant)
            })
            .collect();
        for other in older {
            self.remove(other);
        }
        self.tick += 1;
        self.index.entry(meta.key.clone()).or_default().push(id);
        self.recency.insert((self.tick, id));
        self.entries.insert(
            id,
            DiskEntry {
                meta,
                path,
                file_len,
                last_used: self.tick,
            },
        );
        self.stats.entries += 1;
        self.stats.bytes += file_len;
    }

    /// Evicts least recently used files until `incoming` more bytes fit, or none is left.
    fn make_room(&mut self, incoming: u64) {
        while self.stats.bytes + incoming > self.config.budget_bytes {
            let Some(&(_, id)) = self.recency.first() else {
                return;
            };
            self.remove(id);
            self.stats.evictions += 1;
        }
    }

    fn touch(&mut self, id: u64) {
        self.tick += 1;
        if let Some(entry) = self.entries.get_mut(&id) {
            self.recency.remove(&(entry.last_used, id));
            entry.last_used = self.tick;
            self.recency.insert((entry.last_used, id));
        }
    }

    /// Unindexes a file and has a writer delete it.
    fn remove(&mut self, id: u64) {
        let Some(entry) = self.entries.remove(&id) else {
            return;
        };
        self.recency.remove(&(entry.last_used, id));
        if let Some(ids) = self.index.get_mut(&entry.meta.key) {
            ids.retain(|&other| other != id);
            if ids.is_empty() {
                self.index.remove(&entry.meta.key);
            }
        }
        self.stats.entries -= 1;
        self.stats.bytes -= entry.file_len;
        // If the writers are gone the file stays; the next start-up's scan still sees it as
        // a valid entry, which is harmless (the budget is enforced again then).
        let _ = self.send(Job::Remove { path: entry.path });
    }

    fn send(&self, job: Job) -> Result<(), CacheError> {
        self.jobs
            .as_ref()
            .ok_or(CacheError::WritersGone)?
            .send(job)
            .map_err(|_| CacheError::WritersGone)
    }

    /// Deletes the file of a write whose key was invalidated meanwhile: by a writer thread, or
    /// here when they are gone (shutdown), so that a purged object never comes back.
    fn discard(&self, id: u64) {
        let path = self.path_of(id);
        if let Err(CacheError::WritersGone) = self.send(Job::Remove { path: path.clone() }) {
            if let Err(error) = fs::remove_file(&path) {
                tracing::warn!(%error, path = %path.display(), "disk cache: purged file not deleted");
            }
        }
    }

    fn path_of(&self, id: u64) -> PathBuf {
        self.config.dir.join(format!("{id:016x}.entry"))
    }
}

impl Drop for DiskTier {
    /// Lets the writers finish what is queued (so a clean shutdown loses nothing), then joins
    /// them.
    fn drop(&mut self) {
        self.jobs = None;
        for writer in self.writers.drain(..) {
            let _ = writer.join();
        }
        // Writes that finished after the last poll: those invalidated meanwhile are deleted
        // now (the writers are gone), or the next start-up would index them again.
        while let Ok(written) = self.done.try_recv() {
            self.finish_write(written);
        }
    }
}

#[cfg(test)]
mod tests;
