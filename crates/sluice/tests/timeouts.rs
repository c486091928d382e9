//! The timeouts of `[timeouts]` that end a connection rather than answer a request: each test
//! sets one short, makes the peer go quiet, and waits for the proxy to act (an event under the
//! testkit's deadline, never a sleep). `client_header` and `upstream_first_byte` are in
//! `strict.rs` and `upstream_failures.rs`.

mod common;

use std::net::{SocketAddr, TcpStream};

use common::{binary, forward_config};
use sluice_http::Method;
use sluice_testkit::{Origin, Proxy, RawClient, Reply};

#[test]
fn an_idle_keep_alive_connection_is_closed_after_keep_alive() {
    let origin = Origin::start(|_| Reply::ok(b"hi"));
    let proxy = Proxy::start(
        binary(),
        &forward_config(&[], "[timeouts]\nkeep_alive = \"300ms\""),
    );
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/"));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(
        (response.status(), response.body.as_slice()),
        (200, &b"hi"[..])
    );
    assert!(client.is_closed(), "the idle connection was kept open");
}

#[test]
fn an_upstream_that_never_completes_the_handshake_is_a_504() {
    // A listener whose accept queue (backlog 0: one connection) is full: the kernel drops
    // further SYNs, so the proxy's connect neither succeeds nor fails.
    let listener =
        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).expect("socket");
    let any: SocketAddr = "127.0.0.1:0".parse().expect("address");
    listener.bind(&any.into()).expect("bind");
    listener.listen(0).expect("listen");
    let addr = listener
        .local_addr()
        .expect("local address")
        .as_socket()
        .expect("an IP address");
    let _queued = TcpStream::connect(addr).expect("the one queued connection");

    let proxy = Proxy::start(
        binary(),
        &forward_config(&[], "[timeouts]\nupstream_connect = \"300ms\""),
    );
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET http://{addr}/ HTTP/1.1\r\nHost: x\r\n\r\n");
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(response.status(), 504);
    proxy.wait_for_log("term=sC");
}

#[test]
fn a_tunnel_with_nothing_moving_is_closed_after_tunnel_idle() {
    let origin = Origin::start(|_| Reply::ok(b"never asked"));
    let port = origin.addr().port();
    let proxy = Proxy::start(
        binary(),
        &forward_config(&[port], "[timeouts]\ntunnel_idle = \"300ms\""),
    );
    let mut client = RawClient::connect(proxy.addr());
    let connect = format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n");
    let response = client
        .send(connect.as_bytes())
        .read_response(&Method::Connect);
    assert_eq!(response.status(), 200);
    assert!(client.is_closed(), "the silent tunnel was kept open");
    proxy.wait_for_log("term=cT");
}
