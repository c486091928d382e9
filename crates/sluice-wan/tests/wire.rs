//! The wire's statistics on short, bounded live runs through real namespaces and TAPs: delay,
//! rate, Bernoulli and two-state loss, per-flow rate limits. Each test owns a test bed with its
//! own prefix and tears it down on drop. Tolerances are stated beside each assert.

mod common;

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::time::{Duration, Instant};

use common::{percentile, receive_numbered, root_or_skip, send_numbered, serial, udp_in, Bed};

const CLIENT: &str = "10.201.1.2";
const SERVER: &str = "10.201.2.2";

/// Warms ARP both ways so the first measured packets do not wait for neighbour resolution;
/// retries, since the profile may drop the warm-up datagrams too.
fn warm(bed: &Bed) {
    let a = udp_in(&bed.netns("client"), &format!("{CLIENT}:0"));
    let b = udp_in(&bed.netns("server"), &format!("{SERVER}:0"));
    a.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    b.set_read_timeout(Some(Duration::from_millis(300)))
        .unwrap();
    let mut buffer = [0u8; 16];
    for _ in 0..20 {
        a.send_to(b"warm", b.local_addr().unwrap()).unwrap();
        if b.recv_from(&mut buffer).is_ok() {
            b.send_to(b"warm", a.local_addr().unwrap()).unwrap();
            if a.recv(&mut buffer).is_ok() {
                return;
            }
        }
    }
    panic!("no datagram crossed the wire in 20 tries");
}

#[test]
fn delay_is_accurate() {
    if !root_or_skip() {
        return;
    }
    let _turn = serial();
    let bed = Bed::up(
        'd',
        "direct",
        "description = \"t\"\n[direct.up]\ndelay = \"20ms\"\n[direct.down]\ndelay = \"20ms\"\n",
    );
    warm(&bed);
    let tx = udp_in(&bed.netns("client"), &format!("{CLIENT}:0"));
    let rx = udp_in(&bed.netns("server"), &format!("{SERVER}:0"));
    let to = rx.local_addr().unwrap().to_string();
    let base = Instant::now();
    // 1000 packets over 1 s.
    let receiver = std::thread::spawn(move || receive_numbered(&rx, 999, base));
    send_numbered(&tx, &to, 1000, 200, Duration::from_millis(1), base);
    let arrivals = receiver.join().unwrap();
    assert_eq!(arrivals.len(), 1000, "no loss configured");
    let mut delays: Vec<u64> = arrivals.iter().map(|a| a.received_ns - a.sent_ns).collect();
    delays.sort_unstable();
    let (min, median, p90, p99) = (
        delays[0],
        percentile(&delays, 0.5),
        percentile(&delays, 0.9),
        percentile(&delays, 0.99),
    );
    let counters = bed.counters();
    let up = &counters["directions"][0];
    let (late_total, frames, late_max) = (
        up["late_total_ns"].as_u64().unwrap(),
        up["frames_out"].as_u64().unwrap(),
        up["late_max_ns"].as_u64().unwrap(),
    );
    eprintln!(
        "one-way delay 20 ms: min {min} ns, median {median} ns, p90 {p90} ns, p99 {p99} ns; wire's own \
         lateness mean {} ns, max {late_max} ns, histogram {}",
        late_total / frames.max(1),
        up["late_histogram"]
    );
    // Never early; the wire's own median lateness under 200 us (it timestamps every write
    // against the due time); end to end, which adds two stacks and the test's own threads at
    // normal priority, median within 1 ms (typically 0.07-0.2 ms). No bound on the tail: on
    // a 2-vCPU VM shared with other benchmarks even the SCHED_FIFO wire is held off the CPU
    // for milliseconds now and then (measured p90 0.1-35 ms over), so the tail measures the
    // neighbours, not the wire. It is printed for the record.
    assert!(min >= 20_000_000, "delivered early: {min} ns");
    assert!(median < 21_000_000, "median {median} ns");
    let histogram: Vec<u64> = serde_json::from_value(up["late_histogram"].clone()).unwrap();
    let half = histogram.iter().sum::<u64>() / 2;
    assert!(
        histogram[..3].iter().sum::<u64>() >= half,
        "wire late: {histogram:?}"
    );
    // Order is kept.
    assert!(arrivals.windows(2).all(|w| w[0].seq < w[1].seq));
}

