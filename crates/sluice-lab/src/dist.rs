//! Distributions the workloads draw from, and their command-line syntax.
//!
//! Three kinds of quantity are drawn: body sizes ([`SizeDist`]), delays ([`DelayDist`]) and
//! counts such as requests per connection ([`CountDist`]). Each parses from a short spec:
//!
//! | spec                         | meaning                                                  |
//! |------------------------------|----------------------------------------------------------|
//! | `64KiB`, `1000`, `4.5KB`     | fixed size (`KiB`/`MiB`/`GiB` are 1024-based, `KB`/`MB` 1000) |
//! | `exp:4.5KiB`                 | exponential with that mean                                |
//! | `lognormal:300KiB,300KiB`    | lognormal with that mean and standard deviation            |
//! | `uniform:1KiB,64KiB`         | uniform between the two, inclusive                        |
//! | `2.5s`, `0ms`                | fixed delay                                               |
//! | `normal:2.5s,1s`             | normal delay with that mean and deviation, clamped at 0    |
//! | `none`, `16`                 | no cap; fixed count                                       |
//! | `zipf:64`                    | Zipf over 1..=64 with exponent 1 (Polygraph's `zipf(64)`) |

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use rand::Rng;
use rand_distr::{Distribution, Exp, LogNormal, Normal, Zipf};

/// A spec that does not parse; the message says which part and what was expected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpecError(String);

impl fmt::Display for SpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for SpecError {}

impl SpecError {
    /// An error with this message.
    pub fn new(msg: impl Into<String>) -> SpecError {
        SpecError(msg.into())
    }
}

fn spec_error(msg: impl Into<String>) -> SpecError {
    SpecError::new(msg)
}

/// Parses a byte count with an optional unit: `1000`, `4.5KB`, `64KiB`, `1MiB`.
pub fn parse_bytes(text: &str) -> Result<u64, SpecError> {
    let text = text.trim();
    let split = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    let (number, unit) = text.split_at(split);
    let value: f64 = number.parse().map_err(|_| {
        spec_error(format!(
            "{text:?}: expected a number of bytes such as 64KiB"
        ))
    })?;
    let scale = match unit.trim() {
        "" | "B" => 1.0,
        "KB" | "kB" => 1e3,
        "MB" => 1e6,
        "GB" => 1e9,
        "K" | "KiB" => 1024.0,
        "M" | "MiB" => 1024.0 * 1024.0,
        "G" | "GiB" => 1024.0 * 1024.0 * 1024.0,
        other => {
            return Err(spec_error(format!(
                "{text:?}: unknown unit {other:?}, expected B, KiB, MiB, GiB, KB, MB or GB"
            )))
        }
    };
    let bytes = (value * scale).round();
    if !(0.0..=(u64::MAX as f64)).contains(&bytes) {
        return Err(spec_error(format!("{text:?}: out of range")));
    }
    Ok(bytes as u64)
}

/// Formats a byte count with a binary unit when it divides evenly: `64KiB`, `1MiB`, `1000B`.
pub fn format_bytes(bytes: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (scale, unit) in UNITS {
        if bytes >= scale && bytes % scale == 0 {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}B")
}

fn split_spec(text: &str) -> (&str, Option<&str>) {
    match text.split_once(':') {
        Some((kind, args)) => (kind.trim(), Some(args.trim())),
        None => (text.trim(), None),
    }
}

fn two_args(text: &str, args: &str) -> Result<(String, String), SpecError> {
    let (a, b) = args.split_once(',').ok_or_else(|| {
        spec_error(format!(
            "{text:?}: expected two values separated by a comma"
        ))
    })?;
    Ok((a.trim().to_owned(), b.trim().to_owned()))
}

/// How body sizes are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum SizeDist {
    /// Always this many bytes.
    Fixed(u64),
    /// Exponential with this mean, in bytes.
    Exponential {
        /// Mean in bytes.
        mean: f64,
    },
    /// Lognormal with this mean and standard deviation, in bytes.
    LogNormal {
        /// Mean in bytes.
        mean: f64,
        /// Standard deviation in bytes.
        sd: f64,
    },
    /// Uniform over `low..=high` bytes.
    Uniform {
        /// Smallest size.
        low: u64,
        /// Largest size.
        high: u64,
    },
}

