//! Sluice's HTTP cache: RFC 9111 shared-cache policy, a per-worker memory store and a disk
//! tier, as a library that never touches a socket.
//!
//! # Where it sits
//!
//! `sluice-proxy` calls it for every GET and HEAD (lookup, fill, respond) and for every unsafe
//! request (invalidation). It calls only `sluice-http`, for head types, and the file system
//! (the disk tier, from its own writer threads). Nothing here reads a clock: callers pass
//! `now`, `request_time` and `response_time`, so every rule is tested with fixed times.
//!
//! ```text
//!  request ──CacheKey::from_request──> MemoryStore::lookup ──Hit──> policy::respond ──> client
//!                                         │   │    │                      ▲  (200/206/304/412/416)
//!                          Pending(FillWait)  │   └─Revalidate{request}──>│  origin 304:
//!                          await, look up     │                           │  merge_not_modified
//!                          again              Miss ──> DiskTier::lookup ──┘  + refresh
//!                                                         │ miss
//!                       begin_fill ── origin ── storability? ── Fill::append ... Fill::commit
//!                                                                              │ evicted/oversize
//!                                                                              └─> DiskTier::store
//! ```
//!
//! # Types to start with
//!
//! - [`MemoryStore`]: [`lookup`](MemoryStore::lookup) gives a [`Lookup`];
//!   [`begin_fill`](MemoryStore::begin_fill) gives a [`Fill`] that becomes an entry only on a
//!   [`commit`](Fill::commit) whose length matches.
//! - [`policy`]: the RFC 9111 rules as pure functions over heads and times:
//!   [`storability`](policy::storability), [`evaluate`](policy::evaluate),
//!   [`respond`](policy::respond), [`revalidation_request`](policy::revalidation_request),
//!   [`merge_not_modified`](policy::merge_not_modified),
//!   [`invalidated_keys`](policy::invalidated_keys).
//! - [`DiskTier`]: files under a directory, written by writer threads, read as a
//!   [`DiskHit`] holding a `File`, an offset and a length for `sendfile(2)`.
//!
//! # What it does not do
//!
//! No sockets, no event loop, no body engines: the proxy moves bytes and hands the cache
//! copies (KeepCopy) or asks it for a body slice. No transfer codings (bodies are stored
//! decoded; the proxy frames them with Content-Length), no content codings, no HTTP/2, no
//! admin endpoint (the proxy exposes [`CacheStats`], [`DiskStats`] and
//! [`MemoryStore::invalidate`] as it likes). The RFC 9111 behaviours left out are listed, with
//! reasons, in [`rfc9111`].
//!
//! # Threads
//!
//! One [`MemoryStore`] and at most one [`DiskTier`] per worker, owned by it: no locks on the
//! request path, and [`Fill`] and [`FillWait`] share state through `Rc`, so they are not
//! `Send` and cannot leak to another worker. Collapsed forwarding is per worker too: N misses
//! on one worker cost one upstream request, N misses spread over W workers cost up to W. The
//! disk tier's writer threads take only `Arc`'d entries and file paths; their results come
//! back over a channel the worker drains without blocking.
//!
//! # Memory budget and eviction
//!
//! [`MemoryConfig::budget_bytes`] is hard: after every commit the charged bytes are within it.
//! An entry is charged for its body, its head (names, values and the structs holding them),
//! its key twice (entry and index), its Vary values, the index slots and queue share, and
//! 16 bytes per heap allocation; the estimate is derived and explained in `memory/cost.rs`.
//! Not charged: fills still in progress (each bounded by
//! [`MemoryConfig::max_fill_bytes`]; the proxy bounds how many run at once) and allocator
//! fragmentation, so leave the worker some headroom over the budget.
//!
//! Eviction is GDSF (Greedy-Dual-Size-Frequency, Cherkasova 1998): each entry's priority is
//! `clock + frequency / size`, the lowest goes first, and the clock rises to each victim's
//! priority so entries that stop being used age out. Against LRU: Web objects span six orders
//! of magnitude in size, and LRU lets one cold 50 MiB video push out thousands of small
//! objects that are each requested more often, which is where the hit ratio is. GDSF keeps
//! the small, popular objects and lets large ones in only while they earn their bytes; the
//! disk tier, with LRU, keeps what memory gives up. The price is a `BTreeSet` update per hit
//! (O(log n)) instead of LRU's O(1) list move.
//!
//! # Invariants
//!
//! - A lookup never returns a partial body: fills are invisible until a commit whose length
//!   matches; a disk file is served only after its checksum passed at start-up and while its
//!   length is still the written one.
//! - Input from the network never panics: heads, dates, directives and disk files are parsed
//!   with checked reads only.
//! - No feature flags. `#![forbid(unsafe_code)]`.
//!
//! # Example
//!
//! A miss filled, then a hit answered from memory:
//!
//! ```
//! use std::time::SystemTime;
//! use sluice_cache::policy::{self, Storability};
//! use sluice_cache::{AbortReason, CacheKey, Lookup, MemoryConfig, MemoryStore};
//! use sluice_http::{parse_request, parse_response, Limits, Parsed};
//!
//! let raw = b"GET /logo.png HTTP/1.1\r\nHost: example.com\r\n\r\n";
//! let Parsed::Complete { head: request, .. } = parse_request(raw, &Limits::default())? else {
//!     unreachable!("complete head");
//! };
//! let key = CacheKey::from_request(&request)?;
//! let mut cache = MemoryStore::new(MemoryConfig::default());
//! let now = SystemTime::now();
//! assert!(matches!(cache.lookup(&key, &request, now), Lookup::Miss));
//!
//! // Claim the fill before going upstream, so concurrent misses wait for this one.
//! let mut fill = cache.begin_fill(&key).expect("no other fill for this key");
//! let raw = b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 4\r\n\r\n";
//! let Parsed::Complete { head: response, .. } = parse_response(raw, &Limits::default())? else {
//!     unreachable!("complete head");
//! };
//! match policy::storability(&request, &response) {
//!     Storability::Storable(variant) => {
//!         fill.set_response(variant, &response, now, now);
//!         fill.append(b"\x89PNG")?; // as the body engine copies it
//!         fill.commit(&mut cache, 4)?;
//!     }
//!     Storability::NotStorable(_) => fill.abort(&mut cache, AbortReason::Uncacheable, now),
//! }
//!
//! let Lookup::Hit(entry) = cache.lookup(&key, &request, now) else {
//!     unreachable!("just stored");
//! };
//! let answer = policy::respond(&request, &entry.meta, now);
//! assert_eq!(answer.head.status, 200);
//! assert_eq!(answer.body, policy::BodySlice::Bytes { offset: 0, len: 4 });
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

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
pub mod rfc9111;

pub use date::{format_http_date, parse_http_date};
pub use directives::{MaxStale, RequestDirectives, ResponseDirectives};
pub use disk::{DiskConfig, DiskHit, DiskStats, DiskTier};
pub use entry::{EntryMeta, StoredEntry};
pub use error::CacheError;
pub use key::{CacheKey, Variant, VaryOutcome};
pub use memory::{
    AbortReason, CacheStats, Committed, Fill, FillWait, Lookup, MemoryConfig, MemoryStore,
};
