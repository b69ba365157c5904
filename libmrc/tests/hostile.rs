//! Hostile peers and blind injection (spec `security.md`): forged NACKs, SACKs and ACKs that name no outstanding
//! PSN change nothing, strangers' datagrams are dropped, a zero-length WRITE never reaches `Memory` with its
//! unchecked address, and an overrun completion queue fails its QPs as a verbs device does.

mod common;

use common::*;
use mrc::testing::{Net, NetConfig, PlaneConfig};
use mrc::wire::{Ack, Body, Nack, NackReason, Opcode, PSN_MASK, Sack, SackMark};
use mrc::*;

fn nack(dest_qp: u32, reason: NackReason, psn: u32, cack_psn: u32, ts_echo: u32) -> Vec<u8> {
    forge(
        Opcode::Nack,
        dest_qp,
        0,
        Body::Nack(Nack {
            reason,
            psn: psn & PSN_MASK,
            ev: 0,
            ts_echo,
            mpr: 8,
            cack_psn: cack_psn & PSN_MASK,
        }),
    )
}

/// Hands `bytes` to node `to` as if `from` sent them (`None`: a source the driver could not name).
fn inject(net: &mut Net, to: usize, from: Option<usize>, bytes: &[u8]) {
    let now = net.now();
    let meta = RecvMeta {
        peer: from.map(|f| PeerId(f as u32)),
        port: 0,
        ecn_ce: false,
        trim: None,
    };
    let node = &mut net.nodes[to];
    node.ep.handle_datagram(now, meta, bytes, &mut node.mem);
}