impl SizeDist {
    /// Draws one size in bytes.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> u64 {
        match *self {
            SizeDist::Fixed(n) => n,
            SizeDist::Exponential { mean } => {
                // Exp::new only fails for a negative rate, which parsing rules out.
                let exp = Exp::new(1.0 / mean).expect("mean is positive");
                exp.sample(rng).round() as u64
            }
            SizeDist::LogNormal { mean, sd } => {
                let dist = LogNormal::from_mean_cv(mean, sd / mean).expect("mean and sd positive");
                dist.sample(rng).round() as u64
            }
            SizeDist::Uniform { low, high } => rng.random_range(low..=high),
        }
    }

    /// The distribution's mean, in bytes.
    pub fn mean(&self) -> f64 {
        match *self {
            SizeDist::Fixed(n) => n as f64,
            SizeDist::Exponential { mean } | SizeDist::LogNormal { mean, .. } => mean,
            SizeDist::Uniform { low, high } => (low as f64 + high as f64) / 2.0,
        }
    }
}

impl FromStr for SizeDist {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<SizeDist, SpecError> {
        let positive = |v: u64, what: &str| {
            if v == 0 {
                Err(spec_error(format!("{text:?}: {what} must be above zero")))
            } else {
                Ok(v as f64)
            }
        };
        match split_spec(text) {
            (size, None) => Ok(SizeDist::Fixed(parse_bytes(size)?)),
            ("exp", Some(mean)) => Ok(SizeDist::Exponential {
                mean: positive(parse_bytes(mean)?, "mean")?,
            }),
            ("lognormal", Some(args)) => {
                let (mean, sd) = two_args(text, args)?;
                Ok(SizeDist::LogNormal {
                    mean: positive(parse_bytes(&mean)?, "mean")?,
                    sd: positive(parse_bytes(&sd)?, "standard deviation")?,
                })
            }
            ("uniform", Some(args)) => {
                let (low, high) = two_args(text, args)?;
                let (low, high) = (parse_bytes(&low)?, parse_bytes(&high)?);
                if low > high {
                    return Err(spec_error(format!("{text:?}: low bound above high bound")));
                }
                Ok(SizeDist::Uniform { low, high })
            }
            (kind, Some(_)) => Err(spec_error(format!(
                "{text:?}: unknown size distribution {kind:?}, expected exp, lognormal or uniform"
            ))),
        }
    }
}

impl fmt::Display for SizeDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            SizeDist::Fixed(n) => f.write_str(&format_bytes(n)),
            SizeDist::Exponential { mean } => write!(f, "exp:{}", format_bytes(mean as u64)),
            SizeDist::LogNormal { mean, sd } => write!(
                f,
                "lognormal:{},{}",
                format_bytes(mean as u64),
                format_bytes(sd as u64)
            ),
            SizeDist::Uniform { low, high } => {
                write!(f, "uniform:{},{}", format_bytes(low), format_bytes(high))
            }
        }
    }
}

/// How delays (think times) are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum DelayDist {
    /// Always this long.
    Fixed(Duration),
    /// Normal with this mean and deviation; negative draws become zero.
    Normal {
        /// Mean delay.
        mean: Duration,
        /// Standard deviation.
        sd: Duration,
    },
}

impl DelayDist {
    /// No delay.
    pub const ZERO: DelayDist = DelayDist::Fixed(Duration::ZERO);

    /// Draws one delay.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            DelayDist::Fixed(d) => d,
            DelayDist::Normal { mean, sd } => {
                let normal =
                    Normal::new(mean.as_secs_f64(), sd.as_secs_f64()).expect("sd is finite");
                Duration::from_secs_f64(normal.sample(rng).max(0.0))
            }
        }
    }

    /// Whether every draw is zero.
    pub fn is_zero(&self) -> bool {
        *self == DelayDist::ZERO
    }
}

