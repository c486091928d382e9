//! Profiles: what each wire of a test bed does to the frames it carries, as a small TOML file.
//!
//! A profile names two links, `client_proxy` and `proxy_server`, each with an `up` direction
//! (toward the server) and a `down` direction (toward the client). The built-in profiles are
//! the files in `crates/sluice-wan/profiles/`; any other name is read as a path. Unknown keys
//! are refused, as everywhere in Sluice.

use std::path::Path;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::error::WanError;
use crate::loss::LossSpec;
use crate::shaper::QueueLimit;
use crate::units::{ByteCount, Rate};

/// The built-in profiles, by name, with their file text.
pub const BUILT_IN: &[(&str, &str)] = &[
    ("lan", include_str!("../profiles/lan.toml")),
    ("wan-80ms", include_str!("../profiles/wan-80ms.toml")),
    (
        "www2002-broadband",
        include_str!("../profiles/www2002-broadband.toml"),
    ),
    (
        "www2002-modem-1",
        include_str!("../profiles/www2002-modem-1.toml"),
    ),
    (
        "www2002-modem-2",
        include_str!("../profiles/www2002-modem-2.toml"),
    ),
];

/// A named set of impairments for every wire of a test bed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    /// One line for `net status`.
    pub description: String,
    /// Whether the client host uses TCP SACK (the WWW 2002 paper turned it off, §4.5).
    #[serde(default = "enabled")]
    pub client_sack: bool,
    /// The wire between the client and proxy hosts.
    #[serde(default)]
    pub client_proxy: LinkProfile,
    /// The wire between the proxy and server hosts.
    #[serde(default)]
    pub proxy_server: LinkProfile,
    /// The wire of the no-proxy layout (client straight to server). Default: the two links in
    /// series as the paper's §4.5 builds it (see [`LinkProfile::in_series`]).
    #[serde(default)]
    pub direct: Option<LinkProfile>,
}

fn enabled() -> bool {
    true
}

/// The two directions of one wire.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct LinkProfile {
    /// Toward the server: client -> proxy, proxy -> server.
    #[serde(default)]
    pub up: Impairment,
    /// Toward the client: proxy -> client, server -> proxy.
    #[serde(default)]
    pub down: Impairment,
}

/// What one direction of a wire does, in order: loss, then rate and queue, then delay.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Impairment {
    /// One-way propagation delay (`40ms`).
    #[serde(default, with = "humantime_serde")]
    pub delay: Duration,
    /// Uniform jitter around `delay` (`2ms` means ±2 ms); never reorders.
    #[serde(default, with = "humantime_serde")]
    pub jitter: Duration,
    /// Which packets are dropped before the queue.
    #[serde(default)]
    pub loss: LossSpec,
    /// Rate limit (`56kbit`); none means frames pass at once.
    #[serde(default)]
    pub rate: Option<Rate>,
    /// Whether `rate` and `queue` apply to each TCP 4-tuple separately (one modem per
    /// connection) rather than to the whole direction. Frames that are not TCP over IPv4 (UDP,
    /// ICMP, ARP) then share one more bucket of the same rate and queue: limited, but not per
    /// client.
    #[serde(default)]
    pub per_flow: bool,
    /// Bytes that may leave at once after the link idled (token bucket depth). Default `0B`:
    /// each frame waits for its own transmission time, as on a serial line.
    #[serde(default = "no_burst")]
    pub burst: ByteCount,
    /// The tail-drop queue in front of the rate limit.
    #[serde(default = "default_queue")]
    pub queue: QueueLimit,
}

fn no_burst() -> ByteCount {
    ByteCount(0)
}

/// 1000 packets (Linux's default txqueuelen) or 1 MiB, whichever fills first.
fn default_queue() -> QueueLimit {
    QueueLimit {
        packets: 1000,
        bytes: ByteCount(1 << 20),
    }
}

impl Default for Impairment {
    fn default() -> Impairment {
        Impairment {
            delay: Duration::ZERO,
            jitter: Duration::ZERO,
            loss: LossSpec::None,
            rate: None,
            per_flow: false,
            burst: no_burst(),
            queue: default_queue(),
        }
    }
}

impl Impairment {
    /// Two hops in series as one: delays add, losses combine as [`LossSpec::in_series`] says,
    /// the slower rate (with its per-flow setting and queue) wins.
    pub fn in_series(&self, other: &Impairment) -> Impairment {
        let limited = match (self.rate, other.rate) {
            (Some(a), Some(b)) if b < a => other,
            (Some(_), _) => self,
            (None, Some(_)) => other,
            (None, None) => self,
        };
        Impairment {
            delay: self.delay + other.delay,
            jitter: self.jitter + other.jitter,
            loss: self.loss.in_series(&other.loss),
            rate: limited.rate,
            per_flow: limited.per_flow,
            burst: limited.burst,
            queue: limited.queue,
        }
    }
}

