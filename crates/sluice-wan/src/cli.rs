//! Command line: `net up|down|status|exec|stats` and `wire`, as clap `Args` that `sluice-lab`
//! (and this crate's own `sluice-wan` binary) mount as subcommands. Doc comments are the help.

use std::collections::BTreeMap;
use std::io::Write;
use std::time::Duration;

use clap::{Args, Subcommand};

use crate::error::WanError;
use crate::profile::{Profile, BUILT_IN};
use crate::sys::signal::SignalFd;
use crate::tcpstats::{self, TcpCounters};
use crate::topology::{self, Layout, TestBed};
use crate::wire::{Control, Wire};

/// Client, proxy and server hosts in network namespaces, joined by emulated WAN links.
/// Needs root. See docs/TESTBED.md, "WAN emulation".
#[derive(Debug, Args)]
pub struct NetArgs {
    #[command(subcommand)]
    command: NetCommand,
}

#[derive(Debug, Subcommand)]
enum NetCommand {
    /// Create the hosts and start the wire; prints the addresses.
    Up(UpArgs),
    /// Stop the wire and remove every namespace, device and file of the test bed (also after
    /// a crash or `kill -9` of the wire); prints the wire's last counters.
    Down(PrefixArgs),
    /// Show the hosts, whether the wire runs, and its live counters.
    Status(PrefixArgs),
    /// Run a command on a host: `net exec proxy -- sluice run --config c.toml`.
    Exec(ExecArgs),
    /// TCP counters of every host (segments, retransmissions, timeouts, ACK ratio).
    Stats(StatsArgs),
    /// List the built-in profiles.
    Profiles,
}

#[derive(Debug, Args)]
struct PrefixArgs {
    /// Name prefix of the test bed's namespaces and devices (1-8 of a-z0-9), so several beds
    /// can coexist.
    #[arg(long, default_value = "slw")]
    prefix: String,
}

#[derive(Debug, Args)]
struct UpArgs {
    #[command(flatten)]
    prefix: PrefixArgs,
    /// A built-in profile (`net profiles`) or a TOML file.
    #[arg(long, default_value = "lan")]
    profile: String,
    /// `proxy`: client - proxy - server. `direct`: client - server, both links in series.
    #[arg(long, value_enum, default_value = "proxy")]
    layout: Layout,
    /// Seed of the wire's random sources (loss and jitter, one of each per direction): with the
    /// same seed, the n-th IP frame of a direction meets the same loss decision, whatever the
    /// other directions carry.
    #[arg(long, default_value_t = 1)]
    seed: u64,
}

