//! Two endpoints with one QP each, connected, for tests that carry the datagrams between them by hand.

use mrc::testing::{QpEnd, VecMemory, connect_pair};
use mrc::*;

/// One endpoint: its QP, its CQ and a registered region (local and remote write) of the asked length.
pub(crate) struct Side {
    pub ep: Endpoint,
    pub mem: VecMemory,
    pub qpn: u32,
    pub addr: u64,
    pub keys: MrKeys,
    pub cq: CqId,
}

fn side(cfg: &QpConfig, region: u32) -> Side {
    let mut ep = Endpoint::new(EndpointConfig {
        ports: 1,
        ..EndpointConfig::default()
    })
    .unwrap();
    let mut mem = VecMemory::new(0x10_0000);
    let addr = mem.alloc(u64::from(region));
    let pd = ep.alloc_pd();
    let cq = ep.create_cq(16);
    let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
    let keys = ep.reg_mr(pd, addr, u64::from(region), access).unwrap();
    let mut init = QpInit::new(pd, cq);
    init.config = cfg.clone();
    let qpn = ep
        .open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)
        .unwrap();
    Side {
        ep,
        mem,
        qpn,
        addr,
        keys,
        cq,
    }
}

/// Sides A (peer 0) and B (peer 1), connected at time zero, both send queues starting at PSN 7.
pub(crate) fn connected(cfg: &QpConfig, region: u32) -> (Side, Side) {
    let (mut a, mut b) = (side(cfg, region), side(cfg, region));
    let end = |s: &Side, peer| QpEnd {
        qpn: s.qpn,
        peer: PeerId(peer),
        sq_psn: 7,
    };
    let (ea, eb) = (end(&a, 1), end(&b, 0));
    connect_pair(Instant::ZERO, &mut a.ep, ea, &mut b.ep, eb).unwrap();
    (a, b)
}
