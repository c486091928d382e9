//! Rebuilding the disk index at start-up: every file is checked end to end before it is
//! trusted, and anything else in the directory that looks like ours is deleted.

use std::fs::{self, File};
use std::io::Read;
use std::path::{Path, PathBuf};

use super::format::{decode_meta, Preamble, PREAMBLE_LEN};
use crate::{CacheError, EntryMeta};

/// A file that passed every check.
#[derive(Debug)]
pub(super) struct FoundEntry {
    pub(super) id: u64,
    pub(super) path: PathBuf,
    pub(super) meta: EntryMeta,
    pub(super) file_len: u64,
}

/// What the scan found.
#[derive(Debug, Default)]
pub(super) struct ScanReport {
    pub(super) entries: Vec<FoundEntry>,
    /// Files deleted because they failed a check.
    pub(super) damaged: u64,
    /// Leftover temporary files deleted.
    pub(super) temporaries: u64,
}

/// Reads every `*.entry` file of `dir`; deletes `*.tmp` files (writes a crash interrupted)
/// and entry files that fail a check. Other files are left alone.
///
/// Reads every byte to verify checksums: start-up costs one sequential read of the tier.
/// That is the price of never serving a damaged file without checksumming on the hot path.
pub(super) fn scan(dir: &Path) -> Result<ScanReport, CacheError> {
    let io = |source| CacheError::Io {
        path: dir.to_owned(),
        source,
    };
    let mut report = ScanReport::default();
    for item in fs::read_dir(dir).map_err(io)? {
        let path = item.map_err(io)?.path();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        if name.ends_with(".tmp") {
            remove(&path);
            report.temporaries += 1;
            continue;
        }
        let Some(id) = name
            .strip_suffix(".entry")
            .and_then(|stem| u64::from_str_radix(stem, 16).ok())
        else {
            continue;
        };
        match verify(&path) {
            Ok((meta, file_len)) => report.entries.push(FoundEntry {
                id,
                path,
                meta,
                file_len,
            }),
            Err(error) => {
                tracing::warn!(%error, "dropping damaged disk cache file");
                remove(&path);
                report.damaged += 1;
            }
        }
    }
    Ok(report)
}

/// Checks one file: length, magic, version, meta and checksum.
pub(super) fn verify(path: &Path) -> Result<(EntryMeta, u64), CacheError> {
    let corrupt = |reason| CacheError::CorruptFile {
        path: path.to_owned(),
        reason,
    };
    let io = |source| CacheError::Io {
        path: path.to_owned(),
        source,
    };
    let mut file = File::open(path).map_err(io)?;
    let file_len = file.metadata().map_err(io)?.len();
    let mut preamble = [0; PREAMBLE_LEN as usize];
    file.read_exact(&mut preamble)
        .map_err(|_| corrupt("shorter than its preamble"))?;
    let preamble = Preamble::decode(&preamble).map_err(corrupt)?;
    if preamble.file_len() != file_len {
        return Err(corrupt("length differs from the announced one"));
    }
    let mut meta = vec![0; preamble.meta_len as usize];
    file.read_exact(&mut meta).map_err(io)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&meta);
    let mut buffer = vec![0; 64 * 1024];
    loop {
        let read = file.read(&mut buffer).map_err(io)?;
        if read == 0 {
            break;
        }
        hasher.update(buffer.get(..read).unwrap_or_default());
    }
    if hasher.finalize() != preamble.checksum {
        return Err(corrupt("checksum mismatch"));
    }
    let meta = decode_meta(&meta, preamble.body_len).map_err(corrupt)?;
    Ok((meta, file_len))
}

fn remove(path: &Path) {
    if let Err(error) = fs::remove_file(path) {
        tracing::warn!(path = %path.display(), %error, "cannot delete cache file");
    }
}
