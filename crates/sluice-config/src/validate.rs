//! Rules a well-typed config must still follow, and the warnings `sluice check` prints.
//!
//! Errors are for configs the proxy cannot run correctly (a reverse listener with nowhere to
//! send requests); warnings are for configs that run but are probably not what was meant (an
//! open forward proxy). `sluice check --strict` turns warnings into errors.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::Duration;

use crate::error::{Amount, ConfigError, Location, Problem};
use crate::locate::{Document, KeyPath};
use crate::schema::{ListenerMode, Timeouts, LOG_LEVELS};
use crate::units::format_size;
use crate::Config;

/// Builds errors that point into one document.
struct Checker<'a> {
    document: &'a Document<'a>,
    source_name: &'a str,
    text: &'a str,
}

impl Checker<'_> {
    fn error(&self, path: KeyPath, problem: Problem) -> ConfigError {
        let at = match self.document.span_of(&path) {
            Some(span) => Location::at_offset(self.source_name, self.text, span.start),
            None => Location::whole_file(self.source_name),
        };
        ConfigError::Invalid {
            at,
            key: path.to_string(),
            problem,
        }
    }
}

/// Checks every rule, in the order the keys usually appear, and reports the first broken one.
pub(crate) fn check(
    config: &Config,
    document: &Document<'_>,
    source_name: &str,
    text: &str,
) -> Result<(), ConfigError> {
    let checker = Checker {
        document,
        source_name,
        text,
    };
    if config.workers == 0 {
        return Err(checker.error(KeyPath::top("workers"), Problem::ZeroWorkers));
    }
    check_listeners(config, &checker)?;
    check_access(config, &checker)?;
    check_timeouts(&config.timeouts, &checker)?;
    check_sizes(config, &checker)?;
    check_cache(config, &checker)?;
    if let Some(via) = &config.headers.via {
        if !via.bytes().all(is_token_byte) {
            let path = KeyPath::top("headers").key("via");
            return Err(checker.error(path, Problem::InvalidVia(via.clone())));
        }
    }
    if !LOG_LEVELS.contains(&config.log.level.as_str()) {
        let problem = Problem::UnknownLogLevel(config.log.level.clone());
        return Err(checker.error(KeyPath::top("log").key("level"), problem));
    }
    Ok(())
}

fn check_listeners(config: &Config, checker: &Checker<'_>) -> Result<(), ConfigError> {
    let root = KeyPath::top("listener");
    if config.listeners.is_empty() {
        return Err(checker.error(root, Problem::NoListeners));
    }
    let mut first_with_address: HashMap<SocketAddr, usize> = HashMap::new();
    for (index, listener) in config.listeners.iter().enumerate() {
        let path = root.index(index);
        let upstreams = path.key("upstreams");
        match listener.mode {
            ListenerMode::Reverse if listener.upstreams.is_empty() => {
                // Point at `upstreams = []` if written, else at the mode that needs them.
                let key = if checker.document.contains(&upstreams) {
                    upstreams
                } else {
                    path.key("mode")
                };
                return Err(checker.error(key, Problem::ReverseWithoutUpstreams));
            }
            ListenerMode::Forward if !listener.upstreams.is_empty() => {
                return Err(checker.error(upstreams, Problem::ForwardWithUpstreams));
            }
            _ => {}
        }
        // Port 0 asks the kernel for a free port, so two such listeners never collide.
        if listener.address.port() != 0 {
            if let Some(&first) = first_with_address.get(&listener.address) {
                let problem = Problem::DuplicateAddress {
                    address: listener.address,
                    first,
                };
                return Err(checker.error(path.key("address"), problem));
            }
            first_with_address.insert(listener.address, index);
        }
    }
    Ok(())
}

fn check_access(config: &Config, checker: &Checker<'_>) -> Result<(), ConfigError> {
    let access = KeyPath::top("access");
    if config.access.allow.is_empty() {
        return Err(checker.error(access.key("allow"), Problem::EmptyAllow));
    }
    if let Some(index) = config
        .access
        .connect_ports
        .iter()
        .position(|&port| port == 0)
    {
        let path = access.key("connect_ports").index(index);
        return Err(checker.error(path, Problem::ZeroConnectPort));
    }
    Ok(())
}

