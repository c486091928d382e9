//! The reverse proxy: origin-form requests spread over upstreams, Host kept.

mod common;

use sluice_http::Method;
use sluice_testkit::{body_of, curl, Origin, RawClient, Reply};

use common::reverse_proxy;

#[test]
fn round_robin_over_upstreams_keeps_host() {
    require_curl!();
    let a = Origin::start(|_| Reply::ok(b"a"));
    let b = Origin::start(|_| Reply::ok(b"b"));
    let proxy = reverse_proxy(&[&a, &b], "");
    let url = format!("{}/page", proxy.url());
    let (code, out, err) = curl(&["-H", "Host: www.example.test", &url, &url, &url, &url]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"abab");
    for origin in [&a, &b] {
        let requests = origin.requests();
        assert_eq!(requests.len(), 2);
        let head = requests[0].head_text();
        assert!(head.starts_with("GET /page HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains("Host: www.example.test\r\n"),
            "Host not kept: {head}"
        );
    }
}

#[test]
fn large_body_is_byte_exact_in_both_directions() {
    let body = body_of(3 << 20);
    let origin = Origin::start(|r| Reply::ok(&r.body));
    let proxy = reverse_proxy(&[&origin], "");
    let mut client = RawClient::connect(proxy.addr());
    let mut request = format!(
        "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    let response = client.send(&request).read_response(&Method::Post);
    assert!(response.body == body, "echoed body differs");
}

#[test]
fn connect_on_a_reverse_listener_is_refused() {
    let origin = Origin::start(|_| Reply::ok(b""));
    let proxy = reverse_proxy(&[&origin], "");
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
        .read_response(&Method::Connect);
    assert_eq!(response.status(), 405);
    assert!(client.is_closed());
}

/// An upstream that refuses connections costs no request: each one goes to the next upstream.
/// With every upstream down the client gets a 502.
#[test]
fn a_refused_upstream_fails_over_to_the_next() {
    let live = Origin::start(|_| Reply::ok(b"live"));
    // A port that was free a moment ago: connecting to it is refused.
    let dead = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let config = format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
         upstreams = [\"{dead}\", \"{}\"]\n",
        live.addr()
    );
    let proxy = sluice_testkit::Proxy::start(common::binary(), &config);
    let mut client = RawClient::connect(proxy.addr());
    for _ in 0..4 {
        let response = client
            .send(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
            .read_response(&Method::Get);
        assert_eq!(
            (response.status(), response.body.as_slice()),
            (200, &b"live"[..])
        );
    }
    assert_eq!(live.requests().len(), 4);
    assert!(proxy
        .wait_for_log("upstream unreachable")
        .contains(&dead.to_string()));

    let all_dead = format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
         upstreams = [\"{dead}\", \"{dead}\"]\n"
    );
    let proxy = sluice_testkit::Proxy::start(common::binary(), &all_dead);
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"GET /x HTTP/1.1\r\nHost: x\r\n\r\n")
        .read_response(&Method::Get);
    assert_eq!(response.status(), 502);
}