#[derive(Debug, Args)]
struct ExecArgs {
    #[command(flatten)]
    prefix: PrefixArgs,
    /// `client`, `proxy` or `server`.
    host: String,
    /// The command and its arguments, after `--`.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

#[derive(Debug, Args)]
struct StatsArgs {
    #[command(flatten)]
    prefix: PrefixArgs,
    /// Save the current counters to this file (JSON), to subtract later with --since.
    #[arg(long)]
    save: Option<String>,
    /// Print the change since the counters saved in this file.
    #[arg(long)]
    since: Option<String>,
    /// Print JSON instead of a table.
    #[arg(long)]
    json: bool,
}

/// The wire process of a test bed. `net up` starts it; run it by hand only to debug.
#[derive(Debug, Args)]
pub struct WireArgs {
    /// The test bed whose state file (/run/sluice-lab/PREFIX.json) says what to build.
    #[arg(long)]
    prefix: String,
    /// Exit after this long (default: until SIGTERM or SIGINT).
    #[arg(long, value_parser = humantime::parse_duration)]
    duration: Option<Duration>,
}

/// Runs a `net` subcommand.
pub fn run_net(args: NetArgs) -> Result<(), WanError> {
    match args.command {
        NetCommand::Up(up) => net_up(up),
        NetCommand::Down(down) => {
            let report = topology::down(&down.prefix)?;
            if let Some(report) = report {
                print!("{}", report.human());
            }
            println!("test bed {} is down", down.prefix);
            Ok(())
        }
        NetCommand::Status(status) => net_status(&status.prefix),
        NetCommand::Exec(exec) => net_exec(exec),
        NetCommand::Stats(stats) => net_stats(stats),
        NetCommand::Profiles => {
            for (name, text) in BUILT_IN {
                let profile = Profile::parse(text, name)?;
                println!("{name:<20} {}", profile.description);
            }
            Ok(())
        }
    }
}

fn net_up(args: UpArgs) -> Result<(), WanError> {
    let profile = Profile::load(&args.profile)?;
    let mut bed = TestBed::plan(
        &args.prefix.prefix,
        args.layout,
        &args.profile,
        profile,
        args.seed,
    )?;
    let program = std::env::current_exe()
        .map_err(|source| WanError::io("cannot find this program's path", source))?;
    topology::up(&mut bed, &program)?;
    println!(
        "test bed {} up: layout {:?}, profile {} ({}), wire pid {}",
        bed.prefix,
        bed.layout,
        bed.profile_name,
        bed.profile.description,
        bed.wire_pid.unwrap_or(0)
    );
    for host in &bed.hosts {
        println!(
            "  {:<7} netns {:<14} {}",
            host.name,
            host.netns,
            host.addresses.join(" ")
        );
    }
    Ok(())
}

fn net_status(prefix: &str) -> Result<(), WanError> {
    let bed = TestBed::load(prefix)?;
    let alive = topology::wire_alive(&bed);
    println!(
        "test bed {}: layout {:?}, profile {} ({}), seed {}",
        bed.prefix, bed.layout, bed.profile_name, bed.profile.description, bed.seed
    );
    println!(
        "  wire pid {}: {}",
        bed.wire_pid.map_or("-".to_owned(), |p| p.to_string()),
        if alive {
            "running"
        } else {
            "NOT running (links are down; run `net down`)"
        }
    );
    for host in &bed.hosts {
        let present = if crate::netns::exists(&host.netns) {
            "present"
        } else {
            "MISSING"
        };
        println!(
            "  {:<7} netns {:<14} {:<8} {}",
            host.name,
            host.netns,
            present,
            host.addresses.join(" ")
        );
    }
    if alive {
        match topology::live_counters(&bed) {
            Some(report) => print!("{}", report.human()),
            None => println!("  (the wire did not answer SIGUSR1 within 1s)"),
        }
    }
    Ok(())
}

fn net_exec(args: ExecArgs) -> Result<(), WanError> {
    use std::os::unix::process::CommandExt;
    let bed = TestBed::load(&args.prefix.prefix)?;
    let netns = bed.netns_of(&args.host)?;
    let error = std::process::Command::new("ip")
        .args(["netns", "exec", netns])
        .args(&args.command)
        .exec();
    Err(WanError::io(
        format!("cannot run `ip netns exec {netns} ...`"),
        error,
    ))
}

fn net_stats(args: StatsArgs) -> Result<(), WanError> {
    let bed = TestBed::load(&args.prefix.prefix)?;
    let mut now = BTreeMap::new();
    for host in &bed.hosts {
        now.insert(host.name.clone(), tcpstats::read(&host.netns)?);
    }
    if let Some(path) = &args.save {
        let text = serde_json::to_string_pretty(&now).expect("counters serialise");
        std::fs::write(path, text + "\n")
            .map_err(|source| WanError::io(format!("cannot write {path}"), source))?;
    }
    let shown: BTreeMap<String, TcpCounters> = match &args.since {
        None => now,
        Some(path) => {
            let text = std::fs::read_to_string(path)
                .map_err(|source| WanError::io(format!("cannot read {path}"), source))?;
            let before: BTreeMap<String, TcpCounters> =
                serde_json::from_str(&text).map_err(|source| WanError::BadState {
                    path: path.clone(),
                    source,
                })?;
            now.into_iter()
                .map(|(host, c)| {
                    let earlier = before.get(&host).cloned().unwrap_or_default();
                    (host, c.since(&earlier))
                })
                .collect()
        }
    };
    if args.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&shown).expect("counters serialise")
        );
        return Ok(());
    }
    println!(
        "{:<7} {:>10} {:>10} {:>8} {:>8} {:>10} {:>9} {:>9} {:>8}",
        "host", "segs_out", "segs_in", "retrans", "rto", "data_out", "acks_in", "data/ack", "conns"
    );
    for (host, c) in &shown {
        println!(
            "{:<7} {:>10} {:>10} {:>8} {:>8} {:>10} {:>9} {:>9.2} {:>8}",
            host,
            c.segments_out,
            c.segments_in,
            c.retransmitted,
            c.timeouts,
            c.data_segments_out,
            c.pure_acks_in,
            c.data_segments_per_ack(),
            c.connections
        );
    }
    Ok(())
}

