//! Sluice's test bed: an origin-server emulator, load generators and CPU accounting, so anyone
//! can reproduce our figures and measure their own proxy the way the papers did.
//!
//! The `sluice-lab` binary is a thin shell over this library; integration tests drive the same
//! code in-process. It talks to proxies only over sockets, as a client and as an origin, so it
//! measures sluice, HAProxy, nginx and Squid alike; it shares no code with the proxy's data path
//! (its own HTTP client and server sit on `httparse` and tokio), so a bug there cannot hide
//! itself.
//!
//! Start with [`origin::Origin`] (the server emulator), [`load::run`] (one bounded load run)
//! and [`cpu::CpuSampler`] (whole machine and per-process CPU). [`body`] defines the bodies both
//! sides agree on without storing them; [`ssl`] the handshake emulation of the WWW 2002 paper.
//!
//! Errors are `anyhow` throughout: this library is the binary's body, split out so tests can
//! drive it, and its errors are reported to a person, never matched. The one error callers do
//! match, how an exchange failed, is an enum ([`load::client::Failure`]).
//!
//! It does not emulate a WAN yet (delays and losses in network namespaces come later), and it
//! only ever targets loopback: every address passes [`target::test_bed_address`]. Every load run
//! is bounded by a duration and a request cap.
//!
//! ```
//! use sluice_lab::origin::{Origin, OriginConfig};
//! use std::io::{Read, Write};
//!
//! let origin = Origin::start(OriginConfig::default())?;
//! let mut stream = std::net::TcpStream::connect(origin.local_addr())?;
//! stream.write_all(b"GET /size/5 HTTP/1.0\r\n\r\n")?;
//! let mut response = Vec::new();
//! stream.read_to_end(&mut response)?;
//! assert!(response.starts_with(b"HTTP/1.1 200 OK"));
//! assert_eq!(origin.stop().requests, 1);
//! # Ok::<(), anyhow::Error>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod body;
pub mod cli;
pub mod cpu;
pub mod dist;
pub mod load;
pub mod origin;
pub mod peers;
pub mod ssl;
pub mod stats;
pub mod target;
