//! Clients: a raw socket that reads responses byte-exactly, and curl.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::Command;

use sluice_http::{
    decode_chunked, parse_response, BodyFraming, Limits, Method, Parsed, ResponseHead,
};

use crate::DEADLINE;

/// One response as a client received it.
#[derive(Debug, Clone)]
pub struct Response {
    /// The parsed head.
    pub head: ResponseHead,
    /// The head as text.
    pub head_text: String,
    /// The body, de-chunked if it was chunked.
    pub body: Vec<u8>,
}

impl Response {
    /// The status code.
    pub fn status(&self) -> u16 {
        self.head.status
    }

    /// A header's value as text.
    pub fn header(&self, name: &str) -> Option<String> {
        self.head
            .headers
            .get(name)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    }
}

/// A plain TCP client for edge cases curl will not produce.
#[derive(Debug)]
pub struct RawClient {
    stream: TcpStream,
    buf: Vec<u8>,
}

impl RawClient {
    /// Connects to `addr`.
    pub fn connect(addr: SocketAddr) -> RawClient {
        let stream = TcpStream::connect(addr).expect("connect");
        stream
            .set_read_timeout(Some(DEADLINE))
            .expect("read timeout");
        RawClient {
            stream,
            buf: Vec::new(),
        }
    }

    /// Sends `bytes` in one write.
    pub fn send(&mut self, bytes: &[u8]) -> &mut Self {
        self.stream.write_all(bytes).expect("send");
        self
    }

    /// Whether the peer closed: reads until EOF (true) or a reset (true) or the deadline (false),
    /// discarding anything buffered.
    pub fn is_closed(&mut self) -> bool {
        self.buf.clear();
        let mut sink = [0u8; 4096];
        loop {
            match self.stream.read(&mut sink) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e)
                    if e.kind() == std::io::ErrorKind::WouldBlock
                        || e.kind() == std::io::ErrorKind::TimedOut =>
                {
                    return false
                }
                Err(_) => return true,
            }
        }
    }

    /// Everything until the peer closes.
    pub fn read_to_end(&mut self) -> Vec<u8> {
        let mut out = std::mem::take(&mut self.buf);
        let _ = self.stream.read_to_end(&mut out);
        out
    }

    /// Reads one response to a request made with `method`, body framed as the head says.
    ///
    /// # Panics
    /// If the connection ends before a complete response.
    pub fn read_response(&mut self, method: &Method) -> Response {
        self.try_read_response(method).expect("complete response")
    }

    /// Like [`RawClient::read_response`], but `None` when the connection ends first.
    pub fn try_read_response(&mut self, method: &Method) -> Option<Response> {
        let limits = Limits::default();
        let (head, len) = loop {
            if let Parsed::Complete { head, len } = parse_response(&self.buf, &limits).ok()? {
                break (head, len);
            }
            self.fill()?;
        };
        let head_text = String::from_utf8_lossy(&self.buf[..len]).into_owned();
        self.buf.drain(..len);
        let body = match head.body_framing(method).ok()? {
            BodyFraming::Empty => Vec::new(),
            BodyFraming::Length(n) => {
                let n = usize::try_from(n).ok()?;
                while self.buf.len() < n {
                    self.fill()?;
                }
                self.buf.drain(..n).collect()
            }
            BodyFraming::Chunked => loop {
                if let Ok((payload, used)) = decode_chunked(&self.buf) {
                    self.buf.drain(..used);
                    break payload;
                }
                self.fill()?;
            },
            BodyFraming::UntilClose => {
                while self.fill().is_some() {}
                std::mem::take(&mut self.buf)
            }
        };
        Some(Response {
            head,
            head_text,
            body,
        })
    }

    fn fill(&mut self) -> Option<()> {
        let mut chunk = [0u8; 65536];
        match self.stream.read(&mut chunk) {
            Ok(0) | Err(_) => None,
            Ok(n) => {
                self.buf.extend_from_slice(&chunk[..n]);
                Some(())
            }
        }
    }
}

/// Whether curl is installed; tests that need it print `skipped: needs curl` otherwise.
pub fn curl_available() -> bool {
    Command::new("curl")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Runs `curl -sS --max-time 30 ARGS...` and returns (exit code, stdout, stderr).
pub fn curl(args: &[&str]) -> (i32, Vec<u8>, String) {
    let output = Command::new("curl")
        .args(["-sS", "--max-time", "30"])
        .args(args)
        .output()
        .expect("run curl");
    (
        output.status.code().unwrap_or(-1),
        output.stdout,
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}
