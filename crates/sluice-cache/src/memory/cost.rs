//! What an entry costs the memory budget, and its GDSF priority.
//!
//! # The byte charge
//!
//! The budget is meant to bound the process's memory, so an entry is charged for everything it
//! makes the allocator hand out, not just its body:
//!
//! - the body, plus the `Arc<Vec<u8>>` around it (counters and `Vec` header, 40 bytes);
//! - the head: each field's name and value bytes plus its `HeaderField` (two `Vec`/`String`
//!   headers, 48 bytes), the reason phrase, the key (held twice: in the entry and as the
//!   index's map key) and the Vary values;
//! - the `StoredEntry` itself inside its `Arc` (counters included);
//! - index overhead: a slot in the entry map and in the key map (`HashMap` keeps at most 7/8
//!   of its buckets full, plus one control byte per bucket), the variant list, and a node share
//!   in the GDSF queue (`BTreeSet` nodes hold 11 keys and run about two-thirds full);
//! - [`ALLOCATION_OVERHEAD`] bytes per heap allocation.
//!
//! The figures come from `size_of` on this build, so they follow the struct layouts. What they
//! cannot see is fragmentation and the allocator's size classes, hence the per-allocation
//! estimate: glibc's malloc on 64-bit adds an 8-byte chunk header and rounds the chunk up to
//! 16 bytes, so a small request costs its size plus 8 to 23 bytes, about 16 on average.
//! Fragmentation across many fills is not counted; leave the budget some headroom below the
//! memory the worker may use.

use std::mem::size_of;

use crate::{CacheKey, StoredEntry};

/// Bytes the allocator spends beyond each request (header plus rounding), estimated above.
pub(super) const ALLOCATION_OVERHEAD: u64 = 16;

/// Fixed-point scale of GDSF priorities: `frequency * SCALE / size` keeps precision for
/// multi-megabyte objects without floats, so priorities are totally ordered.
const PRIORITY_SCALE: u64 = 1 << 32;

/// Frequencies stop counting here; past it an object is simply "hot", and the cap keeps
/// `frequency * PRIORITY_SCALE` far from overflow.
pub(super) const MAX_FREQUENCY: u64 = 1 << 20;

/// The bytes `entry` is charged against the budget while it is in the store.
pub(super) fn entry_cost(entry: &StoredEntry) -> u64 {
    let meta = &entry.meta;
    let mut allocations: u64 = 0;
    let mut bytes: u64 = 0;

    // Body buffer, and the Arc holding its Vec: strong and weak counters, pointer, capacity,
    // length.
    bytes += meta.body_len + 16 + size_of::<Vec<u8>>() as u64;
    allocations += 2;

    // The entry in its Arc.
    bytes += size_of::<StoredEntry>() as u64 + 16;
    allocations += 1;

    // Key text, twice (entry and index map key).
    bytes += 2 * meta.key.as_str().len() as u64;
    allocations += 2;

    // Head: reason, the field vector, each field's name and value.
    bytes += meta.head.reason.len() as u64;
    allocations += 2;
    for field in meta.head.headers.iter() {
        bytes += size_of::<sluice_http::HeaderField>() as u64;
        bytes += (field.name.len() + field.value.len()) as u64;
        allocations += 2;
    }

    // Vary values: each name and value plus its tuple.
    bytes += meta.variant.heap_bytes() as u64;
    allocations += 2 * meta.variant.fields().len() as u64 + 1;

    // Index: entry-map slot, key-map slot and its variant list, queue share.
    bytes += hash_slot::<u64, super::Slot>();
    bytes += hash_slot::<CacheKey, Vec<u64>>() + size_of::<u64>() as u64;
    bytes += (size_of::<(u64, u64)>() as u64) * 3 / 2;
    allocations += 1;

    bytes + allocations * ALLOCATION_OVERHEAD
}

/// Bytes one `HashMap<K, V>` entry takes, with the load factor and control byte.
fn hash_slot<K, V>() -> u64 {
    let bucket = size_of::<(K, V)>() as u64 + 1;
    bucket * 8 / 7
}

/// GDSF priority (Cherkasova 1998): `clock + frequency * cost / size`, with cost = 1 so the
/// policy maximizes the hit ratio (a cost of `size` would turn it into LFU with aging and
/// chase byte hit ratio instead).
pub(super) fn priority(clock: u64, frequency: u64, size: u64) -> u64 {
    let gain = frequency.min(MAX_FREQUENCY) * PRIORITY_SCALE / size.max(1);
    clock.saturating_add(gain)
}
