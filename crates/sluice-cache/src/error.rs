//! [`CacheError`]: everything this crate can fail at, one variant per case.

use std::path::PathBuf;

/// Why a cache operation failed. Network-caused cases (a bad Host, a length mismatch) mean
/// "do not cache this exchange", never "fail the request": the proxy forwards it uncached.
#[derive(Debug, thiserror::Error)]
pub enum CacheError {
    /// An origin-form request without Host has no target URI to key on (HTTP/1.0 clients).
    #[error("request has no Host field, so it has no cache key")]
    MissingHost,
    /// The Host field is not `host[:port]`.
    #[error("request Host field is not host[:port], so it has no cache key")]
    InvalidHost,
    /// CONNECT and `OPTIONS *` name no resource.
    #[error("{method} request has no target URI to cache")]
    NoCacheKey {
        /// The request method.
        method: String,
    },
    /// A 304 names another representation than the stored one (RFC 9111 §4.3.4): the stored
    /// entry is not refreshed; fetch the full response instead.
    #[error("304 validator does not match the stored response")]
    ValidatorMismatch,
    /// The body grew past what the fill may hold; the fill is over and the entry dropped.
    #[error("response body passed the {limit}-byte object cap, not cached")]
    FillTooLarge {
        /// The cap in bytes.
        limit: u64,
    },
    /// The body delivered to a fill is shorter or longer than its framing said: an origin
    /// abort or a framing bug; the entry is dropped, never served.
    #[error("response body was {actual} bytes, expected {expected}: not cached")]
    LengthMismatch {
        /// What the framing announced.
        expected: u64,
        /// What arrived.
        actual: u64,
    },
    /// The key was purged or invalidated (RFC 9111 §4.4) while the fill ran: the response
    /// may predate the change that invalidated it, so it is dropped, never served.
    #[error("the key was invalidated while its response was filling, not cached")]
    InvalidatedWhileFilling,
    /// A fill was committed before [`Fill::set_response`](crate::Fill::set_response): a bug
    /// in the caller; nothing is stored.
    #[error("fill committed without a response head, not cached")]
    FillWithoutResponse,
    /// A disk-tier file or directory could not be read or written.
    #[error("cache file {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A disk-tier file is not a complete cache entry (a crash mid-write, a foreign file);
    /// it is deleted and never served.
    #[error("cache file {path} is damaged ({reason}), dropped")]
    CorruptFile {
        /// The file.
        path: PathBuf,
        /// Which check failed.
        reason: &'static str,
    },
    /// The entry alone is larger than the disk tier's object cap or its whole budget.
    #[error("entry of {size} bytes exceeds the disk tier's {limit}-byte limit")]
    TooLargeForDisk {
        /// Bytes the file would take.
        size: u64,
        /// The limit it passes.
        limit: u64,
    },
    /// The disk tier's writer threads have stopped (a panic in one): nothing more is written.
    #[error("disk tier writer threads are gone, entry not written")]
    WritersGone,
}
