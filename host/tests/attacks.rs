//! The attacks of issue 22, each as an off-path attacker runs it against two hosts over the in-memory fabric: it
//! sends any datagram with any source address (`MemFabric::inject`), knows the hosts' addresses and, where a
//! test says so, the QP numbers and PSNs (the strongest attacker short of holding a key), but sees no traffic.
//! Each test fails on the code before the fix (commit 7220f85) and names the spec requirement that holds.

use std::time::{Duration, Instant};

use mrc::wire::{
    self, Ack, Body, Bth, EP_QPN, EpOp, EpRequest, Opcode, PSN_MASK, Packet, Sack, SackMark,
};
use mrc::{Access, Completion, SendOp, Sge, WcStatus};
use mrc_host::RxBatch;
use mrc_host::bootstrap::{Msg, QpHalf, seal};
use mrc_host::{
    AsyncEvent, Blob, Host, HostConfig, Link, MemFabric, MemPlanes, Mr, PeerPlane, PlaneIo,
    ProgressMode, SendRequest,
};

mod common;

use common::{LIMIT, link};

type MemHost = Host<MemPlanes>;

fn host(f: &MemFabric, planes: usize) -> MemHost {
    let mut cfg = HostConfig::loopback(planes);
    cfg.progress = ProgressMode::Manual;
    cfg.bootstrap_timeout = Duration::from_secs(5);
    Host::start_with(cfg, f.attach().unwrap()).unwrap()
}

fn pump(hosts: &[&MemHost], rounds: usize) {
    for _ in 0..rounds {
        for h in hosts {
            h.progress().unwrap();
        }
    }
}

/// Pumps for `d` of wall time.
fn pump_for(hosts: &[&MemHost], d: Duration) {
    let end = Instant::now() + d;
    while Instant::now() < end {
        pump(hosts, 1);
    }
}

fn buffers(a: &MemHost, b: &MemHost, len: usize) -> (Mr, Mr, Vec<u8>) {
    let src = a
        .alloc_buffer(a.default_pd(), len, Access::LOCAL_WRITE)
        .unwrap();
    let dst = b
        .alloc_buffer(
            b.default_pd(),
            len,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let data: Vec<u8> = (0..len as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8 | 1)
        .collect();
    a.write_buffer(&src, 0, &data).unwrap();
    (src, dst, data)
}

fn post_write(l: &Link<MemPlanes>, src: &Mr, dst: &Mr, len: usize) {
    let sge = [Sge {
        addr: src.addr,
        len: len as u32,
        lkey: src.lkey,
    }];
    l.qps()[0]
        .post_send(&SendRequest {
            wr_id: 1,
            op: SendOp::Write {
                remote_addr: dst.addr,
                rkey: dst.rkey,
            },
            sges: &sge,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
        })
        .unwrap();
}

/// The send completion of `l`, pumping until it comes (or `LIMIT`).
fn completion(hosts: &[&MemHost], l: &Link<MemPlanes>) -> Completion {
    let start = Instant::now();
    let mut wc = [Completion::default()];
    loop {
        pump(hosts, 1);
        if l.send_cq().poll(&mut wc) == 1 {
            return wc[0];
        }
        assert!(start.elapsed() < LIMIT, "no completion");
    }
}

/// A WRITE of `len` bytes over `l` from `a` to `b`: completes with success and the bytes are there.
fn write_ok(a: &MemHost, b: &MemHost, l: &Link<MemPlanes>, len: usize) {
    let (src, dst, data) = buffers(a, b, len);
    post_write(l, &src, &dst, len);
    let wc = completion(&[a, b], l);
    assert_eq!(wc.status, WcStatus::Success);
    let mut got = vec![0; len];
    b.read_buffer(&dst, 0, &mut got).unwrap();
    assert!(got == data, "the WRITE's bytes arrived");
}

fn plane0(h: &MemHost) -> std::net::SocketAddrV6 {
    h.local().planes[0]
}

/// An MRC packet to `dest_qp`, sealed with its ICRC and no AUTH tag: what an attacker without the key makes.
fn forge(opcode: Opcode, dest_qp: u32, psn: u32, body: Body<'_>) -> Vec<u8> {
    let p = Packet {
        bth: Bth {
            psn: psn & PSN_MASK,
            ..Bth::new(opcode, dest_qp)
        },
        body,
    };
    let mut buf = vec![0u8; p.buffer_len()];
    let n = p.emit(&mut buf).unwrap();
    buf.truncate(n);
    buf
}

fn take_all(x: &mut MemPlanes, planes: usize) -> usize {
    let mut rx = RxBatch::new(16, 4096);
    let mut n = 0;
    for p in 0..planes {
        n += x.recv(p, &mut rx).unwrap();
    }
    n
}

/// Finding 1: CLOSE was an oracle (answered CLOSED exactly when no named QPN existed) and, spoofed from the
/// peer with the right QPNs, a kill switch. Now a CLOSE must prove the link's key (spec HOST-AUTH-2): neither
/// is answered nor obeyed.
#[test]
fn close_from_a_stranger_is_neither_answered_nor_obeyed() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, lb) = link(&a, &b, 1);
    let (qa, qb) = (la.qps()[0].qpn(), lb.qps()[0].qpn());
    let mut x = f.attach().unwrap();
    let me = x.local_addr(0);
    // The oracle: CLOSEs from the attacker's own address naming QPNs that exist, do not, and the true pair.
    for (token, pairs) in [
        (1, vec![(7, 9)]),
        (2, vec![(qa, 0x00ab_cdef)]),
        (3, vec![(qa, qb)]),
    ] {
        let m = Msg::Close {
            token,
            pairs,
            mac: [0; 8],
        };
        assert!(f.inject(0, me, plane0(&b), &m.encode()));
    }
    pump_for(&[&a, &b], Duration::from_millis(20));
    assert_eq!(take_all(&mut x, 2), 0, "nothing comes back to the prober");
    // The kill switch: the true pair, spoofed from A's plane 0, and a tag guessed.
    let m = Msg::Close {
        token: 4,
        pairs: vec![(qa, qb)],
        mac: [0x5a; 8],
    };
    assert!(f.inject(0, plane0(&a), plane0(&b), &m.encode()));
    pump_for(&[&a, &b], Duration::from_millis(50));
    while let Some(e) = b.poll_event() {
        assert!(!matches!(e, AsyncEvent::LinkClosed { .. }), "{e:?}");
    }
    assert_eq!(b.stats().bootstrap_rejected, 4);
    write_ok(&a, &b, &la, 64 * 1024);
}

