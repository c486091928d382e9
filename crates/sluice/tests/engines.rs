//! Every body engine end to end through the real binary: byte-exact bodies of every awkward
//! size in every framing, pipelined responses, CONNECT both ways, and aborts on either side.
//! Each engine runs the same scenarios (`engine_scenarios!` below); the sockmap ones need root
//! and say `skipped` without it. In those scenarios the sockmap engine splices every body under
//! 256 KiB, and whatever the origin queued before the socket entered the map: what the sockmap
//! itself carries is shown by `sockmap_redirects_large_content_length_bodies`.

mod common;

use std::io::{Read, Write};
use std::net::{Shutdown, TcpListener, TcpStream};
use std::path::Path;
use std::sync::mpsc;
use std::thread;

use sluice_http::{decode_chunked, Method};
use sluice_testkit::{body_of, curl, curl_available, Origin, Proxy, RawClient, Reply};

/// The sizes the issue names: empty, one byte, both sides of a page and of 64 KiB, 1 MiB and
/// 50 MiB.
const SIZES: [usize; 8] = [0, 1, 4095, 4096, 65535, 65536, 1 << 20, 50 << 20];

const BIG: usize = 50 << 20;

/// `body_of(len)`, with the 50 MiB one built once per test binary (building it takes a good
/// part of a second in a debug build, and every engine needs it several times).
fn body(len: usize) -> std::borrow::Cow<'static, [u8]> {
    static BIG_BODY: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    if len == BIG {
        std::borrow::Cow::Borrowed(BIG_BODY.get_or_init(|| body_of(BIG)))
    } else {
        std::borrow::Cow::Owned(body_of(len))
    }
}

fn proxy(engine: &str, connect_port: u16) -> Proxy {
    Proxy::start(
        Path::new(env!("CARGO_BIN_EXE_sluice")),
        &engine_config(engine, connect_port),
    )
}

fn engine_config(engine: &str, connect_port: u16) -> String {
    format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
         [access]\nallow = [\"127.0.0.0/8\"]\nconnect_ports = [{connect_port}]\n\
         [transfer]\nengine = \"{engine}\"\n"
    )
}

/// Whether this engine can run here: sockmap needs root (and says so when skipped).
fn available(engine: &str) -> bool {
    if engine != "sockmap" {
        return true;
    }
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let root = status
        .lines()
        .any(|line| line.starts_with("Uid:") && line.split_whitespace().nth(1) == Some("0"));
    if !root {
        eprintln!("skipped: the sockmap engine needs root");
    }
    root
}

/// An origin answering `/<framing>/<len>` with `len` deterministic bytes in that framing.
fn sized_origin() -> Origin {
    Origin::start(|request| {
        let path = request.head_text();
        let path = path.split_whitespace().nth(1).unwrap_or("/").to_owned();
        let mut parts = path.trim_start_matches('/').split('/');
        let framing = parts.next().unwrap_or("");
        let len: usize = parts.next().and_then(|n| n.parse().ok()).unwrap_or(0);
        uncacheable(match framing {
            "chunked" => Reply::chunked(&body(len), 100_000),
            "close" => Reply::close_delimited(&body(len)),
            _ => Reply::ok(&body(len)),
        })
    })
}

/// The reply with `Cache-Control: no-store` added: these tests are about the engines, so every
/// response must cross one, whatever cache the proxy has.
fn uncacheable(reply: Reply) -> Reply {
    let mark = |bytes: Vec<u8>| {
        let at = bytes
            .windows(2)
            .position(|w| w == b"\r\n")
            .expect("a status line");
        let mut out = bytes[..at + 2].to_vec();
        out.extend_from_slice(b"Cache-Control: no-store\r\n");
        out.extend_from_slice(&bytes[at + 2..]);
        out
    };
    match reply {
        Reply::Raw(bytes) => Reply::Raw(mark(bytes)),
        Reply::RawThenClose(bytes) => Reply::RawThenClose(mark(bytes)),
        other => other,
    }
}

