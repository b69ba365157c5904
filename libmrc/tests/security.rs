//! Security: bad keys, bounds, QPNs, PSNs, truncations, corruption and spoofing are counted and dropped or
//! NACKed, and memory outside the target region never changes (guard bytes).

mod common;

use common::*;
use mrc::testing::{Net, PlaneConfig};
use mrc::*;
use proptest::prelude::*;

struct Target {
    net: Net,
    qa: u32,
    qb: u32,
    dst: u64,
    len: u64,
    rkey: u32,
    lkey_a: u32,
    src: u64,
    /// The first PSN B expects from A.
    b_epsn: u32,
}

fn target() -> Target {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 11, &qp_config(2));
    let len = 8192;
    let (dst, kd) = net.alloc_mr(B, len, Access::REMOTE_WRITE | Access::REMOTE_READ);
    net.nodes[B].mem.fill_pattern(dst, len as usize, 42);
    let (src, ks) = net.alloc_mr(A, len, Access::NONE);
    net.nodes[A].mem.fill_pattern(src, len as usize, 43);
    Target {
        b_epsn: net.first_psn(A, qa).unwrap(),
        net,
        qa,
        qb,
        dst,
        len,
        rkey: kd.rkey,
        lkey_a: ks.lkey,
        src,
    }
}

impl Target {
    /// B's memory (target and guards) is exactly as it was set up.
    fn b_untouched(&self) -> bool {
        let n = self.len as usize;
        let want: Vec<u8> = (0..n)
            .map(|i| testing::pattern_byte(42, i as u64))
            .collect();
        self.net.nodes[B].mem.slice(self.dst, n) == want.as_slice()
            && self.net.nodes[B].mem.guards_intact(&[(self.dst, self.len)])
            && self.net.nodes[B].mem.violations == 0
    }

    /// A write from A that should fail at B; returns A's completion.
    fn bad_write(&mut self, remote_addr: u64, rkey: u32, len: u32) -> Completion {
        let now = self.net.now();
        let sge = [Sge {
            addr: self.src,
            len,
            lkey: self.lkey_a,
        }];
        self.net.nodes[A]
            .ep
            .post_send(
                self.qa,
                &SendWr {
                    wr_id: 9,
                    op: SendOp::Write { remote_addr, rkey },
                    sges: &sge,
                    signaled: true,
                    solicited: false,
                },
                now,
            )
            .unwrap();
        let mut seen = Seen::default();
        let ok = self.net.run_until(now + Duration::from_millis(100), |n| {
            drain(n, &mut seen);
            !seen.a.is_empty()
        });
        assert!(ok, "no completion");
        seen.a[0]
    }

    /// A hand-made WRITE_ONLY from A to B with a valid ICRC.
    fn forge(&self, dest_qp: u32, psn: u32, va: u64, rkey: u32, payload: &[u8]) -> Vec<u8> {
        write_only(dest_qp, psn, va, rkey, payload.len() as u32, payload)
    }

    fn inject(&mut self, bytes: &[u8], from: usize) {
        let now = self.net.now();
        let meta = RecvMeta {
            peer: Some(PeerId(from as u32)),
            port: 0,
            ecn_ce: false,
            trim: None,
        };
        let node = &mut self.net.nodes[B];
        node.ep.handle_datagram(now, meta, bytes, &mut node.mem);
    }
}

#[test]
fn wrong_rkey_is_nacked_and_fails_the_request() {
    let mut t = target();
    let c = t.bad_write(t.dst, t.rkey ^ 0x100, 4096);
    assert_eq!(c.status, WcStatus::RemAccessErr);
    assert_eq!(t.net.nodes[A].ep.qp_state(t.qa), Some(QpState::Error));
    assert!(t.net.nodes[B].ep.qp_stats(t.qb).unwrap().rx_access_errors >= 1);
    assert!(t.b_untouched());
}

#[test]
fn out_of_bounds_address_or_length_is_refused() {
    for (addr_off, len) in [
        (8192 - 100, 200u32),
        (u64::MAX - 2, 16),
        (0u64.wrapping_sub(64), 64),
        (4096, 8000),
    ] {
        let mut t = target();
        let c = t.bad_write(t.dst.wrapping_add(addr_off), t.rkey, len);
        assert_eq!(
            c.status,
            WcStatus::RemAccessErr,
            "offset {addr_off:#x} len {len}"
        );
        // Packets that lie inside the region are placed (as on an RDMA NIC); nothing outside it changes.
        let b = &t.net.nodes[B].mem;
        assert!(
            b.guards_intact(&[(t.dst, t.len)]) && b.violations == 0,
            "offset {addr_off:#x} len {len}"
        );
        if addr_off >= t.len || len <= 4096 {
            // Every packet of the write crosses or misses the region: nothing at all is placed.
            assert!(t.b_untouched(), "offset {addr_off:#x} len {len}");
        }
    }
}

