//! IPv6 and UDP headers around an MRC packet (spec §1, §8): whole frames for test vectors, simulator traces and
//! pcap export. The engine itself deals in UDP payloads.

use std::net::Ipv6Addr;

use super::{AUTH_LEN, AuthTag, Packet, ParseOptions, Reader, Result, UDP_PORT, Writer};
use super::{Error, packet::Body};

/// ECN codepoint: not ECN-capable.
pub const ECN_NOT_ECT: u8 = 0;
/// ECN codepoint ECT(1).
pub const ECN_ECT1: u8 = 1;
/// ECN codepoint ECT(0), which senders set on data packets.
pub const ECN_ECT0: u8 = 2;
/// ECN codepoint: congestion experienced.
pub const ECN_CE: u8 = 3;
/// IPv6 next-header value of UDP.
pub const IP_PROTO_UDP: u8 = 17;

const HOP_LIMIT: u8 = 64;
const FLOW_LABEL_MASK: u32 = 0x000F_FFFF;

// spec: WIRE-ENC-4
/// The IPv6 traffic class of a DSCP (upper 6 bits) and an ECN codepoint (lower 2).
pub const fn traffic_class(dscp: u8, ecn: u8) -> u8 {
    (dscp << 2) | (ecn & 3)
}

// spec: WIRE-DSCP-1
/// The traffic classes MRC marks packets with. The engine deals in classes; the datapath maps them to DSCP
/// values, which deployments may remap.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrafficClass {
    /// First transmissions of data; trimmable.
    Data,
    /// Retransmissions of data; trimmable.
    DataRetx,
    /// Data that must not be trimmed.
    NoTrim,
    /// SACK, NACK, ACK, PROBE and endpoint packets; never trimmed.
    Control,
    /// A packet a switch trimmed.
    Trimmed,
    /// A packet trimmed at the last hop.
    TrimmedLastHop,
}

impl TrafficClass {
    /// The spec's default DSCP value of the class.
    pub const fn default_dscp(self) -> u8 {
        match self {
            TrafficClass::Data => 10,
            TrafficClass::DataRetx => 12,
            TrafficClass::NoTrim => 14,
            TrafficClass::Control => 46,
            TrafficClass::Trimmed => 7,
            TrafficClass::TrimmedLastHop => 6,
        }
    }

    /// The class of a DSCP value under the default mapping.
    pub fn from_dscp(dscp: u8) -> Option<Self> {
        Some(match dscp {
            10 => TrafficClass::Data,
            12 => TrafficClass::DataRetx,
            14 => TrafficClass::NoTrim,
            46 => TrafficClass::Control,
            7 => TrafficClass::Trimmed,
            6 => TrafficClass::TrimmedLastHop,
            _ => return None,
        })
    }

    // spec: WIRE-ICRC-2
    /// Whether a packet of this class lost its tail: parse it with [`ParseOptions::trimmed`].
    pub const fn is_trimmed(self) -> bool {
        matches!(self, TrafficClass::Trimmed | TrafficClass::TrimmedLastHop)
    }
}

/// The fixed IPv6 header (no extension headers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ipv6Header {
    /// DSCP and ECN; see [`traffic_class`].
    pub traffic_class: u8,
    /// 20 bits; MRC puts EV bits 19..0 here.
    pub flow_label: u32,
    /// Bytes after this header.
    pub payload_len: u16,
    /// [`IP_PROTO_UDP`] for MRC.
    pub next_header: u8,
    /// Hops left.
    pub hop_limit: u8,
    /// The sending port's address.
    pub src: Ipv6Addr,
    /// The peer's address, or a uSID container naming the path.
    pub dst: Ipv6Addr,
}

impl Ipv6Header {
    /// Bytes of the header.
    pub const LEN: usize = 40;

    /// The DSCP (upper 6 bits of the traffic class).
    pub const fn dscp(&self) -> u8 {
        self.traffic_class >> 2
    }

    /// The ECN codepoint (lower 2 bits of the traffic class).
    pub const fn ecn(&self) -> u8 {
        self.traffic_class & 3
    }

