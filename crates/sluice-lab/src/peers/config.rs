//! The peers, and the configuration each runs with: one worker, no logging per request, no
//! caching, so every figure is the cost of relaying on one core.

use std::fmt;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;

use serde::Serialize;

use crate::dist::SpecError;

/// One column of the comparison.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(into = "String")]
pub enum Peer {
    /// No proxy: the reference for overhead.
    Direct,
    /// sluice in reverse mode with this `transfer.engine`.
    Sluice(&'static str),
    /// HAProxy in HTTP mode; `splice` adds `option splice-response`.
    Haproxy {
        /// Whether splicing is forced for responses.
        splice: bool,
    },
    /// nginx `proxy_pass` with upstream keep-alive, buffering off.
    Nginx,
    /// Squid as a forward proxy, caching off.
    Squid,
}

/// Every peer, in table order.
pub const ALL: [Peer; 9] = [
    Peer::Direct,
    Peer::Sluice("copy"),
    Peer::Sluice("splice"),
    Peer::Sluice("sockmap"),
    Peer::Sluice("auto"),
    Peer::Haproxy { splice: false },
    Peer::Haproxy { splice: true },
    Peer::Nginx,
    Peer::Squid,
];

/// The peer the ratios divide by.
pub const BASELINE: Peer = Peer::Haproxy { splice: false };

impl Peer {
    /// The Debian package that provides it, if any.
    pub fn package(&self) -> Option<&'static str> {
        match self {
            Peer::Haproxy { .. } => Some("haproxy"),
            Peer::Nginx => Some("nginx"),
            Peer::Squid => Some("squid"),
            Peer::Direct | Peer::Sluice(_) => None,
        }
    }

    /// Whether clients address it as a forward proxy (absolute-form) rather than a reverse one.
    pub fn is_forward(&self) -> bool {
        matches!(self, Peer::Squid)
    }

    /// The configuration file's text for a peer listening on `listen` in front of `origin`,
    /// with its run files under `dir`.
    pub fn config(&self, listen: SocketAddr, origin: SocketAddr, dir: &Path) -> String {
        let dir = dir.display();
        match self {
            Peer::Direct => String::new(),
            Peer::Sluice(engine) => format!(
                "# sluice-lab peers: one worker, reverse mode, engine {engine}\n\
                 workers = 1\n\n[[listener]]\naddress = \"{listen}\"\nmode = \"reverse\"\n\
                 upstreams = [\"{origin}\"]\n\n[transfer]\nengine = \"{engine}\"\n\n\
                 [log]\nlevel = \"warn\"\naccess_log = false\n"
            ),
            Peer::Haproxy { splice } => format!(
                "# sluice-lab peers: one thread, HTTP mode, server keep-alive (the default)\n\
                 global\n    nbthread 1\n    maxconn 4000\n\n\
                 defaults\n    mode http\n    timeout connect 5s\n    timeout client 30s\n    \
                 timeout server 30s\n{}\n\
                 frontend lab\n    bind {listen}\n    default_backend origin\n\n\
                 backend origin\n    server origin {origin}\n",
                if *splice {
                    "    option splice-response\n"
                } else {
                    ""
                }
            ),
            Peer::Nginx => format!(
                "# sluice-lab peers: one worker; upstream keep-alive; no buffering to disk, and reads of\n\
                 # 32k, sluice's copy_buffer (nginx's default 4k or 8k page would handicap it)\n\
                 worker_processes 1;\ndaemon off;\npid {dir}/nginx.pid;\n\
                 error_log {dir}/nginx-error.log warn;\n\
                 events {{ worker_connections 20000; }}\n\
                 http {{\n    access_log off;\n    keepalive_requests 1000000;\n\
                 \x20   client_body_temp_path {dir}/client-body;\n\
                 \x20   proxy_temp_path {dir}/proxy-temp;\n\
                 \x20   upstream origin {{ server {origin}; keepalive 64; \
                 keepalive_requests 1000000; }}\n\
                 \x20   server {{\n        listen {listen};\n        location / {{\n\
                 \x20           proxy_pass http://origin;\n\
                 \x20           proxy_http_version 1.1;\n\
                 \x20           proxy_set_header Connection \"\";\n\
                 \x20           proxy_buffering off;\n\
                 \x20           proxy_buffer_size 32k;\n\
                 \x20           proxy_buffers 4 32k;\n        }}\n    }}\n}}\n"
            ),
            Peer::Squid => format!(
                "# sluice-lab peers: forward proxy, one worker, caching off, no access log\n\
                 http_port {listen}\nworkers 1\ncache deny all\ncache_mem 0 MB\n\
                 access_log none\ncache_log {dir}/squid-cache.log\n\
                 pid_filename {dir}/squid.pid\ncoredump_dir {dir}\n\
                 shutdown_lifetime 0 seconds\nmax_filedescriptors 65536\n\
                 acl lab src 127.0.0.0/8\nhttp_access allow lab\nhttp_access deny all\n"
            ),
        }
    }

