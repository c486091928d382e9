//! Engines side by side through the real proxy on loopback: requests per second, proxy CPU per
//! request, and whole-machine CPU per request (from /proc/stat: on loopback the kernel work of
//! one socket is often charged to another process, so only the machine-wide figure is fair).
//!
//! ```text
//! cargo build --release -p sluice
//! cargo bench -p sluice-splice --bench engines -- [--seconds 2] [--runs 3] [--clients 4]
//!     [--sizes 1K,8K,64K,1M,16M] [--engines copy,splice,sockmap,auto]
//! ```
//! The proxy binary is `$SLUICE_BIN`, else `$CARGO_TARGET_DIR/release/sluice`, else
//! `target/release/sluice`. The origin here is minimal on purpose (one thread per connection,
//! one precomputed response), so that most of the CPU measured is the proxy's and the kernel's.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

struct Options {
    seconds: f64,
    runs: usize,
    clients: usize,
    sizes: Vec<usize>,
    engines: Vec<String>,
}

fn main() {
    // `cargo test --all-targets` runs every bench binary without `--bench`: a measurement has no
    // place in a test run (and would need a release build), so say so and stop.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("engines bench: skipped outside `cargo bench` (it measures, it does not test)");
        return;
    }
    let options = parse_options();
    let binary = sluice_binary();
    assert!(
        binary.exists(),
        "no proxy binary at {} (cargo build --release -p sluice, or set SLUICE_BIN)",
        binary.display()
    );
    println!(
        "# engines bench: {} s per run, {} runs, {} clients, 1 worker, binary {}",
        options.seconds,
        options.runs,
        options.clients,
        binary.display()
    );
    println!(
        "| size | engine | req/s median (min-max) | proxy CPU µs/req median (min-max) | \
         machine CPU µs/req median (min-max) | engine counters at shutdown |"
    );
    println!("|---|---|---|---|---|---|");
    for &size in &options.sizes {
        let origin = start_origin(size);
        for engine in &options.engines {
            let Some(mut proxy) = start_proxy(&binary, engine, origin) else {
                println!(
                    "| {} | {engine} | skipped: proxy did not start (root?) | | |",
                    human(size)
                );
                continue;
            };
            let mut samples = Vec::new();
            // One short warm-up run: pipe pool, upstream pool, page cache.
            let _ = run_load(proxy.addr, size, options.clients, 0.3, proxy.pid());
            for _ in 0..options.runs {
                samples.push(run_load(
                    proxy.addr,
                    size,
                    options.clients,
                    options.seconds,
                    proxy.pid(),
                ));
            }
            let counters = proxy.stop();
            let column = |f: fn(&Sample) -> f64| spread(samples.iter().map(f).collect());
            println!(
                "| {} | {engine} | {} | {} | {} | {counters} |",
                human(size),
                column(|s| s.requests_per_second),
                column(|s| s.proxy_us_per_request),
                column(|s| s.machine_us_per_request),
            );
        }
    }
}

/// One run's figures.
struct Sample {
    requests_per_second: f64,
    proxy_us_per_request: f64,
    machine_us_per_request: f64,
}

fn run_load(proxy: SocketAddr, size: usize, clients: usize, seconds: f64, pid: u32) -> Sample {
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let machine_before = machine_busy_us();
    let proxy_before = process_cpu_us(pid);
    let start = Instant::now();
    let workers: Vec<_> = (0..clients)
        .map(|_| {
            let stop = stop.clone();
            let done = done.clone();
            thread::spawn(move || client(proxy, size, &stop, &done))
        })
        .collect();
    thread::sleep(Duration::from_secs_f64(seconds));
    stop.store(true, Ordering::SeqCst);
    for worker in workers {
        let _ = worker.join();
    }
    let elapsed = start.elapsed().as_secs_f64();
    let requests = done.load(Ordering::SeqCst).max(1) as f64;
    Sample {
        requests_per_second: requests / elapsed,
        proxy_us_per_request: (process_cpu_us(pid) - proxy_before) / requests,
        machine_us_per_request: (machine_busy_us() - machine_before) / requests,
    }
}

