//! The typed schema: one struct per TOML table, with the defaults a partial file falls back to.
//!
//! Every struct refuses unknown keys, so a misspelt key is an error rather than a silent default.
//! Rules that span several keys (a reverse listener needs upstreams) live in `validate.rs`.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use ipnet::IpNet;
use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::units;

/// One socket the proxy accepts clients on: the `[[listener]]` array of tables.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Listener {
    /// Address to bind, an IP and a port (`"127.0.0.1:3128"`, `"[::1]:3128"`); port 0 picks one.
    pub address: SocketAddr,
    /// Whether clients name the target (forward) or the listener does (reverse).
    pub mode: ListenerMode,
    /// Where a reverse listener sends requests; must be empty for a forward listener.
    #[serde(default)]
    pub upstreams: Vec<UpstreamAddr>,
    /// Overrides `transfer.engine` for this listener; `None` means use `transfer.engine`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub engine: Option<Engine>,
}

impl Listener {
    /// The engine bodies on this listener use: its own override, else the global one.
    pub fn effective_engine(&self, transfer: &Transfer) -> Engine {
        self.engine.unwrap_or(transfer.engine)
    }
}

/// How a listener picks the upstream of a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ListenerMode {
    /// The client names the target in the request (absolute URI or CONNECT): a classic proxy.
    Forward,
    /// The listener sends every request to its configured upstreams: a gateway in front of them.
    Reverse,
}

impl fmt::Display for ListenerMode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ListenerMode::Forward => "forward",
            ListenerMode::Reverse => "reverse",
        })
    }
}

/// An upstream of a reverse listener: a host name or IP literal and a port, resolved later.
///
/// Written `"127.0.0.1:8080"`, `"backend.local:80"` or `"[::1]:8080"`; [`Display`](fmt::Display)
/// gives the same form back. Name resolution is the proxy's job, not the config's: loading a
/// file never blocks on DNS.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct UpstreamAddr {
    /// Host name or IP literal, without brackets for IPv6.
    pub host: String,
    /// TCP port, never 0.
    pub port: u16,
}

/// Why a string is not a valid `host:port` upstream.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum UpstreamAddrError {
    /// A URL was given; the upstream is a socket address, the scheme is always HTTP.
    #[error("\"{0}\" has a scheme; write only host:port, such as \"127.0.0.1:8080\"")]
    HasScheme(String),
    /// No `:port` at the end.
    #[error("\"{0}\" has no port; write host:port, such as \"backend.local:80\"")]
    MissingPort(String),
    /// The port is not a number from 1 to 65535.
    #[error("\"{0}\" has an invalid port; use a number from 1 to 65535")]
    InvalidPort(String),
    /// The host is empty or has characters no host name or IP literal has.
    #[error("\"{0}\" has an invalid host; use a DNS name or an IP literal ([::1] for IPv6)")]
    InvalidHost(String),
}

impl FromStr for UpstreamAddr {
    type Err = UpstreamAddrError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        if text.contains("://") {
            return Err(UpstreamAddrError::HasScheme(text.to_owned()));
        }
        let (host, port) = text
            .rsplit_once(':')
            .ok_or_else(|| UpstreamAddrError::MissingPort(text.to_owned()))?;
        let port = match port.parse::<u16>() {
            Ok(0) | Err(_) => return Err(UpstreamAddrError::InvalidPort(text.to_owned())),
            Ok(port) => port,
        };
        let host = if let Some(inner) = host.strip_prefix('[') {
            // An IPv6 literal must be bracketed, since its colons would be read as the port's.
            match inner.strip_suffix(']') {
                Some(literal) if literal.parse::<std::net::Ipv6Addr>().is_ok() => literal,
                _ => return Err(UpstreamAddrError::InvalidHost(text.to_owned())),
            }
        } else {
            let is_name_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | '_');
            if host.is_empty() || !host.chars().all(is_name_char) {
                return Err(UpstreamAddrError::InvalidHost(text.to_owned()));
            }
            host
        };
        Ok(UpstreamAddr {
            host: host.to_owned(),
            port,
        })
    }
}

