//! Failure tests: planes, paths, ports and peers dying (and coming back) in the middle of transfers.

mod common;

use common::*;
use mrc::testing::{Fault, PlaneConfig};
use mrc::*;

fn us(n: u64) -> Duration {
    Duration::from_micros(n)
}

fn write(net: &mut testing::Net, qa: u32, qb: u32, len: u32, wr_id: u64) -> Posted {
    post(
        net,
        qa,
        qb,
        Op {
            kind: OpKind::Write,
            len,
        },
        wr_id,
    )
}

#[test]
fn seven_of_eight_planes_killed_mid_transfer_completes_on_the_survivor() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 1, &qp_config(8));
    let p = write(&mut net, qa, qb, 64 << 20, 1);
    let kill = net.now() + us(50);
    for plane in 0..8u8 {
        if plane != 5 {
            net.schedule(kill, Fault::PlaneDown(plane));
        }
    }
    let (ok, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        kill + Duration::from_secs(2),
    );
    assert!(
        ok,
        "transfer did not complete: {:?}",
        net.nodes[A].ep.qp_stats(qa)
    );
    check(&net, std::slice::from_ref(&p), &seen).unwrap();
    let done = net.now();
    // 64 MiB: ~5 MiB went out on 8 planes before the kill; the rest can only have crossed plane 5.
    let survivor = net.counters[5].delivered_bytes;
    let others: u64 = (0..8)
        .filter(|&i| i != 5)
        .map(|i| net.counters[i].delivered_bytes)
        .sum();
    assert!(survivor > 55 << 20, "plane 5 carried {survivor} B");
    assert!(others < 12 << 20, "dead planes delivered {others} B");
    // After the kill the survivor runs near its 100 Gbit/s: 60 MiB take ~5 ms; allow 2x.
    let elapsed = done - kill;
    assert!(
        elapsed < Duration::from_millis(10),
        "took {elapsed:?} after the kill"
    );
    let stats = net.nodes[A].ep.qp_stats(qa).unwrap();
    println!("done {elapsed:?} after the kill; {stats:?}");
    for plane in 0..8usize {
        let (good, skip, bad, _) = {
            let infos = net.nodes[A].ep.ev_infos(qa);
            let mine: Vec<_> = infos
                .iter()
                .filter(|e| usize::from(e.plane) == plane)
                .collect();
            (
                mine.iter().filter(|e| e.state == EvState::Good).count(),
                mine.iter().filter(|e| e.state == EvState::Skip).count(),
                mine.iter()
                    .filter(|e| e.state == EvState::AssumedBad)
                    .count(),
                0,
            )
        };
        if plane == 5 {
            assert_eq!(bad, 0, "survivor plane lost no EVs");
        } else {
            assert_eq!(good + skip, 0, "dead plane {plane} still has usable EVs");
        }
    }
}

/// When a silent plane is retired, everything still in flight on it is resent at once: at that moment no packet
/// sent into the dead plane is still waiting for a timer.
#[test]
fn retiring_a_silent_plane_resends_what_was_in_flight_on_it() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 3, &qp_config(8));
    let p = write(&mut net, qa, qb, 32 << 20, 1);
    let kill = net.now() + us(50);
    net.schedule(kill, Fault::PlaneDown(3));
    net.run_until(kill, |_| false);
    let sent_before = net.nodes[A].ep.plane_stats(qa, 3).unwrap().tx_packets;
    let retired = net.run_until(kill + Duration::from_millis(5), |n| {
        n.nodes[A].ep.plane_stats(qa, 3).unwrap().plane_retirements > 0
    });
    assert!(retired, "plane 3 was never retired");
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    let into_dead_plane = net.nodes[A].ep.plane_stats(qa, 3).unwrap().tx_packets - sent_before;
    println!(
        "at retirement, {:?} after the kill: {into_dead_plane} packets sent into plane 3; lost by RACK {}, by RTO {}, \
         presumed with the plane {}",
        net.now() - kill,
        s.losses_rack,
        s.losses_rto,
        s.losses_plane
    );
    assert!(s.losses_plane > 0, "nothing was in flight on the plane");
    assert!(
        s.losses_rack + s.losses_rto + s.losses_plane >= into_dead_plane,
        "packets sent into the dead plane still wait for a timer"
    );
    let (ok, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        kill + Duration::from_secs(1),
    );
    assert!(ok);
    check(&net, std::slice::from_ref(&p), &seen).unwrap();
}