#[test]
fn rate_is_accurate_and_the_queue_tail_drops() {
    if !root_or_skip() {
        return;
    }
    let _turn = serial();
    let bed = Bed::up(
        'r',
        "direct",
        "description = \"t\"\n[direct.down]\nrate = \"2Mbit\"\n\
         queue = { packets = 200, bytes = \"1MiB\" }\n",
    );
    warm(&bed);
    let tx = udp_in(&bed.netns("server"), &format!("{SERVER}:0"));
    let rx = udp_in(&bed.netns("client"), &format!("{CLIENT}:0"));
    let to = rx.local_addr().unwrap().to_string();
    let base = Instant::now();
    // 300 frames of 1042 bytes (1000 + UDP/IP/Ethernet headers) at once into a 200-packet
    // queue: about 100 are tail-dropped, the rest leave at 2 Mbit/s (4.168 ms apart), 0.83 s.
    let receiver = std::thread::spawn(move || receive_numbered(&rx, 299, base));
    send_numbered(&tx, &to, 300, 1000, Duration::ZERO, base);
    let arrivals = receiver.join().unwrap();
    let counters = bed.counters();
    let down = counters["directions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["direction"] == "server->client")
        .unwrap()
        .clone();
    let dropped = down["dropped_queue_packets"].as_u64().unwrap();
    let (first, last) = (arrivals.first().unwrap(), arrivals.last().unwrap());
    let frames = (arrivals.len() - 1) as f64;
    let seconds = (last.received_ns - first.received_ns) as f64 / 1e9;
    let rate = frames * 1042.0 * 8.0 / seconds;
    eprintln!(
        "rate 2 Mbit/s: measured {rate:.0} bit/s over {frames} frames; queue drops {dropped}"
    );
    // Within 1% of the configured rate: the shaper's times are exact, and a delivery held up
    // by up to 8 ms at either end (a busy shared VM) is under 1% of 0.83 s.
    assert!((rate / 2e6 - 1.0).abs() < 0.01, "rate {rate}");
    // Tail drop: every frame is either delivered or counted as a queue drop.
    assert_eq!(arrivals.len() as u64 + dropped, 300);
    // At most 100: the queue takes 200. At least one: the burst arrives faster than 2 Mbit/s
    // (how many more depends on how fast the sending thread got the CPU).
    assert!((1..=100).contains(&dropped), "dropped {dropped}");
}

/// Sends `count` numbered datagrams client -> server and returns which sequence numbers
/// arrived.
fn delivered(bed: &Bed, count: u64) -> Vec<bool> {
    warm(bed);
    let tx = udp_in(&bed.netns("client"), &format!("{CLIENT}:0"));
    let rx = udp_in(&bed.netns("server"), &format!("{SERVER}:0"));
    rx.set_read_timeout(Some(Duration::from_millis(500)))
        .unwrap();
    let to = rx.local_addr().unwrap().to_string();
    let base = Instant::now();
    let receiver = std::thread::spawn(move || receive_numbered(&rx, count - 1, base));
    send_numbered(&tx, &to, count, 64, Duration::from_micros(100), base);
    let mut seen = vec![false; count as usize];
    for a in receiver.join().unwrap() {
        seen[a.seq as usize] = true;
    }
    seen
}

#[test]
fn bernoulli_loss_rate() {
    if !root_or_skip() {
        return;
    }
    let _turn = serial();
    let bed = Bed::up(
        'b',
        "direct",
        "description = \"t\"\n[direct.up]\nloss = { model = \"bernoulli\", rate = 0.05 }\n",
    );
    let seen = delivered(&bed, 8000);
    let lost = seen.iter().filter(|s| !**s).count() as f64 / seen.len() as f64;
    eprintln!("bernoulli 5%: lost {:.3}% of 8000", 100.0 * lost);
    // sd of the estimate: sqrt(0.05 * 0.95 / 8000) = 0.24%; allow 4 sd. (The last datagram
    // may be lost too, which only ends the receive by timeout.)
    assert!((lost - 0.05).abs() < 0.01, "lost {lost}");
}

#[test]
fn two_state_loss_rate_and_conditional_probability() {
    if !root_or_skip() {
        return;
    }
    let _turn = serial();
    // initial 5%, conditional 50%: stationary loss 0.05 / 0.55 = 9.09%.
    let bed = Bed::up(
        'g',
        "direct",
        "description = \"t\"\n[direct.up]\n\
         loss = { model = \"two-state\", initial = 0.05, conditional = 0.5 }\n",
    );
    let seen = delivered(&bed, 10_000);
    let n = seen.len() as f64;
    let lost = seen.iter().filter(|s| !**s).count() as f64 / n;
    let after_loss: Vec<bool> = seen.windows(2).filter(|w| !w[0]).map(|w| !w[1]).collect();
    let conditional =
        after_loss.iter().filter(|l| **l).count() as f64 / after_loss.len().max(1) as f64;
    eprintln!(
        "two-state 5%/50%: lost {:.2}% (expected 9.09%), P(loss | loss) {:.3} over {} pairs",
        100.0 * lost,
        conditional,
        after_loss.len()
    );
    // Rate: sd = sqrt(p (1 - p) / n * (1 + c) / (1 - c)) = 0.5%; allow 4 sd.
    assert!((lost - 0.0909).abs() < 0.02, "lost {lost}");
    // Conditional: about 900 pairs, sd 1.7%; allow 4 sd.
    assert!(
        (conditional - 0.5).abs() < 0.07,
        "conditional {conditional}"
    );
}

#[test]
fn per_flow_limits_give_each_flow_its_own_rate() {
    if !root_or_skip() {
        return;
    }
    let _turn = serial();
    let bed = Bed::up(
        'f',
        "direct",
        "description = \"t\"\n[direct.down]\nrate = \"1Mbit\"\nper_flow = true\n\
         queue = { packets = 16, bytes = \"24KiB\" }\n",
    );
    warm(&bed);
    let listener = sluice_wan::netns::within(&bed.netns("server"), || {
        TcpListener::bind(format!("{SERVER}:0"))
    })
    .unwrap()
    .unwrap();
    let server_addr = listener.local_addr().unwrap();
    // The server sends as fast as TCP lets it for 3 s on each of two connections, then closes.
    let sender = std::thread::spawn(move || {
        let mut handles = Vec::new();
        for _ in 0..2 {
            let (mut stream, _) = listener.accept().unwrap();
            handles.push(std::thread::spawn(move || {
                let chunk = vec![7u8; 16 * 1024];
                let end = Instant::now() + Duration::from_secs(3);
                stream
                    .set_write_timeout(Some(Duration::from_millis(200)))
                    .unwrap();
                while Instant::now() < end {
                    if stream.write(&chunk).is_err() && Instant::now() >= end {
                        break;
                    }
                }
            }));
        }
        for h in handles {
            h.join().unwrap();
        }
    });
    let mut receivers = Vec::new();
    for _ in 0..2 {
        let stream = sluice_wan::netns::within(&bed.netns("client"), move || {
            TcpStream::connect(server_addr)
        })
        .unwrap()
        .unwrap();
        receivers.push(std::thread::spawn(move || {
            let mut stream = stream;
            stream
                .set_read_timeout(Some(Duration::from_secs(2)))
                .unwrap();
            let start = Instant::now();
            let (mut total, mut buffer, mut reads) = (0u64, vec![0u8; 65536], Vec::new());
            while let Ok(n) = stream.read(&mut buffer) {
                if n == 0 {
                    break;
                }
                total += n as u64;
                reads.push((start.elapsed(), total));
            }
            // The rate between the reads that crossed 1/4 and 3/4 of everything received: past
            // slow start, and the shaper is backlogged throughout.
            let at = |share: u64| {
                reads
                    .iter()
                    .find(|(_, sum)| *sum * 4 >= total * share)
                    .unwrap()
            };
            let ((t1, b1), (t2, b2)) = (at(1), at(3));
            (b2 - b1) as f64 * 8.0 / (*t2 - *t1).as_secs_f64()
        }));
    }
    let goodputs: Vec<f64> = receivers.into_iter().map(|r| r.join().unwrap()).collect();
    sender.join().unwrap();
    // Payload share of a full frame: 1448 / 1514 (timestamps on) = 95.6% of 1 Mbit/s.
    let expected = 1e6 * 1448.0 / 1514.0;
    eprintln!("per-flow 1 Mbit/s: goodputs {goodputs:?} bit/s, expected {expected:.0} each");
    for g in &goodputs {
        // Within 5%: the window holds about 120 frames, and its edges cut a frame or two.
        assert!((g / expected - 1.0).abs() < 0.05, "goodput {g}");
    }
}