impl fmt::Display for UpstreamAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.host.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => write!(f, "[{}]:{}", self.host, self.port),
            _ => write!(f, "{}:{}", self.host, self.port),
        }
    }
}

impl Serialize for UpstreamAddr {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for UpstreamAddr {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// Who may use the proxy, and where CONNECT may go: the `[access]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Access {
    /// Client networks allowed to connect; everyone else is refused at accept. A bare address
    /// in the file ("10.1.2.3") means that one host (/32 or /128).
    #[serde(deserialize_with = "deserialize_networks")]
    pub allow: Vec<IpNet>,
    /// Ports a CONNECT request may open a tunnel to.
    pub connect_ports: Vec<u16>,
}

impl Default for Access {
    fn default() -> Self {
        let loopback = |text: &str| text.parse().expect("literal loopback prefix is valid");
        Access {
            allow: vec![loopback("127.0.0.0/8"), loopback("::1/128")],
            connect_ports: vec![443],
        }
    }
}

/// Reads CIDR networks, accepting a bare address as a single host, with an error that shows
/// the expected form.
fn deserialize_networks<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Vec<IpNet>, D::Error> {
    let texts = Vec::<String>::deserialize(deserializer)?;
    texts
        .iter()
        .map(|text| {
            text.parse::<IpNet>()
                .or_else(|_| text.parse::<IpAddr>().map(IpNet::from))
                .map_err(|_| {
                    serde::de::Error::custom(format!(
                        "\"{text}\" is not a network; write an address and prefix length, such \
                         as \"10.0.0.0/8\" or \"fd00::/8\", or a single address"
                    ))
                })
        })
        .collect()
}

/// How long each phase of a connection may take: the `[timeouts]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Timeouts {
    /// From accept (or the end of the previous response) to a complete request head.
    #[serde(with = "units::duration")]
    pub client_header: Duration,
    /// How long an idle client connection is kept open between requests.
    #[serde(with = "units::duration")]
    pub keep_alive: Duration,
    /// TCP connect to an upstream.
    #[serde(with = "units::duration")]
    pub upstream_connect: Duration,
    /// From the request sent to the first byte of the upstream's response.
    #[serde(with = "units::duration")]
    pub upstream_first_byte: Duration,
    /// How long an idle pooled upstream connection is kept for reuse.
    #[serde(with = "units::duration")]
    pub upstream_idle: Duration,
    /// A CONNECT tunnel with no bytes moving either way is closed after this.
    #[serde(with = "units::duration")]
    pub tunnel_idle: Duration,
    /// A body transfer that makes no progress for this long is aborted.
    #[serde(with = "units::duration")]
    pub body_idle: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        Timeouts {
            client_header: Duration::from_secs(10),
            keep_alive: Duration::from_secs(60),
            upstream_connect: Duration::from_secs(5),
            upstream_first_byte: Duration::from_secs(30),
            upstream_idle: Duration::from_secs(30),
            tunnel_idle: Duration::from_secs(300),
            body_idle: Duration::from_secs(60),
        }
    }
}

/// Bounds on what a client may send and on what the proxy holds: the `[limits]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    /// Longest request line accepted, in bytes (answered with 414 beyond).
    #[serde(with = "units::size")]
    pub max_request_line: usize,
    /// Largest request head (request line and header fields), in bytes (431 beyond).
    #[serde(with = "units::size")]
    pub max_header_bytes: usize,
    /// Most header fields in one request head (431 beyond).
    pub max_headers: usize,
    /// Most client connections open at once, per worker; further accepts wait.
    pub max_connections: usize,
    /// Most idle upstream connections kept per origin (host and port), per worker; 0 keeps none.
    pub upstream_idle_per_origin: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_line: 8 * 1024,
            max_header_bytes: 64 * 1024,
            max_headers: 128,
            max_connections: 10_000,
            upstream_idle_per_origin: 16,
        }
    }
}