#[test]
fn killed_plane_is_restored_by_probes_and_carries_traffic_again() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 2, &qp_config(8));
    let mut posted: Vec<Posted> = (0..10)
        .map(|i| write(&mut net, qa, qb, 4 << 20, i + 1))
        .collect();
    let t0 = net.now();
    net.schedule(t0 + us(100), Fault::PlaneDown(3));
    net.schedule(t0 + Duration::from_millis(3), Fault::PlaneUp(3));
    // During the outage: every EV of plane 3 is retired.
    net.run_until(t0 + Duration::from_millis(2), |_| false);
    let infos = net.nodes[A].ep.ev_infos(qa);
    assert!(
        infos
            .iter()
            .filter(|e| e.plane == 3)
            .all(|e| e.state == EvState::AssumedBad)
    );
    // Probes of a dead plane back off to at most 10 ms; give them that and a little.
    net.run_until(t0 + Duration::from_millis(20), |_| false);
    let infos = net.nodes[A].ep.ev_infos(qa);
    let p3: Vec<_> = infos.iter().filter(|e| e.plane == 3).collect();
    let back = p3
        .iter()
        .filter(|e| matches!(e.state, EvState::Good | EvState::Skip))
        .count();
    assert_eq!(back, p3.len(), "every EV of plane 3 is back: {p3:?}");
    assert!(p3.iter().all(|e| e.stats.restored > 0));
    // New traffic uses plane 3 again, with its equal share.
    let before: Vec<u64> = (0..8)
        .map(|p| net.nodes[A].ep.plane_stats(qa, p).unwrap().tx_packets)
        .collect();
    posted.extend((0..10).map(|i| write(&mut net, qa, qb, 4 << 20, 100 + i)));
    let (ok, seen) = run_to_completion(&mut net, &posted, t0 + Duration::from_secs(2));
    assert!(ok);
    check(&net, &posted, &seen).unwrap();
    let sent: Vec<u64> = (0..8)
        .map(|p| net.nodes[A].ep.plane_stats(qa, p).unwrap().tx_packets - before[p])
        .collect();
    let total: u64 = sent.iter().sum();
    println!("packets per plane after the restore: {sent:?}");
    assert!(
        sent[3] * 8 >= total * 9 / 10,
        "plane 3 carries its share again: {sent:?}"
    );
    let restored_events = std::iter::from_fn(|| net.nodes[A].ep.poll_event())
        .filter(
            |e| matches!(e, Event::EvChanged { change, .. } if change.from == EvState::AssumedBad),
        )
        .count();
    assert!(restored_events >= p3.len());
}

