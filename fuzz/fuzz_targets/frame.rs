//! The whole IPv6/UDP/MRC frame parser (and the IPv6 and UDP header parsers) on arbitrary bytes: nothing
//! panics, and a parsed frame re-emits to bytes that parse to the same frame.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mrc::wire::{Frame, Ipv6Header, ParseOptions, TrafficClass, UdpHeader};

fuzz_target!(|data: &[u8]| {
    if let Ok(ip) = Ipv6Header::parse(data) {
        let mut buf = [0u8; 40];
        ip.emit(&mut buf).expect("an IPv6 header fits 40 bytes");
        assert_eq!(Ipv6Header::parse(&buf).ok(), Some(ip));
        // The DSCP names a traffic class (trim marks included) or none; a class maps back to its DSCP.
        if let Some(c) = TrafficClass::from_dscp(ip.dscp()) {
            assert_eq!(TrafficClass::from_dscp(c.default_dscp()), Some(c));
        }
        let _ = ip.ecn();
    }
    if let Ok(udp) = UdpHeader::parse(data) {
        let mut buf = [0u8; 8];
        udp.emit(&mut buf).expect("a UDP header fits 8 bytes");
        assert_eq!(UdpHeader::parse(&buf).ok(), Some(udp));
    }
    for (verify_icrc, trimmed) in [(false, false), (true, false), (false, true)] {
        let opts = ParseOptions {
            verify_icrc,
            trimmed,
        };
        let Ok(f) = Frame::parse(data, opts) else {
            continue;
        };
        let _ = (f.describe(), f.ev());
        if trimmed {
            continue;
        }
        let mut buf = vec![0u8; f.buffer_len()];
        let n = f.emit(&mut buf).expect("buffer_len bytes hold the frame");
        let again = Frame::parse(
            &buf[..n],
            ParseOptions {
                verify_icrc: true,
                trimmed: false,
            },
        )
        .expect("an emitted frame parses with its ICRC checked");
        assert_eq!(again, f, "frame does not round-trip");
    }
});
