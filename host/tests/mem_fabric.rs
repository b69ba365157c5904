//! Two hosts over the in-memory fabric (`MemFabric`, no sockets): the whole host — bootstrap in band, the
//! progress loop, the engine, placement — with the network replaced by queues whose failures the test chooses.
//! Needs no network lock.

use std::time::{Duration, Instant};

use mrc::{Access, Completion, SendOp, Sge, WcStatus};
use mrc_host::{
    AsyncEvent, Host, HostConfig, Link, MemFabric, MemPlanes, Mr, ProgressMode, QpRetry,
    SendRequest,
};

mod common;

use common::{LIMIT, link};

type MemHost = Host<MemPlanes>;

fn host(f: &MemFabric, planes: usize) -> MemHost {
    let mut cfg = HostConfig::loopback(planes);
    cfg.progress = ProgressMode::Manual;
    Host::start_with(cfg, f.attach().unwrap()).unwrap()
}

/// Buffers: `len` bytes of a pattern at `a`, `len` zero bytes writable by the peer at `b`.
fn buffers(a: &MemHost, b: &MemHost, len: usize, seed: u32) -> (Mr, Mr, Vec<u8>) {
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
        .map(|i| ((i.wrapping_mul(seed) + 3) ^ (i >> 11)) as u8)
        .collect();
    a.write_buffer(&src, 0, &data).unwrap();
    (src, dst, data)
}