/// PATH-EV-8: a peer that stops running for several RTOs (a descheduled process) loses nothing; what it was sent
/// waits in its socket. Meanwhile the sender's RTOs fire on every plane, but nothing sent at or after the timed-out
/// packets has been acknowledged, so no path is to blame: every EV stays in service, and the transfer completes
/// with its data once the peer runs again.
#[test]
fn a_paused_peer_retires_no_path() {
    let cfg = qp_config(8);
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 5, &cfg);
    let p = write(&mut net, qa, qb, 8 << 20, 1);
    let paused_at = net.now() + us(20);
    let pause = cfg.rto_min() * 8;
    net.schedule(paused_at, Fault::NodePaused(B));
    net.schedule(paused_at + pause, Fault::NodeResumed(B));
    finish(&mut net, &p, paused_at + Duration::from_secs(1));
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    let evs = net.nodes[A].ep.ev_infos(qa);
    let retired: u32 = evs.iter().map(|e| e.stats.retired).sum();
    let changes = std::iter::from_fn(|| net.nodes[A].ep.poll_event())
        .filter(|e| matches!(e, Event::EvChanged { .. }))
        .count();
    println!(
        "paused {pause:?}: {} lost by RTO, {} by time, {retired} retirements, {changes} EV changes",
        s.losses_rto, s.losses_rack
    );
    assert!(
        s.losses_rto >= 8,
        "the pause outlasted the RTO on every plane"
    );
    assert_eq!(retired, 0, "a quiet peer retired paths: {evs:?}");
    assert_eq!(changes, 0);
}

#[test]
fn silent_peer_fails_with_retry_exceeded_within_the_qp_timeout() {
    let mut cfg = qp_config(8);
    cfg.timeout = 10; // 1.024 µs × 2^10 ≈ 1.05 ms
    cfg.retry_linear = 3;
    cfg.retry_exp = 2;
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 3, &cfg);
    let p1 = write(&mut net, qa, qb, 8 << 20, 1);
    let p2 = write(&mut net, qa, qb, 4096, 2);
    let silent_at = net.now() + us(20);
    net.schedule(silent_at, Fault::NodeSilent(B));
    let t = cfg.qp_timeout().unwrap();
    // Linear retries at T, then 2T and 4T, plus the first T of silence and slack for the last RTO.
    let bound = t * (1 + 3) + t * 2 + t * 4 + t;
    let mut seen = Seen::default();
    let ok = net.run_until(silent_at + bound * 2, |n| {
        drain(n, &mut seen);
        seen.a.len() >= 2
    });
    assert!(ok, "no error completion: a hang");
    let failed_at = net.now();
    assert_eq!(seen.a[0].wr_id, p1.wr_id);
    assert_eq!(seen.a[0].status, WcStatus::RetryExcErr);
    assert_eq!(seen.a[1].wr_id, p2.wr_id);
    assert_eq!(seen.a[1].status, WcStatus::WrFlushErr);
    assert_eq!(net.nodes[A].ep.qp_state(qa), Some(QpState::Error));
    let waited = failed_at - silent_at;
    println!(
        "error completion {waited:?} after the peer went silent (QP timeout {t:?}, bound {bound:?})"
    );
    assert!(waited <= bound, "took {waited:?}, bound {bound:?}");
    assert!(waited >= t * 4, "gave up early: {waited:?}");
    assert!(net.nodes[A].ep.poll_event().is_some());
    // Nothing further happens: no timers left, the QP is quiet.
    net.run_for(Duration::from_millis(50));
    drain(&mut net, &mut seen);
    assert_eq!(seen.a.len(), 2);
}

#[test]
fn nic_port_down_is_masked_at_once_and_told_to_the_peer() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 4, &qp_config(8));
    let p = write(&mut net, qa, qb, 32 << 20, 1);
    let t0 = net.now();
    net.schedule(t0 + us(30), Fault::PortDown { node: B, plane: 2 });
    net.run_until(t0 + us(31), |_| false);
    let before = net.nodes[A].ep.plane_stats(qa, 2).unwrap().tx_packets;
    let (ok, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        t0 + Duration::from_secs(1),
    );
    assert!(ok);
    check(&net, std::slice::from_ref(&p), &seen).unwrap();
    let after = net.nodes[A].ep.plane_stats(qa, 2).unwrap().tx_packets;
    // A learns of B's port from B's PORT_STATUS within about one RTT and stops using the plane without
    // retiring its EVs (they are masked, not bad).
    assert!(
        after - before < 40,
        "A kept sending on plane 2: {before} -> {after}"
    );
    let events: Vec<Event> = std::iter::from_fn(|| net.nodes[A].ep.poll_event()).collect();
    assert!(
        events
            .iter()
            .any(|e| matches!(e, Event::PortStatus { mask, .. } if *mask == 0xFB))
    );
    let sb = net.nodes[B].ep.stats();
    assert!(sb.tx_datagrams > 0);
}

