//! One HTTP exchange (not CONNECT): route, connect or reuse, send the request and its body, read
//! the response head, move the response body, and decide what may be reused.

use std::cell::Cell;
use std::net::{IpAddr, SocketAddr};
use std::time::Instant;

use sluice_config::ListenerMode;
use sluice_http::{
    parse_response, remove_hop_by_hop, BodyFraming, Method, Parsed, RequestHead, RequestTarget,
    ResponseHead, Version,
};
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;
use sluice_splice::Limit;

use crate::access_log::AccessRecord;
use crate::body::{
    forward_chunked, forward_plain, BodyContext, BodyFailure, BodyOutcome, ChunkedMode,
};
use crate::cache;
use crate::client::{answer_error, ClientConnection};
use crate::error::{Phase, ProxyError, Side, Termination};
use crate::route::{ListenerContext, Route};
use crate::splice_whole;
use crate::tunnel;
use crate::upstream;
use crate::worker::Worker;

/// Runs one exchange; returns whether the client connection may carry another request.
pub(crate) async fn run(
    worker: &Worker,
    listener: &ListenerContext,
    conn: &mut ClientConnection,
    head: RequestHead,
    record: &mut AccessRecord,
) -> bool {
    if head.method == Method::Connect {
        return tunnel::run(worker, listener, conn, head, record).await;
    }
    let route = match listener.route(&head) {
        Ok(route) => route,
        Err(error) => return fail(conn, record, error).await,
    };
    let request_framing = match head.body_framing() {
        Ok(framing) => framing,
        Err(error) => return fail(conn, record, error.into()).await,
    };
    let exchange = Exchange {
        worker,
        listener,
        head: &head,
        route: &route,
        request_framing,
        x_cache: Cell::new(None),
    };
    if let Some(keep_alive) = cache::try_run(&exchange, conn, record).await {
        return keep_alive;
    }
    let request_head = upstream_request_head(worker, &head, &route, conn.peer.ip());
    exchange.run(conn, request_head, record).await
}

pub(crate) struct Exchange<'a> {
    pub worker: &'a Worker,
    pub listener: &'a ListenerContext,
    pub head: &'a RequestHead,
    pub route: &'a Route,
    pub request_framing: BodyFraming,
    /// The `X-Cache` value added to the client's response head, when the cache took part.
    pub x_cache: Cell<Option<&'static str>>,
}

/// A response head read from an upstream, with the connection it came on.
pub(crate) struct UpstreamResponse {
    pub stream: TcpStream,
    pub addr: SocketAddr,
    pub head: ResponseHead,
    /// Bytes read past the head: the start of the body.
    pub buf: Vec<u8>,
}

/// How a response body is framed on both sides.
pub(crate) struct ResponsePlan {
    pub framing: BodyFraming,
    pub upstream_persistent: bool,
    pub dechunk: bool,
    pub keep_client: bool,
}

/// How sending the request failed.
enum SendFailure {
    Upstream(std::io::Error),
    Client(Termination),
    /// The client's chunked framing is invalid: nothing was answered yet, so it gets a 400.
    BadBody(sluice_http::ParseError),
}

