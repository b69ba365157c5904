//! The `host` target's harness: two whole hosts (`mrc_host::Host` over the in-memory fabric), linked, each
//! writing to the other, while an off-path attacker injects fuzzer-chosen datagrams: raw bytes, host datagrams
//! (RESOLVE, CONNECT, ACCEPT, REFUSE, CLOSE, CLOSED) and MRC packets of every kind aimed at the real QPNs near
//! the real PSNs, from a peer's address, a stranger's or the victim's own, with or without a guessed AUTH tag.
//! The attacker knows addresses, QPNs, PSNs and listener ids, but holds no key and replays nothing.
//!
//! Asserted (issue 22): nothing panics; no link is closed and no QP fails; both WRITEs complete with success and
//! their bytes are exact; a second round of WRITEs over the same link does too.

use std::net::SocketAddrV6;
use std::time::{Duration, Instant};

use arbitrary::Arbitrary;
use mrc::wire::{
    Ack, Body, Bth, Data, EP_QPN, EpOp, EpRequest, Meth, Nack, NackReason, Opcode, PSN_MASK,
    Packet, Probe, Reth, Sack, SackMark,
};
use mrc::{Access, Caps, Completion, SendOp, Sge, WcStatus};
use mrc_host::bootstrap::{Msg, QpHalf};
use mrc_host::{
    AsyncEvent, Host, HostConfig, Link, MemFabric, MemPlanes, Mr, PeerPlane, PlaneIo, ProgressMode,
    SendRequest,
};

type MemHost = Host<MemPlanes>;

/// Bytes each side writes per round.
const LEN: usize = 48 * 1024;
/// Steps of one input that are run.
const MAX_STEPS: usize = 48;

/// Whose address a forged datagram claims.
#[derive(Arbitrary, Debug, Clone, Copy)]
pub enum Src {
    /// The victim's peer, on the plane it is injected on.
    Peer,
    /// An address no host knows.
    Stranger,
    /// The victim itself.
    Own,
}

/// A host datagram, with the identifiers an attacker could know.
#[derive(Arbitrary, Debug, Clone)]
pub enum HostMsg {
    /// RESOLVE with a token.
    Resolve(u64),
    /// CONNECT to the victim's listener id (the real one or a guess), with a guessed tag.
    Connect {
        real_id: bool,
        id: u64,
        token: u64,
        planes: u8,
        mac: [u8; 8],
    },
    /// ACCEPT, REFUSE or CLOSED with a guessed token.
    Answer { kind: u8, token: u64 },
    /// CLOSE naming the link's real QPNs (or others), with a guessed tag.
    Close {
        token: u64,
        real: bool,
        qpns: (u32, u32),
        mac: [u8; 8],
    },
}

/// An MRC packet aimed at the victim's QP (or the endpoint, QPN 2).
#[derive(Arbitrary, Debug, Clone)]
pub struct Forged {
    kind: u8,
    /// Offset from the PSN the victim's peer started at.
    psn_off: i16,
    to_endpoint: bool,
    /// Set BTH.AT and append this tag.
    tag: Option<[u8; 8]>,
    a: u32,
    b: u32,
    c: u64,
}

/// One step of the attack.
#[derive(Arbitrary, Debug, Clone)]
pub enum Step {
    /// Progress rounds at both hosts.
    Progress(u8),
    /// Any bytes.
    Raw {
        to_b: bool,
        plane: u8,
        src: Src,
        bytes: Vec<u8>,
    },
    /// A host datagram.
    Host { to_b: bool, src: Src, msg: HostMsg },
    /// An MRC packet.
    Mrc {
        to_b: bool,
        plane: u8,
        src: Src,
        pkt: Forged,
    },
}

/// What the fuzzer chooses.
#[derive(Arbitrary, Debug, Clone)]
pub struct Input {
    /// The attack, interleaved with progress.
    pub steps: Vec<Step>,
}

struct World {
    f: MemFabric,
    a: MemHost,
    b: MemHost,
    la: Link<MemPlanes>,
    lb: Link<MemPlanes>,
    listener_id: u64,
    stranger: SocketAddrV6,
    _listener: mrc_host::Listener<MemPlanes>,
    _x: MemPlanes,
}

fn host(f: &MemFabric) -> MemHost {
    let mut cfg = HostConfig::loopback(2);
    cfg.progress = ProgressMode::Manual;
    cfg.bootstrap_timeout = Duration::from_secs(2);
    Host::start_with(cfg, f.attach().expect("attach")).expect("host")
}

fn pump(w: &World, rounds: usize) {
    for _ in 0..rounds {
        w.a.progress().expect("progress");
        w.b.progress().expect("progress");
    }
}

