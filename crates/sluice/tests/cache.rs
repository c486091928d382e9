//! The memory cache through the real binary, against a scripted origin: each test shows the
//! origin's headers, the requests sent, and what the origin and the client saw.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread;

use common::{binary, forward_config};
use sluice_http::Method;
use sluice_testkit::{body_of, Origin, Proxy, RawClient, Reply, Response};

fn cache_proxy(extra: &str) -> Proxy {
    Proxy::start(binary(), &forward_config(&[], extra))
}

/// Sends one GET for `url` (plus `headers`, "Name: value" lines) on `client`.
fn get(client: &mut RawClient, url: &str, headers: &[&str]) -> Response {
    request(client, "GET", url, headers)
}

fn request(client: &mut RawClient, method: &str, url: &str, headers: &[&str]) -> Response {
    let mut text = format!("{method} {url} HTTP/1.1\r\nHost: origin\r\n");
    for header in headers {
        text.push_str(header);
        text.push_str("\r\n");
    }
    text.push_str("\r\n");
    client.send(text.as_bytes());
    let method = match method {
        "HEAD" => Method::Head,
        "GET" => Method::Get,
        other => Method::Other(other.to_owned()),
    };
    client.read_response(&method)
}

/// Polls STATS until `counter` reaches `value` (an event in the proxy, not a timing guess).
fn wait_for_stat(proxy: &Proxy, counter: &str, value: u64) {
    let start = std::time::Instant::now();
    while proxy.cache_stats()[counter] < value {
        assert!(
            start.elapsed() < sluice_testkit::DEADLINE,
            "{counter} never reached {value}: {:?}",
            proxy.cache_stats()
        );
        thread::sleep(std::time::Duration::from_millis(10));
    }
}

fn x_cache(response: &Response) -> String {
    response.header("X-Cache").unwrap_or_default()
}

#[test]
fn second_get_is_a_hit_without_contacting_the_origin() {
    let origin =
        Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"hello"));
    let proxy = cache_proxy("");
    let url = origin.url("/a");
    let mut client = RawClient::connect(proxy.addr());
    let first = get(&mut client, &url, &[]);
    assert_eq!(
        (first.status(), first.body.as_slice()),
        (200, &b"hello"[..])
    );
    assert_eq!(x_cache(&first), "MISS");
    let second = get(&mut client, &url, &[]);
    assert_eq!(
        (second.status(), second.body.as_slice()),
        (200, &b"hello"[..])
    );
    assert_eq!(x_cache(&second), "HIT");
    assert!(second.header("Age").is_some(), "{}", second.head_text);
    assert_eq!(origin.requests().len(), 1);
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(
        logs.contains("cache=miss") && logs.contains("cache=hit"),
        "{logs}"
    );
}

#[test]
fn chunked_response_is_stored_decoded_and_served_with_a_length() {
    let body = body_of(100_000);
    let mut raw =
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for piece in body.chunks(7000) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let reply = Reply::Raw(raw);
    let origin = Origin::start(move |_| reply.clone());
    let proxy = cache_proxy("");
    let url = origin.url("/chunked");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &url, &[]).body, body);
    let hit = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&hit), "HIT");
    assert_eq!(hit.header("Content-Length"), Some(body.len().to_string()));
    assert_eq!(hit.body, body);
    assert_eq!(origin.requests().len(), 1);
}

#[test]
fn no_store_is_not_cached() {
    let origin = Origin::start(|_| Reply::with_length(200, &["Cache-Control: no-store"], b"x"));
    let proxy = cache_proxy("");
    let url = origin.url("/private");
    let mut client = RawClient::connect(proxy.addr());
    for _ in 0..2 {
        let response = get(&mut client, &url, &[]);
        assert_eq!(x_cache(&response), "MISS");
    }
    assert_eq!(origin.requests().len(), 2);
}

