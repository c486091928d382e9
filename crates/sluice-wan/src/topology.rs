//! Test beds: the hosts (network namespaces), the wires between them, and the state file that
//! lets `net down` remove all of it, also after a crash.
//!
//! ```text
//!  ns PREFIX-client          root namespace: the wire process          ns PREFIX-proxy
//!  PREFIX-cp-c 10.201.1.2  <== TAP fd ... loss/rate/delay ... TAP fd ==>  PREFIX-cp-p 10.201.1.1
//!                                                                         PREFIX-ps-p 10.201.2.1
//!  ns PREFIX-server                                                               ||
//!  PREFIX-ps-s 10.201.2.2  <== TAP fd ... loss/rate/delay ... TAP fd =============//
//! ```
//!
//! Each host end is a TAP device created by the wire in the root namespace and then moved into
//! the host's namespace; the wire keeps both fds of each link and is the only path between the
//! hosts. The proxy host does not forward IP (`net.ipv4.ip_forward=0`) and the client has no
//! route to 10.201.2.0/24, so the only way from client to server is through an application
//! on the proxy host. The `direct` layout (no proxy, WWW 2002 §4.5) joins client and server
//! with one wire and keeps their addresses, so the same load command works in both layouts.

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde::{Deserialize, Serialize};

use crate::counters::WireReport;
use crate::error::WanError;
use crate::netns;
use crate::profile::Profile;
use crate::wire::{EndPlan, LinkPlan};

/// Where state files, wire logs and counters live: `PREFIX.json`, `PREFIX.log`,
/// `PREFIX.counters.json`.
pub const STATE_DIR: &str = "/run/sluice-lab";

/// Which hosts a test bed has.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Layout {
    /// client -- proxy -- server: two wires, the proxy host in the middle.
    Proxy,
    /// client -- server: one wire with both links' impairments in series (no proxy).
    Direct,
}

/// A host of the test bed: a network namespace and its addresses.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostPlan {
    /// `client`, `proxy` or `server`.
    pub name: String,
    /// `PREFIX-NAME`.
    pub netns: String,
    /// Its addresses, without prefix length.
    pub addresses: Vec<String>,
}

/// Everything `net up` made or will make, saved before anything is created.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TestBed {
    /// Name prefix of every namespace and device.
    pub prefix: String,
    /// Hosts and wires.
    pub layout: Layout,
    /// The profile's name or path, as given.
    pub profile_name: String,
    /// The profile as read.
    pub profile: Profile,
    /// Seed the wire's per-direction random sources are derived from.
    pub seed: u64,
    /// The namespaces.
    pub hosts: Vec<HostPlan>,
    /// The wires.
    pub links: Vec<LinkPlan>,
    /// The wire process, from the moment it was started (before it said it was ready).
    pub wire_pid: Option<u32>,
}

/// The subnets: client-proxy 10.201.1.0/24, proxy-server 10.201.2.0/24. Namespaces isolate
/// them, so every test bed uses the same ones.
const CLIENT: &str = "10.201.1.2";
const PROXY_CLIENT_SIDE: &str = "10.201.1.1";
const PROXY_SERVER_SIDE: &str = "10.201.2.1";
const SERVER: &str = "10.201.2.2";

fn end(prefix: &str, host: &str, link: &str, address: &str, routes: &[&str]) -> EndPlan {
    let initial = &host[..1];
    EndPlan {
        host: host.to_owned(),
        netns: format!("{prefix}-{host}"),
        ifname: format!("{prefix}-{link}-{initial}"),
        address: format!("{address}/24"),
        routes: routes.iter().map(|r| (*r).to_owned()).collect(),
    }
}

/// Checks a prefix: 1 to 8 of `[a-z0-9]`, starting with a letter, so `PREFIX-cp-c` fits in a
/// 15-byte interface name.
pub fn check_prefix(prefix: &str) -> Result<(), WanError> {
    let ok = (1..=8).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(WanError::BadPrefix {
            prefix: prefix.to_owned(),
        })
    }
}

