//! The disk-tier file format: one file per entry, self-describing and checksummed, so the
//! index can be rebuilt from the files alone and a torn write is caught.
//!
//! ```text
//! offset  size  field
//!      0     8  magic "SLUICEC\0"
//!      8     4  format version (1), little-endian like every integer here
//!     12     4  meta_len: bytes of the meta section
//!     16     8  body_len
//!     24     4  CRC-32 (IEEE) of the meta section followed by the body
//!     28     -  meta: key, request and response times, Vary fields, status, reason, fields
//! 28+meta_len   body, body_len bytes
//! ```
//!
//! Strings and byte strings in the meta section are a `u32` length then the bytes; times are
//! `u64` seconds and `u32` nanoseconds since the Unix epoch. A file whose length is not
//! `28 + meta_len + body_len`, whose magic or version differs, whose meta does not parse, or
//! whose checksum fails is not an entry.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use sluice_http::{Headers, ResponseHead, Version};

use crate::{CacheKey, EntryMeta, Variant};

/// First bytes of every entry file.
pub(super) const MAGIC: &[u8; 8] = b"SLUICEC\0";
/// Bumped whenever the layout changes; files of another version are dropped at start-up.
pub(super) const FORMAT_VERSION: u32 = 1;
/// Bytes before the meta section.
pub(super) const PREAMBLE_LEN: u64 = 28;
/// Largest meta section accepted: heads are capped at 64 KiB by the parser, so anything much
/// larger is damage, not data.
const MAX_META_LEN: u32 = 1 << 20;

/// The fixed-size start of a file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Preamble {
    pub(super) meta_len: u32,
    pub(super) body_len: u64,
    pub(super) checksum: u32,
}

impl Preamble {
    /// Total file length this preamble announces.
    pub(super) fn file_len(&self) -> u64 {
        PREAMBLE_LEN + u64::from(self.meta_len) + self.body_len
    }

    pub(super) fn encode(&self) -> [u8; PREAMBLE_LEN as usize] {
        let mut out = [0; PREAMBLE_LEN as usize];
        out[..8].copy_from_slice(MAGIC);
        out[8..12].copy_from_slice(&FORMAT_VERSION.to_le_bytes());
        out[12..16].copy_from_slice(&self.meta_len.to_le_bytes());
        out[16..24].copy_from_slice(&self.body_len.to_le_bytes());
        out[24..28].copy_from_slice(&self.checksum.to_le_bytes());
        out
    }

    pub(super) fn decode(bytes: &[u8]) -> Result<Self, &'static str> {
        let mut reader = Reader(bytes);
        if reader.take(8)? != MAGIC {
            return Err("bad magic");
        }
        if reader.u32()? != FORMAT_VERSION {
            return Err("unknown format version");
        }
        let meta_len = reader.u32()?;
        if meta_len > MAX_META_LEN {
            return Err("meta section too large");
        }
        Ok(Self {
            meta_len,
            body_len: reader.u64()?,
            checksum: reader.u32()?,
        })
    }
}

/// Serializes everything but the body.
pub(super) fn encode_meta(meta: &EntryMeta) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    put_bytes(&mut out, meta.key.as_str().as_bytes());
    put_time(&mut out, meta.request_time);
    put_time(&mut out, meta.response_time);
    put_u32(&mut out, meta.variant.fields().len());
    for (name, value) in meta.variant.fields() {
        put_bytes(&mut out, name.as_bytes());
        match value {
            Some(value) => {
                out.push(1);
                put_bytes(&mut out, value);
            }
            None => out.push(0),
        }
    }
    out.push(match meta.head.version {
        Version::Http10 => 0,
        Version::Http11 => 1,
    });
    out.extend_from_slice(&meta.head.status.to_le_bytes());
    put_bytes(&mut out, meta.head.reason.as_bytes());
    put_u32(&mut out, meta.head.headers.len());
    for field in meta.head.headers.iter() {
        put_bytes(&mut out, field.name.as_bytes());
        put_bytes(&mut out, &field.value);
    }
    out
}