#[test]
fn vary_keeps_one_entry_per_variant() {
    let origin = Origin::start(|r| {
        let encoding = r
            .head
            .headers
            .get("accept-encoding")
            .map(|v| String::from_utf8_lossy(v).into_owned())
            .unwrap_or_default();
        Reply::with_length(
            200,
            &["Cache-Control: max-age=60", "Vary: Accept-Encoding"],
            format!("body for {encoding}").as_bytes(),
        )
    });
    let proxy = cache_proxy("");
    let url = origin.url("/v");
    let mut client = RawClient::connect(proxy.addr());
    let gzip = get(&mut client, &url, &["Accept-Encoding: gzip"]);
    let br = get(&mut client, &url, &["Accept-Encoding: br"]);
    let gzip_again = get(&mut client, &url, &["Accept-Encoding: gzip"]);
    let br_again = get(&mut client, &url, &["Accept-Encoding: br"]);
    assert_eq!(gzip.body, b"body for gzip");
    assert_eq!(br.body, b"body for br");
    assert_eq!(
        (gzip_again.body.as_slice(), x_cache(&gzip_again).as_str()),
        (&b"body for gzip"[..], "HIT")
    );
    assert_eq!(
        (br_again.body.as_slice(), x_cache(&br_again).as_str()),
        (&b"body for br"[..], "HIT")
    );
    assert_eq!(origin.requests().len(), 2);
}

#[test]
fn stale_entry_is_revalidated_with_if_none_match_and_a_304_refreshes_it() {
    let origin = Origin::start(|r| {
        if r.head.headers.get("if-none-match") == Some(&b"\"v1\""[..]) {
            Reply::with_length(304, &["ETag: \"v1\"", "Cache-Control: max-age=60"], b"")
        } else {
            Reply::with_length(
                200,
                &["ETag: \"v1\"", "Cache-Control: max-age=0"],
                b"body v1",
            )
        }
    });
    let proxy = cache_proxy("");
    let url = origin.url("/stale");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &url, &[]).body, b"body v1");
    let revalidated = get(&mut client, &url, &[]);
    assert_eq!(revalidated.status(), 200);
    assert_eq!(revalidated.body, b"body v1");
    assert_eq!(x_cache(&revalidated), "REVALIDATED");
    // The 304's max-age=60 replaced the stored max-age=0: fresh now.
    let hit = get(&mut client, &url, &[]);
    assert_eq!(
        (x_cache(&hit), hit.body),
        (String::from("HIT"), b"body v1".to_vec())
    );
    let requests = origin.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        requests[1].head_text().contains("If-None-Match: \"v1\""),
        "{}",
        requests[1].head_text()
    );
}

#[test]
fn client_conditional_gets_a_304_from_the_cache() {
    let origin = Origin::start(|_| {
        Reply::with_length(
            200,
            &["ETag: \"abc\"", "Cache-Control: max-age=60"],
            b"payload",
        )
    });
    let proxy = cache_proxy("");
    let url = origin.url("/c");
    let mut client = RawClient::connect(proxy.addr());
    // On a miss too: the origin is asked for the whole object, the client answered from it.
    let first = get(&mut client, &url, &["If-None-Match: \"abc\""]);
    assert_eq!(first.status(), 304);
    assert!(first.body.is_empty());
    let second = get(&mut client, &url, &["If-None-Match: \"abc\""]);
    assert_eq!(
        (second.status(), x_cache(&second)),
        (304, String::from("HIT"))
    );
    let other = get(&mut client, &url, &["If-None-Match: \"zzz\""]);
    assert_eq!((other.status(), other.body), (200, b"payload".to_vec()));
    let requests = origin.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        !requests[0].head_text().contains("If-None-Match"),
        "{}",
        requests[0].head_text()
    );
}

#[test]
fn post_invalidates_the_stored_get() {
    let gets = Arc::new(AtomicUsize::new(0));
    let seen = gets.clone();
    let origin = Origin::start(move |r| {
        if r.head.method == Method::Post {
            return Reply::with_length(200, &[], b"posted");
        }
        let n = seen.fetch_add(1, Ordering::SeqCst);
        Reply::with_length(
            200,
            &["Cache-Control: max-age=60"],
            format!("v{n}").as_bytes(),
        )
    });
    let proxy = cache_proxy("");
    let url = origin.url("/doc");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &url, &[]).body, b"v0");
    assert_eq!(get(&mut client, &url, &[]).body, b"v0");
    client.send(
        format!("POST {url} HTTP/1.1\r\nHost: origin\r\nContent-Length: 1\r\n\r\nx").as_bytes(),
    );
    assert_eq!(client.read_response(&Method::Post).body, b"posted");
    let after = get(&mut client, &url, &[]);
    assert_eq!(
        (x_cache(&after), after.body),
        (String::from("MISS"), b"v1".to_vec())
    );
    assert_eq!(gets.load(Ordering::SeqCst), 2);
}