/// One keep-alive client: GET, read the whole response, repeat until told to stop.
fn client(proxy: SocketAddr, size: usize, stop: &AtomicBool, done: &AtomicU64) {
    let mut stream = TcpStream::connect(proxy).expect("connect to the proxy");
    stream.set_nodelay(true).ok();
    let request = b"GET /bench HTTP/1.1\r\nHost: bench\r\n\r\n";
    let mut buf = vec![0u8; 256 * 1024];
    while !stop.load(Ordering::Relaxed) {
        stream.write_all(request).expect("send");
        // Head first, then exactly Content-Length bytes.
        let mut have = 0;
        let head_end = loop {
            let n = stream.read(&mut buf[have..]).expect("read head");
            assert!(n > 0, "proxy closed the connection");
            have += n;
            if let Some(at) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
                break at + 4;
            }
        };
        let mut body = have - head_end;
        while body < size {
            let n = stream.read(&mut buf).expect("read body");
            assert!(n > 0, "proxy closed mid-body");
            body += n;
        }
        assert_eq!(body, size, "response longer than its Content-Length");
        done.fetch_add(1, Ordering::Relaxed);
    }
}

/// A minimal origin: every request on every connection gets the same `size`-byte response,
/// marked uncacheable.
fn start_origin(size: usize) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
    let addr = listener.local_addr().expect("origin address");
    // no-store: every request must cross the engine, never a cache.
    let mut response =
        format!("HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {size}\r\n\r\n")
            .into_bytes();
    response.extend((0..size).map(|i| (i % 251) as u8));
    let response = Arc::new(response);
    thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let response = response.clone();
            thread::spawn(move || serve(stream, &response));
        }
    });
    addr
}

fn serve(mut stream: TcpStream, response: &[u8]) {
    stream.set_nodelay(true).ok();
    let mut buf = vec![0u8; 8192];
    let mut have = 0;
    loop {
        match stream.read(&mut buf[have..]) {
            Ok(0) | Err(_) => return,
            Ok(n) => have += n,
        }
        while let Some(at) = buf[..have].windows(4).position(|w| w == b"\r\n\r\n") {
            if stream.write_all(response).is_err() {
                return;
            }
            buf.copy_within(at + 4..have, 0);
            have -= at + 4;
        }
        if have == buf.len() {
            return;
        }
    }
}

struct RunningProxy {
    child: Child,
    addr: SocketAddr,
    _dir: PathBuf,
}

