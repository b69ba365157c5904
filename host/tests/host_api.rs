//! The host API over loopback sockets: bootstrap (listen/connect/accept, refused), verbs-style bring-up with
//! in-band peer resolution, application-owned memory, completion channels, posting errors.
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

use std::time::{Duration, Instant};

use mrc::{Access, Completion, QpState, SendOp, Sge, WcOpcode, WcStatus};
use mrc_host::{
    Host, HostConfig, HostError, PeerAddr, ProgressMode, QpSpec, QpTransition, SendRequest,
};

mod common;

use common::{LIMIT, link};

fn host(mode: ProgressMode) -> Host {
    let mut cfg = HostConfig::loopback(2);
    cfg.progress = mode;
    Host::start(cfg).expect("loopback sockets")
}

fn wait_one(h: &[&Host], cq: &mrc_host::Cq) -> Completion {
    let start = Instant::now();
    let mut out = [Completion::default(); 1];
    loop {
        if cq.poll(&mut out) == 1 {
            return out[0];
        }
        assert!(start.elapsed() < LIMIT, "no completion");
        for x in h {
            x.progress().unwrap();
        }
        std::thread::yield_now();
    }
}

fn write_over_link(mode: ProgressMode, len: usize) {
    let (a, b) = (host(mode), host(mode));
    let (la, lb) = link(&a, &b, 2);
    assert_eq!(la.qps().len(), 2);
    assert!(la.qps().iter().all(|q| q.state() == QpState::Rts));
    assert!(lb.qps().iter().all(|q| q.state() == QpState::Rts));
    // Application-owned memory on both sides.
    let mut src: Vec<u8> = (0..len as u32)
        .map(|i| ((i * 7 + 3) ^ (i >> 13)) as u8)
        .collect();
    let mut dst = vec![0u8; len];
    // SAFETY: both vectors outlive their registrations (deregistered below before they drop).
    let (ms, md) = unsafe {
        (
            a.reg_mr(
                a.default_pd(),
                src.as_mut_ptr(),
                src.len(),
                Access::LOCAL_WRITE,
            )
            .unwrap(),
            b.reg_mr(
                b.default_pd(),
                dst.as_mut_ptr(),
                dst.len(),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .unwrap(),
        )
    };
    // WRITE_WITH_IMM on QP 1: the peer's receive completes with the immediate.
    lb.qps()[1].post_recv(77, &[]).unwrap();
    let sge = [Sge {
        addr: ms.addr,
        len: len as u32,
        lkey: ms.lkey,
    }];
    la.qps()[1]
        .post_send(&SendRequest {
            wr_id: 5,
            op: SendOp::WriteImm {
                remote_addr: md.addr,
                rkey: md.rkey,
                imm: 0xABCD,
            },
            sges: &sge,
            inline: None,
            signaled: true,
            solicited: false,
            fence: false,
        })
        .unwrap();
    let c = wait_one(&[&a, &b], la.send_cq());
    assert_eq!(
        (c.wr_id, c.status, c.opcode),
        (5, WcStatus::Success, WcOpcode::RdmaWrite)
    );
    assert_eq!(la.qp_index(c.qpn), Some(1));
    let r = wait_one(&[&a, &b], lb.recv_cq());
    assert_eq!(
        (r.wr_id, r.status, r.imm),
        (77, WcStatus::Success, Some(0xABCD))
    );
    b.dereg_mr(&md).unwrap();
    a.dereg_mr(&ms).unwrap();
    assert_eq!(dst, src, "every byte placed");
    drop(src);
}

#[test]
/// 8 MiB byte-exact with both sides driven by their progress threads.
fn link_write_with_progress_threads() {
    write_over_link(ProgressMode::Thread, 8 << 20);
}

#[test]
fn link_write_in_manual_mode() {
    write_over_link(ProgressMode::Manual, 1 << 20);
}

#[test]
fn link_write_busy_poll() {
    write_over_link(ProgressMode::BusyPoll, 65536);
}

#[test]
fn connect_to_a_closed_listener_is_refused() {
    let (a, b) = (host(ProgressMode::Thread), host(ProgressMode::Thread));
    let blob = b.listen().unwrap().blob(); // the listener drops here
    let mut c = a.connect(&blob, 1, b"").unwrap();
    let start = Instant::now();
    let e = loop {
        match c.poll() {
            Ok(None) => assert!(start.elapsed() < LIMIT, "no answer"),
            Ok(Some(_)) => panic!("connected to a closed listener"),
            Err(e) => break e,
        }
        std::thread::sleep(Duration::from_millis(1));
    };
    assert!(matches!(e, HostError::Refused), "{e}");
    assert_eq!(e.errno(), libc::ECONNREFUSED);
}

#[test]
fn connect_to_nobody_times_out() {
    let mut cfg = HostConfig::loopback(2);
    cfg.bootstrap_timeout = Duration::from_millis(300);
    let a = Host::start(cfg).unwrap();
    let b = host(ProgressMode::Manual);
    let blob = b.listen().unwrap().blob();
    drop(b); // its sockets close: nothing answers
    let mut c = a.connect(&blob, 1, b"").unwrap();
    let start = Instant::now();
    let e = loop {
        match c.poll() {
            Ok(None) => {
                assert!(
                    start.elapsed() < LIMIT,
                    "no ETIMEDOUT {LIMIT:?} after a 300 ms bootstrap timeout"
                );
                std::thread::sleep(Duration::from_millis(5));
            }
            Ok(Some(_)) => panic!("connected to nobody"),
            Err(e) => break e,
        }
    };
    assert_eq!(e.errno(), libc::ETIMEDOUT, "{e}");
    // The bootstrap timeout, not the test's limit, ended it.
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "{:?}",
        start.elapsed()
    );
}

