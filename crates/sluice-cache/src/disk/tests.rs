use std::fs::OpenOptions;
use std::os::unix::fs::FileExt;
use std::path::Path;

use super::*;
use crate::policy::test_support::{at, entry, request, T0};

const GET: &str = "GET /a HTTP/1.1\r\nHost: h\r\n\r\n";
const FRESH: &str = "HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nETag: \"v1\"\r\n\r\n";

fn config(dir: &Path, budget: u64) -> DiskConfig {
    DiskConfig {
        dir: dir.to_owned(),
        budget_bytes: budget,
        max_object_bytes: budget,
        writer_threads: 1,
        sync: false,
        heuristic: HeuristicFreshness::default(),
    }
}

fn entry_at(path: &str, body: &[u8]) -> Arc<StoredEntry> {
    let mut stored = entry(FRESH, body);
    stored.meta.key = CacheKey::new("http", "h", 80, path);
    Arc::new(stored)
}

fn key(path: &str) -> CacheKey {
    CacheKey::new("http", "h", 80, path)
}

fn get(path: &str) -> RequestHead {
    request(&format!("GET {path} HTTP/1.1\r\nHost: h\r\n\r\n"))
}

fn body_of(hit: &DiskHit) -> Vec<u8> {
    let mut body = vec![0; hit.body_len as usize];
    hit.file
        .read_exact_at(&mut body, hit.body_offset)
        .expect("read body");
    body
}

fn entry_files(dir: &Path) -> Vec<PathBuf> {
    fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "entry"))
        .collect()
}

#[test]
fn stored_entry_is_found_after_the_write_completes() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    tier.store(entry_at("/a", b"hello disk")).unwrap();
    tier.wait_idle();
    let hit = tier.lookup(&key("/a"), &request(GET), at(T0 + 1)).unwrap();
    assert_eq!(hit.verdict, Verdict::Fresh);
    assert_eq!(body_of(&hit), b"hello disk");
    assert_eq!(hit.meta.head.headers.get("etag"), Some(&b"\"v1\""[..]));
    assert_eq!(tier.stats().writes, 1);
}

#[test]
fn restart_finds_entries() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
        tier.store(entry_at("/a", b"one")).unwrap();
        tier.store(entry_at("/b", b"two")).unwrap();
        tier.wait_idle();
    }
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert_eq!(tier.stats().entries, 2);
    let hit = tier.lookup(&key("/b"), &get("/b"), at(T0)).unwrap();
    assert_eq!(body_of(&hit), b"two");
    // New writes do not reuse the old files' names.
    tier.store(entry_at("/c", b"three")).unwrap();
    tier.wait_idle();
    assert_eq!(entry_files(dir.path()).len(), 3);
}

#[test]
fn truncated_file_is_dropped_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
        tier.store(entry_at("/a", &[5; 1000])).unwrap();
        tier.wait_idle();
    }
    let files = entry_files(dir.path());
    let file = OpenOptions::new().write(true).open(&files[0]).unwrap();
    file.set_len(500).unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert!(tier.lookup(&key("/a"), &request(GET), at(T0)).is_none());
    assert_eq!(tier.stats().damaged, 1);
    assert!(entry_files(dir.path()).is_empty(), "damaged file deleted");
}

#[test]
fn corrupted_body_is_dropped_at_restart() {
    let dir = tempfile::tempdir().unwrap();
    {
        let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
        tier.store(entry_at("/a", &[5; 1000])).unwrap();
        tier.wait_idle();
    }
    let files = entry_files(dir.path());
    let file = OpenOptions::new().write(true).open(&files[0]).unwrap();
    let len = file.metadata().unwrap().len();
    file.write_all_at(b"X", len - 1).unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert!(tier.lookup(&key("/a"), &request(GET), at(T0)).is_none());
    assert_eq!(tier.stats().damaged, 1);
}

#[test]
fn file_truncated_while_running_is_never_served() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    tier.store(entry_at("/a", &[5; 1000])).unwrap();
    tier.wait_idle();
    let files = entry_files(dir.path());
    OpenOptions::new()
        .write(true)
        .open(&files[0])
        .unwrap()
        .set_len(100)
        .unwrap();
    assert!(tier.lookup(&key("/a"), &request(GET), at(T0)).is_none());
    assert_eq!((tier.stats().damaged, tier.stats().entries), (1, 0));
}

