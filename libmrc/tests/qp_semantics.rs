//! Verbs semantics: states, unsignaled batching, the WRITE_WITH_IMM cap, zero-length messages, several QPs,
//! and EV death and restoration.

mod common;

use common::*;
use mrc::testing::{Fault, Net, NetConfig, PlaneConfig, QpEnd, connect_pair};
use mrc::*;

/// Connects a QP pair between nodes `a` and `b` whose creation parameters `shape` adjusts, both sides starting
/// at PSN `psn`; returns the QPNs.
fn connect_with(
    net: &mut Net,
    a: usize,
    b: usize,
    psn: u32,
    shape: impl Fn(QpInit) -> QpInit,
) -> [u32; 2] {
    let now = net.now();
    let mut qpn = [0u32; 2];
    for (i, n) in [a, b].into_iter().enumerate() {
        let node = &mut net.nodes[n];
        qpn[i] = node
            .ep
            .open_qp(
                shape(QpInit::new(node.pd, node.cq)),
                Access::REMOTE_WRITE,
                now,
            )
            .unwrap();
    }
    net.connect_qps([(a, qpn[0], psn), (b, qpn[1], psn)]);
    qpn
}

fn write_wr(sges: &[Sge], dst: u64, rkey: u32, wr_id: u64, signaled: bool) -> SendWr<'_> {
    SendWr {
        wr_id,
        op: SendOp::Write {
            remote_addr: dst,
            rkey,
        },
        sges,
        signaled,
        solicited: false,
    }
}

#[test]
fn posting_follows_the_state_machine() {
    let mut net = Net::new(NetConfig::uniform(2, PlaneConfig::default(), 1));
    let a = net.add_node(Caps::ALL);
    let now = net.now();
    let node = &mut net.nodes[a];
    let qpn = node
        .ep
        .create_qp(QpInit {
            config: qp_config(2),
            ..QpInit::new(node.pd, node.cq)
        })
        .unwrap();
    assert_eq!(node.ep.qp_state(qpn), Some(QpState::Reset));
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        sges: &[],
        signaled: true,
        solicited: false,
    };
    assert_eq!(
        node.ep.post_send(qpn, &wr, now),
        Err(PostError::BadState(QpState::Reset))
    );
    assert_eq!(
        node.ep.post_recv(
            qpn,
            &RecvWr {
                wr_id: 1,
                sges: &[]
            }
        ),
        Err(PostError::BadState(QpState::Reset))
    );
    assert!(
        node.ep
            .modify_qp(qpn, Transition::Rts { sq_psn: 0 }, now)
            .is_err(),
        "RESET -> RTS is refused"
    );
    node.ep
        .modify_qp(
            qpn,
            Transition::Init {
                access: Access::REMOTE_WRITE,
            },
            now,
        )
        .unwrap();
    node.ep
        .post_recv(
            qpn,
            &RecvWr {
                wr_id: 1,
                sges: &[],
            },
        )
        .unwrap();
    assert_eq!(
        node.ep.post_send(qpn, &wr, now),
        Err(PostError::BadState(QpState::Init))
    );
    node.ep
        .modify_qp(
            qpn,
            Transition::Rtr {
                peer: PeerId(1),
                remote_qpn: 0x20,
                rq_psn: 0,
                remote_caps: Caps::MRC_1_0,
            },
            now,
        )
        .unwrap();
    node.ep
        .modify_qp(qpn, Transition::Rts { sq_psn: 0 }, now)
        .unwrap();
    let send = SendWr {
        op: SendOp::Send { imm: None },
        ..wr
    };
    assert_eq!(
        node.ep.post_send(qpn, &send, now),
        Err(PostError::Unsupported),
        "peer offered MRC 1.0 only"
    );
    node.ep.modify_qp(qpn, Transition::Error, now).unwrap();
    let mut wc = [empty_wc(); 4];
    assert_eq!(node.ep.poll_cq(node.cq, &mut wc), 1);
    assert_eq!(
        (wc[0].wr_id, wc[0].status, wc[0].opcode),
        (1, WcStatus::WrFlushErr, WcOpcode::Recv)
    );
    assert_eq!(
        node.ep.post_send(qpn, &wr, now),
        Err(PostError::BadState(QpState::Error))
    );
    node.ep.modify_qp(qpn, Transition::Reset, now).unwrap();
    assert_eq!(node.ep.qp_state(qpn), Some(QpState::Reset));
    assert_eq!(node.ep.destroy_qp(qpn), Ok(()));
    assert_eq!(node.ep.qp_state(qpn), None);
}

