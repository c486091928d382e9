use std::time::Duration;

use super::*;
use crate::sys::splice::queued;
use crate::test_sockets::{body, pair, read_to_close, receive_on, run, send_from};

fn engine(pipes: usize) -> SpliceEngine {
    SpliceEngine::new(PipePool::new(64 * 1024, pipes), CopyEngine::new(16 * 1024))
}

fn request(prefix: &[u8], limit: Limit) -> TransferRequest<'_> {
    TransferRequest {
        prefix,
        limit,
        idle_timeout: Duration::from_secs(10),
    }
}

/// Sends `sent` into the source, runs one transfer with `limit`, returns (outcome, received).
async fn one_transfer(
    engine: &SpliceEngine,
    stats: &EngineStats,
    sent: Vec<u8>,
    close: bool,
    limit: Limit,
    expect: usize,
) -> (TransferOutcome, Vec<u8>) {
    let (src, src_far) = pair().await;
    let (dst, dst_far) = pair().await;
    let sender = send_from(src_far, sent, close);
    let receiver = receive_on(dst_far, expect);
    let outcome = engine
        .transfer(&src, &dst, request(b"HEAD", limit), stats)
        .await;
    drop(dst);
    let _ = sender.join();
    (outcome, receiver.join().unwrap())
}

#[test]
fn moves_exactly_the_limit_and_leaves_the_rest_on_the_source() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(4);
        for len in [1usize, 4095, 65536, 300_000] {
            let mut sent = body(len);
            sent.extend_from_slice(b"NEXT");
            let (outcome, got) = one_transfer(
                &engine,
                &stats,
                sent,
                false,
                Limit::Bytes(len as u64),
                len + 4,
            )
            .await;
            assert_eq!(outcome.ending, Ending::Done, "len {len}");
            assert_eq!(outcome.forwarded, len as u64);
            assert_eq!(&got[..4], b"HEAD");
            assert_eq!(&got[4..], &body(len)[..], "len {len}");
        }
        assert_eq!(stats.transfers_by(Mechanism::Splice), 4);
        assert_eq!(engine.pool().open(), 1, "one pipe, reused");
    });
}

#[test]
fn until_close_and_early_close() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(4);
        let (outcome, got) = one_transfer(
            &engine,
            &stats,
            body(70_000),
            true,
            Limit::UntilClose,
            70_004,
        )
        .await;
        assert_eq!(outcome.ending, Ending::Done);
        assert_eq!(got.len(), 70_004);
        let (outcome, got) =
            one_transfer(&engine, &stats, body(1000), true, Limit::Bytes(5000), 5004).await;
        assert_eq!(outcome.ending, Ending::SourceClosedEarly);
        assert_eq!(outcome.forwarded, 1000);
        assert_eq!(got.len(), 1004);
    });
}

#[test]
fn empty_pool_falls_back_to_copy_and_counts_it() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(0);
        let (outcome, got) =
            one_transfer(&engine, &stats, body(5000), false, Limit::Bytes(5000), 5004).await;
        assert_eq!(outcome.ending, Ending::Done);
        assert_eq!(&got[4..], &body(5000)[..]);
        assert_eq!(stats.fallbacks(FallbackReason::NoPipe), 1);
        assert_eq!(stats.transfers_by(Mechanism::Copy), 1);
    });
}

#[test]
fn destination_abort_closes_the_pipe_instead_of_pooling_it() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(4);
        let (src, src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        drop(dst_far);
        let sender = send_from(src_far, body(4 << 20), false);
        let outcome = engine
            .transfer(&src, &dst, request(b"", Limit::Bytes(4 << 20)), &stats)
            .await;
        assert_eq!(outcome.ending, Ending::DestinationAborted);
        drop(src);
        let _ = sender.join();
        assert_eq!(engine.pool().idle(), 0);
        assert_eq!(engine.pool().open(), 0);
    });
}

#[test]
fn tunnel_moves_both_ways_and_half_closes() {
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(4);
        let (client, client_far) = pair().await;
        let (upstream, upstream_far) = pair().await;
        let up_reader = upstream_far.try_clone().unwrap();
        let client_reader = client_far.try_clone().unwrap();
        let a = send_from(client_far, body(200_000), true);
        let b = send_from(upstream_far, body(300_000), true);
        let got_up = receive_on(up_reader, usize::MAX);
        let got_client = receive_on(client_reader, usize::MAX);
        let outcome = engine
            .tunnel(&client, &upstream, Duration::from_secs(10), &stats)
            .await;
        assert_eq!(outcome.ending, Ending::Done);
        assert_eq!(outcome.upstream_bytes, 200_000);
        assert_eq!(outcome.client_bytes, 300_000);
        drop((client, upstream));
        let _ = (a.join(), b.join());
        assert_eq!(got_up.join().unwrap(), body(200_000));
        assert_eq!(got_client.join().unwrap(), body(300_000));
    });
}