/// SplitMix64: the attacker's dice, seeded so the test is deterministic.
fn dice(state: &mut u64) -> u64 {
    *state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
    let mut z = *state;
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A pair on `planes` planes with `n` WRITEs of `len` bytes posted from A to B, run until A has sent `packets`
/// data packets: the transfer is under way, part of it outstanding.
fn writing(seed: u64, planes: u8, n: u64, len: u32, packets: u64) -> (Net, u32, u32, Vec<Posted>) {
    let (mut net, qa, qb) = pair(planes, PlaneConfig::default(), seed, &qp_config(planes));
    let op = Op {
        kind: OpKind::Write,
        len,
    };
    let posted = (0..n).map(|i| post(&mut net, qa, qb, op, i)).collect();
    net.run_until(net.now() + Duration::from_millis(5), |n| {
        n.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets >= packets
    });
    (net, qa, qb, posted)
}

/// Runs the transfer to its end and checks it: every completion once, successful, byte-exact, guards intact.
fn finish_verified(net: &mut Net, posted: &[Posted]) {
    let limit = net.now() + Duration::from_millis(100);
    let (ok, seen) = run_to_completion(net, posted, limit);
    assert!(ok, "every write completes");
    check(net, posted, &seen).unwrap();
}

#[test]
fn forged_fatal_nack_for_a_psn_never_sent_changes_nothing() {
    let (mut net, qa, qb, posted) = writing(21, 2, 1, 64 * 1024, 4);
    let first = net.first_psn(A, qa).unwrap();
    // Part of the write is in flight: PSNs first.. are outstanding; these never were, or are long acknowledged.
    for psn in [
        first.wrapping_add(1 << 22),
        first.wrapping_sub(1),
        first.wrapping_add(1 << 23),
    ] {
        let forged = nack(qa, NackReason::RemoteAccess, psn, first.wrapping_sub(1), 0);
        inject(&mut net, A, Some(B), &forged);
        assert_eq!(
            net.nodes[A].ep.qp_state(qa),
            Some(QpState::Rts),
            "PSN {psn:#x}"
        );
    }
    assert_eq!(net.nodes[A].ep.qp_stats(qa).unwrap().rx_bad_acks, 3);
    // The receiver has sent nothing: no NACK at all can name an outstanding PSN of its requester.
    let forged = nack(qb, NackReason::InvalidRequest, 0x1234, 0x1233, 0);
    inject(&mut net, B, Some(A), &forged);
    assert_eq!(net.nodes[B].ep.qp_state(qb), Some(QpState::Rts));
    finish_verified(&mut net, &posted);
}

#[test]
fn fatal_nack_echoing_an_old_transmission_is_stale() {
    let (mut net, qa, _, posted) = writing(22, 2, 1, 64 * 1024, 4);
    let first = net.first_psn(A, qa).unwrap();
    // The right PSN, but the send time is a guess.
    let forged = nack(
        qa,
        NackReason::Unexpected,
        first,
        first.wrapping_sub(1),
        0xDEAD_BEEF,
    );
    inject(&mut net, A, Some(B), &forged);
    assert_eq!(net.nodes[A].ep.qp_state(qa), Some(QpState::Rts));
    finish_verified(&mut net, &posted);
}

/// The attack of issue 10 at engine level: during a verified transfer, 8 forged NACKs with random PSNs and
/// fatal reasons at the sender's QP and 8 at the receiver's, from the right peer address and to the right QPNs
/// (the attacker's best case). The transfer must complete, byte-exact.
#[test]
fn eight_blind_nacks_each_way_leave_a_verified_transfer_verified() {
    let (mut net, qa, qb, posted) = writing(23, 4, 8, 256 * 1024, 64);
    let reasons = [
        NackReason::RemoteAccess,
        NackReason::InvalidRequest,
        NackReason::Unexpected,
    ];
    let mut rng = 0x0B11_D0A7;
    for k in 0..8 {
        for (to, from, qpn) in [(A, B, qa), (B, A, qb)] {
            let r = dice(&mut rng);
            let psn = r as u32 & PSN_MASK;
            let forged = nack(
                qpn,
                reasons[k % 3],
                psn,
                psn.wrapping_sub(1),
                (r >> 32) as u32,
            );
            inject(&mut net, to, Some(from), &forged);
        }
        net.run_for(Duration::from_micros(3));
    }
    for (node, qpn) in [(A, qa), (B, qb)] {
        assert_eq!(
            net.nodes[node].ep.qp_state(qpn),
            Some(QpState::Rts),
            "node {node}"
        );
    }
    finish_verified(&mut net, &posted);
    let bad = net.nodes[A].ep.qp_stats(qa).unwrap().rx_bad_acks
        + net.nodes[B].ep.qp_stats(qb).unwrap().rx_bad_acks;
    assert_eq!(bad, 16, "every forged NACK was counted and dropped");
}

#[test]
fn forged_sack_far_behind_the_window_is_dropped() {
    let (mut net, qa, _, posted) = writing(24, 2, 1, 64 * 1024, 4);
    let first = net.first_psn(A, qa).unwrap();
    let ev = net.nodes[A].ep.ev_infos(qa)[0].ev;
    // Half a PSN space behind: unwrapped, it lies below snd_una (acknowledges nothing), yet a SACK it is, with
    // the harshest advice a SACK can carry.
    let cack = first.wrapping_sub(1 << 22);
    let forged = forge(
        Opcode::Sack,
        qa,
        0,
        Body::Sack(Sack {
            mark: SackMark::AlwaysSkip,
            probe_reply: false,
            mpr: 1,
            ev,
            cack_psn: cack & PSN_MASK,
            sack_base: cack.wrapping_add(1) & PSN_MASK,
            bitmap: 0,
            ts_echo: None,
            cwnd_pen: 127,
            ooo_count: 0,
        }),
    );
    inject(&mut net, A, Some(B), &forged);
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    assert_eq!(s.rx_bad_acks, 1, "counted");
    assert_eq!(s.ev_retirements, 0, "its marking advice was not applied");
    let info = net.nodes[A].ep.ev_infos(qa);
    assert_eq!(
        info.iter().find(|i| i.ev == ev).unwrap().state,
        EvState::Good
    );
    finish_verified(&mut net, &posted);
}

#[test]
fn forged_ack_with_a_stale_cumulative_point_releases_no_immediate_credit() {
    let cfg = QpConfig {
        max_wimm: 1,
        ..qp_config(2)
    };
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 25, &cfg);
    let first = net.first_psn(A, qa).unwrap();
    let (src, ks) = net.alloc_mr(A, 64, Access::NONE);
    let (dst, kd) = net.alloc_mr(B, 64, Access::REMOTE_WRITE);
    let sge = [Sge {
        addr: src,
        len: 64,
        lkey: ks.lkey,
    }];
    let wimm = |wr_id| SendWr {
        wr_id,
        op: SendOp::WriteImm {
            remote_addr: dst,
            rkey: kd.rkey,
            imm: 7,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    let now = net.now();
    net.nodes[A].ep.post_send(qa, &wimm(1), now).unwrap();
    // B has no receive posted: it answers NO_RESOURCE and the immediate stays outstanding.
    net.run_for(Duration::from_micros(20));
    let now = net.now();
    assert_eq!(
        net.nodes[A].ep.post_send(qa, &wimm(2), now),
        Err(PostError::WimmCap)
    );
    // An ACK naming the outstanding message (CMSN 0 is the first) but a cumulative PSN from long ago.
    let forged = forge(
        Opcode::Ack,
        qa,
        0,
        Body::Ack(Ack {
            cack_psn: first.wrapping_sub(1 << 22) & PSN_MASK,
            cmsn: 0,
        }),
    );
    inject(&mut net, A, Some(B), &forged);
    let now = net.now();
    assert_eq!(
        net.nodes[A].ep.post_send(qa, &wimm(3), now),
        Err(PostError::WimmCap),
        "the forged ACK released the credit"
    );
    assert_eq!(net.nodes[A].ep.qp_stats(qa).unwrap().rx_bad_acks, 1);
    let _ = qb;
}

#[test]
fn datagram_from_a_source_the_driver_cannot_name_is_dropped() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 26, &qp_config(2));
    let (dst, kd) = net.alloc_mr(B, 256, Access::REMOTE_WRITE);
    let psn = net.first_psn(A, qa).unwrap();
    let bytes = write_only(qb, psn, dst, kd.rkey, 64, &[0xEE; 64]);
    inject(&mut net, B, None, &bytes);
    assert_eq!(net.nodes[B].ep.stats().rx_wrong_peer, 1);
    assert!(
        net.nodes[B].mem.slice(dst, 64).iter().all(|&b| b == 0),
        "nothing placed"
    );
    assert_eq!(net.nodes[B].ep.qp_stats(qb).unwrap().rx_data_packets, 0);
    // From the peer, the same bytes are placed.
    inject(&mut net, B, Some(A), &bytes);
    assert_eq!(net.nodes[B].mem.slice(dst, 64), &[0xEE; 64]);
}

