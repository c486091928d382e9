//! Every rejection the proxy owes a smuggling attempt or a broken client: the status, and that
//! the connection closes afterwards. Raw sockets, because curl will not send these.

mod common;

use sluice_http::Method;
use sluice_testkit::{Origin, Proxy, RawClient, Reply};

use common::{binary, forward_config, forward_proxy};

/// Sends `request` (with `{origin}` replaced by the origin's URL) and checks the answer.
fn expect_rejection(request: &str, status: u16) {
    let origin = Origin::start(|_| Reply::ok(b"should not be reached"));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = request.replace("{origin}", &origin.url(""));
    let response = client.send(request.as_bytes()).read_response(&Method::Get);
    assert_eq!(
        response.status(),
        status,
        "for {request:?}: {}",
        response.head_text
    );
    assert_eq!(response.header("Connection").as_deref(), Some("close"));
    assert!(client.is_closed(), "connection left open after {status}");
    assert!(
        origin.requests().is_empty(),
        "a rejected request reached the origin"
    );
    proxy.wait_for_log(&format!("status={status}"));
}

#[test]
fn rejects_content_length_with_transfer_encoding() {
    expect_rejection(
        "POST {origin}/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_differing_duplicate_content_length() {
    expect_rejection("POST {origin}/ HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400);
}

#[test]
fn rejects_transfer_coding_other_than_final_chunked() {
    expect_rejection(
        "POST {origin}/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked, gzip\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_gzip_then_chunked_as_not_implemented() {
    expect_rejection(
        "POST {origin}/ HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n",
        501,
    );
}

#[test]
fn rejects_obs_fold() {
    expect_rejection(
        "GET {origin}/ HTTP/1.1\r\nHost: x\r\nX-A: one\r\n two\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_whitespace_before_colon() {
    expect_rejection(
        "GET {origin}/ HTTP/1.1\r\nHost: x\r\nX-A : one\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_bare_cr() {
    expect_rejection(
        "GET {origin}/ HTTP/1.1\r\nHost: x\r\nX-A: o\rne\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_nul() {
    expect_rejection(
        "GET {origin}/ HTTP/1.1\r\nHost: x\r\nX-A: o\0ne\r\n\r\n",
        400,
    );
}

#[test]
fn rejects_invalid_method() {
    expect_rejection("G(T {origin}/ HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

#[test]
fn rejects_invalid_target() {
    expect_rejection("GET {origin}/a b HTTP/1.1\r\nHost: x\r\n\r\n", 400);
}

#[test]
fn rejects_a_request_line_over_8_kib_with_414() {
    let long = format!(
        "GET {{origin}}/{} HTTP/1.1\r\nHost: x\r\n\r\n",
        "a".repeat(9000)
    );
    expect_rejection(&long, 414);
}

#[test]
fn rejects_headers_over_64_kib_with_431() {
    let mut request = String::from("GET {origin}/ HTTP/1.1\r\nHost: x\r\n");
    for i in 0..100 {
        request.push_str(&format!("X-Filler-{i}: {}\r\n", "v".repeat(700)));
    }
    request.push_str("\r\n");
    expect_rejection(&request, 431);
}

#[test]
fn rejects_bad_chunk_size_in_a_request_body() {
    let origin = Origin::start(|_| Reply::ok(b"ok"));
    let proxy = forward_proxy();
    let mut client = RawClient::connect(proxy.addr());
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nhello\r\n0\r\n\r\n",
        origin.url("/")
    );
    let response = client.send(request.as_bytes()).read_response(&Method::Post);
    // The head was valid and went upstream; the body's framing is not: the client gets a 400
    // and the upstream connection is dropped with the half-sent request.
    assert_eq!(response.status(), 400);
    assert!(client.is_closed());
    proxy.wait_for_log("status=400");
}

#[test]
fn slow_request_head_gets_408_and_close() {
    let proxy = Proxy::start(
        binary(),
        &forward_config(&[], "[timeouts]\nclient_header = \"300ms\""),
    );
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"GET http://127.0.0.1:1/ HTTP/1.1\r\nHo")
        .read_response(&Method::Get);
    assert_eq!(response.status(), 408);
    assert!(client.is_closed());
}

#[test]
fn client_outside_the_allow_list_gets_403() {
    let config = "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
                  [access]\nallow = [\"10.0.0.0/8\"]\n";
    let proxy = Proxy::start(binary(), config);
    let mut client = RawClient::connect(proxy.addr());
    let response = client
        .send(b"GET http://127.0.0.1:1/ HTTP/1.1\r\nHost: x\r\n\r\n")
        .read_response(&Method::Get);
    assert_eq!(response.status(), 403);
    assert!(client.is_closed());
    proxy.wait_for_log("term=PR");
}