#[test]
fn head_is_answered_from_the_get_entry() {
    let origin =
        Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"0123456789"));
    let proxy = cache_proxy("");
    let url = origin.url("/h");
    let mut client = RawClient::connect(proxy.addr());
    get(&mut client, &url, &[]);
    let head = request(&mut client, "HEAD", &url, &[]);
    assert_eq!(head.status(), 200);
    assert_eq!(head.header("Content-Length").as_deref(), Some("10"));
    assert!(head.body.is_empty());
    assert_eq!(x_cache(&head), "HIT");
    // The connection is still in step: no body bytes followed the HEAD answer.
    assert_eq!(get(&mut client, &url, &[]).body, b"0123456789");
    assert_eq!(origin.requests().len(), 1);
}

#[test]
fn range_is_answered_with_206_from_a_stored_object() {
    let body = body_of(1000);
    let stored = body.clone();
    let origin =
        Origin::start(move |_| Reply::with_length(200, &["Cache-Control: max-age=60"], &stored));
    let proxy = cache_proxy("");
    let url = origin.url("/r");
    let mut client = RawClient::connect(proxy.addr());
    // A Range on a miss: the whole object is fetched and stored, the client gets its part.
    let first = get(&mut client, &url, &["Range: bytes=10-19"]);
    assert_eq!(first.status(), 206);
    assert_eq!(first.body, &body[10..20]);
    let second = get(&mut client, &url, &["Range: bytes=-5"]);
    assert_eq!(second.status(), 206);
    assert_eq!(
        second.header("Content-Range").as_deref(),
        Some("bytes 995-999/1000")
    );
    assert_eq!(second.body, &body[995..]);
    let beyond = get(&mut client, &url, &["Range: bytes=5000-"]);
    assert_eq!(beyond.status(), 416);
    let requests = origin.requests();
    assert_eq!(requests.len(), 1);
    assert!(
        !requests[0].head_text().contains("Range"),
        "{}",
        requests[0].head_text()
    );
}

#[test]
fn concurrent_misses_on_one_worker_make_one_origin_request() {
    const CLIENTS: usize = 5;
    let (release, released) = mpsc::channel::<()>();
    let released = Mutex::new(released);
    let body = body_of(50_000);
    let reply = body.clone();
    let origin = Origin::start(move |_| {
        // Hold the answer until every client is waiting in the proxy.
        let _ = released.lock().unwrap().recv();
        Reply::with_length(200, &["Cache-Control: max-age=60"], &reply)
    });
    let proxy = cache_proxy("");
    let url = origin.url("/collapsed");
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            let addr = proxy.addr();
            let url = url.clone();
            thread::spawn(move || get(&mut RawClient::connect(addr), &url, &[]))
        })
        .collect();
    wait_for_stat(&proxy, "collapsed", CLIENTS as u64 - 1);
    for _ in 0..CLIENTS {
        let _ = release.send(());
    }
    for client in clients {
        let response = client.join().expect("client thread");
        assert_eq!(response.body, body);
    }
    assert_eq!(origin.requests().len(), 1);
    assert_eq!(origin.connections(), 1);
}

#[test]
fn memory_budget_holds_under_many_fills() {
    let origin = Origin::start(|r| {
        let body = body_of(100 * 1024 + r.head.target.to_string().len());
        Reply::with_length(200, &["Cache-Control: max-age=600"], &body)
    });
    // 1 MiB for the single worker: ten 100 KiB objects fit, forty do not.
    let proxy = cache_proxy("[cache]\nmemory = \"1MiB\"\nmax_object = \"512KiB\"\n");
    let mut client = RawClient::connect(proxy.addr());
    for i in 0..40 {
        let response = get(&mut client, &origin.url(&format!("/obj/{i}")), &[]);
        assert_eq!(response.status(), 200);
    }
    let stats = proxy.cache_stats();
    assert_eq!(stats["budget"], 1 << 20);
    assert!(stats["bytes"] <= stats["budget"], "{stats:?}");
    assert_eq!(stats["fills_committed"], 40, "{stats:?}");
    assert!(stats["evictions"] > 0 && stats["entries"] < 40, "{stats:?}");
    // The most recent object is still a hit.
    let last = get(&mut client, &origin.url("/obj/39"), &[]);
    assert_eq!(x_cache(&last), "HIT");
}

/// `[transfer]` for the spliced KeepCopy path (splice plus tee into the fill).
const SPLICE: &str = "[transfer]\nengine = \"splice\"\n";
/// The user-space relay, which the default engine (`auto`) leaves for small bodies only.
const COPY: &str = "[transfer]\nengine = \"copy\"\n";

#[test]
fn origin_abort_never_leaves_a_servable_partial_entry() {
    origin_abort_leaves_no_entry(COPY);
}