#[test]
fn dead_spine_retires_only_its_paths() {
    let (mut net, qa, qb) = pair(4, PlaneConfig::default(), 5, &qp_config(4));
    net.schedule(net.now(), Fault::PathDown { plane: 1, path: 3 });
    let posted: Vec<Posted> = (0..4)
        .map(|i| write(&mut net, qa, qb, 4 << 20, i + 1))
        .collect();
    let limit = net.now() + Duration::from_secs(1);
    let (ok, seen) = run_to_completion(&mut net, &posted, limit);
    assert!(ok);
    check(&net, &posted, &seen).unwrap();
    let infos = net.nodes[A].ep.ev_infos(qa);
    let bad: Vec<_> = infos
        .iter()
        .filter(|e| e.state == EvState::AssumedBad)
        .collect();
    assert!(!bad.is_empty(), "the dead spine's EVs were retired");
    // Spine of an EV in the test network: (ev >> plane_bits) % 16; plane_bits is 2 for 4 planes.
    for e in &bad {
        assert_eq!(
            (e.plane, (e.ev >> 2) % 16),
            (1, 3),
            "only EVs through plane 1 / spine 3: {e:?}"
        );
    }
}

/// A slow plane's packets arrive after later PSNs from the other planes, so each SACK's arrivals straddle a
/// 64-PSN block boundary now and then. With random loss holding the cumulative ACK back, such a straggler must
/// still be reported (spec REL-SACK-2): the sender resends the holes and nothing else.
#[test]
fn stragglers_of_a_slow_plane_are_sacked_so_only_holes_are_resent() {
    let lossy = PlaneConfig {
        loss: 0.002,
        ..PlaneConfig::default()
    };
    let mut cfg = testing::NetConfig::uniform(8, lossy, 11);
    cfg.planes[7].delay += us(2);
    let mut net = testing::Net::new(cfg);
    net.add_node(Caps::ALL);
    net.add_node(Caps::ALL);
    let (qa, qb) = net.connect(A, B, &qp_config(8));
    let p = write(&mut net, qa, qb, 32 << 20, 1);
    let (ok, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        Instant::ZERO + Duration::from_secs(1),
    );
    assert!(ok, "transfer did not complete");
    check(&net, std::slice::from_ref(&p), &seen).unwrap();
    let a = net.nodes[A].ep.qp_stats(qa).unwrap();
    let b = net.nodes[B].ep.qp_stats(qb).unwrap();
    let lost: u64 = net.counters.iter().map(|c| c.lost).sum();
    println!(
        "{lost} packets lost in the network; sender: {} retransmits ({} by time, {} by timeout); receiver: {} \
         duplicates",
        a.tx_retransmits, a.losses_rack, a.losses_rto, b.rx_duplicates
    );
    assert!(lost > 10, "too little loss to test anything: {lost}");
    assert!(
        b.rx_duplicates <= lost / 10,
        "{} of {} retransmissions were of packets that had arrived",
        b.rx_duplicates,
        a.tx_retransmits
    );
}

/// Runs one posted operation to its completion and checks it.
fn finish(net: &mut testing::Net, p: &Posted, limit: Instant) {
    let (ok, seen) = run_to_completion(net, std::slice::from_ref(p), limit);
    assert!(ok, "not complete by {limit:?}");
    check(net, std::slice::from_ref(p), &seen).unwrap();
}

fn retired_on(net: &testing::Net, qa: u32, plane: u8) -> usize {
    net.nodes[A]
        .ep
        .ev_infos(qa)
        .iter()
        .filter(|e| e.plane == plane && e.state == EvState::AssumedBad)
        .count()
}