fn write(la: &Link<MemPlanes>, wr_id: u64, src: &Mr, dst: &Mr, off: usize, len: usize) {
    let sge = [Sge {
        addr: src.addr + off as u64,
        len: len as u32,
        lkey: src.lkey,
    }];
    la.qps()[0]
        .post_send(&SendRequest {
            wr_id,
            op: SendOp::Write {
                remote_addr: dst.addr + off as u64,
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

/// Runs both hosts until `done` says so; returns every async event `a` raised meanwhile.
fn drive(a: &MemHost, b: &MemHost, done: impl FnMut() -> bool) -> Vec<AsyncEvent> {
    drive_all(&[a, b], done)
}

/// Runs `hosts` until `done` says so; returns every async event the first raised meanwhile.
fn drive_all(hosts: &[&MemHost], mut done: impl FnMut() -> bool) -> Vec<AsyncEvent> {
    let start = Instant::now();
    let mut events = Vec::new();
    while !done() {
        assert!(start.elapsed() < LIMIT, "stuck; events so far {events:?}");
        for h in hosts {
            h.progress().unwrap();
        }
        events.extend(std::iter::from_fn(|| hosts[0].poll_event()));
    }
    events
}

/// Posts `chunks` WRITEs of `chunk` bytes covering the buffers and waits for their completions, calling
/// `during(completed)` after each; returns the completions and `a`'s async events.
fn transfer(
    a: &MemHost,
    b: &MemHost,
    la: &Link<MemPlanes>,
    (src, dst): (&Mr, &Mr),
    chunk: usize,
    mut during: impl FnMut(usize),
) -> (Vec<Completion>, Vec<AsyncEvent>) {
    let chunks = src.len / chunk;
    for k in 0..chunks {
        write(la, k as u64, src, dst, k * chunk, chunk);
    }
    let mut got = Vec::new();
    let events = drive(a, b, || {
        let mut out = [Completion::default(); 16];
        let n = la.send_cq().poll(&mut out);
        for c in &out[..n] {
            got.push(*c);
            during(got.len());
        }
        got.len() == chunks
    });
    (got, events)
}

fn assert_landed(b: &MemHost, dst: &Mr, want: &[u8]) {
    let mut landed = vec![0u8; want.len()];
    b.read_buffer(dst, 0, &mut landed).unwrap();
    assert!(
        landed == want,
        "the bytes that landed differ from the source"
    );
}

/// A plane fails silently in the middle of a transfer: the transfer finishes on the others, byte-exact, the
/// engine retires the plane's paths; the plane recovers and a later transfer uses it again.
#[test]
fn write_survives_a_plane_failing_mid_transfer_and_uses_it_again_after_recovery() {
    let f = MemFabric::new(4);
    let (a, b) = (host(&f, 4), host(&f, 4));
    let (la, _lb) = link(&a, &b, 1);
    let (src, dst, data) = buffers(&a, &b, 4 << 20, 7);
    let (done, events) = transfer(&a, &b, &la, (&src, &dst), 64 << 10, |n| {
        if n == 8 {
            f.set_plane_up(1, false);
        }
    });
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    assert_landed(&b, &dst, &data);
    let s = f.stats();
    assert!(
        s.dropped_down > 0,
        "the plane failed while data was in flight: {s:?}"
    );
    // A starved test thread (a loaded CI machine) can finish the transfer on QP timeouts alone, which blame
    // no path (everything looks lost after a gap): then more WRITEs meet the dead plane until the time rule
    // retires it.
    let mut retired = events
        .iter()
        .any(|e| matches!(e, AsyncEvent::PathRetired { plane: 1, .. }));
    let start = Instant::now();
    while !retired {
        assert!(
            start.elapsed() < LIMIT,
            "plane 1's paths were never retired; events {events:?}"
        );
        let (done, more) = transfer(&a, &b, &la, (&src, &dst), 64 << 10, |_| {});
        assert!(done.iter().all(|c| c.status == WcStatus::Success));
        retired = more
            .iter()
            .any(|e| matches!(e, AsyncEvent::PathRetired { plane: 1, .. }));
    }
    // Recovery: keep writing until plane 1's paths are restored and carry data again.
    f.set_plane_up(1, true);
    let before = f.stats().delivered[1];
    let (src2, dst2, data2) = buffers(&a, &b, 1 << 20, 13);
    let mut restored = false;
    let start = Instant::now();
    while !restored || f.stats().delivered[1] < before + 64 {
        assert!(start.elapsed() < LIMIT, "plane 1 never came back");
        let (done, events) = transfer(&a, &b, &la, (&src2, &dst2), 64 << 10, |_| {});
        assert!(done.iter().all(|c| c.status == WcStatus::Success));
        restored |= events
            .iter()
            .any(|e| matches!(e, AsyncEvent::PathRestored { plane: 1, .. }));
    }
    assert_landed(&b, &dst2, &data2);
}

/// A plane's link goes down (the carrier tells the hosts, as a NIC's link state) and up again: the hosts raise
/// port events, the transfer never needs the plane, and the data is exact under 1 % random loss.
#[test]
fn carrier_changes_reach_the_hosts_and_loss_is_repaired() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, _lb) = link(&a, &b, 1);
    f.set_loss(10_000, 1);
    f.set_carrier(0, false);
    let (src, dst, data) = buffers(&a, &b, 2 << 20, 31);
    let (done, events) = transfer(&a, &b, &la, (&src, &dst), 128 << 10, |_| {});
    assert!(
        done.iter().all(|c| c.status == WcStatus::Success),
        "{done:?}"
    );
    assert_landed(&b, &dst, &data);
    assert!(
        events.contains(&AsyncEvent::PortDown { plane: 0 }),
        "{events:?}"
    );
    assert!(f.stats().dropped_loss > 0);
    f.set_carrier(0, true);
    let mut rounds = 0;
    let events = drive(&a, &b, || {
        rounds += 1;
        rounds > 2
    });
    assert!(
        events.contains(&AsyncEvent::PortUp { plane: 0 }),
        "{events:?}"
    );
}

/// The peer vanishes (its host and link dropped: its node leaves the fabric and nothing answers). A WRITE then
/// retries at the profile's ACK timeout `retry_cnt` times, then with back-off, and completes with RETRY_EXC_ERR;
/// the QP is in ERROR and raises `QpFatal`. Not sooner than the settings allow, and after exactly that many
/// retries.
#[test]
fn a_vanished_peer_fails_the_qp_with_retry_exceeded_after_the_configured_retries() {
    let f = MemFabric::new(2);
    let mut cfg = HostConfig::loopback(2);
    cfg.progress = ProgressMode::Manual;
    // 1.05 ms, 3 retries at it, then 2 with back-off (2.1 ms, 4.2 ms).
    cfg.profile.ack_timeout = 10;
    cfg.profile.retry_cnt = 3;
    cfg.profile.retry_backoff = 2;
    let a = Host::start_with(cfg, f.attach().unwrap()).unwrap();
    let b = host(&f, 2);
    let (la, lb) = link(&a, &b, 1);
    let qp = la.qps()[0].clone();
    let want = QpRetry {
        ack_timeout: 10,
        retry_cnt: 3,
        retry_backoff: 2,
    };
    assert_eq!(qp.retry(), Some(want));
    let bound = want.give_up_after().unwrap();
    assert_eq!(bound, Duration::from_nanos(1_048_576 * (4 + 2 + 4)));
    let (src, dst, data) = buffers(&a, &b, 64 << 10, 5);
    let (done, _) = transfer(&a, &b, &la, (&src, &dst), 64 << 10, |_| {});
    assert_eq!(done[0].status, WcStatus::Success);
    assert_landed(&b, &dst, &data);

    drop(lb);
    drop(b);
    let qpn = qp.qpn();
    let retries = |h: &MemHost| h.inspect(|dp| dp.endpoint_ref().qp_stats(qpn).unwrap().retries);
    let before = retries(&a);
    let t0 = Instant::now();
    write(&la, 99, &src, &dst, 0, 4096);
    let mut out = [Completion::default(); 1];
    let events = drive_all(&[&a], || la.send_cq().poll(&mut out) == 1);
    let elapsed = t0.elapsed();
    assert_eq!((out[0].wr_id, out[0].status), (99, WcStatus::RetryExcErr));
    assert_eq!(qp.state(), mrc::QpState::Error);
    assert!(events.contains(&AsyncEvent::QpFatal { qpn }), "{events:?}");
    // Every timeout but the last retried; the last gave up.
    assert_eq!(retries(&a) - before, 3 + 2 + 1);
    assert!(
        elapsed >= bound,
        "gave up after {elapsed:?}, before the {bound:?} the settings allow"
    );
    assert!(f.stats().dropped_unknown > 0);
}

/// Per-QP settings: verbs' RTS values map to the engine's units, `set_retry` changes a live QP, a timeout
/// beyond 31 is refused.
#[test]
fn retry_settings_per_qp_and_from_verbs() {
    assert_eq!(
        QpRetry::from_verbs(14, 7),
        QpRetry {
            ack_timeout: 16,
            retry_cnt: 7,
            retry_backoff: 0
        }
    );
    assert_eq!(QpRetry::from_verbs(0, 3).ack_timeout, 0);
    assert_eq!(QpRetry::from_verbs(0, 3).give_up_after(), None);
    assert_eq!(QpRetry::from_verbs(31, 3).ack_timeout, 31);
    for t in [0, 1, 14, 20, 29] {
        assert_eq!(QpRetry::from_verbs(t, 0).verbs_timeout(), t);
    }
    // 4.096 µs × 2^8 = 1.05 ms, 2 retries: 3 timeouts.
    assert_eq!(
        QpRetry::from_verbs(8, 2).give_up_after(),
        Some(Duration::from_nanos(3 * (4096 << 8)))
    );
    let f = MemFabric::new(1);
    let (a, b) = (host(&f, 1), host(&f, 1));
    let (la, _lb) = link(&a, &b, 2);
    let (q0, q1) = (&la.qps()[0], &la.qps()[1]);
    assert_eq!(q0.retry(), Some(HostConfig::loopback(1).profile.retry()));
    q0.set_retry(QpRetry::from_verbs(8, 2)).unwrap();
    assert_eq!(q0.retry(), Some(QpRetry::from_verbs(8, 2)));
    assert_eq!(q1.retry(), Some(HostConfig::loopback(1).profile.retry()));
    let e = q1
        .set_retry(QpRetry {
            ack_timeout: 32,
            ..QpRetry::from_verbs(1, 1)
        })
        .unwrap_err();
    assert_eq!(e.errno(), libc::EINVAL);
}

/// Graceful close with work in flight both ways: A closes right after posting; its WRITEs and B's drain and
/// complete, then both sides destroy their QPs. B sees `LinkClosed` for each of its QPs, never a QP error; the
/// hosts keep no QP; B's own close afterwards finds nothing left to do.
#[test]
fn link_close_drains_both_sides_and_the_peer_sees_a_clean_close() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, lb) = link(&a, &b, 2);
    let (src, dst, data) = buffers(&a, &b, 1 << 20, 9);
    let (bsrc, adst, bdata) = buffers(&b, &a, 256 << 10, 17);
    for k in 0..16 {
        write(&la, k, &src, &dst, k as usize * (64 << 10), 64 << 10);
    }
    for k in 0..4 {
        write(
            &lb,
            100 + k,
            &bsrc,
            &adst,
            k as usize * (64 << 10),
            64 << 10,
        );
    }
    let (a_cq, b_cq) = (la.send_cq().clone(), lb.send_cq().clone());
    let b_qpns: Vec<u32> = lb.qps().iter().map(|q| q.qpn()).collect();
    let mut closing = la.close();
    let mut b_events = Vec::new();
    let start = Instant::now();
    while !closing.poll().unwrap() {
        assert!(start.elapsed() < LIMIT, "the close did not finish");
        b.progress().unwrap();
        b_events.extend(std::iter::from_fn(|| b.poll_event()));
    }
    b_events.extend(std::iter::from_fn(|| b.poll_event()));
    let drained = |cq: &mrc_host::Cq| {
        let mut out = [Completion::default(); 32];
        let n = cq.poll(&mut out);
        out[..n].to_vec()
    };
    let (at_a, at_b) = (drained(&a_cq), drained(&b_cq));
    assert_eq!(at_a.len(), 16, "{at_a:?}");
    assert_eq!(at_b.len(), 4, "{at_b:?}");
    assert!(
        at_a.iter()
            .chain(&at_b)
            .all(|c| c.status == WcStatus::Success)
    );
    assert_landed(&b, &dst, &data);
    assert_landed(&a, &adst, &bdata);
    for qpn in &b_qpns {
        assert!(
            b_events.contains(&AsyncEvent::LinkClosed { qpn: *qpn }),
            "{b_events:?}"
        );
    }
    assert!(
        !b_events
            .iter()
            .any(|e| matches!(e, AsyncEvent::QpFatal { .. })),
        "{b_events:?}"
    );
    assert_eq!(lb.qps()[0].state(), mrc::QpState::Error);
    assert!(a.inspect(|dp| dp.endpoint_ref().qpns()).is_empty());
    assert!(b.inspect(|dp| dp.endpoint_ref().qpns()).is_empty());
    let mut closing_b = lb.close();
    assert!(closing_b.poll().unwrap());
}

