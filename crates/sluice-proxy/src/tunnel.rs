//! CONNECT: check the port, connect, answer 200, and hand both sockets to the engine until both
//! directions close.

use sluice_config::ListenerMode;
use sluice_http::{RequestHead, RequestTarget};
use sluice_splice::Ending;

use crate::access_log::AccessRecord;
use crate::client::{answer_error, ClientConnection};
use crate::error::{Phase, ProxyError, Side, Termination};
use crate::route::ListenerContext;
use crate::upstream;
use crate::worker::Worker;

const ESTABLISHED: &[u8] = b"HTTP/1.1 200 Connection established\r\n\r\n";

/// Runs a CONNECT exchange. The client connection always ends with it.
pub(crate) async fn run(
    worker: &Worker,
    listener: &ListenerContext,
    conn: &mut ClientConnection,
    head: RequestHead,
    record: &mut AccessRecord,
) -> bool {
    if listener.mode == ListenerMode::Reverse {
        answer_error(conn, record, ProxyError::ConnectOnReverse).await;
        return false;
    }
    let RequestTarget::Authority(authority) = &head.target else {
        // The parser only accepts authority-form for CONNECT; this is its invariant restated.
        answer_error(conn, record, ProxyError::NotAbsoluteForm).await;
        return false;
    };
    if !worker.config.access.connect_ports.contains(&authority.port) {
        answer_error(
            conn,
            record,
            ProxyError::ConnectPortNotAllowed(authority.port),
        )
        .await;
        return false;
    }
    let timeouts = &worker.config.timeouts;
    let connected = match worker
        .resolver
        .resolve(&authority.host, authority.port)
        .await
    {
        Ok(addrs) => {
            upstream::connect(&addrs, &worker.stream_options, timeouts.upstream_connect).await
        }
        Err(error) => Err(error),
    };
    let (upstream, addr) = match connected {
        Ok(found) => found,
        Err(error) => {
            answer_error(conn, record, error).await;
            return false;
        }
    };
    record.upstream = Some(addr);
    record.connected = record.elapsed();
    record.status = 200;
    if conn.stream.write_all(ESTABLISHED).await.is_err() {
        record.termination = Termination::by(Side::Client, Phase::Tunnel);
        return false;
    }
    record.bytes += ESTABLISHED.len() as u64;
    // Bytes the client sent right behind its CONNECT (a TLS ClientHello) go first.
    if !conn.buf.is_empty() {
        if upstream.write_all(&conn.buf).await.is_err() {
            record.termination = Termination::by(Side::Upstream, Phase::Tunnel);
            return false;
        }
        conn.buf.clear();
    }
    record.first_byte = record.elapsed();
    let outcome = listener
        .engine
        .tunnel(&conn.stream, &upstream, timeouts.tunnel_idle, &worker.stats)
        .await;
    record.bytes += outcome.client_bytes;
    record.termination = match outcome.ending {
        Ending::Done => Termination::NORMAL,
        Ending::Idle => Termination::timed_out(Side::Client, Phase::Tunnel),
        Ending::DestinationAborted | Ending::SourceError | Ending::SourceClosedEarly => {
            Termination::by(Side::Client, Phase::Tunnel)
        }
    };
    false
}
