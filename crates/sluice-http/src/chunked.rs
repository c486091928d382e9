//! [`ChunkedDecoder`]: an incremental scanner for the chunked transfer coding (RFC 9112 §7.1)
//! that parses only framing bytes, so chunk data can move without being looked at (later with
//! splice(2)).
//!
//! ```text
//! chunked-body = *chunk last-chunk trailer-section CRLF
//! chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
//! last-chunk   = 1*("0") [ chunk-ext ] CRLF
//! ```

use crate::syntax::{is_field_value_byte, is_ows, is_tchar};
use crate::{Limits, ParseError};

/// Longest chunk-size line, extensions included. Sizes need at most 16 hex digits; the rest
/// is room for extensions, which nobody uses at length.
pub const MAX_CHUNK_SIZE_LINE: usize = 4 * 1024;

/// At most 16 hex digits, so a chunk size always fits in a u64.
const MAX_CHUNK_SIZE_DIGITS: u8 = 16;

/// What the caller should do after [`ChunkedDecoder::advance`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChunkStep {
    /// The buffer ended inside framing: keep the unconsumed bytes and call again with more.
    NeedMore,
    /// The next `remaining` bytes of the stream are chunk data: move up to that many, then
    /// call [`ChunkedDecoder::consume_data`] with how many were moved.
    Data {
        /// Bytes of chunk data left in the current chunk, always at least 1.
        remaining: u64,
    },
    /// The body, trailer section included, ended after the consumed bytes.
    Done,
}

/// Where the decoder is in the chunked grammar.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Start of a chunk-size line: a hex digit must come.
    SizeStart,
    /// Inside chunk-size, `digits` read so far.
    Size { value: u64, digits: u8 },
    /// Whitespace after the size: only more whitespace or `;` may follow.
    SizeWhitespace { value: u64 },
    /// Inside chunk extensions, skipped up to CR.
    Extension { value: u64 },
    /// CR of the chunk-size line seen, LF must come.
    SizeLf { value: u64 },
    /// Inside chunk data.
    Data { remaining: u64 },
    /// After chunk data: CR must come.
    DataCr,
    /// After chunk data and CR: LF must come.
    DataLf,
    /// Start of a trailer field line, or of the final CRLF.
    TrailerLineStart,
    /// Inside a trailer field name.
    TrailerName,
    /// Inside a trailer field value.
    TrailerValue,
    /// CR ending a trailer field line seen, LF must come.
    TrailerLf,
    /// CR of the final empty line seen, LF must come.
    FinalLf,
    /// The body ended.
    Done,
}