#[test]
fn leftover_temporary_files_are_deleted() {
    let dir = tempfile::tempdir().unwrap();
    fs::write(dir.path().join("0000000000000007.tmp"), b"half a write").unwrap();
    fs::write(dir.path().join("README"), b"not ours").unwrap();
    let tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert!(!dir.path().join("0000000000000007.tmp").exists());
    assert!(dir.path().join("README").exists());
    assert_eq!(tier.stats().entries, 0);
}

#[test]
fn budget_holds_and_evicts_least_recently_used() {
    let dir = tempfile::tempdir().unwrap();
    let budget = 20_000;
    let mut tier = DiskTier::open(config(dir.path(), budget)).unwrap();
    for i in 0..50 {
        tier.store(entry_at(&format!("/o{i}"), &[1; 1000])).unwrap();
        assert!(tier.stats().bytes <= budget);
        if i % 10 == 0 {
            tier.wait_idle();
        }
        // Keep /o0 in use, so it survives.
        if i > 0 {
            tier.lookup(&key("/o0"), &get("/o0"), at(T0));
        }
    }
    tier.wait_idle();
    drop(tier);
    let on_disk: u64 = entry_files(dir.path())
        .iter()
        .map(|p| fs::metadata(p).unwrap().len())
        .sum();
    assert!(on_disk <= budget, "{on_disk} bytes on disk");
    let mut tier = DiskTier::open(config(dir.path(), budget)).unwrap();
    assert!(tier.stats().entries >= 10);
    assert!(tier.lookup(&key("/o0"), &get("/o0"), at(T0)).is_some());
    assert!(tier.lookup(&key("/o1"), &get("/o1"), at(T0)).is_none());
}

#[test]
fn too_large_entry_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1000)).unwrap();
    let err = tier.store(entry_at("/big", &[0; 2000])).unwrap_err();
    assert!(matches!(err, CacheError::TooLargeForDisk { .. }));
}

#[test]
fn newer_write_replaces_same_variant_and_invalidate_removes() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    tier.store(entry_at("/a", b"old")).unwrap();
    tier.wait_idle();
    tier.store(entry_at("/a", b"new")).unwrap();
    tier.wait_idle();
    let hit = tier.lookup(&key("/a"), &request(GET), at(T0)).unwrap();
    assert_eq!(body_of(&hit), b"new");
    assert_eq!(tier.stats().entries, 1);
    assert_eq!(tier.invalidate(&key("/a")), 1);
    assert!(tier.lookup(&key("/a"), &request(GET), at(T0)).is_none());
    drop(tier);
    assert!(entry_files(dir.path()).is_empty());
}

#[test]
fn a_write_in_flight_when_its_key_is_invalidated_is_deleted_not_indexed() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    tier.store(entry_at("/a", b"purged while writing")).unwrap();
    tier.store(entry_at("/b", b"kept")).unwrap();
    assert_eq!(tier.invalidate(&key("/a")), 0, "nothing indexed yet");
    tier.wait_idle();
    assert!(tier.lookup(&key("/a"), &get("/a"), at(T0)).is_none());
    assert!(tier.lookup(&key("/b"), &get("/b"), at(T0)).is_some());
    drop(tier);
    // Not even a restart brings it back: only /b's file is left.
    assert_eq!(entry_files(dir.path()).len(), 1);
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert!(tier.lookup(&key("/a"), &get("/a"), at(T0)).is_none());
}

#[test]
fn a_write_invalidated_just_before_shutdown_is_deleted_at_shutdown() {
    let dir = tempfile::tempdir().unwrap();
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    tier.store(entry_at("/a", b"purged, then the proxy stops"))
        .unwrap();
    tier.invalidate(&key("/a"));
    // No poll, no wait_idle: the proxy stops right after the purge.
    drop(tier);
    assert!(entry_files(dir.path()).is_empty());
    let mut tier = DiskTier::open(config(dir.path(), 1 << 20)).unwrap();
    assert!(tier.lookup(&key("/a"), &get("/a"), at(T0)).is_none());
}
