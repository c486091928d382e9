//! [`StoredEntry`]: a complete response as the cache keeps it.

use std::sync::Arc;
use std::time::SystemTime;

use sluice_http::ResponseHead;

use crate::{CacheKey, Variant};

/// What a cache knows about a stored response besides its body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EntryMeta {
    /// Primary key (the target URI).
    pub key: CacheKey,
    /// Secondary key from Vary.
    pub variant: Variant,
    /// The response head as stored: fields excepted by RFC 9111 §3.1 removed
    /// ([`storable_head`](crate::policy::storable_head)).
    pub head: ResponseHead,
    /// When the request that caused it was sent (`request_time`, RFC 9111 §4.2.3).
    pub request_time: SystemTime,
    /// When its head was received (`response_time`).
    pub response_time: SystemTime,
    /// Body length in bytes.
    pub body_len: u64,
}

/// A complete stored response: head, timing and the whole body, shared between the cache and
/// every client being served from it (an `Arc`, so eviction never pulls bytes from under a
/// transfer, and the disk writer can take it to another thread).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoredEntry {
    /// Keys, head and times.
    pub meta: EntryMeta,
    /// The body after transfer decoding (content codings kept), exactly `meta.body_len` bytes.
    /// A `Vec` behind the `Arc`, not an `Arc<[u8]>`: a fill's buffer becomes the entry as it
    /// is, where `Arc<[u8]>::from(Vec)` would copy the whole body once more.
    pub body: Arc<Vec<u8>>,
}