/// The host names a layout has.
pub fn host_names(layout: Layout) -> &'static [&'static str] {
    match layout {
        Layout::Proxy => &["client", "proxy", "server"],
        Layout::Direct => &["client", "server"],
    }
}

impl TestBed {
    /// The plan for `prefix` with `profile`, nothing created yet.
    pub fn plan(
        prefix: &str,
        layout: Layout,
        profile_name: &str,
        profile: Profile,
        seed: u64,
    ) -> Result<TestBed, WanError> {
        check_prefix(prefix)?;
        let host = |name: &str, addresses: &[&str]| HostPlan {
            name: name.to_owned(),
            netns: format!("{prefix}-{name}"),
            addresses: addresses.iter().map(|a| (*a).to_owned()).collect(),
        };
        let (hosts, links) = match layout {
            Layout::Proxy => (
                vec![
                    host("client", &[CLIENT]),
                    host("proxy", &[PROXY_CLIENT_SIDE, PROXY_SERVER_SIDE]),
                    host("server", &[SERVER]),
                ],
                vec![
                    LinkPlan {
                        name: "client-proxy".to_owned(),
                        a: end(prefix, "client", "cp", CLIENT, &[]),
                        b: end(prefix, "proxy", "cp", PROXY_CLIENT_SIDE, &[]),
                        up: profile.client_proxy.up.clone(),
                        down: profile.client_proxy.down.clone(),
                    },
                    LinkPlan {
                        name: "proxy-server".to_owned(),
                        a: end(prefix, "proxy", "ps", PROXY_SERVER_SIDE, &[]),
                        b: end(prefix, "server", "ps", SERVER, &[]),
                        up: profile.proxy_server.up.clone(),
                        down: profile.proxy_server.down.clone(),
                    },
                ],
            ),
            Layout::Direct => {
                let direct = profile.direct_link();
                (
                    vec![host("client", &[CLIENT]), host("server", &[SERVER])],
                    vec![LinkPlan {
                        name: "client-server".to_owned(),
                        a: end(prefix, "client", "cs", CLIENT, &["10.201.2.0/24"]),
                        b: end(prefix, "server", "cs", SERVER, &["10.201.1.0/24"]),
                        up: direct.up,
                        down: direct.down,
                    }],
                )
            }
        };
        Ok(TestBed {
            prefix: prefix.to_owned(),
            layout,
            profile_name: profile_name.to_owned(),
            profile,
            seed,
            hosts,
            links,
            wire_pid: None,
        })
    }

    /// The state file of `prefix`.
    pub fn state_path(prefix: &str) -> PathBuf {
        PathBuf::from(STATE_DIR).join(format!("{prefix}.json"))
    }

    /// The wire's log of `prefix`.
    pub fn log_path(prefix: &str) -> PathBuf {
        PathBuf::from(STATE_DIR).join(format!("{prefix}.log"))
    }

    /// The wire's last counters of `prefix`.
    pub fn counters_path(prefix: &str) -> PathBuf {
        PathBuf::from(STATE_DIR).join(format!("{prefix}.counters.json"))
    }

    /// Reads the state file of `prefix`.
    pub fn load(prefix: &str) -> Result<TestBed, WanError> {
        let path = TestBed::state_path(prefix);
        let text = std::fs::read_to_string(&path).map_err(|source| {
            if source.kind() == std::io::ErrorKind::NotFound {
                WanError::NotUp {
                    prefix: prefix.to_owned(),
                    path: path.display().to_string(),
                }
            } else {
                WanError::io(format!("cannot read {}", path.display()), source)
            }
        })?;
        serde_json::from_str(&text).map_err(|source| WanError::BadState {
            path: path.display().to_string(),
            source,
        })
    }

