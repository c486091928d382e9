//! One test per rule: literal TOML in, outcome out. Error tests check the line and the key in
//! the message, since that is what an operator reads.

use std::net::SocketAddr;
use std::time::Duration;

use super::*;

const FORWARD: &str = "[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n";

fn load(text: &str) -> Config {
    Config::from_toml_str(text, "sluice.toml").unwrap_or_else(|error| panic!("{error}"))
}

/// Loads `text`, expecting an error, and returns its message.
fn fail(text: &str) -> String {
    match Config::from_toml_str(text, "sluice.toml") {
        Ok(config) => panic!("expected an error, loaded {config:?}"),
        Err(error) => error.to_string(),
    }
}

/// `FORWARD` followed by `tail`; the tail starts on line 4.
fn forward_with(tail: &str) -> String {
    format!("{FORWARD}{tail}")
}

#[test]
fn minimal_file_loads_with_defaults() {
    let config = load(FORWARD);
    let listener = &config.listeners[0];
    assert_eq!(
        listener.address,
        "127.0.0.1:3128".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(listener.mode, ListenerMode::Forward);
    assert!(listener.upstreams.is_empty());
    assert_eq!(listener.engine, None);
    assert!(config.workers >= 1);
    assert_eq!(config.access, Access::default());
    assert_eq!(config.timeouts, Timeouts::default());
    assert_eq!(config.limits, Limits::default());
    assert_eq!(config.headers, HeaderPolicy::default());
    assert_eq!(config.socket, SocketOptions::default());
    assert_eq!(config.transfer, Transfer::default());
    assert_eq!(config.log, Log::default());
}

#[test]
fn defaults_have_documented_values() {
    let timeouts = Timeouts::default();
    assert_eq!(timeouts.client_header, Duration::from_secs(10));
    assert_eq!(timeouts.keep_alive, Duration::from_secs(60));
    assert_eq!(timeouts.upstream_connect, Duration::from_secs(5));
    assert_eq!(timeouts.upstream_first_byte, Duration::from_secs(30));
    assert_eq!(timeouts.upstream_idle, Duration::from_secs(30));
    assert_eq!(timeouts.tunnel_idle, Duration::from_secs(300));
    assert_eq!(timeouts.body_idle, Duration::from_secs(60));
    let limits = Limits::default();
    assert_eq!(limits.max_request_line, 8192);
    assert_eq!(limits.max_header_bytes, 65536);
    assert_eq!((limits.max_headers, limits.max_connections), (128, 10_000));
    assert_eq!(limits.upstream_idle_per_origin, 16);
    assert_eq!(HeaderPolicy::default().via.as_deref(), Some("sluice"));
    assert_eq!(Transfer::default().copy_buffer, 32 * 1024);
    assert_eq!(Transfer::default().engine, Engine::Auto);
    assert_eq!(Transfer::default().pipe_size, 1 << 20);
    assert_eq!(Transfer::default().pipe_pool, 256);
    assert_eq!(Transfer::default().splice_threshold, 8 * 1024);
    assert_eq!(Transfer::default().splice_after, SpliceAfter::Headers);
    assert_eq!(
        (Log::default().level.as_str(), Log::default().access_log),
        ("info", true)
    );
}

#[test]
fn full_file_with_every_key_loads() {
    let config = load(
        r#"
workers = 2
[[listener]]
address = "[::1]:3128"
mode = "forward"
upstreams = []
[[listener]]
address = "127.0.0.1:8000"
mode = "reverse"
upstreams = ["127.0.0.1:8080", "backend.local:80", "[::1]:8081"]
engine = "splice"
[access]
allow = ["10.0.0.0/8", "192.168.1.7"]
connect_ports = [443, 8443]
[timeouts]
client_header = "250ms"
keep_alive = "1m 30s"
upstream_connect = "1s"
upstream_first_byte = "2m"
upstream_idle = "10s"
tunnel_idle = "1h"
body_idle = "5s"
[limits]
max_request_line = "16KiB"
max_header_bytes = "1 MiB"
max_headers = 64
max_connections = 100
upstream_idle_per_origin = 0
[headers]
via = "edge-1"
x_forwarded_for = true
forward_proxy_authorization = true
[socket]
send_buffer = "256KiB"
recv_buffer = 131072
[transfer]
engine = "sockmap"
copy_buffer = "64KB"
pipe_size = "256KiB"
pipe_pool = 32
splice_threshold = "12KiB"
splice_after = "connect"
[log]
level = "trace"
access_log = false
"#,
    );
    assert_eq!(config.workers, 2);
    let reverse = &config.listeners[1];
    let upstreams: Vec<String> = reverse.upstreams.iter().map(ToString::to_string).collect();
    assert_eq!(
        upstreams,
        ["127.0.0.1:8080", "backend.local:80", "[::1]:8081"]
    );
    assert_eq!(reverse.upstreams[2].host, "::1");
    assert_eq!(reverse.effective_engine(&config.transfer), Engine::Splice);
    assert_eq!(
        config.listeners[0].effective_engine(&config.transfer),
        Engine::Sockmap
    );
    assert_eq!(config.access.allow[1].to_string(), "192.168.1.7/32");
    assert_eq!(config.access.connect_ports, [443, 8443]);
    assert_eq!(config.timeouts.client_header, Duration::from_millis(250));
    assert_eq!(config.timeouts.keep_alive, Duration::from_secs(90));
    assert_eq!(config.limits.max_header_bytes, 1 << 20);
    assert_eq!(config.headers.via.as_deref(), Some("edge-1"));
    assert_eq!(config.socket.send_buffer, Some(256 * 1024));
    assert_eq!(config.socket.recv_buffer, Some(131_072));
    assert_eq!(config.transfer.copy_buffer, 64_000);
    assert_eq!(config.transfer.pipe_size, 256 * 1024);
    assert_eq!(config.transfer.pipe_pool, 32);
    assert_eq!(config.transfer.splice_threshold, 12 * 1024);
    assert_eq!(config.transfer.splice_after, SpliceAfter::Connect);
    assert_eq!(config.log.level, "trace");
    assert_eq!(
        Config::from_toml_str(&config.to_toml_string(), "effective").unwrap(),
        config
    );
}

#[test]
fn effective_config_round_trips() {
    let config = load(&forward_with("[limits]\nmax_request_line = 1000\n"));
    let text = config.to_toml_string();
    assert!(text.contains("[[listener]]"), "{text}");
    assert!(text.contains("max_request_line = \"1000B\""), "{text}");
    assert!(text.contains("tunnel_idle = \"5m\""), "{text}");
    assert_eq!(load(&text), config);
}

#[test]
fn via_accepts_false_empty_and_true() {
    for (value, expected) in [("false", None), ("\"\"", None), ("true", Some("sluice"))] {
        let config = load(&forward_with(&format!("[headers]\nvia = {value}\n")));
        assert_eq!(config.headers.via.as_deref(), expected, "via = {value}");
        assert_eq!(load(&config.to_toml_string()), config);
    }
}

#[test]
fn default_toml_is_a_loopback_forward_proxy() {
    let text = include_str!("../../sluice/default.toml");
    let config = Config::from_toml_str(text, "<default>").unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(config.listeners.len(), 1);
    let listener = &config.listeners[0];
    assert_eq!(
        listener.address,
        "127.0.0.1:3128".parse::<SocketAddr>().unwrap()
    );
    assert_eq!(listener.mode, ListenerMode::Forward);
    assert!(listener.upstreams.is_empty());
    let allow: Vec<String> = config
        .access
        .allow
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(allow, ["127.0.0.0/8", "::1/128"]);
    assert_eq!(config.access.connect_ports, [443]);
    // The file spells out the defaults; it must not drift from them.
    let defaults = load(FORWARD);
    assert_eq!(config, defaults);
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

#[test]
fn every_toml_example_in_config_md_loads() {
    let doc = include_str!("../../../docs/CONFIG.md");
    let mut examples = 0;
    let mut rest = doc;
    while let Some(start) = rest.find("```toml\n") {
        let body = &rest[start + "```toml\n".len()..];
        let end = body.find("```").expect("every ```toml block is closed");
        let example = &body[..end];
        if let Err(error) = Config::from_toml_str(example, "CONFIG.md example") {
            panic!("{error}\nin example:\n{example}");
        }
        examples += 1;
        rest = &body[end + 3..];
    }
    assert!(examples >= 5, "found only {examples} examples");
}

/// Every rule: the file, the expected `file:line:column: key: ` prefix, and a phrase of the
/// reason. Lines count from 1; `FORWARD` takes lines 1 to 3.
#[test]
fn each_rule_reports_its_line_key_and_reason() {
    let listener = |mode: &str, tail: &str| {
        format!("[[listener]]\naddress = \"127.0.0.1:1\"\nmode = \"{mode}\"\n{tail}")
    };
    let cases: Vec<(&str, String, &str, &str)> = vec![
        (
            "unknown mode",
            "workers = 1\n\n[[listener]]\naddress = \"127.0.0.1:3128\"\n\n\nmode = \"foward\"\n"
                .to_owned(),
            "sluice.toml:7:8: listener[0].mode: ",
            "unknown variant \"foward\", expected \"forward\" or \"reverse\"",
        ),
        (
            "missing mode",
            "[[listener]]\naddress = \"127.0.0.1:1\"\n".to_owned(),
            "sluice.toml:1:1: listener[0]: ",
            "missing field \"mode\"",
        ),
        (
            "unknown key in listener",
            listener("forward", "adress = \"x\"\n"),
            "sluice.toml:4:1: listener[0].adress: ",
            "unknown field \"adress\"",
        ),
        (
            "unknown top-level table",
            forward_with("[timeout]\nkeep_alive = \"5s\"\n"),
            "sluice.toml:4:2: timeout: ",
            "unknown field \"timeout\"",
        ),
        (
            "reverse without upstreams",
            listener("reverse", ""),
            "sluice.toml:3:8: listener[0].mode: ",
            "needs at least one upstream",
        ),
        (
            "reverse with empty upstreams",
            listener("reverse", "upstreams = []\n"),
            "sluice.toml:4:13: listener[0].upstreams: ",
            "needs at least one upstream",
        ),
        (
            "forward with upstreams",
            listener("forward", "upstreams = [\"127.0.0.1:8080\"]\n"),
            "sluice.toml:4:13: listener[0].upstreams: ",
            "forward listener takes no upstreams",
        ),
        (
            "upstream with a scheme",
            listener("reverse", "upstreams = [\"http://a:80\"]\n"),
            "sluice.toml:4:13: listener[0].upstreams: ",
            "write only host:port",
        ),
        (
            "upstream without port",
            listener("reverse", "upstreams = [\"backend\"]\n"),
            "sluice.toml:4:13: listener[0].upstreams: ",
            "has no port",
        ),
        (
            "zero workers",
            format!("workers = 0\n{FORWARD}"),
            "sluice.toml:1:11: workers: ",
            "at least 1",
        ),
        (
            "duplicate listener address",
            format!("{FORWARD}[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"forward\"\n"),
            "sluice.toml:5:11: listener[1].address: ",
            "already the address of listener[0]",
        ),
        (
            "no listener",
            "workers = 1\n".to_owned(),
            "sluice.toml: listener: ",
            "no listener",
        ),
        (
            "empty allow",
            forward_with("[access]\nallow = []\n"),
            "sluice.toml:5:9: access.allow: ",
            "nobody could connect",
        ),
        (
            "allow not a network",
            forward_with("[access]\nallow = [\"10.0.0.0/40\"]\n"),
            "sluice.toml:5:9: access.allow: ",
            "\"10.0.0.0/40\" is not a network",
        ),
        (
            "connect port 0",
            forward_with("[access]\nconnect_ports = [443, 0]\n"),
            "sluice.toml:5:23: access.connect_ports[1]: ",
            "port 0",
        ),
        (
            "zero duration",
            forward_with("[timeouts]\nkeep_alive = \"0s\"\n"),
            "sluice.toml:5:14: timeouts.keep_alive: ",
            "longer than 0s",
        ),
        (
            "duration without unit",
            forward_with("[timeouts]\nupstream_connect = 5\n"),
            "sluice.toml:5:20: timeouts.upstream_connect: ",
            "has no unit",
        ),
        (
            "bad duration unit",
            forward_with("[timeouts]\nbody_idle = \"5 parsecs\"\n"),
            "sluice.toml:5:13: timeouts.body_idle: ",
            "invalid duration",
        ),
        (
            "copy buffer too small",
            forward_with("[transfer]\ncopy_buffer = \"512B\"\n"),
            "sluice.toml:5:15: transfer.copy_buffer: ",
            "512B is below the minimum of 1KiB",
        ),
        (
            "bad size",
            forward_with("[transfer]\ncopy_buffer = \"32 KiBs\"\n"),
            "sluice.toml:5:15: transfer.copy_buffer: ",
            "invalid size",
        ),
        (
            "zero max_headers",
            forward_with("[limits]\nmax_headers = 0\n"),
            "sluice.toml:5:15: limits.max_headers: ",
            "0 is below the minimum of 1",
        ),
        (
            "socket buffer zero",
            forward_with("[socket]\nsend_buffer = 0\n"),
            "sluice.toml:5:15: socket.send_buffer: ",
            "below the minimum",
        ),
        (
            "pipe smaller than a page",
            forward_with("[transfer]\npipe_size = \"1KiB\"\n"),
            "sluice.toml:5:13: transfer.pipe_size: ",
            "1KiB is below the minimum of 4KiB",
        ),
        (
            "empty pipe pool",
            forward_with("[transfer]\npipe_pool = 0\n"),
            "sluice.toml:5:13: transfer.pipe_pool: ",
            "0 is below the minimum of 1",
        ),
        (
            "unknown splice_after",
            forward_with("[transfer]\nsplice_after = \"body\"\n"),
            "sluice.toml:5:16: transfer.splice_after: ",
            "unknown variant \"body\"",
        ),
        (
            "unknown engine",
            forward_with("[transfer]\nengine = \"zerocopy\"\n"),
            "sluice.toml:5:10: transfer.engine: ",
            "unknown variant \"zerocopy\"",
        ),
        (
            "via not a token",
            forward_with("[headers]\nvia = \"my proxy\"\n"),
            "sluice.toml:5:7: headers.via: ",
            "not a valid pseudonym",
        ),
        (
            "unknown log level",
            forward_with("[log]\nlevel = \"verbose\"\n"),
            "sluice.toml:5:9: log.level: ",
            "unknown level \"verbose\"",
        ),
        (
            "wrong type",
            forward_with("[log]\naccess_log = \"yes\"\n"),
            "sluice.toml:5:14: log.access_log: ",
            "invalid type",
        ),
        (
            "syntax error",
            "workers = 1\nx = \"unclosed\n".to_owned(),
            "sluice.toml:2:",
            "invalid TOML",
        ),
    ];
    for (name, text, prefix, reason) in cases {
        let message = fail(&text);
        assert!(
            message.starts_with(prefix),
            "{name}: {message:?} should start with {prefix:?}"
        );
        assert!(
            message.contains(reason),
            "{name}: {message:?} should contain {reason:?}"
        );
    }
}

#[test]
fn port_zero_listeners_are_not_duplicates() {
    let text = "[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n\
                [[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n";
    assert_eq!(load(text).listeners.len(), 2);
}

#[test]
fn load_names_the_missing_file() {
    let path = std::path::Path::new("/nonexistent/sluice.toml");
    let error = Config::load(path).expect_err("the file does not exist");
    assert!(matches!(error, ConfigError::Read { .. }));
    assert_eq!(
        error.to_string(),
        "cannot read config file /nonexistent/sluice.toml"
    );
}

#[test]
fn semantic_errors_are_matchable() {
    let error = Config::from_toml_str(&forward_with("[access]\nallow = []\n"), "x")
        .expect_err("empty allow is refused");
    assert!(matches!(
        error,
        ConfigError::Invalid {
            problem: Problem::EmptyAllow,
            ..
        }
    ));
}

#[test]
fn warns_about_an_open_forward_proxy() {
    let config = load(
        "[[listener]]\naddress = \"0.0.0.0:3128\"\nmode = \"forward\"\n\
         [access]\nallow = [\"0.0.0.0/0\", \"::/0\"]\n",
    );
    let warnings = config.warnings();
    assert!(warnings
        .iter()
        .any(|w| w.starts_with("listener[0]: forward") && w.contains("open proxy")));
}

#[test]
fn warns_when_remote_listener_admits_only_loopback() {
    let config = load("[[listener]]\naddress = \"0.0.0.0:3128\"\nmode = \"forward\"\n");
    assert!(
        config
            .warnings()
            .iter()
            .any(|w| w.contains("only loopback")),
        "{:?}",
        config.warnings()
    );
}

#[test]
fn warns_about_more_workers_than_cpus() {
    let config = load(&format!("workers = 100000\n{FORWARD}"));
    assert!(
        config.warnings().iter().any(|w| w.starts_with("workers:")),
        "{:?}",
        config.warnings()
    );
}

#[test]
fn no_warning_for_an_open_reverse_proxy() {
    let config = load(
        "[[listener]]\naddress = \"0.0.0.0:80\"\nmode = \"reverse\"\n\
         upstreams = [\"127.0.0.1:8080\"]\n[access]\nallow = [\"0.0.0.0/0\", \"::/0\"]\n",
    );
    assert!(config.warnings().is_empty(), "{:?}", config.warnings());
}

#[test]
fn sizes_are_written_back_exactly() {
    for bytes in [1, 1000, 1024, 1536, 32 * 1024, 1 << 20, 3 << 30, usize::MAX] {
        assert_eq!(
            units::parse_size(&units::format_size(bytes)),
            Ok(bytes),
            "{bytes}"
        );
    }
}

#[test]
fn cache_defaults_are_on_in_memory() {
    let cache = Cache::default();
    assert!(cache.enabled);
    assert_eq!((cache.memory, cache.max_object), (256 << 20, 64 << 20));
    assert_eq!(
        (cache.disk_dir.clone(), cache.fill_after_abort),
        (None, 1 << 20)
    );
    assert_eq!(cache.purge_allow.len(), 2);
    let config = load(include_str!("../../sluice/default.toml"));
    assert_eq!(config.cache, cache);
}

#[test]
fn cache_keys_load_and_round_trip() {
    let config = load(&forward_with(
        "[cache]\nmemory = \"8MiB\"\nmax_object = \"1MiB\"\ndisk_dir = \"/var/cache/sluice\"\ndisk_size = \"2GiB\"\n\
         fill_after_abort = 0\npurge_allow = [\"10.0.0.1\"]\n",
    ));
    assert_eq!(config.cache.memory, 8 << 20);
    assert_eq!(config.cache.max_object, 1 << 20);
    assert_eq!(
        config.cache.disk_dir.as_deref(),
        Some(std::path::Path::new("/var/cache/sluice"))
    );
    assert_eq!(config.cache.fill_after_abort, 0);
    assert_eq!(config.cache.disk_size, 2 << 30);
    assert_eq!(config.cache.purge_allow[0].to_string(), "10.0.0.1/32");
    assert_eq!(
        Config::from_toml_str(&config.to_toml_string(), "effective").unwrap(),
        config
    );
}

#[test]
fn cache_rules_are_enforced() {
    let zero = fail(&forward_with("[cache]\nmemory = 0\n"));
    assert!(
        zero.contains("cache.memory") && zero.contains("enabled = false"),
        "{zero}"
    );
    let over = fail(&forward_with(
        "[cache]\nmemory = \"2MiB\"\nmax_object = \"4MiB\"\n",
    ));
    assert!(
        over.contains("cache.max_object") && over.contains("exceeds"),
        "{over}"
    );
    let relative = fail(&forward_with("[cache]\ndisk_dir = \"cache\"\n"));
    assert!(
        relative.contains("cache.disk_dir") && relative.contains("relative"),
        "{relative}"
    );
    let config = load(&format!(
        "workers = 4\n{FORWARD}[cache]\nmemory = \"8MiB\"\nmax_object = \"4MiB\"\n"
    ));
    assert!(
        config
            .warnings()
            .iter()
            .any(|w| w.starts_with("cache.max_object")),
        "{:?}",
        config.warnings()
    );
}
