//! Origin and load generator together, in-process, for a couple of seconds each: direct, then
//! through the sluice binary. Counts must add up with no errors; nothing about speed is
//! asserted.

use std::path::PathBuf;
use std::time::Duration;

use sluice_lab::dist::SizeDist;
use sluice_lab::load::report::RunReport;
use sluice_lab::load::workload::Mix;
use sluice_lab::load::{run, ConnectionMode, Endpoint, LoadConfig, Pattern, Via};
use sluice_lab::origin::{Origin, OriginConfig, OriginTotals};

fn closed(
    origin: Origin,
    via: Via,
    mix: &str,
    connection: ConnectionMode,
) -> (RunReport, OriginTotals) {
    let config = LoadConfig {
        endpoint: Endpoint {
            origin: origin.local_addr(),
            via,
        },
        pattern: Pattern::Closed {
            clients: 4,
            mix: mix.parse::<Mix>().unwrap(),
            sizes: "uniform:0,96KiB".parse::<SizeDist>().unwrap(),
            connection,
        },
        duration: Duration::from_secs(2),
        warmup: Duration::ZERO,
        max_requests: 20_000,
        threads: 1,
        timeout: Duration::from_secs(10),
        verify: true,
        proxy: Default::default(),
        progress: false,
    };
    let report = run(&config).expect("run");
    (report, origin.stop())
}

fn assert_clean(report: &RunReport) {
    assert!(report.completed > 0, "nothing completed: {report:#?}");
    assert_eq!(report.error_total, 0, "errors: {:?}", report.errors);
    assert!(report.counts_add_up(), "counts: {report:#?}");
    assert!(report.completed <= 20_000, "the request cap was exceeded");
}

fn origin() -> Origin {
    Origin::start(OriginConfig::default()).expect("origin")
}

#[test]
fn closed_loop_direct_with_every_request_type() {
    let (report, origin) = closed(
        origin(),
        Via::Direct,
        "cacheable=1,uncacheable=1,ssl=1",
        ConnectionMode::PerRequest,
    );
    assert_clean(&report);
    // The origin saw at least every completed request, and one connection per request.
    assert!(origin.requests >= report.completed);
    assert!(origin.handshakes >= report.ssl_full + report.ssl_abbreviated);
    assert!(report.ssl_full > 0 && report.ssl_abbreviated > 0);
    assert_eq!(report.connections, report.issued);
    assert_eq!(origin.broken, 0);
}

#[test]
fn closed_loop_direct_keep_alive_reuses_connections() {
    let (report, _) = closed(
        origin(),
        Via::Direct,
        "uncacheable=1",
        ConnectionMode::KeepAlive,
    );
    assert_clean(&report);
    assert!(
        report.connections <= 4 + report.retries,
        "{} connections",
        report.connections
    );
}

#[test]
fn open_loop_direct_with_origin_connection_caps() {
    let origin = Origin::start(OriginConfig {
        conn_cap: "zipf:16".parse().unwrap(),
        ..OriginConfig::default()
    })
    .unwrap();
    let config = LoadConfig {
        endpoint: Endpoint {
            origin: origin.local_addr(),
            via: Via::Direct,
        },
        pattern: Pattern::Open {
            robots: 50,
            rate: 10.0,
            conn_requests: "zipf:64".parse().unwrap(),
            hit_ratio: 0.5,
        },
        duration: Duration::from_secs(2),
        warmup: Duration::ZERO,
        max_requests: 20_000,
        threads: 1,
        timeout: Duration::from_secs(10),
        verify: true,
        proxy: Default::default(),
        progress: false,
    };
    let report = run(&config).unwrap();
    origin.stop();
    assert_clean(&report);
    assert!(report.revisits > 0);
}

#[test]
fn the_request_cap_ends_a_run_early() {
    let origin = origin();
    let config = LoadConfig {
        endpoint: Endpoint {
            origin: origin.local_addr(),
            via: Via::Direct,
        },
        pattern: Pattern::Closed {
            clients: 2,
            mix: "uncacheable=1".parse().unwrap(),
            sizes: SizeDist::Fixed(100),
            connection: ConnectionMode::KeepAlive,
        },
        duration: Duration::from_secs(600),
        warmup: Duration::ZERO,
        max_requests: 50,
        threads: 1,
        timeout: Duration::from_secs(10),
        verify: true,
        proxy: Default::default(),
        progress: false,
    };
    let report = run(&config).unwrap();
    assert_eq!(origin.stop().requests, 50);
    assert_eq!(report.issued, 50);
    assert_clean(&report);
}

