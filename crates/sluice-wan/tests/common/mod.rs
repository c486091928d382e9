//! Test beds for the integration tests: `net up` through the real binary, `net down` on drop.

#![allow(dead_code)] // each test file uses a different part

use std::io::Write;
use std::net::UdpSocket;
use std::path::PathBuf;
use std::process::Command;
use std::time::{Duration, Instant};

pub const BIN: &str = env!("CARGO_BIN_EXE_sluice-wan");

/// Timing tests take turns: on two shared cores, five wires and their senders at once would
/// measure the scheduler, not the wire.
pub static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

/// Takes the turn, even if an earlier test panicked holding it.
pub fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// True when we may build namespaces; prints the skip line otherwise.
pub fn root_or_skip() -> bool {
    if rustix::process::geteuid().is_root() {
        true
    } else {
        eprintln!("skipped: needs root");
        false
    }
}

/// The prefix of test `code`'s bed: the same on every run from this checkout, different in
/// another checkout. Other engineers run these tests at the same time from their checkouts, and
/// `Bed::up` first tears down whatever bed has its prefix (left by a killed run): with one
/// prefix for all checkouts, one run would take down another's bed mid-test.
pub fn prefix(code: char) -> String {
    // FNV-1a: any stable hash will do, and std's `DefaultHasher` promises no stability.
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in env!("CARGO_MANIFEST_DIR").bytes() {
        hash = (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3);
    }
    let mut tag = String::new();
    for _ in 0..5 {
        tag.push(char::from_digit((hash % 36) as u32, 36).unwrap());
        hash /= 36;
    }
    // 8 characters, the most a prefix may have (`PREFIX-cp-c` fits in 15 bytes).
    format!("sl{code}{tag}")
}

/// A test bed that is torn down when dropped, even if the test panics.
pub struct Bed {
    pub prefix: String,
    _profile: tempfile::NamedTempFile,
}

impl Bed {
    /// `net up --layout LAYOUT` with `profile` (TOML text), prefixed by [`prefix`]`(code)`.
    pub fn up(code: char, layout: &str, profile: &str) -> Bed {
        let prefix = prefix(code);
        let prefix = prefix.as_str();
        // A bed left over from an earlier, killed run of this test.
        let _ = Command::new(BIN)
            .args(["net", "down", "--prefix", prefix])
            .output();
        let mut file = tempfile::NamedTempFile::new().unwrap();
        file.write_all(profile.as_bytes()).unwrap();
        let path = file.path().to_str().unwrap().to_owned();
        let out = Command::new(BIN)
            .args([
                "net",
                "up",
                "--prefix",
                prefix,
                "--layout",
                layout,
                "--profile",
                &path,
            ])
            .args(["--seed", "7"])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "net up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Bed {
            prefix: prefix.to_owned(),
            _profile: file,
        }
    }

    pub fn netns(&self, host: &str) -> String {
        format!("{}-{host}", self.prefix)
    }

    /// `net down`, returning its stdout (the wire's last counters).
    pub fn down(&self) -> String {
        let out = Command::new(BIN)
            .args(["net", "down", "--prefix", &self.prefix])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "net down: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    pub fn state_path(&self) -> PathBuf {
        PathBuf::from(format!("/run/sluice-lab/{}.json", self.prefix))
    }

    pub fn wire_pid(&self) -> u32 {
        let text = std::fs::read_to_string(self.state_path()).unwrap();
        let state: serde_json::Value = serde_json::from_str(&text).unwrap();
        state["wire_pid"].as_u64().unwrap() as u32
    }

    /// The wire's counters, asked for with `net status` (SIGUSR1).
    pub fn counters(&self) -> serde_json::Value {
        let out = Command::new(BIN)
            .args(["net", "status", "--prefix", &self.prefix])
            .output()
            .unwrap();
        assert!(out.status.success());
        let text =
            std::fs::read_to_string(format!("/run/sluice-lab/{}.counters.json", self.prefix))
                .unwrap();
        serde_json::from_str(&text).unwrap()
    }
}

impl Drop for Bed {
    fn drop(&mut self) {
        let _ = Command::new(BIN)
            .args(["net", "down", "--prefix", &self.prefix])
            .output();
    }
}

/// A UDP socket bound to `addr` inside namespace `netns`.
pub fn udp_in(netns: &str, addr: &str) -> UdpSocket {
    let addr = addr.to_owned();
    let socket = sluice_wan::netns::within(netns, move || UdpSocket::bind(addr))
        .unwrap()
        .unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    socket
}

/// Sends `count` datagrams of `size` bytes, one every `gap`, each carrying its sequence number
/// and the send time (ns since `base`); returns after the last.
pub fn send_numbered(
    socket: &UdpSocket,
    to: &str,
    count: u64,
    size: usize,
    gap: Duration,
    base: Instant,
) {
    let mut payload = vec![0u8; size.max(16)];
    let start = Instant::now();
    for seq in 0..count {
        // Sleep, not spin: the wire under test needs the (two, shared) CPUs more than we do.
        let due = start + gap * seq as u32;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        payload[..8].copy_from_slice(&seq.to_be_bytes());
        let sent = base.elapsed().as_nanos() as u64;
        payload[8..16].copy_from_slice(&sent.to_be_bytes());
        socket.send_to(&payload, to).unwrap();
    }
}

/// One received datagram: sequence number, send and receive times (ns since base), size.
#[derive(Debug, Clone, Copy)]
pub struct Arrival {
    pub seq: u64,
    pub sent_ns: u64,
    pub received_ns: u64,
    pub size: usize,
}

/// Receives until `last` arrives or nothing comes for the socket's timeout.
pub fn receive_numbered(socket: &UdpSocket, last: u64, base: Instant) -> Vec<Arrival> {
    let mut out = Vec::new();
    let mut buffer = vec![0u8; 65536];
    while let Ok(n) = socket.recv(&mut buffer) {
        let received_ns = base.elapsed().as_nanos() as u64;
        let seq = u64::from_be_bytes(buffer[..8].try_into().unwrap());
        let sent_ns = u64::from_be_bytes(buffer[8..16].try_into().unwrap());
        out.push(Arrival {
            seq,
            sent_ns,
            received_ns,
            size: n,
        });
        if seq == last {
            break;
        }
    }
    out
}

pub fn percentile(sorted: &[u64], p: f64) -> u64 {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}
