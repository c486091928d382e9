//! Moving bodies between client and upstream once the heads are known: Content-Length bodies go
//! whole to the engine; chunked bodies are framed here and their chunk data handed to the
//! engine; bytes already read past a head travel as the engine's prefix.

use std::io;
use std::time::Duration;

use sluice_http::{ChunkStep, ChunkedDecoder, Limits, ParseError};
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;
use sluice_splice::{Ending, Engine, EngineStats, Limit, TransferRequest};

/// What a body transfer needs besides its two sockets.
#[derive(Debug, Clone, Copy)]
pub(crate) struct BodyContext<'a> {
    pub engine: &'a Engine,
    pub stats: &'a EngineStats,
    pub idle_timeout: Duration,
    pub limits: &'a Limits,
    pub read_size: usize,
}

/// Why a body did not arrive whole.
#[derive(Debug)]
pub(crate) enum BodyFailure {
    /// The source's chunked framing is invalid.
    Parse(ParseError),
    /// The source closed before the end of the body.
    SourceClosed,
    /// Reading the source failed.
    Source(io::Error),
    /// Writing to the destination failed.
    Destination(io::Error),
    /// Nothing moved for the idle timeout.
    Idle,
}

/// Where a chunked body goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChunkedMode {
    /// Framing and all: the destination speaks HTTP/1.1 too.
    Verbatim,
    /// Chunk data only: an HTTP/1.0 client gets a close-delimited body.
    PayloadOnly,
}

/// The result of moving one body: bytes written to the destination, and how it ended.
#[derive(Debug)]
pub(crate) struct BodyOutcome {
    pub written: u64,
    pub result: Result<(), BodyFailure>,
}

/// Sends `prefix` and then a body framed by `limit`: `carry` holds bytes already read from
/// `src`; those of the body are taken from it, the rest stay (a pipelined next request).
pub(crate) async fn forward_plain(
    cx: BodyContext<'_>,
    src: &TcpStream,
    dst: &TcpStream,
    carry: &mut Vec<u8>,
    mut prefix: Vec<u8>,
    limit: Limit,
) -> BodyOutcome {
    let from_carry = match limit {
        Limit::Bytes(n) => usize::try_from(n).unwrap_or(usize::MAX).min(carry.len()),
        Limit::UntilClose => carry.len(),
    };
    prefix.extend(carry.drain(..from_carry));
    let limit = match limit {
        Limit::Bytes(n) => Limit::Bytes(n - from_carry as u64),
        Limit::UntilClose => Limit::UntilClose,
    };
    let request = TransferRequest {
        prefix: &prefix,
        limit,
        idle_timeout: cx.idle_timeout,
    };
    let outcome = cx.engine.transfer(src, dst, request, cx.stats).await;
    // Bytes the engine read past the body (sockmap only) come next on `src`; carry held only
    // body bytes here, so they go at its end.
    carry.extend_from_slice(&outcome.overread);
    let written = outcome.forwarded
        + if outcome.ending == Ending::Done || outcome.forwarded > 0 {
            prefix.len() as u64
        } else {
            0
        };
    BodyOutcome {
        written,
        result: ending_to_result(outcome.ending, outcome.error),
    }
}

pub(crate) fn ending_to_result(
    ending: Ending,
    error: Option<io::Error>,
) -> Result<(), BodyFailure> {
    let error = || error.unwrap_or_else(|| io::ErrorKind::Other.into());
    match ending {
        Ending::Done => Ok(()),
        Ending::SourceClosedEarly => Err(BodyFailure::SourceClosed),
        Ending::SourceError => Err(BodyFailure::Source(error())),
        Ending::DestinationAborted => Err(BodyFailure::Destination(error())),
        Ending::Idle => Err(BodyFailure::Idle),
    }
}

/// Sends `prefix` and then a chunked body from `src`, parsing only the framing; runs of chunk
/// data not yet read go to the engine whole. `carry` works as in [`forward_plain`].
pub(crate) async fn forward_chunked(
    cx: BodyContext<'_>,
    src: &TcpStream,
    dst: &TcpStream,
    carry: &mut Vec<u8>,
    prefix: Vec<u8>,
    mode: ChunkedMode,
) -> BodyOutcome {
    let mut state = ChunkedForward {
        out: prefix,
        written: 0,
    };
    let result = state.run(cx, src, dst, carry, mode).await;
    BodyOutcome {
        written: state.written,
        result,
    }
}

