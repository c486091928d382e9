//! Command line: one subcommand per part of the lab. Doc comments are the `--help` text.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::cpu::ProxyProcesses;
use crate::dist::{parse_bytes, CountDist, DelayDist, SizeDist};
use crate::load::series::run_series;
use crate::load::workload::Mix;
use crate::load::{ConnectionMode, Endpoint, LoadConfig, Pattern, Via};
use crate::origin::{Origin, OriginConfig};
use crate::peers::{run_peers, Peer, PeersConfig};
use crate::target::test_bed_address;

/// Sluice's test bed: an origin emulator, load generators with CPU accounting, and a
/// comparison against other proxies. Loopback only; every load run is bounded.
/// See docs/TESTBED.md for worked examples and the meaning of every output column.
#[derive(Debug, Parser)]
#[command(name = "sluice-lab", version)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// HTTP/1.x origin emulator: bodies sized by the request, deterministic bytes.
    Origin(OriginArgs),
    /// Bounded load run (closed or open loop), direct or through a proxy, with CPU accounting.
    Load(Box<LoadArgs>),
    /// The yardstick: one matrix against no proxy, sluice, HAProxy, nginx and Squid.
    Peers(PeersArgs),
    /// Client, proxy and server hosts in network namespaces joined by an emulated WAN (root).
    Net(sluice_wan::NetArgs),
    /// The WAN emulator process of a test bed (`net up` starts it).
    Wire(sluice_wan::WireArgs),
}

