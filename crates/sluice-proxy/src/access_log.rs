//! One access-log line per exchange, in logfmt so that `grep` and log shippers both read it.
//!
//! ```text
//! client=127.0.0.1:50412 method=GET target="http://127.0.0.1:8080/a" status=200 bytes=8342
//!   upstream=127.0.0.1:8080 engine=copy cache=miss timers_ms=0.04/0.21/0.90/1.25 term=--
//! ```
//! `cache` is what the cache did: `hit`, `hit-disk`, `revalidated` (stored entry confirmed by a 304), `miss`
//! (fetched; stored if cacheable), `pass` (not cacheable, relayed by the engine), `purge`, or `-`
//! (the cache took no part: other methods, cache off).
//! `timers_ms` is head read / upstream connected / first response byte / total, each measured
//! from the first byte of the request (or the accept); `-` where the phase was not reached.
//! `bytes` counts what was sent to the client, head included. `term` is the [`Termination`] code.
//! `error="..."` follows when the proxy answered itself or cut the exchange short, saying why.

use std::fmt;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use crate::error::Termination;

/// What the access log says about one exchange; filled in as the exchange goes.
#[derive(Debug)]
pub(crate) struct AccessRecord {
    pub started: Instant,
    pub client: SocketAddr,
    pub method: String,
    pub target: String,
    pub status: u16,
    pub bytes: u64,
    pub upstream: Option<SocketAddr>,
    pub engine: &'static str,
    /// What the cache did; see the module docs.
    pub cache: &'static str,
    pub head_read: Option<Duration>,
    pub connected: Option<Duration>,
    pub first_byte: Option<Duration>,
    pub total: Option<Duration>,
    pub termination: Termination,
    /// Why the proxy answered itself or cut the exchange short.
    pub error: Option<String>,
}

impl AccessRecord {
    pub(crate) fn new(client: SocketAddr, started: Instant, engine: &'static str) -> Self {
        AccessRecord {
            started,
            client,
            method: String::from("-"),
            target: String::from("-"),
            status: 0,
            bytes: 0,
            upstream: None,
            engine,
            cache: "-",
            head_read: None,
            connected: None,
            first_byte: None,
            total: None,
            termination: Termination::NORMAL,
            error: None,
        }
    }

    /// Time since the exchange started, for the phase timers.
    pub(crate) fn elapsed(&self) -> Option<Duration> {
        Some(self.started.elapsed())
    }

    /// Writes the line (target `sluice::access`, level info).
    pub(crate) fn emit(&mut self, enabled: bool) {
        self.total = self.elapsed();
        if enabled {
            tracing::info!(target: "sluice::access", "{self}");
        }
    }
}

struct Millis(Option<Duration>);

impl fmt::Display for Millis {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(d) => write!(f, "{:.2}", d.as_secs_f64() * 1000.0),
            None => f.write_str("-"),
        }
    }
}

impl fmt::Display for AccessRecord {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "client={} method={} target={:?} status={} bytes={} upstream={} engine={} cache={} \
             timers_ms={}/{}/{}/{} term={}",
            self.client,
            self.method,
            self.target,
            self.status,
            self.bytes,
            self.upstream
                .map_or_else(|| String::from("-"), |a| a.to_string()),
            self.engine,
            self.cache,
            Millis(self.head_read),
            Millis(self.connected),
            Millis(self.first_byte),
            Millis(self.total),
            self.termination,
        )?;
        if let Some(error) = &self.error {
            write!(f, " error={error:?}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::{Phase, Side};

    #[test]
    fn line_has_every_documented_field() {
        let mut record =
            AccessRecord::new("127.0.0.1:5000".parse().unwrap(), Instant::now(), "copy");
        record.method = "GET".into();
        record.target = "http://a/b".into();
        record.status = 502;
        record.termination = Termination::by(Side::Upstream, Phase::Connect);
        let line = record.to_string();
        for field in [
            "client=127.0.0.1:5000",
            "method=GET",
            "target=\"http://a/b\"",
            "status=502",
            "bytes=0",
            "upstream=-",
            "engine=copy",
            "cache=-",
            "timers_ms=-/-/-/-",
            "term=SC",
        ] {
            assert!(line.contains(field), "{field} missing in {line}");
        }
    }
}
