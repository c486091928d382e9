//! `net up|status|down` leave nothing behind: no namespace, TAP device, process or file, also
//! after `kill -9` of the wire.

mod common;

use std::process::Command;

use common::{root_or_skip, Bed, BIN};

fn leftovers(prefix: &str) -> Vec<String> {
    let mut found = Vec::new();
    for host in ["client", "proxy", "server"] {
        let ns = format!("/run/netns/{prefix}-{host}");
        if std::path::Path::new(&ns).exists() {
            found.push(ns);
        }
    }
    for entry in std::fs::read_dir("/sys/class/net").unwrap() {
        let name = entry.unwrap().file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!("{prefix}-")) {
            found.push(format!("device {name}"));
        }
    }
    for file in [".json", ".log", ".counters.json"] {
        let path = format!("/run/sluice-lab/{prefix}{file}");
        if std::path::Path::new(&path).exists() {
            found.push(path);
        }
    }
    found
}

fn alive(pid: u32) -> bool {
    // A zombie is dead for our purposes; it has no fds, so no TAP.
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| !s.rsplit_once(')').unwrap().1.trim_start().starts_with('Z'))
        .unwrap_or(false)
}

#[test]
fn down_removes_everything() {
    if !root_or_skip() {
        return;
    }
    let bed = Bed::up('l', "proxy", "description = \"t\"\n");
    let pid = bed.wire_pid();
    assert!(alive(pid));
    let status = Command::new(BIN)
        .args(["net", "status", "--prefix", &bed.prefix])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout);
    assert!(
        status.contains("running") && status.contains("client->proxy"),
        "{status}"
    );
    let out = bed.down();
    assert!(
        out.contains("proxy->server"),
        "down prints the last counters: {out}"
    );
    assert!(!alive(pid), "wire {pid} still running");
    assert_eq!(leftovers(&bed.prefix), Vec::<String>::new());
}

#[test]
fn down_after_kill_9_of_the_wire() {
    if !root_or_skip() {
        return;
    }
    let bed = Bed::up('k', "proxy", "description = \"t\"\n");
    let pid = bed.wire_pid();
    let killed = Command::new("kill")
        .args(["-9", &pid.to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let status = Command::new(BIN)
        .args(["net", "status", "--prefix", &bed.prefix])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&status.stdout).contains("NOT running"));
    bed.down();
    assert!(!alive(pid));
    assert_eq!(leftovers(&bed.prefix), Vec::<String>::new());
}

/// `net up` killed between starting the wire and recording its pid leaves a state file without
/// one; a damaged state file names nothing at all. `down` must find the wire anyway (it runs in
/// its own process group, so nothing else stops it).
fn down_stops_a_wire_the_state_file_does_not_name(code: char, damage: fn(&str) -> String) {
    if !root_or_skip() {
        return;
    }
    let bed = Bed::up(code, "proxy", "description = \"t\"\n");
    let pid = bed.wire_pid();
    let state = std::fs::read_to_string(bed.state_path()).unwrap();
    std::fs::write(bed.state_path(), damage(&state)).unwrap();
    bed.down();
    assert!(!alive(pid), "wire {pid} still running");
    assert_eq!(leftovers(&bed.prefix), Vec::<String>::new());
}

#[test]
fn down_stops_a_wire_whose_pid_was_never_saved() {
    down_stops_a_wire_the_state_file_does_not_name('p', |state| {
        let mut bed: serde_json::Value = serde_json::from_str(state).unwrap();
        bed["wire_pid"] = serde_json::Value::Null;
        bed.to_string()
    });
}

#[test]
fn down_stops_the_wire_of_a_damaged_state_file() {
    down_stops_a_wire_the_state_file_does_not_name('c', |state| {
        state[..state.len() / 2].to_owned()
    });
}

#[test]
fn no_route_from_client_to_server_but_through_the_proxy_host() {
    if !root_or_skip() {
        return;
    }
    let bed = Bed::up('n', "proxy", "description = \"t\"\n");
    let connect = |ns: String, to: &'static str| {
        sluice_wan::netns::within(&ns, move || {
            std::net::TcpStream::connect_timeout(
                &to.parse().unwrap(),
                std::time::Duration::from_millis(300),
            )
            .map(|_| ())
            .map_err(|e| e.kind())
        })
        .unwrap()
    };
    let listener = sluice_wan::netns::within(&bed.netns("server"), || {
        std::net::TcpListener::bind("10.201.2.2:8080")
    })
    .unwrap()
    .unwrap();
    assert!(
        connect(bed.netns("proxy"), "10.201.2.2:8080").is_ok(),
        "proxy reaches server"
    );
    let from_client = connect(bed.netns("client"), "10.201.2.2:8080");
    assert!(from_client.is_err(), "client reached the server directly");
    drop(listener);
}

#[test]
fn test_bed_addresses_are_recognised_only_from_inside() {
    if !root_or_skip() {
        return;
    }
    let bed = Bed::up('a', "proxy", "description = \"t\"\n");
    let server: std::net::IpAddr = "10.201.2.2".parse().unwrap();
    assert!(
        !sluice_wan::is_test_bed_address(server),
        "from the root namespace"
    );
    let inside = sluice_wan::netns::within(&bed.netns("client"), move || {
        (
            sluice_wan::is_test_bed_address(server),
            sluice_wan::is_test_bed_address([8, 8, 8, 8].into()),
        )
    })
    .unwrap();
    assert_eq!(inside, (true, false));
}