/// Progress threads over the fabric: they sleep on the nodes' eventfds (one per node, for every plane) and wake
/// for each datagram; a bootstrap and a WRITE go through.
#[test]
fn progress_threads_sleep_on_the_fabric_and_wake_for_datagrams() {
    let f = MemFabric::new(3);
    let start_one = || {
        let mut cfg = HostConfig::loopback(3);
        cfg.progress = ProgressMode::Thread;
        Host::start_with(cfg, f.attach().unwrap()).unwrap()
    };
    let (a, b) = (start_one(), start_one());
    let (la, _lb) = link(&a, &b, 1);
    let start = Instant::now();
    let (src, dst, data) = buffers(&a, &b, 1 << 20, 3);
    write(&la, 1, &src, &dst, 0, 1 << 20);
    let mut out = [Completion::default(); 1];
    while la.send_cq().poll(&mut out) == 0 {
        assert!(start.elapsed() < LIMIT, "no completion");
        std::thread::sleep(Duration::from_millis(1));
    }
    assert_eq!(out[0].status, WcStatus::Success);
    assert_landed(&b, &dst, &data);
}

/// Runs both hosts until neither has anything left to do (every datagram delivered, every completion out).
fn settle(a: &MemHost, b: &MemHost) {
    let start = Instant::now();
    let mut quiet = 0;
    while quiet < 16 {
        assert!(start.elapsed() < LIMIT, "the hosts never settled");
        let busy = a.progress().unwrap() | b.progress().unwrap();
        quiet = if busy { 0 } else { quiet + 1 };
    }
}

