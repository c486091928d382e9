use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::Duration;

use super::*;
use crate::copy::CopyEngine;
use crate::pipe::PipePool;
use crate::test_sockets::{body, pair, read_to_close, receive_on, run, send_from, until};

/// The engine, or `None` (and a line saying so) where BPF is not allowed.
fn engine() -> Option<SockmapEngine> {
    engine_with_pipes(4)
}

/// The engine over a pool of at most `pipes` pipes.
fn engine_with_pipes(pipes: usize) -> Option<SockmapEngine> {
    let splice = SpliceEngine::new(PipePool::new(64 * 1024, pipes), CopyEngine::new(16 * 1024));
    match SockmapEngine::load(splice) {
        Ok(engine) => Some(engine),
        Err(error) => {
            eprintln!("skipped: needs root and BPF sockmap ({error})");
            None
        }
    }
}

fn request(limit: Limit) -> TransferRequest<'static> {
    TransferRequest {
        prefix: b"HEAD",
        limit,
        idle_timeout: Duration::from_secs(10),
    }
}

#[test]
fn redirects_exact_bodies_while_they_arrive() {
    let Some(engine) = engine() else { return };
    run(|| async move {
        let stats = EngineStats::default();
        for len in [1usize, 65536, 300_000, 4 << 20] {
            let (src, mut src_far) = pair().await;
            let (dst, dst_far) = pair().await;
            // Half now (drained first), half once the socket is in the map; the two small sizes go
            // by splice (under SOCKMAP_MIN).
            let sent = body(len);
            let (first, second) = sent.split_at(len / 2);
            src_far.write_all(first).unwrap();
            let second = second.to_vec();
            let sender = std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(20));
                src_far.write_all(&second).unwrap();
                src_far
            });
            let receiver = receive_on(dst_far, len + 4);
            let outcome = engine
                .transfer(&src, &dst, request(Limit::Bytes(len as u64)), &stats)
                .await;
            drop(dst);
            let _far = sender.join().unwrap();
            assert_eq!(
                outcome.ending,
                Ending::Done,
                "len {len}: {:?}",
                outcome.error
            );
            assert_eq!(outcome.forwarded, len as u64);
            let got = receiver.join().unwrap();
            assert_eq!(&got[..4], b"HEAD");
            assert!(got[4..] == body(len)[..], "len {len}: bytes differ");
        }
        assert!(
            stats.transfers_by(Mechanism::Sockmap) >= 2,
            "{}",
            stats.summary()
        );
        assert_eq!(
            engine.shared.free_slots.borrow().len(),
            SOCKMAP_SLOTS as usize
        );
    });
}

#[test]
fn a_segment_crossing_the_body_end_is_finished_in_user_space() {
    let Some(engine) = engine() else { return };
    run(|| async move {
        let stats = EngineStats::default();
        let len = 300_000;
        let (src, mut src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        let receiver = receive_on(dst_far, len + 4);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            let mut sent = body(len);
            sent.extend_from_slice(b"NEXT");
            src_far.write_all(&sent).unwrap();
            src_far
        });
        let outcome = engine
            .transfer(&src, &dst, request(Limit::Bytes(len as u64)), &stats)
            .await;
        drop(dst);
        let _far = sender.join().unwrap();
        assert_eq!(outcome.ending, Ending::Done, "{:?}", outcome.error);
        let got = receiver.join().unwrap();
        assert!(got[4..] == body(len)[..], "bytes differ");
        // The bytes past the body come back to the caller, none lost.
        assert_eq!(outcome.overread, b"NEXT");
        assert_eq!(stats.fallbacks(FallbackReason::SockmapOverread), 0);
    });
}

#[test]
fn early_close_is_reported_not_hidden() {
    let Some(engine) = engine() else { return };
    run(|| async move {
        let stats = EngineStats::default();
        let (src, src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        let receiver = receive_on(dst_far, usize::MAX);
        let sender = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(20));
            send_from(src_far, body(100_000), true).join().unwrap()
        });
        let outcome = engine
            .transfer(&src, &dst, request(Limit::Bytes(1 << 20)), &stats)
            .await;
        drop(dst);
        drop(sender.join().unwrap());
        assert_eq!(outcome.ending, Ending::SourceClosedEarly);
        assert_eq!(outcome.forwarded, 100_000);
        assert_eq!(receiver.join().unwrap().len(), 100_004);
    });
}

/// Whether a flow of `engine` is in the maps (its slot taken).
fn in_map(engine: &SockmapEngine) -> bool {
    engine.shared.free_slots.borrow().len() < SOCKMAP_SLOTS as usize
}