#[test]
fn qp_without_remote_write_refuses_writes() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 12, &qp_config(2));
    // Rebuild B's QP with no remote access at all.
    let now = net.now();
    let a_first = net.first_psn(A, qa).unwrap();
    net.nodes[B]
        .ep
        .modify_qp(qb, Transition::Reset, now)
        .unwrap();
    net.nodes[B]
        .ep
        .modify_qp(
            qb,
            Transition::Init {
                access: Access::NONE,
            },
            now,
        )
        .unwrap();
    net.nodes[B]
        .ep
        .modify_qp(
            qb,
            Transition::Rtr {
                peer: PeerId(0),
                remote_qpn: qa,
                rq_psn: a_first,
                remote_caps: Caps::ALL,
            },
            now,
        )
        .unwrap();
    let p = post(
        &mut net,
        qa,
        qb,
        Op {
            kind: OpKind::Write,
            len: 100,
        },
        1,
    );
    let (_, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        now + Duration::from_millis(50),
    );
    assert_eq!(seen.a[0].status, WcStatus::RemAccessErr);
    assert!(net.nodes[B].mem.slice(p.dst.1, 100).iter().all(|&b| b == 0));
}

#[test]
fn wrong_qpn_wrong_peer_and_wrong_pkey_are_counted_and_dropped() {
    let mut t = target();
    let payload = [0xEEu8; 64];
    let good = t.forge(t.qb, t.b_epsn, t.dst, t.rkey, &payload);
    let wrong_qp = t.forge(t.qb ^ 0x10000, t.b_epsn, t.dst, t.rkey, &payload);
    t.inject(&wrong_qp, A);
    assert_eq!(t.net.nodes[B].ep.stats().rx_unknown_qp, 1);
    t.inject(&good, 5);
    assert_eq!(t.net.nodes[B].ep.stats().rx_wrong_peer, 1);
    let mut bad_pkey = good.clone();
    bad_pkey[2] = 0x7F;
    wire::seal(&mut bad_pkey, good.len() - 4).unwrap();
    t.inject(&bad_pkey, A);
    assert_eq!(t.net.nodes[B].ep.stats().rx_bad_pkey, 1);
    assert!(t.b_untouched());
    // The genuine packet is placed.
    t.inject(&good, A);
    assert_eq!(t.net.nodes[B].mem.slice(t.dst, 64), &payload);
}

#[test]
fn out_of_window_psn_is_nacked_not_placed() {
    let mut t = target();
    let window = 8 * 128;
    for psn in [
        t.b_epsn + window,
        t.b_epsn + window + 77,
        t.b_epsn.wrapping_add(1 << 22),
    ] {
        t.inject(&t.forge(t.qb, psn, t.dst, t.rkey, &[1u8; 64]), A);
    }
    let s = t.net.nodes[B].ep.qp_stats(t.qb).unwrap();
    assert_eq!(s.rx_out_of_window, 3);
    assert_eq!(s.rx_data_packets, 0);
    assert!(t.b_untouched());
    // The NACKs go out.
    t.net.run_for(Duration::from_micros(50));
    assert_eq!(t.net.nodes[B].ep.qp_stats(t.qb).unwrap().tx_nacks, 3);
    // A PSN behind the window is a duplicate, not placed either.
    t.inject(
        &t.forge(t.qb, t.b_epsn.wrapping_sub(5), t.dst, t.rkey, &[1u8; 64]),
        A,
    );
    assert_eq!(t.net.nodes[B].ep.qp_stats(t.qb).unwrap().rx_duplicates, 1);
    assert!(t.b_untouched());
}

#[test]
fn truncated_headers_and_bad_icrc_are_counted_and_dropped() {
    let mut t = target();
    let good = t.forge(t.qb, t.b_epsn, t.dst, t.rkey, &[0x77u8; 200]);
    for cut in 0..good.len() {
        t.inject(&good[..cut], A);
    }
    let st = t.net.nodes[B].ep.stats();
    assert_eq!(
        st.rx_truncated + st.rx_bad_icrc + st.rx_malformed,
        good.len() as u64
    );
    for bit in 0..good.len() * 8 {
        let mut bad = good.clone();
        bad[bit / 8] ^= 1 << (bit % 8);
        t.inject(&bad, A);
    }
    let st2 = t.net.nodes[B].ep.stats();
    let dropped = (st2.rx_truncated + st2.rx_bad_icrc + st2.rx_malformed + st2.rx_unknown_qp)
        - (st.rx_truncated + st.rx_bad_icrc + st.rx_malformed + st.rx_unknown_qp);
    assert_eq!(
        dropped,
        good.len() as u64 * 8,
        "every corrupted copy is dropped"
    );
    assert_eq!(t.net.nodes[B].ep.qp_stats(t.qb).unwrap().rx_data_packets, 0);
    assert!(t.b_untouched());
}

