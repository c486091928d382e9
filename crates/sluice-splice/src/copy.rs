//! The user-space copy engine: read into a buffer, write it out. The baseline every kernel
//! engine is measured against, and the fallback when one cannot be used.

use std::cell::Cell;
use std::io;
use std::net::Shutdown;
use std::time::{Duration, Instant};

use sluice_rt::net::TcpStream;
use sluice_rt::{sleep_until, timeout};

use crate::{Ending, Limit, TransferOutcome, TransferRequest, TunnelOutcome};

/// Copies through one buffer per transfer (per direction for a tunnel).
#[derive(Debug, Clone)]
pub struct CopyEngine {
    buffer_size: usize,
}

impl CopyEngine {
    /// A copy engine with `buffer_size` bytes per transfer (config `transfer.copy_buffer`).
    pub fn new(buffer_size: usize) -> Self {
        Self {
            buffer_size: buffer_size.max(1),
        }
    }

    /// Moves `request.prefix` and then the body from `src` to `dst`.
    pub async fn transfer(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        request: TransferRequest<'_>,
    ) -> TransferOutcome {
        let mut buf = vec![0u8; self.buffer_size];
        let mut prefix = request.prefix;
        let mut forwarded = 0u64;
        let idle = request.idle_timeout;
        let outcome = |forwarded, ending, error| TransferOutcome {
            forwarded,
            ending,
            error,
            overread: Vec::new(),
        };
        loop {
            let want = match request.limit {
                Limit::Bytes(total) => {
                    let left = total - forwarded;
                    if left == 0 {
                        break;
                    }
                    usize::try_from(left).unwrap_or(usize::MAX).min(buf.len())
                }
                Limit::UntilClose => buf.len(),
            };
            let read = match timeout(idle, src.read(&mut buf[..want])).await {
                Err(_) => return outcome(forwarded, Ending::Idle, None),
                Ok(Err(error)) => return outcome(forwarded, Ending::SourceError, Some(error)),
                Ok(Ok(n)) => n,
            };
            if read == 0 {
                if let Err(error) = write_prefix(dst, prefix, idle).await {
                    return outcome(forwarded, Ending::DestinationAborted, Some(error));
                }
                let ending = match request.limit {
                    Limit::UntilClose => Ending::Done,
                    Limit::Bytes(_) => Ending::SourceClosedEarly,
                };
                return outcome(forwarded, ending, None);
            }
            // The prefix (a response head) leaves together with the first body bytes: a head
            // alone in a short segment costs a round trip with delayed ACKs (Heidemann 1997).
            match timeout(idle, dst.write_all_vectored(prefix, &buf[..read])).await {
                Err(_) => return outcome(forwarded, Ending::Idle, None),
                Ok(Err(error)) => {
                    return outcome(forwarded, Ending::DestinationAborted, Some(error))
                }
                Ok(Ok(())) => {}
            }
            prefix = &[];
            forwarded += read as u64;
        }
        match write_prefix(dst, prefix, idle).await {
            Ok(()) => outcome(forwarded, Ending::Done, None),
            Err(error) => outcome(forwarded, Ending::DestinationAborted, Some(error)),
        }
    }

    /// Copies both ways until both directions have closed, or nothing moved for `idle`.
    pub async fn tunnel(
        &self,
        client: &TcpStream,
        upstream: &TcpStream,
        idle: Duration,
    ) -> TunnelOutcome {
        let last_activity = Cell::new(Instant::now());
        let to_upstream = self.pump(client, upstream, &last_activity);
        let to_client = self.pump(upstream, client, &last_activity);
        let both = futures_lite::future::zip(to_upstream, to_client);
        let watchdog = async {
            loop {
                let deadline = last_activity.get() + idle;
                if Instant::now() >= deadline {
                    return ((0, Ending::Idle), (0, Ending::Idle));
                }
                sleep_until(deadline).await;
            }
        };
        let ((upstream_bytes, up_end), (client_bytes, down_end)) =
            futures_lite::future::or(both, watchdog).await;
        let ending = if up_end == Ending::Idle {
            Ending::Idle
        } else if up_end != Ending::Done {
            up_end
        } else {
            down_end
        };
        TunnelOutcome {
            upstream_bytes,
            client_bytes,
            ending,
        }
    }

    /// One direction of a tunnel: copies until EOF, then half-closes the destination so the peer
    /// sees the end while the other direction may still run.
    async fn pump(
        &self,
        src: &TcpStream,
        dst: &TcpStream,
        activity: &Cell<Instant>,
    ) -> (u64, Ending) {
        let mut buf = vec![0u8; self.buffer_size];
        let mut moved = 0u64;
        loop {
            let read = match src.read(&mut buf).await {
                Ok(0) => {
                    let _ = dst.shutdown(Shutdown::Write);
                    return (moved, Ending::Done);
                }
                Ok(n) => n,
                Err(_) => {
                    let _ = dst.shutdown(Shutdown::Both);
                    return (moved, Ending::SourceError);
                }
            };
            activity.set(Instant::now());
            if dst.write_all(&buf[..read]).await.is_err() {
                let _ = src.shutdown(Shutdown::Both);
                return (moved, Ending::DestinationAborted);
            }
            activity.set(Instant::now());
            moved += read as u64;
        }
    }
}

async fn write_prefix(dst: &TcpStream, prefix: &[u8], idle: Duration) -> io::Result<()> {
    if prefix.is_empty() {
        return Ok(());
    }
    timeout(idle, dst.write_all(prefix))
        .await
        .unwrap_or_else(|_| {
            Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "destination stalled",
            ))
        })
}
