//! Spraying granularity (spec PATH-EV-6): with `ev_burst` = k a QP sends k consecutive new packets on one EV,
//! then moves on in PATH-SEL-1's rotation; the endpoint serves a bursting QP again at once, so even with other
//! QPs sending, each burst leaves back to back (a train for a host's segmentation offload).

use mrc::testing::{QpEnd, connect_pair};
use mrc::*;

const BASE: u64 = 0x10_0000;
const MTU: u32 = 256;
const PLANES: u8 = 4;

/// Flat memory at `BASE`.
struct Flat(Vec<u8>);

impl Memory for Flat {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        let at = (addr - BASE) as usize;
        dst.copy_from_slice(&self.0[at..at + dst.len()]);
    }
    fn write(&mut self, addr: u64, src: &[u8]) {
        let at = (addr - BASE) as usize;
        self.0[at..at + src.len()].copy_from_slice(src);
    }
}

/// A's data packets, as (QP, plane, EV), when each of `qps` QPs WRITEs `packets` packets to B.
fn sprayed(burst: u8, qps: usize, packets: u32) -> Vec<(u32, u8, u32)> {
    let len = u64::from(MTU * packets) * qps as u64;
    let mut eps: Vec<(Endpoint, Pd, MrKeys, CqId)> = (0..2)
        .map(|_| {
            let mut ep = Endpoint::new(EndpointConfig {
                ports: PLANES,
                ..EndpointConfig::default()
            })
            .unwrap();
            let pd = ep.alloc_pd();
            let cq = ep.create_cq(64);
            let keys = ep
                .reg_mr(pd, BASE, len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
                .unwrap();
            (ep, pd, keys, cq)
        })
        .collect();
    let mut qpns = Vec::new();
    for q in 0..qps {
        let ends: Vec<u32> = eps
            .iter_mut()
            .map(|(ep, pd, _, cq)| {
                let mut init = QpInit::new(*pd, *cq);
                init.config = QpConfig {
                    mtu: MTU,
                    ev: EvConfig::with_planes(PLANES, 4),
                    ev_burst: burst,
                    ..QpConfig::default()
                };
                ep.open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)
                    .unwrap()
            })
            .collect();
        let end = |qpn, peer| QpEnd {
            qpn,
            peer: PeerId(peer),
            sq_psn: 100,
        };
        let (a, b) = eps.split_at_mut(1);
        connect_pair(
            Instant::ZERO,
            &mut a[0].0,
            end(ends[0], 1),
            &mut b[0].0,
            end(ends[1], 0),
        )
        .unwrap();
        let (lkey, rkey) = (eps[0].2.lkey, eps[1].2.rkey);
        let at = BASE + u64::from(MTU * packets) * q as u64;
        let sge = [Sge {
            addr: at,
            len: MTU * packets,
            lkey,
        }];
        let wr = SendWr {
            wr_id: q as u64,
            op: SendOp::Write {
                remote_addr: at,
                rkey,
            },
            sges: &sge,
            signaled: true,
            solicited: false,
        };
        eps[0].0.post_send(ends[0], &wr, Instant::ZERO).unwrap();
        qpns.push(ends[0]);
    }
    let mut mem = Flat(vec![7; len as usize]);
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(t) = eps[0].0.poll_transmit(Instant::ZERO, &mut buf, &mut mem) {
        if t.class != wire::TrafficClass::Control {
            out.push((t.qpn, t.plane, t.ev));
        }
    }
    assert_eq!(out.len(), qps * packets as usize, "every packet left");
    out
}

/// Lengths of the runs of equal consecutive items.
fn runs<T: PartialEq>(v: &[T]) -> Vec<usize> {
    let mut r: Vec<usize> = Vec::new();
    for (i, x) in v.iter().enumerate() {
        if i > 0 && v[i - 1] == *x {
            *r.last_mut().unwrap() += 1;
        } else {
            r.push(1);
        }
    }
    r
}

#[test]
fn packets_spray_one_by_one_by_default() {
    let out = sprayed(1, 1, 32);
    assert!(runs(&out).iter().all(|&r| r == 1), "{out:?}");
    let planes: Vec<u8> = out.iter().map(|x| x.1).collect();
    assert!(
        runs(&planes).iter().all(|&r| r == 1),
        "planes rotate: {planes:?}"
    );
}

#[test]
fn a_burst_keeps_k_packets_on_one_ev_then_moves_to_the_next_plane() {
    let out = sprayed(4, 1, 32);
    assert_eq!(runs(&out), vec![4; 8], "{out:?}");
    let planes: Vec<u8> = out.iter().step_by(4).map(|x| x.1).collect();
    assert!(
        runs(&planes).iter().all(|&r| r == 1),
        "bursts rotate over the planes: {planes:?}"
    );
    for p in 0..PLANES {
        assert!(planes.contains(&p), "plane {p} used: {planes:?}");
    }
}

#[test]
fn bursts_of_several_qps_leave_back_to_back() {
    let out = sprayed(4, 3, 16);
    assert_eq!(runs(&out), vec![4; 12], "each burst whole: {out:?}");
    let qps: Vec<u32> = out.iter().step_by(4).map(|x| x.0).collect();
    assert!(
        runs(&qps).iter().all(|&r| r == 1),
        "the QPs take turns burst by burst: {qps:?}"
    );
}
