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