/// Requests name their body: `/size/65536` (or `X-Size: 65536`), plus query controls
/// `cache=SECONDS|no-store`, `frame=length|chunked|close`, `think=DELAY`. A connection that
/// starts with an emulated SSL hello (byte 0x16) gets the WWW 2002 handshake first.
#[derive(Debug, Args)]
struct OriginArgs {
    /// Address to listen on (loopback only); port 0 picks one, printed as `listening ADDR`.
    #[arg(long, default_value = "127.0.0.1:8080")]
    listen: String,
    /// Threads, each with its own event loop and SO_REUSEPORT socket. Default: one per CPU.
    #[arg(long)]
    threads: Option<usize>,
    /// Think time before each response: `0s`, `10ms`, `normal:2.5s,1s` (PolyMix-4).
    #[arg(long, default_value = "0s")]
    think: DelayDist,
    /// Requests per connection before the origin closes it: `none`, `N`, `zipf:16` (PolyMix-4).
    #[arg(long, default_value = "none")]
    conn_cap: CountDist,
    /// Largest body served; larger requests get 413.
    #[arg(long, default_value = "1GiB", value_parser = parse_bytes)]
    max_size: u64,
    /// Stop after this long and print totals (default: run until killed).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

/// Closed loop (the papers' s-client): `--clients` each send a request, wait for the whole
/// response, and send the next at once. Open loop (PolyMix-like): `--robots` each request at
/// `--rate` whatever the responses do, on persistent connections with the PolyMix-4 content
/// mix. Every run stops at `--duration` or `--max-requests`, whichever comes first.
#[derive(Debug, Args)]
struct LoadArgs {
    /// The origin (`sluice-lab origin`), loopback only.
    #[arg(long, default_value = "127.0.0.1:8080")]
    target: String,
    /// The proxy to go through; without it requests go straight to the origin.
    #[arg(long)]
    proxy: Option<String>,
    /// How to address the proxy: forward (absolute URIs, CONNECT) or reverse (origin-form).
    #[arg(long, value_enum, default_value = "forward")]
    mode: ProxyMode,
    /// Closed loop (s-client) or open loop (robots).
    #[arg(long = "loop", value_enum, default_value = "closed")]
    loop_kind: LoopKind,
    /// Closed loop: emulated clients, each with one request outstanding.
    #[arg(long, default_value_t = 20)]
    clients: usize,
    /// Closed loop: request types by weight, `cacheable=W,uncacheable=W,ssl=W`; 60% of ssl
    /// handshakes are abbreviated.
    #[arg(long, default_value = "uncacheable=1")]
    mix: Mix,
    /// Closed loop: body size, fixed (`64KiB`) or drawn (`exp:8KiB`, `lognormal:25KiB,10KiB`).
    #[arg(long, default_value = "8KiB")]
    size: SizeDist,
    /// Closed loop: a new connection per request, or one kept alive per client.
    #[arg(long, value_enum, default_value = "per-request")]
    connection: ConnectionMode,
    /// Open loop: robots.
    #[arg(long, default_value_t = 100)]
    robots: usize,
    /// Open loop: requests per second per robot (PolyMix-4: 0.4).
    #[arg(long, default_value_t = 0.4)]
    rate: f64,
    /// Open loop: requests per persistent connection (PolyMix-4: zipf:64).
    #[arg(long, default_value = "zipf:64")]
    conn_requests: CountDist,
    /// Open loop: share of requests revisiting an earlier cacheable URL (PolyMix-4: 0.58).
    #[arg(long, default_value_t = 0.58)]
    hit_ratio: f64,
    /// Measured time per run.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Time before measuring starts (its requests are not counted).
    #[arg(long, default_value = "0s", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Most requests sent per run, warm-up included.
    #[arg(long, default_value_t = 1_000_000)]
    max_requests: u64,
    /// Longest one exchange may take before it counts as a timeout.
    #[arg(long, default_value = "30s", value_parser = humantime::parse_duration)]
    timeout: Duration,
    /// Load-generator threads. Default: 1 (leave the other CPUs to proxy and origin).
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Check every body byte against the origin's pattern (costs lab CPU).
    #[arg(long)]
    verify: bool,
    /// Repeat the run this many times and report mean ± 90% confidence interval.
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Before each proxied run, run the same load direct; report the proxy's overhead.
    #[arg(long)]
    compare_direct: bool,
    /// A pid of the proxy, for per-process CPU (repeatable).
    #[arg(long = "proxy-pid")]
    proxy_pids: Vec<u32>,
    /// Every process with this name is the proxy, for per-process CPU (e.g. haproxy).
    #[arg(long)]
    proxy_process: Option<String>,
    /// Write the JSON report here (`-` for stdout, which then gets no table).
    #[arg(long)]
    json: Option<String>,
    /// No progress line.
    #[arg(long)]
    quiet: bool,
}

/// Runs the closed loop (uncacheable GETs, fixed sizes) for every size and connection mode
/// against each peer with one worker, in one session, and prints one markdown table with each
/// figure also as a ratio to HAProxy's. HAProxy, nginx and Squid come from Debian packages:
/// missing ones are installed with apt-get (it says so) unless --no-install.
#[derive(Debug, Args)]
struct PeersArgs {
    /// Peers, in table order.
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "direct,sluice-copy,sluice-splice,sluice-sockmap,sluice-auto,haproxy,haproxy-splice,nginx,squid"
    )]
    peers: Vec<Peer>,
    /// Body sizes.
    #[arg(long, value_delimiter = ',', value_parser = parse_bytes, default_value = "1KiB,8KiB,64KiB,128KiB,1MiB,16MiB")]
    sizes: Vec<u64>,
    /// Connection modes.
    #[arg(
        long,
        value_delimiter = ',',
        value_enum,
        default_value = "per-request,keep-alive"
    )]
    connections: Vec<ConnectionMode>,
    /// Closed-loop clients per cell.
    #[arg(long, default_value_t = 10)]
    clients: usize,
    /// Measured time per cell.
    #[arg(long, default_value = "3s", value_parser = humantime::parse_duration)]
    duration: Duration,
    /// Warm-up per cell, not measured.
    #[arg(long, default_value = "500ms", value_parser = humantime::parse_duration)]
    warmup: Duration,
    /// Request cap per cell, warm-up included.
    #[arg(long, default_value_t = 1_000_000)]
    max_requests: u64,
    /// Repetitions of the whole matrix (for 90% intervals in the JSON).
    #[arg(long, default_value_t = 1)]
    runs: usize,
    /// Load-generator threads.
    #[arg(long, default_value_t = 1)]
    threads: usize,
    /// Check every body byte (costs lab CPU, which counts in the machine figures).
    #[arg(long)]
    verify: bool,
    /// The sluice binary. Default: SLUICE_BIN, else `sluice` beside this binary, else PATH.
    #[arg(long)]
    sluice: Option<std::path::PathBuf>,
    /// Do not install missing peers; their rows say "not run".
    #[arg(long)]
    no_install: bool,
    /// Write the JSON report (every run of every cell) here.
    #[arg(long)]
    json: Option<String>,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum ProxyMode {
    Forward,
    Reverse,
}

