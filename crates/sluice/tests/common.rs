//! Shared by the integration tests: the binary's path and config builders.
#![allow(dead_code)] // each test file uses a different subset

use std::path::Path;

use sluice_testkit::{Origin, Proxy};

pub fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_sluice"))
}

/// A forward proxy on an ephemeral port, one worker, CONNECT allowed to `connect_ports`, plus
/// `extra` TOML (whole tables, e.g. "[timeouts]\nupstream_first_byte = \"300ms\"").
pub fn forward_config(connect_ports: &[u16], extra: &str) -> String {
    let ports: Vec<String> = connect_ports.iter().map(u16::to_string).collect();
    format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
         [access]\nallow = [\"127.0.0.0/8\"]\nconnect_ports = [{}]\n{extra}\n",
        if ports.is_empty() {
            String::from("443")
        } else {
            ports.join(", ")
        }
    )
}

pub fn forward_proxy() -> Proxy {
    Proxy::start(binary(), &forward_config(&[], ""))
}

/// A reverse proxy in front of `origins`, round robin.
pub fn reverse_proxy(origins: &[&Origin], extra: &str) -> Proxy {
    let upstreams: Vec<String> = origins
        .iter()
        .map(|o| format!("\"{}\"", o.addr()))
        .collect();
    let config = format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
         upstreams = [{}]\n{extra}\n",
        upstreams.join(", ")
    );
    Proxy::start(binary(), &config)
}

/// Returns early from a test, saying so, when curl is missing.
#[macro_export]
macro_rules! require_curl {
    () => {
        if !sluice_testkit::curl_available() {
            eprintln!("skipped: needs curl");
            return;
        }
    };
}

/// Transfers and bytes `mechanism` moved, summed over the workers' `engine counters: copy
/// 3/1200B splice 10/52428800B sockmap 0/0B fallbacks: no-pipe=2` lines logged at shutdown.
pub fn engine_counters(logs: &str, mechanism: &str) -> (u64, u64) {
    let mut total = (0, 0);
    for counters in logs
        .lines()
        .filter_map(|l| l.split("engine counters: ").nth(1))
    {
        let words: Vec<&str> = counters.split_whitespace().collect();
        let at = words
            .iter()
            .position(|w| *w == mechanism)
            .unwrap_or_else(|| panic!("no {mechanism} in {counters}"));
        let (transfers, bytes) = words[at + 1]
            .trim_end_matches('B')
            .split_once('/')
            .expect("transfers/bytes");
        total.0 += transfers.parse::<u64>().expect("a count");
        total.1 += bytes.parse::<u64>().expect("a count");
    }
    total
}

/// How many times `reason` made a transfer fall back, summed over the shutdown counters.
pub fn fallbacks(logs: &str, reason: &str) -> u64 {
    logs.lines()
        .filter_map(|l| l.split("engine counters: ").nth(1))
        .flat_map(str::split_whitespace)
        .filter_map(|w| w.strip_prefix(reason)?.strip_prefix('='))
        .map(|n| n.parse::<u64>().expect("a count"))
        .sum()
}
