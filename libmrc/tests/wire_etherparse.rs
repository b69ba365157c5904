//! Cross-check of the IPv6/UDP framing against an independent implementation (etherparse), both ways.

use std::net::Ipv6Addr;

use etherparse::{NetSlice, PacketBuilder, SlicedPacket, TransportSlice};
use mrc::wire::*;
use proptest::prelude::*;

const VERIFY: ParseOptions = ParseOptions {
    verify_icrc: true,
    trimmed: false,
};

fn write_only(ev: u32, payload: &[u8]) -> Packet<'_> {
    Packet {
        bth: Bth {
            psn: 77,
            ..Bth::new(Opcode::WriteOnly, 0x42)
        },
        body: Body::Data(Data {
            meth: Meth {
                ev,
                msn: 1,
                rqmsn: 0,
            },
            ts: Some(5),
            reth: Reth {
                va: 0x1000,
                rkey: 9,
                dma_len: payload.len() as u32,
            },
            imm: None,
            payload,
        }),
    }
}

/// Emits `frame` and checks that etherparse reads the same header fields and UDP payload.
fn check_with_etherparse(frame: &Frame<'_>) -> std::result::Result<(), TestCaseError> {
    let mut buf = vec![0u8; frame.buffer_len()];
    prop_assert_eq!(frame.emit(&mut buf), Ok(buf.len()));

    let sliced = SlicedPacket::from_ip(&buf).expect("etherparse decodes the frame");
    let Some(NetSlice::Ipv6(ip)) = &sliced.net else {
        return Err(TestCaseError::fail("not IPv6"));
    };
    let h = ip.header();
    prop_assert_eq!(h.source_addr(), frame.ip.src);
    prop_assert_eq!(h.destination_addr(), frame.ip.dst);
    prop_assert_eq!(h.traffic_class(), frame.ip.traffic_class);
    prop_assert_eq!(h.flow_label().value(), frame.ip.flow_label);
    prop_assert_eq!(h.payload_length(), frame.ip.payload_len);
    prop_assert_eq!(h.hop_limit(), frame.ip.hop_limit);
    prop_assert_eq!(h.next_header().0, IP_PROTO_UDP);
    let Some(TransportSlice::Udp(udp)) = &sliced.transport else {
        return Err(TestCaseError::fail("not UDP"));
    };
    prop_assert_eq!(udp.source_port(), frame.udp.src_port);
    prop_assert_eq!(udp.destination_port(), UDP_PORT);
    prop_assert_eq!(udp.length(), frame.udp.length);
    prop_assert_eq!(udp.checksum(), 0);
    prop_assert_eq!(udp.payload().len(), frame.mrc.buffer_len());
    prop_assert_eq!(Packet::parse(udp.payload(), VERIFY), Ok(frame.mrc));

    // The header-only parsers agree too.
    let (eh, rest) = etherparse::Ipv6Header::from_slice(&buf).unwrap();
    prop_assert_eq!(eh.flow_label.value(), frame.ip.flow_label);
    let (eu, _) = etherparse::UdpHeader::from_slice(rest).unwrap();
    prop_assert_eq!(eu.length, frame.udp.length);
    prop_assert_eq!(Frame::parse(&buf, VERIFY), Ok(*frame));
    Ok(())
}

#[test]
fn usid_frame_decodes_in_etherparse() {
    let template = EvTemplate::usid(
        0xfcbb_bb00,
        &[
            EvField {
                width: 16,
                init: 0x1000,
                mask: 0x000F,
            },
            EvField {
                width: 16,
                init: 0x2000,
                mask: 0,
            },
            EvField {
                width: 16,
                init: 0xe000,
                mask: 0x00FF,
            },
        ],
    )
    .unwrap();
    let ev = 0x305;
    let dst = template.expand_ipv6(ev).unwrap();
    assert_eq!(
        dst,
        "fcbb:bb00:1003:2000:e005::".parse::<Ipv6Addr>().unwrap()
    );
    let payload = [0xAB; 100];
    let frame = Frame::new(
        "fd00::1".parse().unwrap(),
        dst,
        traffic_class(TrafficClass::Data.default_dscp(), ECN_ECT0),
        ev,
        write_only(ev, &payload),
    );
    check_with_etherparse(&frame).unwrap();
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn our_frames_decode_in_etherparse(
        src in any::<u128>(),
        dst in any::<u128>(),
        tc in any::<u8>(),
        ev in any::<u32>(),
        payload in prop::collection::vec(any::<u8>(), 0..2000),
    ) {
        let frame = Frame::new(Ipv6Addr::from(src), Ipv6Addr::from(dst), tc, ev, write_only(ev, &payload));
        prop_assert_eq!(frame.ip.flow_label, ev & 0xF_FFFF);
        prop_assert_eq!(frame.udp.src_port, 0xC000 | (ev & 0x3FFF) as u16);
        prop_assert_eq!(frame.ev(), Some(ev));
        check_with_etherparse(&frame)?;
    }

    #[test]
    fn etherparse_frames_decode_here(
        src in any::<[u8; 16]>(),
        dst in any::<[u8; 16]>(),
        hop in any::<u8>(),
        sport in any::<u16>(),
        ev in any::<u32>(),
        payload in prop::collection::vec(any::<u8>(), 0..2000),
    ) {
        let packet = write_only(ev, &payload);
        let mut mrc = vec![0u8; packet.buffer_len()];
        packet.emit(&mut mrc).unwrap();
        let mut buf = Vec::new();
        PacketBuilder::ipv6(src, dst, hop).udp(sport, UDP_PORT).write(&mut buf, &mrc).unwrap();
        let f = Frame::parse(&buf, VERIFY).unwrap();
        prop_assert_eq!(f.ip.src, Ipv6Addr::from(src));
        prop_assert_eq!(f.ip.dst, Ipv6Addr::from(dst));
        prop_assert_eq!(f.ip.hop_limit, hop);
        prop_assert_eq!(f.udp.src_port, sport);
        prop_assert_eq!(usize::from(f.udp.length), 8 + mrc.len());
        prop_assert_eq!(f.mrc, packet);
    }
}
