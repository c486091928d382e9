//! The load generator's HTTP/1.1 client: one request at a time on a connection, bodies read
//! with bounded reads (never past the response) and verified as they arrive.

use std::fmt;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::Via;
use crate::body::BodyVerifier;
use crate::ssl::{self, Handshake, Side};

/// Largest response head accepted.
const MAX_HEAD_BYTES: usize = 64 * 1024;
/// Body reads go through a buffer of at most this size: under glibc's mmap threshold, so a
/// buffer per connection stays cheap with thousands of connections.
const READ_BYTES: usize = 64 * 1024;

/// Why one exchange failed; [`Failure::key`] is the error kind in reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// TCP connect failed (refused, no route, out of ports).
    Connect,
    /// The exchange took longer than `--timeout`.
    Timeout,
    /// The peer closed or reset the connection before the response ended.
    Closed {
        /// Whether any byte of the response had arrived (a reused connection closed before
        /// the response is retried once on a new one).
        after_response_started: bool,
    },
    /// A response head or chunk framing we cannot parse.
    Protocol,
    /// A status other than 200.
    Status(u16),
    /// The proxy refused the CONNECT with this status.
    Tunnel(u16),
    /// The emulated SSL handshake did not complete as specified.
    Handshake,
    /// A body byte differs from the origin's pattern.
    BodyMismatch,
    /// The body's length differs from the size asked for.
    Length,
    /// Any other socket error.
    Io,
}

impl Failure {
    /// The error kind as reports name it.
    pub fn key(&self) -> String {
        match self {
            Failure::Connect => "connect".into(),
            Failure::Timeout => "timeout".into(),
            Failure::Closed { .. } => "closed".into(),
            Failure::Protocol => "protocol".into(),
            Failure::Status(code) => format!("status-{code}"),
            Failure::Tunnel(code) => format!("tunnel-{code}"),
            Failure::Handshake => "handshake".into(),
            Failure::BodyMismatch => "body-mismatch".into(),
            Failure::Length => "length".into(),
            Failure::Io => "io".into(),
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.key())
    }
}

fn io_failure(e: std::io::Error, started: bool) -> Failure {
    use std::io::ErrorKind::*;
    match e.kind() {
        UnexpectedEof | ConnectionReset | BrokenPipe | ConnectionAborted => Failure::Closed {
            after_response_started: started,
        },
        InvalidData => Failure::Handshake,
        _ => Failure::Io,
    }
}

/// Where requests go and how they are addressed.
#[derive(Debug, Clone)]
pub struct Endpoint {
    /// The origin's address (what `Host` and absolute-form targets name).
    pub origin: SocketAddr,
    /// Direct, or through a proxy in forward or reverse mode.
    pub via: Via,
}

impl Endpoint {
    /// The address TCP connects to: the proxy's, or the origin's when direct.
    pub fn connect_addr(&self) -> SocketAddr {
        match self.via {
            Via::Direct => self.origin,
            Via::Forward(proxy) | Via::Reverse(proxy) => proxy,
        }
    }
}

/// One client connection with bytes read past the last response head.
#[derive(Debug)]
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    /// Requests sent on this connection so far.
    pub requests: u64,
}

impl Conn {
    /// Opens a TCP connection to `addr`.
    pub async fn connect(addr: SocketAddr) -> Result<Conn, Failure> {
        let stream = TcpStream::connect(addr)
            .await
            .map_err(|_| Failure::Connect)?;
        let _ = stream.set_nodelay(true);
        Ok(Conn {
            stream,
            buf: Vec::with_capacity(4096),
            scratch: Vec::new(),
            requests: 0,
        })
    }

