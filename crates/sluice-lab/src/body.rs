//! Deterministic response bodies: the origin serves them, the load generator checks them.
//!
//! A body is a window into one fixed pseudo-random block of [`PERIOD`] bytes, read as a ring:
//! byte `i` of the body for request target `t` is `block[(start(t) + i) % PERIOD]`, where
//! `start(t)` is a hash of the target. So
//!
//! - the origin does no per-byte work: it writes slices of a precomputed buffer that holds the
//!   block twice, so any window of up to [`PERIOD`] bytes is one contiguous slice;
//! - the client verifies a body with `memcmp` against the same slices, storing nothing;
//! - two targets give different bodies (different starts), and a proxy that drops, repeats or
//!   reorders bytes is caught, because [`PERIOD`] is prime: no shift by a power-of-two block
//!   size, or any shift shorter than the block, maps the ring onto itself.

use std::sync::OnceLock;

/// Length of the pseudo-random block; prime (2^20 - 3) so that no buffer-sized shift aligns.
pub const PERIOD: usize = 1_048_573;

/// The precomputed block, stored twice in a row.
#[derive(Debug)]
pub struct BodyPattern {
    doubled: Box<[u8]>,
}

impl BodyPattern {
    /// The process-wide pattern, built on first use (about 2 MiB, a few milliseconds).
    ///
    /// A shared immutable table rather than a value passed down: it is a constant of the
    /// protocol between origin and client, the same in every process, like a CRC table.
    pub fn shared() -> &'static BodyPattern {
        static PATTERN: OnceLock<BodyPattern> = OnceLock::new();
        PATTERN.get_or_init(BodyPattern::build)
    }

    fn build() -> BodyPattern {
        // splitmix64 from a fixed seed: fast, and its output has no short cycles.
        let mut state: u64 = 0x5eed_5eed_5eed_5eed;
        let mut block = Vec::with_capacity(PERIOD * 2);
        while block.len() < PERIOD {
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            let take = (PERIOD - block.len()).min(8);
            block.extend_from_slice(&z.to_le_bytes()[..take]);
        }
        block.extend_from_within(..PERIOD);
        BodyPattern {
            doubled: block.into_boxed_slice(),
        }
    }

    /// Where in the ring the body for `target` (origin-form path and query) starts.
    pub fn start_offset(target: &str) -> usize {
        let hash = fnv1a64(target.as_bytes());
        // The remainder is below PERIOD, which fits in usize on every supported target.
        usize::try_from(hash % PERIOD as u64).expect("remainder below PERIOD fits usize")
    }

    /// The body of `len` bytes starting at ring offset `start`, as contiguous slices of at most
    /// `max_slice` bytes each (`max_slice` is clamped to 1..=[`PERIOD`]).
    pub fn slices(&self, start: usize, len: u64, max_slice: usize) -> BodySlices<'_> {
        BodySlices {
            pattern: self,
            offset: start % PERIOD,
            remaining: len,
            max_slice: max_slice.clamp(1, PERIOD),
        }
    }

    /// `len` bytes (at most [`PERIOD`]) of the ring from `offset`, as one slice.
    fn window(&self, offset: usize, len: usize) -> &[u8] {
        let offset = offset % PERIOD;
        &self.doubled[offset..offset + len.min(PERIOD)]
    }
}

/// Iterator over the slices of one body; see [`BodyPattern::slices`].
#[derive(Debug)]
pub struct BodySlices<'a> {
    pattern: &'a BodyPattern,
    offset: usize,
    remaining: u64,
    max_slice: usize,
}

impl<'a> Iterator for BodySlices<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        if self.remaining == 0 {
            return None;
        }
        let n = usize::try_from(self.remaining)
            .unwrap_or(usize::MAX)
            .min(self.max_slice);
        let slice = self.pattern.window(self.offset, n);
        self.offset = (self.offset + n) % PERIOD;
        self.remaining -= n as u64;
        Some(slice)
    }
}