#[test]
fn origin_abort_never_leaves_a_servable_partial_entry_spliced() {
    origin_abort_leaves_no_entry(SPLICE);
}

fn origin_abort_leaves_no_entry(transfer: &str) {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let body = body_of(10_000);
    let full = body.clone();
    let origin = Origin::start(move |_| {
        let mut raw =
            b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nContent-Length: 10000\r\n\r\n"
                .to_vec();
        if seen.fetch_add(1, Ordering::SeqCst) == 0 {
            raw.extend_from_slice(&full[..4000]);
            Reply::RawThenClose(raw)
        } else {
            raw.extend_from_slice(&full);
            Reply::Raw(raw)
        }
    });
    let proxy = cache_proxy(transfer);
    let url = origin.url("/cut");
    let mut first = RawClient::connect(proxy.addr());
    first.send(format!("GET {url} HTTP/1.1\r\nHost: origin\r\n\r\n").as_bytes());
    assert!(
        first.try_read_response(&Method::Get).is_none(),
        "a cut body read as whole"
    );
    let mut second = RawClient::connect(proxy.addr());
    let response = get(&mut second, &url, &[]);
    assert_eq!(response.body, body);
    assert_eq!(x_cache(&response), "MISS");
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(x_cache(&get(&mut second, &url, &[])), "HIT");
}

/// Starts a GET for a large cacheable object, waits for the first bytes of the response, and
/// closes the client without reading the rest.
fn abort_after_first_bytes(proxy: &Proxy, url: &str) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(proxy.addr()).expect("connect");
    stream
        .set_read_timeout(Some(sluice_testkit::DEADLINE))
        .expect("timeout");
    stream
        .write_all(format!("GET {url} HTTP/1.1\r\nHost: origin\r\n\r\n").as_bytes())
        .expect("send");
    let mut first = [0u8; 16];
    assert!(stream.read(&mut first).expect("response starts") > 0);
}

#[test]
fn client_abort_within_fill_after_abort_still_stores_the_object() {
    client_abort_within_allowance(COPY);
}

#[test]
fn client_abort_within_fill_after_abort_still_stores_the_object_spliced() {
    client_abort_within_allowance(SPLICE);
}

fn client_abort_within_allowance(transfer: &str) {
    let body = body_of(4 << 20);
    let reply = body.clone();
    let origin =
        Origin::start(move |_| Reply::with_length(200, &["Cache-Control: max-age=60"], &reply));
    let proxy = cache_proxy(&format!(
        "{transfer}[cache]\nfill_after_abort = \"16MiB\"\n"
    ));
    let url = origin.url("/big");
    abort_after_first_bytes(&proxy, &url);
    let logs = proxy.wait_for_log("term=CD");
    let engine = if transfer == SPLICE { "splice" } else { "copy" };
    assert!(
        logs.lines()
            .any(|line| line.contains("term=CD") && line.contains(&format!("engine={engine}"))),
        "the body did not go by {engine}: {logs}"
    );
    assert_eq!(proxy.cache_stats()["fills_committed"], 1);
    let mut client = RawClient::connect(proxy.addr());
    let hit = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&hit), "HIT");
    assert_eq!(hit.body, body);
    assert_eq!(origin.requests().len(), 1);
}

#[test]
fn client_abort_past_fill_after_abort_drops_the_fill() {
    client_abort_past_allowance(COPY);
}

#[test]
fn client_abort_past_fill_after_abort_drops_the_fill_spliced() {
    client_abort_past_allowance(SPLICE);
}

fn client_abort_past_allowance(transfer: &str) {
    let body = body_of(32 << 20);
    let reply = body.clone();
    let origin =
        Origin::start(move |_| Reply::with_length(200, &["Cache-Control: max-age=60"], &reply));
    // Far more is left at the abort than the allowance: the fill is given up, not finished.
    let proxy = cache_proxy(&format!("{transfer}[cache]\nfill_after_abort = \"1MiB\"\n"));
    let url = origin.url("/big");
    abort_after_first_bytes(&proxy, &url);
    proxy.wait_for_log("term=CD");
    assert_eq!(proxy.cache_stats()["fills_aborted"], 1);
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&response), "MISS");
    assert_eq!(response.body, body);
    assert_eq!(origin.requests().len(), 2);
}

