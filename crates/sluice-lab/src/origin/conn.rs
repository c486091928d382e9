//! One origin connection: requests in, deterministic bodies out, or an emulated SSL handshake
//! first when the connection came through a CONNECT tunnel.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use rand::rngs::SmallRng;
use rand::SeedableRng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::request::{self, Framing, Method, OriginRequest};
use super::OriginConfig;
use crate::body::{BodyPattern, PERIOD};
use crate::ssl::{self, Handshake, Side, HELLO_FIRST_BYTE};

/// Largest request head read before answering 431.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Bodies up to this size go out in the same write as the head (one syscall, one segment
/// train), at the cost of one copy; larger ones are written straight from the pattern.
const COALESCE_BYTES: u64 = 64 * 1024;
/// Chunk size for `frame=chunked`; the size haproxy and nginx use for their own buffers.
const CHUNK_BYTES: usize = 16 * 1024;

/// Counters of one origin thread; summed by [`super::Origin::totals`].
#[derive(Debug, Default)]
pub struct ThreadCounters {
    pub(super) connections: AtomicU64,
    pub(super) requests: AtomicU64,
    pub(super) not_modified: AtomicU64,
    pub(super) body_bytes: AtomicU64,
    pub(super) handshakes: AtomicU64,
    pub(super) rejected: AtomicU64,
    pub(super) broken: AtomicU64,
}

fn bump(counter: &AtomicU64, by: u64) {
    counter.fetch_add(by, Ordering::Relaxed);
}

/// Why a connection ended other than by the client closing between requests.
enum End {
    /// Closed as planned (cap reached, close-delimited body, client asked).
    Done,
    /// The client vanished mid-request or sent bytes we do not understand.
    Broken,
}

/// Serves `stream` until it closes.
pub(super) async fn serve(
    mut stream: TcpStream,
    config: Arc<OriginConfig>,
    counters: Arc<ThreadCounters>,
) {
    bump(&counters.connections, 1);
    // Small responses must not wait for Nagle; the load generator sets it too.
    let _ = stream.set_nodelay(true);
    if let End::Broken = serve_requests(&mut stream, &config, &counters).await {
        bump(&counters.broken, 1);
    }
}

async fn serve_requests(
    stream: &mut TcpStream,
    config: &OriginConfig,
    counters: &ThreadCounters,
) -> End {
    let mut rng = SmallRng::from_rng(&mut rand::rng());
    let cap = config.conn_cap.sample(&mut rng);
    let mut buf: Vec<u8> = Vec::with_capacity(4096);
    let mut served: u64 = 0;
    // The first bytes decide: an emulated SSL hello, or a request.
    let mut first = [0u8; 4096];
    match stream.read(&mut first).await {
        Ok(0) => return End::Done,
        Ok(n) => buf.extend_from_slice(&first[..n]),
        Err(_) => return End::Broken,
    }
    if buf[0] == HELLO_FIRST_BYTE {
        if let Err(end) = handshake(stream, &mut buf, counters).await {
            return end;
        }
    }
    loop {
        let parsed = match read_request(stream, &mut buf, config.max_size).await {
            Ok(Some(parsed)) => parsed,
            Ok(None) => return End::Done,
            Err(end) => return end,
        };
        let request = match parsed {
            Ok(request) => request,
            Err(rejection) => {
                bump(&counters.rejected, 1);
                let _ = stream
                    .write_all(&request::rejection_response(&rejection, &now()))
                    .await;
                return End::Done;
            }
        };
        served += 1;
        let think = request.think.unwrap_or(config.think);
        if !think.is_zero() {
            tokio::time::sleep(think.sample(&mut rng)).await;
        }
        let last = cap.is_some_and(|cap| served >= cap);
        if write_response(stream, &request, last).await.is_err() {
            return End::Broken;
        }
        bump(&counters.requests, 1);
        if request.not_modified {
            bump(&counters.not_modified, 1);
        } else if request.method == Method::Get {
            bump(&counters.body_bytes, request.size);
        }
        if last || !request.keep_alive || request::closes_after_body(&request) {
            let _ = stream.shutdown().await;
            return End::Done;
        }
    }
}

