//! The one error type of the crate, [`ParseError`], and the status each case answers with.

/// Why a head, a body framing or a chunked body was refused.
///
/// Every variant names one rule; most are the strictness a proxy needs against request
/// smuggling (RFC 9112 §11.2), where two parsers disagreeing about a message boundary lets a
/// client hide a request inside another. [`ParseError::status`] gives the status to answer a
/// client with; an error in an upstream's response is the upstream's fault and the proxy
/// answers 502 instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ParseError {
    /// The request line is longer than [`Limits::max_request_line`](crate::Limits), detected
    /// as soon as the buffer holds that many bytes without a line end.
    #[error(
        "request line longer than {limit} bytes (raise limits.max_request_line if legitimate)"
    )]
    RequestLineTooLong {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The head is longer than [`Limits::max_header_bytes`](crate::Limits), detected as soon
    /// as the buffer holds that many bytes without the empty line that ends the head.
    #[error("head longer than {limit} bytes (raise limits.max_header_bytes if legitimate)")]
    HeadersTooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// The head has more field lines than [`Limits::max_headers`](crate::Limits).
    #[error("more than {limit} header fields (raise limits.max_headers if legitimate)")]
    TooManyHeaders {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A NUL byte in the head or in chunk framing: never valid, and some parsers stop at it.
    #[error("NUL byte in message framing")]
    NulByte,
    /// A CR not followed by LF: some parsers end a line there, others don't (RFC 9112 §2.2).
    #[error("bare CR in message framing")]
    BareCarriageReturn,
    /// An LF not preceded by CR in a request head or chunk framing. RFC 9112 §2.2 lets a
    /// recipient accept it; we don't, because a peer that doesn't would see other lines.
    #[error("bare LF in message framing (lines must end with CRLF)")]
    BareLineFeed,
    /// A field line starting with whitespace, i.e. a continuation of the previous one
    /// (obs-fold, RFC 9112 §5.2): rejected rather than unfolded.
    #[error("obsolete line folding in a field")]
    ObsoleteLineFolding,
    /// Whitespace between a field name and its colon (RFC 9112 §5.1 requires a 400).
    #[error("whitespace between field name and colon")]
    WhitespaceBeforeColon,
    /// A field line with no colon, an empty name, or a name with non-token characters.
    #[error("invalid field name")]
    InvalidHeaderName,
    /// A field value with a control character other than HTAB.
    #[error("invalid field value in {name}")]
    InvalidHeaderValue {
        /// The field name, as received.
        name: String,
    },
    /// The request line is not `method SP request-target SP HTTP-version`.
    #[error("malformed request line")]
    MalformedRequestLine,
    /// The status line is not `HTTP-version SP 3DIGIT [SP reason]`.
    #[error("malformed status line")]
    MalformedStatusLine,
    /// The method is not a token (RFC 9110 §9.1).
    #[error("invalid method token")]
    InvalidMethod,
    /// The request target is in none of the four forms, or in a form the method does not allow
    /// (authority-form is for CONNECT only, asterisk-form for OPTIONS only), or it holds
    /// characters a URI can't (controls, space, non-ASCII, `#`).
    #[error("invalid request target: {reason}")]
    InvalidTarget {
        /// Which rule the target broke.
        reason: &'static str,
    },
    /// An absolute-form target with a scheme other than `http`. `https` targets reach a
    /// forward proxy through CONNECT instead.
    #[error(
        "unsupported scheme in absolute-form target: {scheme} (only http; use CONNECT for https)"
    )]
    UnsupportedScheme {
        /// The scheme as received.
        scheme: String,
    },
    /// An HTTP version other than 1.0 and 1.1.
    #[error("unsupported HTTP version (only HTTP/1.0 and HTTP/1.1)")]
    UnsupportedVersion,
    /// An HTTP/1.1 request without Host (RFC 9112 §3.2 requires a 400).
    #[error("HTTP/1.1 request without Host")]
    MissingHost,
    /// A request with more than one Host field (RFC 9112 §3.2 requires a 400).
    #[error("more than one Host field")]
    DuplicateHost,
    /// A Host value that is not `uri-host [":" port]`.
    #[error("invalid Host value")]
    InvalidHost,
    /// Both Content-Length and Transfer-Encoding: two framings disagree about where the body
    /// ends, the classic smuggling vector (RFC 9112 §6.3).
    #[error("message has both Content-Length and Transfer-Encoding")]
    ContentLengthWithTransferEncoding,
    /// Two Content-Length values differ; either could be the one a peer believes.
    #[error("Content-Length values differ: {first} and {second}")]
    DuplicateContentLength {
        /// The first value seen.
        first: u64,
        /// The first value that differs from it.
        second: u64,
    },
    /// A Content-Length that is not 1*DIGIT, or does not fit in 64 bits.
    #[error("invalid Content-Length")]
    InvalidContentLength,
    /// Transfer-Encoding in an HTTP/1.0 message: framing is faulty (RFC 9112 §6.1).
    #[error("Transfer-Encoding in an HTTP/1.0 message")]
    TransferEncodingInHttp10,
    /// A request whose transfer codings are anything but a single `chunked` (RFC 9112 §6.1
    /// suggests 501 for codings we don't implement).
    #[error("unsupported transfer coding (only a single chunked)")]
    UnsupportedTransferEncoding,
    /// Transfer-Encoding whose final coding is not `chunked` in a request, that applies
    /// `chunked` twice, or is empty (RFC 9112 §6.1, §6.3).
    #[error("invalid Transfer-Encoding: chunked must be the final coding, applied once")]
    InvalidTransferEncoding,
    /// A chunk size that is empty or not hexadecimal, or has whitespace inside.
    #[error("invalid chunk size")]
    InvalidChunkSize,
    /// A chunk size over 16 hex digits, i.e. possibly over 64 bits.
    #[error("chunk size too large")]
    ChunkSizeOverflow,
    /// A chunk-size line (with extensions) longer than the decoder's limit.
    #[error("chunk size line longer than {limit} bytes")]
    ChunkSizeLineTooLong {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// A chunk extension with a control character.
    #[error("invalid chunk extension")]
    InvalidChunkExtension,
    /// Chunk data not followed by CRLF: the chunk size lied, or the body is not chunked.
    #[error("missing CRLF after chunk data")]
    MissingChunkDataCrlf,
    /// A malformed trailer field line.
    #[error("invalid trailer field")]
    InvalidTrailer,
    /// A trailer section longer than the decoder's limit.
    #[error("trailer section longer than {limit} bytes")]
    TrailerTooLarge {
        /// The limit that was exceeded.
        limit: usize,
    },
    /// [`decode_chunked`](crate::decode_chunked) reached the end of its input before the
    /// last chunk and trailer section.
    #[error("chunked body ends before its last chunk")]
    IncompleteChunkedBody,
    /// httparse refused a head that our own checks passed; kept so no case is lost.
    #[error("malformed head: {0}")]
    Malformed(#[from] httparse::Error),
}

impl ParseError {
    /// The status to answer a client with when its request fails this way: 414 for a long
    /// request line, 431 for large heads, 501 for transfer codings we don't implement, 505
    /// for other HTTP versions, 400 otherwise.
    pub fn status(&self) -> u16 {
        match self {
            ParseError::RequestLineTooLong { .. } => 414,
            ParseError::HeadersTooLarge { .. } | ParseError::TooManyHeaders { .. } => 431,
            ParseError::UnsupportedTransferEncoding => 501,
            ParseError::UnsupportedVersion => 505,
            _ => 400,
        }
    }
}
