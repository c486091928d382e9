//! The disk tier's writer threads: every file write, rename and unlink happens here, so the
//! worker's event loop never blocks on the disk.

use std::fs::{self, File};
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::mpsc::{Receiver, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use super::format::Preamble;
use crate::{CacheError, StoredEntry};

/// Work for a writer thread.
#[derive(Debug)]
pub(super) enum Job {
    /// Write an entry to `path` (through a temporary file and a rename).
    Write {
        id: u64,
        path: PathBuf,
        meta: Vec<u8>,
        entry: Arc<StoredEntry>,
        sync: bool,
    },
    /// Delete a file (evicted, replaced, invalidated or found damaged).
    Remove { path: PathBuf },
}

/// What a writer reports back.
#[derive(Debug)]
pub(super) struct Written {
    pub(super) id: u64,
    pub(super) result: Result<(), CacheError>,
}

/// Starts `threads` writers sharing one job queue. The `Mutex` guards only the queue's
/// receiving end among the writers; the worker's side is a plain channel send.
pub(super) fn spawn_writers(
    threads: usize,
    jobs: Receiver<Job>,
    done: Sender<Written>,
) -> Vec<JoinHandle<()>> {
    let jobs = Arc::new(Mutex::new(jobs));
    (0..threads.max(1))
        .map(|index| {
            let jobs = Arc::clone(&jobs);
            let done = done.clone();
            std::thread::Builder::new()
                .name(format!("sluice-cache-disk-{index}"))
                .spawn(move || run(&jobs, &done))
        })
        .filter_map(|spawned| match spawned {
            Ok(handle) => Some(handle),
            Err(error) => {
                tracing::error!(%error, "cannot start a disk cache writer thread");
                None
            }
        })
        .collect()
}

fn run(jobs: &Mutex<Receiver<Job>>, done: &Sender<Written>) {
    loop {
        // A poisoned lock means another writer panicked while receiving; the queue itself is
        // still sound, so keep serving it.
        let job = match jobs.lock() {
            Ok(receiver) => receiver.recv(),
            Err(poisoned) => poisoned.into_inner().recv(),
        };
        let Ok(job) = job else {
            return; // The tier was dropped.
        };
        match job {
            Job::Write {
                id,
                path,
                meta,
                entry,
                sync,
            } => {
                let result = write_entry(&path, &meta, &entry, sync);
                if done.send(Written { id, result }).is_err() {
                    return;
                }
            }
            Job::Remove { path } => {
                if let Err(error) = fs::remove_file(&path) {
                    if error.kind() != std::io::ErrorKind::NotFound {
                        tracing::warn!(path = %path.display(), %error, "cannot delete cache file");
                    }
                }
            }
        }
    }
}

/// Writes `path.tmp`, then renames it to `path`: a crash leaves either a `.tmp` (deleted at
/// start-up) or a complete file. With `sync`, the data is on disk before the rename, so a
/// power cut cannot leave a renamed file with missing blocks; without it, the checksum still
/// catches such a file at start-up.
fn write_entry(
    path: &Path,
    meta: &[u8],
    entry: &StoredEntry,
    sync: bool,
) -> Result<(), CacheError> {
    let temporary = path.with_extension("tmp");
    let io = |source| CacheError::Io {
        path: temporary.clone(),
        source,
    };
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(meta);
    hasher.update(&entry.body);
    let preamble = Preamble {
        meta_len: u32::try_from(meta.len()).unwrap_or(u32::MAX),
        body_len: entry.meta.body_len,
        checksum: hasher.finalize(),
    };
    let file = File::create(&temporary).map_err(io)?;
    let mut out = BufWriter::new(file);
    out.write_all(&preamble.encode()).map_err(io)?;
    out.write_all(meta).map_err(io)?;
    out.write_all(&entry.body).map_err(io)?;
    let file = out.into_inner().map_err(|e| io(e.into_error()))?;
    if sync {
        file.sync_data().map_err(io)?;
    }
    drop(file);
    fs::rename(&temporary, path).map_err(|source| CacheError::Io {
        path: path.to_owned(),
        source,
    })
}