/// Which headers the proxy adds or passes on: the `[headers]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct HeaderPolicy {
    /// Pseudonym added to `Via` (RFC 9110 §7.6.3); `None` (written `false` or `""`) adds none.
    #[serde(with = "via")]
    pub via: Option<String>,
    /// Whether to append the client's address to `X-Forwarded-For`.
    pub x_forwarded_for: bool,
    /// Whether to pass `Proxy-Authorization` on to the upstream instead of removing it.
    pub forward_proxy_authorization: bool,
}

impl Default for HeaderPolicy {
    fn default() -> Self {
        HeaderPolicy {
            via: Some("sluice".to_owned()),
            x_forwarded_for: false,
            forward_proxy_authorization: false,
        }
    }
}

/// `headers.via`: a string, or a boolean (`true` is the default pseudonym, `false` is none).
mod via {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(
        untagged,
        expecting = "expected a pseudonym string such as \"sluice\", or false"
    )]
    enum Raw {
        Enabled(bool),
        Pseudonym(String),
    }

    pub(super) fn serialize<S: Serializer>(
        via: &Option<String>,
        serializer: S,
    ) -> Result<S::Ok, S::Error> {
        match via {
            Some(pseudonym) => serializer.serialize_str(pseudonym),
            None => serializer.serialize_bool(false),
        }
    }

    pub(super) fn deserialize<'de, D: Deserializer<'de>>(
        deserializer: D,
    ) -> Result<Option<String>, D::Error> {
        Ok(match Raw::deserialize(deserializer)? {
            Raw::Enabled(true) => Some("sluice".to_owned()),
            Raw::Enabled(false) => None,
            Raw::Pseudonym(text) if text.is_empty() => None,
            Raw::Pseudonym(text) => Some(text),
        })
    }
}

/// Socket options set on client and upstream sockets: the `[socket]` table.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SocketOptions {
    /// `SO_SNDBUF` in bytes; `None` (key absent) keeps the kernel's autotuned default.
    #[serde(with = "units::option_size", skip_serializing_if = "Option::is_none")]
    pub send_buffer: Option<usize>,
    /// `SO_RCVBUF` in bytes; `None` (key absent) keeps the kernel's autotuned default.
    #[serde(with = "units::option_size", skip_serializing_if = "Option::is_none")]
    pub recv_buffer: Option<usize>,
}

/// How bodies and tunnels are moved between the two sockets: the `[transfer]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Transfer {
    /// The engine used unless a listener overrides it.
    pub engine: Engine,
    /// Size of the user-space buffer the copy engine reads into, per direction.
    #[serde(with = "units::size")]
    pub copy_buffer: usize,
    /// Capacity asked for each splice pipe with F_SETPIPE_SZ.
    #[serde(with = "units::size")]
    pub pipe_size: usize,
    /// Most pipes each worker keeps open (lent to transfers or idle); past it, transfers copy.
    pub pipe_pool: usize,
    /// With `engine = "auto"`: body remainders (after what is already buffered) at least this
    /// large are spliced, smaller ones copied.
    #[serde(with = "units::size")]
    pub splice_threshold: usize,
    /// When a kernel engine takes over an exchange: after the reply head, or right after connect.
    pub splice_after: SpliceAfter,
}

impl Default for Transfer {
    fn default() -> Self {
        Transfer {
            engine: Engine::Auto,
            copy_buffer: 32 * 1024,
            pipe_size: 1024 * 1024,
            pipe_pool: 256,
            splice_threshold: DEFAULT_SPLICE_THRESHOLD,
            splice_after: SpliceAfter::Headers,
        }
    }
}

/// The default `transfer.splice_threshold`: below it, copying a remainder costs less CPU than
/// splicing it through a pipe (docs/BENCHMARKS.md, "Engines", has the measurement).
pub const DEFAULT_SPLICE_THRESHOLD: usize = 8 * 1024;

