//! Units in profile values: rates (`56kbit`, `10Mbit`) and sizes (`64KiB`, `1500B`), in the
//! spirit of CONFIG.md: the unit is part of the value, never implied.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A link rate in bits per second. Decimal prefixes, as link rates are quoted: `56kbit` is
/// 56,000 bit/s (a V.90 modem), `1.5Mbit` is 1,500,000.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct Rate {
    bits_per_second: u64,
}

impl Rate {
    /// A rate of `bits_per_second`, which must not be 0 (0 would mean "never sends").
    pub fn from_bits_per_second(bits_per_second: u64) -> Option<Rate> {
        (bits_per_second > 0).then_some(Rate { bits_per_second })
    }

    /// The rate in bit/s.
    pub fn bits_per_second(self) -> u64 {
        self.bits_per_second
    }

    /// Nanoseconds to serialise `bytes` at this rate, rounded up.
    pub fn transmit_ns(self, bytes: u64) -> u64 {
        let bits = u128::from(bytes) * 8 * 1_000_000_000;
        let ns = bits.div_ceil(u128::from(self.bits_per_second));
        u64::try_from(ns).unwrap_or(u64::MAX)
    }
}

impl FromStr for Rate {
    type Err = String;

    fn from_str(text: &str) -> Result<Rate, String> {
        let (number, unit) = split_number(text);
        let multiplier: f64 = match unit.trim() {
            "bit" | "bps" => 1.0,
            "kbit" | "kbps" => 1e3,
            "Mbit" | "Mbps" => 1e6,
            "Gbit" | "Gbps" => 1e9,
            other => {
                return Err(format!(
                    "rate {text:?}: unknown unit {other:?}, expected bit, kbit, Mbit or Gbit \
                     (such as \"56kbit\")"
                ))
            }
        };
        let value: f64 = number
            .parse()
            .map_err(|_| format!("rate {text:?}: expected a number then a unit, such as 56kbit"))?;
        let bits = (value * multiplier).round();
        if !(1.0..1e15).contains(&bits) {
            return Err(format!(
                "rate {text:?}: must be at least 1bit and below 1Pbit"
            ));
        }
        Ok(Rate {
            bits_per_second: bits as u64,
        })
    }
}

impl TryFrom<String> for Rate {
    type Error = String;

    fn try_from(text: String) -> Result<Rate, String> {
        text.parse()
    }
}

impl From<Rate> for String {
    fn from(rate: Rate) -> String {
        rate.to_string()
    }
}

impl fmt::Display for Rate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.bits_per_second;
        if b % 1_000_000_000 == 0 {
            write!(f, "{}Gbit", b / 1_000_000_000)
        } else if b % 1_000_000 == 0 {
            write!(f, "{}Mbit", b / 1_000_000)
        } else if b % 1_000 == 0 {
            write!(f, "{}kbit", b / 1_000)
        } else {
            write!(f, "{b}bit")
        }
    }
}

/// A number of bytes, written with a unit: `1500B`, `64KiB`, `1MiB` (binary prefixes, as
/// buffer sizes are quoted).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ByteCount(pub u64);

impl FromStr for ByteCount {
    type Err = String;

    fn from_str(text: &str) -> Result<ByteCount, String> {
        let (number, unit) = split_number(text);
        let multiplier: u64 = match unit.trim() {
            "B" => 1,
            "KiB" => 1 << 10,
            "MiB" => 1 << 20,
            "GiB" => 1 << 30,
            other => {
                return Err(format!(
                    "size {text:?}: unknown unit {other:?}, expected B, KiB, MiB or GiB"
                ))
            }
        };
        let value: u64 = number
            .parse()
            .map_err(|_| format!("size {text:?}: expected a whole number then a unit"))?;
        value
            .checked_mul(multiplier)
            .map(ByteCount)
            .ok_or_else(|| format!("size {text:?}: too large"))
    }
}

impl TryFrom<String> for ByteCount {
    type Error = String;

    fn try_from(text: String) -> Result<ByteCount, String> {
        text.parse()
    }
}

impl From<ByteCount> for String {
    fn from(size: ByteCount) -> String {
        size.to_string()
    }
}

impl fmt::Display for ByteCount {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let b = self.0;
        if b != 0 && b % (1 << 20) == 0 {
            write!(f, "{}MiB", b >> 20)
        } else if b != 0 && b % (1 << 10) == 0 {
            write!(f, "{}KiB", b >> 10)
        } else {
            write!(f, "{b}B")
        }
    }
}

/// A probability in [0, 1], refused outside it when a profile is read.
#[derive(Debug, Clone, Copy, PartialEq, PartialOrd, Default, Serialize, Deserialize)]
#[serde(try_from = "f64", into = "f64")]
pub struct Probability(f64);

impl Probability {
    /// Zero: never.
    pub const NEVER: Probability = Probability(0.0);
    /// One: always.
    pub const ALWAYS: Probability = Probability(1.0);

    /// `p`, if it lies in [0, 1].
    pub fn new(p: f64) -> Option<Probability> {
        (0.0..=1.0).contains(&p).then_some(Probability(p))
    }

    /// The value in [0, 1].
    pub fn value(self) -> f64 {
        self.0
    }
}

impl TryFrom<f64> for Probability {
    type Error = String;

    fn try_from(p: f64) -> Result<Probability, String> {
        Probability::new(p).ok_or_else(|| format!("probability {p} is outside [0, 1]"))
    }
}

impl From<Probability> for f64 {
    fn from(p: Probability) -> f64 {
        p.0
    }
}

fn split_number(text: &str) -> (&str, &str) {
    let end = text
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(text.len());
    text.split_at(end)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_decimal_prefixes() {
        assert_eq!("56kbit".parse::<Rate>().unwrap().bits_per_second(), 56_000);
        assert_eq!(
            "1.5Mbit".parse::<Rate>().unwrap().bits_per_second(),
            1_500_000
        );
        assert_eq!("28kbit".parse::<Rate>().unwrap().to_string(), "28kbit");
        assert!("56k".parse::<Rate>().is_err());
        assert!("0kbit".parse::<Rate>().is_err());
    }

    #[test]
    fn transmit_time_of_a_full_frame_on_a_modem() {
        // 1514 bytes at 56 kbit/s: 12112 bits / 56000 = 216.286 ms.
        let modem: Rate = "56kbit".parse().unwrap();
        assert_eq!(modem.transmit_ns(1514), 216_285_715);
    }

    #[test]
    fn sizes_parse_with_binary_prefixes() {
        assert_eq!("64KiB".parse::<ByteCount>().unwrap(), ByteCount(65536));
        assert_eq!("1500B".parse::<ByteCount>().unwrap(), ByteCount(1500));
        assert!("64KB".parse::<ByteCount>().is_err());
    }

    #[test]
    fn probabilities_stay_in_range() {
        assert!(Probability::new(1.01).is_none());
        assert!(Probability::new(-0.1).is_none());
        assert_eq!(Probability::new(0.3).unwrap().value(), 0.3);
    }
}