#[test]
fn spliced_miss_fills_the_cache_through_tee_and_the_hit_is_byte_exact() {
    let body = body_of(1 << 20);
    let reply = body.clone();
    let origin =
        Origin::start(move |_| Reply::with_length(200, &["Cache-Control: max-age=60"], &reply));
    let proxy = cache_proxy(SPLICE);
    let url = origin.url("/spliced");
    let mut client = RawClient::connect(proxy.addr());
    let miss = get(&mut client, &url, &[]);
    assert_eq!(
        (x_cache(&miss), miss.body == body),
        ("MISS".to_owned(), true)
    );
    let hit = get(&mut client, &url, &[]);
    assert_eq!((x_cache(&hit), hit.body == body), ("HIT".to_owned(), true));
    assert_eq!(origin.requests().len(), 1);
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(
        logs.lines()
            .any(|line| line.contains("cache=miss") && line.contains("engine=splice")),
        "the miss was not spliced: {logs}"
    );
    assert_eq!(proxy.cache_stats()["fills_committed"], 1);
}

#[test]
fn auto_copies_a_small_cacheable_body_and_splices_a_large_one() {
    let origin = Origin::start(|r| {
        let size = if r.head.target.to_string().ends_with("/small") {
            1024
        } else {
            1 << 20
        };
        Reply::with_length(200, &["Cache-Control: max-age=60"], &body_of(size))
    });
    let proxy = cache_proxy("[transfer]\nengine = \"auto\"\n");
    let mut client = RawClient::connect(proxy.addr());
    for (path, size) in [("/small", 1024), ("/large", 1 << 20)] {
        let url = origin.url(path);
        assert_eq!(get(&mut client, &url, &[]).body, body_of(size));
        let hit = get(&mut client, &url, &[]);
        assert_eq!(
            (x_cache(&hit), hit.body == body_of(size)),
            ("HIT".to_owned(), true)
        );
    }
    let logs = proxy.wait_for_log_count("sluice::access", 4);
    let misses: Vec<&str> = logs.lines().filter(|l| l.contains("cache=miss")).collect();
    assert_eq!(misses.len(), 2, "{logs}");
    assert!(misses[0].contains("engine=copy"), "{}", misses[0]);
    assert!(misses[1].contains("engine=splice"), "{}", misses[1]);
}

/// A fill that finds no pipe for KeepCopy is copied, and neither step is silent: the no-pipe
/// fallback is logged and counted, and the copy shows in the copy counters at shutdown.
#[test]
fn a_fill_without_a_pipe_is_copied_and_counted() {
    let body = body_of(1 << 20);
    let reply = body.clone();
    let origin = Origin::start(move |r| {
        if r.head.target.to_string().ends_with("/hold") {
            // Far more than loopback socket buffers hold, so the transfer stalls in its pipe.
            Reply::with_length(200, &["Cache-Control: no-store"], &body_of(32 << 20))
        } else {
            Reply::with_length(200, &["Cache-Control: max-age=60"], &reply)
        }
    });
    let proxy = cache_proxy("[transfer]\nengine = \"splice\"\npipe_pool = 1\n");
    // Client A takes the only pipe: its transfer stalls there while A reads no more.
    let mut a = std::net::TcpStream::connect(proxy.addr()).unwrap();
    let hold = format!(
        "GET {} HTTP/1.1\r\nHost: origin\r\n\r\n",
        origin.url("/hold")
    );
    std::io::Write::write_all(&mut a, hold.as_bytes()).unwrap();
    std::io::Read::read_exact(&mut a, &mut [0u8; 1]).unwrap();
    let mut client = RawClient::connect(proxy.addr());
    let miss = get(&mut client, &origin.url("/fill"), &[]);
    assert_eq!(
        (x_cache(&miss), miss.body == body),
        ("MISS".to_owned(), true)
    );
    assert_eq!(proxy.cache_stats()["fills_committed"], 1);
    proxy.wait_for_log("reason=\"no-pipe\"");
    drop(a);
    let (clean, logs) = proxy.terminate_with_logs();
    assert!(clean, "{logs}");
    let (copies, copied) = common::engine_counters(&logs, "copy");
    assert!(
        copies >= 1 && copied > 1 << 20,
        "the fill's copy was not counted: {logs}"
    );
    assert_eq!(common::fallbacks(&logs, "no-pipe"), 1, "{logs}");
}