    /// Writes the state file (atomically: a crash leaves the old or the new one).
    pub fn save(&self) -> Result<(), WanError> {
        let path = TestBed::state_path(&self.prefix);
        let temporary = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).expect("a TestBed always serialises");
        std::fs::create_dir_all(STATE_DIR)
            .and_then(|()| std::fs::write(&temporary, text + "\n"))
            .and_then(|()| std::fs::rename(&temporary, &path))
            .map_err(|source| WanError::io(format!("cannot write {}", path.display()), source))
    }

    /// The namespace of host `name`.
    pub fn netns_of(&self, name: &str) -> Result<&str, WanError> {
        self.hosts
            .iter()
            .find(|h| h.name == name)
            .map(|h| h.netns.as_str())
            .ok_or_else(|| WanError::UnknownHost {
                host: name.to_owned(),
                known: self
                    .hosts
                    .iter()
                    .map(|h| h.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }
}

/// Fails unless the effective user is root.
pub fn require_root(what: &str) -> Result<(), WanError> {
    if rustix::process::geteuid().is_root() {
        Ok(())
    } else {
        Err(WanError::NotRoot {
            what: what.to_owned(),
        })
    }
}

/// `net up`: saves the plan, creates the namespaces, starts the wire (the program at
/// `wire_program`, run as `wire_program wire --prefix PREFIX`) and waits until it forwards.
/// On any failure it removes what it made.
pub fn up(bed: &mut TestBed, wire_program: &std::path::Path) -> Result<(), WanError> {
    require_root("net up")?;
    let path = TestBed::state_path(&bed.prefix);
    if path.exists() {
        return Err(WanError::AlreadyUp {
            prefix: bed.prefix.clone(),
            path: path.display().to_string(),
        });
    }
    bed.save()?;
    let result = create_hosts(bed).and_then(|()| start_wire(bed, wire_program));
    if let Err(e) = result {
        let _ = down(&bed.prefix);
        return Err(e);
    }
    bed.save()
}

fn create_hosts(bed: &TestBed) -> Result<(), WanError> {
    for host in &bed.hosts {
        netns::create(&host.netns)?;
        // The proxy host must not route client to server by itself (new namespaces start with
        // forwarding off; set it anyway so the state is explicit).
        netns::sysctl(&host.netns, "net.ipv4.ip_forward", "0")?;
        // No IPv6: router and neighbour solicitations would cross the wires as noise.
        netns::sysctl(&host.netns, "net.ipv6.conf.all.disable_ipv6", "1")?;
        netns::sysctl(&host.netns, "net.ipv6.conf.default.disable_ipv6", "1")?;
        if host.name == "client" && !bed.profile.client_sack {
            netns::sysctl(&host.netns, "net.ipv4.tcp_sack", "0")?;
        }
    }
    Ok(())
}

fn start_wire(bed: &mut TestBed, wire_program: &std::path::Path) -> Result<(), WanError> {
    let log_path = TestBed::log_path(&bed.prefix);
    let log = std::fs::File::create(&log_path)
        .map_err(|source| WanError::io(format!("cannot create {}", log_path.display()), source))?;
    let mut child = {
        use std::os::unix::process::CommandExt;
        Command::new(wire_program)
            .args(["wire", "--prefix", &bed.prefix])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(log)
            // Its own process group: a ^C meant for `net up` or a test must not take it down.
            .process_group(0)
            .spawn()
            .map_err(|source| {
                WanError::io(
                    format!("cannot start {} wire", wire_program.display()),
                    source,
                )
            })?
    };
    // Recorded before the wait for "ready", which may take a while (namespaces, ethtool): a
    // `net up` that dies during it leaves a wire that `net down` must find. (`down` also finds
    // wires by their command line, for a death before this save or a damaged state file.)
    bed.wire_pid = Some(child.id());
    bed.save()?;
    let stdout = child.stdout.take().expect("stdout was piped");
    let mut line = String::new();
    // The wire prints one line once it forwards, or exits (EOF) if it cannot.
    let _ = BufReader::new(stdout).read_line(&mut line);
    if line.trim() != "ready" {
        let _ = child.wait();
        let log = std::fs::read_to_string(&log_path).unwrap_or_default();
        return Err(WanError::WireFailed {
            log: log.trim().to_owned(),
        });
    }
    Ok(())
}

/// Moves a wire end's TAP into its host and configures it; called by the wire process, which
/// holds the TAP's fd.
pub fn configure_end(end: &EndPlan) -> Result<(), WanError> {
    netns::ip(&["link", "set", "dev", &end.ifname, "netns", &end.netns])?;
    let ns = end.netns.as_str();
    // No segmentation or receive offloads: one frame the wire sees is one packet on the wire,
    // so one loss decision drops one packet. A TAP without IFF_VNET_HDR already gets frames
    // segmented by the kernel; ethtool makes it explicit where it is installed.
    let offloads = ["-K", &end.ifname, "tso", "off", "gso", "off", "gro", "off"];
    let result = if which("ethtool") {
        let mut args = vec!["netns", "exec", ns, "ethtool"];
        args.extend_from_slice(&offloads);
        netns::run("ip", &args).map(|_| ())
    } else {
        Err(WanError::Command {
            command: "ethtool".to_owned(),
            status: "not found".to_owned(),
            stderr: "install it (apt-get install ethtool) to set offloads explicitly".to_owned(),
        })
    };
    if let Err(e) = result {
        // Loud, not fatal: without a vnet header the kernel segments before the TAP anyway,
        // and the counters' largest-frame column shows whether it did.
        eprintln!("wire: {}: offloads left as they are: {e}", end.ifname);
    }
    netns::ip(&["-n", ns, "link", "set", "dev", &end.ifname, "up"])?;
    netns::ip(&["-n", ns, "addr", "add", &end.address, "dev", &end.ifname])?;
    for route in &end.routes {
        netns::ip(&["-n", ns, "route", "add", route, "dev", &end.ifname])?;
    }
    Ok(())
}

fn which(program: &str) -> bool {
    std::env::var_os("PATH")
        .map(|path| std::env::split_paths(&path).any(|dir| dir.join(program).is_file()))
        .unwrap_or(false)
}

/// Whether `pid` is a live wire of `prefix` (not a reused pid of some other program).
fn is_our_wire(pid: u32, prefix: &str) -> bool {
    let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
        return false;
    };
    pid != std::process::id() && is_wire_command(&cmdline, prefix) && !is_zombie(pid)
}

/// Whether a `/proc/PID/cmdline` is `PROGRAM wire ... --prefix PREFIX`, as `net up` starts the
/// wire (and as one starts it by hand). The subcommand must come first: `net down --prefix
/// wire` names a valid prefix too, and must not find itself. Any program path matches, since
/// the prefix alone names a test bed on this machine, whichever checkout's binary runs it.
fn is_wire_command(cmdline: &[u8], prefix: &str) -> bool {
    let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
    let joined = format!("--prefix={prefix}");
    args.get(1) == Some(&b"wire".as_slice())
        && (args
            .windows(2)
            .any(|w| w[0] == b"--prefix" && w[1] == prefix.as_bytes())
            || args.contains(&joined.as_bytes()))
}

/// The wires of `prefix`, found by their command lines.
fn find_wires(prefix: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|entry| entry.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| is_our_wire(pid, prefix))
        .collect()
}