#[test]
fn bytes_before_a_pause_reach_the_destination_without_waiting_for_more() {
    use std::io::{Read, Write};
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(4);
        let (src, mut src_far) = pair().await;
        let (dst, mut dst_far) = pair().await;
        // The source sends 1000 bytes, then waits until the client has them (head included)
        // before sending the rest: a corked segment would deadlock here.
        let (got_first, first_seen) = std::sync::mpsc::channel();
        let client = std::thread::spawn(move || {
            let mut first = vec![0u8; 1004];
            dst_far.read_exact(&mut first).unwrap();
            got_first.send(()).unwrap();
            let mut rest = vec![0u8; 1000];
            dst_far.read_exact(&mut rest).unwrap();
            first.extend(rest);
            first
        });
        let source = std::thread::spawn(move || {
            src_far.write_all(&body(1000)).unwrap();
            first_seen.recv().unwrap();
            src_far.write_all(&body(1000)).unwrap();
            src_far
        });
        let outcome = engine
            .transfer(&src, &dst, request(b"HEAD", Limit::Bytes(2000)), &stats)
            .await;
        assert_eq!(outcome.ending, Ending::Done);
        let got = client.join().unwrap();
        let _ = source.join();
        assert_eq!(&got[..4], b"HEAD");
        assert_eq!(&got[4..1004], &body(1000)[..]);
    });
}

/// Unsplice: cancelling a transfer (dropping its future) between two bursts leaves both sockets
/// plain and usable, the source at the first byte the transfer did not take, and the empty pipe
/// back in the pool.
#[test]
fn a_cancelled_transfer_leaves_both_sockets_usable_and_pools_its_empty_pipe() {
    use std::io::{Read, Write};
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(1);
        let (src, mut src_far) = pair().await;
        let (dst, mut dst_far) = pair().await;
        let (signal, mut signal_far) = pair().await;
        src_far.write_all(&body(100_000)).unwrap();
        // The client tells us once the first burst is through, then reads to the end.
        let client = std::thread::spawn(move || {
            let mut got = vec![0u8; 100_004];
            dst_far.read_exact(&mut got).unwrap();
            signal_far.write_all(b"!").unwrap();
            dst_far.read_to_end(&mut got).unwrap();
            got
        });
        let transfer = engine.transfer(&src, &dst, request(b"HEAD", Limit::Bytes(1 << 20)), &stats);
        let through = async {
            let _ = signal.read(&mut [0u8; 1]).await;
            None
        };
        let finished = futures_lite::future::or(async { Some(transfer.await) }, through).await;
        assert!(finished.is_none(), "the transfer ended by itself");
        assert_eq!((engine.pool().open(), engine.pool().idle()), (1, 1));
        // The source goes on where the transfer stopped, read in user space.
        let second = body(300_000)[100_000..].to_vec();
        let sender = send_from(src_far, second.clone(), true);
        assert!(
            read_to_close(&src).await == second,
            "the source lost its place"
        );
        // The destination takes a plain write after the spliced bytes.
        dst.write_all(b"PLAIN").await.unwrap();
        dst.shutdown(std::net::Shutdown::Write).unwrap();
        let got = client.join().unwrap();
        let _ = sender.join();
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..100_004] == body(100_000)[..]);
        assert_eq!(&got[100_004..], b"PLAIN");
    });
}

/// Unsplice with bytes in flight: cancelled while its pipe holds bytes the stalled destination
/// has not taken, the transfer closes that pipe rather than pool it (the next transfer must not
/// send them), and both sockets stay usable: the source continues exactly after the bytes the
/// transfer took (delivered plus discarded with the pipe).
#[test]
fn a_transfer_cancelled_with_bytes_in_its_pipe_closes_the_pipe() {
    use std::io::Read;
    use std::os::fd::OwnedFd;
    run(|| async {
        let stats = EngineStats::default();
        let engine = engine(1);
        let watch: OwnedFd = {
            let lease = engine.pool().acquire(&stats, "a test").unwrap();
            lease.pipe().watch().unwrap()
        };
        // Far more than the socket buffers hold, so the transfer stalls with its pipe full.
        let len = 32 << 20;
        let (src, src_far) = pair().await;
        let (dst, mut dst_far) = pair().await;
        let sender = send_from(src_far, body(len), true);
        let transfer = engine.transfer(
            &src,
            &dst,
            request(b"HEAD", Limit::Bytes(len as u64)),
            &stats,
        );
        // The client reads nothing yet: the transfer stalls with its pipe full.
        let in_pipe = crate::test_sockets::until(|| queued(&watch).unwrap() > 0);
        let finished = futures_lite::future::or(async { Some(transfer.await) }, async {
            in_pipe.await;
            None
        })
        .await;
        assert!(finished.is_none(), "the transfer ended by itself");
        let discarded = queued(&watch).unwrap();
        assert!(discarded > 0);
        assert_eq!(
            (engine.pool().open(), engine.pool().idle()),
            (0, 0),
            "a pipe holding bytes went back to the pool"
        );
        // The client starts reading: the destination's queue drains and takes a plain write.
        let client = std::thread::spawn(move || {
            let mut got = Vec::new();
            dst_far.read_to_end(&mut got).unwrap();
            got
        });
        dst.write_all(b"PLAIN").await.unwrap();
        dst.shutdown(std::net::Shutdown::Write).unwrap();
        let rest = read_to_close(&src).await;
        let got = client.join().unwrap();
        let _ = sender.join();
        let delivered = got.len() - 9;
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..4 + delivered] == body(len)[..delivered]);
        assert_eq!(&got[4 + delivered..], b"PLAIN");
        assert!(
            rest == body(len)[delivered + discarded..],
            "the source did not continue after {delivered} delivered + {discarded} discarded"
        );
    });
}