/// A body byte that differs from the expected pattern.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BodyMismatch {
    /// Offset of the first wrong byte from the start of the body.
    pub at: u64,
}

/// Checks a body piece by piece as it arrives; see the module docs.
#[derive(Debug)]
pub struct BodyVerifier {
    pattern: &'static BodyPattern,
    offset: usize,
    received: u64,
}

impl BodyVerifier {
    /// A verifier for the body the origin sends for `target` (origin-form path and query).
    pub fn new(target: &str) -> BodyVerifier {
        BodyVerifier {
            pattern: BodyPattern::shared(),
            offset: BodyPattern::start_offset(target),
            received: 0,
        }
    }

    /// Checks the next `data` bytes of the body.
    pub fn check(&mut self, mut data: &[u8]) -> Result<(), BodyMismatch> {
        while !data.is_empty() {
            let n = data.len().min(PERIOD);
            let expected = self.pattern.window(self.offset, n);
            if expected != &data[..n] {
                let first = expected
                    .iter()
                    .zip(data)
                    .position(|(a, b)| a != b)
                    .unwrap_or(0);
                return Err(BodyMismatch {
                    at: self.received + first as u64,
                });
            }
            self.offset = (self.offset + n) % PERIOD;
            self.received += n as u64;
            data = &data[n..];
        }
        Ok(())
    }

    /// Body bytes checked so far.
    pub fn received(&self) -> u64 {
        self.received
    }
}

/// FNV-1a, 64 bits: cheap, stable across versions and platforms (unlike `DefaultHasher`).
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for &b in bytes {
        hash ^= u64::from(b);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(target: &str, len: u64, max_slice: usize) -> Vec<u8> {
        let pattern = BodyPattern::shared();
        let start = BodyPattern::start_offset(target);
        pattern
            .slices(start, len, max_slice)
            .flatten()
            .copied()
            .collect()
    }

    #[test]
    fn slices_cover_the_length_across_the_ring_boundary() {
        let len = (PERIOD * 2 + 12_345) as u64;
        let bytes = body("/size/x", len, 64 * 1024);
        assert_eq!(bytes.len() as u64, len);
        assert_eq!(&bytes[..1000], &bytes[PERIOD..PERIOD + 1000]);
    }

    #[test]
    fn slice_size_does_not_change_the_bytes() {
        assert_eq!(body("/a", 300_000, 7), body("/a", 300_000, PERIOD));
    }

    #[test]
    fn verifier_accepts_the_body_in_any_split() {
        let bytes = body("/size/100000?cache=60", 100_000, PERIOD);
        let mut verifier = BodyVerifier::new("/size/100000?cache=60");
        for piece in bytes.chunks(4093) {
            verifier.check(piece).unwrap();
        }
        assert_eq!(verifier.received(), 100_000);
    }

    #[test]
    fn verifier_catches_a_flipped_byte() {
        let mut bytes = body("/flip", 50_000, PERIOD);
        bytes[31_337] ^= 0x01;
        let mut verifier = BodyVerifier::new("/flip");
        let result = bytes
            .chunks(8192)
            .try_for_each(|piece| verifier.check(piece));
        assert_eq!(result, Err(BodyMismatch { at: 31_337 }));
    }

    #[test]
    fn verifier_catches_another_targets_body() {
        let bytes = body("/one", 4096, PERIOD);
        let mut verifier = BodyVerifier::new("/two");
        assert!(verifier.check(&bytes).is_err());
    }

    #[test]
    fn verifier_catches_a_dropped_block() {
        let mut bytes = body("/drop", 200_000, PERIOD);
        bytes.drain(65_536..65_536 + 16_384);
        let mut verifier = BodyVerifier::new("/drop");
        assert_eq!(verifier.check(&bytes).map_err(|e| e.at), Err(65_536));
    }
}
