//! The datapath's node file (`NodeConfig::from_toml`) on arbitrary text: a bad file is an error that names a
//! field, never a panic, and a good one expands every path of every plane to a destination.
#![no_main]

use std::net::{Ipv6Addr, SocketAddrV6};

use libfuzzer_sys::fuzz_target;
use mrc_host::{NodeConfig, PeerPlane};

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let cfg = match NodeConfig::from_toml(text) {
        Ok(c) => c,
        Err(e) => {
            assert!(!e.field.is_empty() && !e.problem.is_empty(), "{e:?}");
            return;
        }
    };
    assert!(cfg.plane_count() >= 1 && cfg.plane_count() <= mrc_host::MAX_PLANES);
    for (p, plane) in cfg.planes.iter().enumerate() {
        let peer = PeerPlane {
            addr: SocketAddrV6::new(Ipv6Addr::from(u128::from(plane.t0) << 64 | 1), 4791, 0, 0),
            t0: plane.t0.wrapping_add(1),
        };
        for path in [0, 1, 7, u32::MAX] {
            let d = cfg.destination(p, &peer, path);
            if cfg.usid_block.is_none() {
                assert_eq!(d, peer.addr, "plain mode sends to the peer's address");
            }
        }
        let _ = NodeConfig::host_usid(plane.addr.ip());
    }
});
