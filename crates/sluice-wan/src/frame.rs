//! Just enough Ethernet/IPv4/TCP parsing to classify a frame: its flow key for per-flow rate
//! limits, and whether it carries TCP payload (for the forwarding-delay probe). Frames come
//! from the kernel of a host we created, but are still parsed without panics.

/// A TCP 4-tuple, as addresses and ports in network byte order.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct FlowKey {
    /// Source IPv4 address.
    pub source: [u8; 4],
    /// Destination IPv4 address.
    pub destination: [u8; 4],
    /// Source port.
    pub source_port: u16,
    /// Destination port.
    pub destination_port: u16,
}

/// What the wire needs to know about a frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FrameKind {
    /// TCP over IPv4 with `payload` bytes of TCP data and the given flags byte.
    Tcp {
        /// The 4-tuple.
        flow: FlowKey,
        /// TCP payload bytes (0 for a pure ACK).
        payload: u16,
        /// TCP flags (FIN 0x01, SYN 0x02, RST 0x04, PSH 0x08, ACK 0x10).
        flags: u8,
    },
    /// Other IP traffic (UDP, ICMP, IPv6).
    OtherIp,
    /// Not IP: ARP and the like. Never dropped by a loss model, so neighbours always resolve.
    NotIp,
}

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const PROTO_TCP: u8 = 6;

/// Classifies an Ethernet frame.
pub fn classify(frame: &[u8]) -> FrameKind {
    let Some(ethertype) = frame.get(12..14).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return FrameKind::NotIp;
    };
    match ethertype {
        ETHERTYPE_IPV4 => classify_ipv4(frame.get(14..).unwrap_or_default()),
        ETHERTYPE_IPV6 => FrameKind::OtherIp,
        _ => FrameKind::NotIp,
    }
}

fn classify_ipv4(ip: &[u8]) -> FrameKind {
    let Some(&version_ihl) = ip.first() else {
        return FrameKind::OtherIp;
    };
    let header = usize::from(version_ihl & 0x0f) * 4;
    let (Some(total), Some(&protocol)) = (
        ip.get(2..4).map(|b| u16::from_be_bytes([b[0], b[1]])),
        ip.get(9),
    ) else {
        return FrameKind::OtherIp;
    };
    if protocol != PROTO_TCP || header < 20 {
        return FrameKind::OtherIp;
    }
    let (Some(source), Some(destination), Some(tcp)) =
        (ip.get(12..16), ip.get(16..20), ip.get(header..))
    else {
        return FrameKind::OtherIp;
    };
    let (Some(ports), Some(&offset), Some(&flags)) = (tcp.get(0..4), tcp.get(12), tcp.get(13))
    else {
        return FrameKind::OtherIp;
    };
    let tcp_header = usize::from(offset >> 4) * 4;
    let payload = usize::from(total).saturating_sub(header + tcp_header);
    FrameKind::Tcp {
        flow: FlowKey {
            source: [source[0], source[1], source[2], source[3]],
            destination: [
                destination[0],
                destination[1],
                destination[2],
                destination[3],
            ],
            source_port: u16::from_be_bytes([ports[0], ports[1]]),
            destination_port: u16::from_be_bytes([ports[2], ports[3]]),
        },
        payload: u16::try_from(payload).unwrap_or(u16::MAX),
        flags,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// An Ethernet + IPv4 + TCP frame with `payload` data bytes.
    pub(crate) fn tcp_frame(sport: u16, dport: u16, payload: usize) -> Vec<u8> {
        let mut f = vec![0u8; 14 + 20 + 20 + payload];
        f[12..14].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        f[14] = 0x45;
        let total = u16::try_from(40 + payload).unwrap();
        f[16..18].copy_from_slice(&total.to_be_bytes());
        f[23] = PROTO_TCP;
        f[26..30].copy_from_slice(&[10, 0, 0, 1]);
        f[30..34].copy_from_slice(&[10, 0, 0, 2]);
        f[34..36].copy_from_slice(&sport.to_be_bytes());
        f[36..38].copy_from_slice(&dport.to_be_bytes());
        f[46] = 5 << 4;
        f[47] = 0x18;
        f
    }

    #[test]
    fn tcp_frames_have_a_flow_and_payload() {
        let kind = classify(&tcp_frame(40000, 80, 100));
        let FrameKind::Tcp {
            flow,
            payload,
            flags,
        } = kind
        else {
            panic!("{kind:?}")
        };
        assert_eq!(
            (flow.source_port, flow.destination_port, payload, flags),
            (40000, 80, 100, 0x18)
        );
        assert_eq!(flow.destination, [10, 0, 0, 2]);
    }

    #[test]
    fn short_and_odd_frames_do_not_panic() {
        let full = tcp_frame(1, 2, 10);
        for len in 0..full.len() {
            let _ = classify(&full[..len]);
        }
        let mut arp = vec![0u8; 42];
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(classify(&arp), FrameKind::NotIp);
    }
}
