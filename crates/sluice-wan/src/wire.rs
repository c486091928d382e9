//! The wire: one process that owns both TAP devices of every link of a test bed and moves
//! frames between them, applying per direction loss, then rate and queue, then delay.
//!
//! ```text
//!  host A's TAP --read--> loss --> shaper (per direction or per TCP flow) --> delay line
//!                                                                               |
//!  host B's TAP <--write-- due queue (one heap for all directions) <------------+
//! ```
//!
//! One thread, one epoll set: every TAP fd, plus a control fd (the signalfd of the wire process,
//! or a pipe in tests). epoll_pwait2 sleeps until the earliest due frame with nanosecond
//! resolution, so delays do not round to milliseconds.
//!
//! Every direction draws from generators of its own, one for loss and one for jitter, seeded
//! from the run's seed and the direction's index ([`stream_rng`]). With one generator for the
//! whole wire, which packets one direction drops would depend on how many draws the other
//! directions made in between, which under TCP depends on timing; this way the n-th IP frame
//! a direction reads meets the same loss decision in every run with the same seed.

use std::collections::HashMap;
use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::time::{Duration, Instant};

use rand::rngs::StdRng;
use rand::SeedableRng;
use rustix::event::epoll;
use rustix::time::Timespec;
use serde::{Deserialize, Serialize};

use crate::counters::{process_cpu_seconds, DirectionCounters, WireReport};
use crate::delay::{DelayLine, DueQueue};
use crate::frame::{classify, FlowKey, FrameKind};
use crate::loss::LossProcess;
use crate::probe::{ForwardingProbe, ProbePoint};
use crate::profile::Impairment;
use crate::shaper::{QueueFull, Shaper};
use crate::sys::tun::open_tap;

/// One wire of a test bed: a TAP device at each end and what each direction does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LinkPlan {
    /// `client-proxy`, `proxy-server` or `client-server`.
    pub name: String,
    /// The end toward the client.
    pub a: EndPlan,
    /// The end toward the server.
    pub b: EndPlan,
    /// Frames from `a` to `b` (toward the server).
    pub up: Impairment,
    /// Frames from `b` to `a` (toward the client).
    pub down: Impairment,
}

/// One end of a wire: a TAP device that lives in a host's namespace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EndPlan {
    /// The host (`client`, `proxy`, `server`).
    pub host: String,
    /// The network namespace the TAP is moved into.
    pub netns: String,
    /// The TAP device's name (same in the root and the host namespace).
    pub ifname: String,
    /// Its address with prefix length (`10.201.1.2/24`).
    pub address: String,
    /// Extra on-link routes (`10.201.2.0/24`), for the direct layout.
    pub routes: Vec<String>,
}