/// PATH-PLANE-1: when the peer reports its port on a plane down, what A still has in flight to it on that plane
/// is resent elsewhere at once: no packet of the dead port waits for a reorder window or an RTO, and no EV is
/// retired for it (the packets were lost to a failure, not to a bad path).
#[test]
fn peer_port_down_resends_what_was_in_flight_to_it_at_once() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 6, &qp_config(8));
    let p = write(&mut net, qa, qb, 32 << 20, 1);
    let t0 = net.now();
    net.schedule(t0 + us(30), Fault::PortDown { node: B, plane: 2 });
    let told = net.run_until(t0 + us(60), |n| {
        n.nodes[A].ep.qp_stats(qa).unwrap().losses_plane > 0
    });
    assert!(
        told,
        "A never resent what it had in flight to B's dead port"
    );
    finish(&mut net, &p, t0 + Duration::from_secs(1));
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    println!("{s:?}");
    assert_eq!(
        (s.losses_rack, s.losses_rto),
        (0, 0),
        "packets lost at B's dead port waited for a timer"
    );
    assert_eq!(retired_on(&net, qa, 2), 0, "EVs of plane 2 were retired");
}

/// PATH-PLANE-1 at the sender: a local port going down resends its flight at once, before any feedback.
#[test]
fn local_port_down_resends_its_flight_at_once() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 7, &qp_config(8));
    let p = write(&mut net, qa, qb, 32 << 20, 1);
    let t0 = net.now();
    net.run_until(t0 + us(30), |_| false);
    let inflight_on_2 = net.nodes[A].ep.plane_stats(qa, 2).unwrap().tx_packets;
    assert!(inflight_on_2 > 0);
    net.schedule(t0 + us(30), Fault::PortDown { node: A, plane: 2 });
    net.run_until(t0 + us(30) + Duration::from_nanos(1), |_| false);
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    assert!(s.losses_plane > 0, "nothing presumed lost: {s:?}");
    finish(&mut net, &p, t0 + Duration::from_secs(1));
    assert_eq!(retired_on(&net, qa, 2), 0);
}

/// CC-QA-3: a plane that dies silently under the tail of a transfer leaves packets with little or nothing sent
/// after them. They are found by time (REL-LOSS-1, REL-TLP-1: each path's round trip, not an RTO) and the plane
/// is retired with what it still held; quick adapt must not read the silence before as "the network carries
/// nothing" and cut the window of all eight planes to one MTU (the tail then took several RTTs per handful of
/// packets). Before losses were found by each path's round trip, the tail waited for the RTO: 40-60 µs.
#[test]
fn a_tail_lost_to_a_silent_plane_keeps_the_window() {
    let (mut net, qa, qb) = pair(8, PlaneConfig::default(), 8, &qp_config(8));
    let p = write(&mut net, qa, qb, 1 << 20, 1);
    let t0 = net.now();
    // 1 MiB over 8 x 100 Gbit/s takes about 10.5 us to send: kill plane 3 under the last microseconds.
    net.schedule(t0 + us(8), Fault::PlaneDown(3));
    finish(&mut net, &p, t0 + Duration::from_millis(10));
    let took = net.now() - t0;
    let s = net.nodes[A].ep.qp_stats(qa).unwrap();
    let (_, window, _) = net.nodes[A].ep.qp_transport(qa).unwrap();
    println!("done in {took:?}; window {window}; {s:?}");
    assert_eq!(s.losses_rto, 0, "the tail was left to RTO: {s:?}");
    assert!(s.losses_rack > 0, "no loss found by time: {s:?}");
    assert!(
        window >= 64 * 4096,
        "the window collapsed to {window} B after the tail losses"
    );
    // The dead plane's round trip plus the reorder allowance after the last packets went out, then one round
    // trip for the resent tail: under three base RTTs after the 8 µs kill.
    assert!(took < us(35), "took {took:?}");
}