/// Answers an emulated SSL handshake whose hello starts `buf`.
async fn handshake(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    counters: &ThreadCounters,
) -> Result<(), End> {
    let hello_len = Handshake::Full.messages()[0].len;
    ssl::read_to(stream, buf, hello_len)
        .await
        .map_err(|_| End::Broken)?;
    let kind = Handshake::from_hello(buf).ok_or(End::Broken)?;
    if buf[..hello_len] != kind.message_bytes(0)[..] {
        return Err(End::Broken);
    }
    buf.drain(..hello_len);
    ssl::exchange(stream, buf, kind, Side::Server, 1)
        .await
        .map_err(|_| End::Broken)?;
    bump(&counters.handshakes, 1);
    Ok(())
}

/// Reads one request head; `Ok(None)` when the client closed cleanly between requests.
async fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    max_size: u64,
) -> Result<Option<Result<OriginRequest, request::Rejection>>, End> {
    loop {
        if !buf.is_empty() {
            let mut headers = [httparse::EMPTY_HEADER; 64];
            let mut parsed = httparse::Request::new(&mut headers);
            match parsed.parse(buf) {
                Ok(httparse::Status::Complete(head_len)) => {
                    let request = request::parse(&parsed, max_size);
                    buf.drain(..head_len);
                    return Ok(Some(request));
                }
                Ok(httparse::Status::Partial) if buf.len() < MAX_HEAD_BYTES => {}
                Ok(httparse::Status::Partial) => {
                    let rejection = request::Rejection {
                        status: 431,
                        reason: format!("request head above {MAX_HEAD_BYTES} bytes"),
                    };
                    return Ok(Some(Err(rejection)));
                }
                Err(e) => {
                    let rejection = request::Rejection {
                        status: 400,
                        reason: format!("malformed request head: {e}"),
                    };
                    return Ok(Some(Err(rejection)));
                }
            }
        }
        let mut chunk = [0u8; 4096];
        match stream.read(&mut chunk).await {
            Ok(0) if buf.is_empty() => return Ok(None),
            Ok(0) | Err(_) => return Err(End::Broken),
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn write_response(
    stream: &mut TcpStream,
    request: &OriginRequest,
    last: bool,
) -> std::io::Result<()> {
    let mut out = request::response_head(request, last, &now());
    if request.not_modified || request.method == Method::Head {
        return stream.write_all(&out).await;
    }
    let pattern = BodyPattern::shared();
    let start = request::body_start(request);
    match request.framing {
        Framing::Length | Framing::Close if request.size <= COALESCE_BYTES => {
            out.extend(pattern.slices(start, request.size, PERIOD).flatten());
            stream.write_all(&out).await
        }
        Framing::Length | Framing::Close => {
            stream.write_all(&out).await?;
            for slice in pattern.slices(start, request.size, PERIOD) {
                stream.write_all(slice).await?;
            }
            Ok(())
        }
        Framing::Chunked => {
            // Each chunk is copied once next to its size line: three small writes per chunk
            // would cost more than the copy.
            for slice in pattern.slices(start, request.size, CHUNK_BYTES) {
                out.extend_from_slice(format!("{:x}\r\n", slice.len()).as_bytes());
                out.extend_from_slice(slice);
                out.extend_from_slice(b"\r\n");
                if out.len() >= COALESCE_BYTES as usize {
                    stream.write_all(&out).await?;
                    out.clear();
                }
            }
            out.extend_from_slice(b"0\r\n\r\n");
            stream.write_all(&out).await
        }
    }
}

fn now() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs())
        .unwrap_or(0);
    request::http_date(secs)
}
