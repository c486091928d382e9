//! The command line as a user meets it: check, the embedded default, and clean shutdown.

mod common;

use std::process::Command;

use sluice_http::Method;
use sluice_testkit::{Origin, Proxy, RawClient, Reply};

use common::{binary, forward_config};

fn sluice(args: &[&str]) -> (bool, String, String) {
    let output = Command::new(binary())
        .args(args)
        .output()
        .expect("run sluice");
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn check_accepts_the_embedded_default_and_prints_it_whole() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("default.toml");
    let (ok, default, _) = sluice(&["default-config"]);
    assert!(ok);
    std::fs::write(&path, default).unwrap();
    let (ok, effective, err) = sluice(&["check", path.to_str().unwrap()]);
    assert!(ok, "{err}");
    assert!(
        effective.contains("address = \"127.0.0.1:3128\""),
        "{effective}"
    );
    assert!(effective.contains("connect_ports = [443]"), "{effective}");
}

#[test]
fn check_refuses_an_invalid_file_with_line_key_and_reason() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "[[listener]]\naddress = \"127.0.0.1:3128\"\nmode = \"foward\"\n",
    )
    .unwrap();
    let (ok, _, err) = sluice(&["check", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("bad.toml:3:"), "no line: {err}");
    assert!(err.contains("listener[0].mode"), "no key: {err}");
    assert!(err.contains("foward"), "no reason: {err}");
}

#[test]
fn run_refuses_an_invalid_file_at_start_up() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        "workers = 0\n[[listener]]\naddress = \"127.0.0.1:0\"\nmode = \"forward\"\n",
    )
    .unwrap();
    let (ok, _, err) = sluice(&["run", "--config", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("workers"), "{err}");
}

#[test]
fn run_refuses_an_address_in_use() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("taken.toml");
    let config = format!(
        "[[listener]]\naddress = \"{}\"\nmode = \"forward\"\n",
        taken.local_addr().unwrap()
    );
    std::fs::write(&path, config).unwrap();
    let (ok, _, err) = sluice(&["run", "--config", path.to_str().unwrap()]);
    assert!(!ok);
    assert!(err.contains("cannot bind"), "{err}");
}

/// SO_REUSEPORT lets sockets of one user share a port: a second sluice started by mistake
/// must still be refused, not take half of the first one's clients.
#[test]
fn a_second_sluice_on_the_same_port_is_refused() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = format!("[[listener]]\naddress = \"127.0.0.1:{port}\"\nmode = \"forward\"\n");
    let first = Proxy::start(binary(), &config);
    assert_eq!(first.addr().port(), port);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("second.toml");
    std::fs::write(&path, &config).unwrap();
    let mut second = Command::new(binary())
        .args(["run", "--config", path.to_str().unwrap()])
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Bounded: a second sluice that did start would run until killed.
    let started = std::time::Instant::now();
    let status = loop {
        if let Some(status) = second.try_wait().unwrap() {
            break status;
        }
        if started.elapsed() > sluice_testkit::DEADLINE {
            second.kill().unwrap();
            let _ = second.wait();
            panic!("the second sluice started and kept running");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let mut err = String::new();
    std::io::Read::read_to_string(&mut second.stderr.take().unwrap(), &mut err).unwrap();
    assert!(!status.success(), "the second sluice started");
    assert!(err.contains("cannot bind"), "{err}");
}

#[test]
fn help_explains_every_command() {
    let (ok, help, _) = sluice(&["--help"]);
    assert!(ok);
    for command in ["run", "check", "default-config"] {
        assert!(help.contains(command), "{command} missing from --help");
    }
    let (ok, run_help, _) = sluice(&["run", "--help"]);
    assert!(ok && run_help.contains("--config") && run_help.contains("--backend"));
    let (ok, version, _) = sluice(&["--version"]);
    assert!(ok && version.starts_with("sluice "));
}

#[test]
fn sigterm_stops_cleanly_after_serving() {
    let origin = Origin::start(|_| Reply::ok(b"x"));
    let config = forward_config(&[], "").replace("workers = 1", "workers = 2");
    let proxy = Proxy::start(binary(), &config);
    let mut client = RawClient::connect(proxy.addr());
    let request = format!("GET {} HTTP/1.1\r\nHost: x\r\n\r\n", origin.url("/"));
    assert_eq!(
        client
            .send(request.as_bytes())
            .read_response(&Method::Get)
            .body,
        b"x"
    );
    let logs = proxy.logs();
    assert!(proxy.terminate(), "did not exit cleanly; logs:\n{logs}");
    // The idle keep-alive connection was closed by the shutdown, not left hanging.
    assert!(client.is_closed());
}
