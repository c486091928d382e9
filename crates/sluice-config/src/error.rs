//! `ConfigError`: what is wrong with a config file, where, and what to do about it.

use std::fmt;
use std::io;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use crate::units::format_size;

/// Where in a config file a problem is: the file's name and, when known, a 1-based line and
/// column. Displays as `sluice.toml:7:8`, or `sluice.toml` for a problem with the whole file
/// (a required table that is missing has no position).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Location {
    /// The name the file was loaded under (a path, or `<default>` for the embedded file).
    pub source_name: String,
    /// 1-based line and column (in characters), if the problem has a position in the text.
    pub position: Option<(usize, usize)>,
}

impl Location {
    /// Locates byte `offset` of `text` as a line and column.
    pub(crate) fn at_offset(source_name: &str, text: &str, offset: usize) -> Location {
        let offset = offset.min(text.len());
        let before = text.get(..offset).unwrap_or(text);
        let line = before.matches('\n').count() + 1;
        let line_start = before.rfind('\n').map_or(0, |newline| newline + 1);
        let column = before
            .get(line_start..)
            .map_or(0, |prefix| prefix.chars().count())
            + 1;
        Location {
            source_name: source_name.to_owned(),
            position: Some((line, column)),
        }
    }

    /// A location naming only the file.
    pub(crate) fn whole_file(source_name: &str) -> Location {
        Location {
            source_name: source_name.to_owned(),
            position: None,
        }
    }
}

impl fmt::Display for Location {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.position {
            Some((line, column)) => write!(f, "{}:{line}:{column}", self.source_name),
            None => f.write_str(&self.source_name),
        }
    }
}

/// Why a config could not be loaded. Each message names the file position, the key path
/// (`listener[0].mode`, `timeouts.keep_alive`) and the reason, and says what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read (missing, unreadable, not UTF-8); the cause is the source.
    #[error("cannot read config file {}", path.display())]
    Read {
        /// The path as given.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: io::Error,
    },
    /// The text is not valid TOML (an unclosed string, a key defined twice, ...).
    #[error("{at}: invalid TOML: {message}")]
    Syntax {
        /// Where the parser stopped.
        at: Location,
        /// The parser's description.
        message: String,
    },
    /// The TOML is valid but does not fit the schema: an unknown key, a wrong type, an
    /// unknown variant, a missing required key, a value that does not parse (size, address).
    #[error("{at}: {key}: {message}")]
    Schema {
        /// Where the offending key or value is.
        at: Location,
        /// Dotted key path, such as `listener[0].mode`; `<top level>` for the root table.
        key: String,
        /// What the deserializer expected and found.
        message: String,
    },
    /// Every value parses, but the values break a rule of the proxy.
    #[error("{at}: {key}: {problem}")]
    Invalid {
        /// Where the offending value is (or its nearest enclosing table, if the value is a
        /// default).
        at: Location,
        /// Dotted key path, such as `access.allow`.
        key: String,
        /// Which rule, and what to do.
        problem: Problem,
    },
}

/// A rule of the proxy that a well-typed config breaks; see `ConfigError::Invalid`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// No `[[listener]]`: the proxy would accept nothing.
    #[error("no listener configured; add a [[listener]] table with address and mode")]
    NoListeners,
    /// `workers = 0`; zero is not a shorthand for "one per core".
    #[error("must be at least 1; remove the key to run one worker per CPU")]
    ZeroWorkers,
    /// A reverse listener has nowhere to send requests.
    #[error(
        "a reverse listener needs at least one upstream; add upstreams = [\"host:port\"] or set \
         mode = \"forward\""
    )]
    ReverseWithoutUpstreams,
    /// A forward listener with upstreams: the client names the target, so they would be unused.
    #[error(
        "a forward listener takes no upstreams (each client request names its target); remove \
         upstreams or set mode = \"reverse\""
    )]
    ForwardWithUpstreams,
    /// Two listeners on one address: the second bind would fail.
    #[error("{address} is already the address of listener[{first}]; give each listener its own")]
    DuplicateAddress {
        /// The address both listeners use.
        address: SocketAddr,
        /// Index of the first listener with it.
        first: usize,
    },
    /// `access.allow = []`: every client would be refused.
    #[error(
        "empty list: nobody could connect; list the client networks, such as \
         [\"127.0.0.0/8\", \"::1/128\"], or [\"0.0.0.0/0\", \"::/0\"] for everyone"
    )]
    EmptyAllow,
    /// Port 0 in `access.connect_ports`: no server listens there.
    #[error("port 0 is not a valid CONNECT target; list real ports, such as [443]")]
    ZeroConnectPort,
    /// A timeout of zero would fire at once.
    #[error(
        "must be longer than 0s (it would expire at once); use a duration such as \"{}\"",
        humantime::format_duration(*suggested)
    )]
    ZeroDuration {
        /// The default, as a suggestion.
        suggested: Duration,
    },
    /// A size or count below what the proxy can work with.
    #[error("{value} is below the minimum of {minimum}; {why}")]
    TooSmall {
        /// The configured value.
        value: Amount,
        /// The smallest accepted value.
        minimum: Amount,
        /// Why the minimum exists.
        why: &'static str,
    },
    /// `headers.via` is not an HTTP token (RFC 9110 §7.6.3: a pseudonym is a token).
    #[error(
        "\"{0}\" is not a valid pseudonym (letters, digits and !#$%&'*+-.^_`|~ only); use a \
         single word such as \"sluice\", or false to add no Via"
    )]
    InvalidVia(String),
    /// `cache.disk_dir` is relative: it would depend on the directory the proxy was started in.
    #[error("\"{}\" is a relative path; give an absolute directory, such as \"/var/cache/sluice\"", .0.display())]
    RelativeCacheDir(std::path::PathBuf),
    /// `cache.max_object` exceeds `cache.memory`: no object that large could ever be kept.
    #[error("{max_object} exceeds cache.memory ({memory}); lower it or raise cache.memory")]
    CacheObjectOverBudget {
        /// The configured object cap.
        max_object: Amount,
        /// The configured memory budget.
        memory: Amount,
    },
    /// `cache.memory_max_object` exceeds `cache.max_object`, the cap on everything cached.
    #[error("{memory_max_object} exceeds cache.max_object ({max_object}), the largest object cached at all; lower it or raise max_object")]
    MemoryObjectOverMaxObject {
        /// The memory store's object cap.
        memory_max_object: Amount,
        /// The cap on any cached object.
        max_object: Amount,
    },
    /// `log.level` is not a level `tracing` knows.
    #[error(
        "unknown level \"{0}\", expected one of \"error\", \"warn\", \"info\", \"debug\", \
         \"trace\""
    )]
    UnknownLogLevel(String),
}

/// A size or a count in a [`Problem`], displayed the way the file writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Amount {
    /// A number of bytes, displayed with a unit ("1KiB").
    Bytes(usize),
    /// A plain count.
    Count(usize),
}

impl fmt::Display for Amount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Amount::Bytes(bytes) => f.write_str(&format_size(*bytes)),
            Amount::Count(count) => write!(f, "{count}"),
        }
    }
}