/// Runs the wire of a test bed: creates the TAPs, moves them into the hosts, prints `ready`,
/// then forwards until SIGTERM/SIGINT (or `--duration`). SIGUSR1 writes the counters to
/// /run/sluice-lab/PREFIX.counters.json and the log; so does the exit.
pub fn run_wire(args: WireArgs) -> Result<(), WanError> {
    topology::require_root("the wire")?;
    let bed = TestBed::load(&args.prefix)?;
    let mut wire = Wire::open(&bed.links, bed.seed)
        .map_err(|source| WanError::io("cannot open the wire's TAP devices", source))?;
    for link in &bed.links {
        topology::configure_end(&link.a)?;
        topology::configure_end(&link.b)?;
    }
    // After the last `ip` command: children would inherit the blocked signals.
    let signals = SignalFd::new(&[libc::SIGUSR1, libc::SIGTERM, libc::SIGINT, libc::SIGHUP])
        .map_err(|source| WanError::io("cannot create the wire's signalfd", source))?;
    // The wire is the network: if the loads it carries (same machine, same CPUs) or neighbours
    // keep it off a CPU, every emulated delay grows by their time slice (measured: up to 35 ms
    // at nice -10 on a busy 2-vCPU VM). SCHED_FIFO preempts them at once; the kernel's RT
    // throttling (95% of each second) keeps a flooded wire from locking up the machine.
    if let Err(e) = crate::sys::sched::set_fifo(10) {
        eprintln!("wire: cannot use SCHED_FIFO ({e}); delays will include scheduling noise");
        let _ = rustix::process::setpriority_process(None, -10);
    }
    detach_stdout()?;
    eprintln!(
        "wire {}: forwarding {} link(s), profile {}, seed {}",
        bed.prefix,
        bed.links.len(),
        bed.profile_name,
        bed.seed
    );
    let counters_path = TestBed::counters_path(&bed.prefix);
    let mut publish = |report: &crate::counters::WireReport| {
        eprint!("{}", report.human());
        let text = serde_json::to_string_pretty(report).expect("reports serialise");
        let temporary = counters_path.with_extension("json.tmp");
        if std::fs::write(&temporary, text + "\n")
            .and_then(|()| std::fs::rename(&temporary, &counters_path))
            .is_err()
        {
            eprintln!("wire: cannot write {}", counters_path.display());
        }
    };
    let deadline = args.duration.map(|d| std::time::Instant::now() + d);
    wire.run(Control::Signals(&signals), deadline, &mut publish)
        .map_err(|source| WanError::io("the wire's event loop failed", source))?;
    publish(&wire.report());
    eprintln!("wire {}: stopped", bed.prefix);
    Ok(())
}

/// Tells `net up` the wire is ready, then points stdout at /dev/null: `net up` exits and
/// closes the pipe, and a later print must not fail with EPIPE.
fn detach_stdout() -> Result<(), WanError> {
    let mut stdout = std::io::stdout();
    writeln!(stdout, "ready")
        .and_then(|()| stdout.flush())
        .map_err(|source| WanError::io("cannot tell net up the wire is ready", source))?;
    let null = rustix::fs::open(
        "/dev/null",
        rustix::fs::OFlags::WRONLY,
        rustix::fs::Mode::empty(),
    )
    .map_err(|e| WanError::io("cannot open /dev/null", e.into()))?;
    rustix::stdio::dup2_stdout(&null).map_err(|e| WanError::io("cannot detach stdout", e.into()))
}
