//! RFC 9111 policy as pure functions over heads and times: no storage, no clock, no I/O.
//!
//! One file per question the proxy asks: may this be stored ([`storability`]), is it fresh
//! ([`evaluate`]), how to validate it ([`revalidation_request`], [`merge_not_modified`]), what
//! to answer a client ([`respond`]) and what an unsafe request invalidates
//! ([`invalidated_keys`]).

mod etag;
mod freshness;
mod invalidate;
mod range;
mod respond;
mod storable;
mod validate;

pub use freshness::{current_age, evaluate, freshness_lifetime, HeuristicFreshness, Verdict};
pub use invalidate::invalidated_keys;
pub use respond::{respond, BodySlice, HitResponse};
pub use storable::{
    heuristically_cacheable, storability, storable_head, NotStorableReason, Storability,
};
pub use validate::{merge_not_modified, revalidation_request};

#[cfg(test)]
pub(crate) mod test_support {
    //! Heads from literal bytes, so tests read like the wire.

    use std::sync::Arc;
    use std::time::{Duration, SystemTime, UNIX_EPOCH};

    use sluice_http::{parse_request, parse_response, Limits, Parsed, RequestHead, ResponseHead};

    use crate::{CacheKey, EntryMeta, StoredEntry, Variant};

    /// 2026-01-01 00:00:00 UTC, the clock every test starts from.
    pub(crate) const T0: u64 = 1_767_225_600;

    pub(crate) fn at(secs: u64) -> SystemTime {
        UNIX_EPOCH + Duration::from_secs(secs)
    }

    pub(crate) fn request(raw: &str) -> RequestHead {
        match parse_request(raw.as_bytes(), &Limits::default()) {
            Ok(Parsed::Complete { head, .. }) => head,
            other => panic!("bad test request {raw:?}: {other:?}"),
        }
    }

    pub(crate) fn response(raw: &str) -> ResponseHead {
        match parse_response(raw.as_bytes(), &Limits::default()) {
            Ok(Parsed::Complete { head, .. }) => head,
            other => panic!("bad test response {raw:?}: {other:?}"),
        }
    }

    /// An entry for `http://h/a` received at [`T0`] with no delay and no Vary.
    pub(crate) fn entry(raw_response: &str, body: &[u8]) -> StoredEntry {
        StoredEntry {
            meta: EntryMeta {
                key: CacheKey::new("http", "h", 80, "/a"),
                variant: Variant::default(),
                head: response(raw_response),
                request_time: at(T0),
                response_time: at(T0),
                body_len: body.len() as u64,
            },
            body: Arc::new(body.to_vec()),
        }
    }
}
