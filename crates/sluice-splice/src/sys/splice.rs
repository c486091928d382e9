//! Pipes, splice(2) and tee(2), non-blocking. rustix's wrappers are safe (they take `AsFd`, and
//! pass null offsets, which splice(2) requires for sockets and pipes), so this file has no
//! `unsafe`.

use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};

use rustix::net::SendFlags;
use rustix::pipe::{PipeFlags, SpliceFlags};

/// A kernel pipe: the buffer a spliced transfer moves through.
#[derive(Debug)]
pub(crate) struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    /// Its capacity in bytes, as the kernel reports it.
    capacity: usize,
}

/// A new pipe and what became of the size asked for.
#[derive(Debug)]
pub(crate) struct NewPipe {
    pub pipe: Pipe,
    /// Why the kernel did not give the size asked for (pipe-max-size, pipe-user-pages-*), if
    /// it did not.
    pub size_error: Option<io::Error>,
}

impl Pipe {
    /// Opens a non-blocking pipe and asks for `size` bytes of capacity with F_SETPIPE_SZ
    /// (fcntl(2)); the kernel rounds up to a power-of-two number of pages, and refuses (EPERM)
    /// beyond pipe-max-size or once the user is over pipe-user-pages-hard.
    pub(crate) fn open(size: usize) -> io::Result<NewPipe> {
        let (read, write) = rustix::pipe::pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
        let size_error = rustix::pipe::fcntl_setpipe_size(&write, size).err();
        let capacity = rustix::pipe::fcntl_getpipe_size(&write)?;
        let size_error = match size_error {
            Some(errno) => Some(io::Error::from(errno)),
            None if capacity < size => Some(io::Error::other(format!(
                "kernel gave a {capacity}-byte pipe for {size} asked"
            ))),
            None => None,
        };
        Ok(NewPipe {
            pipe: Pipe {
                read,
                write,
                capacity,
            },
            size_error,
        })
    }

    /// The pipe's capacity in bytes.
    pub(crate) fn capacity(&self) -> usize {
        self.capacity
    }

    /// A second descriptor for the read end, so that a test can watch what a pipe lent to a
    /// transfer holds ([`queued`]) without taking it from the transfer.
    #[cfg(test)]
    pub(crate) fn watch(&self) -> io::Result<OwnedFd> {
        self.read.try_clone()
    }
}

/// Bytes waiting in the pipe whose read end is `pipe` (FIONREAD, pipe(7)).
#[cfg(test)]
pub(crate) fn queued(pipe: &OwnedFd) -> io::Result<usize> {
    Ok(rustix::io::ioctl_fionread(pipe)? as usize)
}

/// Moves up to `len` bytes from the socket `src` into `pipe` without copying them through user
/// space. `Ok(0)` is end of stream; WouldBlock when nothing is queued or the pipe is full.
pub(crate) fn splice_to_pipe(src: BorrowedFd<'_>, pipe: &Pipe, len: usize) -> io::Result<usize> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    Ok(rustix::pipe::splice(
        src,
        None,
        &pipe.write,
        None,
        len,
        flags,
    )?)
}

/// Moves up to `len` bytes from `pipe` to the socket `dst`. Without SPLICE_F_MORE: a partial
/// segment leaves at once rather than waiting for bytes a paused source may not send soon.
pub(crate) fn splice_from_pipe(pipe: &Pipe, dst: BorrowedFd<'_>, len: usize) -> io::Result<usize> {
    let flags = SpliceFlags::MOVE | SpliceFlags::NONBLOCK;
    Ok(rustix::pipe::splice(
        &pipe.read, None, dst, None, len, flags,
    )?)
}

/// Duplicates up to `len` bytes queued in `from` into `to` without consuming them (tee(2)):
/// both pipes then reference the same pages.
pub(crate) fn tee(from: &Pipe, to: &Pipe, len: usize) -> io::Result<usize> {
    Ok(rustix::pipe::tee(
        &from.read,
        &to.write,
        len,
        SpliceFlags::NONBLOCK,
    )?)
}

/// Reads up to `buf.len()` bytes out of `pipe` (the KeepCopy sink's side).
pub(crate) fn read_pipe(pipe: &Pipe, buf: &mut [u8]) -> io::Result<usize> {
    Ok(rustix::io::read(&pipe.read, buf)?)
}

/// Sends `buf` on a socket with MSG_MORE: the bytes may wait for what is written next, so a
/// response head and the first body bytes leave in one segment despite TCP_NODELAY.
pub(crate) fn send_more(dst: BorrowedFd<'_>, buf: &[u8]) -> io::Result<usize> {
    Ok(rustix::net::send(
        dst,
        buf,
        SendFlags::MORE | SendFlags::NOSIGNAL | SendFlags::DONTWAIT,
    )?)
}
