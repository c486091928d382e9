//! The forward proxy end to end: curl and raw sockets through the real binary to a scripted
//! origin, bytes checked on both sides.

mod common;

use sluice_http::Method;
use sluice_testkit::{body_of, curl, Origin, RawClient, Reply};

use common::{binary, forward_config, forward_proxy};
use sluice_testkit::Proxy;

#[test]
fn get_through_curl_is_byte_exact_and_rewritten_for_the_origin() {
    require_curl!();
    let body = body_of(1 << 20);
    let served = body.clone();
    let origin = Origin::start(move |_| Reply::ok(&served));
    let proxy = forward_proxy();
    let (code, out, err) = curl(&["-x", &proxy.url(), &origin.url("/big?x=1")]);
    assert_eq!(code, 0, "curl failed: {err}");
    assert!(
        out == body,
        "body differs: {} bytes, want {}",
        out.len(),
        body.len()
    );
    let request = &origin.requests()[0];
    let head = request.head_text();
    assert!(
        head.starts_with("GET /big?x=1 HTTP/1.1\r\n"),
        "origin-form upstream: {head}"
    );
    assert!(
        head.contains(&format!("Host: {}\r\n", origin.addr())),
        "{head}"
    );
    assert!(head.contains("Via: 1.1 sluice\r\n"), "{head}");
    assert!(
        !head.to_ascii_lowercase().contains("proxy-connection"),
        "hop-by-hop kept: {head}"
    );
}

#[test]
fn hop_by_hop_fields_and_those_connection_names_are_removed() {
    let origin = Origin::start(|_| {
        Reply::with_length(
            200,
            &[
                "Connection: x-upstream-secret",
                "X-Upstream-Secret: 1",
                "Keep-Alive: timeout=5",
            ],
            b"ok",
        )
    });
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = format!(
        "GET {} HTTP/1.1\r\nHost: x\r\nConnection: x-private\r\nX-Private: 1\r\nTE: trailers\r\n\
         Upgrade: websocket\r\nProxy-Authorization: Basic Zm9vOmJhcg==\r\nKeep-Alive: 1\r\nX-Kept: 1\r\n\r\n",
        origin.url("/")
    );
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(response.body, b"ok");
    assert_eq!(response.header("X-Upstream-Secret"), None);
    assert_eq!(response.header("Keep-Alive"), None);
    let head = origin.requests()[0].head_text().to_ascii_lowercase();
    for gone in [
        "x-private",
        "te:",
        "upgrade",
        "proxy-authorization",
        "keep-alive",
        "connection:",
    ] {
        assert!(!head.contains(gone), "{gone} forwarded: {head}");
    }
    assert!(head.contains("x-kept: 1"));
}

