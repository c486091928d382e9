//! `sluice-wan`: the `net` and `wire` subcommands on their own (`sluice-lab` has the same).

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// Sluice's emulated WAN: client, proxy and server namespaces joined by a user-space wire.
#[derive(Debug, Parser)]
#[command(name = "sluice-wan", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Test beds: up, down, status, exec, stats, profiles.
    Net(sluice_wan::NetArgs),
    /// The wire process of a test bed (started by `net up`).
    Wire(sluice_wan::WireArgs),
}

fn main() -> ExitCode {
    let result = match Cli::parse().command {
        Command::Net(args) => sluice_wan::run_net(args),
        Command::Wire(args) => sluice_wan::run_wire(args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let mut message = format!("sluice-wan: {e}");
            let mut source = std::error::Error::source(&e);
            while let Some(cause) = source {
                message.push_str(&format!(": {cause}"));
                source = cause.source();
            }
            eprintln!("{message}");
            ExitCode::FAILURE
        }
    }
}
