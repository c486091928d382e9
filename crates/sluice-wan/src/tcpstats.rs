//! TCP counters per host, from the host namespace's `/proc/net/snmp` and `/proc/net/netstat`
//! (the MIB counters `netstat -s` prints): what the WWW 2002 paper reports per machine
//! (retransmission timeouts on the server, ACK ratio) without running tools in each namespace.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::WanError;
use crate::netns;

/// The counters we report, for one host.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpCounters {
    /// Segments sent (`Tcp: OutSegs`), retransmissions excluded.
    pub segments_out: u64,
    /// Segments received (`Tcp: InSegs`).
    pub segments_in: u64,
    /// Segments retransmitted (`Tcp: RetransSegs`).
    pub retransmitted: u64,
    /// Retransmission timeouts (`TcpExt: TCPTimeouts`).
    pub timeouts: u64,
    /// Data segments sent for the first time (`TcpExt: TCPOrigDataSent`).
    pub data_segments_out: u64,
    /// Pure ACKs received (`TcpExt: TCPPureAcks + TCPHPAcks`, slow and fast path).
    pub pure_acks_in: u64,
    /// Connections opened (`Tcp: ActiveOpens + PassiveOpens`).
    pub connections: u64,
}

impl TcpCounters {
    /// Data segments sent per pure ACK received: about 2 with delayed ACKs, 1 when the peer
    /// ACKs every segment (on the server, the paper's ACK ratio, §4.2 and Note 1).
    pub fn data_segments_per_ack(&self) -> f64 {
        self.data_segments_out as f64 / self.pure_acks_in.max(1) as f64
    }

    /// `self - earlier`, counter by counter (for a run between two snapshots).
    pub fn since(&self, earlier: &TcpCounters) -> TcpCounters {
        TcpCounters {
            segments_out: self.segments_out.saturating_sub(earlier.segments_out),
            segments_in: self.segments_in.saturating_sub(earlier.segments_in),
            retransmitted: self.retransmitted.saturating_sub(earlier.retransmitted),
            timeouts: self.timeouts.saturating_sub(earlier.timeouts),
            data_segments_out: self
                .data_segments_out
                .saturating_sub(earlier.data_segments_out),
            pure_acks_in: self.pure_acks_in.saturating_sub(earlier.pure_acks_in),
            connections: self.connections.saturating_sub(earlier.connections),
        }
    }
}

/// Reads the counters of namespace `netns`.
pub fn read(netns: &str) -> Result<TcpCounters, WanError> {
    let texts = netns::within(netns, || {
        // thread-self, not self: the namespace is this thread's, not the process's.
        let snmp = std::fs::read_to_string("/proc/thread-self/net/snmp");
        let netstat = std::fs::read_to_string("/proc/thread-self/net/netstat");
        snmp.and_then(|s| netstat.map(|n| (s, n)))
    })?;
    let (snmp, netstat) = texts
        .map_err(|source| WanError::io(format!("cannot read /proc/net of {netns}"), source))?;
    Ok(from_tables(&parse_tables(&snmp), &parse_tables(&netstat)))
}

fn from_tables(
    snmp: &BTreeMap<(String, String), u64>,
    netstat: &BTreeMap<(String, String), u64>,
) -> TcpCounters {
    let s = |k: &str| {
        snmp.get(&("Tcp".to_owned(), k.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    let x = |k: &str| {
        netstat
            .get(&("TcpExt".to_owned(), k.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    TcpCounters {
        segments_out: s("OutSegs"),
        segments_in: s("InSegs"),
        retransmitted: s("RetransSegs"),
        timeouts: x("TCPTimeouts"),
        data_segments_out: x("TCPOrigDataSent"),
        pure_acks_in: x("TCPPureAcks") + x("TCPHPAcks"),
        connections: s("ActiveOpens") + s("PassiveOpens"),
    }
}

/// Parses the `Proto: name name ...` / `Proto: value value ...` line pairs of /proc/net/snmp
/// and /proc/net/netstat into (proto, name) -> value.
fn parse_tables(text: &str) -> BTreeMap<(String, String), u64> {
    let mut out = BTreeMap::new();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let (Some((proto, names)), Some((_, values))) =
            (names.split_once(':'), values.split_once(':'))
        else {
            continue;
        };
        for (name, value) in names.split_whitespace().zip(values.split_whitespace()) {
            if let Ok(value) = value.parse::<u64>() {
                out.insert((proto.to_owned(), name.to_owned()), value);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_proc_format() {
        let snmp = "Tcp: RtoAlgorithm ActiveOpens PassiveOpens InSegs OutSegs RetransSegs\n\
                    Tcp: 1 3 4 100 90 7\n";
        let netstat = "TcpExt: TCPTimeouts TCPPureAcks TCPHPAcks TCPOrigDataSent\n\
                       TcpExt: 2 10 30 80\n";
        let c = from_tables(&parse_tables(snmp), &parse_tables(netstat));
        assert_eq!(
            c,
            TcpCounters {
                segments_out: 90,
                segments_in: 100,
                retransmitted: 7,
                timeouts: 2,
                data_segments_out: 80,
                pure_acks_in: 40,
                connections: 7,
            }
        );
        assert_eq!(c.data_segments_per_ack(), 2.0);
    }
}