impl RunningProxy {
    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Stops the proxy and returns its shutdown line of engine counters (which mechanism
    /// moved how many transfers and bytes, and every fallback).
    fn stop(&mut self) -> String {
        let _ = Command::new("kill")
            .args(["-TERM", &self.child.id().to_string()])
            .status();
        let _ = self.child.wait();
        let log = std::fs::read_to_string(self._dir.join("stderr.log")).unwrap_or_default();
        let _ = std::fs::remove_dir_all(&self._dir);
        log.lines()
            .find_map(|line| line.split_once("engine counters: ").map(|(_, c)| c))
            .map(|c| c.split(" worker=").next().unwrap_or(c).trim().to_owned())
            .unwrap_or_default()
    }
}

fn start_proxy(binary: &PathBuf, engine: &str, origin: SocketAddr) -> Option<RunningProxy> {
    let dir = std::env::temp_dir().join(format!("sluice-bench-{}-{engine}", std::process::id()));
    std::fs::create_dir_all(&dir).ok()?;
    let config = dir.join("sluice.toml");
    std::fs::write(
        &config,
        format!(
            "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
             upstreams = [\"{origin}\"]\n[transfer]\nengine = \"{engine}\"\n\
             [log]\naccess_log = false\nlevel = \"info\"\n"
        ),
    )
    .ok()?;
    let stderr = std::fs::File::create(dir.join("stderr.log")).ok()?;
    let mut child = Command::new(binary)
        .args(["run", "--config"])
        .arg(&config)
        .env("NO_COLOR", "1")
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .ok()?;
    let stdout = child.stdout.take()?;
    let line = BufReader::new(stdout)
        .lines()
        .map_while(Result::ok)
        .find_map(|line| line.strip_prefix("listening ").map(str::to_owned));
    match line.and_then(|addr| addr.parse().ok()) {
        Some(addr) => Some(RunningProxy {
            child,
            addr,
            _dir: dir,
        }),
        None => {
            let _ = child.kill();
            let _ = child.wait();
            None
        }
    }
}

/// Busy time of the whole machine in µs: every /proc/stat `cpu` column but idle and iowait.
fn machine_busy_us() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let fields: Vec<f64> = stat
        .lines()
        .next()
        .unwrap_or("")
        .split_whitespace()
        .skip(1)
        .filter_map(|f| f.parse().ok())
        .collect();
    let total: f64 = fields.iter().take(8).sum();
    let idle = fields.get(3).copied().unwrap_or(0.0) + fields.get(4).copied().unwrap_or(0.0);
    (total - idle) * 1e6 / clock_ticks()
}

/// utime + stime of process `pid` in µs (/proc/PID/stat fields 14 and 15).
fn process_cpu_us(pid: u32) -> f64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let after_name = stat.rsplit_once(')').map(|(_, rest)| rest).unwrap_or("");
    let fields: Vec<f64> = after_name
        .split_whitespace()
        .filter_map(|f| f.parse().ok())
        .collect();
    // Fields after the name start at field 3 (state, not numeric, filtered out); utime and
    // stime are fields 14 and 15, i.e. the 11th and 12th numeric ones here.
    let utime = fields.get(10).copied().unwrap_or(0.0);
    let stime = fields.get(11).copied().unwrap_or(0.0);
    (utime + stime) * 1e6 / clock_ticks()
}

/// USER_HZ: 100 on every Linux architecture that matters here (the kernel ABI fixes it).
fn clock_ticks() -> f64 {
    100.0
}

fn spread(mut values: Vec<f64>) -> String {
    values.sort_by(f64::total_cmp);
    let median = values[values.len() / 2];
    let fmt = |v: f64| {
        if v >= 100.0 {
            format!("{v:.0}")
        } else {
            format!("{v:.1}")
        }
    };
    format!(
        "{} ({}-{})",
        fmt(median),
        fmt(values[0]),
        fmt(values[values.len() - 1])
    )
}

fn human(size: usize) -> String {
    if size >= 1 << 20 && size % (1 << 20) == 0 {
        format!("{} MiB", size >> 20)
    } else if size >= 1024 && size % 1024 == 0 {
        format!("{} KiB", size >> 10)
    } else {
        format!("{size} B")
    }
}

fn parse_size(text: &str) -> usize {
    let text = text.trim();
    let (number, unit) =
        text.split_at(text.find(|c: char| c.is_alphabetic()).unwrap_or(text.len()));
    let n: usize = number.parse().expect("size");
    match unit.to_ascii_uppercase().as_str() {
        "" | "B" => n,
        "K" | "KIB" => n << 10,
        "M" | "MIB" => n << 20,
        other => panic!("unknown size unit {other}"),
    }
}

fn parse_options() -> Options {
    let mut options = Options {
        seconds: 2.0,
        runs: 3,
        clients: 4,
        sizes: ["1K", "8K", "64K", "1M", "16M"].map(parse_size).to_vec(),
        engines: ["copy", "splice", "sockmap", "auto"]
            .map(String::from)
            .to_vec(),
    };
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match arg.as_str() {
            "--seconds" => options.seconds = value().parse().expect("seconds"),
            "--runs" => options.runs = value().parse().expect("runs"),
            "--clients" => options.clients = value().parse().expect("clients"),
            "--sizes" => options.sizes = value().split(',').map(parse_size).collect(),
            "--engines" => options.engines = value().split(',').map(String::from).collect(),
            "--bench" => {}
            other => panic!("unknown option {other}"),
        }
    }
    options
}

fn sluice_binary() -> PathBuf {
    if let Ok(path) = std::env::var("SLUICE_BIN") {
        return PathBuf::from(path);
    }
    let target = std::env::var("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|_| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("release/sluice")
}