#[test]
fn load_refuses_targets_outside_loopback() {
    let config = LoadConfig {
        endpoint: Endpoint {
            origin: "192.0.2.1:80".parse().unwrap(),
            via: Via::Direct,
        },
        pattern: Pattern::Closed {
            clients: 1,
            mix: "uncacheable=1".parse().unwrap(),
            sizes: SizeDist::Fixed(1),
            connection: ConnectionMode::PerRequest,
        },
        duration: Duration::from_secs(1),
        warmup: Duration::ZERO,
        max_requests: 1,
        threads: 1,
        timeout: Duration::from_secs(1),
        verify: false,
        proxy: Default::default(),
        progress: false,
    };
    let err = run(&config).unwrap_err().to_string();
    assert!(err.contains("not a loopback address"), "{err}");
}

/// The sluice binary: `SLUICE_BIN`, else beside this test's target directory (debug or
/// release), as `cargo build -p sluice` or `cargo test --workspace` leaves it.
fn sluice_binary() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os("SLUICE_BIN") {
        return Some(PathBuf::from(path));
    }
    let exe = std::env::current_exe().ok()?;
    let target = exe.parent()?.parent()?.parent()?;
    ["debug", "release"]
        .iter()
        .map(|p| target.join(p).join("sluice"))
        .find(|p| p.exists())
}

/// Starts the sluice binary with a config; `None`, saying the test skipped, without it.
fn sluice_starter() -> Option<impl Fn(&str) -> sluice_testkit::Proxy> {
    let Some(binary) = sluice_binary() else {
        eprintln!("skipped: needs the sluice binary (cargo build -p sluice, or set SLUICE_BIN)");
        return None;
    };
    Some(move |config: &str| sluice_testkit::Proxy::start(&binary, config))
}

#[test]
fn closed_loop_through_sluice_forward_proxy() {
    let Some(start_sluice) = sluice_starter() else {
        return;
    };
    let origin = origin();
    let config = format!(
        "workers = 1\n\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\n\
         [access]\nconnect_ports = [{}]\n\n[log]\naccess_log = false\n",
        origin.local_addr().port()
    );
    let proxy = start_sluice(&config);
    let via = Via::Forward(proxy.addr());
    let (report, origin_totals) = closed(
        origin,
        via,
        "cacheable=1,uncacheable=1,ssl=1",
        ConnectionMode::PerRequest,
    );
    assert_clean(&report);
    // The proxy caches (its default): a cacheable object has one URL per size, so a repeat is
    // answered from memory. Every completed request reached the origin or was a cache answer.
    let cache = proxy.cache_stats();
    let from_cache = cache["hits"] + cache["collapsed"];
    assert!(
        origin_totals.requests + from_cache >= report.completed,
        "origin {} + cache {from_cache} < completed {}",
        origin_totals.requests,
        report.completed
    );
    assert!(report.ssl_full + report.ssl_abbreviated > 0);
}

#[test]
fn keep_alive_through_sluice_forward_proxy() {
    let Some(start_sluice) = sluice_starter() else {
        return;
    };
    let origin = origin();
    let config = "workers = 1\n\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\n\
                  [log]\naccess_log = false\n";
    let proxy = start_sluice(config);
    let (report, _) = closed(
        origin,
        Via::Forward(proxy.addr()),
        "uncacheable=1",
        ConnectionMode::KeepAlive,
    );
    assert_clean(&report);
}

#[test]
fn closed_loop_through_sluice_reverse_proxy() {
    let Some(start_sluice) = sluice_starter() else {
        return;
    };
    let origin = origin();
    let config = format!(
        "workers = 1\n\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"reverse\"\n\
         upstreams = [\"{}\"]\n\n[cache]\nenabled = false\n\n[log]\naccess_log = false\n",
        origin.local_addr()
    );
    let proxy = start_sluice(&config);
    let (report, origin_totals) = closed(
        origin,
        Via::Reverse(proxy.addr()),
        "cacheable=1,uncacheable=1",
        ConnectionMode::KeepAlive,
    );
    assert_clean(&report);
    // No cache: every completed request was served by the origin.
    assert!(origin_totals.requests >= report.completed);
}