/// Incremental chunked-body scanner (RFC 9112 §7.1):
///
/// ```text
/// chunked-body = *chunk last-chunk trailer-section CRLF
/// chunk        = chunk-size [ chunk-ext ] CRLF chunk-data CRLF
/// last-chunk   = 1*("0") [ chunk-ext ] CRLF
/// ```
///
/// Feed it the bytes after the head with [`advance`](Self::advance). It consumes framing
/// (chunk-size lines with extensions, the CRLF after data, the last chunk, the trailer section
/// and the final CRLF) and stops at data, which the caller moves itself and reports with
/// [`consume_data`](Self::consume_data). It holds no buffer: a line split across reads is
/// carried in its state, so any split of the stream gives the same result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkedDecoder {
    state: State,
    /// Bytes of the current chunk-size line so far.
    size_line_len: usize,
    /// Bytes of the trailer section so far.
    trailer_len: usize,
    /// Longest trailer section allowed.
    max_trailer_bytes: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ChunkedDecoder {
    /// A decoder at the start of a body, with the trailer section bounded like a default head.
    pub fn new() -> Self {
        Self::with_limits(&Limits::default())
    }

    /// A decoder whose trailer section is bounded by `limits.max_header_bytes`.
    pub fn with_limits(limits: &Limits) -> Self {
        Self {
            state: State::SizeStart,
            size_line_len: 0,
            trailer_len: 0,
            max_trailer_bytes: limits.max_header_bytes,
        }
    }

    /// Consumes framing bytes from the front of `buf` and says what comes next; see
    /// [`ChunkStep`]. Called in the data state it consumes nothing and returns the data left.
    pub fn advance(&mut self, buf: &[u8]) -> Result<(usize, ChunkStep), ParseError> {
        let mut consumed = 0;
        loop {
            match self.state {
                State::Data { remaining } => return Ok((consumed, ChunkStep::Data { remaining })),
                State::Done => return Ok((consumed, ChunkStep::Done)),
                _ => {}
            }
            let Some(&byte) = buf.get(consumed) else {
                return Ok((consumed, ChunkStep::NeedMore));
            };
            consumed += 1;
            self.step(byte)?;
        }
    }

    /// Records that `n` bytes of chunk data were moved. More than the remaining data is a
    /// caller bug: it is clamped (and asserted in debug builds).
    pub fn consume_data(&mut self, n: u64) {
        if let State::Data { remaining } = self.state {
            debug_assert!(
                n <= remaining,
                "consumed {n} bytes of a chunk with {remaining} left"
            );
            let left = remaining.saturating_sub(n);
            self.state = if left == 0 {
                State::DataCr
            } else {
                State::Data { remaining: left }
            };
        } else {
            debug_assert!(n == 0, "consume_data({n}) outside chunk data");
        }
    }

    /// True once the final CRLF was consumed.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Feeds one framing byte.
    fn step(&mut self, byte: u8) -> Result<(), ParseError> {
        if self.in_size_line() {
            self.size_line_len += 1;
            if self.size_line_len > MAX_CHUNK_SIZE_LINE {
                return Err(ParseError::ChunkSizeLineTooLong {
                    limit: MAX_CHUNK_SIZE_LINE,
                });
            }
        }
        if self.in_trailer() {
            self.trailer_len += 1;
            if self.trailer_len > self.max_trailer_bytes {
                return Err(ParseError::TrailerTooLarge {
                    limit: self.max_trailer_bytes,
                });
            }
        }
        self.state = match (self.state, byte) {
            (State::SizeStart, _) => match hex_value(byte) {
                Some(digit) => State::Size {
                    value: digit,
                    digits: 1,
                },
                None => return Err(ParseError::InvalidChunkSize),
            },
            (State::Size { value, digits }, _) => match hex_value(byte) {
                Some(_) if digits >= MAX_CHUNK_SIZE_DIGITS => {
                    return Err(ParseError::ChunkSizeOverflow)
                }
                // At most 16 digits, so value < 16^15 here and the result fits in a u64.
                Some(digit) => State::Size {
                    value: (value << 4) | digit,
                    digits: digits + 1,
                },
                None => end_of_size(value, byte)?,
            },
            // BWS before `;` (RFC 9112 §7.1.1); whitespace then CRLF, or inside the digits, no.
            (State::SizeWhitespace { value }, b' ' | b'\t') => State::SizeWhitespace { value },
            (State::SizeWhitespace { value }, b';') => State::Extension { value },
            (State::SizeWhitespace { .. }, _) => return Err(ParseError::InvalidChunkSize),
            (State::Extension { value }, b'\r') => State::SizeLf { value },
            (State::Extension { .. }, b'\n') => return Err(ParseError::BareLineFeed),
            (State::Extension { value }, _) if is_field_value_byte(byte) => {
                State::Extension { value }
            }
            (State::Extension { .. }, _) => return Err(ParseError::InvalidChunkExtension),
            (State::SizeLf { value: 0 }, b'\n') => State::TrailerLineStart,
            (State::SizeLf { value }, b'\n') => {
                self.size_line_len = 0;
                State::Data { remaining: value }
            }
            (State::SizeLf { .. }, _) => return Err(ParseError::BareCarriageReturn),
            (State::Data { .. } | State::Done, _) => {
                unreachable!("advance returns before feeding data or after the end")
            }
            (State::DataCr, b'\r') => State::DataLf,
            (State::DataLf, b'\n') => State::SizeStart,
            (State::DataCr | State::DataLf, _) => return Err(ParseError::MissingChunkDataCrlf),
            (State::TrailerLineStart, b'\r') => State::FinalLf,
            (State::TrailerLineStart, b' ' | b'\t') => return Err(ParseError::ObsoleteLineFolding),
            (State::TrailerLineStart | State::TrailerName, _) if is_tchar(byte) => {
                State::TrailerName
            }
            (State::TrailerName, b':') => State::TrailerValue,
            (State::TrailerName, b' ' | b'\t') => return Err(ParseError::WhitespaceBeforeColon),
            (State::TrailerValue, b'\r') => State::TrailerLf,
            (State::TrailerValue, _) if is_field_value_byte(byte) => State::TrailerValue,
            (State::TrailerLf, b'\n') => State::TrailerLineStart,
            (State::FinalLf, b'\n') => State::Done,
            (State::TrailerLf | State::FinalLf, _) => return Err(ParseError::BareCarriageReturn),
            (_, 0) => return Err(ParseError::NulByte),
            (_, b'\n') => return Err(ParseError::BareLineFeed),
            (State::TrailerLineStart | State::TrailerName | State::TrailerValue, _) => {
                return Err(ParseError::InvalidTrailer)
            }
        };
        Ok(())
    }

    fn in_size_line(&self) -> bool {
        matches!(
            self.state,
            State::SizeStart
                | State::Size { .. }
                | State::SizeWhitespace { .. }
                | State::Extension { .. }
                | State::SizeLf { .. }
        )
    }

    fn in_trailer(&self) -> bool {
        matches!(
            self.state,
            State::TrailerLineStart
                | State::TrailerName
                | State::TrailerValue
                | State::TrailerLf
                | State::FinalLf
        )
    }
}

/// What may follow the hex digits of a chunk size.
fn end_of_size(value: u64, byte: u8) -> Result<State, ParseError> {
    match byte {
        b';' => Ok(State::Extension { value }),
        b'\r' => Ok(State::SizeLf { value }),
        b'\n' => Err(ParseError::BareLineFeed),
        _ if is_ows(byte) => Ok(State::SizeWhitespace { value }),
        _ => Err(ParseError::InvalidChunkSize),
    }
}

fn hex_value(byte: u8) -> Option<u64> {
    char::from(byte).to_digit(16).map(u64::from)
}

/// Decodes a whole chunked body from the front of `buf`: the payload, and how many bytes of
/// `buf` the body took. For tests and the cache; the proxy streams with [`ChunkedDecoder`].
pub fn decode_chunked(buf: &[u8]) -> Result<(Vec<u8>, usize), ParseError> {
    let mut decoder = ChunkedDecoder::new();
    let mut payload = Vec::new();
    let mut pos = 0;
    loop {
        let (consumed, step) = decoder.advance(buf.get(pos..).unwrap_or_default())?;
        pos += consumed;
        match step {
            ChunkStep::NeedMore => return Err(ParseError::IncompleteChunkedBody),
            ChunkStep::Done => return Ok((payload, pos)),
            ChunkStep::Data { remaining } => {
                let available = buf.get(pos..).unwrap_or_default();
                let take = usize::try_from(remaining)
                    .unwrap_or(usize::MAX)
                    .min(available.len());
                if take == 0 {
                    return Err(ParseError::IncompleteChunkedBody);
                }
                payload.extend_from_slice(available.get(..take).unwrap_or_default());
                pos += take;
                decoder.consume_data(u64::try_from(take).unwrap_or(u64::MAX));
            }
        }
    }
}
