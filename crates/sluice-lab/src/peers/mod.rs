//! `sluice-lab peers`: the same load matrix against no proxy, sluice with each engine, HAProxy
//! with and without splicing, nginx and Squid, in one session, printed as one markdown table
//! with every figure also as a ratio to HAProxy's.
//!
//! The origin runs in-process on one thread; each peer runs as a child process with one
//! worker, is started once per repetition, loaded with every cell (size × connection mode), and
//! stopped. Direct runs give the reference machine CPU per request, from which each peer's
//! overhead is computed (see [`crate::cpu`]).

pub mod config;
mod process;

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use serde::Serialize;

use crate::cpu::ProxyProcesses;
use crate::dist::{format_bytes, SizeDist};
use crate::load::report::{Provenance, RunReport, Summary};
use crate::load::{self, ConnectionMode, Endpoint, LoadConfig, Pattern, Via};
use crate::origin::{Origin, OriginConfig};
pub use config::{Peer, ALL, BASELINE};
use process::{apt_install, find_program, free_port, PeerProcess};

/// What `peers` runs.
#[derive(Debug, Clone)]
pub struct PeersConfig {
    /// Peers, in table order.
    pub peers: Vec<Peer>,
    /// Body sizes.
    pub sizes: Vec<u64>,
    /// Connection modes.
    pub connections: Vec<ConnectionMode>,
    /// Closed-loop clients per cell.
    pub clients: usize,
    /// Measured time per cell.
    pub duration: Duration,
    /// Warm-up per cell.
    pub warmup: Duration,
    /// Request cap per cell.
    pub max_requests: u64,
    /// Repetitions of the whole matrix.
    pub runs: usize,
    /// Load-generator threads.
    pub threads: usize,
    /// Check every body byte.
    pub verify: bool,
    /// The sluice binary; `None` skips the sluice peers, saying so.
    pub sluice: Option<PathBuf>,
    /// Whether missing peers may be installed with apt-get.
    pub install: bool,
}

/// One row of the table: a peer in one cell, over all repetitions.
#[derive(Debug, Clone, Serialize)]
pub struct Cell {
    /// Body size in bytes.
    pub size: u64,
    /// Connection mode.
    pub connection: ConnectionMode,
    /// The peer.
    pub peer: Peer,
    /// Why the peer did not run, if it did not.
    pub not_run: Option<String>,
    /// Every repetition's report.
    pub runs: Vec<RunReport>,
    /// Means and intervals over the repetitions.
    pub summary: Option<Summary>,
    /// Mean machine CPU per request minus the direct run's, µs.
    pub overhead_us: Option<f64>,
}

/// The whole session, as JSON.
#[derive(Debug, Clone, Serialize)]
pub struct PeersReport {
    /// Machine, date, command.
    pub provenance: Provenance,
    /// Each peer program's own version line (`haproxy -v`, `nginx -v`, ...).
    pub versions: BTreeMap<String, String>,
    /// Every row.
    pub cells: Vec<Cell>,
}

type Key = (u64, ConnectionMode, Peer);