/// What the loop watches besides the TAPs.
#[derive(Debug)]
pub enum Control<'a> {
    /// The wire process: SIGUSR1 reports, SIGTERM/SIGINT/SIGHUP stop.
    Signals(&'a crate::sys::signal::SignalFd),
    /// In-process use: readable (a byte or EOF) means stop.
    StopPipe(BorrowedFd<'a>),
}

const CONTROL_TOKEN: u64 = u64::MAX;
/// Frames read from one TAP before the loop looks at the others and at due frames again.
const READ_BATCH: usize = 64;
/// Per-flow limiters idle this long are forgotten.
const FLOW_IDLE_NS: u64 = 2_000_000_000;

/// The running wire: TAP fds, per-direction state, and the heap of due frames.
#[derive(Debug)]
pub struct Wire {
    epoll: OwnedFd,
    taps: Vec<Tap>,
    directions: Vec<DirectionState>,
    due: DueQueue<Pending>,
    seed: u64,
    start: Instant,
    spare: Vec<Vec<u8>>,
    last_sweep_ns: u64,
    /// Present when the test bed has a proxy host.
    probe: Option<ForwardingProbe>,
}

#[derive(Debug)]
struct Tap {
    fd: OwnedFd,
    /// The direction frames read from this TAP enter.
    direction: usize,
}

#[derive(Debug)]
struct DirectionState {
    /// TAP the direction writes to.
    to: usize,
    loss: LossProcess,
    loss_rng: StdRng,
    /// Apart from `loss_rng` because a frame the queue drops makes no jitter draw, and queue
    /// drops depend on timing: sharing would let timing shift the loss decisions.
    jitter_rng: StdRng,
    previous_dropped: bool,
    stage: RateStage,
    counters: DirectionCounters,
    /// Where this direction's frames are seen by the forwarding probe: read from the proxy
    /// (admit) or written into it (deliver).
    probe_point: Option<ProbePoint>,
}

#[derive(Debug)]
enum RateStage {
    /// No rate limit: straight to the delay line.
    Unlimited(DelayLine),
    /// One shaper for the whole direction.
    Aggregate(Shaper, DelayLine),
    /// One shaper and delay line per TCP 4-tuple, and one more that every other frame (UDP,
    /// ICMP, ARP) shares: a modem limits all its traffic, and without a bucket of their own
    /// these frames would cross a 56k link at the host's speed. They are not told apart by
    /// host, so emulated clients share that one bucket.
    PerFlow {
        template: Impairment,
        flows: HashMap<FlowKey, (Shaper, DelayLine)>,
        not_tcp: (Shaper, DelayLine),
    },
}

#[derive(Debug)]
struct Pending {
    direction: usize,
    frame: Vec<u8>,
}

/// The random streams of a direction.
#[derive(Debug, Clone, Copy)]
enum Stream {
    Loss = 0,
    Jitter = 1,
}

/// The generator of one stream of direction `index` (link `i`'s up direction is `2i`, its down
/// direction `2i + 1`). Seed, index and stream together are the ChaCha key: no two streams
/// share draws, and no two seeds share a stream, as `seed + index` would (seed 1's direction 1
/// would be seed 2's direction 0).
fn stream_rng(seed: u64, index: usize, stream: Stream) -> StdRng {
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&(index as u64).to_le_bytes());
    key[16] = stream as u8;
    StdRng::from_seed(key)
}

/// The directions of `links` in wire order, each with its own generators; TAP `2i` is link
/// `i`'s end `a`, TAP `2i + 1` its end `b`.
fn plan_directions(links: &[LinkPlan], seed: u64) -> Vec<DirectionState> {
    let mut directions = Vec::with_capacity(links.len() * 2);
    for (i, link) in links.iter().enumerate() {
        let (a, b) = (2 * i, 2 * i + 1);
        for (imp, to, from_host, to_host) in [
            (&link.up, b, &link.a.host, &link.b.host),
            (&link.down, a, &link.b.host, &link.a.host),
        ] {
            let probe_point = match (from_host.as_str(), to_host.as_str()) {
                ("client", "proxy") => Some(ProbePoint::RequestIn),
                ("proxy", "server") => Some(ProbePoint::RequestOut),
                ("server", "proxy") => Some(ProbePoint::ResponseIn),
                ("proxy", "client") => Some(ProbePoint::ResponseOut),
                _ => None,
            };
            let index = directions.len();
            directions.push(DirectionState {
                probe_point,
                to,
                loss: imp.loss.start(),
                loss_rng: stream_rng(seed, index, Stream::Loss),
                jitter_rng: stream_rng(seed, index, Stream::Jitter),
                previous_dropped: false,
                stage: RateStage::new(imp),
                counters: DirectionCounters {
                    direction: format!("{from_host}->{to_host}"),
                    ..DirectionCounters::default()
                },
            });
        }
    }
    directions
}

