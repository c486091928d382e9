//! The proxy: client connections, exchanges (forward, reverse, CONNECT), the upstream pool, the
//! access log.
//!
//! The `sluice` binary builds a [`Server`] from a `sluice_config::Config`; each worker thread
//! runs a `sluice_rt` runtime with its own listeners (SO_REUSEPORT), its own upstream pool and
//! its own counters. For every request a worker parses the head with `sluice_http`, routes it
//! (`route`), answers GET and HEAD from the worker's `sluice_cache` memory store when it can
//! (`cache`), connects or reuses an upstream (`upstream`), sends the request and reads the
//! response head (`exchange`), and hands bodies and tunnels to a `sluice_splice` engine
//! (`body`, `tunnel`), or keeps a copy of a cacheable body for the store while relaying it
//! (`cache_fill`: splice plus tee, or a copy). With `splice_after = "connect"`, a reply the
//! cache will not store is spliced whole, head included, right after the request
//! (`splice_whole`). One access-log line per exchange follows (`access_log`).
//!
//! Start with [`Server::start`]; [`ProxyError`] lists every answer the proxy gives itself.
//!
//! What it does not do: parse bytes (`sluice-http`), move body bytes (`sluice-splice`), or own
//! the event loop (`sluice-rt`). Exchanges on one connection run one at a time, so pipelined
//! responses keep request order by construction.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod access_log;
mod body;
mod cache;
mod cache_fill;
mod client;
mod disk_hit;
mod error;
mod exchange;
mod invalidation;
mod route;
mod server;
mod splice_whole;
mod tunnel;
mod upstream;
mod worker;

pub use error::{error_response, reason_phrase, Phase, ProxyError, Side, Termination};
pub use server::{Server, StartError};
pub use worker::WorkerReport;