#[test]
fn unsignaled_requests_free_their_slots_with_the_next_signaled_completion() {
    let mut cfg = qp_config(4);
    cfg.mtu = 1024;
    let mut net = Net::new(NetConfig::uniform(4, PlaneConfig::default(), 2));
    let (a, b) = (net.add_node(Caps::ALL), net.add_node(Caps::ALL));
    let qpn = connect_with(&mut net, a, b, 7, |init| QpInit {
        max_send_wr: 4,
        config: cfg.clone(),
        ..init
    });
    let now = net.now();
    let (src, ks) = net.alloc_mr(a, 4096, Access::NONE);
    let (dst, kd) = net.alloc_mr(b, 4096, Access::REMOTE_WRITE);
    let sge = [Sge {
        addr: src,
        len: 4096,
        lkey: ks.lkey,
    }];
    let cq = net.nodes[a].cq;
    let mut wc = [empty_wc(); 8];
    // Three unsignaled and one signaled fill the queue of 4.
    for i in 0..4 {
        net.nodes[a]
            .ep
            .post_send(qpn[0], &write_wr(&sge, dst, kd.rkey, i, i == 3), now)
            .unwrap();
    }
    assert_eq!(
        net.nodes[a]
            .ep
            .post_send(qpn[0], &write_wr(&sge, dst, kd.rkey, 9, true), now),
        Err(PostError::QueueFull)
    );
    net.run_for(Duration::from_millis(1));
    let n = net.nodes[a].ep.poll_cq(cq, &mut wc);
    assert_eq!(
        (n, wc[0].wr_id, wc[0].status),
        (1, 3, WcStatus::Success),
        "only the signaled request completes"
    );
    // Its completion released all four slots.
    let now = net.now();
    for i in 10..14 {
        net.nodes[a]
            .ep
            .post_send(qpn[0], &write_wr(&sge, dst, kd.rkey, i, false), now)
            .unwrap();
    }
    // Four unsignaled: done on the wire, but without a signaled completion their slots stay taken, as in verbs.
    net.run_for(Duration::from_millis(1));
    assert_eq!(net.nodes[a].ep.poll_cq(cq, &mut wc), 0);
    assert_eq!(
        net.nodes[a].ep.qp_stats(qpn[0]).unwrap().tx_data_packets,
        8 * 4
    );
    let now = net.now();
    assert_eq!(
        net.nodes[a]
            .ep
            .post_send(qpn[0], &write_wr(&sge, dst, kd.rkey, 20, true), now),
        Err(PostError::QueueFull)
    );
}

#[test]
fn write_with_imm_cap_is_enforced_and_released_by_the_peer_ack() {
    let mut cfg = qp_config(2);
    cfg.max_wimm = 2;
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 3, &cfg);
    let (src, ks) = net.alloc_mr(A, 64, Access::NONE);
    let (dst, kd) = net.alloc_mr(B, 64, Access::REMOTE_WRITE);
    for i in 0..8 {
        net.nodes[B]
            .ep
            .post_recv(
                qb,
                &RecvWr {
                    wr_id: 100 + i,
                    sges: &[],
                },
            )
            .unwrap();
    }
    let sge = [Sge {
        addr: src,
        len: 64,
        lkey: ks.lkey,
    }];
    let imm = |i: u64| SendWr {
        wr_id: i,
        op: SendOp::WriteImm {
            remote_addr: dst,
            rkey: kd.rkey,
            imm: i as u32,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    let now = net.now();
    net.nodes[A].ep.post_send(qa, &imm(1), now).unwrap();
    net.nodes[A].ep.post_send(qa, &imm(2), now).unwrap();
    assert_eq!(
        net.nodes[A].ep.post_send(qa, &imm(3), now),
        Err(PostError::WimmCap)
    );
    // Once the peer has completed them (and said so with a transport ACK) the cap opens again.
    let mut seen = Seen::default();
    assert!(net.run_until(now + Duration::from_millis(10), |n| {
        drain(n, &mut seen);
        let t = n.now();
        seen.b.len() == 2 && n.nodes[A].ep.post_send(qa, &imm(3), t).is_ok()
    }));
    assert!(net.nodes[B].ep.qp_stats(qb).unwrap().tx_acks > 0);
    assert!(net.run_until(net.now() + Duration::from_millis(10), |n| {
        drain(n, &mut seen);
        seen.b.len() == 3
    }));
    let imms: Vec<Option<u32>> = seen.b.iter().map(|c| c.imm).collect();
    assert_eq!(imms, vec![Some(1), Some(2), Some(3)]);
}

#[test]
fn zero_length_messages_complete() {
    let (mut net, qa, qb) = pair(2, PlaneConfig::default(), 4, &qp_config(2));
    let now = net.now();
    net.nodes[B]
        .ep
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 10,
                sges: &[],
            },
        )
        .unwrap();
    net.nodes[B]
        .ep
        .post_recv(
            qb,
            &RecvWr {
                wr_id: 11,
                sges: &[],
            },
        )
        .unwrap();
    let wrs = [
        SendWr {
            wr_id: 1,
            op: SendOp::Write {
                remote_addr: 0,
                rkey: 0,
            },
            sges: &[],
            signaled: true,
            solicited: false,
        },
        SendWr {
            wr_id: 2,
            op: SendOp::WriteImm {
                remote_addr: 0,
                rkey: 0,
                imm: 5,
            },
            sges: &[],
            signaled: true,
            solicited: false,
        },
        SendWr {
            wr_id: 3,
            op: SendOp::Send { imm: None },
            sges: &[],
            signaled: true,
            solicited: false,
        },
    ];
    for wr in &wrs {
        net.nodes[A].ep.post_send(qa, wr, now).unwrap();
    }
    let mut seen = Seen::default();
    assert!(net.run_until(now + Duration::from_millis(5), |n| {
        drain(n, &mut seen);
        seen.a.len() == 3 && seen.b.len() == 2
    }));
    assert!(
        seen.a
            .iter()
            .chain(&seen.b)
            .all(|c| c.status == WcStatus::Success)
    );
    assert_eq!(
        seen.b
            .iter()
            .map(|c| (c.wr_id, c.byte_len, c.imm))
            .collect::<Vec<_>>(),
        vec![(10, 0, Some(5)), (11, 0, None)]
    );
}