/// Parses a meta section; `body_len` comes from the preamble.
pub(super) fn decode_meta(bytes: &[u8], body_len: u64) -> Result<EntryMeta, &'static str> {
    let mut reader = Reader(bytes);
    let key = CacheKey::from_text(reader.string()?).ok_or("invalid key")?;
    let request_time = reader.time()?;
    let response_time = reader.time()?;
    let mut fields = Vec::new();
    for _ in 0..reader.u32()? {
        let name = reader.string()?.to_owned();
        let value = match reader.take(1)? {
            [0] => None,
            [1] => Some(reader.bytes()?.to_vec()),
            _ => return Err("invalid Vary presence flag"),
        };
        fields.push((name, value));
    }
    let version = match reader.take(1)? {
        [0] => Version::Http10,
        [1] => Version::Http11,
        _ => return Err("invalid HTTP version"),
    };
    let status = u16::from_le_bytes(reader.array()?);
    let reason = reader.string()?.to_owned();
    let mut headers = Headers::new();
    for _ in 0..reader.u32()? {
        let name = reader.string()?;
        let value = reader.bytes()?;
        headers.append(name, value);
    }
    if !reader.0.is_empty() {
        return Err("trailing bytes after meta");
    }
    Ok(EntryMeta {
        key,
        variant: Variant::from_fields(fields),
        head: ResponseHead {
            version,
            status,
            reason,
            headers,
        },
        request_time,
        response_time,
        body_len,
    })
}

fn put_u32(out: &mut Vec<u8>, value: usize) {
    // Heads are bounded far below 4 GiB by the parser's limits; saturate rather than wrap.
    let value = u32::try_from(value).unwrap_or(u32::MAX);
    out.extend_from_slice(&value.to_le_bytes());
}

fn put_bytes(out: &mut Vec<u8>, bytes: &[u8]) {
    put_u32(out, bytes.len());
    out.extend_from_slice(bytes);
}

fn put_time(out: &mut Vec<u8>, time: SystemTime) {
    let since = time.duration_since(UNIX_EPOCH).unwrap_or(Duration::ZERO);
    out.extend_from_slice(&since.as_secs().to_le_bytes());
    out.extend_from_slice(&since.subsec_nanos().to_le_bytes());
}

/// A cursor over untrusted bytes: every read is bounds-checked.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], &'static str> {
        if self.0.len() < n {
            return Err("truncated meta");
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Ok(head)
    }

    fn array<const N: usize>(&mut self) -> Result<[u8; N], &'static str> {
        self.take(N)?.try_into().map_err(|_| "truncated meta")
    }

    fn u32(&mut self) -> Result<u32, &'static str> {
        Ok(u32::from_le_bytes(self.array()?))
    }

    fn u64(&mut self) -> Result<u64, &'static str> {
        Ok(u64::from_le_bytes(self.array()?))
    }

    fn bytes(&mut self) -> Result<&'a [u8], &'static str> {
        let len = usize::try_from(self.u32()?).map_err(|_| "length overflow")?;
        self.take(len)
    }

    fn string(&mut self) -> Result<&'a str, &'static str> {
        std::str::from_utf8(self.bytes()?).map_err(|_| "string is not UTF-8")
    }

    fn time(&mut self) -> Result<SystemTime, &'static str> {
        let secs = self.u64()?;
        let nanos = self.u32()?;
        if nanos >= 1_000_000_000 {
            return Err("invalid nanoseconds");
        }
        UNIX_EPOCH
            .checked_add(Duration::new(secs, nanos))
            .ok_or("time out of range")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::test_support::entry;

    #[test]
    fn meta_round_trips() {
        let mut stored = entry(
            "HTTP/1.1 404 Gone Away\r\nETag: \"x\"\r\nVary: A\r\n\r\n",
            b"b",
        );
        stored.meta.variant =
            Variant::from_fields(vec![("a".into(), Some(b"1".to_vec())), ("b".into(), None)]);
        let bytes = encode_meta(&stored.meta);
        assert_eq!(decode_meta(&bytes, 1), Ok(stored.meta));
    }

    #[test]
    fn truncated_meta_is_refused_at_every_length() {
        let bytes = encode_meta(&entry("HTTP/1.1 200 OK\r\nA: b\r\n\r\n", b"").meta);
        for len in 0..bytes.len() {
            assert!(
                decode_meta(&bytes[..len], 0).is_err(),
                "accepted {len} bytes"
            );
        }
    }

    #[test]
    fn preamble_round_trips_and_checks_magic() {
        let preamble = Preamble {
            meta_len: 10,
            body_len: 20,
            checksum: 0xdead_beef,
        };
        let mut bytes = preamble.encode();
        assert_eq!(Preamble::decode(&bytes), Ok(preamble));
        assert_eq!(preamble.file_len(), 58);
        bytes[0] = b'X';
        assert_eq!(Preamble::decode(&bytes), Err("bad magic"));
    }
}