/// A SEND longer than the receive buffer (QP-PLACE-1): the sender's request fails with REM_INV_REQ_ERR; the
/// receiver writes none of it and does not complete its receive (it stays posted, and is flushed, not completed
/// as a success, when its QP is taken down).
#[test]
fn send_longer_than_the_receive_buffer_fails_both_ways_safely() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 13, &qp_config(2));
    let (src, ks) = net.alloc_mr(A, 10_000, Access::NONE);
    net.nodes[A].mem.fill_pattern(src, 10_000, 5);
    let (dst, kd) = net.alloc_mr(B, 1000, Access::NONE);
    net.nodes[B].mem.fill_pattern(dst, 1000, 6);
    net.nodes[B]
        .ep
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 77,
                sges: &[Sge {
                    addr: dst,
                    len: 1000,
                    lkey: kd.lkey,
                }],
            },
        )
        .unwrap();
    let now = net.now();
    net.nodes[A]
        .ep
        .post_send(
            qa,
            &SendWr {
                wr_id: 1,
                op: SendOp::Send { imm: None },
                sges: &[Sge {
                    addr: src,
                    len: 10_000,
                    lkey: ks.lkey,
                }],
                signaled: true,
                solicited: false,
            },
            now,
        )
        .unwrap();
    let mut seen = Seen::default();
    assert!(net.run_until(now + Duration::from_millis(50), |n| {
        drain(n, &mut seen);
        !seen.a.is_empty()
    }));
    assert_eq!(seen.a.len(), 1);
    assert_eq!(
        (seen.a[0].wr_id, seen.a[0].status),
        (1, WcStatus::RemInvReqErr)
    );
    // Long after, the receiver has completed nothing and written nothing.
    net.run_for(Duration::from_millis(5));
    drain(&mut net, &mut seen);
    assert!(seen.b.is_empty(), "the receiver completed {:?}", seen.b);
    let want: Vec<u8> = (0..1000).map(|i| testing::pattern_byte(6, i)).collect();
    assert!(
        net.nodes[B].mem.slice(dst, 1000) == want.as_slice(),
        "the receive buffer changed"
    );
    assert!(net.nodes[B].mem.guards_intact(&[(dst, 1000)]));
    // Its receive was still posted: taking the QP down flushes it, once.
    let now = net.now();
    net.nodes[B]
        .ep
        .modify_qp(qb, Transition::Error, now)
        .unwrap();
    drain(&mut net, &mut seen);
    assert_eq!(seen.b.len(), 1, "{:?}", seen.b);
    assert_eq!(
        (seen.b[0].wr_id, seen.b[0].status),
        (77, WcStatus::WrFlushErr)
    );
}

#[test]
fn send_without_a_posted_receive_waits_for_one() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 14, &qp_config(2));
    let (src, ks) = net.alloc_mr(A, 5000, Access::NONE);
    net.nodes[A].mem.fill_pattern(src, 5000, 3);
    let (dst, kd) = net.alloc_mr(B, 5000, Access::NONE);
    let now = net.now();
    net.nodes[A]
        .ep
        .post_send(
            qa,
            &SendWr {
                wr_id: 1,
                op: SendOp::Send { imm: Some(5) },
                sges: &[Sge {
                    addr: src,
                    len: 5000,
                    lkey: ks.lkey,
                }],
                signaled: true,
                solicited: false,
            },
            now,
        )
        .unwrap();
    net.run_for(Duration::from_micros(300));
    let sb = net.nodes[B].ep.qp_stats(qb).unwrap();
    assert!(sb.rx_no_resource > 0, "NACKed for want of a receive buffer");
    net.nodes[B]
        .ep
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 2,
                sges: &[Sge {
                    addr: dst,
                    len: 5000,
                    lkey: kd.lkey,
                }],
            },
        )
        .unwrap();
    let mut seen = Seen::default();
    assert!(net.run_until(net.now() + Duration::from_millis(50), |n| {
        drain(n, &mut seen);
        seen.a.len() == 1 && seen.b.len() == 1
    }));
    assert_eq!(seen.a[0].status, WcStatus::Success);
    assert_eq!(
        (seen.b[0].wr_id, seen.b[0].imm, seen.b[0].byte_len),
        (2, Some(5), 5000)
    );
    assert_eq!(
        net.nodes[A].mem.slice(src, 5000),
        net.nodes[B].mem.slice(dst, 5000)
    );
}