#[test]
fn purge_removes_the_entry_and_is_refused_outside_purge_allow() {
    let origin = Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"p"));
    let proxy = cache_proxy("");
    let url = origin.url("/p");
    let mut client = RawClient::connect(proxy.addr());
    get(&mut client, &url, &[]);
    assert_eq!(request(&mut client, "PURGE", &url, &[]).status(), 200);
    assert_eq!(request(&mut client, "PURGE", &url, &[]).status(), 404);
    assert_eq!(x_cache(&get(&mut client, &url, &[])), "MISS");
    assert_eq!(origin.requests().len(), 2);

    let strict = cache_proxy("[cache]\npurge_allow = [\"10.0.0.0/8\"]\n");
    let mut client = RawClient::connect(strict.addr());
    assert_eq!(request(&mut client, "PURGE", &url, &[]).status(), 403);
    let mut client = RawClient::connect(strict.addr());
    assert_eq!(
        request(&mut client, "STATS", "http://stats.invalid/", &[]).status(),
        403
    );
}

/// Each worker has its own store; a PURGE taken by one must empty the other's too. Over 32
/// new connections both workers (SO_REUSEPORT spreads them) fill their own copy, so a purged
/// object is a miss exactly once on each worker afterwards.
#[test]
fn purge_reaches_every_worker() {
    let origin = Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"w"));
    let config = forward_config(&[], "").replace("workers = 1", "workers = 2");
    let proxy = Proxy::start(binary(), &config);
    let url = origin.url("/w");
    let misses = |proxy: &Proxy| {
        (0..32)
            .filter(|_| {
                let mut client = RawClient::connect(proxy.addr());
                x_cache(&get(&mut client, &url, &[])) == "MISS"
            })
            .count()
    };
    assert_eq!(misses(&proxy), 2, "one fill per worker");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(request(&mut client, "PURGE", &url, &[]).status(), 200);
    assert_eq!(misses(&proxy), 2, "a worker kept serving the purged object");
    assert_eq!(origin.requests().len(), 4);
}

#[test]
fn disabled_cache_forwards_everything_untouched() {
    let origin = Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"d"));
    let proxy = cache_proxy("[cache]\nenabled = false\n");
    let url = origin.url("/off");
    let mut client = RawClient::connect(proxy.addr());
    for _ in 0..2 {
        let response = get(&mut client, &url, &[]);
        assert_eq!(response.header("X-Cache"), None, "{}", response.head_text);
    }
    assert_eq!(origin.requests().len(), 2);
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(request(&mut client, "PURGE", &url, &[]).status(), 405);
}

#[test]
fn object_announced_over_max_object_is_relayed_and_passed() {
    let body = body_of(300 * 1024);
    let reply = body.clone();
    let origin =
        Origin::start(move |_| Reply::with_length(200, &["Cache-Control: max-age=60"], &reply));
    let proxy = cache_proxy("[cache]\nmax_object = \"256KiB\"\n");
    let url = origin.url("/large");
    let mut client = RawClient::connect(proxy.addr());
    for _ in 0..2 {
        assert_eq!(get(&mut client, &url, &[]).body, body);
    }
    assert_eq!(origin.requests().len(), 2);
    let stats = proxy.cache_stats();
    assert_eq!(
        (stats["entries"], stats["fills_committed"]),
        (0, 0),
        "{stats:?}"
    );
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(logs.contains("cache=pass"), "{logs}");
}

#[test]
fn only_if_cached_without_an_entry_is_a_504_and_the_origin_is_not_asked() {
    let origin = Origin::start(|_| Reply::with_length(200, &["Cache-Control: max-age=60"], b"o"));
    let proxy = cache_proxy("");
    let url = origin.url("/only");
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &url, &["Cache-Control: only-if-cached"]);
    assert_eq!(response.status(), 504);
    assert!(origin.requests().is_empty());
    let mut client = RawClient::connect(proxy.addr());
    get(&mut client, &url, &[]);
    let cached = get(&mut client, &url, &["Cache-Control: only-if-cached"]);
    assert_eq!(
        (cached.status(), x_cache(&cached)),
        (200, String::from("HIT"))
    );
    assert_eq!(origin.requests().len(), 1);
}

#[test]
fn revalidation_answered_with_200_replaces_the_entry() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let origin = Origin::start(move |_| {
        let n = seen.fetch_add(1, Ordering::SeqCst);
        let etag = format!("ETag: \"v{n}\"");
        Reply::with_length(
            200,
            &[&etag, "Cache-Control: max-age=0"],
            format!("v{n}").as_bytes(),
        )
    });
    let proxy = cache_proxy("");
    let url = origin.url("/changing");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &url, &[]).body, b"v0");
    let changed = get(&mut client, &url, &[]);
    assert_eq!(
        (x_cache(&changed), changed.body),
        (String::from("MISS"), b"v1".to_vec())
    );
    let requests = origin.requests();
    assert!(requests[1].head_text().contains("If-None-Match: \"v0\""));
    // The stored entry is now v1: the next revalidation names it.
    get(&mut client, &url, &[]);
    assert!(origin.requests()[2]
        .head_text()
        .contains("If-None-Match: \"v1\""));
}