impl DirectionState {
    /// Runs one frame read at `now` through loss, rate and delay: its due time, or `None` if
    /// it was dropped (and counted).
    fn schedule(&mut self, kind: FrameKind, len: u32, now: u64) -> Option<u64> {
        if kind != FrameKind::NotIp {
            let dropped = self.loss.drops(&mut self.loss_rng);
            self.counters.loss_decisions += 1;
            if self.previous_dropped {
                self.counters.after_loss += 1;
                self.counters.lost_after_loss += u64::from(dropped);
            }
            self.previous_dropped = dropped;
            if dropped {
                self.counters.dropped_loss += 1;
                return None;
            }
        }
        let jitter = &mut self.jitter_rng;
        let scheduled = match &mut self.stage {
            RateStage::Unlimited(line) => Ok(line.due(now, jitter)),
            RateStage::Aggregate(shaper, line) => {
                shaper.offer(now, len).map(|exit| line.due(exit, jitter))
            }
            RateStage::PerFlow {
                template,
                flows,
                not_tcp: (shaper, line),
            } => match kind {
                FrameKind::Tcp { flow, .. } => {
                    let (shaper, line) = flows.entry(flow).or_insert_with(|| {
                        let shaper = new_shaper(template).expect("per-flow stages have a rate");
                        (shaper, new_line(template))
                    });
                    let due = shaper.offer(now, len).map(|exit| line.due(exit, jitter));
                    self.counters.flows_max = self.counters.flows_max.max(flows.len() as u64);
                    due
                }
                FrameKind::OtherIp | FrameKind::NotIp => {
                    shaper.offer(now, len).map(|exit| line.due(exit, jitter))
                }
            },
        };
        match scheduled {
            Ok(due) => Some(due),
            Err(QueueFull::Packets) => {
                self.counters.dropped_queue_packets += 1;
                None
            }
            Err(QueueFull::Bytes) => {
                self.counters.dropped_queue_bytes += 1;
                None
            }
        }
    }
}

fn new_shaper(imp: &Impairment) -> Option<Shaper> {
    imp.rate.map(|rate| Shaper::new(rate, imp.burst, imp.queue))
}

fn new_line(imp: &Impairment) -> DelayLine {
    DelayLine::new(imp.delay, imp.jitter)
}

impl RateStage {
    fn new(imp: &Impairment) -> RateStage {
        match new_shaper(imp) {
            None => RateStage::Unlimited(new_line(imp)),
            Some(shaper) if imp.per_flow => RateStage::PerFlow {
                template: imp.clone(),
                flows: HashMap::new(),
                not_tcp: (shaper, new_line(imp)),
            },
            Some(shaper) => RateStage::Aggregate(shaper, new_line(imp)),
        }
    }
}

impl Wire {
    /// Creates both TAP devices of every link in the caller's network namespace. Moving them
    /// into the hosts' namespaces is the caller's job (see `topology`); the fds keep working.
    pub fn open(links: &[LinkPlan], seed: u64) -> io::Result<Wire> {
        let epoll = epoll::create(epoll::CreateFlags::CLOEXEC)?;
        let directions = plan_directions(links, seed);
        let probe = directions
            .iter()
            .any(|d| d.probe_point.is_some())
            .then(ForwardingProbe::default);
        let mut wire = Wire {
            epoll,
            taps: Vec::new(),
            directions,
            due: DueQueue::default(),
            seed,
            start: Instant::now(),
            spare: Vec::new(),
            last_sweep_ns: 0,
            probe,
        };
        for (i, link) in links.iter().enumerate() {
            let (up, down) = (2 * i, 2 * i + 1);
            // Frames read from end `a` go up; TAP indices follow `plan_directions`.
            for (end, direction) in [(&link.a, up), (&link.b, down)] {
                let fd = open_tap(&end.ifname).map_err(|e| {
                    io::Error::new(e.kind(), format!("cannot create TAP {}: {e}", end.ifname))
                })?;
                let token = wire.taps.len() as u64;
                epoll::add(
                    &wire.epoll,
                    &fd,
                    epoll::EventData::new_u64(token),
                    epoll::EventFlags::IN,
                )?;
                wire.taps.push(Tap { fd, direction });
            }
        }
        Ok(wire)
    }