    /// Parses the first [`Self::LEN`] bytes; `Malformed` unless the version is 6.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b: &[u8; Self::LEN] = Reader::new(buf).take()?;
        if b[0] >> 4 != 6 {
            return Err(Error::Malformed);
        }
        let mut src = [0u8; 16];
        let mut dst = [0u8; 16];
        src.copy_from_slice(&b[8..24]);
        dst.copy_from_slice(&b[24..40]);
        Ok(Self {
            traffic_class: (b[0] << 4) | (b[1] >> 4),
            flow_label: u32::from_be_bytes([0, b[1] & 0x0F, b[2], b[3]]),
            payload_len: u16::from_be_bytes([b[4], b[5]]),
            next_header: b[6],
            hop_limit: b[7],
            src: Ipv6Addr::from(src),
            dst: Ipv6Addr::from(dst),
        })
    }

    /// Writes the header into the first [`Self::LEN`] bytes (the flow label masked to 20 bits) and returns
    /// [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let b: &mut [u8; Self::LEN] = Writer::new(buf).take()?;
        let [_, f1, f2, f3] = (self.flow_label & FLOW_LABEL_MASK).to_be_bytes();
        let [l0, l1] = self.payload_len.to_be_bytes();
        let tc = self.traffic_class;
        b[..8].copy_from_slice(&[
            0x60 | (tc >> 4),
            (tc << 4) | f1,
            f2,
            f3,
            l0,
            l1,
            self.next_header,
            self.hop_limit,
        ]);
        b[8..24].copy_from_slice(&self.src.octets());
        b[24..40].copy_from_slice(&self.dst.octets());
        Ok(Self::LEN)
    }
}

/// The UDP header.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct UdpHeader {
    /// `0xC000 | (EV & 0x3FFF)` where the sender controls it.
    pub src_port: u16,
    /// [`UDP_PORT`] for MRC.
    pub dst_port: u16,
    /// Bytes of header and payload.
    pub length: u16,
    /// Zero for MRC.
    pub checksum: u16,
}

impl UdpHeader {
    /// Bytes of the header.
    pub const LEN: usize = 8;

    /// Parses the first [`Self::LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        let b: &[u8; Self::LEN] = Reader::new(buf).take()?;
        Ok(Self {
            src_port: u16::from_be_bytes([b[0], b[1]]),
            dst_port: u16::from_be_bytes([b[2], b[3]]),
            length: u16::from_be_bytes([b[4], b[5]]),
            checksum: u16::from_be_bytes([b[6], b[7]]),
        })
    }

    /// Writes the header into the first [`Self::LEN`] bytes and returns [`Self::LEN`].
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let [s0, s1] = self.src_port.to_be_bytes();
        let [d0, d1] = self.dst_port.to_be_bytes();
        let [l0, l1] = self.length.to_be_bytes();
        let [c0, c1] = self.checksum.to_be_bytes();
        *Writer::new(buf).take::<{ Self::LEN }>()? = [s0, s1, d0, d1, l0, l1, c0, c1];
        Ok(Self::LEN)
    }
}

/// A whole IPv6/UDP/MRC frame.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Frame<'a> {
    /// The IPv6 header.
    pub ip: Ipv6Header,
    /// The UDP header.
    pub udp: UdpHeader,
    /// The UDP payload.
    pub mrc: Packet<'a>,
    /// The AUTH tag the UDP payload carries after its headers (BTH.AT, spec WIRE-AUTH-1), as it was, so that a
    /// captured frame re-emits byte for byte.
    pub auth: Option<AuthTag>,
}

impl<'a> Frame<'a> {
    /// A frame for `packet` sent on `ev`: flow label and UDP source port from the EV, destination port 4791,
    /// zero checksum, hop limit 64 and lengths that match the packet (saturating at 65535, which no MTU
    /// allows).
    pub fn new(
        src: Ipv6Addr,
        dst: Ipv6Addr,
        traffic_class: u8,
        ev: u32,
        packet: Packet<'a>,
    ) -> Self {
        let udp_len = u16::try_from(UdpHeader::LEN + packet.buffer_len()).unwrap_or(u16::MAX);
        Self {
            ip: Ipv6Header {
                traffic_class,
                // spec: WIRE-ENC-5
                flow_label: ev & FLOW_LABEL_MASK,
                payload_len: udp_len,
                next_header: IP_PROTO_UDP,
                hop_limit: HOP_LIMIT,
                src,
                // spec: WIRE-ENC-2
                dst,
            },
            udp: UdpHeader {
                // spec: WIRE-ENC-5
                src_port: 0xC000 | (ev & 0x3FFF) as u16,
                // spec: WIRE-ENC-1
                dst_port: UDP_PORT,
                length: udp_len,
                // spec: WIRE-ENC-3
                checksum: 0,
            },
            mrc: packet,
            auth: None,
        }
    }