struct ChunkedForward {
    /// Bytes decided but not yet written.
    out: Vec<u8>,
    written: u64,
}

impl ChunkedForward {
    async fn run(
        &mut self,
        cx: BodyContext<'_>,
        src: &TcpStream,
        dst: &TcpStream,
        carry: &mut Vec<u8>,
        mode: ChunkedMode,
    ) -> Result<(), BodyFailure> {
        let mut decoder = ChunkedDecoder::with_limits(cx.limits);
        let mut input = std::mem::take(carry);
        loop {
            let mut pos = 0;
            let done = loop {
                let rest = input.get(pos..).unwrap_or_default();
                let (framing, step) = decoder.advance(rest).map_err(BodyFailure::Parse)?;
                if mode == ChunkedMode::Verbatim {
                    self.out
                        .extend_from_slice(rest.get(..framing).unwrap_or_default());
                }
                pos += framing;
                match step {
                    ChunkStep::NeedMore => break false,
                    ChunkStep::Done => break true,
                    ChunkStep::Data { remaining } => {
                        let available = input.len() - pos;
                        if available == 0 {
                            // Nothing of this chunk read yet: the engine moves it whole, with
                            // the pending framing as its prefix.
                            self.engine_data(cx, src, dst, remaining, &mut input)
                                .await?;
                            decoder.consume_data(remaining);
                            continue;
                        }
                        let take = usize::try_from(remaining)
                            .unwrap_or(usize::MAX)
                            .min(available);
                        self.out
                            .extend_from_slice(input.get(pos..pos + take).unwrap_or_default());
                        decoder.consume_data(take as u64);
                        pos += take;
                    }
                }
            };
            input.drain(..pos);
            self.flush(cx, dst).await?;
            if done {
                *carry = input;
                return Ok(());
            }
            read_more(cx, src, &mut input).await?;
        }
    }

    async fn engine_data(
        &mut self,
        cx: BodyContext<'_>,
        src: &TcpStream,
        dst: &TcpStream,
        remaining: u64,
        input: &mut Vec<u8>,
    ) -> Result<(), BodyFailure> {
        let request = TransferRequest {
            prefix: &self.out,
            limit: Limit::Bytes(remaining),
            idle_timeout: cx.idle_timeout,
        };
        let outcome = cx.engine.transfer(src, dst, request, cx.stats).await;
        // Bytes the engine read past the chunk data (sockmap only): the framing that follows.
        input.extend_from_slice(&outcome.overread);
        self.written += outcome.forwarded;
        if outcome.ending == Ending::Done || outcome.forwarded > 0 {
            self.written += self.out.len() as u64;
        }
        self.out.clear();
        ending_to_result(outcome.ending, outcome.error)
    }

    async fn flush(&mut self, cx: BodyContext<'_>, dst: &TcpStream) -> Result<(), BodyFailure> {
        if self.out.is_empty() {
            return Ok(());
        }
        match timeout(cx.idle_timeout, dst.write_all(&self.out)).await {
            Err(_) => return Err(BodyFailure::Idle),
            Ok(Err(error)) => return Err(BodyFailure::Destination(error)),
            Ok(Ok(())) => {}
        }
        self.written += self.out.len() as u64;
        self.out.clear();
        Ok(())
    }
}

/// Appends at least one byte from `src` to `input`.
async fn read_more(
    cx: BodyContext<'_>,
    src: &TcpStream,
    input: &mut Vec<u8>,
) -> Result<(), BodyFailure> {
    let start = input.len();
    input.resize(start + cx.read_size, 0);
    let read = timeout(cx.idle_timeout, src.read(&mut input[start..])).await;
    let n = match read {
        Err(_) => Err(BodyFailure::Idle),
        Ok(Err(error)) => Err(BodyFailure::Source(error)),
        Ok(Ok(0)) => Err(BodyFailure::SourceClosed),
        Ok(Ok(n)) => Ok(n),
    };
    input.truncate(start + *n.as_ref().unwrap_or(&0));
    n.map(|_| ())
}