fn check_timeouts(timeouts: &Timeouts, checker: &Checker<'_>) -> Result<(), ConfigError> {
    let defaults = Timeouts::default();
    let all: [(&str, Duration, Duration); 7] = [
        (
            "client_header",
            timeouts.client_header,
            defaults.client_header,
        ),
        ("keep_alive", timeouts.keep_alive, defaults.keep_alive),
        (
            "upstream_connect",
            timeouts.upstream_connect,
            defaults.upstream_connect,
        ),
        (
            "upstream_first_byte",
            timeouts.upstream_first_byte,
            defaults.upstream_first_byte,
        ),
        (
            "upstream_idle",
            timeouts.upstream_idle,
            defaults.upstream_idle,
        ),
        ("tunnel_idle", timeouts.tunnel_idle, defaults.tunnel_idle),
        ("body_idle", timeouts.body_idle, defaults.body_idle),
    ];
    for (key, value, default) in all {
        if value.is_zero() {
            let path = KeyPath::top("timeouts").key(key);
            return Err(checker.error(path, Problem::ZeroDuration { suggested: default }));
        }
    }
    Ok(())
}

/// A lower bound on a size or count, and why it exists.
struct Minimum {
    table: &'static str,
    key: &'static str,
    value: usize,
    minimum: usize,
    is_size: bool,
    why: &'static str,
}

fn check_sizes(config: &Config, checker: &Checker<'_>) -> Result<(), ConfigError> {
    let limits = &config.limits;
    let size = |table, key, value, minimum, why| Minimum {
        table,
        key,
        value,
        minimum,
        is_size: true,
        why,
    };
    let count = |table, key, value, minimum, why| Minimum {
        table,
        key,
        value,
        minimum,
        is_size: false,
        why,
    };
    let mut minimums = vec![
        size(
            "limits",
            "max_request_line",
            limits.max_request_line,
            16,
            "\"GET / HTTP/1.1\" and its CRLF already take 16 bytes",
        ),
        size(
            "limits",
            "max_header_bytes",
            limits.max_header_bytes,
            1024,
            "real clients send several hundred bytes of headers",
        ),
        count(
            "limits",
            "max_headers",
            limits.max_headers,
            1,
            "HTTP/1.1 requests carry at least a Host field",
        ),
        count(
            "limits",
            "max_connections",
            limits.max_connections,
            1,
            "with 0 no client could ever be served",
        ),
        size(
            "transfer",
            "copy_buffer",
            config.transfer.copy_buffer,
            1024,
            "smaller buffers cost a system call per few bytes",
        ),
        size(
            "transfer",
            "pipe_size",
            config.transfer.pipe_size,
            4096,
            "a pipe holds at least one page",
        ),
        count(
            "transfer",
            "pipe_pool",
            config.transfer.pipe_pool,
            1,
            "with 0 pipes every splice would fall back to copy; use engine = \"copy\" instead",
        ),
    ];
    minimums.push(size(
        "cache",
        "memory",
        config.cache.memory,
        1024 * 1024,
        "a smaller cache holds next to nothing; set cache.enabled = false to turn it off",
    ));
    minimums.push(size(
        "cache",
        "disk_size",
        config.cache.disk_size,
        1024 * 1024,
        "a smaller disk tier holds next to nothing; remove disk_dir to keep the cache in memory",
    ));
    minimums.push(size(
        "cache",
        "max_object",
        config.cache.max_object,
        1,
        "with 0 nothing could be cached; set cache.enabled = false to turn the cache off",
    ));
    if let Some(bytes) = config.cache.memory_max_object {
        minimums.push(size(
            "cache",
            "memory_max_object",
            bytes,
            1,
            "with 0 memory would keep nothing; remove the key to keep objects up to max_object",
        ));
    }
    let socket_why = "the kernel would silently raise it to its own minimum; remove the key \
                      to keep the kernel default";
    if let Some(bytes) = config.socket.send_buffer {
        minimums.push(size("socket", "send_buffer", bytes, 1024, socket_why));
    }
    if let Some(bytes) = config.socket.recv_buffer {
        minimums.push(size("socket", "recv_buffer", bytes, 1024, socket_why));
    }
    for rule in minimums {
        if rule.value < rule.minimum {
            let show = |n: usize| {
                if rule.is_size {
                    Amount::Bytes(n)
                } else {
                    Amount::Count(n)
                }
            };
            let problem = Problem::TooSmall {
                value: show(rule.value),
                minimum: show(rule.minimum),
                why: rule.why,
            };
            return Err(checker.error(KeyPath::top(rule.table).key(rule.key), problem));
        }
    }
    Ok(())
}

