//! Test sockets: a runtime, and the proxy's two sides of a transfer as loopback connections
//! whose far ends are plain blocking std sockets driven from helper threads.

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener};
use std::thread;
use std::time::Duration;

use sluice_rt::net::{StreamOptions, TcpStream};
use sluice_rt::{Backend, Runtime};

/// Runs `test` to completion on a fresh single-worker runtime.
pub(crate) fn run<F: std::future::Future<Output = ()> + 'static>(test: impl FnOnce() -> F) {
    let runtime = Runtime::new(Backend::Epoll).expect("runtime");
    runtime.block_on(test());
}

/// A connection whose near end is on the runtime and whose far end is a blocking std socket.
pub(crate) async fn pair() -> (TcpStream, std::net::TcpStream) {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().expect("address");
    let near = TcpStream::connect(addr, &StreamOptions::default())
        .await
        .expect("connect");
    let (far, _) = listener.accept().expect("accept");
    far.set_read_timeout(Some(Duration::from_secs(30)))
        .expect("timeout");
    (near, far)
}

/// Writes `bytes` on `far` from a thread, then half-closes it if `close` is set.
pub(crate) fn send_from(
    mut far: std::net::TcpStream,
    bytes: Vec<u8>,
    close: bool,
) -> thread::JoinHandle<std::net::TcpStream> {
    thread::spawn(move || {
        let _ = far.write_all(&bytes);
        if close {
            let _ = far.shutdown(Shutdown::Write);
        }
        far
    })
}

/// Reads from `far` on a thread until `len` bytes or EOF.
pub(crate) fn receive_on(mut far: std::net::TcpStream, len: usize) -> thread::JoinHandle<Vec<u8>> {
    thread::spawn(move || {
        let mut out = Vec::with_capacity(len.min(1 << 20));
        let mut buf = vec![0u8; 65536];
        while out.len() < len {
            match far.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => out.extend_from_slice(&buf[..n]),
            }
        }
        out
    })
}

/// Resolves once `condition` holds. It registers no waker of its own: polled beside a transfer
/// (`zip`, `or`), it is checked each time the transfer is polled, and the conditions the tests
/// give it change only inside those polls.
pub(crate) async fn until(mut condition: impl FnMut() -> bool) {
    std::future::poll_fn(|_| {
        if condition() {
            std::task::Poll::Ready(())
        } else {
            std::task::Poll::Pending
        }
    })
    .await
}

/// Reads `src` in user space until it closes, as any socket is read once no transfer has it.
pub(crate) async fn read_to_close(src: &TcpStream) -> Vec<u8> {
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    loop {
        match src.read(&mut buf).await.expect("plain read") {
            0 => return out,
            n => out.extend_from_slice(&buf[..n]),
        }
    }
}

/// Deterministic body bytes.
pub(crate) fn body(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}
