//! The real `sluice` binary, started with a config written to a temporary file.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread;

use sluice_http::Method;

use crate::{RawClient, DEADLINE};

/// A running `sluice run --config FILE`, killed when dropped.
#[derive(Debug)]
pub struct Proxy {
    child: Child,
    addrs: Vec<SocketAddr>,
    stderr: Arc<Mutex<String>>,
    /// The thread copying stderr into `stderr`; it ends when the process does.
    stderr_reader: Option<thread::JoinHandle<()>>,
    _dir: tempfile::TempDir,
}

impl Proxy {
    /// Starts `binary` with `config` (TOML) and waits until every listener is bound.
    ///
    /// # Panics
    /// If the binary does not start or does not report its listeners within [`DEADLINE`]; the
    /// panic message carries its stderr.
    pub fn start(binary: &Path, config: &str) -> Proxy {
        let filter = std::env::var("SLUICE_TEST_LOG").unwrap_or_else(|_| "info".into());
        Proxy::start_logging(binary, config, &filter)
    }

    /// Like [`start`](Self::start), with `filter` as the proxy's `RUST_LOG` (for a test that
    /// waits for a debug event, e.g. `"info,sluice_splice=debug"`).
    pub fn start_logging(binary: &Path, config: &str, filter: &str) -> Proxy {
        let dir = tempfile::tempdir().expect("temporary directory");
        let path = dir.path().join("sluice.toml");
        std::fs::write(&path, config).expect("write config");
        let listeners = config.matches("[[listener]]").count().max(1);
        let mut child = Command::new(binary)
            .args(["run", "--config"])
            .arg(&path)
            .env("RUST_LOG", filter)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn sluice");
        let stderr = Arc::new(Mutex::new(String::new()));
        let mut child_stderr = child.stderr.take().expect("piped stderr");
        let sink = stderr.clone();
        let stderr_reader = thread::spawn(move || {
            let mut chunk = [0u8; 4096];
            while let Ok(n) = child_stderr.read(&mut chunk) {
                if n == 0 {
                    break;
                }
                sink.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&chunk[..n]));
            }
        });
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, rx) = mpsc::channel();
        thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if let Some(addr) = line.strip_prefix("listening ") {
                    if tx
                        .send(addr.parse::<SocketAddr>().expect("address"))
                        .is_err()
                    {
                        break;
                    }
                }
            }
        });
        let mut addrs = Vec::new();
        while addrs.len() < listeners {
            match rx.recv_timeout(DEADLINE) {
                Ok(addr) => addrs.push(addr),
                Err(_) => {
                    let _ = child.kill();
                    let _ = child.wait();
                    panic!("sluice did not start; stderr:\n{}", stderr.lock().unwrap());
                }
            }
        }
        Proxy {
            child,
            addrs,
            stderr,
            stderr_reader: Some(stderr_reader),
            _dir: dir,
        }
    }

    /// The first listener's address.
    pub fn addr(&self) -> SocketAddr {
        self.addrs[0]
    }

    /// Every listener's address, in config order.
    pub fn addrs(&self) -> &[SocketAddr] {
        &self.addrs
    }

    /// The proxy's `http://` URL, for curl `-x`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr())
    }

    /// What the proxy wrote to stderr so far (logs, access log).
    pub fn logs(&self) -> String {
        self.stderr.lock().unwrap().clone()
    }

    /// Waits until the logs contain `needle` (e.g. an access-log line), or panics at the deadline.
    pub fn wait_for_log(&self, needle: &str) -> String {
        self.wait_for_log_count(needle, 1)
    }

    /// Waits until the logs contain `needle` at least `count` times.
    pub fn wait_for_log_count(&self, needle: &str, count: usize) -> String {
        let start = std::time::Instant::now();
        loop {
            let logs = self.logs();
            if logs.matches(needle).count() >= count {
                return logs;
            }
            assert!(
                start.elapsed() < DEADLINE,
                "log line {needle:?} never came; logs:\n{logs}"
            );
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// The cache counters of the worker that takes a new connection, from the STATS method
    /// (`hits=3 misses=1 ...`, one worker's store): exact when the proxy runs one worker.
    ///
    /// # Panics
    /// If STATS is not answered with 200 (cache off, client outside `cache.purge_allow`).
    pub fn cache_stats(&self) -> HashMap<String, u64> {
        let mut client = RawClient::connect(self.addr());
        client.send(b"STATS http://stats.invalid/ HTTP/1.1\r\nHost: stats.invalid\r\n\r\n");
        let response = client.read_response(&Method::Other("STATS".into()));
        assert_eq!(response.status(), 200, "STATS: {}", response.head_text);
        String::from_utf8_lossy(&response.body)
            .split_whitespace()
            .filter_map(|pair| pair.split_once('='))
            .map(|(name, value)| (name.to_owned(), value.parse().expect("a count")))
            .collect()
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited cleanly.
    pub fn terminate(mut self) -> bool {
        self.stop() == Some(true)
    }

    /// Like [`Proxy::terminate`], and also returns everything the process wrote to stderr,
    /// to its last line: the counters it logs at shutdown included.
    pub fn terminate_with_logs(mut self) -> (bool, String) {
        let stopped = self.stop();
        if stopped.is_some() {
            if let Some(reader) = self.stderr_reader.take() {
                let _ = reader.join();
            }
        }
        (stopped == Some(true), self.logs())
    }

    /// SIGTERM, then whether the process exited cleanly; `None` if it did not exit in time.
    fn stop(&mut self) -> Option<bool> {
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(self.child.id().to_string())
            .status();
        let start = std::time::Instant::now();
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status.success());
            }
            if start.elapsed() > DEADLINE {
                return None;
            }
            thread::sleep(std::time::Duration::from_millis(10));
        }
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(None))
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
