//! Test support for Sluice's integration tests: start the real `sluice` binary ([`Proxy`]), a
//! scripted origin server ([`Origin`]), and talk to them with a raw socket ([`RawClient`]) or
//! curl ([`curl`]).
//!
//! Everything binds port 0 and waits for events (a "listening" line, a connection, EOF) under
//! generous deadlines that only fire when something is broken: no sleeps, no timing asserts.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod client;
mod origin;
mod proxy;

pub use client::{curl, curl_available, RawClient, Response};
pub use origin::{Origin, OriginRequest, Reply};
pub use proxy::Proxy;

use std::time::Duration;

/// How long any single wait in a test may take before the test fails. Long, because CI machines
/// are slow and shared; a passing test never comes near it.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// A deterministic body of `len` bytes (a counter pattern no two offsets of which repeat within
/// 251 bytes), so that a shifted or dropped byte shows.
pub fn body_of(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}
