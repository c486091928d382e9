use std::future::Future;
use std::io::Read;
use std::pin::Pin;
use std::time::Duration;

use super::*;
use crate::copy::CopyEngine;
use crate::pipe::PipePool;
use crate::test_sockets::{body, pair, receive_on, run, send_from};

/// Takes everything it is offered.
#[derive(Default)]
struct Collect(Vec<u8>);

impl CopySink for Collect {
    fn poll_accept(&mut self, _: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        self.0.extend_from_slice(bytes);
        Poll::Ready(Ok(bytes.len()))
    }
}

/// Takes at most `per_call` bytes, then makes the transfer wait `pause` before the next call.
struct Slow {
    got: Vec<u8>,
    per_call: usize,
    pause: Duration,
    timer: Option<Pin<Box<dyn Future<Output = ()>>>>,
}

impl CopySink for Slow {
    fn poll_accept(&mut self, cx: &mut Context<'_>, bytes: &[u8]) -> Poll<io::Result<usize>> {
        if let Some(timer) = &mut self.timer {
            if timer.as_mut().poll(cx).is_pending() {
                return Poll::Pending;
            }
        }
        self.timer = Some(Box::pin(sluice_rt::sleep(self.pause)));
        let n = bytes.len().min(self.per_call);
        self.got.extend_from_slice(&bytes[..n]);
        Poll::Ready(Ok(n))
    }
}

fn engine() -> SpliceEngine {
    SpliceEngine::new(PipePool::new(64 * 1024, 4), CopyEngine::new(16 * 1024))
}

fn request(limit: Limit) -> TransferRequest<'static> {
    TransferRequest {
        prefix: b"HEAD",
        limit,
        idle_timeout: Duration::from_secs(10),
    }
}

const KEEP: KeepCopy = KeepCopy {
    min_read: 8 * 1024,
    max_unread: 64 * 1024,
    keep_after_abort: u64::MAX,
};

#[test]
fn sink_and_destination_both_get_exactly_the_body() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine();
        for len in [1usize, 8191, 300_000] {
            let (src, src_far) = pair().await;
            let (dst, dst_far) = pair().await;
            let mut sent = body(len);
            sent.extend_from_slice(b"NEXT");
            let sender = send_from(src_far, sent, false);
            let receiver = receive_on(dst_far, len + 4);
            let mut sink = Collect::default();
            let outcome = engine
                .transfer_keeping_copy(
                    &src,
                    &dst,
                    request(Limit::Bytes(len as u64)),
                    KEEP,
                    &mut sink,
                    &stats,
                )
                .await
                .unwrap();
            drop(dst);
            let _ = sender.join();
            assert_eq!(outcome.ending, Ending::Done, "len {len}");
            assert!(outcome.source_complete);
            assert_eq!((outcome.forwarded, outcome.kept), (len as u64, len as u64));
            assert_eq!(sink.0, body(len), "len {len}");
            let got = receiver.join().unwrap();
            assert_eq!(&got[..4], b"HEAD");
            assert_eq!(&got[4..], &body(len)[..]);
        }
        assert_eq!(engine.pool().idle(), 1, "the forward pipe went back empty");
    });
}

/// A 4 MiB body whose client reads 100 KB and hangs up, kept with `keep`; the source is
/// closed once the transfer returns.
async fn client_abort_halfway(keep: KeepCopy) -> (KeepCopyOutcome, Vec<u8>) {
    let stats = EngineStats::default();
    let engine = engine();
    let len = 4 << 20;
    let (src, src_far) = pair().await;
    let (dst, mut dst_far) = pair().await;
    let sender = send_from(src_far, body(len), false);
    let client = std::thread::spawn(move || {
        let mut seen = vec![0u8; 100_000];
        dst_far.read_exact(&mut seen).unwrap();
        drop(dst_far);
    });
    let mut sink = Collect::default();
    let outcome = engine
        .transfer_keeping_copy(
            &src,
            &dst,
            request(Limit::Bytes(len as u64)),
            keep,
            &mut sink,
            &stats,
        )
        .await
        .unwrap();
    client.join().unwrap();
    drop(src);
    let _ = sender.join();
    (outcome, sink.0)
}

#[test]
fn client_abort_halfway_still_delivers_the_whole_body_to_the_sink() {
    run(|| async {
        let (outcome, kept) = client_abort_halfway(KEEP).await;
        let len = 4 << 20;
        assert_eq!(outcome.ending, Ending::DestinationAborted);
        assert!(outcome.source_complete);
        assert!(outcome.forwarded < len as u64);
        assert_eq!(outcome.kept, len as u64);
        assert!(kept == body(len), "sink copy differs");
    });
}

#[test]
fn client_abort_with_more_left_than_the_allowance_stops_reading() {
    run(|| async {
        let keep = KeepCopy {
            keep_after_abort: 1 << 20,
            ..KEEP
        };
        let (outcome, _) = client_abort_halfway(keep).await;
        assert_eq!(outcome.ending, Ending::DestinationAborted);
        assert!(!outcome.source_complete, "read on past the allowance");
        assert!(outcome.kept < 4 << 20);
    });
}

#[test]
fn slow_sink_pauses_forwarding_and_holds_memory_flat() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine();
        let len = 1 << 20;
        let (src, src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        let sender = send_from(src_far, body(len), false);
        let receiver = receive_on(dst_far, len + 4);
        let mut sink = Slow {
            got: Vec::new(),
            per_call: 16 * 1024,
            pause: Duration::from_millis(1),
            timer: None,
        };
        let outcome = engine
            .transfer_keeping_copy(
                &src,
                &dst,
                request(Limit::Bytes(len as u64)),
                KEEP,
                &mut sink,
                &stats,
            )
            .await
            .unwrap();
        drop(dst);
        let _ = sender.join();
        assert_eq!(outcome.ending, Ending::Done);
        assert!(sink.got == body(len));
        assert_eq!(receiver.join().unwrap().len(), len + 4);
        // Pipe B at 64 KiB plus one 16 KiB read: a 1 MiB body never sits unread whole.
        let bound = KEEP.max_unread + 16 * 1024;
        assert!(
            outcome.peak_unread <= bound,
            "peak unread {} above {bound}",
            outcome.peak_unread
        );
    });
}

/// Without a pipe KeepCopy sends nothing and says so; the fallback is counted, since the caller
/// copies the body instead.
#[test]
fn an_empty_pool_fails_before_sending_and_counts_the_fallback() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = SpliceEngine::new(PipePool::new(64 * 1024, 0), CopyEngine::new(16 * 1024));
        let (src, _src_far) = pair().await;
        let (dst, _dst_far) = pair().await;
        let mut sink = Collect::default();
        let result = engine
            .transfer_keeping_copy(
                &src,
                &dst,
                request(Limit::Bytes(1000)),
                KEEP,
                &mut sink,
                &stats,
            )
            .await;
        assert!(result.is_err());
        assert_eq!(stats.fallbacks(FallbackReason::NoPipe), 1);
        assert_eq!(
            stats.transfers(),
            0,
            "the caller counts the copy it does instead"
        );
    });
}