#[test]
fn http10_client_gets_a_cacheable_chunked_response_dechunked_then_a_hit() {
    let body = body_of(20_000);
    let mut raw =
        b"HTTP/1.1 200 OK\r\nCache-Control: max-age=60\r\nTransfer-Encoding: chunked\r\n\r\n"
            .to_vec();
    for piece in body.chunks(3000) {
        raw.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
        raw.extend_from_slice(piece);
        raw.extend_from_slice(b"\r\n");
    }
    raw.extend_from_slice(b"0\r\n\r\n");
    let origin = Origin::start(move |_| Reply::Raw(raw.clone()));
    let proxy = cache_proxy("");
    let url = origin.url("/old");
    let mut client = RawClient::connect(proxy.addr());
    client.send(format!("GET {url} HTTP/1.0\r\n\r\n").as_bytes());
    assert!(client.read_to_end().ends_with(&body));
    let mut client = RawClient::connect(proxy.addr());
    client.send(format!("GET {url} HTTP/1.0\r\n\r\n").as_bytes());
    let hit = client.read_response(&Method::Get);
    assert_eq!((x_cache(&hit), hit.body), (String::from("HIT"), body));
    assert_eq!(origin.requests().len(), 1);
}

#[test]
fn reverse_listener_caches_by_host_and_path() {
    let origin = Origin::start(|r| {
        Reply::with_length(
            200,
            &["Cache-Control: max-age=60"],
            r.head.target.to_string().as_bytes(),
        )
    });
    let proxy = common::reverse_proxy(&[&origin], "");
    let mut client = RawClient::connect(proxy.addr());
    let mut fetch = |path: &str, host: &str| {
        client.send(format!("GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n").as_bytes());
        client.read_response(&Method::Get)
    };
    assert_eq!(fetch("/r1", "site.example").body, b"/r1");
    let hit = fetch("/r1", "site.example");
    assert_eq!(
        (x_cache(&hit), hit.body),
        (String::from("HIT"), b"/r1".to_vec())
    );
    // Another Host is another key.
    assert_eq!(x_cache(&fetch("/r1", "other.example")), "MISS");
    assert_eq!(origin.requests().len(), 2);
}

#[test]
fn unsafe_method_invalidates_its_same_origin_location() {
    let origin = Origin::start(|r| {
        if r.head.method == Method::Put {
            return Reply::with_length(201, &["Location: /list"], b"");
        }
        Reply::with_length(200, &["Cache-Control: max-age=60"], b"list")
    });
    let proxy = cache_proxy("");
    let list = origin.url("/list");
    let mut client = RawClient::connect(proxy.addr());
    get(&mut client, &list, &[]);
    assert_eq!(x_cache(&get(&mut client, &list, &[])), "HIT");
    let item = origin.url("/list/item");
    client.send(
        format!("PUT {item} HTTP/1.1\r\nHost: origin\r\nContent-Length: 2\r\n\r\nhi").as_bytes(),
    );
    assert_eq!(client.read_response(&Method::Put).status(), 201);
    assert_eq!(x_cache(&get(&mut client, &list, &[])), "MISS");
}

/// A 1 MiB memory cache over a disk tier in `dir`: two 700 KiB objects cannot both stay in
/// memory, so the first goes to disk when the second is stored.
fn disk_proxy(dir: &std::path::Path) -> Proxy {
    cache_proxy(&format!(
        "[cache]\nmemory = \"1MiB\"\nmax_object = \"1MiB\"\ndisk_dir = \"{}\"\n",
        dir.display()
    ))
}

/// Fills /d0 and /d1 so that /d0 is evicted to disk, and waits for its file to be written.
fn push_first_object_to_disk(proxy: &Proxy, origin: &Origin) {
    let mut client = RawClient::connect(proxy.addr());
    get(&mut client, &origin.url("/d0"), &[]);
    get(&mut client, &origin.url("/d1"), &[]);
    wait_for_stat(proxy, "disk_writes", 1);
}

fn large_origin() -> Origin {
    Origin::start(|r| {
        let body = body_of(700 * 1024 + r.head.target.to_string().len());
        Reply::with_length(200, &["Cache-Control: max-age=600"], &body)
    })
}