/// A datagram handed back by the network (its quote from an ICMP unreachable) retires the EV its headers name,
/// at once, and the transfer goes on without it; quotes cut after the headers suffice, and quotes that are
/// unreadable, name no EV, or are addressed to no QP of that peer retire nothing (spec PATH-BOUNCE-1).
#[test]
fn a_bounced_datagram_retires_its_path_at_once() {
    let (mut net, qa, qb) = pair(4, PlaneConfig::default(), 11, &qp_config(4));
    let p = write(&mut net, qa, qb, 256 << 10, 1);
    let now = net.now();
    // Take the first packet A sends (it never reaches B: the network "bounced" it).
    let mut buf = vec![0u8; 9000];
    let node = &mut net.nodes[A];
    let t = node
        .ep
        .poll_transmit(now, &mut buf, &mut node.mem)
        .expect("a data packet");
    assert_ne!(t.class, wire::TrafficClass::Control);
    let sent = buf[..t.len].to_vec();
    let state_of = |net: &testing::Net, ev: u32| {
        net.nodes[A]
            .ep
            .ev_infos(qa)
            .into_iter()
            .find(|i| i.ev == ev)
            .map(|i| i.state)
    };
    assert_eq!(state_of(&net, t.ev), Some(EvState::Good));
    let ep = &mut net.nodes[A].ep;

    // Forgeries and junk retire nothing: another destination QP, another peer, an ACK, a runt.
    let mut forged = sent.clone();
    let wrong_qp = qb ^ 0x40;
    forged[5..8].copy_from_slice(&wrong_qp.to_be_bytes()[1..]);
    assert_eq!(ep.handle_bounce(now, PeerId(B as u32), &forged), None);
    assert_eq!(ep.handle_bounce(now, PeerId(7), &sent), None);
    assert_eq!(ep.handle_bounce(now, PeerId(B as u32), &sent[..10]), None);
    let ack = wire::Packet {
        bth: wire::Bth {
            opcode: wire::Opcode::Ack,
            se: false,
            rtx: false,
            pkey: wire::DEFAULT_PKEY,
            dest_qp: qb,
            ack_req: false,
            psn: 0,
        },
        body: wire::Body::Ack(wire::Ack {
            cack_psn: 0,
            cmsn: 0,
        }),
    };
    let mut ack_buf = [0u8; 64];
    let n = ack.emit_header(&mut ack_buf).unwrap();
    assert_eq!(ep.handle_bounce(now, PeerId(B as u32), &ack_buf[..n]), None);
    assert_eq!(ep.stats().bounces_ignored, 4);
    assert_eq!(ep.stats().bounces, 0);
    assert_eq!(state_of(&net, t.ev), Some(EvState::Good));

    // The real quote, cut right after the data headers as a short ICMP quote would be.
    let hdr = wire::Packet::parse_prefix(&sent).unwrap().header_len();
    let ep = &mut net.nodes[A].ep;
    assert_eq!(
        ep.handle_bounce(now, PeerId(B as u32), &sent[..hdr]),
        Some(t.ev)
    );
    assert_eq!(ep.stats().bounces, 1);
    assert_eq!(state_of(&net, t.ev), Some(EvState::AssumedBad));
    let mut retired = false;
    while let Some(e) = net.nodes[A].ep.poll_event() {
        retired |= matches!(e, Event::EvChanged { qpn, change } if qpn == qa && change.ev == t.ev
            && change.to == EvState::AssumedBad);
    }
    assert!(retired, "the retirement is reported as an EV event");

    // The lost packet is recovered and the message completes.
    let (ok, seen) = run_to_completion(
        &mut net,
        std::slice::from_ref(&p),
        now + Duration::from_millis(50),
    );
    assert!(ok);
    check(&net, &[p], &seen).unwrap();
}