fn setup() -> World {
    let f = MemFabric::new(2);
    let (a, b) = (host(&f), host(&f));
    let mut l = b.listen().expect("listen");
    let blob = mrc_host::Blob::decode(&l.blob()).expect("blob");
    let mrc_host::BlobKind::Listener { id } = blob.kind else {
        unreachable!("a listener's blob")
    };
    let mut c = a.connect(&l.blob(), 1, b"").expect("connect");
    let start = Instant::now();
    let (mut la, mut lb) = (None, None);
    while la.is_none() || lb.is_none() {
        assert!(start.elapsed() < Duration::from_secs(10), "no link");
        if lb.is_none() {
            lb = l.poll_accept(b"").expect("accept").map(|x| x.0);
        }
        if la.is_none() {
            la = c.poll().expect("connect").map(|x| x.0);
        }
        a.progress().expect("progress");
        b.progress().expect("progress");
    }
    let x = f.attach().expect("attach");
    World {
        stranger: x.local_addr(0),
        f,
        a,
        b,
        la: la.expect("link"),
        lb: lb.expect("link"),
        listener_id: id,
        _listener: l,
        _x: x,
    }
}

fn buffers(from: &MemHost, to: &MemHost, seed: u8) -> (Mr, Mr, Vec<u8>) {
    let src = from
        .alloc_buffer(from.default_pd(), LEN, Access::LOCAL_WRITE)
        .expect("alloc");
    let dst = to
        .alloc_buffer(
            to.default_pd(),
            LEN,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .expect("alloc");
    let data: Vec<u8> = (0..LEN)
        .map(|i| (i as u8).wrapping_mul(31) ^ seed)
        .collect();
    from.write_buffer(&src, 0, &data).expect("write");
    (src, dst, data)
}

fn post(l: &Link<MemPlanes>, src: &Mr, dst: &Mr) {
    let sge = [Sge {
        addr: src.addr,
        len: LEN as u32,
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
        .expect("post");
}

fn forge(op: Opcode, dest: u32, psn: u32, body: Body<'_>, tag: Option<[u8; 8]>) -> Vec<u8> {
    let p = Packet {
        bth: Bth {
            psn: psn & PSN_MASK,
            ..Bth::new(op, dest)
        },
        body,
    };
    let mut buf = vec![0u8; p.buffer_len() + 8];
    let Ok(mut n) = p.emit_header(&mut buf) else {
        return Vec::new();
    };
    if let Some(t) = tag {
        buf[1] |= 0x10;
        buf[n..n + 8].copy_from_slice(&t);
        n += 8;
    }
    let pay = p.payload();
    buf[n..n + pay.len()].copy_from_slice(pay);
    match mrc::wire::seal(&mut buf, n + pay.len()) {
        Ok(end) => {
            buf.truncate(end);
            buf
        }
        Err(_) => Vec::new(),
    }
}

fn mrc_packet(f: &Forged, dest_qp: u32, first_psn: u32) -> Vec<u8> {
    let psn = first_psn.wrapping_add(f.psn_off as u32);
    let dest = if f.to_endpoint { EP_QPN } else { dest_qp };
    let body = match f.kind % 7 {
        0 => Body::Sack(Sack {
            mark: SackMark::None,
            probe_reply: f.a & 1 == 1,
            mpr: (f.a >> 8) as u8 | 1,
            ev: f.b,
            cack_psn: psn & PSN_MASK,
            sack_base: psn.wrapping_add(1) & PSN_MASK,
            bitmap: f.c,
            ts_echo: None,
            cwnd_pen: 0,
            ooo_count: 0,
        }),
        1 => Body::Nack(Nack {
            reason: NackReason::from_u8(f.a as u8),
            psn: psn & PSN_MASK,
            ev: f.b,
            ts_echo: f.c as u32,
            mpr: 8,
            cack_psn: psn.wrapping_sub(1) & PSN_MASK,
        }),
        2 => Body::Ack(Ack {
            cack_psn: psn & PSN_MASK,
            cmsn: f.a as u16,
        }),
        3 => Body::Probe(Probe { ev: f.b, ts: f.a }),
        4 => Body::EpRequest(EpRequest {
            op: EpOp::from_u8(f.a as u8 & 1),
            req_id: f.b,
            port_mask: f.c as u32,
            ev: f.b,
            ts: None,
        }),
        _ => Body::Data(Data {
            meth: Meth {
                ev: f.b,
                msn: f.a as u16,
                rqmsn: 0,
            },
            ts: None,
            reth: Reth {
                va: f.c,
                rkey: f.a,
                dma_len: 16,
            },
            imm: None,
            payload: &[0xEE; 16],
        }),
    };
    let op = match (&body, f.kind % 7) {
        (Body::Sack(_), _) => Opcode::Sack,
        (Body::Nack(_), _) => Opcode::Nack,
        (Body::Ack(_), _) => Opcode::Ack,
        (Body::Probe(_), _) => Opcode::Probe,
        (Body::EpRequest(_), _) => Opcode::EpRequest,
        (_, 5) => Opcode::WriteOnly,
        _ => Opcode::SendOnly,
    };
    forge(op, dest, psn, body, f.tag)
}

fn host_msg(w: &World, m: &HostMsg, to_b: bool) -> Vec<u8> {
    let (mine, theirs) = if to_b { (&w.lb, &w.la) } else { (&w.la, &w.lb) };
    match m {
        HostMsg::Resolve(t) => Msg::ResolveRequest { token: *t }.encode(),
        HostMsg::Connect {
            real_id,
            id,
            token,
            planes,
            mac,
        } => Msg::Connect {
            token: *token,
            listener: if *real_id { w.listener_id } else { *id },
            planes: (0..usize::from(planes % 3) + 1)
                .map(|p| PeerPlane {
                    addr: w.a.local().planes[p % 2],
                    t0: 0,
                })
                .collect(),
            qps: vec![QpHalf {
                qpn: 0x10,
                psn: 0,
                caps: Caps::default(),
                key: [0; 16],
            }],
            app: Vec::new(),
            mac: *mac,
        }
        .encode(),
        HostMsg::Answer { kind, token } => match kind % 3 {
            0 => Msg::Refuse {
                token: *token,
                reason: 1,
            }
            .encode(),
            1 => Msg::Closed { token: *token }.encode(),
            _ => Msg::Accept {
                token: *token,
                planes: w.b.local_planes(),
                qps: vec![QpHalf {
                    qpn: 0x10,
                    psn: 0,
                    caps: Caps::default(),
                    key: [0; 16],
                }],
                app: Vec::new(),
            }
            .encode(),
        },
        HostMsg::Close {
            token,
            real,
            qpns,
            mac,
        } => Msg::Close {
            token: *token,
            pairs: vec![if *real {
                (theirs.qps()[0].qpn(), mine.qps()[0].qpn())
            } else {
                *qpns
            }],
            mac: *mac,
        }
        .encode(),
    }
}

fn inject(w: &World, to_b: bool, plane: u8, src: Src, bytes: &[u8]) {
    let plane = usize::from(plane % 2);
    let (victim, peer) = if to_b { (&w.b, &w.a) } else { (&w.a, &w.b) };
    let from = match src {
        Src::Peer => peer.local().planes[plane],
        Src::Stranger => w.stranger,
        Src::Own => victim.local().planes[plane],
    };
    w.f.inject(plane, from, victim.local().planes[plane], bytes);
}

fn step(w: &World, s: &Step) {
    match s {
        Step::Progress(n) => pump(w, usize::from(n % 8) + 1),
        Step::Raw {
            to_b,
            plane,
            src,
            bytes,
        } => inject(w, *to_b, *plane, *src, &bytes[..bytes.len().min(2048)]),
        Step::Host { to_b, src, msg } => inject(w, *to_b, 0, *src, &host_msg(w, msg, *to_b)),
        Step::Mrc {
            to_b,
            plane,
            src,
            pkt,
        } => {
            // Aimed at the victim's QP, near the PSNs its peer sends.
            let (victim, peer) = if *to_b {
                (&w.lb, &w.la)
            } else {
                (&w.la, &w.lb)
            };
            let bytes = mrc_packet(pkt, victim.qps()[0].qpn(), peer.qps()[0].psn());
            inject(w, *to_b, *plane, *src, &bytes);
        }
    }
}

/// Runs both WRITEs to completion and checks them.
fn finish(w: &World, posted: [(Mr, Vec<u8>); 2]) {
    let mut done = [false; 2];
    let start = Instant::now();
    let mut wc = [Completion::default()];
    while !done.iter().all(|d| *d) {
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "a WRITE never completed"
        );
        pump(w, 1);
        for (k, l) in [&w.la, &w.lb].into_iter().enumerate() {
            if l.send_cq().poll(&mut wc) == 1 {
                assert_eq!(wc[0].status, WcStatus::Success, "side {k}: {:?}", wc[0]);
                done[k] = true;
            }
        }
    }
    for (k, (dst, data)) in posted.iter().enumerate() {
        let to = if k == 0 { &w.b } else { &w.a };
        let mut got = vec![0u8; LEN];
        to.read_buffer(dst, 0, &mut got).expect("read");
        assert!(got == *data, "side {k}: the bytes differ");
    }
}

fn round(w: &World, steps: &[Step], seed: u8) {
    let (sa, da, a_data) = buffers(&w.a, &w.b, seed);
    let (sb, db, b_data) = buffers(&w.b, &w.a, seed ^ 0x5A);
    post(&w.la, &sa, &da);
    post(&w.lb, &sb, &db);
    for s in steps {
        step(w, s);
    }
    finish(w, [(da, a_data), (db, b_data)]);
    for h in [&w.a, &w.b] {
        while let Some(e) = h.poll_event() {
            assert!(
                !matches!(
                    e,
                    AsyncEvent::LinkClosed { .. } | AsyncEvent::QpFatal { .. }
                ),
                "{e:?}"
            );
        }
    }
}

/// Runs one input (see the module's documentation for what is asserted).
pub fn run(input: &Input) {
    let w = setup();
    let steps = &input.steps[..input.steps.len().min(MAX_STEPS)];
    round(&w, steps, 1);
    round(&w, &[], 2);
}