fn parse_duration(text: &str, whole: &str) -> Result<Duration, SpecError> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        spec_error(format!(
            "{whole:?}: {e} (durations carry a unit: 2.5s, 80ms)"
        ))
    })
}

impl FromStr for DelayDist {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<DelayDist, SpecError> {
        match split_spec(text) {
            (delay, None) => Ok(DelayDist::Fixed(parse_duration(delay, text)?)),
            ("normal", Some(args)) => {
                let (mean, sd) = two_args(text, args)?;
                Ok(DelayDist::Normal {
                    mean: parse_duration(&mean, text)?,
                    sd: parse_duration(&sd, text)?,
                })
            }
            (kind, Some(_)) => Err(spec_error(format!(
                "{text:?}: unknown delay distribution {kind:?}, expected normal"
            ))),
        }
    }
}

impl fmt::Display for DelayDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            DelayDist::Fixed(d) => write!(f, "{}", humantime::format_duration(d)),
            DelayDist::Normal { mean, sd } => write!(
                f,
                "normal:{},{}",
                humantime::format_duration(mean),
                humantime::format_duration(sd)
            ),
        }
    }
}

/// How counts such as requests per connection are drawn.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum CountDist {
    /// No cap.
    Unlimited,
    /// Always this many (at least 1).
    Fixed(u64),
    /// Zipf over `1..=n`, exponent 1: most draws are small, a few are large.
    Zipf(u64),
}

impl CountDist {
    /// Draws one count; `None` means unlimited.
    pub fn sample<R: Rng + ?Sized>(&self, rng: &mut R) -> Option<u64> {
        match *self {
            CountDist::Unlimited => None,
            CountDist::Fixed(n) => Some(n),
            CountDist::Zipf(n) => {
                let zipf = Zipf::new(n as f64, 1.0).expect("n is at least 1");
                Some(zipf.sample(rng) as u64)
            }
        }
    }
}

impl FromStr for CountDist {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<CountDist, SpecError> {
        let count = |s: &str| match s.trim().parse::<u64>() {
            Ok(0) | Err(_) => Err(spec_error(format!(
                "{text:?}: expected a count of 1 or more"
            ))),
            Ok(n) => Ok(n),
        };
        match split_spec(text) {
            ("none" | "unlimited", None) => Ok(CountDist::Unlimited),
            (n, None) => Ok(CountDist::Fixed(count(n)?)),
            ("zipf", Some(n)) => Ok(CountDist::Zipf(count(n)?)),
            (kind, Some(_)) => Err(spec_error(format!(
                "{text:?}: unknown count distribution {kind:?}, expected zipf"
            ))),
        }
    }
}