    /// Parses a frame that starts with the IPv6 header. `Malformed` unless the next header is UDP, the IPv6
    /// and UDP lengths agree and the destination port is [`UDP_PORT`]; `Truncated` if the buffer is shorter
    /// than the IPv6 payload length says. Bytes after the IPv6 payload (link padding) are ignored. The UDP
    /// checksum is not checked: MRC sends it as zero and relies on the ICRC.
    pub fn parse(buf: &'a [u8], opts: ParseOptions) -> Result<Self> {
        let ip = Ipv6Header::parse(buf)?;
        if ip.next_header != IP_PROTO_UDP {
            return Err(Error::Malformed);
        }
        let end = Ipv6Header::LEN + usize::from(ip.payload_len);
        let datagram = buf.get(Ipv6Header::LEN..end).ok_or(Error::Truncated)?;
        let udp = UdpHeader::parse(datagram)?;
        // spec: WIRE-ENC-1
        if udp.length != ip.payload_len || udp.dst_port != UDP_PORT {
            return Err(Error::Malformed);
        }
        let payload = datagram.get(UdpHeader::LEN..).ok_or(Error::Truncated)?;
        let (mrc, auth) = Packet::parse_auth(payload, opts)?;
        Ok(Self { ip, udp, mrc, auth })
    }

    /// Bytes of the whole frame as [`emit`](Self::emit) writes it.
    pub fn buffer_len(&self) -> usize {
        Ipv6Header::LEN
            + UdpHeader::LEN
            + self.mrc.buffer_len()
            + if self.auth.is_some() { AUTH_LEN } else { 0 }
    }