/// The logs must not show a fallback: the engine asked for is the engine that ran.
fn assert_no_fallback(proxy: &Proxy, allowed: &[&str]) {
    let logs = proxy.logs();
    for line in logs.lines().filter(|l| l.contains("engine fell back")) {
        assert!(
            allowed.iter().any(|reason| line.contains(reason)),
            "unexpected fallback: {line}"
        );
    }
}

/// Asserts `got == want`, saying where they first differ rather than dumping megabytes.
#[track_caller]
fn assert_bytes(got: &[u8], want: &[u8], what: &str) {
    if got == want {
        return;
    }
    let at = got.iter().zip(want).position(|(a, b)| a != b);
    panic!(
        "{what}: {} bytes, want {}; first difference at {at:?}",
        got.len(),
        want.len()
    );
}

/// The proxy's log lines that say something went wrong: warnings, errors, and access-log lines
/// whose termination code is not `--`.
fn trouble(proxy: &Proxy) -> String {
    proxy
        .logs()
        .lines()
        .filter(|l| l.contains("WARN") || l.contains("ERROR") || !l.contains("term=--"))
        .filter(|l| !l.contains("listening"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn get(path_url: &str) -> Vec<u8> {
    format!("GET {path_url} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

fn content_length_bodies(engine: &str) {
    let origin = sized_origin();
    let proxy = proxy(engine, 443);
    // One client connection for all sizes: each response must end exactly at its boundary.
    let mut client = RawClient::connect(proxy.addr());
    for len in SIZES {
        client.send(&get(&origin.url(&format!("/length/{len}"))));
        let response = client.read_response(&Method::Get);
        assert_eq!(response.status(), 200, "{engine} {len}");
        assert_bytes(
            &response.body,
            &body(len),
            &format!("{engine}: {len}-byte body"),
        );
    }
    assert_eq!(
        origin.connections(),
        1,
        "{engine}: upstream reused across sizes"
    );
    assert_no_fallback(&proxy, &[]);
}

fn chunked_bodies(engine: &str) {
    let origin = sized_origin();
    let proxy = proxy(engine, 443);
    let mut client = RawClient::connect(proxy.addr());
    for len in SIZES.into_iter().filter(|&len| len < BIG) {
        client.send(&get(&origin.url(&format!("/chunked/{len}"))));
        let response = client.read_response(&Method::Get);
        assert_eq!(
            response.header("Transfer-Encoding").as_deref(),
            Some("chunked")
        );
        assert_bytes(
            &response.body,
            &body(len),
            &format!("{engine}: chunked {len}"),
        );
    }
    // curl decodes 50 MiB of chunks in linear time; the test client re-parses per read.
    if curl_available() {
        let (code, out, err) = curl(&["-x", &proxy.url(), &origin.url("/chunked/52428800")]);
        assert_eq!(
            code,
            0,
            "{engine}: curl failed: {err}\nproxy:\n{}",
            trouble(&proxy)
        );
        assert!(out == *body(BIG), "{engine}: 50 MiB chunked body differs");
    } else {
        eprintln!("skipped: 50 MiB chunked needs curl");
    }
    assert_no_fallback(&proxy, &[]);
}

fn close_delimited_bodies(engine: &str) {
    let origin = sized_origin();
    let proxy = proxy(engine, 443);
    for len in SIZES {
        let mut client = RawClient::connect(proxy.addr());
        client.send(&get(&origin.url(&format!("/close/{len}"))));
        let response = client.read_response(&Method::Get);
        assert_eq!(response.status(), 200);
        assert_bytes(
            &response.body,
            &body(len),
            &format!("{engine}: close-delimited {len}"),
        );
    }
    // A close-delimited body has no known size: the sockmap hands it to splice, and says so.
    assert_no_fallback(&proxy, &["sockmap-cap"]);
}

fn pipelined_responses_in_order(engine: &str) {
    let sizes = [300_000usize, 1 << 20, 70_000];
    let origin = Origin::start(move |request| {
        let seq: usize = request.head_text().contains("/2 ") as usize * 2
            + request.head_text().contains("/1 ") as usize;
        let seq_header = format!("X-Seq: {seq}");
        let headers = [seq_header.as_str(), "Cache-Control: no-store"];
        Reply::with_length(200, &headers, &body_of(sizes[seq]))
    });
    let proxy = proxy(engine, 443);
    let mut client = RawClient::connect(proxy.addr());
    let mut all = Vec::new();
    for seq in 0..3 {
        all.extend(get(&origin.url(&format!("/{seq}"))));
    }
    client.send(&all);
    for (seq, len) in sizes.iter().enumerate() {
        let response = client.read_response(&Method::Get);
        assert_eq!(response.header("X-Seq"), Some(seq.to_string()), "{engine}");
        assert!(
            response.body == body_of(*len),
            "{engine}: response {seq} differs"
        );
    }
    assert_no_fallback(&proxy, &[]);
}

fn connect_tunnel_both_ways(engine: &str) {
    let up_len = 3 << 20;
    let down_len = 5 << 20;
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    let far = thread::spawn(move || {
        let (mut stream, _) = server.accept().unwrap();
        let mut got = vec![0u8; up_len];
        stream.read_exact(&mut got).unwrap();
        stream.write_all(&body_of(down_len)).unwrap();
        stream.shutdown(Shutdown::Write).unwrap();
        got
    });
    let proxy = proxy(engine, port);
    let mut client = RawClient::connect(proxy.addr());
    client.send(format!("CONNECT 127.0.0.1:{port} HTTP/1.1\r\nHost: x\r\n\r\n").as_bytes());
    client.send(&body_of(up_len));
    let reply = client.read_to_end();
    let established = b"HTTP/1.1 200 Connection established\r\n\r\n";
    assert!(reply.starts_with(established), "{engine}: no 200");
    assert!(
        reply[established.len()..] == body_of(down_len),
        "{engine}: downstream bytes differ"
    );
    assert!(
        far.join().unwrap() == body_of(up_len),
        "{engine}: upstream bytes differ"
    );
    assert_no_fallback(&proxy, &[]);
}

fn client_abort_closes_the_upstream(engine: &str) {
    let origin = Origin::start(|_| uncacheable(Reply::ok(&body(BIG))));
    let proxy = proxy(engine, 443);
    {
        // Read a little of the body, then hang up with the rest unread (a reset).
        let mut client = TcpStream::connect(proxy.addr()).unwrap();
        client.write_all(&get(&origin.url("/big"))).unwrap();
        let mut some = vec![0u8; 256 * 1024];
        client.read_exact(&mut some).unwrap();
    }
    // The aborted upstream connection must not be pooled: the next request opens a new one.
    let small = Origin::start(|_| uncacheable(Reply::ok(b"small")));
    let mut client = RawClient::connect(proxy.addr());
    client.send(&get(&small.url("/")));
    assert_eq!(client.read_response(&Method::Get).body, b"small");
    client.send(&get(&origin.url("/again")));
    let again = client.read_response(&Method::Get);
    assert_bytes(
        &again.body,
        &body(BIG),
        &format!("{engine}: second big body"),
    );
    let requests = origin.requests();
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].connection, 1,
        "{engine}: aborted upstream was reused"
    );
    proxy.wait_for_log("term=CD");
}

fn upstream_abort_never_looks_complete(engine: &str) {
    let origin = Origin::start(|request| {
        let mut out;
        if request.head_text().contains("/chunked") {
            out = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n100000\r\n".to_vec();
        } else {
            out = b"HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n".to_vec();
        }
        out.extend_from_slice(&body_of(300_000));
        uncacheable(Reply::RawThenClose(out))
    });
    let proxy = proxy(engine, 443);
    let mut client = RawClient::connect(proxy.addr());
    client.send(&get(&origin.url("/length")));
    let raw = client.read_to_end();
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    assert!(
        raw.len() - head_end < 1 << 20,
        "{engine}: a cut Content-Length body arrived whole"
    );
    let mut client = RawClient::connect(proxy.addr());
    client.send(&get(&origin.url("/chunked")));
    let raw = client.read_to_end();
    let head_end = raw
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a head")
        + 4;
    assert!(
        decode_chunked(&raw[head_end..]).is_err(),
        "{engine}: a cut chunked body got its last chunk"
    );
}

macro_rules! engine_scenarios {
    ($module:ident, $engine:literal) => {
        mod $module {
            macro_rules! scenario {
                ($name:ident) => {
                    #[test]
                    fn $name() {
                        if super::available($engine) {
                            super::$name($engine);
                        }
                    }
                };
            }
            scenario!(content_length_bodies);
            scenario!(chunked_bodies);
            scenario!(close_delimited_bodies);
            scenario!(pipelined_responses_in_order);
            scenario!(connect_tunnel_both_ways);
            scenario!(client_abort_closes_the_upstream);
            scenario!(upstream_abort_never_looks_complete);
        }
    };
}

engine_scenarios!(copy, "copy");
engine_scenarios!(splice, "splice");
engine_scenarios!(sockmap, "sockmap");
engine_scenarios!(auto, "auto");

/// With the pool at its bound, a transfer is copied, byte-exact, and the fallback is logged
/// with its reason: never silent.
#[test]
fn an_empty_pipe_pool_falls_back_to_copy_loudly() {
    let origin = Origin::start(|_| uncacheable(Reply::ok(&body_of(8 << 20))));
    let config = "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
                  [access]\nallow = [\"127.0.0.0/8\"]\n\
                  [transfer]\nengine = \"splice\"\npipe_pool = 1\n";
    let proxy = Proxy::start(Path::new(env!("CARGO_BIN_EXE_sluice")), config);
    // Client A takes the only pipe: its transfer is running once the head arrived, and it
    // stalls there because A reads nothing more for now.
    let mut a = TcpStream::connect(proxy.addr()).unwrap();
    a.write_all(&get(&origin.url("/a"))).unwrap();
    let mut first = [0u8; 1];
    a.read_exact(&mut first).unwrap();
    // Client B finds the pool empty.
    let mut b = RawClient::connect(proxy.addr());
    b.send(&get(&origin.url("/b")));
    assert_bytes(
        &b.read_response(&Method::Get).body,
        &body_of(8 << 20),
        "B, copied",
    );
    let logs = proxy.wait_for_log("reason=\"no-pipe\"");
    assert!(logs.contains("engine fell back"), "{logs}");
    // A still gets its whole response, spliced.
    a.set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    let mut response = first.to_vec();
    let mut chunk = vec![0u8; 1 << 16];
    let mut head_end = None;
    loop {
        if head_end.is_none() {
            head_end = response
                .windows(4)
                .position(|w| w == b"\r\n\r\n")
                .map(|at| at + 4);
        }
        if let Some(at) = head_end {
            if response.len() >= at + (8 << 20) {
                assert_bytes(&response[at..], &body_of(8 << 20), "A, spliced");
                return;
            }
        }
        let n = a.read(&mut chunk).expect("read A's response");
        assert!(n > 0, "A's response ended after {} bytes", response.len());
        response.extend_from_slice(&chunk[..n]);
    }
}

/// An origin for one request on one connection, answering with a `len`-byte Content-Length
/// body in parts: the head and the first part at once, each further part only once `sent`
/// says the client has everything before it.
fn staged_origin(len: usize, parts: Vec<usize>, sent: mpsc::Receiver<()>) -> u16 {
    let server = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = server.local_addr().unwrap().port();
    thread::spawn(move || {
        let (mut stream, _) = server.accept().unwrap();
        let mut head = Vec::new();
        while !head.ends_with(b"\r\n\r\n") {
            let mut byte = [0u8; 1];
            stream.read_exact(&mut byte).unwrap();
            head.push(byte[0]);
        }
        let body = body(len);
        let reply =
            format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nCache-Control: no-store\r\n\r\n");
        stream.write_all(reply.as_bytes()).unwrap();
        let mut at = 0;
        for (i, part) in parts.into_iter().enumerate() {
            if i > 0 {
                sent.recv().unwrap();
            }
            stream.write_all(&body[at..at + part]).unwrap();
            at += part;
        }
        // Held open until the proxy closes it, so no FIN races the last part.
        let _ = stream.read_to_end(&mut Vec::new());
    });
    port
}

/// The sockmap engine carries large Content-Length bodies itself, as the shutdown counters
/// show. The origin sends the head and a first part, then waits until the proxy has drained
/// that part by splice and put the sockets in the map (its debug event "sockmap flow
/// started"; step 1 of `sockmap.rs`), and only then sends the rest, which the program must
/// redirect. Waiting for the event, not for time, is what keeps the drain from taking it all.
#[test]
fn sockmap_redirects_large_content_length_bodies() {
    if !available("sockmap") {
        return;
    }
    for len in [1 << 20, BIG] {
        let first = 64 * 1024;
        let last = len - first;
        let parts = vec![first, last];
        let (tell, sent) = mpsc::channel();
        let port = staged_origin(len, parts.clone(), sent);
        let proxy = Proxy::start_logging(
            Path::new(env!("CARGO_BIN_EXE_sluice")),
            &engine_config("sockmap", 443),
            "info,sluice_splice::sockmap=debug",
        );
        let mut client = TcpStream::connect(proxy.addr()).unwrap();
        client
            .set_read_timeout(Some(sluice_testkit::DEADLINE))
            .unwrap();
        client
            .write_all(&get(&format!("http://127.0.0.1:{port}/staged")))
            .unwrap();
        let mut got = Vec::with_capacity(len + 4096);
        let mut chunk = vec![0u8; 1 << 16];
        let mut head_end = None;
        let mut told = 0;
        let mut boundary = parts[0];
        while head_end.is_none_or(|at| got.len() < at + len) {
            let n = client.read(&mut chunk).expect("read the response");
            assert!(
                n > 0,
                "{len}: the response ended early\n{}",
                trouble(&proxy)
            );
            got.extend_from_slice(&chunk[..n]);
            if head_end.is_none() {
                head_end = got
                    .windows(4)
                    .position(|w| w == b"\r\n\r\n")
                    .map(|at| at + 4);
            }
            while let Some(at) = head_end {
                if told + 1 >= parts.len() || got.len() < at + boundary {
                    break;
                }
                proxy.wait_for_log("sockmap flow started");
                tell.send(()).unwrap();
                told += 1;
                boundary += parts[told];
            }
        }
        let at = head_end.expect("a head");
        assert_bytes(&got[at..], &body(len), &format!("sockmap: staged {len}"));
        drop(client);
        let (clean, logs) = proxy.terminate_with_logs();
        assert!(clean, "{logs}");
        let (transfers, bytes) = common::engine_counters(&logs, "sockmap");
        assert_eq!(transfers, 1, "{len}: the body was not redirected\n{logs}");
        assert!(
            bytes >= last as u64,
            "{len}: the sockmap carried only {bytes} bytes\n{logs}"
        );
        assert!(!logs.contains("engine fell back"), "{logs}");
    }
}

/// `auto` says in the access log what it picked for each body: copy for a small one, splice
/// for a large one.
#[test]
fn auto_names_the_mechanism_it_picked_in_the_access_log() {
    let origin = sized_origin();
    let proxy = proxy("auto", 443);
    let mut client = RawClient::connect(proxy.addr());
    for len in [1024, 1 << 20] {
        client.send(&get(&origin.url(&format!("/length/{len}"))));
        assert_eq!(client.read_response(&Method::Get).body, body(len).as_ref());
    }
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("sluice::access"))
        .collect();
    assert!(lines[0].contains("engine=copy"), "{}", lines[0]);
    assert!(lines[1].contains("engine=splice"), "{}", lines[1]);
}

/// An origin answering every request with `reply`, and closing after it when asked to.
fn closing_origin(reply: Vec<u8>) -> Origin {
    Origin::start(move |request| {
        let asked_to_close = request
            .head_text()
            .to_ascii_lowercase()
            .contains("\r\nconnection: close\r\n");
        if asked_to_close {
            Reply::RawThenClose(reply.clone())
        } else {
            Reply::Raw(reply.clone())
        }
    })
}

fn splice_after_connect_proxy(cache: &str) -> Proxy {
    let config = format!(
        "workers = 1\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
         [access]\nallow = [\"127.0.0.0/8\"]\n\
         [transfer]\nengine = \"splice\"\nsplice_after = \"connect\"\n{cache}"
    );
    Proxy::start(Path::new(env!("CARGO_BIN_EXE_sluice")), &config)
}

/// Sends GET `url` on a new connection and checks that exactly `reply` comes back and the
/// proxy then closes the connection.
fn assert_spliced_whole(proxy: &Proxy, url: &str, reply: &[u8]) {
    let mut client = RawClient::connect(proxy.addr());
    client.send(&get(url));
    assert!(
        client.read_to_end() == reply,
        "the reply was not relayed byte for byte, or the connection stayed open"
    );
}

/// `splice_after = "connect"` without a cache: a GET's reply goes to the client exactly as the
/// origin sent it (head included, nothing added), from an upstream asked to close, and the
/// client's connection closes after it. A POST still takes the head-parsing path.
#[test]
fn splice_after_connect_splices_the_reply_whole_and_closes() {
    let body = body_of(300_000);
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nX-Origin: yes\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    let origin = closing_origin(reply.clone());
    let proxy = splice_after_connect_proxy("[cache]\nenabled = false\n");
    assert_spliced_whole(&proxy, &origin.url("/whole"), &reply);
    let logs = proxy.wait_for_log_count("sluice::access", 1);
    assert!(
        logs.contains("status=0") && logs.contains("engine=splice"),
        "{logs}"
    );

    let mut client = RawClient::connect(proxy.addr());
    let url = origin.url("/post");
    client
        .send(format!("POST {url} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi").as_bytes());
    let response = client.read_response(&Method::Other("POST".into()));
    assert_eq!((response.status(), response.body == body), (200, true));
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(logs.contains("status=200"), "{logs}");
}

/// With the cache on, a GET is spliced whole only once the cache knows its URL is not
/// cacheable (the pass marker a `no-store` reply leaves): the first reply is read as usual.
#[test]
fn splice_after_connect_splices_whole_what_the_cache_passes() {
    let body = body_of(100_000);
    let mut reply = format!(
        "HTTP/1.1 200 OK\r\nCache-Control: no-store\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    reply.extend_from_slice(&body);
    let origin = closing_origin(reply.clone());
    let proxy = splice_after_connect_proxy("");
    let url = origin.url("/no-store");
    let mut client = RawClient::connect(proxy.addr());
    client.send(&get(&url));
    assert_eq!(client.read_response(&Method::Get).body, body);
    assert_spliced_whole(&proxy, &url, &reply);
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    let lines: Vec<&str> = logs
        .lines()
        .filter(|l| l.contains("sluice::access"))
        .collect();
    assert!(lines[0].contains("status=200"), "{}", lines[0]);
    assert!(lines[1].contains("status=0"), "{}", lines[1]);
}
