//! The packet-forwarding-delay probe (WWW 2002 paper, §4.1 and Table 4): how long the proxy
//! host takes to pass a request's first data packet from the client connection to the server
//! connection, and a response's first data packet back.
//!
//! The wire sees both of the proxy's links, so it is the capture point: a request enters the
//! proxy when the wire writes the first data packet of a client connection into the proxy's
//! TAP, and leaves when the wire reads the first data packet of a server connection from the
//! proxy's other TAP (and the other way round for responses). The paper took tcpdump traces on
//! the proxy, so its figures also exclude the adapters; ours include the TAP write and read.
//!
//! Connections are paired first come, first served, which is exact with one client and one
//! request at a time, as the paper measured; with more, the figures mix requests.

use std::collections::{HashSet, VecDeque};

use serde::{Deserialize, Serialize};

use crate::frame::FlowKey;

/// Where on the proxy's links a first data packet is seen.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbePoint {
    /// Written into the proxy from a client connection.
    RequestIn = 0,
    /// Read from the proxy on a server connection.
    RequestOut = 1,
    /// Written into the proxy from a server connection.
    ResponseIn = 2,
    /// Read from the proxy on a client connection.
    ResponseOut = 3,
}

/// TCP FIN and RST: the connection's key may be reused afterwards.
const FIN_OR_RST: u8 = 0x01 | 0x04;
/// Samples kept per kind; later ones are counted but not stored.
const MAX_SAMPLES: usize = 100_000;

/// Pairs first data packets across the proxy and collects forwarding delays.
#[derive(Debug, Default)]
pub struct ForwardingProbe {
    seen: [HashSet<FlowKey>; 4],
    waiting_requests: VecDeque<u64>,
    waiting_responses: VecDeque<u64>,
    request_ns: Vec<u64>,
    response_ns: Vec<u64>,
}

/// Forwarding delays measured so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ForwardingSummary {
    /// Requests paired.
    pub requests: usize,
    /// Mean request forwarding delay (includes the proxy's connect to the server, as the
    /// paper's 182 ms did), in microseconds.
    pub request_mean_us: f64,
    /// Median of the same.
    pub request_median_us: f64,
    /// Responses paired.
    pub responses: usize,
    /// Mean response forwarding delay, in microseconds.
    pub response_mean_us: f64,
    /// Median of the same.
    pub response_median_us: f64,
}

impl ForwardingProbe {
    /// Notes a TCP segment at `point` at `now_ns`.
    pub fn observe(
        &mut self,
        point: ProbePoint,
        flow: FlowKey,
        payload: u16,
        flags: u8,
        now_ns: u64,
    ) {
        let index = point as usize;
        if payload > 0 && self.seen[index].insert(flow) {
            match point {
                ProbePoint::RequestIn => self.waiting_requests.push_back(now_ns),
                ProbePoint::ResponseIn => self.waiting_responses.push_back(now_ns),
                ProbePoint::RequestOut => {
                    if let Some(t) = self.waiting_requests.pop_front() {
                        push_capped(&mut self.request_ns, now_ns.saturating_sub(t));
                    }
                }
                ProbePoint::ResponseOut => {
                    if let Some(t) = self.waiting_responses.pop_front() {
                        push_capped(&mut self.response_ns, now_ns.saturating_sub(t));
                    }
                }
            }
        }
        if flags & FIN_OR_RST != 0 {
            self.seen[index].remove(&flow);
        }
    }

    /// Means and medians so far.
    pub fn summary(&self) -> ForwardingSummary {
        let (request_mean_us, request_median_us) = mean_median_us(&self.request_ns);
        let (response_mean_us, response_median_us) = mean_median_us(&self.response_ns);
        ForwardingSummary {
            requests: self.request_ns.len(),
            request_mean_us,
            request_median_us,
            responses: self.response_ns.len(),
            response_mean_us,
            response_median_us,
        }
    }
}

fn push_capped(samples: &mut Vec<u64>, value: u64) {
    if samples.len() < MAX_SAMPLES {
        samples.push(value);
    }
}

fn mean_median_us(samples: &[u64]) -> (f64, f64) {
    if samples.is_empty() {
        return (0.0, 0.0);
    }
    let mut sorted = samples.to_vec();
    sorted.sort_unstable();
    let mean = sorted.iter().sum::<u64>() as f64 / sorted.len() as f64;
    (mean / 1000.0, sorted[sorted.len() / 2] as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(port: u16) -> FlowKey {
        FlowKey {
            source: [10, 0, 0, 1],
            destination: [10, 0, 0, 2],
            source_port: port,
            destination_port: 80,
        }
    }

    #[test]
    fn pairs_first_data_packets_across_the_proxy() {
        let mut p = ForwardingProbe::default();
        let (client, server) = (flow(40000), flow(50000));
        p.observe(ProbePoint::RequestIn, client, 0, 0x02, 0); // SYN: no data
        p.observe(ProbePoint::RequestIn, client, 120, 0x18, 1_000);
        p.observe(ProbePoint::RequestIn, client, 120, 0x18, 2_000); // retransmission: ignored
        p.observe(ProbePoint::RequestOut, server, 120, 0x18, 181_000);
        p.observe(ProbePoint::ResponseIn, server, 1448, 0x10, 400_000);
        p.observe(ProbePoint::ResponseOut, client, 1448, 0x10, 400_300);
        p.observe(ProbePoint::ResponseOut, client, 1448, 0x10, 400_400); // second packet
        let s = p.summary();
        assert_eq!((s.requests, s.responses), (1, 1));
        assert_eq!(s.request_mean_us, 180.0);
        assert_eq!(s.response_median_us, 0.3);
    }

    #[test]
    fn a_reused_four_tuple_counts_again_after_fin() {
        let mut p = ForwardingProbe::default();
        let f = flow(40000);
        p.observe(ProbePoint::RequestIn, f, 10, 0x19, 0); // data + FIN
        p.observe(ProbePoint::RequestIn, f, 10, 0x18, 10);
        assert_eq!(p.waiting_requests.len(), 2);
    }
}