    /// Opens a CONNECT tunnel to the endpoint's origin (forward mode only).
    pub async fn open_tunnel(&mut self, endpoint: &Endpoint) -> Result<(), Failure> {
        let request = format!("CONNECT {0} HTTP/1.1\r\nHost: {0}\r\n\r\n", endpoint.origin);
        self.stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| io_failure(e, false))?;
        let head = self.read_head().await?;
        if head.status != 200 {
            return Err(Failure::Tunnel(head.status));
        }
        Ok(())
    }

    /// Runs the client side of an emulated SSL handshake.
    pub async fn handshake(&mut self, handshake: Handshake) -> Result<(), Failure> {
        ssl::exchange(&mut self.stream, &mut self.buf, handshake, Side::Client, 0)
            .await
            .map_err(|e| io_failure(e, true))
    }

    /// Sends a GET for `target` (origin-form) and reads the whole response, checking its
    /// length is `size` and, with `verify`, every byte. `tunnelled` sends origin-form even
    /// in forward mode (the request runs inside a CONNECT tunnel).
    pub async fn get(
        &mut self,
        endpoint: &Endpoint,
        target: &str,
        size: u64,
        keep_alive: bool,
        verify: bool,
        tunnelled: bool,
    ) -> Result<Response, Failure> {
        let line_target = match endpoint.via {
            Via::Forward(_) if !tunnelled => format!("http://{}{target}", endpoint.origin),
            _ => target.to_owned(),
        };
        let connection = if keep_alive {
            ""
        } else {
            "Connection: close\r\n"
        };
        let request = format!(
            "GET {line_target} HTTP/1.1\r\nHost: {}\r\nUser-Agent: sluice-lab\r\n{connection}\r\n",
            endpoint.origin
        );
        self.requests += 1;
        self.stream
            .write_all(request.as_bytes())
            .await
            .map_err(|e| io_failure(e, false))?;
        let head = self.read_head().await?;
        if head.status != 200 {
            return Err(Failure::Status(head.status));
        }
        let mut verifier = verify.then(|| BodyVerifier::new(target));
        let received = match head.framing {
            BodyFraming::Length(len) => {
                if len != size {
                    return Err(Failure::Length);
                }
                self.read_exact_body(len, &mut verifier).await?;
                len
            }
            BodyFraming::Chunked => self.read_chunked_body(&mut verifier).await?,
            BodyFraming::Close => self.read_to_close(&mut verifier).await?,
        };
        if received != size {
            return Err(Failure::Length);
        }
        let reusable = keep_alive && !head.close && head.framing != BodyFraming::Close;
        Ok(Response {
            body_bytes: received,
            reusable,
        })
    }

    async fn fill(&mut self, started: bool) -> Result<(), Failure> {
        let mut chunk = [0u8; 4096];
        let n = self
            .stream
            .read(&mut chunk)
            .await
            .map_err(|e| io_failure(e, started))?;
        if n == 0 {
            return Err(Failure::Closed {
                after_response_started: started,
            });
        }
        self.buf.extend_from_slice(&chunk[..n]);
        Ok(())
    }

    async fn read_head(&mut self) -> Result<Head, Failure> {
        loop {
            if !self.buf.is_empty() {
                let mut headers = [httparse::EMPTY_HEADER; 64];
                let mut response = httparse::Response::new(&mut headers);
                match response.parse(&self.buf) {
                    Ok(httparse::Status::Complete(len)) => {
                        let head = Head::from(&response)?;
                        self.buf.drain(..len);
                        return Ok(head);
                    }
                    Ok(httparse::Status::Partial) if self.buf.len() < MAX_HEAD_BYTES => {}
                    _ => return Err(Failure::Protocol),
                }
            }
            let started = !self.buf.is_empty();
            self.fill(started).await?;
        }
    }

    /// Consumes `len` body bytes: first those already buffered, then bounded reads.
    async fn read_exact_body(
        &mut self,
        len: u64,
        verifier: &mut Option<BodyVerifier>,
    ) -> Result<(), Failure> {
        let buffered = usize::try_from(len)
            .unwrap_or(usize::MAX)
            .min(self.buf.len());
        if let Some(v) = verifier {
            v.check(&self.buf[..buffered])
                .map_err(|_| Failure::BodyMismatch)?;
        }
        self.buf.drain(..buffered);
        let mut remaining = len - buffered as u64;
        if remaining > 0 && self.scratch.is_empty() {
            self.scratch = vec![0u8; READ_BYTES];
        }
        while remaining > 0 {
            let want = usize::try_from(remaining)
                .unwrap_or(usize::MAX)
                .min(self.scratch.len());
            let n = self
                .stream
                .read(&mut self.scratch[..want])
                .await
                .map_err(|e| io_failure(e, true))?;
            if n == 0 {
                return Err(Failure::Closed {
                    after_response_started: true,
                });
            }
            if let Some(v) = verifier {
                v.check(&self.scratch[..n])
                    .map_err(|_| Failure::BodyMismatch)?;
            }
            remaining -= n as u64;
        }
        Ok(())
    }

    async fn read_chunked_body(
        &mut self,
        verifier: &mut Option<BodyVerifier>,
    ) -> Result<u64, Failure> {
        let mut total = 0u64;
        loop {
            let size = self.read_chunk_size().await?;
            if size == 0 {
                // Trailer section: lines until an empty one (RFC 9112 section 7.1.2).
                loop {
                    let line = self.read_line().await?;
                    if line.is_empty() {
                        return Ok(total);
                    }
                }
            }
            self.read_exact_body(size, verifier).await?;
            total += size;
            if !self.read_line().await?.is_empty() {
                return Err(Failure::Protocol);
            }
        }
    }

    async fn read_chunk_size(&mut self) -> Result<u64, Failure> {
        let line = self.read_line().await?;
        let hex = line.split(|&b| b == b';').next().unwrap_or(&[]);
        let hex = std::str::from_utf8(hex)
            .map_err(|_| Failure::Protocol)?
            .trim();
        u64::from_str_radix(hex, 16).map_err(|_| Failure::Protocol)
    }

    /// One CRLF-terminated line, without its CRLF.
    async fn read_line(&mut self) -> Result<Vec<u8>, Failure> {
        loop {
            if let Some(pos) = self.buf.windows(2).position(|w| w == b"\r\n") {
                let line = self.buf[..pos].to_vec();
                self.buf.drain(..pos + 2);
                return Ok(line);
            }
            if self.buf.len() > 4096 {
                return Err(Failure::Protocol);
            }
            self.fill(true).await?;
        }
    }

    async fn read_to_close(&mut self, verifier: &mut Option<BodyVerifier>) -> Result<u64, Failure> {
        let mut total = self.buf.len() as u64;
        if let Some(v) = verifier {
            v.check(&self.buf).map_err(|_| Failure::BodyMismatch)?;
        }
        self.buf.clear();
        if self.scratch.is_empty() {
            self.scratch = vec![0u8; READ_BYTES];
        }
        loop {
            let n = self
                .stream
                .read(&mut self.scratch)
                .await
                .map_err(|e| io_failure(e, true))?;
            if n == 0 {
                return Ok(total);
            }
            if let Some(v) = verifier {
                v.check(&self.scratch[..n])
                    .map_err(|_| Failure::BodyMismatch)?;
            }
            total += n as u64;
        }
    }
}

