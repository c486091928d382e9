//! How a memory hit's body should leave: `write` from the stored bytes (one copy, user space to
//! socket buffer), or the object kept in a memfd and sent with `sendfile(2)` or with `splice(2)`
//! through a pipe (page references, no copy by the sender). The issue asks which; this measures
//! the sender's CPU per object on loopback, the receiver draining on another thread, plus the
//! whole machine's CPU (on loopback the receive side's copy is charged to the receiver).
//!
//! ```text
//! cargo bench -p sluice-cache --bench hit_send -- [--sizes 64K,1M,16M] [--seconds 2] [--runs 3]
//! ```

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::fd::{AsFd, OwnedFd};
use std::thread;
use std::time::{Duration, Instant};

use rustix::fs::{memfd_create, MemfdFlags};
use rustix::pipe::{fcntl_setpipe_size, pipe, splice, SpliceFlags};

#[derive(Clone, Copy, Debug)]
enum Way {
    Write,
    Sendfile,
    Splice,
}

fn main() {
    // `cargo test --all-targets` runs bench binaries without `--bench`: nothing to test here.
    if !std::env::args().any(|arg| arg == "--bench") {
        println!("hit_send bench: skipped outside `cargo bench` (it measures, it does not test)");
        return;
    }
    let (sizes, seconds, runs) = options();
    println!("# hit_send: {seconds} s per cell, {runs} runs, median (min-max)");
    println!("| size | way | objects/s | sender CPU µs/object | machine CPU µs/object |");
    println!("|---|---|---|---|---|");
    for size in sizes {
        let body: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
        let memfd = memfd_create("sluice-hit", MemfdFlags::CLOEXEC).expect("memfd_create");
        std::fs::File::from(memfd.try_clone().expect("dup"))
            .write_all(&body)
            .expect("fill the memfd");
        for way in [Way::Write, Way::Sendfile, Way::Splice] {
            let samples: Vec<(f64, f64, f64)> = (0..runs)
                .map(|_| run(way, &body, &memfd, seconds))
                .collect();
            let pick = |f: fn(&(f64, f64, f64)) -> f64| {
                let mut v: Vec<f64> = samples.iter().map(f).collect();
                v.sort_by(|a, b| a.total_cmp(b));
                format!("{:.1} ({:.1}-{:.1})", v[v.len() / 2], v[0], v[v.len() - 1])
            };
            println!(
                "| {} | {way:?} | {} | {} | {} |",
                human(size),
                pick(|s| s.0),
                pick(|s| s.1),
                pick(|s| s.2)
            );
        }
    }
}

/// One cell: objects per second, sender CPU and machine CPU per object.
fn run(way: Way, body: &[u8], memfd: &OwnedFd, seconds: f64) -> (f64, f64, f64) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("addr");
    let receiver = thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => return total,
                Ok(n) => total += n as u64,
            }
        }
    });
    let mut stream = TcpStream::connect(addr).expect("connect");
    stream.set_nodelay(true).expect("nodelay");
    let (pipe_out, pipe_in) = pipe().expect("pipe");
    let _ = fcntl_setpipe_size(&pipe_in, 1 << 20);
    let machine_before = machine_busy();
    let cpu_before = thread_cpu();
    let start = Instant::now();
    let mut objects = 0u64;
    while start.elapsed() < Duration::from_secs_f64(seconds) {
        match way {
            Way::Write => stream.write_all(body).expect("write"),
            Way::Sendfile => {
                let mut offset = 0u64;
                while (offset as usize) < body.len() {
                    let left = body.len() - offset as usize;
                    rustix::fs::sendfile(&stream, memfd, Some(&mut offset), left)
                        .expect("sendfile");
                }
            }
            Way::Splice => {
                let mut offset = 0u64;
                while (offset as usize) < body.len() {
                    let left = body.len() - offset as usize;
                    let n = splice(
                        memfd,
                        Some(&mut offset),
                        &pipe_in,
                        None,
                        left,
                        SpliceFlags::empty(),
                    )
                    .expect("splice in");
                    let mut out = 0;
                    while out < n {
                        out += splice(
                            &pipe_out,
                            None,
                            stream.as_fd(),
                            None,
                            n - out,
                            SpliceFlags::empty(),
                        )
                        .expect("splice out");
                    }
                }
            }
        }
        objects += 1;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cpu = thread_cpu() - cpu_before;
    let machine = machine_busy() - machine_before;
    drop(stream);
    let received = receiver.join().expect("receiver");
    assert_eq!(received, objects * body.len() as u64, "bytes lost");
    (
        objects as f64 / elapsed,
        cpu * 1e6 / objects as f64,
        machine * 1e6 / objects as f64,
    )
}

/// This thread's user+system CPU seconds.
fn thread_cpu() -> f64 {
    let t = rustix::time::clock_gettime(rustix::time::ClockId::ThreadCPUTime);
    t.tv_sec as f64 + t.tv_nsec as f64 / 1e9
}

/// Busy CPU seconds of the whole machine, from /proc/stat (all columns but idle and iowait).
fn machine_busy() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").expect("/proc/stat");
    let line = stat.lines().next().expect("cpu line");
    let ticks: Vec<f64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|v| v.parse().ok())
        .collect();
    let busy: f64 = ticks
        .iter()
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    busy / 100.0
}

fn options() -> (Vec<usize>, f64, usize) {
    let mut sizes = vec![64 << 10, 1 << 20, 16 << 20];
    let (mut seconds, mut runs) = (2.0, 3);
    let mut args = std::env::args().skip(1);
    while let Some(arg) = args.next() {
        let mut value = || args.next().expect("a value after the option");
        match arg.as_str() {
            "--sizes" => sizes = value().split(',').map(parse_size).collect(),
            "--seconds" => seconds = value().parse().expect("seconds"),
            "--runs" => runs = value().parse().expect("runs"),
            "--bench" => {}
            other => panic!("unknown option {other}"),
        }
    }
    (sizes, seconds, runs)
}

fn parse_size(text: &str) -> usize {
    let (number, unit) = text.split_at(text.trim_end_matches(['K', 'M']).len());
    let n: usize = number.parse().expect("a size such as 64K or 1M");
    n * match unit {
        "K" => 1 << 10,
        "M" => 1 << 20,
        _ => 1,
    }
}

fn human(size: usize) -> String {
    match size {
        s if s >= 1 << 20 => format!("{} MiB", s >> 20),
        s => format!("{} KiB", s >> 10),
    }
}
