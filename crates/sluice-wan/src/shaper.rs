//! The rate stage of a direction: a token bucket in front of a bounded tail-drop queue.
//!
//! Time is in nanoseconds since the wire started, so the model is pure and tested without
//! clocks. Packets leave in arrival order; [`Shaper::offer`] computes a packet's exit time the
//! moment it arrives (the queue is FIFO, so nothing that arrives later can change it), which is
//! GCRA (the virtual-scheduling form of a token bucket, ITU-T I.371): with `burst` 0 a packet
//! exits when its last bit would have left a link of that rate, as on a modem.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use crate::units::{ByteCount, Rate};

/// Queue limits of a rate-limited direction; a packet that would exceed either is dropped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueLimit {
    /// Most packets waiting (including the one being sent).
    pub packets: u32,
    /// Most bytes waiting (including the one being sent).
    pub bytes: ByteCount,
}

/// Why the shaper refused a packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum QueueFull {
    /// The queue held `limit.packets` packets.
    Packets,
    /// The packet's bytes would have exceeded `limit.bytes`.
    Bytes,
}

/// A token bucket of `rate` and depth `burst` feeding a FIFO of bounded size.
#[derive(Debug, Clone)]
pub struct Shaper {
    rate: Rate,
    burst_ns: u64,
    limit: QueueLimit,
    /// Theoretical arrival time: when the bucket has been drained by everything accepted so far.
    tat_ns: u64,
    /// Exit times and sizes of accepted packets not yet gone, oldest first.
    backlog: VecDeque<(u64, u32)>,
    backlog_bytes: u64,
}

impl Shaper {
    /// A shaper that sends at `rate`, lets `burst` bytes through at once after idling, and
    /// queues at most `limit`.
    pub fn new(rate: Rate, burst: ByteCount, limit: QueueLimit) -> Shaper {
        Shaper {
            rate,
            burst_ns: rate.transmit_ns(burst.0),
            limit,
            tat_ns: 0,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
        }
    }

    /// Offers a packet of `bytes` arriving at `now_ns`; returns when it leaves the shaper, or
    /// why it was dropped.
    pub fn offer(&mut self, now_ns: u64, bytes: u32) -> Result<u64, QueueFull> {
        while let Some(&(exit, size)) = self.backlog.front() {
            if exit > now_ns {
                break;
            }
            self.backlog.pop_front();
            self.backlog_bytes -= u64::from(size);
        }
        if self.backlog.len() >= self.limit.packets as usize {
            return Err(QueueFull::Packets);
        }
        if self.backlog_bytes + u64::from(bytes) > self.limit.bytes.0 {
            return Err(QueueFull::Bytes);
        }
        let tat = self.tat_ns.max(now_ns) + self.rate.transmit_ns(u64::from(bytes));
        self.tat_ns = tat;
        let exit = tat.saturating_sub(self.burst_ns).max(now_ns);
        self.backlog.push_back((exit, bytes));
        self.backlog_bytes += u64::from(bytes);
        Ok(exit)
    }

    /// Whether nothing is queued at `now_ns`: a per-flow shaper in that state can be forgotten.
    pub fn idle_at(&self, now_ns: u64) -> bool {
        self.tat_ns <= now_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modem() -> Shaper {
        Shaper::new(
            "56kbit".parse().unwrap(),
            ByteCount(0),
            QueueLimit {
                packets: 10,
                bytes: ByteCount(64 * 1024),
            },
        )
    }

    #[test]
    fn back_to_back_packets_leave_at_the_line_rate() {
        let mut s = modem();
        let t = 216_285_715; // one 1514-byte frame at 56 kbit/s
        assert_eq!(s.offer(0, 1514), Ok(t));
        assert_eq!(s.offer(0, 1514), Ok(2 * t));
        assert_eq!(s.offer(1_000, 1514), Ok(3 * t));
    }

    #[test]
    fn an_idle_link_does_not_bank_credit_without_burst() {
        let mut s = modem();
        s.offer(0, 100).unwrap();
        let later = 10_000_000_000;
        assert_eq!(s.offer(later, 1514), Ok(later + 216_285_715));
    }

    #[test]
    fn burst_lets_a_few_packets_through_at_once() {
        let rate: Rate = "1Mbit".parse().unwrap();
        let mut s = Shaper::new(
            rate,
            ByteCount(3000),
            QueueLimit {
                packets: 100,
                bytes: ByteCount(1 << 20),
            },
        );
        let now = 1_000_000_000;
        assert_eq!(s.offer(now, 1000), Ok(now));
        assert_eq!(s.offer(now, 1000), Ok(now));
        assert_eq!(s.offer(now, 1000), Ok(now));
        // The fourth kilobyte waits for 8 ms worth of tokens.
        assert_eq!(s.offer(now, 1000), Ok(now + 8_000_000));
    }

    #[test]
    fn tail_drop_by_packets_then_room_again() {
        let mut s = modem();
        for _ in 0..10 {
            s.offer(0, 100).unwrap();
        }
        assert_eq!(s.offer(0, 100), Err(QueueFull::Packets));
        // 100 bytes take 14.3 ms; after 15 ms the first one has left.
        assert!(s.offer(15_000_000, 100).is_ok());
    }

    #[test]
    fn tail_drop_by_bytes() {
        let mut s = Shaper::new(
            "56kbit".parse().unwrap(),
            ByteCount(0),
            QueueLimit {
                packets: 100,
                bytes: ByteCount(3000),
            },
        );
        s.offer(0, 1500).unwrap();
        s.offer(0, 1500).unwrap();
        assert_eq!(s.offer(0, 1), Err(QueueFull::Bytes));
    }

    #[test]
    fn long_run_rate_is_exact() {
        let mut s = Shaper::new(
            "28kbit".parse().unwrap(),
            ByteCount(0),
            QueueLimit {
                packets: u32::MAX,
                bytes: ByteCount(u64::MAX / 2),
            },
        );
        let mut last = 0;
        for _ in 0..1000 {
            last = s.offer(0, 700).unwrap();
        }
        // 700,000 bytes at 28 kbit/s = 200 s.
        assert!((last as i64 - 200_000_000_000).abs() < 1_000, "{last}");
    }
}
