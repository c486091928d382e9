//! Where the lab may send traffic: loopback (127.0.0.0/8 and ::1), and the hosts of a WAN test
//! bed when the lab itself runs inside one of that test bed's namespaces.
//!
//! A load generator aimed at the wrong address is a denial-of-service tool, so every address
//! the lab connects to or listens on passes through [`test_bed_address`] first. From inside a
//! `sluice-wan` namespace the test bed's addresses reach only namespaces we created
//! ([`sluice_wan::is_test_bed_address`] checks both halves), so a load there cannot leave the
//! machine either.

use std::net::{IpAddr, SocketAddr, ToSocketAddrs};

use anyhow::{bail, Context};

/// Resolves `text` (`127.0.0.1:8080`, `[::1]:3128`, `localhost:8080`) and refuses anything
/// outside loopback; `role` names the address in the error (`--target`, `--proxy`).
pub fn test_bed_address(text: &str, role: &str) -> anyhow::Result<SocketAddr> {
    let addresses: Vec<SocketAddr> = text
        .to_socket_addrs()
        .with_context(|| format!("{role} {text:?}: expected host:port, such as 127.0.0.1:8080"))?
        .collect();
    let Some(addr) = addresses.iter().find(|a| allowed(a.ip())) else {
        bail!(
            "{role} {text:?} is not a loopback address: the lab only sends traffic to \
             127.0.0.0/8, [::1] or (run inside a `sluice-wan` namespace) a test bed host, \
             so it cannot load someone else's machine"
        );
    };
    Ok(*addr)
}

/// Refuses an already-parsed address outside loopback and the test bed.
pub fn ensure_loopback(addr: SocketAddr, role: &str) -> anyhow::Result<()> {
    if !allowed(addr.ip()) {
        bail!(
            "{role} {addr} is not a loopback address: the lab only uses 127.0.0.0/8, [::1] \
             or (inside a `sluice-wan` namespace) a test bed host"
        );
    }
    Ok(())
}

fn allowed(ip: IpAddr) -> bool {
    ip.is_loopback() || sluice_wan::is_test_bed_address(ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_loopback() {
        assert!(test_bed_address("127.0.0.1:80", "--target").is_ok());
        assert!(test_bed_address("127.1.2.3:80", "--target").is_ok());
        assert!(test_bed_address("[::1]:80", "--target").is_ok());
    }

    #[test]
    fn refuses_everything_else() {
        for text in [
            "10.0.0.1:80",
            "192.168.1.1:80",
            "8.8.8.8:53",
            "[2001:db8::1]:80",
            "0.0.0.0:80",
        ] {
            let err = test_bed_address(text, "--target").unwrap_err().to_string();
            assert!(err.contains("not a loopback address"), "{text}: {err}");
        }
        assert!(test_bed_address("no-port", "--target").is_err());
    }
}
