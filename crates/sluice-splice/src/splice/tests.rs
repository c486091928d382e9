use std::time::Duration;

use super::*;
use crate::test_sockets::{body, pair, receive_on, run, send_from};

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