#[test]
fn the_drain_copies_without_a_pipe_and_counts_it() {
    let Some(engine) = engine_with_pipes(0) else {
        return;
    };
    run(|| async move {
        let stats = EngineStats::default();
        let len = 300_000;
        let (src, mut src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        // Queued before the transfer starts, so the drain has something to move.
        src_far.write_all(&body(len)[..100_000]).unwrap();
        let sender = send_from(src_far, body(len)[100_000..].to_vec(), false);
        let receiver = receive_on(dst_far, len + 4);
        let outcome = engine
            .transfer(&src, &dst, request(Limit::Bytes(len as u64)), &stats)
            .await;
        drop(dst);
        let _far = sender.join().unwrap();
        assert_eq!(outcome.ending, Ending::Done, "{:?}", outcome.error);
        assert!(
            receiver.join().unwrap()[4..] == body(len)[..],
            "bytes differ"
        );
        assert!(
            stats.fallbacks(FallbackReason::NoPipe) >= 1,
            "{}",
            stats.summary()
        );
        assert!(
            stats.bytes_by(Mechanism::Copy) >= 100_000,
            "{}",
            stats.summary()
        );
        assert_eq!(stats.transfers(), 1);
        assert_eq!(stats.bytes(), len as u64 + 4);
    });
}

/// Step 6 with a small cap: the sockmap redirects up to the cap and splice carries the rest of
/// the same body. The source pauses at the cap until the flow has left the map, which keeps
/// this test clear of the removal race (see the module docs).
#[test]
fn a_body_over_the_cap_is_redirected_up_to_it_and_spliced_after() {
    let Some(engine) = engine() else { return };
    let cap = 300_000;
    let engine = engine.with_cap(cap as u64, 0);
    run(|| async move {
        let stats = EngineStats::default();
        let len = 1_000_000;
        let (src, mut src_far) = pair().await;
        let (dst, dst_far) = pair().await;
        let (go, ready) = mpsc::channel::<()>();
        let sender = std::thread::spawn(move || {
            for part in [&body(len)[..cap], &body(len)[cap..]] {
                ready.recv().unwrap();
                src_far.write_all(part).unwrap();
            }
            src_far
        });
        let receiver = receive_on(dst_far, len + 4);
        let transfer = engine.transfer(&src, &dst, request(Limit::Bytes(len as u64)), &stats);
        let pace = async {
            until(|| in_map(&engine)).await;
            go.send(()).unwrap();
            until(|| !in_map(&engine)).await;
            go.send(()).unwrap();
        };
        let (outcome, ()) = futures_lite::future::zip(transfer, pace).await;
        drop(dst);
        let _far = sender.join().unwrap();
        assert_eq!(outcome.ending, Ending::Done, "{:?}", outcome.error);
        assert_eq!(outcome.forwarded, len as u64);
        let got = receiver.join().unwrap();
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..] == body(len)[..], "bytes differ");
        assert_eq!(stats.transfers_by(Mechanism::Sockmap), 1);
        assert_eq!(stats.bytes_by(Mechanism::Sockmap), cap as u64 + 4);
        assert_eq!(stats.bytes_by(Mechanism::Splice), (len - cap) as u64);
        assert_eq!(stats.fallbacks(FallbackReason::SockmapCap), 1);
    });
}

/// Unsplice: cancelling a transfer (dropping its future) while its flow is in the maps takes
/// both sockets out; they work as plain sockets afterwards, the source at the first byte the
/// program did not redirect.
#[test]
fn a_cancelled_transfer_leaves_the_maps_and_both_sockets_usable() {
    let Some(engine) = engine() else { return };
    run(|| async move {
        let stats = EngineStats::default();
        let (src, mut src_far) = pair().await;
        let (dst, mut dst_far) = pair().await;
        let (signal, mut signal_far) = pair().await;
        let (go, ready) = mpsc::channel::<()>();
        let sender = std::thread::spawn(move || {
            for part in [&body(600_000)[..400_000], &body(600_000)[400_000..]] {
                ready.recv().unwrap();
                src_far.write_all(part).unwrap();
            }
        });
        // The client says when the redirected burst is through, then reads to the end.
        let client = std::thread::spawn(move || {
            let mut got = vec![0u8; 400_004];
            dst_far.read_exact(&mut got).unwrap();
            signal_far.write_all(b"!").unwrap();
            dst_far.read_to_end(&mut got).unwrap();
            got
        });
        let cookie = socket_cookie(src.as_fd()).unwrap();
        let transfer = engine.transfer(&src, &dst, request(Limit::Bytes(1 << 20)), &stats);
        let through = async {
            until(|| in_map(&engine)).await;
            go.send(()).unwrap();
            let _ = signal.read(&mut [0u8; 1]).await;
            None
        };
        let finished = futures_lite::future::or(async { Some(transfer.await) }, through).await;
        assert!(finished.is_none(), "the transfer ended by itself");
        assert!(!in_map(&engine), "a slot is still taken");
        assert!(
            engine.shared.program.flow(cookie).is_err(),
            "the flow is still in its map"
        );
        // The rest arrives on a plain socket and is read in user space.
        go.send(()).unwrap();
        let rest = read_to_close(&src).await;
        sender.join().unwrap();
        assert!(
            rest == body(600_000)[400_000..],
            "the source lost its place"
        );
        dst.write_all(b"PLAIN").await.unwrap();
        dst.shutdown(std::net::Shutdown::Write).unwrap();
        let got = client.join().unwrap();
        assert_eq!(&got[..4], b"HEAD");
        assert!(got[4..400_004] == body(600_000)[..400_000]);
        assert_eq!(&got[400_004..], b"PLAIN");
    });
}