#[derive(Debug, Clone, Copy, clap::ValueEnum)]
enum LoopKind {
    Closed,
    Open,
}

/// Parses the command line and runs it; errors print as one chain and exit 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Origin(args) => run_origin(args),
        Command::Load(args) => run_load(*args),
        Command::Peers(args) => run_peers_command(args),
        Command::Net(args) => sluice_wan::run_net(args).map_err(anyhow::Error::from),
        Command::Wire(args) => sluice_wan::run_wire(args).map_err(anyhow::Error::from),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("sluice-lab: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// CPUs available to this process, for thread defaults.
pub fn cpu_count() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}

fn run_origin(args: OriginArgs) -> anyhow::Result<()> {
    let config = OriginConfig {
        listen: test_bed_address(&args.listen, "--listen")?,
        threads: args.threads.unwrap_or_else(cpu_count),
        think: args.think,
        conn_cap: args.conn_cap,
        max_size: args.max_size,
    };
    let origin = Origin::start(config)?;
    println!("listening {}", origin.local_addr());
    std::io::stdout().flush()?;
    match args.duration {
        Some(duration) => {
            std::thread::sleep(duration);
            let totals = origin.stop();
            println!("{}", serde_json::to_string(&totals)?);
        }
        None => loop {
            std::thread::park();
        },
    }
    Ok(())
}

fn run_load(args: LoadArgs) -> anyhow::Result<()> {
    let origin = test_bed_address(&args.target, "--target")?;
    let via = match (&args.proxy, args.mode) {
        (None, _) => Via::Direct,
        (Some(proxy), ProxyMode::Forward) => Via::Forward(test_bed_address(proxy, "--proxy")?),
        (Some(proxy), ProxyMode::Reverse) => Via::Reverse(test_bed_address(proxy, "--proxy")?),
    };
    let pattern = match args.loop_kind {
        LoopKind::Closed => Pattern::Closed {
            clients: args.clients,
            mix: args.mix,
            sizes: args.size,
            connection: args.connection,
        },
        LoopKind::Open => Pattern::Open {
            robots: args.robots,
            rate: args.rate,
            conn_requests: args.conn_requests,
            hit_ratio: args.hit_ratio,
        },
    };
    let config = LoadConfig {
        endpoint: Endpoint { origin, via },
        pattern,
        duration: args.duration,
        warmup: args.warmup,
        max_requests: args.max_requests,
        threads: args.threads,
        timeout: args.timeout,
        verify: args.verify,
        proxy: ProxyProcesses {
            pids: args.proxy_pids,
            name: args.proxy_process,
        },
        progress: !args.quiet,
    };
    let series = run_series(&config, args.runs, args.compare_direct)?;
    let json = serde_json::to_string_pretty(&series)?;
    match args.json.as_deref() {
        Some("-") => println!("{json}"),
        Some(path) => {
            std::fs::write(path, json + "\n")
                .map_err(|e| anyhow::anyhow!("cannot write {path}: {e}"))?;
            print!("{}", series.human());
        }
        None => print!("{}", series.human()),
    }
    if series.had_errors() {
        anyhow::bail!("some requests failed: see the errors column");
    }
    Ok(())
}

/// The sluice binary: `SLUICE_BIN`, else `sluice` beside this binary, else on PATH.
pub fn find_sluice() -> Option<std::path::PathBuf> {
    if let Some(path) = std::env::var_os("SLUICE_BIN") {
        return Some(path.into());
    }
    let beside = std::env::current_exe().ok()?.with_file_name("sluice");
    if beside.is_file() {
        return Some(beside);
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("sluice"))
        .find(|p| p.is_file())
}

fn run_peers_command(args: PeersArgs) -> anyhow::Result<()> {
    let config = PeersConfig {
        peers: args.peers,
        sizes: args.sizes,
        connections: args.connections,
        clients: args.clients,
        duration: args.duration,
        warmup: args.warmup,
        max_requests: args.max_requests,
        runs: args.runs,
        threads: args.threads,
        verify: args.verify,
        sluice: args.sluice.or_else(find_sluice),
        install: !args.no_install,
    };
    let report = run_peers(&config)?;
    if let Some(path) = &args.json {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        std::fs::write(path, json).map_err(|e| anyhow::anyhow!("cannot write {path}: {e}"))?;
    }
    println!();
    print!("{}", report.markdown());
    Ok(())
}