/// Whether `pid` is our wire or a process on its way out. An exiting process has an empty
/// cmdline (its memory is gone) and can spend ~100 ms in state D while the kernel destroys its
/// TAP devices (RTNL lock, RCU grace periods): until it is a zombie, devices may remain.
fn wire_or_exiting(pid: u32, prefix: &str) -> bool {
    let exiting = std::fs::read(format!("/proc/{pid}/cmdline")).is_ok_and(|c| c.is_empty())
        && std::path::Path::new(&format!("/proc/{pid}")).exists()
        && !is_zombie(pid);
    exiting || is_our_wire(pid, prefix)
}

fn is_zombie(pid: u32) -> bool {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(')')
        .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
}

/// Whether the test bed's wire process is running.
pub fn wire_alive(bed: &TestBed) -> bool {
    bed.wire_pid
        .is_some_and(|pid| is_our_wire(pid, &bed.prefix))
}

/// `net down`: stops the wire (SIGTERM, then SIGKILL after 3 s), deletes the namespaces and
/// any TAP left in the root namespace, and removes the state files. Works without a state file
/// too (it then removes the names the prefix implies). Returns the wire's last counters.
///
/// The wire is the one the state file names and any other whose command line is `wire
/// --prefix PREFIX`: the state file may lack the pid (`net up` died before saving it) or be
/// unreadable, and the wire runs in its own process group, so nothing else would stop it.
pub fn down(prefix: &str) -> Result<Option<WireReport>, WanError> {
    require_root("net down")?;
    check_prefix(prefix)?;
    let bed = TestBed::load(prefix).ok();
    let mut wires: Vec<u32> = bed.as_ref().and_then(|b| b.wire_pid).into_iter().collect();
    for pid in find_wires(prefix) {
        if !wires.contains(&pid) {
            wires.push(pid);
        }
    }
    for pid in wires {
        stop_wire(pid, prefix);
    }
    let report = std::fs::read_to_string(TestBed::counters_path(prefix))
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok());
    for host in ["client", "proxy", "server"] {
        netns::delete(&format!("{prefix}-{host}"))?;
    }
    for link in ["cp", "ps", "cs"] {
        for end in ["c", "p", "s"] {
            let name = format!("{prefix}-{link}-{end}");
            if std::path::Path::new("/sys/class/net").join(&name).exists() {
                netns::ip(&["link", "del", &name])?;
            }
        }
    }
    for path in [
        TestBed::state_path(prefix),
        TestBed::log_path(prefix),
        TestBed::counters_path(prefix),
    ] {
        match std::fs::remove_file(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(WanError::io(
                    format!("cannot remove {}", path.display()),
                    source,
                ))
            }
        }
    }
    Ok(report)
}