impl fmt::Display for CountDist {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            CountDist::Unlimited => f.write_str("none"),
            CountDist::Fixed(n) => write!(f, "{n}"),
            CountDist::Zipf(n) => write!(f, "zipf:{n}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    const DRAWS: usize = 200_000;

    fn mean_sd(values: &[f64]) -> (f64, f64) {
        let n = values.len() as f64;
        let mean = values.iter().sum::<f64>() / n;
        let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
        (mean, var.sqrt())
    }

    fn within(actual: f64, expected: f64, tolerance: f64) -> bool {
        (actual - expected).abs() <= tolerance * expected
    }

    #[test]
    fn parses_sizes_with_units() {
        assert_eq!(parse_bytes("1000"), Ok(1000));
        assert_eq!(parse_bytes("64KiB"), Ok(65_536));
        assert_eq!(parse_bytes("4.5KB"), Ok(4_500));
        assert_eq!(parse_bytes("16MiB"), Ok(16 << 20));
        assert!(parse_bytes("12 parsecs").is_err());
        assert!(parse_bytes("").is_err());
    }

    #[test]
    fn size_specs_round_trip() {
        for spec in [
            "64KiB",
            "exp:4KiB",
            "lognormal:300KiB,300KiB",
            "uniform:1KiB,64KiB",
        ] {
            let dist: SizeDist = spec.parse().unwrap();
            assert_eq!(dist.to_string(), spec);
        }
        assert!("exp:0".parse::<SizeDist>().is_err());
        assert!("uniform:2KiB,1KiB".parse::<SizeDist>().is_err());
        assert!("pareto:1KiB".parse::<SizeDist>().is_err());
    }

    #[test]
    fn exponential_sizes_have_mean_and_sd_equal() {
        let mut rng = StdRng::seed_from_u64(1);
        let dist: SizeDist = "exp:4.5KiB".parse().unwrap();
        let draws: Vec<f64> = (0..DRAWS).map(|_| dist.sample(&mut rng) as f64).collect();
        let (mean, sd) = mean_sd(&draws);
        assert!(within(mean, 4608.0, 0.02), "mean {mean}");
        assert!(within(sd, 4608.0, 0.03), "sd {sd}");
        // Shape: P(X > mean) = 1/e for an exponential.
        let above = draws.iter().filter(|&&v| v > 4608.0).count() as f64 / DRAWS as f64;
        assert!((above - (-1.0f64).exp()).abs() < 0.01, "tail {above}");
    }

    #[test]
    fn lognormal_sizes_match_mean_and_sd() {
        let mut rng = StdRng::seed_from_u64(2);
        let dist: SizeDist = "lognormal:25KiB,10KiB".parse().unwrap();
        let draws: Vec<f64> = (0..DRAWS).map(|_| dist.sample(&mut rng) as f64).collect();
        let (mean, sd) = mean_sd(&draws);
        assert!(within(mean, 25_600.0, 0.02), "mean {mean}");
        assert!(within(sd, 10_240.0, 0.04), "sd {sd}");
        // Shape: right-skewed, so the median sits below the mean.
        let mut sorted = draws.clone();
        sorted.sort_by(f64::total_cmp);
        assert!(sorted[DRAWS / 2] < mean);
    }

    #[test]
    fn normal_delays_match_polymix_server_think_time() {
        let mut rng = StdRng::seed_from_u64(3);
        let dist: DelayDist = "normal:2.5s,1s".parse().unwrap();
        let draws: Vec<f64> = (0..DRAWS)
            .map(|_| dist.sample(&mut rng).as_secs_f64())
            .collect();
        let (mean, sd) = mean_sd(&draws);
        // Clamping at zero cuts 0.6% of draws (2.5 sd below the mean): a tiny upward bias.
        assert!(within(mean, 2.5, 0.01), "mean {mean}");
        assert!(within(sd, 1.0, 0.03), "sd {sd}");
        assert!(draws.iter().all(|&d| d >= 0.0));
    }

    #[test]
    fn zipf_counts_stay_in_range_and_favour_one() {
        let mut rng = StdRng::seed_from_u64(4);
        let dist: CountDist = "zipf:64".parse().unwrap();
        let draws: Vec<u64> = (0..DRAWS).map(|_| dist.sample(&mut rng).unwrap()).collect();
        assert!(draws.iter().all(|&d| (1..=64).contains(&d)));
        // P(k) = (1/k) / H(64), H(64) = 4.7439: P(1) = 0.2108, P(2) = 0.1054, mean = 64 / H.
        let share = |k| draws.iter().filter(|&&d| d == k).count() as f64 / DRAWS as f64;
        assert!((share(1) - 0.2108).abs() < 0.005, "P(1) {}", share(1));
        assert!((share(2) - 0.1054).abs() < 0.005, "P(2) {}", share(2));
        let mean = draws.iter().sum::<u64>() as f64 / DRAWS as f64;
        assert!(within(mean, 64.0 / 4.7439, 0.02), "mean {mean}");
    }

    #[test]
    fn count_specs_parse() {
        assert_eq!("none".parse(), Ok(CountDist::Unlimited));
        assert_eq!("16".parse(), Ok(CountDist::Fixed(16)));
        assert_eq!("zipf:16".parse(), Ok(CountDist::Zipf(16)));
        assert!("0".parse::<CountDist>().is_err());
    }
}
