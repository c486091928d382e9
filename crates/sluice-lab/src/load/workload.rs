//! What to request: the closed loop's request mix and the open loop's PolyMix-4 content.

use std::fmt;
use std::str::FromStr;

use rand::Rng;

use crate::dist::{SizeDist, SpecError};
use crate::ssl::Handshake;

/// Max-age given to cacheable objects: long enough to outlive any run.
const CACHEABLE_MAX_AGE: u64 = 86_400;

/// One request, decided before it is sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlannedRequest {
    /// Origin-form target: path and query.
    pub target: String,
    /// Body size the origin will send.
    pub size: u64,
    /// Plain GET, or CONNECT with an SSL handshake before the GET.
    pub kind: RequestKind,
}

/// The closed loop's request types (WWW 2002, section 3.1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RequestKind {
    /// GET for a cacheable object.
    Cacheable,
    /// GET for a non-cacheable object.
    Uncacheable,
    /// CONNECT, emulated SSL handshake, then GET inside the tunnel.
    Ssl(Handshake),
}

/// Relative weights of the closed loop's request types:
/// `cacheable=1,uncacheable=3,ssl=1` (missing types weigh 0).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Mix {
    /// Weight of cacheable GETs.
    pub cacheable: f64,
    /// Weight of non-cacheable GETs.
    pub uncacheable: f64,
    /// Weight of SSL tunnels.
    pub ssl: f64,
}

/// Share of SSL handshakes that are abbreviated (the paper's 60%, after its reference 16).
pub const ABBREVIATED_SHARE: f64 = 0.6;

impl Mix {
    /// Draws a request type.
    pub fn draw<R: Rng + ?Sized>(&self, rng: &mut R) -> RequestKind {
        let total = self.cacheable + self.uncacheable + self.ssl;
        let x = rng.random::<f64>() * total;
        if x < self.cacheable {
            RequestKind::Cacheable
        } else if x < self.cacheable + self.uncacheable || self.ssl == 0.0 {
            RequestKind::Uncacheable
        } else if rng.random::<f64>() < ABBREVIATED_SHARE {
            RequestKind::Ssl(Handshake::Abbreviated)
        } else {
            RequestKind::Ssl(Handshake::Full)
        }
    }

    /// Whether any request is an SSL tunnel.
    pub fn has_ssl(&self) -> bool {
        self.ssl > 0.0
    }
}

impl FromStr for Mix {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Mix, SpecError> {
        let mut mix = Mix {
            cacheable: 0.0,
            uncacheable: 0.0,
            ssl: 0.0,
        };
        let error = |msg: &str| Err(SpecError::new(format!("{text:?}: {msg}")));
        for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let Some((key, value)) = pair.split_once('=') else {
                return error("expected type=weight pairs, such as uncacheable=3,ssl=1");
            };
            let Ok(weight) = value.trim().parse::<f64>() else {
                return error("weights are numbers");
            };
            if !(weight >= 0.0 && weight.is_finite()) {
                return error("weights are zero or more");
            }
            match key.trim() {
                "cacheable" => mix.cacheable = weight,
                "uncacheable" => mix.uncacheable = weight,
                "ssl" => mix.ssl = weight,
                other => {
                    return error(&format!(
                        "unknown request type {other:?}, expected cacheable, uncacheable or ssl"
                    ))
                }
            }
        }
        if mix.cacheable + mix.uncacheable + mix.ssl <= 0.0 {
            return error("at least one weight must be above zero");
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "cacheable={},uncacheable={},ssl={}",
            self.cacheable, self.uncacheable, self.ssl
        )
    }
}

/// A closed-loop request: every cacheable object of a size has one URL (so a cache serves
/// hits after the first), non-cacheable ones are marked `no-store`.
pub fn plan_closed<R: Rng + ?Sized>(mix: &Mix, sizes: &SizeDist, rng: &mut R) -> PlannedRequest {
    let kind = mix.draw(rng);
    let size = sizes.sample(rng);
    let target = match kind {
        RequestKind::Cacheable => format!("/size/{size}?cache={CACHEABLE_MAX_AGE}"),
        RequestKind::Uncacheable => format!("/size/{size}?cache=no-store"),
        RequestKind::Ssl(_) => format!("/size/{size}/ssl?cache=no-store"),
    };
    PlannedRequest { target, size, kind }
}

/// One PolyMix-4 content type.
#[derive(Debug, Clone, Copy)]
pub struct ContentType {
    /// Name used in URLs.
    pub name: &'static str,
    /// Share of new objects of this type.
    pub share: f64,
    /// Size distribution.
    pub size: SizeDist,
    /// Share of objects of this type that are cacheable.
    pub cacheable: f64,
}

/// PolyMix-4's content mix (Polygraph's `polymix-4` workload; sizes in KiB).
pub const POLYMIX4: [ContentType; 4] = [
    ContentType {
        name: "image",
        share: 0.65,
        size: SizeDist::Exponential { mean: 4.5 * 1024.0 },
        cacheable: 0.80,
    },
    ContentType {
        name: "html",
        share: 0.15,
        size: SizeDist::Exponential { mean: 8.5 * 1024.0 },
        cacheable: 0.90,
    },
    ContentType {
        name: "download",
        share: 0.005,
        size: SizeDist::LogNormal {
            mean: 300.0 * 1024.0,
            sd: 300.0 * 1024.0,
        },
        cacheable: 0.95,
    },
    ContentType {
        name: "other",
        share: 0.195,
        size: SizeDist::LogNormal {
            mean: 25.0 * 1024.0,
            sd: 10.0 * 1024.0,
        },
        cacheable: 0.72,
    },
];