impl Exchange<'_> {
    fn body_context(&self) -> BodyContext<'_> {
        BodyContext {
            engine: &self.listener.engine,
            stats: &self.worker.stats,
            idle_timeout: self.worker.config.timeouts.body_idle,
            limits: &self.worker.http_limits,
            read_size: self.worker.config.transfer.copy_buffer,
        }
    }

    /// Sends the request upstream and relays the response: the path without the cache.
    pub(crate) async fn run(
        &self,
        conn: &mut ClientConnection,
        request_head: Vec<u8>,
        record: &mut AccessRecord,
    ) -> bool {
        if splice_whole::applies(self) {
            return splice_whole::run(self, conn, request_head, record).await;
        }
        let response = match self.fetch(conn, request_head, record).await {
            Ok(response) => response,
            Err(keep_alive) => return keep_alive,
        };
        cache::invalidate_after(self, &response.head);
        self.relay(conn, response, record).await
    }

    /// Sends the request (and its body) upstream and reads the response head. `Err` carries
    /// the exchange's result when it already ended: an error answered, or the client gone.
    pub(crate) async fn fetch(
        &self,
        conn: &mut ClientConnection,
        request_head: Vec<u8>,
        record: &mut AccessRecord,
    ) -> Result<UpstreamResponse, bool> {
        // The addresses of the upstream in use; resolved on the first attempt.
        let mut addrs = Vec::new();
        // A reused connection may have been closed by the upstream just as we picked it; a
        // request without a body that got no byte back is then safely sent once more on a new
        // connection (RFC 9110 §9.2.2: only idempotent methods).
        let retryable =
            self.request_framing == BodyFraming::Empty && self.head.method.is_idempotent();
        let mut attempt = 0;
        let (stream, addr, head, buf) = loop {
            attempt += 1;
            let (upstream, addr, reused) = match self.connect_upstream(&mut addrs).await {
                Ok(found) => found,
                Err(error) => return Err(fail(conn, record, error).await),
            };
            record.upstream = Some(addr);
            record.connected = record.elapsed();
            let may_retry = reused && retryable && attempt == 1;
            if attempt == 1
                && self.head.expects_continue()
                && self.request_framing != BodyFraming::Empty
            {
                // We answer 100 ourselves (and drop Expect upstream) so that the body flows
                // while the upstream is connected, without relaying interim responses.
                if conn
                    .stream
                    .write_all(b"HTTP/1.1 100 Continue\r\n\r\n")
                    .await
                    .is_err()
                {
                    record.termination = Termination::by(Side::Client, Phase::Headers);
                    return Err(false);
                }
            }
            match self
                .send_request(conn, &upstream, request_head.clone())
                .await
            {
                Ok(()) => {}
                Err(SendFailure::Upstream(_)) if may_retry => continue,
                Err(SendFailure::Upstream(source)) => {
                    return Err(
                        fail(conn, record, ProxyError::UpstreamWrite { addr, source }).await,
                    )
                }
                Err(SendFailure::BadBody(error)) => {
                    return Err(fail(conn, record, error.into()).await)
                }
                Err(SendFailure::Client(termination)) => {
                    record.termination = termination;
                    record.error = Some(String::from("client request body ended early"));
                    return Err(false);
                }
            }
            let mut buf = Vec::new();
            match self.read_response_head(&upstream, &mut buf, addr).await {
                Ok(response) => break (upstream, addr, response, buf),
                Err(ProxyError::UpstreamClosed { .. }) if may_retry => continue,
                Err(error) => return Err(fail(conn, record, error).await),
            }
        };
        record.first_byte = record.elapsed();
        record.status = head.status;
        Ok(UpstreamResponse {
            stream,
            addr,
            head,
            buf,
        })
    }

    /// How the response body is framed, and which connections stay open after it.
    pub(crate) fn plan(&self, response: &UpstreamResponse) -> Result<ResponsePlan, ProxyError> {
        let framing = response
            .head
            .body_framing(&self.head.method)
            .map_err(|source| ProxyError::BadResponse {
                addr: response.addr,
                source,
            })?;
        let upstream_persistent = response.head.keep_alive() && framing != BodyFraming::UntilClose;
        let dechunk = framing == BodyFraming::Chunked && self.head.version == Version::Http10;
        let keep_client = self.head.keep_alive()
            && !self.worker.shutdown.is_requested()
            && framing != BodyFraming::UntilClose
            && !dechunk;
        Ok(ResponsePlan {
            framing,
            upstream_persistent,
            dechunk,
            keep_client,
        })
    }

    /// Relays the response head and body to the client with the listener's engine.
    pub(crate) async fn relay(
        &self,
        conn: &mut ClientConnection,
        response: UpstreamResponse,
        record: &mut AccessRecord,
    ) -> bool {
        let plan = match self.plan(&response) {
            Ok(plan) => plan,
            Err(error) => return fail(conn, record, error).await,
        };
        let UpstreamResponse {
            stream: upstream,
            addr,
            head,
            buf: mut upstream_buf,
        } = response;
        let client_head = self.client_response_head(head, plan.keep_client, plan.dechunk);
        let outcome = self
            .forward_response(
                &upstream,
                &conn.stream,
                &mut upstream_buf,
                client_head,
                &plan,
                record,
            )
            .await;
        record.bytes += outcome.written;
        match outcome.result {
            Ok(()) => {
                if plan.upstream_persistent && upstream_buf.is_empty() {
                    self.worker.pool.borrow_mut().put(addr, upstream);
                }
                plan.keep_client
            }
            Err(failure) => {
                // The client must never take a cut body for a whole one: close its connection
                // (a Content-Length body then reads short; a chunked one lacks its last chunk).
                record.termination = response_failure_termination(&failure);
                record.error = Some(format!("response body: {}", describe(&failure)));
                false
            }
        }
    }

    /// A connection to the route's upstream, resolving it first when `addrs` is empty. In
    /// reverse mode, an upstream that cannot be resolved or reached hands the request to the
    /// listener's next upstream, each tried once; `addrs` is left with the one that answered.
    async fn connect_upstream(
        &self,
        addrs: &mut Vec<SocketAddr>,
    ) -> Result<(TcpStream, SocketAddr, bool), ProxyError> {
        let mut last = match self.reach(&self.route.host, self.route.port, addrs).await {
            Ok(found) => return Ok(found),
            Err(error) => error,
        };
        let unreachable = matches!(
            last,
            ProxyError::Resolve { .. }
                | ProxyError::Connect { .. }
                | ProxyError::ConnectTimeout { .. }
        );
        if self.listener.mode != ListenerMode::Reverse || !unreachable {
            return Err(last);
        }
        for _ in 1..self.listener.upstreams.len() {
            let Some(next) = self.listener.next_upstream() else {
                break;
            };
            tracing::warn!(error = %last, next = %next, "upstream unreachable; trying the next one");
            addrs.clear();
            match self.reach(&next.host, next.port, addrs).await {
                Ok(found) => return Ok(found),
                Err(error) => last = error,
            }
        }
        Err(last)
    }

    async fn reach(
        &self,
        host: &str,
        port: u16,
        addrs: &mut Vec<SocketAddr>,
    ) -> Result<(TcpStream, SocketAddr, bool), ProxyError> {
        if addrs.is_empty() {
            *addrs = self.worker.resolver.resolve(host, port).await?;
        }
        self.checkout(addrs).await
    }

    /// A pooled connection to the first address, or a new one.
    async fn checkout(
        &self,
        addrs: &[SocketAddr],
    ) -> Result<(TcpStream, SocketAddr, bool), ProxyError> {
        if let Some(&first) = addrs.first() {
            if let Some(stream) = self.worker.pool.borrow_mut().take(first) {
                return Ok((stream, first, true));
            }
        }
        let timeouts = &self.worker.config.timeouts;
        let (stream, addr) = upstream::connect(
            addrs,
            &self.worker.stream_options,
            timeouts.upstream_connect,
        )
        .await?;
        Ok((stream, addr, false))
    }

    async fn send_request(
        &self,
        conn: &mut ClientConnection,
        upstream: &TcpStream,
        request_head: Vec<u8>,
    ) -> Result<(), SendFailure> {
        let cx = self.body_context();
        let outcome: BodyOutcome = match self.request_framing {
            BodyFraming::Empty | BodyFraming::Length(0) => {
                return match timeout(cx.idle_timeout, upstream.write_all(&request_head)).await {
                    Ok(Ok(())) => Ok(()),
                    Ok(Err(error)) => Err(SendFailure::Upstream(error)),
                    Err(_) => Err(SendFailure::Upstream(std::io::ErrorKind::TimedOut.into())),
                };
            }
            BodyFraming::Length(n) => {
                forward_plain(
                    cx,
                    &conn.stream,
                    upstream,
                    &mut conn.buf,
                    request_head,
                    Limit::Bytes(n),
                )
                .await
            }
            BodyFraming::Chunked => {
                forward_chunked(
                    cx,
                    &conn.stream,
                    upstream,
                    &mut conn.buf,
                    request_head,
                    ChunkedMode::Verbatim,
                )
                .await
            }
            // Requests are never close-delimited (RFC 9112 §6.3, rule 6).
            BodyFraming::UntilClose => return Ok(()),
        };
        match outcome.result {
            Ok(()) => Ok(()),
            Err(BodyFailure::Destination(error)) => Err(SendFailure::Upstream(error)),
            Err(BodyFailure::Parse(error)) => Err(SendFailure::BadBody(error)),
            Err(BodyFailure::Idle) => Err(SendFailure::Client(Termination::timed_out(
                Side::Client,
                Phase::Data,
            ))),
            Err(_) => Err(SendFailure::Client(Termination::by(
                Side::Client,
                Phase::Data,
            ))),
        }
    }

    async fn read_response_head(
        &self,
        upstream: &TcpStream,
        buf: &mut Vec<u8>,
        addr: SocketAddr,
    ) -> Result<ResponseHead, ProxyError> {
        let first_byte_timeout = self.worker.config.timeouts.upstream_first_byte;
        let deadline = Instant::now() + first_byte_timeout;
        loop {
            if !buf.is_empty() {
                match parse_response(buf, &self.worker.http_limits) {
                    Ok(Parsed::Complete { head, len }) => {
                        buf.drain(..len);
                        // Interim responses: we answered 100 ourselves and never forward
                        // Upgrade, so 1xx heads are dropped (a 101 cannot be followed).
                        if (100..200).contains(&head.status) {
                            if head.status == 101 {
                                let source = sluice_http::ParseError::MalformedStatusLine;
                                return Err(ProxyError::BadResponse { addr, source });
                            }
                            continue;
                        }
                        return Ok(head);
                    }
                    Ok(Parsed::Partial) => {}
                    Err(source) => return Err(ProxyError::BadResponse { addr, source }),
                }
            }
            let filled = buf.len();
            buf.resize(filled + 16 * 1024, 0);
            let left = deadline.saturating_duration_since(Instant::now());
            let read = timeout(left, upstream.read(&mut buf[filled..])).await;
            let n = match read {
                Err(_) => {
                    return Err(ProxyError::FirstByteTimeout {
                        addr,
                        timeout: first_byte_timeout,
                    })
                }
                Ok(Ok(n)) => n,
                Ok(Err(_)) => 0,
            };
            buf.truncate(filled + n);
            if n == 0 {
                return Err(ProxyError::UpstreamClosed { addr });
            }
        }
    }

    pub(crate) fn client_response_head(
        &self,
        mut response: ResponseHead,
        keep_client: bool,
        dechunk: bool,
    ) -> Vec<u8> {
        let config = &self.worker.config;
        // We speak HTTP/1.1 to the client whatever the upstream speaks (RFC 9110 §6.2).
        let upstream_version = response.version;
        response.version = Version::Http11;
        remove_hop_by_hop(&mut response.headers, true);
        if dechunk {
            response.headers.remove("Transfer-Encoding");
        }
        if let Some(via) = &config.headers.via {
            response
                .headers
                .append("Via", format!("{} {via}", version_number(upstream_version)));
        }
        if let Some(x_cache) = self.x_cache.get() {
            response.headers.set("X-Cache", x_cache);
        }
        if !keep_client {
            response.headers.set("Connection", "close");
        } else if self.head.version == Version::Http10 {
            response.headers.set("Connection", "keep-alive");
        }
        let mut out = Vec::with_capacity(512);
        response.write_to(&mut out);
        out
    }

    async fn forward_response(
        &self,
        upstream: &TcpStream,
        client: &TcpStream,
        upstream_buf: &mut Vec<u8>,
        client_head: Vec<u8>,
        plan: &ResponsePlan,
        record: &mut AccessRecord,
    ) -> BodyOutcome {
        let cx = self.body_context();
        let limit = match plan.framing {
            BodyFraming::Empty => Limit::Bytes(0),
            BodyFraming::Length(n) => Limit::Bytes(n),
            BodyFraming::UntilClose => Limit::UntilClose,
            BodyFraming::Chunked => {
                let mode = if plan.dechunk {
                    ChunkedMode::PayloadOnly
                } else {
                    ChunkedMode::Verbatim
                };
                return forward_chunked(cx, upstream, client, upstream_buf, client_head, mode)
                    .await;
            }
        };
        // What the engine will move: the body minus what is already buffered.
        let rest = match limit {
            Limit::Bytes(n) => Limit::Bytes(n.saturating_sub(upstream_buf.len() as u64)),
            Limit::UntilClose => Limit::UntilClose,
        };
        record.engine = cx.engine.name_for(rest);
        forward_plain(cx, upstream, client, upstream_buf, client_head, limit).await
    }
}

