//! TCP sockets on the runtime: a per-worker listener (SO_REUSEPORT) and non-blocking streams.

use std::io::{self, IoSlice, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::os::fd::{AsFd, BorrowedFd};
use std::task::{Context, Poll};

use socket2::{Domain, Protocol, Socket, Type};

use crate::io::Async;

/// Socket options applied to every accepted or connected stream.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StreamOptions {
    /// SO_SNDBUF in bytes; `None` keeps the kernel's autotuning.
    pub send_buffer: Option<usize>,
    /// SO_RCVBUF in bytes; `None` keeps the kernel's autotuning.
    pub recv_buffer: Option<usize>,
}

impl StreamOptions {
    fn apply(&self, socket: &Socket) -> io::Result<()> {
        // Always: a response head and an odd final segment must not wait for an ACK
        // (Heidemann 1997, the P-HTTP/Nagle interaction).
        socket.set_tcp_nodelay(true)?;
        if let Some(size) = self.send_buffer {
            socket.set_send_buffer_size(size)?;
        }
        if let Some(size) = self.recv_buffer {
            socket.set_recv_buffer_size(size)?;
        }
        Ok(())
    }
}

/// A listening socket owned by one worker. Several workers bind the same address with
/// SO_REUSEPORT and the kernel spreads connections between them, so no accept lock is shared.
#[derive(Debug)]
pub struct TcpListener {
    inner: Async<std::net::TcpListener>,
}

impl TcpListener {
    /// Binds `addr` with SO_REUSEADDR and SO_REUSEPORT and registers it with this runtime.
    pub fn bind_reuseport(addr: SocketAddr, backlog: i32) -> io::Result<Self> {
        Self::from_std(Self::bind_std(addr, backlog)?)
    }

    /// Binds `addr` with SO_REUSEADDR and SO_REUSEPORT, non-blocking, outside any runtime: the
    /// server binds every worker's socket before starting the workers, so that a bind error
    /// stops start-up and port 0 resolves to one port shared by all workers.
    pub fn bind_std(addr: SocketAddr, backlog: i32) -> io::Result<std::net::TcpListener> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_reuse_address(true)?;
        socket.set_reuse_port(true)?;
        if addr.is_ipv6() {
            socket.set_only_v6(true)?;
        }
        socket.set_nonblocking(true)?;
        socket.bind(&addr.into())?;
        socket.listen(backlog)?;
        Ok(socket.into())
    }

    /// Registers a listener made by [`TcpListener::bind_std`] with the current runtime.
    pub fn from_std(listener: std::net::TcpListener) -> io::Result<Self> {
        listener.set_nonblocking(true)?;
        Ok(Self {
            inner: Async::new(listener)?,
        })
    }

    /// The bound address (with the real port when 0 was asked for).
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().local_addr()
    }

    /// Accepts one connection and applies `options` to it.
    pub async fn accept(&self, options: &StreamOptions) -> io::Result<(TcpStream, SocketAddr)> {
        let (stream, peer) = self.inner.read_with(|l| l.accept()).await?;
        let socket = Socket::from(stream);
        socket.set_nonblocking(true)?;
        options.apply(&socket)?;
        Ok((
            TcpStream {
                inner: Async::new(std::net::TcpStream::from(socket))?,
            },
            peer,
        ))
    }
}

/// A connected, non-blocking TCP stream registered with the current worker's reactor.
#[derive(Debug)]
pub struct TcpStream {
    inner: Async<std::net::TcpStream>,
}

impl TcpStream {
    /// Connects to `addr` without blocking the worker; bound the wait with [`crate::timeout`].
    pub async fn connect(addr: SocketAddr, options: &StreamOptions) -> io::Result<Self> {
        let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
        socket.set_nonblocking(true)?;
        options.apply(&socket)?;
        match socket.connect(&addr.into()) {
            Ok(()) => {}
            Err(e) if e.raw_os_error() == Some(libc_einprogress()) => {}
            Err(e) => return Err(e),
        }
        let inner = Async::new(std::net::TcpStream::from(socket))?;
        // Registered as writable; the first real writability edge marks the end of the handshake.
        inner.clear_writable();
        inner.writable().await;
        if let Some(error) = inner.get_ref().take_error()? {
            return Err(error);
        }
        Ok(Self { inner })
    }

    /// The underlying std stream, for socket options and addresses.
    pub fn std(&self) -> &std::net::TcpStream {
        self.inner.get_ref()
    }

    /// The readiness-aware wrapper, for engines that run their own system calls (splice).
    pub fn as_async(&self) -> &Async<std::net::TcpStream> {
        &self.inner
    }

    /// Reads into `buf`; `Ok(0)` is end of stream.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        self.inner.read_with(|mut s| s.read(buf)).await
    }

    /// Polls a read into `buf`.
    pub fn poll_read(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        self.inner.poll_read_with(cx, |mut s| s.read(buf))
    }

    /// Writes some of `buf`.
    pub async fn write(&self, buf: &[u8]) -> io::Result<usize> {
        self.inner.write_with(|mut s| s.write(buf)).await
    }

    /// Polls a write of some of `buf`.
    pub fn poll_write(&self, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        self.inner.poll_write_with(cx, |mut s| s.write(buf))
    }

    /// Writes all of `buf`.
    pub async fn write_all(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self.write(buf).await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Writes all of `first` then all of `second`, with writev so that both leave in one
    /// segment when they fit (a response head never goes out alone ahead of its body).
    pub async fn write_all_vectored(&self, mut first: &[u8], mut second: &[u8]) -> io::Result<()> {
        while !first.is_empty() || !second.is_empty() {
            let n = self
                .inner
                .write_with(|mut s| s.write_vectored(&[IoSlice::new(first), IoSlice::new(second)]))
                .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            let from_first = n.min(first.len());
            first = &first[from_first..];
            second = &second[n - from_first..];
        }
        Ok(())
    }

    /// Writes all of `buf` with MSG_MORE: the kernel holds a short tail back for what the next
    /// send brings (a response head waits for the first body bytes of a following
    /// [`TcpStream::send_file`], so it does not leave alone in a short segment).
    pub async fn write_all_more(&self, mut buf: &[u8]) -> io::Result<()> {
        while !buf.is_empty() {
            let n = self
                .inner
                .write_with(|s| {
                    rustix::net::send(s, buf, rustix::net::SendFlags::MORE).map_err(io::Error::from)
                })
                .await?;
            if n == 0 {
                return Err(io::ErrorKind::WriteZero.into());
            }
            buf = &buf[n..];
        }
        Ok(())
    }

    /// Sends up to `count` bytes of `file` from `*offset` with sendfile(2): from the page cache
    /// to the socket, never through user space. Advances `*offset`; `Ok(0)` is end of file.
    /// A page not in memory makes the call wait for the disk.
    pub async fn send_file(
        &self,
        file: &std::fs::File,
        offset: &mut u64,
        count: usize,
    ) -> io::Result<usize> {
        self.inner
            .write_with(|s| {
                rustix::fs::sendfile(s, file, Some(&mut *offset), count).map_err(io::Error::from)
            })
            .await
    }

    /// Shuts down one or both directions.
    pub fn shutdown(&self, how: Shutdown) -> io::Result<()> {
        self.inner.get_ref().shutdown(how)
    }

    /// The peer's address.
    pub fn peer_addr(&self) -> io::Result<SocketAddr> {
        self.inner.get_ref().peer_addr()
    }
}

impl AsFd for TcpStream {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.inner.get_ref().as_fd()
    }
}

fn libc_einprogress() -> i32 {
    rustix::io::Errno::INPROGRESS.raw_os_error()
}
