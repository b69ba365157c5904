//! Shared helpers for the integration tests: posting operations on a `testing::Net` and checking outcomes.
#![allow(dead_code, reason = "each test file uses a different subset")]

pub(crate) mod pair;

use mrc::testing::{Net, NetConfig, PlaneConfig};
use mrc::*;

pub(crate) const A: usize = 0;
pub(crate) const B: usize = 1;

/// An operation A performs towards B (READ reads B's memory into A's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OpKind {
    Write,
    WriteImm,
    Send,
    Read,
}

#[derive(Debug, Clone, Copy)]
pub(crate) struct Op {
    pub kind: OpKind,
    pub len: u32,
}

/// What one posted operation must produce.
#[derive(Debug, Clone)]
pub(crate) struct Posted {
    pub op: Op,
    pub wr_id: u64,
    /// Source (node, addr) and destination (node, addr).
    pub src: (usize, u64),
    pub dst: (usize, u64),
    pub imm: Option<u32>,
    /// Receive wr_id at B, for WRITE_IMM and SEND.
    pub recv_wr: Option<u64>,
    pub allocs: Vec<(usize, u64, u64)>,
}

pub(crate) fn empty_wc() -> Completion {
    Completion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::Send,
        byte_len: 0,
        imm: None,
        qpn: 0,
    }
}

/// Two nodes on an `planes`-plane network with identical `plane` behaviour, connected by one QP pair.
pub(crate) fn pair(planes: u8, plane: PlaneConfig, seed: u64, cfg: &QpConfig) -> (Net, u32, u32) {
    let mut net = Net::new(NetConfig::uniform(planes, plane, seed));
    net.add_node(Caps::ALL);
    net.add_node(Caps::ALL);
    let (qa, qb) = net.connect(A, B, cfg);
    (net, qa, qb)
}

/// A QP configuration for `planes` planes.
pub(crate) fn qp_config(planes: u8) -> QpConfig {
    QpConfig {
        ev: EvConfig::with_planes(planes, 16),
        ..QpConfig::default()
    }
}

/// Allocates buffers, fills the source with a pattern, posts the receive (if any) and the send.
pub(crate) fn post(net: &mut Net, qa: u32, qb: u32, op: Op, wr_id: u64) -> Posted {
    let len = u64::from(op.len);
    let (src_node, dst_node) = if op.kind == OpKind::Read {
        (B, A)
    } else {
        (A, B)
    };
    let (src, ks) = net.alloc_mr(src_node, len, Access::REMOTE_READ);
    let (dst, kd) = net.alloc_mr(dst_node, len, Access::REMOTE_WRITE);
    net.nodes[src_node]
        .mem
        .fill_pattern(src, op.len as usize, wr_id);
    let now = net.now();
    let mut recv_wr = None;
    let mut imm = None;
    let sop = match op.kind {
        OpKind::Write => SendOp::Write {
            remote_addr: dst,
            rkey: kd.rkey,
        },
        OpKind::WriteImm => {
            imm = Some(0xC0DE_0000 ^ wr_id as u32);
            SendOp::WriteImm {
                remote_addr: dst,
                rkey: kd.rkey,
                imm: imm.unwrap(),
            }
        }
        OpKind::Send => {
            imm = wr_id
                .is_multiple_of(2)
                .then_some(0x5E4D_0000 ^ wr_id as u32);
            SendOp::Send { imm }
        }
        OpKind::Read => SendOp::Read {
            remote_addr: src,
            rkey: ks.rkey,
        },
    };
    if matches!(op.kind, OpKind::WriteImm | OpKind::Send) {
        let rid = 1_000_000 + wr_id;
        let sge = [Sge {
            addr: dst,
            len: op.len,
            lkey: kd.lkey,
        }];
        let sges: &[Sge] = if op.kind == OpKind::Send { &sge } else { &[] };
        net.nodes[B]
            .ep
            .post_recv(qb, &RecvWr { wr_id: rid, sges })
            .expect("post_recv");
        recv_wr = Some(rid);
    }
    let local = if op.kind == OpKind::Read {
        Sge {
            addr: dst,
            len: op.len,
            lkey: kd.lkey,
        }
    } else {
        Sge {
            addr: src,
            len: op.len,
            lkey: ks.lkey,
        }
    };
    net.nodes[A]
        .ep
        .post_send(
            qa,
            &SendWr {
                wr_id,
                op: sop,
                sges: &[local],
                signaled: true,
                solicited: false,
            },
            now,
        )
        .expect("post_send");
    Posted {
        op,
        wr_id,
        src: (src_node, src),
        dst: (dst_node, dst),
        imm,
        recv_wr,
        allocs: vec![(src_node, src, len), (dst_node, dst, len)],
    }
}

/// Completions seen on each node's CQ, in order.
#[derive(Debug, Default)]
pub(crate) struct Seen {
    pub a: Vec<Completion>,
    pub b: Vec<Completion>,
}