#[test]
fn keep_alive_reuses_the_client_and_the_upstream_connection() {
    require_curl!();
    let origin = Origin::start(|r| Reply::ok(r.head.target.to_string().as_bytes()));
    let proxy = forward_proxy();
    let (code, out, err) = curl(&[
        "-x",
        &proxy.url(),
        &origin.url("/one"),
        &origin.url("/two"),
        &origin.url("/three"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"/one/two/three");
    assert_eq!(origin.requests().len(), 3);
    assert_eq!(
        origin.connections(),
        1,
        "the upstream connection was not reused"
    );
    let logs = proxy.wait_for_log_count("sluice::access", 3);
    assert_eq!(logs.matches("status=200").count(), 3, "{logs}");
}

#[test]
fn three_pipelined_requests_come_back_in_order() {
    let origin = Origin::start(|r| Reply::ok(format!("body of {}", r.head.target).as_bytes()));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let mut batch = String::new();
    for path in ["/a", "/b", "/c"] {
        batch.push_str(&format!(
            "GET {} HTTP/1.1\r\nHost: x\r\n\r\n",
            origin.url(path)
        ));
    }
    client.send(batch.as_bytes());
    for path in ["/a", "/b", "/c"] {
        let response = client.read_response(&Method::Get);
        assert_eq!(response.body, format!("body of {path}").as_bytes());
    }
}

#[test]
fn curl_as_an_http10_client_gets_a_chunked_response_whole() {
    require_curl!();
    let body = sluice_testkit::body_of(100_000);
    let reply = body.clone();
    let origin = Origin::start(move |_| Reply::chunked(&reply, 7_000));
    let proxy = forward_proxy();
    let (code, out, err) = curl(&["-0", "-x", &proxy.url(), &origin.url("/old")]);
    assert_eq!(code, 0, "{err}");
    assert!(
        out == body,
        "the body arrived altered ({} bytes)",
        out.len()
    );
    let logs = proxy.wait_for_log("sluice::access");
    assert!(logs.contains("status=200"), "{logs}");
}

#[test]
fn http10_client_without_keep_alive_is_closed_after_the_response() {
    let origin = Origin::start(|_| Reply::ok(b"hello"));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.0\r\n\r\n", origin.url("/"));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(response.body, b"hello");
    assert!(response.head_text.starts_with("HTTP/1.1 200"));
    assert_eq!(response.header("Connection").as_deref(), Some("close"));
    assert!(client.is_closed());
}

#[test]
fn http10_client_with_keep_alive_gets_a_second_response() {
    let origin = Origin::start(|r| Reply::ok(r.head.target.to_string().as_bytes()));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    for path in ["/first", "/second"] {
        let request = format!(
            "GET {} HTTP/1.0\r\nConnection: keep-alive\r\n\r\n",
            origin.url(path)
        );
        let response = client.send(request.as_bytes()).read_response(&Method::Get);
        assert_eq!(response.body, path.as_bytes());
        assert_eq!(response.header("Connection").as_deref(), Some("keep-alive"));
    }
}

#[test]
fn chunked_response_passes_to_http11_and_is_dechunked_for_http10() {
    let body = body_of(100_000);
    let served = body.clone();
    let origin = Origin::start(move |_| Reply::chunked(&served, 7_000));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/"));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(
        response.header("Transfer-Encoding").as_deref(),
        Some("chunked")
    );
    assert!(response.body == body);

    let mut old = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.0\r\n\r\n", origin.url("/"));
    let raw = old.send(request.as_bytes()).read_to_end();
    let text_end = raw.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    let head = String::from_utf8_lossy(&raw[..text_end]).to_ascii_lowercase();
    assert!(!head.contains("transfer-encoding"), "{head}");
    assert!(raw[text_end..] == body[..], "de-chunked body differs");
}

#[test]
fn close_delimited_response_reaches_the_client_whole_then_closes() {
    let body = body_of(300_000);
    let served = body.clone();
    let origin = Origin::start(move |_| Reply::close_delimited(&served));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/"));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert!(response.body == body);
    assert_eq!(response.header("Connection").as_deref(), Some("close"));
}

#[test]
fn responses_without_body_have_none() {
    let origin = Origin::start(|r| match r.head.target.to_string().as_str() {
        "/204" => Reply::Raw(b"HTTP/1.1 204 No Content\r\n\r\n".to_vec()),
        "/304" => Reply::Raw(b"HTTP/1.1 304 Not Modified\r\nETag: \"x\"\r\n\r\n".to_vec()),
        _ => Reply::Raw(b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n".to_vec()),
    });
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let head = format!("HEAD {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/head"));
    let response = client.send(head.as_bytes()).read_response(&Method::Head);
    assert_eq!(response.header("Content-Length").as_deref(), Some("5"));
    for (path, status) in [("/204", 204), ("/304", 304)] {
        let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url(path));
        assert_eq!(
            client
                .send(request.as_bytes())
                .read_response(&Method::Get)
                .status(),
            status
        );
    }
    // Had any of them carried a body, this response would be misread.
    let request = format!("HEAD {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/again"));
    assert_eq!(
        client
            .send(request.as_bytes())
            .read_response(&Method::Head)
            .status(),
        200
    );
    assert_eq!(origin.connections(), 1);
}