/// The request head sent upstream: origin-form, HTTP/1.1, hop-by-hop fields removed, Host set
/// for forward mode, Via and (optionally) X-Forwarded-For added.
pub(crate) fn upstream_request_head(
    worker: &Worker,
    head: &RequestHead,
    route: &Route,
    client: IpAddr,
) -> Vec<u8> {
    let config = &worker.config;
    let mut headers = head.headers.clone();
    remove_hop_by_hop(&mut headers, config.headers.forward_proxy_authorization);
    match &route.host_header {
        Some(host) => headers.set("Host", host.as_str()),
        None if !headers.contains("Host") => {
            headers.set("Host", format!("{}:{}", route.host, route.port));
        }
        None => {}
    }
    if head.expects_continue() {
        headers.remove("Expect");
    }
    if let Some(via) = &config.headers.via {
        headers.append("Via", format!("{} {via}", version_number(head.version)));
    }
    if config.headers.x_forwarded_for {
        headers.append("X-Forwarded-For", client.to_string());
    }
    let target = if route.path == "*" {
        RequestTarget::Asterisk
    } else {
        RequestTarget::Origin(route.path.clone())
    };
    let upstream_head = RequestHead {
        method: head.method.clone(),
        target,
        version: Version::Http11,
        headers,
    };
    let mut out = Vec::with_capacity(512);
    upstream_head.write_to(&mut out);
    out
}

