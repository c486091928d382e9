//! One client connection: read a request head, run the exchange, log it, and go again while the
//! connection stays persistent. Requests are handled one at a time, so pipelined requests are
//! answered strictly in order: the bytes of the next request wait in `buf` or in the socket.

use std::net::{Shutdown, SocketAddr};
use std::rc::Rc;
use std::time::{Duration, Instant};

use sluice_http::{parse_request, Parsed, RequestHead};
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;

use crate::access_log::AccessRecord;
use crate::error::ProxyError;
use crate::exchange;
use crate::route::{client_allowed, ListenerContext};
use crate::worker::{ConnectionGuard, Worker};

/// Bytes read per system call while a head is incomplete.
const HEAD_READ_SIZE: usize = 8192;

/// How long, after an error response, we keep reading (and discarding) what the client still
/// sends, so that closing does not reset the connection before the client has read the response.
const LINGER: Duration = Duration::from_secs(2);

/// The client side of a connection, as exchanges see it.
#[derive(Debug)]
pub(crate) struct ClientConnection {
    pub stream: TcpStream,
    pub peer: SocketAddr,
    /// Bytes read from the client and not yet consumed: the rest of a head, the start of a body,
    /// pipelined requests.
    pub buf: Vec<u8>,
    /// Exchanges completed on this connection.
    pub exchanges: u64,
    /// Set after an error response: drain the client before closing (see [`linger_close`]).
    pub linger: bool,
}

enum HeadRead {
    Head {
        head: RequestHead,
        len: usize,
        started: Instant,
    },
    /// The client closed or idled out between requests: nothing to answer.
    Closed,
    Failed {
        error: ProxyError,
        started: Instant,
    },
}

/// Serves one accepted client connection to its end.
pub(crate) async fn serve(
    worker: Rc<Worker>,
    listener: Rc<ListenerContext>,
    stream: TcpStream,
    peer: SocketAddr,
    _guard: ConnectionGuard,
) {
    let mut conn = ClientConnection {
        stream,
        peer,
        buf: Vec::new(),
        exchanges: 0,
        linger: false,
    };
    serve_requests(&worker, &listener, &mut conn).await;
    // After the access-log line, so that lingering does not delay it.
    if conn.linger {
        linger_close(&conn.stream).await;
    }
}

async fn serve_requests(worker: &Worker, listener: &ListenerContext, conn: &mut ClientConnection) {
    let engine = listener.engine.name();
    let access_log = worker.config.log.access_log;
    let peer = conn.peer;
    if !client_allowed(&worker.config.access.allow, peer.ip()) {
        let mut record = AccessRecord::new(peer, Instant::now(), engine);
        answer_error(conn, &mut record, ProxyError::ClientNotAllowed(peer.ip())).await;
        record.emit(access_log);
        return;
    }
    loop {
        let (head, len, started) = match read_head(worker, conn).await {
            HeadRead::Head { head, len, started } => (head, len, started),
            HeadRead::Closed => return,
            HeadRead::Failed { error, started } => {
                let mut record = AccessRecord::new(peer, started, engine);
                answer_error(conn, &mut record, error).await;
                record.emit(access_log);
                return;
            }
        };
        conn.buf.drain(..len);
        let mut record = AccessRecord::new(peer, started, engine);
        record.method = head.method.to_string();
        record.target = head.target.to_string();
        record.head_read = record.elapsed();
        worker.count_exchange();
        let keep_alive = exchange::run(worker, listener, conn, head, &mut record).await;
        record.emit(access_log);
        conn.exchanges += 1;
        if !keep_alive {
            return;
        }
    }
}

/// Answers `error` to the client, records it, and closes gently.
pub(crate) async fn answer_error(
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    error: ProxyError,
) {
    record.status = error.status();
    record.termination = error.termination();
    let response = error.response();
    record.error = Some(error.to_string());
    if let Ok(Ok(())) = timeout(LINGER, conn.stream.write_all(&response)).await {
        record.bytes += response.len() as u64;
    }
    conn.linger = true;
}

/// Half-closes and drains the client for up to [`LINGER`]: closing a socket with unread input
/// sends a reset, which can destroy the response still in flight.
pub(crate) async fn linger_close(stream: &TcpStream) {
    let _ = stream.shutdown(Shutdown::Write);
    let mut sink = [0u8; 4096];
    let deadline = Instant::now() + LINGER;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match timeout(left, stream.read(&mut sink)).await {
            Ok(Ok(n)) if n > 0 => continue,
            _ => return,
        }
    }
}

async fn read_head(worker: &Worker, conn: &mut ClientConnection) -> HeadRead {
    let timeouts = &worker.config.timeouts;
    let mut started = Instant::now();
    // The head timeout runs from its first byte; before that, the idle wait is the keep-alive
    // timeout (or the head timeout for a new connection, which must not idle forever either).
    let mut deadline = (!conn.buf.is_empty()).then(|| started + timeouts.client_header);
    loop {
        if !conn.buf.is_empty() {
            match parse_request(&conn.buf, &worker.http_limits) {
                Ok(Parsed::Complete { head, len }) => return HeadRead::Head { head, len, started },
                Ok(Parsed::Partial) => {}
                Err(error) => {
                    return HeadRead::Failed {
                        error: error.into(),
                        started,
                    }
                }
            }
        }
        let wait = match deadline {
            Some(deadline) => deadline.saturating_duration_since(Instant::now()),
            None if conn.exchanges == 0 => timeouts.client_header,
            None => timeouts.keep_alive,
        };
        let filled = conn.buf.len();
        conn.buf.resize(filled + HEAD_READ_SIZE, 0);
        let read = timeout(wait, conn.stream.read(&mut conn.buf[filled..]));
        let read = if deadline.is_none() {
            // Idle between requests: shutdown ends the connection here, never mid-exchange.
            let stop = async {
                worker.shutdown.requested().await;
                Err(sluice_rt::Elapsed)
            };
            futures_lite::future::or(read, stop).await
        } else {
            read.await
        };
        let n = match read {
            Ok(Ok(n)) => n,
            Ok(Err(_)) => 0,
            Err(_) => {
                conn.buf.truncate(filled);
                if conn.buf.is_empty() {
                    return HeadRead::Closed;
                }
                let error = ProxyError::RequestHeadTimeout(timeouts.client_header);
                return HeadRead::Failed { error, started };
            }
        };
        conn.buf.truncate(filled + n);
        if n == 0 {
            if conn.buf.is_empty() {
                return HeadRead::Closed;
            }
            return HeadRead::Failed {
                error: ProxyError::IncompleteHead,
                started,
            };
        }
        if deadline.is_none() {
            started = Instant::now();
            deadline = Some(started + timeouts.client_header);
        }
    }
}
