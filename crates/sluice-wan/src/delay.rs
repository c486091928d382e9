//! The delay stage: fixed propagation delay plus optional jitter that never reorders, and the
//! heap of packets waiting for their due time.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Duration;

use rand::Rng;

/// Delay of one direction (or one flow of it): `delay` plus a uniform draw from
/// `[-jitter, +jitter]`, never earlier than the previous packet's due time, so jitter changes
/// spacing but not order (netem reorders when jitter exceeds the gap; TCP then sees spurious
/// duplicate ACKs, which no real path in the papers produced).
#[derive(Debug, Clone)]
pub struct DelayLine {
    delay_ns: u64,
    jitter_ns: u64,
    last_due_ns: u64,
}

impl DelayLine {
    /// A line of `delay` ± `jitter`; jitter larger than the delay is clamped to it.
    pub fn new(delay: Duration, jitter: Duration) -> DelayLine {
        let delay_ns = u64::try_from(delay.as_nanos()).unwrap_or(u64::MAX);
        let jitter_ns = u64::try_from(jitter.as_nanos())
            .unwrap_or(u64::MAX)
            .min(delay_ns);
        DelayLine {
            delay_ns,
            jitter_ns,
            last_due_ns: 0,
        }
    }

    /// When a packet that leaves the rate stage at `exit_ns` is delivered.
    pub fn due<R: Rng + ?Sized>(&mut self, exit_ns: u64, rng: &mut R) -> u64 {
        let mut due = exit_ns + self.delay_ns;
        if self.jitter_ns > 0 {
            let offset = rng.random_range(0..=2 * self.jitter_ns);
            due = due + offset - self.jitter_ns;
        }
        due = due.max(self.last_due_ns);
        self.last_due_ns = due;
        due
    }

    /// The due time of the last packet, for forgetting idle per-flow state.
    pub fn last_due_ns(&self) -> u64 {
        self.last_due_ns
    }
}

/// Packets waiting for their due time, earliest first; ties leave in arrival order.
#[derive(Debug)]
pub struct DueQueue<T> {
    heap: BinaryHeap<Reverse<(u64, u64, Slot<T>)>>,
    sequence: u64,
}

/// Wrapper that makes the payload invisible to the ordering.
#[derive(Debug)]
struct Slot<T>(T);

impl<T> PartialEq for Slot<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}
impl<T> Eq for Slot<T> {}
impl<T> PartialOrd for Slot<T> {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}
impl<T> Ord for Slot<T> {
    fn cmp(&self, _: &Self) -> std::cmp::Ordering {
        std::cmp::Ordering::Equal
    }
}

impl<T> Default for DueQueue<T> {
    fn default() -> Self {
        DueQueue {
            heap: BinaryHeap::new(),
            sequence: 0,
        }
    }
}

impl<T> DueQueue<T> {
    /// Schedules `item` at `due_ns`.
    pub fn push(&mut self, due_ns: u64, item: T) {
        self.sequence += 1;
        self.heap.push(Reverse((due_ns, self.sequence, Slot(item))));
    }

    /// The earliest due time, if any.
    pub fn next_due(&self) -> Option<u64> {
        self.heap.peek().map(|Reverse((due, _, _))| *due)
    }

    /// Removes and returns the earliest item if it is due at `now_ns`.
    pub fn pop_due(&mut self, now_ns: u64) -> Option<(u64, T)> {
        if self.next_due()? > now_ns {
            return None;
        }
        self.heap
            .pop()
            .map(|Reverse((due, _, Slot(item)))| (due, item))
    }

    /// Items waiting.
    pub fn len(&self) -> usize {
        self.heap.len()
    }

    /// Whether nothing is waiting.
    pub fn is_empty(&self) -> bool {
        self.heap.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use rand::rngs::StdRng;
    use rand::SeedableRng;

    use super::*;

    #[test]
    fn fixed_delay_adds_exactly() {
        let mut rng = StdRng::seed_from_u64(1);
        let mut line = DelayLine::new(Duration::from_millis(40), Duration::ZERO);
        assert_eq!(line.due(5, &mut rng), 40_000_005);
        assert_eq!(line.due(6, &mut rng), 40_000_006);
    }

    #[test]
    fn jitter_spreads_sparse_packets_within_bounds() {
        let mut rng = StdRng::seed_from_u64(2);
        let mut line = DelayLine::new(Duration::from_millis(40), Duration::from_millis(5));
        let mut spread = (u64::MAX, 0);
        for i in 0..2_000u64 {
            let exit = i * 20_000_000; // gaps larger than the jitter range: never clamped
            let d = line.due(exit, &mut rng) - exit;
            assert!((35_000_000..=45_000_000).contains(&d), "delay {d} at {i}");
            spread = (spread.0.min(d), spread.1.max(d));
        }
        assert!(spread.0 < 35_100_000 && spread.1 > 44_900_000, "{spread:?}");
    }

    #[test]
    fn jitter_never_reorders_dense_packets() {
        let mut rng = StdRng::seed_from_u64(3);
        let mut line = DelayLine::new(Duration::from_millis(40), Duration::from_millis(5));
        let mut previous = 0;
        for i in 0..10_000u64 {
            let exit = i * 100_000; // a packet every 0.1 ms, far less than the jitter
            let due = line.due(exit, &mut rng);
            assert!(due >= previous, "reordered at {i}");
            assert!(due >= exit + 35_000_000, "too early at {i}");
            previous = due;
        }
    }

    #[test]
    fn due_queue_orders_by_time_then_arrival() {
        let mut q = DueQueue::default();
        q.push(30, "c");
        q.push(10, "a");
        q.push(10, "b");
        assert_eq!(q.next_due(), Some(10));
        assert_eq!(q.pop_due(9), None);
        assert_eq!(q.pop_due(10), Some((10, "a")));
        assert_eq!(q.pop_due(10), Some((10, "b")));
        assert_eq!(q.pop_due(29), None);
        assert_eq!(q.pop_due(100), Some((30, "c")));
        assert!(q.is_empty());
    }
}