#[test]
fn read_with_a_bad_key_fails_and_reads_nothing() {
    let (mut net, qa, _qb) = pair(2, PlaneConfig::default(), 15, &qp_config(2));
    let (dst, kd) = net.alloc_mr(A, 4096, Access::NONE);
    net.nodes[A].mem.fill_pattern(dst, 4096, 8);
    let (src, ks) = net.alloc_mr(B, 4096, Access::REMOTE_WRITE); // no REMOTE_READ
    net.nodes[B].mem.fill_pattern(src, 4096, 7);
    let now = net.now();
    net.nodes[A]
        .ep
        .post_send(
            qa,
            &SendWr {
                wr_id: 1,
                op: SendOp::Read {
                    remote_addr: src,
                    rkey: ks.rkey,
                },
                sges: &[Sge {
                    addr: dst,
                    len: 4096,
                    lkey: kd.lkey,
                }],
                signaled: true,
                solicited: false,
            },
            now,
        )
        .unwrap();
    let mut seen = Seen::default();
    assert!(net.run_until(now + Duration::from_millis(50), |n| {
        drain(n, &mut seen);
        !seen.a.is_empty()
    }));
    assert_eq!(seen.a[0].status, WcStatus::RemAccessErr);
    // Not one byte of the (filled) source reached the (differently filled) destination.
    net.run_for(Duration::from_millis(5));
    let want: Vec<u8> = (0..4096).map(|i| testing::pattern_byte(8, i)).collect();
    assert!(
        net.nodes[A].mem.slice(dst, 4096) == want.as_slice(),
        "the READ's destination changed"
    );
    assert!(net.nodes[A].mem.guards_intact(&[(dst, 4096)]));
}

#[test]
fn bad_local_buffers_are_refused_at_posting() {
    let (mut net, qa, _) = pair(2, PlaneConfig::default(), 16, &qp_config(2));
    let (src, ks) = net.alloc_mr(A, 100, Access::NONE);
    let now = net.now();
    for sge in [
        Sge {
            addr: src,
            len: 101,
            lkey: ks.lkey,
        },
        Sge {
            addr: src,
            len: 1,
            lkey: ks.lkey + 1,
        },
    ] {
        let sges = [sge];
        let wr = SendWr {
            wr_id: 1,
            op: SendOp::Write {
                remote_addr: 0,
                rkey: 0,
            },
            sges: &sges,
            signaled: true,
            solicited: false,
        };
        assert!(matches!(
            net.nodes[A].ep.post_send(qa, &wr, now),
            Err(PostError::LocalAccess(_))
        ));
    }
}

/// How a hostile case damages the genuine packet it starts from.
#[derive(Debug, Clone)]
enum Damage {
    /// Delivered whole, as sent.
    None,
    /// Cut to this many bytes (shorter than the packet).
    Cut(prop::sample::Index),
    /// Bits flipped, the ICRC then recomputed (a forger who knows the CRC) or left stale.
    Flips(Vec<(prop::sample::Index, u8)>, bool),
}

/// One hostile case: a forged WRITE_ONLY from A's address (its PSN, VA, key and length drawn) and how it is
/// damaged, then a random datagram.
#[derive(Debug, Clone)]
struct Case {
    psn_off: u32,
    va_off: u64,
    rkey_flip: bool,
    len: usize,
    damage: Damage,
    trimmed: bool,
    junk: Vec<u8>,
}

/// Whole, genuine packets most of the time, so that the placement path is what the cases exercise; a bad key,
/// an out-of-window PSN, an out-of-bounds VA, a trim mark, a cut or flipped bits some of the time.
fn hostile_case() -> impl Strategy<Value = Case> {
    let damage = prop_oneof![
        8 => Just(Damage::None),
        1 => any::<prop::sample::Index>().prop_map(Damage::Cut),
        1 => (prop::collection::vec((any::<prop::sample::Index>(), 0u8..8), 1..4), any::<bool>())
            .prop_map(|(f, reseal)| Damage::Flips(f, reseal)),
    ];
    (
        0u32..1100,
        0u64..8300,
        prop::bool::weighted(0.1),
        0usize..300,
        damage,
        prop::bool::weighted(0.1),
        prop::collection::vec(any::<u8>(), 0..128),
    )
        .prop_map(
            |(psn_off, va_off, rkey_flip, len, damage, trimmed, junk)| Case {
                psn_off,
                va_off,
                rkey_flip,
                len,
                damage,
                trimmed,
                junk,
            },
        )
}

