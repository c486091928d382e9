//! Upstream connections: name resolution off the worker, connect with a deadline, and a pool of
//! idle connections per origin address.

use std::cell::RefCell;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, ToSocketAddrs};
use std::time::{Duration, Instant};

use sluice_rt::net::{StreamOptions, TcpStream};
use sluice_rt::{spawn_blocking, timeout};

use crate::error::ProxyError;

/// How long a resolved name is reused. getaddrinfo does not tell the record's TTL; a short fixed
/// time keeps forward-proxy traffic to one site from costing a lookup per request.
const RESOLVE_CACHE_TIME: Duration = Duration::from_secs(30);

/// A resolved name: its addresses and when they were looked up.
type CachedLookup = (Vec<SocketAddr>, Instant);

/// Resolves names on the blocking pool, caching results per worker.
#[derive(Debug, Default)]
pub(crate) struct Resolver {
    cache: RefCell<HashMap<(String, u16), CachedLookup>>,
}

impl Resolver {
    /// The addresses of `host:port`; an IP literal costs nothing.
    pub(crate) async fn resolve(
        &self,
        host: &str,
        port: u16,
    ) -> Result<Vec<SocketAddr>, ProxyError> {
        if let Ok(ip) = host.parse::<IpAddr>() {
            return Ok(vec![SocketAddr::new(ip, port)]);
        }
        let key = (host.to_ascii_lowercase(), port);
        if let Some((addrs, at)) = self.cache.borrow().get(&key) {
            if at.elapsed() < RESOLVE_CACHE_TIME {
                return Ok(addrs.clone());
            }
        }
        let lookup = key.clone();
        let resolved = spawn_blocking(move || {
            lookup
                .to_socket_addrs()
                .map(|addrs| addrs.collect::<Vec<_>>())
        })
        .await
        .unwrap_or_else(|| Err(io::Error::other("resolver threads unavailable")));
        let resolve_error = |source| ProxyError::Resolve {
            host: host.to_string(),
            source,
        };
        let addrs = resolved.map_err(resolve_error)?;
        if addrs.is_empty() {
            return Err(resolve_error(io::ErrorKind::NotFound.into()));
        }
        let mut cache = self.cache.borrow_mut();
        cache.retain(|_, (_, at)| at.elapsed() < RESOLVE_CACHE_TIME);
        cache.insert(key, (addrs.clone(), Instant::now()));
        Ok(addrs)
    }
}

/// Connects to the first of `addrs` that accepts within `connect_timeout` each.
pub(crate) async fn connect(
    addrs: &[SocketAddr],
    options: &StreamOptions,
    connect_timeout: Duration,
) -> Result<(TcpStream, SocketAddr), ProxyError> {
    let mut last_error = None;
    for &addr in addrs {
        match timeout(connect_timeout, TcpStream::connect(addr, options)).await {
            Ok(Ok(stream)) => return Ok((stream, addr)),
            Ok(Err(source)) => last_error = Some(ProxyError::Connect { addr, source }),
            Err(_) => {
                last_error = Some(ProxyError::ConnectTimeout {
                    addr,
                    timeout: connect_timeout,
                })
            }
        }
    }
    Err(last_error.unwrap_or_else(|| ProxyError::Resolve {
        host: String::from("(no address)"),
        source: io::ErrorKind::NotFound.into(),
    }))
}

#[derive(Debug)]
struct IdleConnection {
    stream: TcpStream,
    since: Instant,
}

/// Idle upstream connections of one worker, keyed by address. A connection goes back in only
/// after a complete response on a persistent connection; it comes out only if still alive.
#[derive(Debug)]
pub(crate) struct UpstreamPool {
    idle: HashMap<SocketAddr, Vec<IdleConnection>>,
    max_per_origin: usize,
    idle_timeout: Duration,
}

impl UpstreamPool {
    pub(crate) fn new(max_per_origin: usize, idle_timeout: Duration) -> Self {
        Self {
            idle: HashMap::new(),
            max_per_origin,
            idle_timeout,
        }
    }

    /// A live idle connection to `addr`, most recently used first (its congestion window and
    /// the upstream's keep-alive timer are the freshest).
    pub(crate) fn take(&mut self, addr: SocketAddr) -> Option<TcpStream> {
        let list = self.idle.get_mut(&addr)?;
        while let Some(idle) = list.pop() {
            if idle.since.elapsed() < self.idle_timeout && is_quiet(&idle.stream) {
                return Some(idle.stream);
            }
        }
        None
    }

    /// Keeps `stream` for reuse, unless the origin already has enough idle connections.
    pub(crate) fn put(&mut self, addr: SocketAddr, stream: TcpStream) {
        if self.max_per_origin == 0 {
            return;
        }
        let list = self.idle.entry(addr).or_default();
        if list.len() >= self.max_per_origin {
            list.remove(0);
        }
        list.push(IdleConnection {
            stream,
            since: Instant::now(),
        });
    }

    /// Closes connections idle longer than the idle timeout.
    pub(crate) fn sweep(&mut self) {
        let idle_timeout = self.idle_timeout;
        for list in self.idle.values_mut() {
            list.retain(|idle| idle.since.elapsed() < idle_timeout);
        }
        self.idle.retain(|_, list| !list.is_empty());
    }

    /// How many idle connections are kept.
    pub(crate) fn len(&self) -> usize {
        self.idle.values().map(Vec::len).sum()
    }
}

/// Whether an idle connection has nothing to say: an EOF means the upstream closed it, and
/// bytes before a request are garbage; either way it must not carry the next request.
fn is_quiet(stream: &TcpStream) -> bool {
    let mut probe = [0u8; 1];
    matches!(stream.std().peek(&mut probe), Err(e) if e.kind() == io::ErrorKind::WouldBlock)
}