#[test]
fn several_qps_share_an_endpoint() {
    let mut net = Net::new(NetConfig::uniform(
        4,
        PlaneConfig {
            loss: 0.01,
            ..PlaneConfig::default()
        },
        5,
    ));
    net.add_node(Caps::ALL);
    net.add_node(Caps::ALL);
    let cfg = qp_config(4);
    let pairs: Vec<(u32, u32)> = (0..6).map(|_| net.connect(A, B, &cfg)).collect();
    let mut posted = Vec::new();
    for (i, &(qa, qb)) in pairs.iter().enumerate() {
        for k in 0..3 {
            let kind = [OpKind::Write, OpKind::Send, OpKind::Read][k];
            posted.push(post(
                &mut net,
                qa,
                qb,
                Op { kind, len: 300_000 },
                (i * 10 + k) as u64,
            ));
        }
    }
    let want_b = posted.iter().filter(|p| p.recv_wr.is_some()).count();
    let mut seen = Seen::default();
    assert!(net.run_until(net.now() + Duration::from_secs(1), |n| {
        drain(n, &mut seen);
        seen.a.len() == posted.len() && seen.b.len() == want_b
    }));
    assert!(seen.a.iter().all(|c| c.status == WcStatus::Success));
    for p in &posted {
        let s = net.nodes[p.src.0].mem.slice(p.src.1, p.op.len as usize);
        assert_eq!(s, net.nodes[p.dst.0].mem.slice(p.dst.1, p.op.len as usize));
    }
    // Per QP, its completions are in posting order.
    for &(qa, _) in &pairs {
        let ids: Vec<u64> = seen
            .a
            .iter()
            .filter(|c| c.qpn == qa)
            .map(|c| c.wr_id)
            .collect();
        let mut sorted = ids.clone();
        sorted.sort_unstable();
        assert_eq!(ids, sorted);
    }
}

#[test]
fn one_dead_ev_is_retired_alone_and_restored_when_it_heals() {
    let (mut net, qa, qb) = pair(4, PlaneConfig::default(), 6, &qp_config(4));
    let victim = 5 << 2 | 1; // path 5 of plane 1
    let t0 = net.now();
    net.schedule(t0, Fault::EvDown(victim));
    net.schedule(t0 + Duration::from_millis(2), Fault::EvUp(victim));
    let posted: Vec<Posted> = (0..30)
        .map(|i| {
            post(
                &mut net,
                qa,
                qb,
                Op {
                    kind: OpKind::Write,
                    len: 4 << 20,
                },
                i,
            )
        })
        .collect();
    net.run_until(t0 + Duration::from_millis(1), |_| false);
    let bad: Vec<u32> = net.nodes[A]
        .ep
        .ev_infos(qa)
        .iter()
        .filter(|e| e.state == EvState::AssumedBad)
        .map(|e| e.ev)
        .collect();
    assert_eq!(bad, vec![victim]);
    let (ok, seen) = run_to_completion(&mut net, &posted, t0 + Duration::from_secs(1));
    assert!(ok);
    check(&net, &posted, &seen).unwrap();
    net.run_until(t0 + Duration::from_millis(20), |_| false);
    let e = net.nodes[A]
        .ep
        .ev_infos(qa)
        .into_iter()
        .find(|e| e.ev == victim)
        .unwrap();
    assert_eq!(e.state, EvState::Good);
    assert_eq!((e.stats.retired, e.stats.restored), (1, 1));
}