/// Cacheable URLs already requested, which later requests revisit to produce hits.
#[derive(Debug)]
pub struct UrlHistory {
    urls: Vec<(String, u64)>,
    capacity: usize,
    next_id: u64,
    id_prefix: String,
}

impl UrlHistory {
    /// An empty history keeping at most `capacity` URLs; `id_prefix` keeps ids unique across
    /// threads.
    pub fn new(capacity: usize, id_prefix: String) -> UrlHistory {
        UrlHistory {
            urls: Vec::new(),
            capacity: capacity.max(1),
            next_id: 0,
            id_prefix,
        }
    }

    /// Plans an open-loop request: with probability `hit_ratio` a revisit of an earlier
    /// cacheable URL (a hit for an ideal cache), otherwise a new object drawn from
    /// [`POLYMIX4`]. Returns the request and whether it is a revisit.
    pub fn plan<R: Rng + ?Sized>(&mut self, hit_ratio: f64, rng: &mut R) -> (PlannedRequest, bool) {
        if !self.urls.is_empty() && rng.random::<f64>() < hit_ratio {
            let (target, size) = self.urls[rng.random_range(0..self.urls.len())].clone();
            return (
                PlannedRequest {
                    target,
                    size,
                    kind: RequestKind::Cacheable,
                },
                true,
            );
        }
        let x = rng.random::<f64>();
        let mut acc = 0.0;
        let content = POLYMIX4
            .iter()
            .find(|c| {
                acc += c.share;
                x < acc
            })
            .unwrap_or(&POLYMIX4[POLYMIX4.len() - 1]);
        let size = content.size.sample(rng);
        let cacheable = rng.random::<f64>() < content.cacheable;
        self.next_id += 1;
        let (id, name) = (self.next_id, content.name);
        let prefix = &self.id_prefix;
        if cacheable {
            let target = format!("/size/{size}/{name}/{prefix}{id}?cache={CACHEABLE_MAX_AGE}");
            if self.urls.len() < self.capacity {
                self.urls.push((target.clone(), size));
            } else {
                let slot = rng.random_range(0..self.urls.len());
                self.urls[slot] = (target.clone(), size);
            }
            (
                PlannedRequest {
                    target,
                    size,
                    kind: RequestKind::Cacheable,
                },
                false,
            )
        } else {
            let target = format!("/size/{size}/{name}/{prefix}{id}?cache=no-store");
            (
                PlannedRequest {
                    target,
                    size,
                    kind: RequestKind::Uncacheable,
                },
                false,
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    #[test]
    fn mix_parses_and_refuses() {
        let mix: Mix = "uncacheable=3, ssl=1".parse().unwrap();
        assert_eq!(
            mix,
            Mix {
                cacheable: 0.0,
                uncacheable: 3.0,
                ssl: 1.0
            }
        );
        assert!("ssl=0".parse::<Mix>().is_err());
        assert!("post=1".parse::<Mix>().is_err());
        assert!("ssl=-1".parse::<Mix>().is_err());
    }

    #[test]
    fn mix_draws_by_weight_with_60_percent_abbreviated() {
        let mix: Mix = "cacheable=1,uncacheable=2,ssl=1".parse().unwrap();
        let mut rng = StdRng::seed_from_u64(7);
        let n = 100_000;
        let (mut cacheable, mut ssl, mut abbreviated) = (0, 0, 0);
        for _ in 0..n {
            match mix.draw(&mut rng) {
                RequestKind::Cacheable => cacheable += 1,
                RequestKind::Uncacheable => {}
                RequestKind::Ssl(h) => {
                    ssl += 1;
                    abbreviated += usize::from(h == Handshake::Abbreviated);
                }
            }
        }
        assert!((cacheable as f64 / n as f64 - 0.25).abs() < 0.01);
        assert!((ssl as f64 / n as f64 - 0.25).abs() < 0.01);
        assert!((abbreviated as f64 / ssl as f64 - 0.6).abs() < 0.015);
    }

    #[test]
    fn polymix_shares_sum_to_one() {
        let total: f64 = POLYMIX4.iter().map(|c| c.share).sum();
        assert!((total - 1.0).abs() < 1e-12);
    }

    #[test]
    fn open_loop_meets_its_hit_ratio_and_content_mix() {
        let mut history = UrlHistory::new(10_000, "t0-".into());
        let mut rng = StdRng::seed_from_u64(8);
        let n = 100_000;
        let (mut revisits, mut images, mut cacheable_new, mut new, mut bytes) = (0, 0, 0, 0, 0u64);
        for _ in 0..n {
            let (request, revisit) = history.plan(0.58, &mut rng);
            if revisit {
                revisits += 1;
                continue;
            }
            new += 1;
            bytes += request.size;
            images += usize::from(request.target.contains("/image/"));
            cacheable_new += usize::from(request.kind == RequestKind::Cacheable);
        }
        assert!((revisits as f64 / n as f64 - 0.58).abs() < 0.01);
        assert!((images as f64 / new as f64 - 0.65).abs() < 0.01);
        // Cacheable share of new objects: 0.65*0.8 + 0.15*0.9 + 0.005*0.95 + 0.195*0.72.
        let expected = 0.65 * 0.8 + 0.15 * 0.9 + 0.005 * 0.95 + 0.195 * 0.72;
        assert!((cacheable_new as f64 / new as f64 - expected).abs() < 0.01);
        // Mean size of new objects: the mix's weighted mean, 10.6 KiB.
        let mean: f64 = POLYMIX4.iter().map(|c| c.share * c.size.mean()).sum();
        assert!((bytes as f64 / new as f64 / mean - 1.0).abs() < 0.05);
    }
}
