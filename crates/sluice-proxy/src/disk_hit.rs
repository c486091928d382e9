//! Answering from the disk tier: the head as for a memory hit (`policy::respond`), then the
//! body straight from the file to the client with sendfile(2), page cache to socket, never
//! through user space. The head goes first with MSG_MORE so that it leaves with the first body
//! bytes, not alone in a short segment.
//!
//! sendfile reads the file inside the call: a page not in memory makes the worker wait for the
//! disk there. Entries reach the disk tier when memory evicts them, so their pages are usually
//! still cached; a file system without sendfile support gets the body read on the blocking pool
//! instead, one piece at a time.

use std::io;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use sluice_cache::policy::{self, BodySlice};
use sluice_cache::DiskHit;
use sluice_rt::net::TcpStream;
use sluice_rt::timeout;

use crate::access_log::AccessRecord;
use crate::client::ClientConnection;
use crate::error::{Phase, Side, Termination};
use crate::exchange::Exchange;

/// Bytes per sendfile call: bounds how long one call can hold the worker.
const SENDFILE_CHUNK: u64 = 1 << 20;
/// Bytes read per blocking-pool call on the fallback path.
const READ_CHUNK: usize = 256 * 1024;

/// Answers `hit`; returns whether the client connection stays open.
pub(crate) async fn answer(
    exchange: &Exchange<'_>,
    conn: &mut ClientConnection,
    record: &mut AccessRecord,
    hit: DiskHit,
) -> bool {
    let answer = policy::respond(exchange.head, &hit.meta, SystemTime::now());
    record.status = answer.head.status;
    record.cache = "hit-disk";
    record.engine = "sendfile";
    exchange.x_cache.set(Some("HIT"));
    let keep_client = exchange.head.keep_alive() && !exchange.worker.shutdown.is_requested();
    let head = exchange.client_response_head(answer.head, keep_client, false);
    let (offset, len) = match answer.body {
        BodySlice::Empty => (0, 0),
        BodySlice::Bytes { offset, len } => (hit.body_offset + offset, len),
    };
    let idle = exchange.worker.config.timeouts.body_idle;
    let stream = &conn.stream;
    let sent = if len == 0 {
        within(idle, stream.write_all(&head)).await
    } else {
        within(idle, stream.write_all_more(&head)).await
    };
    if sent.is_err() {
        record.termination = Termination::by(Side::Client, Phase::Data);
        return false;
    }
    record.bytes += head.len() as u64;
    let body = Body {
        file: Arc::new(hit.file),
        offset,
        left: len,
    };
    match body.send(stream, idle, record).await {
        Ok(()) => keep_client,
        Err(Cut::Client) => {
            record.termination = Termination::by(Side::Client, Phase::Data);
            false
        }
        Err(Cut::File(error)) => {
            // The file checked out at lookup; failing now (disk error, truncated since) cuts
            // the response, and the closed connection shows it.
            tracing::warn!(key = %hit.meta.key, %error, "disk cache read failed");
            record.termination = Termination::by(Side::Proxy, Phase::Data);
            record.error = Some(format!("disk cache read failed: {error}"));
            false
        }
    }
}

/// Why a body did not go out whole.
enum Cut {
    Client,
    File(io::Error),
}

/// The part of the file still to send.
struct Body {
    file: Arc<std::fs::File>,
    offset: u64,
    left: u64,
}

impl Body {
    async fn send(
        mut self,
        stream: &TcpStream,
        idle: Duration,
        record: &mut AccessRecord,
    ) -> Result<(), Cut> {
        while self.left > 0 {
            let want = self.left.min(SENDFILE_CHUNK) as usize;
            match within(idle, stream.send_file(&self.file, &mut self.offset, want)).await {
                Ok(0) => return Err(Cut::File(io::ErrorKind::UnexpectedEof.into())),
                Ok(n) => {
                    self.left -= n as u64;
                    record.bytes += n as u64;
                }
                Err(error) if unsupported(&error) => {
                    record.engine = "copy";
                    return self.read_and_write(stream, idle, record).await;
                }
                Err(error) if client_gone(&error) => return Err(Cut::Client),
                Err(error) => return Err(Cut::File(error)),
            }
        }
        Ok(())
    }

    /// The fallback: read a piece on the blocking pool (the worker never waits on the disk),
    /// write it, repeat.
    async fn read_and_write(
        mut self,
        stream: &TcpStream,
        idle: Duration,
        record: &mut AccessRecord,
    ) -> Result<(), Cut> {
        while self.left > 0 {
            let want = usize::try_from(self.left)
                .unwrap_or(usize::MAX)
                .min(READ_CHUNK);
            let (reader, offset) = (Arc::clone(&self.file), self.offset);
            let read = sluice_rt::spawn_blocking(move || {
                let mut piece = vec![0u8; want];
                std::os::unix::fs::FileExt::read_exact_at(&*reader, &mut piece, offset)
                    .map(|()| piece)
            })
            .await;
            let piece = read
                .unwrap_or_else(|| Err(io::ErrorKind::BrokenPipe.into()))
                .map_err(Cut::File)?;
            within(idle, stream.write_all(&piece))
                .await
                .map_err(|_| Cut::Client)?;
            self.offset += piece.len() as u64;
            self.left -= piece.len() as u64;
            record.bytes += piece.len() as u64;
        }
        Ok(())
    }
}

/// `future`'s result, or a timeout error after `idle`.
async fn within<T>(
    idle: Duration,
    future: impl std::future::Future<Output = io::Result<T>>,
) -> io::Result<T> {
    timeout(idle, future)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// sendfile(2) cannot read this file (a file system without it).
fn unsupported(error: &io::Error) -> bool {
    matches!(
        error.raw_os_error(),
        Some(libc::EINVAL | libc::ENOSYS | libc::EOPNOTSUPP)
    )
}

fn client_gone(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::BrokenPipe
            | io::ErrorKind::ConnectionReset
            | io::ErrorKind::TimedOut
            | io::ErrorKind::WriteZero
    )
}