/// PSNs start just below the 24-bit wrap and more than 2^16 messages pass, so PSN, MSN and RQMSN all wrap on
/// the wire while every immediate arrives once, in order.
#[test]
fn sequence_numbers_wrap() {
    let mut net = Net::new(NetConfig::uniform(
        2,
        PlaneConfig {
            loss: 0.01,
            ..PlaneConfig::default()
        },
        8,
    ));
    let (a, b) = (net.add_node(Caps::ALL), net.add_node(Caps::ALL));
    let cfg = qp_config(2);
    let qpn = connect_with(&mut net, a, b, 0xFF_FF00, |init| QpInit {
        max_send_wr: 4096,
        max_recv_wr: 4096,
        config: cfg.clone(),
        ..init
    });
    let (src, ks) = net.alloc_mr(a, 8, Access::NONE);
    let (dst, kd) = net.alloc_mr(b, 8, Access::REMOTE_WRITE);
    let total: u32 = 70_000;
    let mut posted = 0u32;
    let mut imms = Vec::with_capacity(total as usize);
    let mut sends_done = 0u32;
    let mut wc = [empty_wc(); 256];
    while imms.len() < total as usize {
        let now = net.now();
        while posted < total && posted as usize - imms.len() < 2000 {
            let sge = [Sge {
                addr: src,
                len: 8,
                lkey: ks.lkey,
            }];
            let wr = SendWr {
                wr_id: u64::from(posted),
                op: SendOp::WriteImm {
                    remote_addr: dst,
                    rkey: kd.rkey,
                    imm: posted,
                },
                sges: &sge,
                signaled: true,
                solicited: false,
            };
            match net.nodes[a].ep.post_send(qpn[0], &wr, now) {
                Ok(()) => {
                    // Nothing moves before the next run, so the receive is in place before the data arrives.
                    net.nodes[b]
                        .ep
                        .post_recv(
                            qpn[1],
                            &RecvWr {
                                wr_id: u64::from(posted),
                                sges: &[],
                            },
                        )
                        .unwrap();
                    posted += 1;
                }
                Err(PostError::WimmCap) => break,
                Err(e) => panic!("{e}"),
            }
        }
        net.run_for(Duration::from_micros(50));
        let (cq_a, cq_b) = (net.nodes[a].cq, net.nodes[b].cq);
        loop {
            let n = net.nodes[a].ep.poll_cq(cq_a, &mut wc);
            assert!(wc[..n].iter().all(|c| c.status == WcStatus::Success));
            sends_done += n as u32;
            let m = net.nodes[b].ep.poll_cq(cq_b, &mut wc);
            assert!(wc[..m].iter().all(|c| c.status == WcStatus::Success));
            imms.extend(wc[..m].iter().map(|c| c.imm.unwrap()));
            if n == 0 && m == 0 {
                break;
            }
        }
        assert!(
            net.now() < Instant::from_nanos(5_000_000_000),
            "stalled at {} of {total}",
            imms.len()
        );
    }
    assert!(
        imms.iter().copied().eq(0..total),
        "every immediate once, in order"
    );
    net.run_for(Duration::from_micros(200));
    let cq_a = net.nodes[a].cq;
    sends_done += net.nodes[a].ep.poll_cq(cq_a, &mut wc) as u32;
    assert_eq!(sends_done, total, "every send completed once");
    let s = net.nodes[a].ep.qp_stats(qpn[0]).unwrap();
    assert!(
        s.tx_retransmits > 0,
        "losses were repaired across the wraps"
    );
}