#[test]
fn request_bodies_arrive_whole_with_either_framing() {
    let origin = Origin::start(|r| Reply::ok(format!("got {}", r.body.len()).as_bytes()));
    let proxy = forward_proxy();
    let body = body_of(200_000);
    let mut client = RawClient::connect(proxy.addr());
    let mut request = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        origin.url("/cl"),
        body.len()
    )
    .into_bytes();
    request.extend_from_slice(&body);
    assert_eq!(
        client.send(&request).read_response(&Method::Post).body,
        b"got 200000"
    );

    let mut request = format!(
        "PUT {} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
        origin.url("/te")
    )
    .into_bytes();
    for piece in body.chunks(30_000) {
        request.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        request.extend_from_slice(piece);
        request.extend_from_slice(b"\r\n");
    }
    request.extend_from_slice(b"0\r\n\r\n");
    assert_eq!(
        client.send(&request).read_response(&Method::Put).body,
        b"got 200000"
    );
    let received = origin.requests();
    assert!(received[0].body == body && received[1].body == body);
}

#[test]
fn expect_100_continue_is_answered_and_the_body_follows() {
    require_curl!();
    let origin = Origin::start(|r| Reply::ok(format!("got {}", r.body.len()).as_bytes()));
    let proxy = forward_proxy();
    let dir = tempfile_dir();
    let file = dir.join("upload.bin");
    std::fs::write(&file, body_of(50_000)).unwrap();
    let data = format!("@{}", file.display());
    let (code, out, err) = curl(&[
        "-x",
        &proxy.url(),
        "-H",
        "Expect: 100-continue",
        "--expect100-timeout",
        "20",
        "--data-binary",
        &data,
        &origin.url("/upload"),
    ]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"got 50000");
    assert!(!origin.requests()[0]
        .head_text()
        .to_ascii_lowercase()
        .contains("expect"));
}

fn tempfile_dir() -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("sluice-test-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

#[test]
fn connect_tunnel_carries_a_request_through_curl() {
    require_curl!();
    let origin = Origin::start(|_| Reply::ok(b"through the tunnel"));
    let proxy = Proxy::start(binary(), &forward_config(&[origin.addr().port()], ""));
    let (code, out, err) = curl(&["-p", "-x", &proxy.url(), &origin.url("/t")]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(out, b"through the tunnel");
    // The origin saw the client's own request, not a proxied one.
    assert!(!origin.requests()[0].head_text().contains("Via:"));
}

#[test]
fn connect_to_a_port_not_allowed_is_refused_with_403() {
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"CONNECT 127.0.0.1:25 HTTP/1.1\r\nHost: 127.0.0.1:25\r\n\r\n")
        .read_response(&Method::Connect);
    assert_eq!(response.status(), 403);
    assert!(String::from_utf8_lossy(&response.body).contains("port 25"));
    assert!(client.is_closed());
}

#[test]
fn origin_form_on_a_forward_listener_is_a_400() {
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
        .read_response(&Method::Get);
    assert_eq!(response.status(), 400);
    assert!(client.is_closed());
}

#[test]
fn x_forwarded_for_is_added_when_configured() {
    let origin = Origin::start(|_| Reply::ok(b""));
    let extra = "[headers]\nx_forwarded_for = true\nvia = \"edge\"";
    let proxy = Proxy::start(binary(), &forward_config(&[], extra));
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/"));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(response.header("Via").as_deref(), Some("1.1 edge"));
    let head = origin.requests()[0].head_text();
    assert!(head.contains("X-Forwarded-For: 127.0.0.1\r\n"), "{head}");
    assert!(head.contains("Via: 1.1 edge\r\n"), "{head}");
}