/// What a completed exchange delivered.
#[derive(Debug, Clone, Copy)]
pub struct Response {
    /// Body bytes received.
    pub body_bytes: u64,
    /// Whether the connection may carry another request.
    pub reusable: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum BodyFraming {
    Length(u64),
    Chunked,
    Close,
}

#[derive(Debug)]
struct Head {
    status: u16,
    framing: BodyFraming,
    close: bool,
}

impl Head {
    fn from(response: &httparse::Response<'_, '_>) -> Result<Head, Failure> {
        let status = response.code.ok_or(Failure::Protocol)?;
        let mut framing = BodyFraming::Close;
        let mut close = response.version == Some(0);
        for h in response.headers.iter() {
            let value = std::str::from_utf8(h.value)
                .map_err(|_| Failure::Protocol)?
                .trim();
            if h.name.eq_ignore_ascii_case("content-length") {
                let len = value.parse().map_err(|_| Failure::Protocol)?;
                if framing == BodyFraming::Close {
                    framing = BodyFraming::Length(len);
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                if !value.to_ascii_lowercase().ends_with("chunked") {
                    return Err(Failure::Protocol);
                }
                // Transfer-Encoding overrides Content-Length (RFC 9112 section 6.3).
                framing = BodyFraming::Chunked;
            } else if h.name.eq_ignore_ascii_case("connection") {
                for token in value.split(',') {
                    let token = token.trim();
                    if token.eq_ignore_ascii_case("close") {
                        close = true;
                    } else if token.eq_ignore_ascii_case("keep-alive") {
                        close = false;
                    }
                }
            }
        }
        // A tunnel's 200 and a 304 have no body (RFC 9112 section 6.3, rules 1 and 2).
        if status == 304 || (100..200).contains(&status) || status == 204 {
            framing = BodyFraming::Length(0);
        }
        Ok(Head {
            status,
            framing,
            close,
        })
    }
}
