//! What clients see when upstreams fail: 502 and 504 with a reason, never a hang, never a
//! response that looks complete when it is not, and other clients unaffected.

mod common;

use std::net::TcpListener;

use sluice_http::Method;
use sluice_testkit::{body_of, Origin, Proxy, RawClient, Reply};

use common::{binary, forward_config, forward_proxy};

fn get(client: &mut RawClient, url: &str) -> sluice_testkit::Response {
    let request = format!("GET {url} HTTP/1.1\r\nHost: x\r\n\r\n");
    client.send(request.as_bytes()).read_response(&Method::Get)
}

#[test]
fn unreachable_upstream_is_a_502_with_the_reason() {
    // A port that was just free: nothing listens there.
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &format!("http://127.0.0.1:{port}/"));
    assert_eq!(response.status(), 502);
    assert!(String::from_utf8_lossy(&response.body).contains("cannot connect"));
    proxy.wait_for_log("term=SC");
}

#[test]
fn unresolvable_name_is_a_502() {
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, "http://no-such-host.invalid/");
    assert_eq!(response.status(), 502);
    assert!(String::from_utf8_lossy(&response.body).contains("cannot resolve"));
}

#[test]
fn garbage_from_the_upstream_is_a_502() {
    let origin = Origin::start(|_| Reply::RawThenClose(b"SSH-2.0-OpenSSH\r\n\r\n".to_vec()));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &origin.url("/"));
    assert_eq!(response.status(), 502);
    assert!(String::from_utf8_lossy(&response.body).contains("invalid response"));
}

#[test]
fn silent_upstream_is_a_504_after_the_first_byte_timeout() {
    let origin = Origin::start(|_| Reply::Hang);
    let extra = "[timeouts]\nupstream_first_byte = \"300ms\"";
    let proxy = Proxy::start(binary(), &forward_config(&[], extra));
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &origin.url("/"));
    assert_eq!(response.status(), 504);
    proxy.wait_for_log("term=sH");
}

#[test]
fn upstream_abort_mid_body_never_looks_complete() {
    let mut cut = b"HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n".to_vec();
    cut.extend_from_slice(&body_of(40_000));
    let origin = Origin::start(move |_| Reply::RawThenClose(cut.clone()));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    client.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/")).as_bytes());
    assert!(
        client.try_read_response(&Method::Get).is_none(),
        "a cut body read as complete"
    );
    proxy.wait_for_log("term=SD");
}

#[test]
fn chunked_upstream_abort_never_sends_the_last_chunk() {
    let cut = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n".to_vec();
    let origin = Origin::start(move |_| Reply::RawThenClose(cut.clone()));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    client.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/")).as_bytes());
    let raw = client.read_to_end();
    assert!(
        !raw.ends_with(b"0\r\n\r\n"),
        "the client got a terminating chunk"
    );
}

#[test]
fn client_abort_mid_body_closes_the_upstream_instead_of_pooling_it() {
    let mut big = b"HTTP/1.1 200 OK\r\nContent-Length: 50000000\r\n\r\n".to_vec();
    big.extend_from_slice(&body_of(50_000_000));
    let origin = Origin::start(move |r| {
        if r.head.target.to_string() == "/big" {
            Reply::Raw(big.clone())
        } else {
            Reply::ok(b"small")
        }
    });
    let proxy = forward_proxy();
    {
        let mut client = RawClient::connect(proxy.addr());
        client.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/big")).as_bytes());
        // Dropped without reading: the proxy's write fails and the exchange ends.
    }
    proxy.wait_for_log("term=CD");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &origin.url("/small")).body, b"small");
    assert_eq!(
        origin.connections(),
        2,
        "the aborted upstream connection was reused"
    );
}

#[test]
fn bad_clients_and_dying_upstreams_do_not_disturb_other_clients() {
    let good = Origin::start(|_| Reply::ok(b"fine"));
    let dying = Origin::start(|_| {
        Reply::RawThenClose(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc".to_vec())
    });
    let proxy = forward_proxy();
    let mut steady = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut steady, &good.url("/1")).body, b"fine");
    for _ in 0..20 {
        let mut bad = RawClient::connect(proxy.addr());
        bad.send(b"GET http://x/ HTTP/1.1\r\nHost: x\r\nBad Header: \0\r\n\r\n");
        let mut victim = RawClient::connect(proxy.addr());
        victim.send(format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", dying.url("/")).as_bytes());
        assert!(victim.try_read_response(&Method::Get).is_none());
        let mut half = RawClient::connect(proxy.addr());
        half.send(b"GET http://127.0.0.1:1/ HTT");
        drop(half);
    }
    // The same persistent connection, on the same single worker, still works.
    assert_eq!(get(&mut steady, &good.url("/2")).body, b"fine");
    assert_eq!(good.connections(), 1);
}