/// Finding 2: with the QPN and the PSNs, forged SACKs made a WRITE complete with success although its bytes
/// never arrived. Now every packet of a link proves the peer's key (spec SEC-AUTH-1).
#[test]
fn forged_sacks_complete_no_write_whose_bytes_did_not_arrive() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, lb) = link(&a, &b, 1);
    let (qa, qb) = (la.qps()[0].qpn(), lb.qps()[0].qpn());
    let len = 128 * 1024;
    let (src, dst, data) = buffers(&a, &b, len);
    // The switches fail: nothing A sends reaches B, but the attacker sits behind them.
    for p in 0..2 {
        f.set_plane_up(p, false);
    }
    post_write(&la, &src, &dst, len);
    pump(&[&a], 20);
    let sent = a.inspect(|dp| dp.endpoint_ref().qp_stats(qa).unwrap().tx_data_packets) as u32;
    assert!(sent > 0);
    let cack = la.qps()[0].psn().wrapping_add(sent - 1) & PSN_MASK;
    let sack = forge(
        Opcode::Sack,
        qa,
        0,
        Body::Sack(Sack {
            mark: SackMark::None,
            probe_reply: false,
            mpr: 8,
            ev: 0,
            cack_psn: cack,
            sack_base: (cack + 1) & PSN_MASK,
            bitmap: 0,
            ts_echo: None,
            cwnd_pen: 0,
            ooo_count: 0,
        }),
    );
    let ack = forge(
        Opcode::Ack,
        qa,
        0,
        Body::Ack(Ack {
            cack_psn: cack,
            cmsn: 0,
        }),
    );
    for p in 0..2 {
        let from = b.local().planes[p];
        assert!(f.inject(p, from, a.local().planes[p], &sack));
        assert!(f.inject(p, from, a.local().planes[p], &ack));
    }
    pump(&[&a], 20);
    let mut wc = [Completion::default()];
    assert_eq!(
        la.send_cq().poll(&mut wc),
        0,
        "completed before a byte arrived: {:?}",
        wc[0]
    );
    assert_eq!(a.stats().engine.rx_bad_auth, 4);
    for p in 0..2 {
        f.set_plane_up(p, true);
    }
    let wc = completion(&[&a, &b], &la);
    assert_eq!(wc.status, WcStatus::Success);
    let mut got = vec![0; len];
    b.read_buffer(&dst, 0, &mut got).unwrap();
    assert!(got == data);
    drop(lb);
    let _ = qb;
}