pub(crate) fn drain(net: &mut Net, seen: &mut Seen) {
    let mut wc = [empty_wc(); 64];
    for (node, out) in [(A, &mut seen.a), (B, &mut seen.b)] {
        let cq = net.nodes[node].cq;
        loop {
            let n = net.nodes[node].ep.poll_cq(cq, &mut wc);
            if n == 0 {
                break;
            }
            out.extend_from_slice(&wc[..n]);
        }
    }
}

/// Runs until every posted operation has its completions (or `limit`); returns what was seen.
pub(crate) fn run_to_completion(net: &mut Net, posted: &[Posted], limit: Instant) -> (bool, Seen) {
    let want_a = posted.len();
    let want_b = posted.iter().filter(|p| p.recv_wr.is_some()).count();
    let mut seen = Seen::default();
    let ok = net.run_until(limit, |n| {
        drain(n, &mut seen);
        seen.a.len() >= want_a && seen.b.len() >= want_b
    });
    (ok, seen)
}

/// Checks completions (exactly once, successful, in posting order) and data (byte-exact, guards intact).
pub(crate) fn check(net: &Net, posted: &[Posted], seen: &Seen) -> Result<(), String> {
    let ids: Vec<u64> = seen.a.iter().map(|c| c.wr_id).collect();
    let want: Vec<u64> = posted.iter().map(|p| p.wr_id).collect();
    if ids != want {
        return Err(format!(
            "send completions {ids:?}, want {want:?} (exactly once, in order)"
        ));
    }
    let rids: Vec<u64> = seen.b.iter().map(|c| c.wr_id).collect();
    let rwant: Vec<u64> = posted.iter().filter_map(|p| p.recv_wr).collect();
    if rids != rwant {
        return Err(format!("receive completions {rids:?}, want {rwant:?}"));
    }
    for c in seen.a.iter().chain(&seen.b) {
        if c.status != WcStatus::Success {
            return Err(format!("completion {c:?} failed"));
        }
    }
    let mut recvs = seen.b.iter();
    for (p, c) in posted.iter().zip(&seen.a) {
        let want_op = match p.op.kind {
            OpKind::Write | OpKind::WriteImm => WcOpcode::RdmaWrite,
            OpKind::Send => WcOpcode::Send,
            OpKind::Read => WcOpcode::RdmaRead,
        };
        if c.opcode != want_op {
            return Err(format!(
                "wr {} completed as {:?}, want {want_op:?}",
                p.wr_id, c.opcode
            ));
        }
        if p.recv_wr.is_some() {
            let r = recvs.next().expect("count checked");
            let want_rop = if p.op.kind == OpKind::Send {
                WcOpcode::Recv
            } else {
                WcOpcode::RecvRdmaWithImm
            };
            if r.opcode != want_rop || r.imm != p.imm || r.byte_len != p.op.len {
                return Err(format!("receive completion {r:?} for {p:?}"));
            }
        }
        let len = p.op.len as usize;
        let s = net.nodes[p.src.0].mem.slice(p.src.1, len);
        let d = net.nodes[p.dst.0].mem.slice(p.dst.1, len);
        if s != d {
            let first = s.iter().zip(d).position(|(x, y)| x != y);
            return Err(format!(
                "wr {} ({:?}, {} B): data differs first at byte {first:?}",
                p.wr_id, p.op.kind, len
            ));
        }
    }
    for node in [A, B] {
        let allocs: Vec<(u64, u64)> = posted
            .iter()
            .flat_map(|p| p.allocs.iter())
            .filter(|(n, _, _)| *n == node)
            .map(|&(_, a, l)| (a, l))
            .collect();
        if !net.nodes[node].mem.guards_intact(&allocs) {
            return Err(format!(
                "node {node}: bytes outside the target regions changed"
            ));
        }
        if net.nodes[node].mem.violations != 0 {
            return Err(format!(
                "node {node}: the engine touched unallocated memory"
            ));
        }
    }
    Ok(())
}

/// A sealed packet of `body` to `dest_qp` at `psn`, as an attacker (or a test) forges it.
pub(crate) fn forge(opcode: wire::Opcode, dest_qp: u32, psn: u32, body: wire::Body<'_>) -> Vec<u8> {
    let p = wire::Packet {
        bth: wire::Bth {
            opcode,
            se: false,
            rtx: false,
            pkey: wire::DEFAULT_PKEY,
            dest_qp,
            ack_req: false,
            psn: psn & wire::PSN_MASK,
        },
        body,
    };
    let mut buf = vec![0u8; p.buffer_len()];
    let n = p.emit(&mut buf).expect("a buffer of buffer_len bytes");
    buf.truncate(n);
    buf
}

/// A genuine-looking WRITE_ONLY (EV 1, MSN 0, a timestamp) with a valid ICRC.
pub(crate) fn write_only(
    dest_qp: u32,
    psn: u32,
    va: u64,
    rkey: u32,
    dma_len: u32,
    payload: &[u8],
) -> Vec<u8> {
    forge(
        wire::Opcode::WriteOnly,
        dest_qp,
        psn,
        wire::Body::Data(wire::Data {
            meth: wire::Meth {
                ev: 1,
                msn: 0,
                rqmsn: 0,
            },
            ts: Some(7),
            reth: wire::Reth { va, rkey, dma_len },
            imm: None,
            payload,
        }),
    )
}