#[test]
fn disk_tier_survives_a_restart() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let origin = large_origin();
    let proxy = disk_proxy(dir.path());
    push_first_object_to_disk(&proxy, &origin);
    assert!(proxy.terminate(), "clean shutdown");

    let proxy = disk_proxy(dir.path());
    let url = origin.url("/d0");
    let mut client = RawClient::connect(proxy.addr());
    let hit = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&hit), "HIT");
    assert_eq!(hit.body, body_of(700 * 1024 + "/d0".len()));
    // A Range from the disk copy too.
    let part = get(&mut client, &url, &["Range: bytes=100-199"]);
    assert_eq!((part.status(), part.body.len()), (206, 100));
    assert_eq!(part.body, &body_of(1000)[100..200]);
    assert_eq!(origin.requests().len(), 2);
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(
        logs.lines()
            .any(|line| line.contains("cache=hit-disk") && line.contains("engine=sendfile")),
        "no disk hit went out by sendfile: {logs}"
    );
}

#[test]
fn truncated_disk_file_is_dropped_and_never_served() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let origin = large_origin();
    let proxy = disk_proxy(dir.path());
    push_first_object_to_disk(&proxy, &origin);
    assert!(proxy.terminate(), "clean shutdown");
    let files: Vec<_> = std::fs::read_dir(dir.path().join("worker-0"))
        .expect("worker directory")
        .map(|entry| entry.expect("entry").path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let file = std::fs::OpenOptions::new()
        .write(true)
        .open(&files[0])
        .expect("open");
    let len = file.metadata().expect("metadata").len();
    file.set_len(len - 1000).expect("truncate");

    let proxy = disk_proxy(dir.path());
    assert_eq!(proxy.cache_stats()["disk_damaged"], 1);
    let mut client = RawClient::connect(proxy.addr());
    let response = get(&mut client, &origin.url("/d0"), &[]);
    assert_eq!(x_cache(&response), "MISS");
    assert_eq!(response.body, body_of(700 * 1024 + "/d0".len()));
    assert_eq!(origin.requests().len(), 3);
}

#[test]
fn an_object_over_memory_max_object_goes_straight_to_disk() {
    let dir = tempfile::tempdir().expect("temporary directory");
    let origin = large_origin();
    let proxy = cache_proxy(&format!(
        "[cache]\nmemory = \"4MiB\"\nmax_object = \"1MiB\"\nmemory_max_object = \"64KiB\"\n\
         disk_dir = \"{}\"\n",
        dir.path().display()
    ));
    let url = origin.url("/large");
    let mut client = RawClient::connect(proxy.addr());
    let miss = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&miss), "MISS");
    assert_eq!(miss.body, body_of(700 * 1024 + "/large".len()));
    wait_for_stat(&proxy, "disk_writes", 1);
    let stats = proxy.cache_stats();
    assert_eq!(
        (
            stats["entries"],
            stats["disk_entries"],
            stats["fills_oversize"]
        ),
        (0, 1, 1),
        "held in memory, or not written to disk: {stats:?}"
    );
    let hit = get(&mut client, &url, &[]);
    assert_eq!(x_cache(&hit), "HIT");
    assert_eq!(hit.body, miss.body);
    assert_eq!(origin.requests().len(), 1);
    let logs = proxy.wait_for_log_count("sluice::access", 2);
    assert!(
        logs.lines().any(|line| line.contains("cache=hit-disk")),
        "the second request was not a disk hit: {logs}"
    );
}

#[test]
fn a_server_error_does_not_stop_the_next_response_from_being_cached() {
    let calls = Arc::new(AtomicUsize::new(0));
    let seen = calls.clone();
    let origin = Origin::start(move |_| match seen.fetch_add(1, Ordering::SeqCst) {
        0 => Reply::with_length(503, &[], b"try later"),
        _ => Reply::with_length(200, &["Cache-Control: max-age=60"], b"back"),
    });
    let proxy = cache_proxy("");
    let url = origin.url("/flaky");
    let mut client = RawClient::connect(proxy.addr());
    assert_eq!(get(&mut client, &url, &[]).status(), 503);
    let recovered = get(&mut client, &url, &[]);
    assert_eq!(
        (recovered.status(), x_cache(&recovered)),
        (200, "MISS".into())
    );
    let hit = get(&mut client, &url, &[]);
    assert_eq!((hit.status(), x_cache(&hit)), (200, "HIT".into()));
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}