/// When a kernel engine takes over an exchange, the two points the WWW 2002 TCP-splice paper
/// experiments with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpliceAfter {
    /// After the reply head is read and rewritten in user space: the body is spliced, the
    /// connections stay persistent.
    #[default]
    Headers,
    /// Right after the upstream connects, for CONNECT and for requests known not to be
    /// cacheable: the reply, head included, is spliced until the upstream closes.
    Connect,
}

impl fmt::Display for SpliceAfter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SpliceAfter::Headers => "headers",
            SpliceAfter::Connect => "connect",
        })
    }
}

/// A way of moving a body or tunnel from one socket to the other.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// `read` into a user-space buffer, then `write`: works everywhere.
    Copy,
    /// Per transfer by size: small remainders copied, larger ones spliced
    /// (`transfer.splice_threshold`).
    #[default]
    Auto,
    /// `splice(2)` through a pipe: bytes stay in the kernel.
    Splice,
    /// An eBPF sockmap redirects bytes from socket to socket in the kernel.
    Sockmap,
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Engine::Copy => "copy",
            Engine::Auto => "auto",
            Engine::Splice => "splice",
            Engine::Sockmap => "sockmap",
        })
    }
}

/// The HTTP cache (RFC 9111): the `[cache]` table.
///
/// Each worker owns its own memory store with `memory / workers` bytes; a response cached by one
/// worker is a miss on another.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Cache {
    /// Whether responses are cached at all; `false` forwards everything untouched.
    pub enabled: bool,
    /// Byte budget of the memory cache for the whole process, shared out equally per worker.
    #[serde(with = "units::size")]
    pub memory: usize,
    /// Largest response body kept; larger responses are forwarded without a copy.
    #[serde(with = "units::size")]
    pub max_object: usize,
    /// Largest object the memory store keeps; larger ones, up to `max_object`, go to the
    /// disk tier (Squid's `maximum_object_size_in_memory`). `None` (key absent): `max_object`.
    #[serde(with = "units::option_size", skip_serializing_if = "Option::is_none")]
    pub memory_max_object: Option<usize>,
    /// Directory of the disk tier; `None` (key absent) keeps the cache in memory only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk_dir: Option<PathBuf>,
    /// Byte budget of the disk tier for the whole process, shared out equally per worker;
    /// used only with `disk_dir`.
    #[serde(with = "units::size")]
    pub disk_size: usize,
    /// After a client goes away mid-response, how many more body bytes the fill may read from
    /// the upstream to finish the cache entry.
    #[serde(with = "units::size")]
    pub fill_after_abort: usize,
    /// Client networks allowed to send PURGE; others get 403.
    #[serde(deserialize_with = "deserialize_networks")]
    pub purge_allow: Vec<IpNet>,
}

impl Cache {
    /// The largest object the memory store keeps.
    pub fn memory_object_cap(&self) -> usize {
        self.memory_max_object.unwrap_or(self.max_object)
    }

    /// The largest response body worth copying while it is relayed: `max_object` with a disk
    /// tier to take what memory will not, else what memory keeps.
    pub fn fill_cap(&self) -> usize {
        match self.disk_dir {
            Some(_) => self.max_object,
            None => self.memory_object_cap(),
        }
    }
}

impl Default for Cache {
    fn default() -> Self {
        let loopback = |text: &str| text.parse().expect("literal loopback prefix is valid");
        Cache {
            enabled: true,
            memory: 256 << 20,
            max_object: 64 << 20,
            memory_max_object: None,
            disk_dir: None,
            disk_size: 1 << 30,
            fill_after_abort: 1 << 20,
            purge_allow: vec![loopback("127.0.0.0/8"), loopback("::1/128")],
        }
    }
}

/// What the proxy logs: the `[log]` table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Log {
    /// Most verbose level emitted: one of [`LOG_LEVELS`].
    pub level: String,
    /// Whether to write one access-log line per request.
    pub access_log: bool,
}

/// The values `log.level` accepts, most severe first.
pub const LOG_LEVELS: [&str; 5] = ["error", "warn", "info", "debug", "trace"];

impl Default for Log {
    fn default() -> Self {
        Log {
            level: "info".to_owned(),
            access_log: true,
        }
    }
}
