//! Starting, waiting for and stopping the peer proxies, and installing them when missing.

use std::fs;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context};

use crate::cpu::with_descendants;

/// How long a peer may take to accept connections after it starts.
const START_DEADLINE: Duration = Duration::from_secs(20);
/// How long a peer may take to exit after SIGTERM before it is killed.
const STOP_DEADLINE: Duration = Duration::from_secs(5);

/// A peer proxy running as a child process of the lab.
#[derive(Debug)]
pub struct PeerProcess {
    child: Child,
    /// Where it listens.
    pub addr: SocketAddr,
    log: PathBuf,
}

impl PeerProcess {
    /// Runs `program args` with stdout and stderr to `log`, and waits until `addr` accepts.
    pub fn start(
        program: &Path,
        args: &[String],
        addr: SocketAddr,
        log: PathBuf,
    ) -> anyhow::Result<PeerProcess> {
        let out =
            fs::File::create(&log).with_context(|| format!("cannot create {}", log.display()))?;
        let child = Command::new(program)
            .args(args)
            .stdin(Stdio::null())
            .stdout(out.try_clone()?)
            .stderr(out)
            .spawn()
            .with_context(|| format!("cannot run {}", program.display()))?;
        let mut peer = PeerProcess { child, addr, log };
        let deadline = Instant::now() + START_DEADLINE;
        loop {
            if let Some(status) = peer.child.try_wait()? {
                bail!(
                    "{} exited at start ({status}): {}",
                    program.display(),
                    peer.log_tail()
                );
            }
            if TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_ok() {
                return Ok(peer);
            }
            if Instant::now() > deadline {
                let tail = peer.log_tail();
                peer.stop();
                bail!(
                    "{} did not listen on {addr} within {START_DEADLINE:?}: {tail}",
                    program.display()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The child's pid (its workers are found as descendants).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The last line the peer logged, for error messages.
    pub fn log_tail(&self) -> String {
        let text = fs::read_to_string(&self.log).unwrap_or_default();
        text.lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("(no output)")
            .trim()
            .to_owned()
    }

    /// SIGTERM to the child (a master process stops its workers), SIGKILL to whatever of it
    /// is left after [`STOP_DEADLINE`]. Only this peer's own processes are signalled, by pid.
    pub fn stop(mut self) {
        let family = with_descendants(&[self.pid()]);
        signal("TERM", &[self.pid()]);
        let deadline = Instant::now() + STOP_DEADLINE;
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let left: Vec<u32> = family
            .into_iter()
            .filter(|pid| Path::new(&format!("/proc/{pid}")).exists())
            .collect();
        signal("KILL", &left);
    }
}

/// Sends a signal with kill(1): this crate has no unsafe code, so no kill(2).
fn signal(name: &str, pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    let _ = Command::new("kill")
        .arg(format!("-{name}"))
        .args(pids.iter().map(u32::to_string))
        .stderr(Stdio::null())
        .status();
}

/// A port free on loopback now (the kernel's choice); the peer binds it a moment later.
pub fn free_port() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").context("cannot find a free port")?;
    Ok(listener.local_addr()?)
}

/// `name` on PATH or in the sbin directories, where Debian puts daemons.
pub fn find_program(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/sbin", "/sbin", "/usr/local/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Installs the Debian `packages` with apt-get, saying so. Services are kept from starting
/// during the install (a temporary policy-rc.d, as container images do), so a distribution
/// squid or nginx does not take ports 3128 or 80.
pub fn apt_install(packages: &[&str]) -> anyhow::Result<()> {
    let uid = Command::new("id").arg("-u").output().ok();
    let root = uid.is_some_and(|o| String::from_utf8_lossy(&o.stdout).trim() == "0");
    if !root {
        bail!(
            "installing {} needs root: run apt-get install {0} yourself",
            packages.join(" ")
        );
    }
    println!(
        "peers: installing {} with apt-get (not found on this machine)",
        packages.join(" ")
    );
    let policy = Path::new("/usr/sbin/policy-rc.d");
    let own_policy = !policy.exists();
    if own_policy {
        fs::write(
            policy,
            "#!/bin/sh\n# sluice-lab peers: no service starts during install\nexit 101\n",
        )?;
        let _ = Command::new("chmod").args(["755"]).arg(policy).status();
    }
    let result = (|| {
        let update = Command::new("apt-get").args(["update", "-qq"]).status()?;
        anyhow::ensure!(update.success(), "apt-get update failed");
        let install = Command::new("apt-get")
            .args(["install", "-y", "-qq", "--no-install-recommends"])
            .args(packages)
            .env("DEBIAN_FRONTEND", "noninteractive")
            .status()?;
        anyhow::ensure!(
            install.success(),
            "apt-get install {} failed",
            packages.join(" ")
        );
        Ok(())
    })();
    if own_policy {
        let _ = fs::remove_file(policy);
    }
    result
}
