//! RFC 9111 shared HTTP cache for Sluice (placeholder docs, written last).

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod date;
mod directives;
mod disk;
mod entry;
mod error;
mod key;
mod memory;
pub mod policy;

pub use date::{format_http_date, parse_http_date};
pub use directives::{MaxStale, RequestDirectives, ResponseDirectives};
pub use disk::{DiskConfig, DiskHit, DiskStats, DiskTier};
pub use entry::{EntryMeta, StoredEntry};
pub use error::CacheError;
pub use key::{CacheKey, Variant, VaryOutcome};
pub use memory::{
    AbortReason, CacheStats, Committed, Fill, FillWait, Lookup, MemoryConfig, MemoryStore,
};