    /// The program and arguments that run it in the foreground with `config_path`;
    /// `sluice` is the sluice binary to use.
    pub fn command(
        &self,
        config_path: &Path,
        dir: &Path,
        sluice: &Path,
        program: &Path,
    ) -> (PathBuf, Vec<String>) {
        let config = config_path.display().to_string();
        let args: Vec<String> = match self {
            Peer::Direct => Vec::new(),
            Peer::Sluice(_) => {
                return (
                    sluice.to_owned(),
                    vec!["run".into(), "--config".into(), config],
                )
            }
            // -db: foreground, no daemon.
            Peer::Haproxy { .. } => vec!["-db".into(), "-f".into(), config],
            // -p: prefix for relative paths; -e: error log before the config is read.
            Peer::Nginx => vec![
                "-c".into(),
                config,
                "-p".into(),
                dir.display().to_string(),
                "-e".into(),
                dir.join("nginx-error.log").display().to_string(),
            ],
            // -N: no daemon; -d 1: errors to stderr too.
            Peer::Squid => vec!["-N".into(), "-d".into(), "1".into(), "-f".into(), config],
        };
        (program.to_owned(), args)
    }

    /// The program's name, for finding it.
    pub fn program_name(&self) -> &'static str {
        match self {
            Peer::Direct => "",
            Peer::Sluice(_) => "sluice",
            Peer::Haproxy { .. } => "haproxy",
            Peer::Nginx => "nginx",
            Peer::Squid => "squid",
        }
    }
}

impl fmt::Display for Peer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Peer::Direct => f.write_str("direct"),
            Peer::Sluice(engine) => write!(f, "sluice-{engine}"),
            Peer::Haproxy { splice: false } => f.write_str("haproxy"),
            Peer::Haproxy { splice: true } => f.write_str("haproxy-splice"),
            Peer::Nginx => f.write_str("nginx"),
            Peer::Squid => f.write_str("squid"),
        }
    }
}

impl From<Peer> for String {
    fn from(peer: Peer) -> String {
        peer.to_string()
    }
}

impl FromStr for Peer {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Peer, SpecError> {
        ALL.iter()
            .copied()
            .find(|p| p.to_string() == text.trim())
            .ok_or_else(|| {
                let names: Vec<String> = ALL.iter().map(Peer::to_string).collect();
                SpecError::new(format!(
                    "unknown peer {text:?}, expected one of {}",
                    names.join(", ")
                ))
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for peer in ALL {
            assert_eq!(peer.to_string().parse::<Peer>().unwrap(), peer);
        }
        assert!("varnish".parse::<Peer>().is_err());
    }

    #[test]
    fn configs_name_listener_and_origin() {
        let listen: SocketAddr = "127.0.0.1:4000".parse().unwrap();
        let origin: SocketAddr = "127.0.0.1:5000".parse().unwrap();
        for peer in ALL.iter().filter(|p| **p != Peer::Direct) {
            let text = peer.config(listen, origin, Path::new("/tmp/x"));
            assert!(text.contains("127.0.0.1:4000"), "{peer}: {text}");
            if !peer.is_forward() {
                assert!(text.contains("127.0.0.1:5000"), "{peer}: {text}");
            }
        }
        let splice = Peer::Haproxy { splice: true }.config(listen, origin, Path::new("/t"));
        assert!(splice.contains("option splice-response"));
        let plain = Peer::Haproxy { splice: false }.config(listen, origin, Path::new("/t"));
        assert!(!plain.contains("splice"));
    }
}