/// `connect_qp` takes a QP from INIT to RTS in one call with the peer's blob, and refuses (changing nothing) a
/// QP that is not in INIT; `connect_pair` refuses the pair when either side is not in INIT, and moves neither.
#[test]
fn one_call_connects_a_qp_and_a_refused_call_changes_nothing() {
    let mut net = Net::new(NetConfig::uniform(2, PlaneConfig::default(), 3));
    let (a, b) = (net.add_node(Caps::ALL), net.add_node(Caps::MRC_1_0));
    let now = net.now();
    let cfg = qp_config(2);
    let open = |net: &mut Net, n: usize| {
        let node = &mut net.nodes[n];
        let mut init = QpInit::new(node.pd, node.cq);
        init.config = cfg.clone();
        node.ep.open_qp(init, Access::REMOTE_WRITE, now).unwrap()
    };
    let (qa, qb) = (open(&mut net, a), open(&mut net, b));
    assert_eq!(net.nodes[a].ep.qp_state(qa), Some(QpState::Init));

    // The blob says what the peer needs; the caps are the endpoint's.
    let ia = net.nodes[a].ep.conn_info(qa, 0x12_3456).unwrap();
    let ib = net.nodes[b].ep.conn_info(qb, 0xFF_FFF0).unwrap();
    assert_eq!(
        (ia.qpn, ia.psn, ia.caps, ia.mtu),
        (qa, 0x12_3456, Caps::ALL, cfg.mtu)
    );
    assert_eq!(ib.caps, Caps::MRC_1_0);
    assert_eq!(ConnInfo::from_bytes(&ia.to_bytes()), Some(ia));
    assert_eq!(net.nodes[a].ep.conn_info(0xDEAD, 0), None);

    // A QP in RESET is refused and stays in RESET.
    let node = &mut net.nodes[a];
    let mut init = QpInit::new(node.pd, node.cq);
    init.config = cfg.clone();
    let fresh = node.ep.create_qp(init).unwrap();
    assert_eq!(
        node.ep.connect_qp(fresh, PeerId(b as u32), &ib, 0, now),
        Err(ModifyError::BadTransition(QpState::Reset))
    );
    assert_eq!(node.ep.qp_state(fresh), Some(QpState::Reset));
    assert_eq!(
        node.ep.connect_qp(0xDEAD, PeerId(1), &ib, 0, now),
        Err(ModifyError::NoSuchQp)
    );

    net.nodes[a]
        .ep
        .connect_qp(qa, PeerId(b as u32), &ib, ia.psn, now)
        .unwrap();
    assert_eq!(net.nodes[a].ep.qp_state(qa), Some(QpState::Rts));
    // Connecting twice is refused: the QP is no longer in INIT.
    assert_eq!(
        net.nodes[a]
            .ep
            .connect_qp(qa, PeerId(b as u32), &ib, ia.psn, now),
        Err(ModifyError::BadTransition(QpState::Rts))
    );
    net.nodes[b]
        .ep
        .connect_qp(qb, PeerId(a as u32), &ia, ib.psn, now)
        .unwrap();
    // Connected: a WRITE goes through, and SEND is refused because B offers MRC 1.0 only.
    let p = post(
        &mut net,
        qa,
        qb,
        Op {
            kind: OpKind::Write,
            len: 10_000,
        },
        1,
    );
    let limit = net.now() + Duration::from_millis(10);
    let (done, seen) = run_to_completion(&mut net, std::slice::from_ref(&p), limit);
    assert!(done);
    check(&net, &[p], &seen).unwrap();
    let (src, ks) = net.alloc_mr(a, 16, Access::NONE);
    let sge = [Sge {
        addr: src,
        len: 16,
        lkey: ks.lkey,
    }];
    let send = SendWr {
        wr_id: 2,
        op: SendOp::Send { imm: None },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    assert_eq!(
        net.nodes[a].ep.post_send(qa, &send, now),
        Err(PostError::Unsupported)
    );

    // connect_pair with one side already connected moves neither side.
    let (qa2, qb2) = (open(&mut net, a), open(&mut net, b));
    let [na, nb] = &mut net.nodes[..] else {
        unreachable!("two nodes")
    };
    let end = |qpn, peer| QpEnd {
        qpn,
        peer: PeerId(peer),
        sq_psn: 5,
    };
    assert_eq!(
        connect_pair(now, &mut na.ep, end(qa2, 1), &mut nb.ep, end(qb, 0)),
        Err(ModifyError::BadTransition(QpState::Rts))
    );
    assert_eq!(na.ep.qp_state(qa2), Some(QpState::Init));
    connect_pair(now, &mut na.ep, end(qa2, 1), &mut nb.ep, end(qb2, 0)).unwrap();
    assert_eq!(
        (na.ep.qp_state(qa2), nb.ep.qp_state(qb2)),
        (Some(QpState::Rts), Some(QpState::Rts))
    );
}
