//! `sluice`: the proxy binary. Parses the command line, loads the config, installs logging and
//! signal handling, and runs a `sluice_proxy::Server` until SIGINT or SIGTERM.

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};
use signal_hook::consts::{SIGINT, SIGTERM};
use signal_hook::iterator::Signals;
use sluice_config::Config;
use sluice_proxy::Server;
use sluice_rt::Backend;

/// The embedded default: a forward proxy on 127.0.0.1:3128 for loopback clients only.
const DEFAULT_CONFIG: &str = include_str!("../default.toml");

/// Sluice: an HTTP/1.1 forward and reverse proxy that moves bodies in the kernel.
#[derive(Debug, Parser)]
#[command(version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("SLUICE_COMMIT"), ")"), about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the proxy until SIGINT or SIGTERM (then finish requests in flight, up to 5 s).
    Run {
        /// Config file (TOML, see docs/CONFIG.md). Without it: the embedded default, a forward
        /// proxy on 127.0.0.1:3128 that accepts loopback clients and CONNECT to port 443 only.
        #[arg(long, short)]
        config: Option<PathBuf>,
        /// Readiness mechanism of the worker event loops.
        #[arg(long, default_value = "epoll", value_parser = ["epoll"])]
        backend: String,
    },
    /// Validate a config file and print the effective config (every default filled in).
    /// Exits non-zero if the file is invalid, or with --strict if it has warnings.
    Check {
        /// Config file to check.
        file: PathBuf,
        /// Treat warnings (an open proxy, more workers than cores) as errors.
        #[arg(long)]
        strict: bool,
    },
    /// Print the embedded default config.
    DefaultConfig,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Run { config, backend } => run(config, &backend),
        Command::Check { file, strict } => check(&file, strict),
        Command::DefaultConfig => {
            print!("{DEFAULT_CONFIG}");
            Ok(())
        }
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(error) => {
            eprintln!("sluice: {error:#}");
            ExitCode::FAILURE
        }
    }
}

fn load(path: Option<&PathBuf>) -> anyhow::Result<Config> {
    Ok(match path {
        Some(path) => Config::load(path)?,
        None => Config::from_toml_str(DEFAULT_CONFIG, "(embedded default)")?,
    })
}

fn check(file: &PathBuf, strict: bool) -> anyhow::Result<()> {
    let config = load(Some(file))?;
    let warnings = config.warnings();
    for warning in &warnings {
        eprintln!("warning: {warning}");
    }
    print!("{}", config.to_toml_string());
    if strict && !warnings.is_empty() {
        anyhow::bail!("{} warning(s) and --strict", warnings.len());
    }
    eprintln!("{}: ok", file.display());
    Ok(())
}

fn run(config_path: Option<PathBuf>, backend: &str) -> anyhow::Result<()> {
    let config = load(config_path.as_ref())?;
    let backend: Backend = backend.parse().map_err(anyhow::Error::msg)?;
    install_logging(&config.log.level);
    for warning in config.warnings() {
        tracing::warn!("config: {warning}");
    }
    let workers = config.workers;
    let modes: Vec<String> = config
        .listeners
        .iter()
        .map(|l| format!("{}", l.mode))
        .collect();
    let server = Server::start(config, backend)?;
    for (addr, mode) in server.local_addrs().iter().zip(&modes) {
        tracing::info!(%addr, mode = %mode, workers, backend = %backend, "listening");
        // A plain line on stdout, once per listener, for scripts and tests to wait on.
        println!("listening {addr}");
    }
    let mut signals = Signals::new([SIGINT, SIGTERM]).context("cannot install signal handlers")?;
    let handles = server.shutdown_handles();
    std::thread::Builder::new()
        .name(String::from("sluice-signals"))
        .spawn(move || {
            if let Some(signal) = signals.forever().next() {
                tracing::info!(
                    signal,
                    "shutting down: no new connections, finishing requests"
                );
                handles.iter().for_each(|h| h.shutdown());
            }
        })
        .context("cannot start the signal thread")?;
    let report = server.wait();
    tracing::info!(
        connections = report.connections,
        exchanges = report.exchanges,
        transfers = report.transfers,
        engine_bytes = report.engine_bytes,
        "stopped"
    );
    Ok(())
}

fn install_logging(level: &str) {
    // RUST_LOG, when set, overrides log.level (e.g. RUST_LOG=sluice::access=off).
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(level));
    let colours = std::io::IsTerminal::is_terminal(&std::io::stderr());
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(colours)
        .init();
}