/// `ibv_req_notify_cq` semantics: arming raises an event for the next completion added to the CQ, none for
/// completions already in it (perftest `-e` takes the event, acks, re-arms, then polls: an event for an entry
/// already there wakes it on the wrong CQ).
#[test]
fn req_notify_signals_only_completions_added_after_arming() {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f, 2), host(&f, 2));
    let (la, _lb) = link(&a, &b, 1);
    let (src, dst, _) = buffers(&a, &b, 4096, 5);
    let cq = la.send_cq();
    cq.req_notify(false);
    write(&la, 1, &src, &dst, 0, 64);
    drive(&a, &b, || cq.ack_events() > 0);
    // The completion of WRITE 1 is in the CQ, unpolled. Arming now must not signal for it.
    cq.req_notify(false);
    settle(&a, &b);
    assert_eq!(
        cq.ack_events(),
        0,
        "an event for a completion already in the CQ"
    );
    let mut out = [Completion::default(); 2];
    assert_eq!(cq.poll(&mut out), 1);
    assert_eq!((out[0].wr_id, out[0].status), (1, WcStatus::Success));
    // The next completion signals (once), and an unarmed CQ stays quiet.
    write(&la, 2, &src, &dst, 64, 64);
    drive(&a, &b, || cq.ack_events() > 0);
    write(&la, 3, &src, &dst, 128, 64);
    settle(&a, &b);
    assert_eq!(cq.ack_events(), 0, "an event without arming");
    assert_eq!(cq.poll(&mut out), 2);
    assert_eq!((out[0].wr_id, out[1].wr_id), (2, 3));
}
