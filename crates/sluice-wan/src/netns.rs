//! Network namespaces and the commands that configure them: `ip`, `sysctl`, `ethtool`.
//!
//! Configuration goes through iproute2 rather than netlink: it runs once per `net up`, and
//! `ip` is what anyone debugging the test bed will type, so its error messages are theirs too.

use std::fs::File;
use std::os::fd::AsFd;
use std::process::{Command, Stdio};

use rustix::thread::LinkNameSpaceType;

use crate::error::WanError;

/// Runs `program args...`, failing with its stderr if it exits non-zero.
pub fn run(program: &str, args: &[&str]) -> Result<String, WanError> {
    let command = format!("{program} {}", args.join(" "));
    let output = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map_err(|source| WanError::io(format!("cannot run `{command}`"), source))?;
    if !output.status.success() {
        return Err(WanError::Command {
            command,
            status: output.status.to_string(),
            stderr: String::from_utf8_lossy(&output.stderr).trim().to_owned(),
        });
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// `ip args...`.
pub fn ip(args: &[&str]) -> Result<String, WanError> {
    run("ip", args)
}

/// Whether the named namespace exists (`/run/netns/NAME`, where `ip netns add` mounts it).
pub fn exists(netns: &str) -> bool {
    std::path::Path::new("/run/netns").join(netns).exists()
}

/// Creates a namespace with its loopback up.
pub fn create(netns: &str) -> Result<(), WanError> {
    ip(&["netns", "add", netns])?;
    ip(&["-n", netns, "link", "set", "lo", "up"])?;
    Ok(())
}

/// Deletes a namespace if it exists; its devices go with it.
pub fn delete(netns: &str) -> Result<(), WanError> {
    if exists(netns) {
        ip(&["netns", "del", netns])?;
    }
    Ok(())
}

/// Sets a sysctl inside a namespace (`net.ipv4.ip_forward`, ...).
pub fn sysctl(netns: &str, key: &str, value: &str) -> Result<(), WanError> {
    let assignment = format!("{key}={value}");
    run(
        "ip",
        &["netns", "exec", netns, "sysctl", "-q", "-w", &assignment],
    )
    .map(|_| ())
}

/// Runs `f` on a thread that has entered `netns`, and returns what it returns. Sockets created
/// by `f` stay in that namespace for their whole life (network_namespaces(7)), so tests and
/// probes can open them here and use them from any thread.
pub fn within<T: Send + 'static>(
    netns: &str,
    f: impl FnOnce() -> T + Send + 'static,
) -> Result<T, WanError> {
    let path = std::path::Path::new("/run/netns").join(netns);
    let file = File::open(&path).map_err(|source| {
        WanError::io(format!("cannot open namespace {}", path.display()), source)
    })?;
    let thread = std::thread::spawn(move || {
        rustix::thread::move_into_link_name_space(file.as_fd(), Some(LinkNameSpaceType::Network))
            .map(|()| f())
    });
    match thread.join() {
        Ok(Ok(value)) => Ok(value),
        Ok(Err(errno)) => Err(WanError::io(
            format!("cannot enter namespace {netns}"),
            errno.into(),
        )),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}