/// A CONNECT as someone holding `blob` makes it, from the attacker's node, for `planes` planes.
fn connect_msg(blob: &[u8], token: u64, planes: Vec<PeerPlane>, app: &[u8]) -> Vec<u8> {
    let b = Blob::decode(blob).unwrap();
    let mrc_host::BlobKind::Listener { id } = b.kind else {
        panic!("a listener blob");
    };
    let m = Msg::Connect {
        token,
        listener: id,
        planes,
        qps: vec![QpHalf {
            qpn: 0x10_0010,
            psn: 1,
            caps: mrc::Caps::default(),
            key: [3; 16],
        }],
        app: app.to_vec(),
        mac: [0; 8],
    };
    seal(&m, &wire::AuthKey::new(b.key))
}

fn planes_of(x: &MemPlanes) -> Vec<PeerPlane> {
    (0..x.planes())
        .map(|p| PeerPlane {
            addr: x.local_addr(p),
            t0: 0,
        })
        .collect()
}

/// Polls `l` until a link is accepted, answering `reply`; `None` after `tries` empty polls.
fn accept_one(
    hosts: &[&MemHost],
    l: &mut mrc_host::Listener<MemPlanes>,
    tries: usize,
) -> Option<(Link<MemPlanes>, Vec<u8>)> {
    for _ in 0..tries {
        pump(hosts, 1);
        if let Some(got) = l.poll_accept(b"ok").unwrap() {
            return Some(got);
        }
    }
    None
}

/// Finding 3: pending CONNECTs were unbounded. Now a listener keeps at most 64 and a host 1024, the oldest
/// dropped and counted (spec HOST-QUEUE-1): after a flood from someone holding the blob, the genuine
/// connector that comes last is among the next 65 accepted.
#[test]
fn a_connect_flood_is_bounded_and_the_latest_connector_is_served() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let mut l = b.listen().unwrap();
    let blob = l.blob();
    let x = f.attach().unwrap();
    let flood = 2000u64;
    for chunk in 0..flood / 100 {
        for t in 0..100 {
            let m = connect_msg(&blob, chunk * 100 + t + 1, planes_of(&x), b"flood");
            assert!(f.inject(0, x.local_addr(0), plane0(&b), &m));
        }
        // A round reads 32 datagrams a plane: take them all before the next burst.
        pump(&[&b], 8);
    }
    let dropped = b.stats().connects_dropped;
    assert!(dropped >= flood - 64, "{dropped} dropped");
    let mut c = a.connect(&blob, 1, b"genuine").unwrap();
    pump(&[&a, &b], 4);
    let mut served = false;
    for _ in 0..65 {
        match accept_one(&[&a, &b], &mut l, 4) {
            Some((_, app)) if app == b"genuine" => {
                served = true;
                break;
            }
            Some(_) => {}
            None => break,
        }
    }
    assert!(served, "the genuine connector is served");
    let start = Instant::now();
    while c.poll().unwrap().is_none() {
        pump(&[&a, &b], 1);
        assert!(start.elapsed() < LIMIT);
    }
}

