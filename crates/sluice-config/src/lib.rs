//! Sluice's configuration: a TOML file parsed into a typed, validated [`Config`].
//!
//! The `sluice` binary loads it at start or reload (`sluice run --config FILE`, `sluice check
//! FILE`) and hands the parts down to the workers; `sluice-lab` builds and writes configs for
//! its test beds. This crate calls nothing but `serde`, `toml` and the unit parsers.
//!
//! Start with [`Config::load`] or [`Config::from_toml_str`], which return a [`Config`] or a
//! [`ConfigError`] naming the file, line, column, key path and reason:
//!
//! ```text
//! sluice.toml:7:8: listener[0].mode: unknown variant "foward", expected "forward" or "reverse"
//! ```
//!
//! What it does not do: it never resolves names (upstream hosts stay strings until the proxy
//! connects), never binds sockets, and never reads the file again after loading; reloading is
//! loading a new `Config`. It has no opinion on which engines exist on this kernel: it parses
//! all four names and the proxy decides.
//!
//! Invariants of a `Config` that loaded: at least one listener, no two listeners on one address
//! (port 0 aside), reverse listeners have upstreams and forward ones have none, `workers >= 1`,
//! every timeout is non-zero, `access.allow` is non-empty, `log.level` is a known level,
//! `cache.memory` is at least 1 MiB and at least `cache.max_object`, `cache.disk_dir` (if set) is
//! absolute.
//! Unknown keys are errors everywhere, and an absent key takes the default documented in
//! `docs/CONFIG.md`. [`Config::warnings`] lists what is allowed but probably a mistake.
//!
//! ```
//! use sluice_config::{Config, ListenerMode};
//!
//! let text = r#"
//! [[listener]]
//! address = "127.0.0.1:8000"
//! mode = "reverse"
//! upstreams = ["127.0.0.1:8080"]
//! "#;
//! let config = Config::from_toml_str(text, "example.toml")?;
//! assert_eq!(config.listeners[0].mode, ListenerMode::Reverse);
//! assert_eq!(config.timeouts.upstream_connect, std::time::Duration::from_secs(5));
//! // The effective config, defaults included, parses back to the same value.
//! assert_eq!(Config::from_toml_str(&config.to_toml_string(), "effective")?, config);
//! # Ok::<(), sluice_config::ConfigError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

use std::path::Path;

use serde::{Deserialize, Serialize};

mod error;
mod locate;
mod schema;
mod units;
mod validate;

pub use error::{Amount, ConfigError, Location, Problem};
pub use schema::{
    Access, Cache, Engine, HeaderPolicy, Limits, Listener, ListenerMode, Log, SocketOptions,
    SpliceAfter, Timeouts, Transfer, UpstreamAddr, UpstreamAddrError, DEFAULT_SPLICE_THRESHOLD,
    LOG_LEVELS,
};

use locate::Document;

/// The whole configuration of one proxy process.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Config {
    /// Worker threads, each with its own event loop; defaults to one per available CPU.
    #[serde(default = "default_workers")]
    pub workers: usize,
    /// Sockets to accept clients on: the `[[listener]]` tables, at least one.
    #[serde(default, rename = "listener")]
    pub listeners: Vec<Listener>,
    /// Which clients may connect, and where CONNECT may go.
    #[serde(default)]
    pub access: Access,
    /// How long each phase of a connection may take.
    #[serde(default)]
    pub timeouts: Timeouts,
    /// Bounds on request heads and connection counts.
    #[serde(default)]
    pub limits: Limits,
    /// Headers the proxy adds or passes on.
    #[serde(default)]
    pub headers: HeaderPolicy,
    /// Socket buffer sizes.
    #[serde(default)]
    pub socket: SocketOptions,
    /// How bodies and tunnels are moved.
    #[serde(default)]
    pub transfer: Transfer,
    /// The HTTP cache.
    #[serde(default)]
    pub cache: Cache,
    /// Log level and access log.
    #[serde(default)]
    pub log: Log,
}

fn default_workers() -> usize {
    std::thread::available_parallelism().map_or(1, |cores| cores.get())
}

impl Config {
    /// Parses and validates `text`; `source_name` (a path, or `<default>`) prefixes errors.
    pub fn from_toml_str(text: &str, source_name: &str) -> Result<Config, ConfigError> {
        let document = Document::parse(text).map_err(|error| ConfigError::Syntax {
            at: locate_error(&error, source_name, text),
            message: error.message().trim_end().to_owned(),
        })?;
        let config: Config = toml::from_str(text).map_err(|error| {
            let key = error
                .span()
                .map(|span| document.path_at(span.start))
                .unwrap_or_default();
            ConfigError::Schema {
                at: locate_error(&error, source_name, text),
                key: key.to_string(),
                // serde quotes names with backticks; the rest of our messages use "".
                message: error.message().trim_end().replace('`', "\""),
            }
        })?;
        validate::check(&config, &document, source_name, text)?;
        Ok(config)
    }

    /// Reads and parses the file at `path`; errors name the path.
    pub fn load(path: &Path) -> Result<Config, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: path.to_owned(),
            source,
        })?;
        Config::from_toml_str(&text, &path.display().to_string())
    }

    /// The effective config as TOML, every default written out; [`Config::from_toml_str`]
    /// parses it back to an equal `Config`. `sluice check` prints this.
    pub fn to_toml_string(&self) -> String {
        toml::to_string(self)
            .expect("every field is a string, integer, bool, array or table, which TOML can hold")
    }

    /// Settings that load but are probably mistakes, one line each, starting with the key:
    /// an open forward proxy, listeners remote clients cannot use, more workers than CPUs.
    /// `sluice check` prints them; `--strict` makes them errors.
    pub fn warnings(&self) -> Vec<String> {
        validate::warnings(self)
    }
}

fn locate_error(error: &toml::de::Error, source_name: &str, text: &str) -> Location {
    match error.span() {
        Some(span) => Location::at_offset(source_name, text, span.start),
        None => Location::whole_file(source_name),
    }
}

#[cfg(test)]
mod tests;
