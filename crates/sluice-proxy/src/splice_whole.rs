//! `transfer.splice_after = "connect"`: the WWW 2002 paper's "splice right after the server
//! connect". For a request the cache will not store, the request goes up with
//! `Connection: close` on a new connection, and the reply, head included, is spliced to the
//! client until the upstream closes; the client's connection closes after it. Not one reply
//! byte crosses into user space, at the price of persistence on both sides and of everything
//! the proxy does with a reply head (the access log's status is 0: never seen).
//!
//! Only where that is safe: a kernel engine, an HTTP/1.1 client (the reply reaches it
//! unchanged, chunked or not), a safe method without a request body (an unsafe one needs the
//! reply status to invalidate the cache).

use sluice_config::SpliceAfter;
use sluice_http::{BodyFraming, Version};
use sluice_rt::timeout;
use sluice_splice::{Ending, Engine, Limit, TransferRequest};

use crate::access_log::AccessRecord;
use crate::body::ending_to_result;
use crate::client::ClientConnection;
use crate::error::ProxyError;
use crate::exchange::{describe, fail, response_failure_termination, Exchange};
use crate::upstream;

/// Whether this exchange's reply is spliced whole.
pub(crate) fn applies(exchange: &Exchange<'_>) -> bool {
    exchange.worker.config.transfer.splice_after == SpliceAfter::Connect
        && !matches!(exchange.listener.engine, Engine::Copy(_))
        && exchange.head.version == Version::Http11
        && exchange.head.method.is_safe()
        && exchange.request_framing == BodyFraming::Empty
}

/// Sends `request_head` on a new upstream connection and splices the reply to the client;
/// returns false: the client's connection always closes after it.
pub(crate) async fn run(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    request_head: Vec<u8>,
    record: &mut AccessRecord,
) -> bool {
    let worker = exchange.worker;
    let route = exchange.route;
    let addrs = match worker.resolver.resolve(&route.host, route.port).await {
        Ok(addrs) => addrs,
        Err(error) => return fail(conn, record, error).await,
    };
    let timeouts = &worker.config.timeouts;
    // A new connection, never a pooled one: a pooled connection the upstream has just closed
    // would reach the client as an empty reply, and this one is not pooled afterwards.
    let connected = upstream::connect(&addrs, &worker.stream_options, timeouts.upstream_connect);
    let (upstream, addr) = match connected.await {
        Ok(found) => found,
        Err(error) => return fail(conn, record, error).await,
    };
    record.upstream = Some(addr);
    record.connected = record.elapsed();
    let request = with_connection_close(request_head);
    let sent = timeout(timeouts.body_idle, upstream.write_all(&request)).await;
    if let Err(source) = sent.unwrap_or_else(|_| Err(std::io::ErrorKind::TimedOut.into())) {
        return fail(conn, record, ProxyError::UpstreamWrite { addr, source }).await;
    }
    let engine = &exchange.listener.engine;
    record.engine = engine.name_for(Limit::UntilClose);
    let transfer = TransferRequest {
        prefix: &[],
        limit: Limit::UntilClose,
        idle_timeout: timeouts.body_idle,
    };
    let outcome = engine
        .transfer(&upstream, &conn.stream, transfer, &worker.stats)
        .await;
    record.bytes += outcome.forwarded;
    match outcome.ending {
        // Nothing came back: the client can still be told so.
        Ending::Done if outcome.forwarded == 0 => {
            return fail(conn, record, ProxyError::UpstreamClosed { addr }).await;
        }
        Ending::Done => {}
        ending => {
            if let Err(failure) = ending_to_result(ending, outcome.error) {
                record.termination = response_failure_termination(&failure);
                record.error = Some(format!("reply spliced whole: {}", describe(&failure)));
            }
        }
    }
    false
}

/// `head` (ours, ending in an empty line) with `Connection: close` as its last field, so that
/// the upstream closes after the reply: the splice ends where the reply does.
fn with_connection_close(mut head: Vec<u8>) -> Vec<u8> {
    debug_assert!(head.ends_with(b"\r\n\r\n"));
    head.truncate(head.len() - 2);
    head.extend_from_slice(b"Connection: close\r\n\r\n");
    head
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connection_close_goes_before_the_empty_line() {
        let head = b"GET / HTTP/1.1\r\nHost: a\r\n\r\n".to_vec();
        assert_eq!(
            with_connection_close(head),
            b"GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"
        );
    }
}
