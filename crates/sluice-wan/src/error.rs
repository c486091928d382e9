//! The crate's one error type.

use std::io;

/// What went wrong while building, running or removing a test bed.
#[derive(Debug, thiserror::Error)]
pub enum WanError {
    /// A system call or file operation failed; `context` says which and on what.
    #[error("{context}")]
    Io {
        /// What we were doing.
        context: String,
        /// The OS error.
        #[source]
        source: io::Error,
    },
    /// An external command (`ip`, `ethtool`, `sysctl`) failed.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it printed on stderr, trimmed.
        stderr: String,
    },
    /// Namespaces and TAP devices need CAP_NET_ADMIN.
    #[error("{what} needs root (CAP_NET_ADMIN for namespaces and TAP devices)")]
    NotRoot {
        /// The operation refused.
        what: String,
    },
    /// Neither a built-in profile nor a readable file.
    #[error("unknown profile {name:?}: not a file, and not one of the built-ins ({known})")]
    UnknownProfile {
        /// The name given.
        name: String,
        /// The built-in names.
        known: String,
    },
    /// The profile is not valid TOML for the schema (unknown key, bad unit, bad probability).
    #[error("profile {origin}: {source}")]
    ProfileSyntax {
        /// Built-in name or path.
        origin: String,
        /// The parser's message, with line and column.
        #[source]
        source: Box<toml::de::Error>,
    },
    /// The profile parses but cannot be run as written.
    #[error("profile {origin}: {key}: {reason}")]
    ProfileInvalid {
        /// Built-in name or path.
        origin: String,
        /// The offending key.
        key: String,
        /// Why.
        reason: String,
    },
    /// A test-bed prefix must be short and plain so device names fit in 15 bytes.
    #[error("prefix {prefix:?}: use 1 to 8 lowercase letters or digits, starting with a letter")]
    BadPrefix {
        /// The prefix given.
        prefix: String,
    },
    /// `net up` on a prefix whose state file exists.
    #[error("test bed {prefix:?} is already up (state in {path}); run `net down --prefix {prefix}` first")]
    AlreadyUp {
        /// The prefix.
        prefix: String,
        /// The state file.
        path: String,
    },
    /// No state file for this prefix.
    #[error("test bed {prefix:?} is not up (no {path})")]
    NotUp {
        /// The prefix.
        prefix: String,
        /// The state file looked for.
        path: String,
    },
    /// The wire process exited before it said it was ready.
    #[error("the wire did not start: {log}")]
    WireFailed {
        /// The end of its log.
        log: String,
    },
    /// A state file that does not parse.
    #[error("state file {path}: {source}")]
    BadState {
        /// The file.
        path: String,
        /// The parser's message.
        #[source]
        source: serde_json::Error,
    },
    /// `net exec` to a host the test bed does not have.
    #[error("unknown host {host:?}: this test bed has {known}")]
    UnknownHost {
        /// The name given.
        host: String,
        /// The hosts of the test bed.
        known: String,
    },
}

impl WanError {
    /// An I/O error with what we were doing.
    pub fn io(context: impl Into<String>, source: io::Error) -> WanError {
        WanError::Io {
            context: context.into(),
            source,
        }
    }
}