/// A verbs program: its own CQs and QPs, GID/LID/QPN/PSN exchanged by hand, stepwise modify; the host finds the
/// peer's other planes in band. Completions wake a completion channel (the CQ's eventfd).
#[test]
fn verbs_style_bring_up_and_completion_channel() {
    let (a, b) = (host(ProgressMode::Thread), host(ProgressMode::Thread));
    let mk = |h: &Host| {
        let pd = h.alloc_pd().unwrap();
        let cq = h.create_cq(64).unwrap();
        let mut spec = QpSpec::new(pd, &cq);
        spec.max_inline = 64;
        let qp = h.create_qp(spec).unwrap();
        (pd, cq, qp)
    };
    let (_pa, ca, qa) = mk(&a);
    let (pb, cb, qb) = mk(&b);
    // Posting before RTS is EINVAL, as in verbs.
    let inline = [1u8, 2, 3, 4, 5, 6, 7, 8];
    let send = |wr_id| SendRequest {
        wr_id,
        op: SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        sges: &[],
        inline: Some(&inline),
        signaled: true,
        solicited: false,
        fence: false,
    };
    assert_eq!(qa.post_send(&send(1)).unwrap_err().errno(), libc::EINVAL);
    let bring_up = |q: &mrc_host::Qp, h: &Host, peer: &Host, remote: &mrc_host::Qp| {
        let l = peer.local();
        q.modify(QpTransition::Init {
            access: Access::REMOTE_WRITE,
        })
        .unwrap();
        assert_eq!(q.state(), QpState::Init);
        // Found by GID alone, as RoCE does: no LID.
        q.modify(QpTransition::Rtr {
            peer: PeerAddr::from_verbs(l.gid, 0).unwrap(),
            remote_qpn: remote.qpn(),
            rq_psn: remote.psn(),
            mtu: 4096,
        })
        .unwrap();
        q.modify(QpTransition::Rts {
            sq_psn: q.psn(),
            timeout: 14,
            retry_cnt: 7,
            rnr_retry: 7,
        })
        .unwrap();
        assert_eq!(q.state(), QpState::Rts);
        let _ = h;
    };
    bring_up(&qa, &a, &b, &qb);
    bring_up(&qb, &b, &a, &qa);
    let mut dst = vec![0u8; 64];
    // SAFETY: `dst` outlives the registration (deregistered below).
    let md = unsafe {
        b.reg_mr(
            pb,
            dst.as_mut_ptr(),
            64,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap()
    };
    ca.req_notify(false);
    let mut wr = send(9);
    wr.op = SendOp::Write {
        remote_addr: md.addr + 8,
        rkey: md.rkey,
    };
    qa.post_send(&wr).unwrap();
    // Sleep on the completion channel.
    let mut pfd = libc::pollfd {
        fd: ca.fd(),
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one valid pollfd for the duration of the call.
    let r = unsafe { libc::poll(&mut pfd, 1, LIMIT.as_millis() as i32) };
    assert_eq!(r, 1, "the completion channel never became readable");
    assert!(ca.ack_events() >= 1);
    let c = wait_one(&[], &ca);
    assert_eq!((c.wr_id, c.status), (9, WcStatus::Success));
    b.dereg_mr(&md).unwrap();
    assert_eq!(&dst[8..16], &inline);
    assert!(dst[..8].iter().chain(&dst[16..]).all(|&x| x == 0));
    // A bad key fails in a completion, as on a NIC; the host keeps going.
    let bad = [Sge {
        addr: 0x1000,
        len: 8,
        lkey: 0xDEAD,
    }];
    let mut wr = send(10);
    wr.inline = None;
    wr.sges = &bad;
    qa.post_send(&wr).unwrap();
    let c = wait_one(&[], &ca);
    assert_eq!(c.wr_id, 10);
    assert_ne!(c.status, WcStatus::Success);
    let _ = cb;
    // Each side resolved the other in band (a RESOLVE answered)...
    let (sa, sb) = (a.stats().datapath, b.stats().datapath);
    assert!(
        sa.tx_host >= 1 && sa.rx_host >= 1 && sb.tx_host >= 1 && sb.rx_host >= 1,
        "{sa:?} {sb:?}"
    );
    // ...and cached it: a second QP pair between the same hosts asks nothing and is answered nothing.
    let (_, _, qa2) = mk(&a);
    let (_, _, qb2) = mk(&b);
    bring_up(&qa2, &a, &b, &qb2);
    bring_up(&qb2, &b, &a, &qa2);
    let (sa2, sb2) = (a.stats().datapath, b.stats().datapath);
    assert_eq!(
        (sa2.tx_host, sa2.rx_host, sb2.tx_host, sb2.rx_host),
        (sa.tx_host, sa.rx_host, sb.tx_host, sb.rx_host),
        "host datagrams for a peer already resolved"
    );
}

#[test]
fn send_queue_full_is_enomem() {
    let h = host(ProgressMode::Manual);
    let pd = h.alloc_pd().unwrap();
    let cq = h.create_cq(16).unwrap();
    let mut spec = QpSpec::new(pd, &cq);
    spec.max_send_wr = 4;
    let q = h.create_qp(spec).unwrap();
    // Connect to itself: loopback through its own sockets.
    q.connect(&q.blob()).unwrap();
    assert_eq!(q.state(), QpState::Rts);
    let wr = SendRequest {
        wr_id: 0,
        op: SendOp::Write {
            remote_addr: 0,
            rkey: 0,
        },
        sges: &[],
        inline: None,
        signaled: false,
        solicited: false,
        fence: false,
    };
    for _ in 0..4 {
        q.post_send(&wr).unwrap();
    }
    let e = q.post_send(&wr).unwrap_err();
    assert_eq!(e.errno(), libc::ENOMEM, "{e}");
    // A round drains the ring into the engine: room again.
    h.progress().unwrap();
    q.post_send(&wr).unwrap();
}

#[test]
fn bad_blobs_are_errors() {
    let h = host(ProgressMode::Manual);
    assert_eq!(
        h.connect(b"nonsense", 1, b"").unwrap_err().errno(),
        libc::EPROTO
    );
    let l = h.listen().unwrap();
    assert_eq!(
        h.connect(&l.blob(), 0, b"").unwrap_err().errno(),
        libc::EINVAL
    );
    assert_eq!(
        h.connect(&l.blob(), 1, &[0; 2000]).unwrap_err().errno(),
        libc::EINVAL
    );
}

/// Many fixed-window QPs share one in-flight budget (half of what the planes' receive buffers hold): alone a
/// QP keeps the profile's window, as QPs are added each gets an equal, smaller share, and the shares grow
/// back as QPs go. So NCCL's many comms cannot together overflow a peer's sockets.
#[test]
fn fixed_windows_share_the_receive_buffers_as_qps_come_and_go() {
    let mut cfg = HostConfig::loopback(4);
    cfg.progress = ProgressMode::Manual;
    cfg.socket_buffer = 4 << 20;
    let h = Host::start(cfg).expect("loopback sockets");
    let cq = h.create_cq(64).unwrap();
    let window = |q: &mrc_host::Qp| {
        h.inspect(
            |dp| match dp.endpoint_ref().qp_config(q.qpn()).unwrap().cc {
                mrc::cc::CcConfig::Fixed { window } => window,
                ref other => panic!("not a fixed window: {other:?}"),
            },
        )
    };
    let mut qps = vec![h.create_qp(QpSpec::new(h.default_pd(), &cq)).unwrap()];
    let alone = window(&qps[0]);
    assert_eq!(
        alone,
        60_000 * 64,
        "alone: the profile's 64 packets of 60000 B"
    );
    while qps.len() < 32 {
        qps.push(h.create_qp(QpSpec::new(h.default_pd(), &cq)).unwrap());
    }
    let shared = window(&qps[0]);
    assert!(shared < alone / 4, "32 QPs share: {shared} of {alone}");
    assert!(qps.iter().all(|q| window(q) == shared), "equal shares");
    assert!(
        shared * 32 <= 4 * (8 << 20),
        "within the four planes' receive buffers"
    );
    while qps.len() > 1 {
        h.destroy_qp(&qps.pop().unwrap()).unwrap();
    }
    assert_eq!(
        window(&qps[0]),
        alone,
        "the last QP gets its whole window back"
    );
}