/// Runs the matrix.
pub fn run_peers(config: &PeersConfig) -> anyhow::Result<PeersReport> {
    anyhow::ensure!(config.runs > 0, "--runs must be at least 1");
    let programs = find_or_install(config)?;
    let origin = Origin::start(OriginConfig {
        threads: 1,
        ..OriginConfig::default()
    })?;
    let dir = std::env::temp_dir().join(format!("sluice-lab-peers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    // Squid and nginx workers drop root; they must be able to write their logs here.
    let _ = std::process::Command::new("chmod")
        .arg("777")
        .arg(&dir)
        .status();

    let mut results: BTreeMap<String, (Option<String>, Vec<RunReport>)> = BTreeMap::new();
    let key_name = |k: &Key| format!("{}|{:?}|{}", k.0, k.1, k.2);
    for repetition in 1..=config.runs {
        for &peer in &config.peers {
            let started = match &programs[&peer] {
                Err(why) => Err(why.clone()),
                Ok(program) => start_peer(peer, program, config, origin.local_addr(), &dir)
                    .map_err(|e| format!("{e:#}")),
            };
            let running = match started {
                Ok(running) => running,
                Err(why) => {
                    println!("peers: {peer} not run: {why}");
                    for key in keys(config, peer) {
                        results.entry(key_name(&key)).or_default().0 = Some(why.clone());
                    }
                    continue;
                }
            };
            for key in keys(config, peer) {
                let (size, connection, _) = key;
                println!(
                    "peers: run {repetition}/{}: {peer}, {}, {}",
                    config.runs,
                    format_bytes(size),
                    connection_name(connection)
                );
                let load = cell_load(config, &origin, running.as_ref(), peer, size, connection);
                let report = load::run(&load)?;
                results.entry(key_name(&key)).or_default().1.push(report);
            }
            if let Some(running) = running {
                running.stop();
            }
        }
    }
    origin.stop();
    let _ = std::fs::remove_dir_all(&dir);

    let mut cells = Vec::new();
    for &peer in &config.peers {
        for key in keys(config, peer) {
            let (not_run, runs) = results.remove(&key_name(&key)).unwrap_or_default();
            let summary = Summary::of(&runs.iter().collect::<Vec<_>>());
            cells.push(Cell {
                size: key.0,
                connection: key.1,
                peer,
                not_run,
                runs,
                summary,
                overhead_us: None,
            });
        }
    }
    fill_overheads(&mut cells);
    let versions = programs
        .iter()
        .filter_map(|(peer, program)| {
            let program = program.as_ref().ok()?;
            Some((
                peer.program_name().to_owned(),
                version_line(program, *peer)?,
            ))
        })
        .collect();
    Ok(PeersReport {
        provenance: Provenance::collect(),
        versions,
        cells,
    })
}

/// The first line a program prints about its version, from stdout or stderr.
fn version_line(program: &Path, peer: Peer) -> Option<String> {
    let flag = match peer {
        Peer::Direct => return None,
        Peer::Sluice(_) => "--version",
        _ => "-v",
    };
    let out = std::process::Command::new(program)
        .arg(flag)
        .output()
        .ok()?;
    let text = if out.stdout.is_empty() {
        &out.stderr
    } else {
        &out.stdout
    };
    String::from_utf8_lossy(text)
        .lines()
        .next()
        .map(|l| l.trim().to_owned())
}

fn keys(config: &PeersConfig, peer: Peer) -> Vec<Key> {
    let mut keys = Vec::new();
    for &connection in &config.connections {
        for &size in &config.sizes {
            keys.push((size, connection, peer));
        }
    }
    keys
}

/// The program for each peer, or why it cannot run.
fn find_or_install(
    config: &PeersConfig,
) -> anyhow::Result<BTreeMap<Peer, Result<PathBuf, String>>> {
    let mut missing: Vec<&str> = config
        .peers
        .iter()
        .filter_map(|p| p.package())
        .filter(|pkg| find_program(pkg).is_none())
        .collect();
    missing.sort_unstable();
    missing.dedup();
    let mut install_error = None;
    if !missing.is_empty() {
        if config.install {
            if let Err(e) = apt_install(&missing) {
                install_error = Some(format!("{e:#}"));
            }
        } else {
            install_error = Some("not installed (and --no-install given)".to_owned());
        }
    }
    let mut programs = BTreeMap::new();
    for &peer in &config.peers {
        let program = match peer {
            Peer::Direct => Ok(PathBuf::new()),
            Peer::Sluice(_) => config.sluice.clone().ok_or_else(|| {
                "sluice binary not found: build it (cargo build --release -p sluice) or pass \
                 --sluice PATH"
                    .to_owned()
            }),
            _ => find_program(peer.program_name()).ok_or_else(|| {
                install_error
                    .clone()
                    .unwrap_or_else(|| format!("{} not found", peer.program_name()))
            }),
        };
        programs.insert(peer, program);
    }
    Ok(programs)
}

fn start_peer(
    peer: Peer,
    program: &Path,
    config: &PeersConfig,
    origin: std::net::SocketAddr,
    dir: &Path,
) -> anyhow::Result<Option<PeerProcess>> {
    if peer == Peer::Direct {
        return Ok(None);
    }
    let listen = free_port()?;
    let config_path = dir.join(format!("{peer}.conf"));
    std::fs::write(&config_path, peer.config(listen, origin, dir))?;
    let sluice = config.sluice.clone().unwrap_or_default();
    let (program, args) = peer.command(&config_path, dir, &sluice, program);
    let log = dir.join(format!("{peer}.log"));
    PeerProcess::start(&program, &args, listen, log).map(Some)
}

fn cell_load(
    config: &PeersConfig,
    origin: &Origin,
    running: Option<&PeerProcess>,
    peer: Peer,
    size: u64,
    connection: ConnectionMode,
) -> LoadConfig {
    let via = match running {
        None => Via::Direct,
        Some(p) if peer.is_forward() => Via::Forward(p.addr),
        Some(p) => Via::Reverse(p.addr),
    };
    LoadConfig {
        endpoint: Endpoint {
            origin: origin.local_addr(),
            via,
        },
        pattern: Pattern::Closed {
            clients: config.clients,
            mix: "uncacheable=1".parse().expect("constant mix parses"),
            sizes: SizeDist::Fixed(size),
            connection,
        },
        duration: config.duration,
        warmup: config.warmup,
        max_requests: config.max_requests,
        threads: config.threads,
        timeout: Duration::from_secs(30),
        verify: config.verify,
        proxy: ProxyProcesses {
            pids: running.map(|p| vec![p.pid()]).unwrap_or_default(),
            name: None,
        },
        progress: false,
    }
}

fn fill_overheads(cells: &mut [Cell]) {
    let direct: BTreeMap<(u64, ConnectionMode), f64> = cells
        .iter()
        .filter(|c| c.peer == Peer::Direct)
        .filter_map(|c| {
            Some((
                (c.size, c.connection),
                c.summary.as_ref()?.machine_us_per_req.mean,
            ))
        })
        .collect();
    for cell in cells.iter_mut().filter(|c| c.peer != Peer::Direct) {
        let base = direct.get(&(cell.size, cell.connection));
        cell.overhead_us = cell
            .summary
            .as_ref()
            .zip(base)
            .map(|(s, base)| s.machine_us_per_req.mean - base);
    }
}

impl PeersReport {
    /// The markdown table, with a header naming date, machine, command and baseline.
    pub fn markdown(&self) -> String {
        let mut out = String::new();
        let p = &self.provenance;
        let _ = writeln!(out, "Session: {}.", p.line());
        let _ = writeln!(out, "Command: `{}`\n", p.command);
        if !self.versions.is_empty() {
            let versions: Vec<&str> = self.versions.values().map(String::as_str).collect();
            let _ = writeln!(out, "Peers: {}.\n", versions.join("; "));
        }
        let _ = writeln!(
            out,
            "Ratios (×) are to `{BASELINE}` in the same session, per cell. Overhead: machine \
             CPU µs per request minus the direct run's (kernel work included); proxy CPU: the \
             proxy's own processes only. Means over {} run(s).\n",
            self.cells.iter().map(|c| c.runs.len()).max().unwrap_or(0)
        );
        out.push_str(
            "| size | connection | peer | req/s | p50 ms | p99 ms | overhead µs/req | proxy CPU µs/req | errors |\n\
             |---:|---|---|---:|---:|---:|---:|---:|---:|\n",
        );
        let baseline: BTreeMap<(u64, ConnectionMode), &Cell> = self
            .cells
            .iter()
            .filter(|c| c.peer == BASELINE)
            .map(|c| ((c.size, c.connection), c))
            .collect();
        let mut rows: Vec<&Cell> = self.cells.iter().filter(|c| c.summary.is_some()).collect();
        rows.sort_by_key(|c| (c.connection as u8, c.size));
        for cell in rows {
            let base = baseline.get(&(cell.size, cell.connection)).copied();
            out.push_str(&row(cell, base));
        }
        let mut not_run: Vec<(Peer, &str)> = self
            .cells
            .iter()
            .filter(|c| c.summary.is_none())
            .map(|c| (c.peer, c.not_run.as_deref().unwrap_or("no result")))
            .collect();
        not_run.dedup_by_key(|(peer, _)| *peer);
        if !not_run.is_empty() {
            out.push_str("\nNot run:\n");
            for (peer, why) in not_run {
                let _ = writeln!(out, "- `{peer}`: {why}");
            }
        }
        out
    }
}

fn connection_name(mode: ConnectionMode) -> &'static str {
    match mode {
        ConnectionMode::PerRequest => "per-request",
        ConnectionMode::KeepAlive => "keep-alive",
    }
}

fn with_ratio(value: Option<f64>, base: Option<f64>, decimals: usize) -> String {
    match (value, base) {
        (None, _) => "-".to_owned(),
        (Some(v), Some(b)) if b > 0.0 && v >= 0.0 => format!("{v:.decimals$} ({:.2}×)", v / b),
        (Some(v), _) => format!("{v:.decimals$}"),
    }
}

fn row(cell: &Cell, base: Option<&Cell>) -> String {
    let connection = connection_name(cell.connection);
    let head = format!(
        "| {} | {connection} | {} |",
        format_bytes(cell.size),
        cell.peer
    );
    let Some(s) = &cell.summary else {
        return String::new();
    };
    let b = base.and_then(|c| c.summary.as_ref());
    let ms = |us: f64| us / 1000.0;
    let overhead = if cell.peer == Peer::Direct {
        None
    } else {
        cell.overhead_us
    };
    let base_overhead = base.and_then(|c| c.overhead_us);
    format!(
        "{head} {} | {} | {} | {} | {} | {} |\n",
        with_ratio(Some(s.req_per_s.mean), b.map(|b| b.req_per_s.mean), 0),
        with_ratio(Some(ms(s.p50_us.mean)), b.map(|b| ms(b.p50_us.mean)), 3),
        with_ratio(Some(ms(s.p99_us.mean)), b.map(|b| ms(b.p99_us.mean)), 3),
        if cell.peer == Peer::Direct {
            "—".to_owned()
        } else {
            with_ratio(overhead, base_overhead, 1)
        },
        with_ratio(
            s.proxy_us_per_req.map(|p| p.mean),
            b.and_then(|b| b.proxy_us_per_req.map(|p| p.mean)),
            1
        ),
        s.errors,
    )
}