#[test]
fn zero_length_write_never_reaches_memory_at_its_unchecked_address() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 27, &qp_config(2));
    let psn = net.first_psn(A, qa).unwrap();
    // An address below the whole arena and a key that names nothing: no check applies to a zero-length WRITE.
    let bytes = write_only(qb, psn, 0x10, 0xBAD0_0000, 0, &[]);
    inject(&mut net, B, Some(A), &bytes);
    let s = net.nodes[B].ep.qp_stats(qb).unwrap();
    assert_eq!(
        (s.rx_data_packets, s.rx_access_errors),
        (1, 0),
        "accepted, as verbs does"
    );
    assert_eq!(
        net.nodes[B].mem.violations, 0,
        "Memory was asked to write at an unchecked address"
    );
}

#[test]
fn completion_queue_overrun_fails_the_queue_and_its_qps() {
    let mut net = Net::new(NetConfig::uniform(2, PlaneConfig::default(), 28));
    net.add_node(Caps::ALL);
    net.add_node(Caps::ALL);
    // A's QP completes into a queue of 4.
    let small = net.nodes[A].ep.create_cq(4);
    net.nodes[A].cq = small;
    let (qa, qb) = net.connect(A, B, &qp_config(2));
    let posted: Vec<Posted> = (0..8)
        .map(|i| {
            post(
                &mut net,
                qa,
                qb,
                Op {
                    kind: OpKind::Write,
                    len: 64,
                },
                i,
            )
        })
        .collect();
    // Nobody polls.
    net.run_for(Duration::from_millis(1));
    let ep = &mut net.nodes[A].ep;
    let mut events = Vec::new();
    while let Some(e) = ep.poll_event() {
        events.push(e);
    }
    let cq_err = events
        .iter()
        .position(|e| *e == Event::CqError { cq: small });
    let qp_err = events.iter().position(|e| *e == Event::QpError { qpn: qa });
    assert!(
        cq_err.is_some() && qp_err > cq_err,
        "CQ error, then QP error: {events:?}"
    );
    assert_eq!(ep.qp_state(qa), Some(QpState::Error));
    assert_eq!(ep.cq_failed(small), Some(true));
    assert_eq!(ep.cq_len(small), Some((4, 4)), "four queued, four lost");
    let mut wc = [empty_wc(); 16];
    let n = ep.poll_cq(small, &mut wc);
    assert_eq!(n, 4);
    assert!(
        wc[..n]
            .iter()
            .enumerate()
            .all(|(i, c)| c.wr_id == i as u64 && c.status == WcStatus::Success)
    );
    let sge = [Sge {
        addr: posted[0].src.1,
        len: 64,
        lkey: 0,
    }];
    let wr = SendWr {
        wr_id: 99,
        op: SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    assert_eq!(
        ep.post_send(qa, &wr, Instant::ZERO),
        Err(PostError::BadState(QpState::Error))
    );
    let pd = net.nodes[A].pd;
    let e = net.nodes[A]
        .ep
        .create_qp(QpInit::new(pd, small))
        .unwrap_err();
    assert_eq!(e.field, "qp.send_cq");
    // The peer's QP, whose queue did not overrun, is untouched.
    assert_eq!(net.nodes[B].ep.qp_state(qb), Some(QpState::Rts));
}

#[test]
fn forged_port_status_cannot_mask_every_plane() {
    let (mut net, qa, _, posted) = writing(29, 4, 4, 64 * 1024, 8);
    let report = |mask| {
        forge(
            Opcode::EpRequest,
            wire::EP_QPN,
            0,
            Body::EpRequest(wire::EpRequest {
                op: wire::EpOp::PortStatus,
                req_id: 1,
                port_mask: mask,
                ev: 0,
                ts: None,
            }),
        )
    };
    // "All my ports are down", yet it came through port 0: forged.
    inject(&mut net, A, Some(B), &report(0));
    assert_eq!(net.nodes[A].ep.stats().rx_bad_port_status, 1);
    let before = net.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets;
    net.run_for(Duration::from_micros(50));
    assert!(
        net.nodes[A].ep.qp_stats(qa).unwrap().tx_data_packets > before,
        "data still flows"
    );
    finish_verified(&mut net, &posted);
}

/// SEC-QPN-1: the first QPN is not the constant an attacker would aim at (it was always 16); it follows the
/// endpoint's `qpn_seed`, so two endpoints with different seeds hand out different numbers, and one seed
/// always the same ones (the simulator's runs stay reproducible).
#[test]
fn first_qpn_follows_the_seed_not_a_constant() {
    let first = |seed: u64| {
        let mut ep = Endpoint::new(EndpointConfig {
            qpn_seed: seed,
            ..EndpointConfig::default()
        })
        .unwrap();
        let pd = ep.alloc_pd();
        let cq = ep.create_cq(8);
        ep.create_qp(QpInit::new(pd, cq)).unwrap()
    };
    let seeded: std::collections::BTreeSet<u32> = (1..=16u64).map(first).collect();
    assert!(
        seeded.len() >= 15,
        "16 seeds gave only {} distinct first QPNs: {seeded:?}",
        seeded.len()
    );
    assert!(
        !seeded.contains(&16),
        "a seeded endpoint still starts at QPN 16"
    );
    assert_eq!(first(7), first(7), "one seed, one sequence");
}
