//! A scripted origin server: each test says, per request, which bytes go back.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread;

use sluice_http::{decode_chunked, parse_request, BodyFraming, Limits, Parsed, RequestHead};

use crate::DEADLINE;

/// One request as the origin received it.
#[derive(Debug, Clone)]
pub struct OriginRequest {
    /// The parsed head.
    pub head: RequestHead,
    /// The head's bytes as received.
    pub raw_head: Vec<u8>,
    /// The body, de-chunked if it was chunked.
    pub body: Vec<u8>,
    /// Which connection (0, 1, ...) carried it, in accept order.
    pub connection: usize,
}

impl OriginRequest {
    /// The head as text, for `contains` checks.
    pub fn head_text(&self) -> String {
        String::from_utf8_lossy(&self.raw_head).into_owned()
    }
}

/// What the origin does with one request.
#[derive(Debug, Clone)]
pub enum Reply {
    /// Write these bytes and wait for the next request on the connection.
    Raw(Vec<u8>),
    /// Write these bytes and close the connection.
    RawThenClose(Vec<u8>),
    /// Never answer; hold the connection until the peer closes it.
    Hang,
}

impl Reply {
    /// `200 OK` with a Content-Length body.
    pub fn ok(body: &[u8]) -> Reply {
        Reply::with_length(200, &[], body)
    }

    /// A Content-Length response with extra header lines ("Name: value").
    pub fn with_length(status: u16, headers: &[&str], body: &[u8]) -> Reply {
        let mut out = format!("HTTP/1.1 {status} X\r\nContent-Length: {}\r\n", body.len());
        headers
            .iter()
            .for_each(|h| out.push_str(&format!("{h}\r\n")));
        out.push_str("\r\n");
        let mut out = out.into_bytes();
        out.extend_from_slice(body);
        Reply::Raw(out)
    }

    /// `200 OK` with the body in chunks of `chunk` bytes (plus an extension and a trailer, which
    /// a proxy must carry or drop correctly).
    pub fn chunked(body: &[u8], chunk: usize) -> Reply {
        let mut out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for piece in body.chunks(chunk.max(1)) {
            out.extend_from_slice(format!("{:x};ext=1\r\n", piece.len()).as_bytes());
            out.extend_from_slice(piece);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"0\r\nX-Trailer: yes\r\n\r\n");
        Reply::Raw(out)
    }

    /// `200 OK` with neither Content-Length nor chunked: the body ends when the origin closes.
    pub fn close_delimited(body: &[u8]) -> Reply {
        let mut out = b"HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n".to_vec();
        out.extend_from_slice(body);
        Reply::RawThenClose(out)
    }
}

type Handler = dyn Fn(&OriginRequest) -> Reply + Send + Sync;

/// A test origin on 127.0.0.1:0, a thread per connection. It lives until the test process ends.
#[derive(Clone)]
pub struct Origin {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<OriginRequest>>>,
}

impl std::fmt::Debug for Origin {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Origin")
            .field("addr", &self.addr)
            .finish_non_exhaustive()
    }
}

impl Origin {
    /// Starts an origin that answers each request with `handler`'s reply.
    pub fn start(handler: impl Fn(&OriginRequest) -> Reply + Send + Sync + 'static) -> Origin {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind origin");
        let addr = listener.local_addr().expect("origin address");
        let origin = Origin {
            addr,
            connections: Arc::new(AtomicUsize::new(0)),
            requests: Arc::new(Mutex::new(Vec::new())),
        };
        let handler: Arc<Handler> = Arc::new(handler);
        let state = origin.clone();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { continue };
                let connection = state.connections.fetch_add(1, Ordering::SeqCst);
                let handler = handler.clone();
                let requests = state.requests.clone();
                thread::spawn(move || serve(stream, connection, &*handler, &requests));
            }
        });
        origin
    }

    /// The origin's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://addr` + `path`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Connections accepted so far.
    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }

    /// Requests received so far, in arrival order.
    pub fn requests(&self) -> Vec<OriginRequest> {
        self.requests.lock().unwrap().clone()
    }
}

fn serve(
    mut stream: TcpStream,
    connection: usize,
    handler: &Handler,
    requests: &Mutex<Vec<OriginRequest>>,
) {
    let _ = stream.set_read_timeout(Some(DEADLINE));
    let mut buf = Vec::new();
    loop {
        let Some(request) = read_request(&mut stream, &mut buf, connection) else {
            return;
        };
        requests.lock().unwrap().push(request.clone());
        match handler(&request) {
            Reply::Raw(bytes) => {
                if stream.write_all(&bytes).is_err() {
                    return;
                }
            }
            Reply::RawThenClose(bytes) => {
                let _ = stream.write_all(&bytes);
                return;
            }
            Reply::Hang => {
                let mut sink = [0u8; 1024];
                while matches!(stream.read(&mut sink), Ok(n) if n > 0) {}
                return;
            }
        }
    }
}

fn read_request(
    stream: &mut TcpStream,
    buf: &mut Vec<u8>,
    connection: usize,
) -> Option<OriginRequest> {
    let limits = Limits::default();
    let (head, len) = loop {
        if let Ok(Parsed::Complete { head, len }) = parse_request(buf, &limits) {
            break (head, len);
        }
        fill(stream, buf)?;
    };
    let raw_head: Vec<u8> = buf.drain(..len).collect();
    let body = match head.body_framing().ok()? {
        BodyFraming::Empty | BodyFraming::UntilClose => Vec::new(),
        BodyFraming::Length(n) => {
            let n = usize::try_from(n).ok()?;
            while buf.len() < n {
                fill(stream, buf)?;
            }
            buf.drain(..n).collect()
        }
        BodyFraming::Chunked => loop {
            if let Ok((payload, used)) = decode_chunked(buf) {
                buf.drain(..used);
                break payload;
            }
            fill(stream, buf)?;
        },
    };
    Some(OriginRequest {
        head,
        raw_head,
        body,
        connection,
    })
}

fn fill(stream: &mut TcpStream, buf: &mut Vec<u8>) -> Option<()> {
    let mut chunk = [0u8; 65536];
    match stream.read(&mut chunk) {
        Ok(0) | Err(_) => None,
        Ok(n) => {
            buf.extend_from_slice(&chunk[..n]);
            Some(())
        }
    }
}