/// Finding 4: a bad queued request made `poll_accept` fail, and a well-formed one without the listener's key
/// was accepted in place of the genuine connector. Now the bad one is refused and skipped, the unkeyed one never
/// queued (spec HOST-AUTH-1, HOST-QUEUE-1).
#[test]
fn a_bad_or_forged_connect_neither_aborts_nor_hijacks_an_accept() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let mut l = b.listen().unwrap();
    let blob = l.blob();
    let x = f.attach().unwrap();
    // Holding the blob, but one plane where the listener has two.
    let one = planes_of(&x)[..1].to_vec();
    assert!(f.inject(
        0,
        x.local_addr(0),
        plane0(&b),
        &connect_msg(&blob, 1, one, b"bad")
    ));
    // Well formed, spoofed from A, without the key.
    let mut forged = connect_msg(&blob, 2, planes_of(&x), b"forged");
    let n = forged.len();
    forged[n - 8..].copy_from_slice(&[0x77; 8]);
    assert!(f.inject(0, plane0(&a), plane0(&b), &forged));
    pump(&[&b], 2);
    let mut c = a.connect(&blob, 1, b"genuine").unwrap();
    let start = Instant::now();
    let (lb, app) = loop {
        pump(&[&a, &b], 1);
        if let Some(got) = l.poll_accept(b"ok").unwrap() {
            break got;
        }
        assert!(start.elapsed() < LIMIT, "nothing accepted");
    };
    assert_eq!(app, b"genuine");
    assert_eq!(b.stats().connects_refused, 1);
    let la = loop {
        pump(&[&a, &b], 1);
        if let Some((la, _)) = c.poll().unwrap() {
            break la;
        }
        assert!(start.elapsed() < LIMIT);
    };
    write_ok(&a, &b, &la, 32 * 1024);
    drop(lb);
}

/// Finding 5: an accepted CONNECT rebound a live peer's plane addresses, whose datagrams were then dropped as
/// `rx_wrong_peer`. Now a request naming another peer's address is refused (spec HOST-PEER-1).
#[test]
fn a_connect_never_rebinds_a_live_peer() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, _lb) = link(&a, &b, 1);
    let mut l2 = b.listen().unwrap();
    let blob = l2.blob();
    let x = f.attach().unwrap();
    let mut planes = planes_of(&x);
    planes[1].addr = a.local().planes[1];
    assert!(f.inject(
        0,
        x.local_addr(0),
        plane0(&b),
        &connect_msg(&blob, 9, planes, b"x")
    ));
    assert!(accept_one(&[&a, &b], &mut l2, 8).is_none(), "refused");
    for _ in 0..4 {
        write_ok(&a, &b, &la, 256 * 1024);
    }
    assert_eq!(b.stats().engine.rx_wrong_peer, 0);
}

/// Finding 6: one forged PORT_STATUS masked every other plane of a peer for good. Now an endpoint packet to a
/// keyed peer must prove a link's key (spec SEC-AUTH-2), and a masked plane is probed and restored when it
/// delivers anyway (spec PATH-PLANE-3).
#[test]
fn a_forged_port_status_masks_no_plane() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, lb) = link(&a, &b, 1);
    let qb = lb.qps()[0].qpn();
    let report = forge(
        Opcode::EpRequest,
        EP_QPN,
        0,
        Body::EpRequest(EpRequest {
            op: EpOp::PortStatus,
            req_id: 1,
            port_mask: 0b01,
            ev: 0,
            ts: None,
        }),
    );
    assert!(f.inject(0, plane0(&a), plane0(&b), &report));
    pump(&[&a, &b], 4);
    let before = b.inspect(|dp| dp.endpoint_ref().plane_stats(qb, 1).unwrap().tx_packets);
    // B writes to A: its QP to A sprays over both planes.
    for _ in 0..4 {
        write_ok(&b, &a, &lb, 256 * 1024);
    }
    let after = b.inspect(|dp| dp.endpoint_ref().plane_stats(qb, 1).unwrap().tx_packets);
    assert!(
        after > before + 16,
        "plane 1 carries B's data: {before} -> {after}"
    );
    drop(la);
}

/// Finding 9: the controller accepted DENY of every EV of a live QP, which then died. Now denying the last EV
/// that is not denied is refused with EBUSY (spec HOST-CTL-1), as REPLACE_EV refuses to move a plane's last EV.
#[test]
fn deny_of_a_live_qps_last_ev_is_refused_busy() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, _lb) = link(&a, &b, 1);
    let qa = la.qps()[0].qpn();
    let evs: Vec<u32> = a.ev_infos(qa).iter().map(|i| i.ev).collect();
    let (last, rest) = evs.split_last().unwrap();
    for &ev in rest {
        a.set_ev_denied(qa, ev, true).unwrap();
    }
    let e = a.set_ev_denied(qa, *last, true).unwrap_err();
    assert_eq!(e.errno(), libc::EBUSY, "{e}");
    write_ok(&a, &b, &la, 64 * 1024);
}
