//! HTTP/1.1 message parsing and framing (RFC 9110, RFC 9112) for Sluice, strict enough that a
//! client can't smuggle a request past the proxy.
//!
//! # Where it sits
//!
//! `sluice-proxy` reads bytes from a socket and hands them here: this crate parses heads,
//! says where each body ends, scans chunked framing and writes heads back out. It calls
//! `httparse` for tokenizing and nothing else; it never touches a socket or a clock, so
//! everything is tested and fuzzed on byte slices.
//!
//! ```text
//! client bytes --> parse_request --> RequestHead --body_framing--> Empty | Length | Chunked
//!                                        |                                         |
//!                          remove_hop_by_hop, write_to              ChunkedDecoder::advance
//!                                        v                          (framing parsed, data moved
//!                                  upstream bytes                    opaquely by the engine)
//! ```
//!
//! # Types to start with
//!
//! - [`parse_request`] / [`parse_response`] give a [`RequestHead`] / [`ResponseHead`], or
//!   [`Parsed::Partial`] while the head is still arriving, or a [`ParseError`] whose
//!   [`status`](ParseError::status) is the answer to send.
//! - [`BodyFraming`] from [`RequestHead::body_framing`] and [`ResponseHead::body_framing`].
//! - [`ChunkedDecoder`] for chunked bodies, fed any split of the stream.
//!
//! # What it does not do
//!
//! No I/O, no buffering (callers keep their buffer and parse again when more arrives; heads
//! are bounded by [`Limits`], so re-scanning is cheap), no routing, no HTTP/2, no content
//! codings, no unfolding of obs-fold (it is refused). Only `http` absolute-form targets are
//! accepted: a forward proxy sees `https` through CONNECT.
//!
//! # Invariants
//!
//! - Input never panics: no `unwrap`, unchecked indexing or narrowing casts on peer bytes.
//! - A request that [`parse_request`] accepts has one unambiguous body framing: no
//!   Content-Length with Transfer-Encoding, no disagreeing Content-Lengths, only a single
//!   final `chunked`, no TE in HTTP/1.0, no bare CR/LF, NUL or obs-fold in the head.
//! - No feature flags.
//!
//! # Example
//!
//! ```
//! use sluice_http::{parse_request, BodyFraming, Limits, Parsed};
//!
//! let buf = b"POST /upload HTTP/1.1\r\nHost: example.com\r\nContent-Length: 5\r\n\r\nhello";
//! let Parsed::Complete { head, len } = parse_request(buf, &Limits::default())? else {
//!     panic!("head is complete");
//! };
//! assert_eq!(head.body_framing()?, BodyFraming::Length(5));
//! assert_eq!(&buf[len..], b"hello");
//! # Ok::<(), sluice_http::ParseError>(())
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

mod chunked;
mod error;
mod framing;
mod head;
mod headers;
mod hop;
mod method;
mod scan;
mod syntax;
mod target;
mod write;

pub use chunked::{decode_chunked, ChunkStep, ChunkedDecoder, MAX_CHUNK_SIZE_LINE};
pub use error::ParseError;
pub use framing::BodyFraming;
pub use head::{parse_request, parse_response, Limits, Parsed, RequestHead, ResponseHead, Version};
pub use headers::{HeaderField, Headers};
pub use hop::remove_hop_by_hop;
pub use method::Method;
pub use target::{Authority, RequestTarget};

#[cfg(test)]
mod tests;