fn version_number(version: Version) -> &'static str {
    match version {
        Version::Http10 => "1.0",
        Version::Http11 => "1.1",
    }
}

/// Who ended a response body early: the upstream (its side of the transfer) or the client.
pub(crate) fn response_failure_termination(failure: &BodyFailure) -> Termination {
    match failure {
        BodyFailure::Parse(_) | BodyFailure::SourceClosed | BodyFailure::Source(_) => {
            Termination::by(Side::Upstream, Phase::Data)
        }
        BodyFailure::Destination(_) => Termination::by(Side::Client, Phase::Data),
        BodyFailure::Idle => Termination::timed_out(Side::Upstream, Phase::Data),
    }
}

pub(crate) fn describe(failure: &BodyFailure) -> String {
    match failure {
        BodyFailure::Parse(error) => format!("invalid chunked framing: {error}"),
        BodyFailure::SourceClosed => String::from("source closed before the end"),
        BodyFailure::Source(error) => format!("read failed: {error}"),
        BodyFailure::Destination(error) => format!("write failed: {error}"),
        BodyFailure::Idle => String::from("no progress within timeouts.body_idle"),
    }
}

/// Answers an error of our own, records it, and ends the client connection.
pub(crate) async fn fail(
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    error: ProxyError,
) -> bool {
    answer_error(conn, record, error).await;
    false
}