    /// Forwards frames until `control` says stop or `deadline` passes; `report` is called with
    /// the counters on every SIGUSR1. Frames still in flight at the end are discarded.
    pub fn run(
        &mut self,
        control: Control<'_>,
        deadline: Option<Instant>,
        report: &mut dyn FnMut(&WireReport),
    ) -> io::Result<()> {
        let control_fd = match &control {
            Control::Signals(signals) => signals.as_fd(),
            Control::StopPipe(fd) => *fd,
        };
        epoll::add(
            &self.epoll,
            control_fd,
            epoll::EventData::new_u64(CONTROL_TOKEN),
            epoll::EventFlags::IN,
        )?;
        // The default 50 us of timer slack would add up to 50 us to every emulated delay; the
        // wire is one thread that sleeps to exact due times, so ask for none.
        let _ = rustix::thread::set_current_timer_slack(std::num::NonZeroU64::new(1));
        self.start = Instant::now();
        let mut events = Vec::with_capacity(64);
        let mut buffer = vec![0u8; 65536];
        loop {
            let now = self.now_ns();
            self.deliver_due(now);
            let wake = self
                .due
                .next_due()
                .map(|due| due.saturating_sub(self.now_ns()));
            let until_deadline = deadline.map(|d| {
                let left = d.saturating_duration_since(Instant::now());
                u64::try_from(left.as_nanos()).unwrap_or(u64::MAX)
            });
            if until_deadline == Some(0) {
                return Ok(());
            }
            let timeout = match (wake, until_deadline) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            }
            .map(|ns| Timespec {
                tv_sec: (ns / 1_000_000_000) as i64,
                tv_nsec: (ns % 1_000_000_000) as i64,
            });
            events.clear();
            match epoll::wait(
                &self.epoll,
                rustix::buffer::spare_capacity(&mut events),
                timeout.as_ref(),
            ) {
                Ok(_) | Err(rustix::io::Errno::INTR) => {}
                Err(e) => return Err(e.into()),
            }
            for event in &events {
                let token = event.data.u64();
                if token == CONTROL_TOKEN {
                    match &control {
                        Control::StopPipe(_) => return Ok(()),
                        Control::Signals(signals) => {
                            while let Some(signal) = signals.read()? {
                                if signal == libc::SIGUSR1 as u32 {
                                    report(&self.report());
                                } else {
                                    return Ok(());
                                }
                            }
                        }
                    }
                } else if let Ok(index) = usize::try_from(token) {
                    self.read_tap(index, &mut buffer)?;
                }
            }
            let now = self.now_ns();
            if now.saturating_sub(self.last_sweep_ns) > FLOW_IDLE_NS {
                self.forget_idle_flows(now);
                self.last_sweep_ns = now;
            }
        }
    }

    /// The counters so far.
    pub fn report(&self) -> WireReport {
        WireReport {
            uptime_s: self.start.elapsed().as_secs_f64(),
            cpu_s: process_cpu_seconds(),
            seed: self.seed,
            directions: self.directions.iter().map(|d| d.counters.clone()).collect(),
            forwarding: self.probe.as_ref().map(ForwardingProbe::summary),
        }
    }

    fn now_ns(&self) -> u64 {
        u64::try_from(self.start.elapsed().as_nanos()).unwrap_or(u64::MAX)
    }

    fn read_tap(&mut self, index: usize, buffer: &mut [u8]) -> io::Result<()> {
        let Some(tap) = self.taps.get(index) else {
            return Ok(());
        };
        let direction = tap.direction;
        for _ in 0..READ_BATCH {
            let n = match rustix::io::read(&self.taps[index].fd, &mut *buffer) {
                Ok(n) => n,
                Err(rustix::io::Errno::AGAIN) => return Ok(()),
                // The host's namespace (and with it the device) went away: nothing to read, ever.
                // The detached fd stays readable (tun's poll reports an error), so a wire that kept
                // watching it would spin, at SCHED_FIFO, until someone stopped it.
                Err(rustix::io::Errno::BADFD | rustix::io::Errno::IO) => {
                    let tap = &self.taps[index];
                    let _ = epoll::delete(&self.epoll, &tap.fd);
                    eprintln!(
                        "wire: the TAP feeding {} is gone (its namespace was deleted?); not reading it",
                        self.directions[direction].counters.direction
                    );
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            let now = self.now_ns();
            let mut frame = self.spare.pop().unwrap_or_default();
            frame.clear();
            frame.extend_from_slice(&buffer[..n]);
            self.admit(direction, now, frame);
        }
        Ok(())
    }

    /// Runs one frame through loss, rate and delay, and schedules it (or counts its drop).
    fn admit(&mut self, direction: usize, now: u64, frame: Vec<u8>) {
        let kind = classify(&frame);
        let len = u32::try_from(frame.len()).unwrap_or(u32::MAX);
        let d = &mut self.directions[direction];
        if let (
            Some(probe),
            Some(point),
            FrameKind::Tcp {
                flow,
                payload,
                flags,
            },
        ) = (self.probe.as_mut(), d.probe_point, kind)
        {
            if matches!(point, ProbePoint::RequestOut | ProbePoint::ResponseOut) {
                probe.observe(point, flow, payload, flags, now);
            }
        }
        d.counters.frames_in += 1;
        d.counters.bytes_in += u64::from(len);
        d.counters.largest_frame = d.counters.largest_frame.max(len);
        match d.schedule(kind, len, now) {
            Some(due) => self.due.push(due, Pending { direction, frame }),
            None => self.spare.push(frame),
        }
    }

    fn deliver_due(&mut self, now: u64) {
        while let Some((due, pending)) = self.due.pop_due(now) {
            let late = self.now_ns().saturating_sub(due);
            let d = &mut self.directions[pending.direction];
            match rustix::io::write(&self.taps[d.to].fd, &pending.frame) {
                Ok(_) => {
                    if let (Some(probe), Some(point)) = (self.probe.as_mut(), d.probe_point) {
                        if let (
                            ProbePoint::RequestIn | ProbePoint::ResponseIn,
                            FrameKind::Tcp {
                                flow,
                                payload,
                                flags,
                            },
                        ) = (point, classify(&pending.frame))
                        {
                            probe.observe(point, flow, payload, flags, due + late);
                        }
                    }
                    d.counters.frames_out += 1;
                    d.counters.bytes_out += pending.frame.len() as u64;
                    d.counters.record_late(late);
                }
                Err(_) => d.counters.write_errors += 1,
            }
            if self.spare.len() < 4096 {
                self.spare.push(pending.frame);
            }
        }
    }

    fn forget_idle_flows(&mut self, now: u64) {
        for d in &mut self.directions {
            if let RateStage::PerFlow { flows, .. } = &mut d.stage {
                flows.retain(|_, (shaper, line)| {
                    !(shaper.idle_at(now) && line.last_due_ns() + FLOW_IDLE_NS < now)
                });
            }
        }
    }

    /// How long the wire has been forwarding.
    pub fn uptime(&self) -> Duration {
        self.start.elapsed()
    }
}

#[cfg(test)]
mod tests {
    use rand::{Rng, SeedableRng};

    use super::*;
    use crate::loss::LossSpec;
    use crate::units::Probability;

    /// Loss and jitter in every direction, so both streams show.
    fn lossy() -> Impairment {
        Impairment {
            delay: Duration::from_millis(10),
            jitter: Duration::from_millis(5),
            loss: LossSpec::TwoState {
                initial: Probability::new(0.2).unwrap(),
                conditional: Probability::new(0.5).unwrap(),
            },
            ..Impairment::default()
        }
    }

    fn end(host: &str) -> EndPlan {
        EndPlan {
            host: host.to_owned(),
            netns: format!("t-{host}"),
            ifname: format!("t-{host}"),
            address: String::new(),
            routes: Vec::new(),
        }
    }

    fn two_links() -> Vec<LinkPlan> {
        let link = |name: &str, a: &str, b: &str| LinkPlan {
            name: name.to_owned(),
            a: end(a),
            b: end(b),
            up: lossy(),
            down: lossy(),
        };
        vec![
            link("client-proxy", "client", "proxy"),
            link("proxy-server", "proxy", "server"),
        ]
    }

    /// One second apart: far more than the jitter, so no due time is clamped to the previous
    /// one, and each outcome shows its own jitter draw.
    const GAP_NS: u64 = 1_000_000_000;
    const FRAMES: u64 = 2_000;

    /// Direction 0's due time (or drop) for each of its frames, with `others(i)` frames of
    /// other directions read just before its `i`-th.
    fn direction_0(seed: u64, mut others: impl FnMut(u64) -> Vec<usize>) -> Vec<Option<u64>> {
        let mut directions = plan_directions(&two_links(), seed);
        (0..FRAMES)
            .map(|i| {
                for other in others(i) {
                    directions[other].schedule(FrameKind::OtherIp, 100, i * GAP_NS);
                }
                directions[0].schedule(FrameKind::OtherIp, 100, i * GAP_NS)
            })
            .collect()
    }

    #[test]
    fn a_directions_drops_and_jitter_do_not_depend_on_other_directions() {
        let alone = direction_0(7, |_| Vec::new());
        // Frames of the three other directions in an arbitrary interleaving, as TCP's timing
        // would make them.
        let mut pattern = StdRng::seed_from_u64(99);
        let busy = direction_0(7, |_| {
            let n = pattern.random_range(0..4);
            (0..n).map(|_| pattern.random_range(1..4)).collect()
        });
        assert_eq!(alone, busy);
        let dropped = alone.iter().filter(|o| o.is_none()).count();
        // About 2000 * 0.2 / 0.7 = 571 drops: the comparison covered both outcomes.
        assert!((400..800).contains(&dropped), "dropped {dropped}");
        let jittered = alone
            .iter()
            .enumerate()
            .filter_map(|(i, o)| o.map(|due| due - i as u64 * GAP_NS))
            .collect::<std::collections::HashSet<_>>();
        assert!(
            jittered.len() > 1000,
            "jitter drew {} delays",
            jittered.len()
        );
    }

    #[test]
    fn per_flow_gives_each_tcp_flow_a_bucket_and_other_frames_one_shared_bucket() {
        let per_flow = Impairment {
            rate: Some(crate::units::Rate::from_bits_per_second(1_000_000).unwrap()),
            per_flow: true,
            ..Impairment::default()
        };
        let mut link = two_links().swap_remove(0);
        link.up = per_flow;
        let mut direction = plan_directions(&[link], 1).swap_remove(0);
        let tcp = |port| FrameKind::Tcp {
            flow: crate::frame::FlowKey {
                source: [10, 201, 1, 2],
                destination: [10, 201, 2, 2],
                source_port: port,
                destination_port: 80,
            },
            payload: 946,
            flags: 0x10,
        };
        // 1000 bytes at 1 Mbit/s: 8 ms each. All offered at once.
        let mut due = |kind| direction.schedule(kind, 1000, 0).unwrap() / 1_000_000;
        assert_eq!(due(tcp(1)), 8);
        assert_eq!(due(tcp(2)), 8, "a second flow has its own bucket");
        assert_eq!(due(tcp(1)), 16);
        assert_eq!(
            due(FrameKind::OtherIp),
            8,
            "not TCP: not in a flow's bucket"
        );
        assert_eq!(due(FrameKind::NotIp), 16, "but all in one shared bucket");
        assert_eq!(due(FrameKind::OtherIp), 24);
    }

    #[test]
    fn directions_and_seeds_have_streams_of_their_own() {
        let run = |seed: u64, index: usize| {
            let mut directions = plan_directions(&two_links(), seed);
            (0..FRAMES)
                .map(|i| directions[index].schedule(FrameKind::OtherIp, 100, i * GAP_NS))
                .collect::<Vec<_>>()
        };
        assert_eq!(run(7, 2), run(7, 2));
        // Same impairment, other index: other draws.
        assert_ne!(run(7, 0), run(7, 1));
        // Not `seed + index`: seed 8's direction 0 is not seed 7's direction 1.
        assert_ne!(run(8, 0), run(7, 1));
    }
}