fn stop_wire(pid: u32, prefix: &str) {
    let Some(process) = i32::try_from(pid)
        .ok()
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if !wire_or_exiting(pid, prefix) {
        return;
    }
    if is_our_wire(pid, prefix) {
        let _ = rustix::process::kill_process(process, rustix::process::Signal::TERM);
    }
    if !wait_gone(pid, prefix, Duration::from_secs(3)) {
        if is_our_wire(pid, prefix) {
            let _ = rustix::process::kill_process(process, rustix::process::Signal::KILL);
        }
        wait_gone(pid, prefix, Duration::from_secs(3));
    }
}

/// Waits for a process that is not our child to exit, by polling /proc: there is no
/// notification for a non-child short of pidfd, and a test bed is torn down rarely.
fn wait_gone(pid: u32, prefix: &str, limit: Duration) -> bool {
    let deadline = Instant::now() + limit;
    while Instant::now() < deadline {
        if !wire_or_exiting(pid, prefix) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    !wire_or_exiting(pid, prefix)
}

/// Asks a running wire for its counters (SIGUSR1) and waits up to a second for the file.
pub fn live_counters(bed: &TestBed) -> Option<WireReport> {
    let pid = bed.wire_pid.filter(|_| wire_alive(bed))?;
    let path = TestBed::counters_path(&bed.prefix);
    let before = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
    let process = rustix::process::Pid::from_raw(i32::try_from(pid).ok()?)?;
    rustix::process::kill_process(process, rustix::process::Signal::USR1).ok()?;
    let deadline = Instant::now() + Duration::from_secs(1);
    while Instant::now() < deadline {
        let now = std::fs::metadata(&path).and_then(|m| m.modified()).ok();
        if now.is_some() && now != before {
            let text = std::fs::read_to_string(&path).ok()?;
            return serde_json::from_str(&text).ok();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    None
}

/// Whether `ip` belongs to a host of a test bed that is up, and the calling thread runs in one
/// of that test bed's namespaces. The lab's loopback-only rule (`sluice-lab`'s `target.rs`)
/// can accept exactly these: from inside a test bed, its hosts' addresses reach nothing but
/// namespaces this crate created, so a load aimed there cannot leave the machine.
pub fn is_test_bed_address(ip: std::net::IpAddr) -> bool {
    use std::os::unix::fs::MetadataExt;
    let Ok(here) = std::fs::metadata("/proc/thread-self/ns/net") else {
        return false;
    };
    let Ok(entries) = std::fs::read_dir(STATE_DIR) else {
        return false;
    };
    let text = ip.to_string();
    for entry in entries.flatten() {
        let path = entry.path();
        let is_state = path.extension().is_some_and(|e| e == "json")
            && !path.to_string_lossy().ends_with(".counters.json");
        let Some(bed) = is_state
            .then(|| std::fs::read_to_string(&path).ok())
            .flatten()
            .and_then(|t| serde_json::from_str::<TestBed>(&t).ok())
        else {
            continue;
        };
        let inside = bed.hosts.iter().any(|h| {
            std::fs::metadata(std::path::Path::new("/run/netns").join(&h.netns))
                .is_ok_and(|m| m.ino() == here.ino() && m.dev() == here.dev())
        });
        if inside && bed.hosts.iter().any(|h| h.addresses.contains(&text)) {
            return true;
        }
    }
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_command_lines() {
        let matches = |args: &[&str], prefix| is_wire_command(args.join("\0").as_bytes(), prefix);
        assert!(matches(
            &["/x/sluice-lab", "wire", "--prefix", "slw"],
            "slw"
        ));
        assert!(matches(&["sluice-wan", "wire", "--prefix=slw", ""], "slw"));
        assert!(matches(
            &["a", "wire", "--duration", "5s", "--prefix", "slw"],
            "slw"
        ));
        assert!(!matches(&["sluice-lab", "wire", "--prefix", "slw2"], "slw"));
        assert!(!matches(
            &["sluice-lab", "net", "down", "--prefix", "wire"],
            "wire"
        ));
        assert!(!matches(
            &["sh", "-c", "sluice-lab wire --prefix slw"],
            "slw"
        ));
        assert!(!matches(&[], "slw"));
    }

    #[test]
    fn prefixes_keep_device_names_short() {
        assert!(check_prefix("slw").is_ok());
        assert!(check_prefix("slw12345").is_ok());
        assert!(check_prefix("slw123456").is_err());
        assert!(check_prefix("1slw").is_err());
        assert!(check_prefix("s-w").is_err());
        assert!(check_prefix("").is_err());
    }

    #[test]
    fn proxy_layout_plan() {
        let profile = Profile::load("lan").unwrap();
        let bed = TestBed::plan("slw12345", Layout::Proxy, "lan", profile, 1).unwrap();
        assert_eq!(bed.hosts.len(), 3);
        assert_eq!(bed.links[0].a.ifname, "slw12345-cp-c");
        assert!(bed
            .links
            .iter()
            .all(|l| l.a.ifname.len() <= 15 && l.b.ifname.len() <= 15));
        assert_eq!(bed.netns_of("proxy").unwrap(), "slw12345-proxy");
        assert!(bed.netns_of("router").is_err());
    }

    #[test]
    fn direct_layout_keeps_addresses() {
        let profile = Profile::load("www2002-modem-1").unwrap();
        let bed = TestBed::plan("slw", Layout::Direct, "m", profile, 1).unwrap();
        assert_eq!(bed.links.len(), 1);
        assert_eq!(bed.links[0].a.address, "10.201.1.2/24");
        assert_eq!(bed.links[0].b.address, "10.201.2.2/24");
        assert_eq!(bed.links[0].down.delay, Duration::from_millis(140));
    }
}
