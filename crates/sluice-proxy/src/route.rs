//! Where a request goes: its target in forward mode, the next upstream in reverse mode.

use std::cell::Cell;
use std::net::IpAddr;

use ipnet::IpNet;
use sluice_config::{ListenerMode, UpstreamAddr};
use sluice_http::{RequestHead, RequestTarget};
use sluice_splice::Engine;

use crate::error::ProxyError;

/// One listener's routing as its worker sees it.
#[derive(Debug)]
pub(crate) struct ListenerContext {
    pub index: usize,
    pub mode: ListenerMode,
    pub upstreams: Vec<UpstreamAddr>,
    pub engine: Engine,
    next_upstream: Cell<usize>,
}

impl ListenerContext {
    pub(crate) fn new(
        index: usize,
        mode: ListenerMode,
        upstreams: Vec<UpstreamAddr>,
        engine: Engine,
    ) -> Self {
        Self {
            index,
            mode,
            upstreams,
            engine,
            next_upstream: Cell::new(0),
        }
    }

    /// The upstream for the next reverse-mode request, in round-robin order per worker.
    pub(crate) fn next_upstream(&self) -> Option<&UpstreamAddr> {
        let index = self.next_upstream.get();
        self.next_upstream.set(index.wrapping_add(1));
        self.upstreams.get(index % self.upstreams.len().max(1))
    }

    /// Decides where a non-CONNECT request goes.
    pub(crate) fn route(&self, head: &RequestHead) -> Result<Route, ProxyError> {
        match (self.mode, &head.target) {
            (
                ListenerMode::Forward,
                RequestTarget::Absolute {
                    authority,
                    path_and_query,
                    ..
                },
            ) => {
                Ok(Route {
                    host: authority.host.clone(),
                    port: authority.port,
                    path: path_and_query.clone(),
                    // RFC 9112 §3.2.2: a proxy replaces Host with the target's authority.
                    host_header: Some(authority.to_string()),
                })
            }
            (ListenerMode::Forward, _) => Err(ProxyError::NotAbsoluteForm),
            (ListenerMode::Reverse, target) => {
                let path = match target {
                    RequestTarget::Origin(path) => path.clone(),
                    RequestTarget::Absolute { path_and_query, .. } => path_and_query.clone(),
                    RequestTarget::Asterisk => String::from("*"),
                    RequestTarget::Authority(_) => return Err(ProxyError::ConnectOnReverse),
                };
                let upstream = self.next_upstream().ok_or(ProxyError::NotAbsoluteForm)?;
                // Host kept: the upstream is the origin's own server farm.
                Ok(Route {
                    host: upstream.host.clone(),
                    port: upstream.port,
                    path,
                    host_header: None,
                })
            }
        }
    }
}

/// Where one request goes and what it is called there.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Route {
    pub host: String,
    pub port: u16,
    /// origin-form target (or `*`) sent upstream.
    pub path: String,
    /// A Host value replacing the client's, in forward mode.
    pub host_header: Option<String>,
}

/// Whether `ip` is inside one of the allowed networks. IPv4-mapped IPv6 peers (from a dual-stack
/// listener) are checked as the IPv4 address they are.
pub(crate) fn client_allowed(allow: &[IpNet], ip: IpAddr) -> bool {
    let ip = match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    };
    allow.iter().any(|net| net.contains(&ip))
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_http::{parse_request, Limits, Parsed};
    use sluice_splice::CopyEngine;

    fn head(raw: &str) -> RequestHead {
        match parse_request(raw.as_bytes(), &Limits::default()).unwrap() {
            Parsed::Complete { head, .. } => head,
            Parsed::Partial => panic!("partial"),
        }
    }

    fn listener(mode: ListenerMode, upstreams: &[&str]) -> ListenerContext {
        let upstreams = upstreams.iter().map(|u| u.parse().unwrap()).collect();
        ListenerContext::new(0, mode, upstreams, Engine::Copy(CopyEngine::new(1024)))
    }

    #[test]
    fn forward_routes_absolute_form_and_replaces_host() {
        let route = listener(ListenerMode::Forward, &[])
            .route(&head(
                "GET http://example.test:8080/a?b HTTP/1.1\r\nHost: other\r\n\r\n",
            ))
            .unwrap();
        assert_eq!(route.host, "example.test");
        assert_eq!(route.port, 8080);
        assert_eq!(route.path, "/a?b");
        assert_eq!(route.host_header.as_deref(), Some("example.test:8080"));
    }

    #[test]
    fn forward_refuses_origin_form() {
        let err = listener(ListenerMode::Forward, &[])
            .route(&head("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"))
            .unwrap_err();
        assert_eq!(err.status(), 400);
    }

    #[test]
    fn reverse_round_robins_and_keeps_host() {
        let l = listener(ListenerMode::Reverse, &["127.0.0.1:1", "127.0.0.1:2"]);
        let h = head("GET /x HTTP/1.1\r\nHost: site\r\n\r\n");
        let ports: Vec<u16> = (0..4).map(|_| l.route(&h).unwrap().port).collect();
        assert_eq!(ports, [1, 2, 1, 2]);
        assert_eq!(l.route(&h).unwrap().host_header, None);
    }

    #[test]
    fn acl_matches_cidrs_and_mapped_addresses() {
        let allow: Vec<IpNet> = vec!["127.0.0.0/8".parse().unwrap(), "::1/128".parse().unwrap()];
        assert!(client_allowed(&allow, "127.1.2.3".parse().unwrap()));
        assert!(client_allowed(&allow, "::1".parse().unwrap()));
        assert!(client_allowed(&allow, "::ffff:127.0.0.1".parse().unwrap()));
        assert!(!client_allowed(&allow, "10.0.0.1".parse().unwrap()));
    }
}