    /// Writes IPv6 header, UDP header and the sealed MRC packet, with the header fields as they are, and
    /// returns [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        if buf.len() < self.buffer_len() {
            return Err(Error::Truncated);
        }
        let ip = self.ip.emit(buf)?;
        let rest = buf.get_mut(ip..).ok_or(Error::Truncated)?;
        let udp = self.udp.emit(rest)?;
        let rest = rest.get_mut(udp..).ok_or(Error::Truncated)?;
        Ok(ip + udp + self.mrc.emit_tagged(self.auth.as_ref(), rest)?)
    }

    /// Every field as `(name, value)` text: the IPv6 and UDP fields (prefixed `ip.` and `udp.`) and then
    /// those of [`Packet::describe`].
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let (ip, udp) = (&self.ip, &self.udp);
        let mut out = vec![
            ("ip.src", ip.src.to_string()),
            ("ip.dst", ip.dst.to_string()),
            ("ip.dscp", ip.dscp().to_string()),
            ("ip.ecn", ip.ecn().to_string()),
            ("ip.flow_label", format!("{:#07x}", ip.flow_label)),
            ("ip.payload_len", ip.payload_len.to_string()),
            ("ip.next_header", ip.next_header.to_string()),
            ("ip.hop_limit", ip.hop_limit.to_string()),
            ("udp.src_port", format!("{:#06x}", udp.src_port)),
            ("udp.dst_port", udp.dst_port.to_string()),
            ("udp.length", udp.length.to_string()),
            ("udp.checksum", format!("{:#06x}", udp.checksum)),
        ];
        out.extend(self.mrc.describe());
        out
    }

    /// The EV the MRC headers carry (the authoritative copy), if the packet type has one (not an ACK).
    pub fn ev(&self) -> Option<u32> {
        // spec: WIRE-ENC-5
        match &self.mrc.body {
            Body::Data(d) => Some(d.meth.ev),
            Body::Sack(s) => Some(s.ev),
            Body::Nack(n) => Some(n.ev),
            Body::Probe(p) => Some(p.ev),
            Body::EpRequest(q) => Some(q.ev),
            Body::EpResponse(e) => Some(e.ev),
            Body::Ack(_) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{Bth, Opcode, Probe};

    #[test]
    fn ipv6_layout() {
        let h = Ipv6Header {
            traffic_class: traffic_class(46, ECN_ECT0),
            flow_label: 0xA_BCDE,
            payload_len: 0x0102,
            next_header: IP_PROTO_UDP,
            hop_limit: 63,
            src: "2001:db8::1".parse().unwrap(),
            dst: "fcbb:bb00:1003:2000:e005::".parse().unwrap(),
        };
        let mut b = [0u8; 40];
        assert_eq!(h.emit(&mut b), Ok(40));
        // Version 6, TC 0xBA (DSCP 46, ECT0), flow label 0xABCDE.
        assert_eq!(&b[..8], &[0x6B, 0xAA, 0xBC, 0xDE, 0x01, 0x02, 17, 63]);
        assert_eq!(&b[8..12], &[0x20, 0x01, 0x0d, 0xb8]);
        assert_eq!(&b[24..30], &[0xfc, 0xbb, 0xbb, 0x00, 0x10, 0x03]);
        let back = Ipv6Header::parse(&b).unwrap();
        assert_eq!(back, h);
        assert_eq!((back.dscp(), back.ecn()), (46, ECN_ECT0));
        b[0] = 0x4B;
        assert_eq!(Ipv6Header::parse(&b), Err(Error::Malformed));
        assert_eq!(Ipv6Header::parse(&b[..39]), Err(Error::Truncated));
    }

    #[test]
    fn udp_layout() {
        let u = UdpHeader {
            src_port: 0xC123,
            dst_port: UDP_PORT,
            length: 60,
            checksum: 0,
        };
        let mut b = [0u8; 8];
        assert_eq!(u.emit(&mut b), Ok(8));
        assert_eq!(b, [0xC1, 0x23, 0x12, 0xB7, 0, 60, 0, 0]);
        assert_eq!(UdpHeader::parse(&b), Ok(u));
    }

    #[test]
    fn frame_new_derives_fields_from_ev() {
        let p = Packet {
            bth: Bth::new(Opcode::Probe, 9),
            body: Body::Probe(Probe {
                ev: 0xABCD_EF12,
                ts: 7,
            }),
        };
        let f = Frame::new(
            Ipv6Addr::LOCALHOST,
            Ipv6Addr::LOCALHOST,
            traffic_class(TrafficClass::Control.default_dscp(), ECN_NOT_ECT),
            0xABCD_EF12,
            p,
        );
        assert_eq!(f.ip.flow_label, 0xD_EF12);
        assert_eq!(f.udp.src_port, 0xC000 | 0x2F12);
        assert_eq!(f.udp.length as usize, 8 + 12 + 8 + 4);
        assert_eq!(f.ev(), Some(0xABCD_EF12));
        let mut buf = [0u8; 128];
        let n = f.emit(&mut buf).unwrap();
        assert_eq!(n, f.buffer_len());
        let opts = ParseOptions {
            verify_icrc: true,
            trimmed: false,
        };
        assert_eq!(Frame::parse(&buf[..n], opts), Ok(f));
        assert_eq!(Frame::parse(&buf[..n + 3], opts), Ok(f), "padding ignored");
        assert_eq!(Frame::parse(&buf[..n - 1], opts), Err(Error::Truncated));
        let mut bad = buf;
        bad[6] = 6;
        assert_eq!(Frame::parse(&bad[..n], opts), Err(Error::Malformed));
        let mut bad = buf;
        bad[40 + 3] ^= 1;
        assert_eq!(Frame::parse(&bad[..n], opts), Err(Error::Malformed));
        assert_eq!(f.emit(&mut buf[..n - 1]), Err(Error::Truncated));
    }

    #[test]
    fn dscp_classes() {
        let all = [
            TrafficClass::Data,
            TrafficClass::DataRetx,
            TrafficClass::NoTrim,
            TrafficClass::Control,
            TrafficClass::Trimmed,
            TrafficClass::TrimmedLastHop,
        ];
        for c in all {
            assert_eq!(TrafficClass::from_dscp(c.default_dscp()), Some(c));
        }
        assert_eq!(TrafficClass::from_dscp(0), None);
        assert_eq!(all.map(TrafficClass::default_dscp), [10, 12, 14, 46, 7, 6]);
    }
}
