//! The loop end to end: sockets, timers, the blocking pool and shutdown on one runtime.

use std::io::{Read, Write};
use std::time::{Duration, Instant};

use sluice_rt::net::{StreamOptions, TcpListener, TcpStream};
use sluice_rt::{spawn, spawn_blocking, timeout, Backend, Runtime};

#[test]
fn echoes_through_listener_and_connect() {
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let received = runtime.block_on(async {
        let options = StreamOptions::default();
        let listener = TcpListener::bind_reuseport("127.0.0.1:0".parse().unwrap(), 16).unwrap();
        let addr = listener.local_addr().unwrap();
        spawn(async move {
            let (stream, _) = listener.accept(&options).await.unwrap();
            let mut buf = vec![0u8; 1 << 16];
            loop {
                let n = stream.read(&mut buf).await.unwrap();
                if n == 0 {
                    break;
                }
                stream.write_all(&buf[..n]).await.unwrap();
            }
        });
        let client = TcpStream::connect(addr, &options).await.unwrap();
        // Larger than the socket buffers, so both sides must wait for writability.
        let payload: Vec<u8> = (0..4_000_000u32).map(|i| (i % 251) as u8).collect();
        let writer = {
            let payload = payload.clone();
            async move {
                client.write_all(&payload).await.unwrap();
                client.shutdown(std::net::Shutdown::Write).unwrap();
                client
            }
        };
        let writer = spawn(writer);
        let client = writer.await;
        let mut echoed = Vec::new();
        let mut buf = vec![0u8; 1 << 16];
        loop {
            let n = client.read(&mut buf).await.unwrap();
            if n == 0 {
                break;
            }
            echoed.extend_from_slice(&buf[..n]);
        }
        (echoed == payload, echoed.len())
    });
    assert_eq!(received, (true, 4_000_000));
}

#[test]
fn timeout_fires_on_a_silent_peer_and_not_on_a_ready_one() {
    let silent = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = silent.local_addr().unwrap();
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let (silent_result, ready_result) = runtime.block_on(async move {
        let stream = TcpStream::connect(addr, &StreamOptions::default())
            .await
            .unwrap();
        let mut buf = [0u8; 16];
        let silent_result = timeout(Duration::from_millis(50), stream.read(&mut buf)).await;
        let ready_result = timeout(Duration::from_secs(30), async { 7 }).await;
        (silent_result.is_err(), ready_result)
    });
    assert!(
        silent_result,
        "a read from a peer that never writes must time out"
    );
    assert_eq!(ready_result, Ok(7));
}

#[test]
fn blocking_pool_result_wakes_the_loop() {
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let value = runtime.block_on(async {
        spawn_blocking(|| {
            std::thread::sleep(Duration::from_millis(20));
            99
        })
        .await
    });
    assert_eq!(value, Some(99));
}

#[test]
fn shutdown_from_another_thread_ends_a_waiting_task() {
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let handle = runtime.shutdown_handle();
    let trigger = handle.clone();
    let thread = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(20));
        trigger.shutdown();
    });
    let started = Instant::now();
    runtime.block_on(async move { handle.requested().await });
    thread.join().unwrap();
    assert!(started.elapsed() < Duration::from_secs(60));
}

#[test]
fn many_connections_interleave_on_one_worker() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let server = std::thread::spawn(move || {
        for _ in 0..50 {
            let (mut s, _) = listener.accept().unwrap();
            std::thread::spawn(move || {
                let mut b = [0u8; 5];
                s.read_exact(&mut b).unwrap();
                s.write_all(&b).unwrap();
            });
        }
    });
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let total = runtime.block_on(async move {
        let tasks: Vec<_> = (0..50)
            .map(|_| {
                spawn(async move {
                    let s = TcpStream::connect(addr, &StreamOptions::default())
                        .await
                        .unwrap();
                    s.write_all(b"hello").await.unwrap();
                    let mut b = [0u8; 5];
                    let mut got = 0;
                    while got < 5 {
                        got += s.read(&mut b[got..]).await.unwrap();
                    }
                    usize::from(&b == b"hello")
                })
            })
            .collect();
        let mut total = 0;
        for t in tasks {
            total += t.await;
        }
        total
    });
    server.join().unwrap();
    assert_eq!(total, 50);
}

#[test]
fn a_panicking_task_ends_alone_and_the_loop_goes_on() {
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let answer = runtime.block_on(async {
        let panicking = std::rc::Rc::new(std::cell::Cell::new(false));
        let flag = panicking.clone();
        let _doomed = spawn(async move {
            flag.set(true);
            panic!("a bug in one connection");
        });
        // The survivor finishes only after the other task panicked, so the loop must outlive it.
        let survivor = spawn(async move {
            while !panicking.get() {
                sluice_rt::sleep(Duration::from_millis(1)).await;
            }
            sluice_rt::sleep(Duration::from_millis(1)).await;
            42
        });
        survivor.await
    });
    assert_eq!(answer, 42);
}

#[test]
fn awaiting_a_panicked_task_resumes_its_panic() {
    let runtime = Runtime::new(Backend::Epoll).unwrap();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        runtime.block_on(async {
            spawn(async { panic!("propagated") }).await;
        })
    }));
    let payload = outcome.expect_err("the panic reached block_on's caller");
    assert_eq!(payload.downcast_ref::<&str>(), Some(&"propagated"));
    // block_on cleaned up before resuming the panic: the thread can run a runtime again.
    assert_eq!(runtime.block_on(async { 7 }), 7);
}