impl LinkProfile {
    /// This link followed by `next` (toward the server), as one link.
    pub fn in_series(&self, next: &LinkProfile) -> LinkProfile {
        LinkProfile {
            up: self.up.in_series(&next.up),
            down: self.down.in_series(&next.down),
        }
    }
}

impl Profile {
    /// A built-in profile by name, or else the TOML file at that path.
    pub fn load(name_or_path: &str) -> Result<Profile, WanError> {
        if let Some((_, text)) = BUILT_IN.iter().find(|(name, _)| *name == name_or_path) {
            return Profile::parse(text, name_or_path);
        }
        let path = Path::new(name_or_path);
        if !path.exists() {
            return Err(WanError::UnknownProfile {
                name: name_or_path.to_owned(),
                known: BUILT_IN
                    .iter()
                    .map(|(n, _)| *n)
                    .collect::<Vec<_>>()
                    .join(", "),
            });
        }
        let text = std::fs::read_to_string(path).map_err(|source| {
            WanError::io(format!("cannot read profile {}", path.display()), source)
        })?;
        Profile::parse(&text, name_or_path)
    }

    /// Parses and checks a profile's text; `origin` names it in errors.
    pub fn parse(text: &str, origin: &str) -> Result<Profile, WanError> {
        let profile: Profile = toml::from_str(text).map_err(|source| WanError::ProfileSyntax {
            origin: origin.to_owned(),
            source: Box::new(source),
        })?;
        for (link, direction, imp) in profile.directions() {
            if imp.per_flow && imp.rate.is_none() {
                return Err(WanError::ProfileInvalid {
                    origin: origin.to_owned(),
                    key: format!("{link}.{direction}.per_flow"),
                    reason: "per_flow needs a rate to apply per flow".to_owned(),
                });
            }
            if imp.queue.packets == 0 || imp.queue.bytes.0 < 1514 {
                return Err(WanError::ProfileInvalid {
                    origin: origin.to_owned(),
                    key: format!("{link}.{direction}.queue"),
                    reason: "a queue must hold at least one packet and one full frame (1514B)"
                        .to_owned(),
                });
            }
        }
        Ok(profile)
    }

    /// The direct (no-proxy) link: the profile's `direct` table, or the two links in series.
    pub fn direct_link(&self) -> LinkProfile {
        self.direct
            .clone()
            .unwrap_or_else(|| self.client_proxy.in_series(&self.proxy_server))
    }

    fn directions(&self) -> Vec<(&'static str, &'static str, &Impairment)> {
        let mut all = vec![
            ("client_proxy", "up", &self.client_proxy.up),
            ("client_proxy", "down", &self.client_proxy.down),
            ("proxy_server", "up", &self.proxy_server.up),
            ("proxy_server", "down", &self.proxy_server.down),
        ];
        if let Some(direct) = &self.direct {
            all.push(("direct", "up", &direct.up));
            all.push(("direct", "down", &direct.down));
        }
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_built_in_profile_parses() {
        for (name, _) in BUILT_IN {
            let profile = Profile::load(name).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert!(!profile.description.is_empty());
        }
    }

    #[test]
    fn modem_profile_matches_the_paper() {
        let p = Profile::load("www2002-modem-1").unwrap();
        assert_eq!(p.client_proxy.down.rate, Some("56kbit".parse().unwrap()));
        assert_eq!(p.client_proxy.up.rate, Some("28kbit".parse().unwrap()));
        assert!(p.client_proxy.down.per_flow);
        assert_eq!(p.proxy_server.down.loss, LossSpec::www2002(0.01));
        assert!(!p.client_sack);
        // No proxy (§4.5): latency and initial loss add, conditional loss and modem stay.
        let direct = p.direct_link();
        assert_eq!(direct.down.delay, Duration::from_millis(140));
        assert_eq!(direct.down.loss, LossSpec::www2002(0.01));
        assert_eq!(direct.down.rate, Some("56kbit".parse().unwrap()));
        assert!(direct.down.per_flow);
    }

    #[test]
    fn unknown_keys_and_names_are_refused() {
        let err = Profile::parse(
            "description = \"x\"\n[client_proxy.up]\ndelya = \"1ms\"\n",
            "t",
        );
        assert!(err.unwrap_err().to_string().contains("delya"));
        let err = Profile::load("no-such-profile").unwrap_err().to_string();
        assert!(err.contains("wan-80ms"), "{err}");
    }

    #[test]
    fn per_flow_needs_a_rate() {
        let err = Profile::parse(
            "description = \"x\"\n[client_proxy.up]\nper_flow = true\n",
            "t",
        );
        assert!(err.unwrap_err().to_string().contains("per_flow"));
    }
}