fn check_cache(config: &Config, checker: &Checker<'_>) -> Result<(), ConfigError> {
    let cache = &config.cache;
    let path = KeyPath::top("cache");
    if cache.max_object > cache.memory {
        let problem = Problem::CacheObjectOverBudget {
            max_object: Amount::Bytes(cache.max_object),
            memory: Amount::Bytes(cache.memory),
        };
        return Err(checker.error(path.key("max_object"), problem));
    }
    if let Some(memory_max_object) = cache.memory_max_object {
        if memory_max_object > cache.max_object {
            let problem = Problem::MemoryObjectOverMaxObject {
                memory_max_object: Amount::Bytes(memory_max_object),
                max_object: Amount::Bytes(cache.max_object),
            };
            return Err(checker.error(path.key("memory_max_object"), problem));
        }
    }
    if let Some(dir) = &cache.disk_dir {
        if !dir.is_absolute() {
            let problem = Problem::RelativeCacheDir(dir.clone());
            return Err(checker.error(path.key("disk_dir"), problem));
        }
    }
    Ok(())
}

/// `tchar` of RFC 9110 §5.6.2: the characters of a token, such as a Via pseudonym.
fn is_token_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&byte)
}

/// Things that run but are probably mistakes; see [`Config::warnings`].
pub(crate) fn warnings(config: &Config) -> Vec<String> {
    let mut warnings = Vec::new();
    if let Ok(cores) = std::thread::available_parallelism() {
        if config.workers > cores.get() {
            warnings.push(format!(
                "workers: {} workers on {} CPUs; workers contend for cores (remove the key to run \
                 one per CPU)",
                config.workers, cores
            ));
        }
    }
    let allow = &config.access.allow;
    let allows_anyone = allow.iter().any(|net| net.prefix_len() == 0);
    let allows_only_loopback = allow.iter().all(|net| net.network().is_loopback());
    for (index, listener) in config.listeners.iter().enumerate() {
        let ip = listener.address.ip();
        if ip.is_loopback() {
            continue;
        }
        if listener.mode == ListenerMode::Forward && allows_anyone {
            warnings.push(format!(
                "listener[{index}]: forward listener on {} and access.allow admits every address: \
                 an open proxy anyone can relay through; list your client networks in \
                 access.allow",
                listener.address
            ));
        }
        if allows_only_loopback {
            warnings.push(format!(
                "listener[{index}]: listening on {} but access.allow admits only loopback \
                 clients, so remote clients will be refused; add their networks to access.allow",
                listener.address
            ));
        }
    }
    if config.limits.max_request_line > config.limits.max_header_bytes {
        warnings.push(format!(
            "limits.max_request_line: {} exceeds limits.max_header_bytes ({}), which also counts \
             the request line, so the smaller limit applies",
            format_size(config.limits.max_request_line),
            format_size(config.limits.max_header_bytes)
        ));
    }
    let cache = &config.cache;
    if cache.enabled && config.workers > 0 {
        let share = cache.memory / config.workers;
        if cache.memory_max_object.is_some()
            && cache.disk_dir.is_none()
            && cache.memory_object_cap() < cache.max_object
        {
            warnings.push(format!(
                "cache.memory_max_object: {} is below cache.max_object ({}) but there is no \
                 disk tier (cache.disk_dir) for the objects in between, so they are never kept",
                format_size(cache.memory_object_cap()),
                format_size(cache.max_object)
            ));
        }
        if cache.max_object > share {
            warnings.push(format!(
                "cache.max_object: {} exceeds each worker's share of cache.memory ({} / {} \
                 workers = {}), so objects above that share are never kept",
                format_size(cache.max_object),
                format_size(cache.memory),
                config.workers,
                format_size(share)
            ));
        }
    }
    warnings
}