/// Runs one hostile case; returns whether its packet was placed.
fn hostile(c: &Case) -> Result<bool, TestCaseError> {
    let mut t = target();
    let window = 8 * 128;
    let rkey = if c.rkey_flip { t.rkey ^ 0x100 } else { t.rkey };
    let payload: Vec<u8> = (0..c.len as u64)
        .map(|i| testing::pattern_byte(c.len as u64 ^ c.va_off, i))
        .collect();
    let va = t.dst.wrapping_add(c.va_off);
    let mut pkt = t.forge(t.qb, t.b_epsn.wrapping_add(c.psn_off), va, rkey, &payload);
    let sent = pkt.clone();
    let whole = pkt.len();
    match &c.damage {
        Damage::None => {}
        Damage::Cut(at) => pkt.truncate(at.index(whole)),
        Damage::Flips(flips, reseal) => {
            for (i, bit) in flips {
                let at = i.index(whole);
                pkt[at] ^= 1 << bit;
            }
            if *reseal {
                wire::seal(&mut pkt, whole - 4).unwrap();
            }
        }
    }
    let now = t.net.now();
    let trim = c.trimmed.then_some(TrimMark::Fabric);
    let meta = RecvMeta {
        peer: Some(PeerId(0)),
        port: 0,
        ecn_ce: false,
        trim,
    };
    {
        let node = &mut t.net.nodes[B];
        node.ep.handle_datagram(now, meta, &pkt, &mut node.mem);
        node.ep.handle_datagram(now, meta, &c.junk, &mut node.mem);
    }
    t.net.run_for(Duration::from_micros(20));
    let node = &t.net.nodes[B];
    prop_assert_eq!(node.mem.violations, 0);
    prop_assert!(node.mem.guards_intact(&[(t.dst, t.len)]));
    let placed = node.ep.qp_stats(t.qb).unwrap().rx_data_packets;
    // What the receiver must do with this packet, from the spec: place it exactly when it arrived whole and
    // unmarked, in the window, with the right key, inside the region.
    let in_bounds = c.va_off + c.len as u64 <= t.len;
    // A zero-length WRITE touches no memory, so its key and bounds are not checked (QP-PLACE-1).
    let must_place =
        !c.trimmed && c.psn_off < window && (c.len == 0 || (!c.rkey_flip && in_bounds));
    // Flips that cancel out leave the packet whole.
    let damage = if pkt == sent {
        &Damage::None
    } else {
        &c.damage
    };
    match damage {
        Damage::None if must_place => {
            prop_assert_eq!(placed, 1, "a genuine packet was not placed");
            let n = t.len as usize;
            let mut want: Vec<u8> = (0..n)
                .map(|i| testing::pattern_byte(42, i as u64))
                .collect();
            // A zero-length WRITE may name any VA: it writes nothing.
            if c.len > 0 {
                let at = c.va_off as usize;
                want[at..at + c.len].copy_from_slice(&payload);
            }
            prop_assert!(
                node.mem.slice(t.dst, n) == want.as_slice(),
                "the payload is not exactly where its VA says, or bytes beside it changed"
            );
        }
        Damage::None | Damage::Cut(_) | Damage::Flips(_, false) => {
            prop_assert_eq!(placed, 0, "a refused or damaged packet was placed");
            prop_assert!(t.b_untouched());
        }
        // A resealed header may name anything: only the region's own bytes may change, and only if placed.
        Damage::Flips(_, true) => {
            if placed == 0 {
                prop_assert!(t.b_untouched());
            }
        }
    }
    Ok(placed > 0 && c.len > 0)
}

/// Random datagrams and mutations of genuine ones never crash the endpoint and never touch memory outside the
/// registered target region; genuine ones are placed byte-exact. Most cases place data (counted and required):
/// a check on a path no case reaches would prove nothing.
#[test]
fn hostile_datagrams_never_corrupt() {
    let cases = 1000;
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    let placed = std::cell::Cell::new(0u32);
    let result = runner.run(&hostile_case(), |c| {
        if hostile(&c)? {
            placed.set(placed.get() + 1);
        }
        Ok(())
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    eprintln!(
        "hostile_datagrams_never_corrupt: {} of {cases} cases placed payload",
        placed.get()
    );
    assert!(
        placed.get() >= cases / 2,
        "only {} of {cases} cases placed anything: the placement path went untested",
        placed.get()
    );
}
