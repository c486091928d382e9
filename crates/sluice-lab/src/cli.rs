//! Command line: one subcommand per part of the lab. Doc comments are the `--help` text.

use std::io::Write;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};

use crate::dist::{parse_bytes, CountDist, DelayDist};
use crate::origin::{Origin, OriginConfig};
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

/// Parses the command line and runs it; errors print as one chain and exit 1.
pub fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Origin(args) => run_origin(args),
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
