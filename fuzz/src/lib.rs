//! The stateful `endpoint` fuzz target's harness, shared with the corpus generator (`examples/corpus.rs`).
//!
//! Two endpoints, A and B, each with one QP, connected and in RTS, with registered regions between guard bytes.
//! The fuzzer drives them with a sequence of [`Op`]s: the real datagrams each side sends (delivered, dropped,
//! duplicated, reordered, mutated, trimmed), forged packets of every kind from the right, a wrong or an unknown
//! peer, posts, registrations, port and EV changes, and time. After every step the harness asserts:
//! - the engine asks [`Memory`] only for ranges inside live registered regions (writes: regions with a write
//!   right), so nothing outside them is touched, and the guard bytes stay intact;
//! - every completion is for a posted work request of that QP, and none completes twice;
//! - at the end, after both QPs are moved to ERROR, every signaled send and every receive has completed exactly
//!   once (unless its completion queue overran, which loses completions by design).

pub mod host;
mod input;
mod memory;

pub use input::{Forged, From, Input, Op, Qpn, Setup, Wr};
pub use memory::CheckedMemory;

use std::collections::{BTreeMap, BTreeSet};

use mrc::cc::CcConfig;
use mrc::testing::{QpEnd, connect_pair};
use mrc::wire::{
    Ack, Body, Bth, Data, EpOp, EpRequest, EpResponse, Meth, Nack, NackReason, Opcode, PSN_MASK,
    Packet, ParseOptions, Probe, Reth, Sack, SackMark,
};
use mrc::{
    Access, Caps, Completion, CqId, Duration, Endpoint, EndpointConfig, EvConfig, Instant, MrKeys,
    PeerId, QpConfig, QpInit, RecvMeta, RecvWr, SendOp, SendWr, Sge, Transition, TrimMark,
    WcOpcode, WcStatus,
};

/// The byte value of guard areas.
const GUARD: u8 = 0xA5;
/// Guard bytes before and after every buffer.
const GUARD_LEN: u64 = 32;
/// Buffers per node.
const BUFFERS: usize = 4;
/// Bytes per buffer.
const BUFFER_LEN: u64 = 768;
/// A third endpoint the drivers know, which forged datagrams may claim to come from.
const OTHER: PeerId = PeerId(7);
/// Datagrams a queue holds before the oldest is dropped (a network drops too).
const QUEUE: usize = 256;

/// What the harness saw, for the corpus generator.
#[derive(Debug, Clone, Copy, Default)]
pub struct Outcome {
    /// Successful completions.
    pub successes: u64,
    /// Datagrams delivered.
    pub delivered: u64,
}

struct Node {
    ep: Endpoint,
    mem: CheckedMemory,
    cq: CqId,
    qpn: u32,
    /// Keys of the buffers' whole-buffer regions (index = buffer), if still registered.
    keys: Vec<Option<MrKeys>>,
    pd: mrc::Pd,
    /// Posted send work requests not yet completed: wr_id → signaled.
    sends: BTreeMap<u64, bool>,
    /// Posted receives not yet completed: wr_id → bytes.
    recvs: BTreeMap<u64, u64>,
    /// Queue of datagrams it sent: (bytes, plane).
    out: Vec<(Vec<u8>, u8)>,
    /// Newest PSN and send time of a data packet it sent.
    last_psn: u32,
    last_ts: u32,
    next_wr: u64,
    completed: BTreeSet<u64>,
}

struct World {
    nodes: [Node; 2],
    now: Instant,
    buf: Vec<u8>,
    outcome: Outcome,
    /// Every datagram delivered, when recording.
    record: Option<Vec<Vec<u8>>>,
}

fn side(b: bool) -> usize {
    usize::from(b)
}

impl World {
    fn new(s: &Setup) -> Self {
        let planes = s.planes % 3 + 1;
        let mut cfg = QpConfig {
            mtu: 64 + u32::from(s.mtu),
            ev: EvConfig::with_planes(planes, u16::from(s.per_plane % 4) + 1),
            cc: CcConfig::Fixed { window: 4096 },
            mpr: 1 + u8::from(s.mpr),
            max_wimm: u16::from(s.caps.0 % 4) + 1,
            max_wimm_dest: u16::from(s.caps.1 % 4) + 1,
            max_read_dest: u16::from(s.caps.2 % 4) + 1,
            timeout: if s.timeout.0.is_multiple_of(2) {
                0
            } else {
                8 + s.timeout.0 % 8
            },
            retry_linear: s.timeout.1 % 4,
            retry_exp: s.timeout.2 % 4,
            icrc: s.icrc,
            ..QpConfig::default()
        };
        cfg.ev.probe_min = Duration::from_micros(20);
        cfg.ev.probe_max = Duration::from_micros(400);
        let now = Instant::from_nanos(1_000_000);
        let mut made = Vec::new();
        for k in 0..2 {
            let caps = if [s.ext.0, s.ext.1][k] {
                Caps::ALL
            } else {
                Caps::MRC_1_0
            };
            let mut ep = Endpoint::new(EndpointConfig {
                ports: planes,
                caps,
                qpn_seed: [s.seeds.0, s.seeds.1][k],
                ..EndpointConfig::default()
            })
            .expect("valid endpoint");
            let pd = ep.alloc_pd();
            let cq = ep.create_cq(s.small_cq.map_or(128, |d| usize::from(d % 8) + 1));
            let mut init = QpInit::new(pd, cq);
            init.config = cfg.clone();
            init.max_send_wr = 16;
            init.max_recv_wr = 16;
            init.max_sge = 2;
            let qpn = ep
                .open_qp(init, Access::REMOTE_WRITE | Access::REMOTE_READ, now)
                .expect("valid QP");
            let mut mem = CheckedMemory::new(0x1000_0000 * (k as u64 + 1), [s.lend.0, s.lend.1][k]);
            // Buffer 0: a peer may write and read it; 1: local source; 2: receive buffers; 3: unregistered.
            let rights = [
                Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
                Access::NONE,
                Access::LOCAL_WRITE,
            ];
            let mut keys = vec![None; BUFFERS];
            for (b, &acc) in rights.iter().enumerate() {
                let addr = mem.buffers[b];
                let key = ep.reg_mr(pd, addr, BUFFER_LEN, acc).expect("registration");
                mem.regions.push((key.lkey, addr, BUFFER_LEN, acc));
                keys[b] = Some(key);
            }
            made.push((ep, mem, cq, qpn, keys, pd, caps));
        }
        let psns = [s.psns.0 & PSN_MASK, s.psns.1 & PSN_MASK];
        let [mut ma, mut mb]: [_; 2] = made.try_into().ok().expect("two nodes");
        let end = |k: usize, qpn: u32| QpEnd {
            qpn,
            peer: PeerId(1 - k as u32),
            sq_psn: psns[k],
        };
        let (ea, eb) = (end(0, ma.3), end(1, mb.3));
        connect_pair(now, &mut ma.0, ea, &mut mb.0, eb).expect("connect");
        let mut nodes = Vec::new();
        for (k, (ep, mem, cq, qpn, keys, pd, _)) in [ma, mb].into_iter().enumerate() {
            nodes.push(Node {
                ep,
                mem,
                cq,
                qpn,
                keys,
                pd,
                sends: BTreeMap::new(),
                recvs: BTreeMap::new(),
                out: Vec::new(),
                last_psn: psns[k],
                last_ts: 0,
                next_wr: 1,
                completed: BTreeSet::new(),
            });
        }
        let [a, b]: [Node; 2] = nodes.try_into().ok().expect("two nodes");
        Self {
            nodes: [a, b],
            now,
            buf: vec![0u8; 4096],
            outcome: Outcome::default(),
            record: None,
        }
    }

    /// Node `k` sends up to `n` datagrams into its queue.
    fn pump(&mut self, k: usize, n: usize) {
        let ports = u32::from(self.nodes[k].ep.config().ports);
        for _ in 0..n {
            let node = &mut self.nodes[k];
            let Some(t) = node
                .ep
                .poll_transmit(self.now, &mut self.buf, &mut node.mem)
            else {
                return;
            };
            // Endpoint requests are answered to whoever the driver named as the sender, the third endpoint
            // included; that one's datagrams leave this two-node world.
            assert!(
                t.peer == PeerId(1 - k as u32) || t.peer == OTHER,
                "a datagram for an unknown peer: {t:?}"
            );
            assert!(u32::from(t.plane) < ports, "plane {} of {ports}", t.plane);
            let bytes = match t.payload {
                None => self.buf[..t.len].to_vec(),
                Some(p) => [
                    &self.buf[..p.at],
                    node.mem.slice(p.addr, p.len),
                    &self.buf[p.at..t.len],
                ]
                .concat(),
            };
            assert_eq!(bytes.len(), t.datagram_len());
            if let Ok(p) = Packet::parse(&bytes, ParseOptions::default())
                && let Body::Data(d) = p.body
            {
                node.last_psn = p.bth.psn;
                node.last_ts = d.ts.unwrap_or(0);
            }
            if t.peer == OTHER {
                continue;
            }
            if node.out.len() >= QUEUE {
                node.out.remove(0);
            }
            node.out.push((bytes, t.plane));
        }
    }

    fn meta(&self, to: usize, claim: From, port: u8) -> RecvMeta {
        let peer = match claim {
            From::Peer => Some(PeerId(1 - to as u32)),
            From::Other => Some(OTHER),
            From::Unknown => None,
        };
        RecvMeta {
            peer,
            port: port % self.nodes[to].ep.config().ports,
            ecn_ce: false,
            trim: None,
        }
    }

    fn deliver(&mut self, to: usize, bytes: &[u8], meta: RecvMeta) {
        self.outcome.delivered += 1;
        if let Some(r) = self.record.as_mut() {
            r.push(bytes.to_vec());
        }
        let node = &mut self.nodes[to];
        node.ep
            .handle_datagram(self.now, meta, bytes, &mut node.mem);
    }

    fn take(&mut self, from: usize, pick: u16) -> Option<(Vec<u8>, u8)> {
        let q = &mut self.nodes[from].out;
        (!q.is_empty()).then(|| q.remove(usize::from(pick) % q.len()))
    }

    fn peek(&self, from: usize, pick: u16) -> Option<(Vec<u8>, u8)> {
        let q = &self.nodes[from].out;
        (!q.is_empty()).then(|| q[usize::from(pick) % q.len()].clone())
    }

    fn forge(&self, to: usize, qpn: Qpn, f: &Forged) -> Vec<u8> {
        let from = &self.nodes[1 - to];
        let target = &self.nodes[to];
        let dest_qp = match qpn {
            Qpn::Real => target.qpn,
            Qpn::Endpoint => mrc::wire::EP_QPN,
            Qpn::Raw(q) => q & PSN_MASK,
        };
        // PSNs the target sent (for feedback it would receive) and the sender sent (for data).
        let mine = target.last_psn;
        let theirs = from.last_psn;
        let off = |base: u32, d: i16| base.wrapping_add(d as i32 as u32) & PSN_MASK;
        let mut bth = Bth {
            opcode: Opcode::Ack,
            se: false,
            rtx: false,
            pkey: mrc::wire::DEFAULT_PKEY,
            dest_qp,
            ack_req: false,
            psn: 0,
        };
        let payload = vec![0x5Au8; 512];
        let body = match *f {
            Forged::Data {
                opcode,
                psn,
                msn,
                rqmsn,
                buffer,
                offset,
                rkey,
                dma_len,
                imm,
                payload: len,
                ts,
                rtx,
                ack_req,
            } => {
                let data_ops: Vec<Opcode> =
                    Opcode::ALL.into_iter().filter(|o| o.is_data()).collect();
                let op = data_ops[usize::from(opcode) % data_ops.len()];
                bth.opcode = op;
                bth.psn = off(theirs, psn);
                bth.rtx = rtx;
                bth.ack_req = ack_req;
                let b = usize::from(buffer) % (BUFFERS + 1);
                let va = target
                    .mem
                    .buffers
                    .get(b)
                    .map_or(u64::from(offset) << 20, |&a| a + u64::from(offset % 1024));
                let key = target.keys.get(b).copied().flatten().map_or(0, |k| k.rkey);
                Body::Data(Data {
                    meth: Meth { ev: 0, msn, rqmsn },
                    ts,
                    reth: Reth {
                        va,
                        rkey: rkey.unwrap_or(key),
                        dma_len: u32::from(dma_len % 2048),
                    },
                    imm: if op.has_imm() {
                        Some(imm.unwrap_or(0))
                    } else {
                        None
                    },
                    payload: &payload[..usize::from(len % 512)],
                })
            }
            _ => match control_body(f, &mut bth, mine, target.last_ts) {
                Some(b) => b,
                None => return Vec::new(),
            },
        };
        let p = Packet { bth, body };
        let mut buf = vec![0u8; p.buffer_len()];
        match p.emit(&mut buf) {
            Ok(n) => {
                buf.truncate(n);
                buf
            }
            Err(_) => Vec::new(),
        }
    }

    fn post(&mut self, k: usize, wr: &Wr) {
        let peer = 1 - k;
        let node = &self.nodes[k];
        let sge_of = |(b, off, len): (u8, u16, u16)| {
            let b = usize::from(b) % (BUFFERS + 1);
            let addr = node
                .mem
                .buffers
                .get(b)
                .map_or(0xDEAD_0000, |&a| a + u64::from(off % 1024));
            Sge {
                addr,
                len: u32::from(len % 1024),
                lkey: node
                    .keys
                    .get(b)
                    .copied()
                    .flatten()
                    .map_or(0xFFFF_FF00, |k| k.lkey),
            }
        };
        let mut sges = vec![sge_of(wr.local)];
        if let Some(s) = wr.second {
            sges.push(sge_of(s));
        }
        let rb = usize::from(wr.remote.0) % (BUFFERS + 1);
        let remote_addr = self.nodes[peer]
            .mem
            .buffers
            .get(rb)
            .map_or(0xBEEF_0000, |&a| a + u64::from(wr.remote.1 % 1024));
        let rkey = wr.rkey.unwrap_or_else(|| {
            self.nodes[peer]
                .keys
                .get(rb)
                .copied()
                .flatten()
                .map_or(0, |k| k.rkey)
        });
        let op = match wr.kind % 4 {
            0 => SendOp::Write { remote_addr, rkey },
            1 => SendOp::WriteImm {
                remote_addr,
                rkey,
                imm: wr.imm,
            },
            2 => SendOp::Send {
                imm: wr.imm.is_multiple_of(2).then_some(wr.imm),
            },
            _ => SendOp::Read { remote_addr, rkey },
        };
        let node = &mut self.nodes[k];
        let wr_id = node.next_wr;
        node.next_wr += 1;
        let r = node.ep.post_send(
            node.qpn,
            &SendWr {
                wr_id,
                op,
                sges: &sges,
                signaled: wr.signaled,
                solicited: false,
            },
            self.now,
        );
        if r.is_ok() {
            node.sends.insert(wr_id, wr.signaled);
        }
    }

    fn post_recv(&mut self, k: usize, sge: Option<(u8, u16, u16)>) {
        let node = &mut self.nodes[k];
        let sges: Vec<Sge> = sge
            .into_iter()
            .map(|(b, off, len)| {
                let b = usize::from(b) % (BUFFERS + 1);
                Sge {
                    addr: node
                        .mem
                        .buffers
                        .get(b)
                        .map_or(0xDEAD_0000, |&a| a + u64::from(off % 1024)),
                    len: u32::from(len % 1024),
                    lkey: node.keys.get(b).copied().flatten().map_or(7, |k| k.lkey),
                }
            })
            .collect();
        let wr_id = node.next_wr;
        node.next_wr += 1;
        if node
            .ep
            .post_recv(node.qpn, &RecvWr { wr_id, sges: &sges })
            .is_ok()
        {
            node.recvs
                .insert(wr_id, sges.iter().map(|s| u64::from(s.len)).sum());
        }
    }

    /// Polls node `k`'s CQ and checks every completion against what was posted.
    fn poll_cq(&mut self, k: usize, n: usize) {
        let node = &mut self.nodes[k];
        let mut wc = [Completion::default(); 16];
        let mut left = n;
        while left > 0 {
            let got = node.ep.poll_cq(node.cq, &mut wc[..left.min(16)]);
            if got == 0 {
                return;
            }
            left -= got;
            for c in &wc[..got] {
                assert_eq!(c.qpn, node.qpn, "a completion for another QP: {c:?}");
                assert!(
                    node.completed.insert(c.wr_id),
                    "wr {} completed twice: {c:?}",
                    c.wr_id
                );
                if matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm) {
                    let Some(len) = node.recvs.remove(&c.wr_id) else {
                        panic!("a receive completion for no posted receive: {c:?}");
                    };
                    if c.status == WcStatus::Success && c.opcode == WcOpcode::Recv {
                        assert!(u64::from(c.byte_len) <= len, "{c:?} overflows its {len} B");
                    }
                } else {
                    let Some(signaled) = node.sends.remove(&c.wr_id) else {
                        panic!("a send completion for no posted send: {c:?}");
                    };
                    assert!(
                        signaled || c.status != WcStatus::Success,
                        "an unsignaled send completed: {c:?}"
                    );
                }
                if c.status == WcStatus::Success {
                    self.outcome.successes += 1;
                }
            }
        }
    }

    fn run_timers(&mut self) {
        for node in &mut self.nodes {
            if node.ep.poll_timeout().is_some_and(|t| t <= self.now) {
                node.ep.handle_timeout(self.now);
            }
        }
    }

    fn ev_pick(&self, k: usize, pick: u8) -> Option<u32> {
        let evs = self.nodes[k].ep.ev_infos(self.nodes[k].qpn);
        (!evs.is_empty()).then(|| evs[usize::from(pick) % evs.len()].ev)
    }

    fn step(&mut self, op: &Op) {
        match *op {
            Op::Pump { node, n } => self.pump(side(node), usize::from(n % 16) + 1),
            Op::Deliver { from, pick, ce } => {
                let from = side(from);
                if let Some((bytes, plane)) = self.take(from, pick) {
                    let mut meta = self.meta(1 - from, From::Peer, plane);
                    meta.ecn_ce = ce;
                    self.deliver(1 - from, &bytes, meta);
                }
            }
            Op::DeliverAll { from } => {
                let from = side(from);
                let q = std::mem::take(&mut self.nodes[from].out);
                for (bytes, plane) in q {
                    let meta = self.meta(1 - from, From::Peer, plane);
                    self.deliver(1 - from, &bytes, meta);
                }
            }
            Op::Drop { from, pick } => {
                self.take(side(from), pick);
            }
            Op::Duplicate { from, pick } => {
                let from = side(from);
                if let Some((bytes, plane)) = self.peek(from, pick) {
                    let meta = self.meta(1 - from, From::Peer, plane);
                    self.deliver(1 - from, &bytes, meta);
                }
            }
            Op::Mutate { .. } => self.mutate(op),
            Op::Forge {
                to,
                qpn,
                ref packet,
                claim,
                port,
            } => {
                let to = side(to);
                let bytes = self.forge(to, qpn, packet);
                let meta = self.meta(to, claim, port);
                self.deliver(to, &bytes, meta);
            }
            Op::Raw {
                to,
                ref bytes,
                claim,
            } => {
                let to = side(to);
                let meta = self.meta(to, claim, 0);
                self.deliver(to, bytes, meta);
            }
            Op::Post { node, ref wr } => self.post(side(node), wr),
            Op::PostRecv { node, sge } => self.post_recv(side(node), sge),
            Op::Advance { ns } => {
                self.now += Duration::from_nanos(u64::from(ns % 4_000_000));
                self.run_timers();
            }
            Op::NextTimer => {
                let next = self.nodes.iter().filter_map(|n| n.ep.poll_timeout()).min();
                if let Some(t) = next {
                    // At most 100 ms at a time: a retry timeout may be set far out.
                    let cap = self.now + Duration::from_millis(100);
                    self.now = self.now.max(t.min(cap));
                    self.run_timers();
                }
            }
            Op::PollCq { node, n } => self.poll_cq(side(node), usize::from(n % 32) + 1),
            Op::Port { node, port, up } => {
                let now = self.now;
                self.nodes[side(node)].ep.set_port_state(now, port % 4, up);
            }
            Op::Register { node, at, access } => {
                self.register(side(node), at, access);
            }
            Op::Deregister { node, pick } => {
                self.deregister(side(node), pick);
            }
            Op::Deny { node, pick, deny } => {
                let k = side(node);
                if let Some(ev) = self.ev_pick(k, pick) {
                    let (qpn, now) = (self.nodes[k].qpn, self.now);
                    let _ = self.nodes[k].ep.set_ev_denied(qpn, ev, deny, now);
                }
            }
            Op::Unreachable { node, pick } if pick % 2 == 1 => {
                let k = side(node);
                if let Some((bytes, _)) = self.take(k, u16::from(pick / 2)) {
                    let cut = match pick / 2 % 4 {
                        0 => bytes.len(),
                        n => bytes.len().min(usize::from(pick) * n as usize / 4),
                    };
                    let now = self.now;
                    let _ =
                        self.nodes[k]
                            .ep
                            .handle_bounce(now, PeerId(1 - k as u32), &bytes[..cut]);
                }
            }
            Op::Unreachable { node, pick } => {
                let k = side(node);
                if let Some(ev) = self.ev_pick(k, pick) {
                    let now = self.now;
                    self.nodes[k]
                        .ep
                        .report_unreachable(now, PeerId(1 - k as u32), ev);
                }
            }
            Op::EvProbe { node, ev, plane } => {
                let k = side(node);
                let now = self.now;
                let ports = self.nodes[k].ep.config().ports;
                self.nodes[k]
                    .ep
                    .send_ev_probe(now, PeerId(1 - k as u32), ev, plane % ports);
            }
            Op::Penalty { node, pen } => {
                let n = &mut self.nodes[side(node)];
                let _ = n.ep.set_receive_penalty(n.qpn, pen);
            }
            Op::Fail { node } => {
                let n = &mut self.nodes[side(node)];
                let _ = n.ep.modify_qp(n.qpn, Transition::Error, self.now);
            }
        }
    }

    /// Delivers a copy of a queued packet to the other node, changed as `Op::Mutate` says.
    fn mutate(&mut self, op: &Op) {
        let Op::Mutate {
            from,
            pick,
            flip,
            cut,
            reseal,
            trim,
            claim,
        } = *op
        else {
            return;
        };
        let from = side(from);
        if let Some((mut bytes, plane)) = self.peek(from, pick) {
            if let Some((at, x)) = flip
                && !bytes.is_empty()
            {
                let i = usize::from(at) % bytes.len();
                bytes[i] ^= x;
            }
            if let Some(c) = cut {
                bytes.truncate(usize::from(c));
            }
            if reseal && bytes.len() >= 4 {
                let n = bytes.len() - 4;
                let _ = mrc::wire::seal(&mut bytes, n);
            }
            let mut meta = self.meta(1 - from, claim, plane);
            if let Some(last_hop) = trim {
                bytes.truncate(64);
                meta.trim = Some(if last_hop {
                    TrimMark::LastHop
                } else {
                    TrimMark::Fabric
                });
            }
            self.deliver(1 - from, &bytes, meta);
        }
    }

    /// Registers part of a buffer; a whole buffer's keys are kept for work requests.
    fn register(&mut self, k: usize, at: (u8, u16, u16), access: u8) {
        let n = &mut self.nodes[k];
        let b = usize::from(at.0) % BUFFERS;
        let off = u64::from(at.1) % BUFFER_LEN;
        let len = u64::from(at.2) % (BUFFER_LEN - off + 1);
        let addr = n.mem.buffers[b] + off;
        let acc = Access::from_bits(u32::from(access));
        if let Ok(k) = n.ep.reg_mr(n.pd, addr, len, acc) {
            n.mem.regions.push((k.lkey, addr, len, acc));
            if n.keys[b].is_none() && off == 0 && len == BUFFER_LEN {
                n.keys[b] = Some(k);
            }
        }
    }

    /// Deregisters one of the regions registered so far.
    fn deregister(&mut self, k: usize, pick: u8) {
        let n = &mut self.nodes[k];
        if !n.mem.regions.is_empty() {
            let i = usize::from(pick) % n.mem.regions.len();
            let (lkey, ..) = n.mem.regions[i];
            if n.ep.dereg_mr(lkey).is_ok() {
                n.mem.regions.remove(i);
                for k in &mut n.keys {
                    if k.is_some_and(|k| k.lkey == lkey) {
                        *k = None;
                    }
                }
            }
        }
    }

    /// Lets the network run clean for a while: everything queued is delivered, timers run.
    fn settle(&mut self) {
        for _ in 0..64 {
            self.pump(0, 64);
            self.pump(1, 64);
            if self.nodes.iter().all(|n| n.out.is_empty()) {
                let next = self.nodes.iter().filter_map(|n| n.ep.poll_timeout()).min();
                match next {
                    Some(t) if t <= self.now + Duration::from_millis(2) => {
                        self.now = self.now.max(t);
                        self.run_timers();
                    }
                    _ => break,
                }
            }
            for from in 0..2 {
                let q = std::mem::take(&mut self.nodes[from].out);
                for (bytes, plane) in q {
                    let meta = self.meta(1 - from, From::Peer, plane);
                    self.deliver(1 - from, &bytes, meta);
                }
            }
            self.poll_cq(0, 64);
            self.poll_cq(1, 64);
        }
    }

    /// Every signaled send and every receive completes exactly once once the QPs fail (flushing the rest), and
    /// memory outside the buffers is untouched.
    fn finish(&mut self) {
        for k in 0..2 {
            let n = &mut self.nodes[k];
            let _ = n.ep.modify_qp(n.qpn, Transition::Error, self.now);
            self.poll_cq(k, usize::MAX);
            let n = &self.nodes[k];
            let lost = n.ep.cq_failed(n.cq) == Some(true);
            if !lost {
                let pending: Vec<u64> = n
                    .sends
                    .iter()
                    .filter(|&(_, &signaled)| signaled)
                    .map(|(&id, _)| id)
                    .chain(n.recvs.keys().copied())
                    .collect();
                assert!(
                    pending.is_empty(),
                    "node {k}: work requests {pending:?} never completed"
                );
            }
            assert!(n.mem.guards_intact(), "node {k}: a guard byte changed");
        }
    }
}

/// The body of a forged feedback, probe or endpoint packet (None for data, which `World::forge` builds), with
/// its opcode in `bth`; PSNs near `mine`, the ones the target sent.
fn control_body(f: &Forged, bth: &mut Bth, mine: u32, last_ts: u32) -> Option<Body<'static>> {
    let off = |base: u32, d: i16| base.wrapping_add(d as i32 as u32) & PSN_MASK;
    Some(match *f {
        Forged::Sack {
            cack,
            base,
            bitmap,
            mark,
            probe_reply,
            mpr,
            ev,
            ts_echo,
            cwnd_pen,
        } => {
            bth.opcode = Opcode::Sack;
            let c = off(mine, cack);
            Body::Sack(Sack {
                mark: match mark % 3 {
                    0 => SackMark::None,
                    1 => SackMark::SkipOnce,
                    _ => SackMark::AlwaysSkip,
                },
                probe_reply,
                mpr,
                ev,
                cack_psn: c,
                sack_base: off(c, base),
                bitmap,
                ts_echo,
                cwnd_pen: cwnd_pen % 128,
                ooo_count: 0,
            })
        }
        Forged::Nack {
            reason,
            psn,
            cack,
            ev,
            ts_echo,
            mpr,
        } => {
            bth.opcode = Opcode::Nack;
            Body::Nack(Nack {
                reason: NackReason::from_u8(reason),
                psn: off(mine, psn),
                ev,
                ts_echo: ts_echo.unwrap_or(last_ts),
                mpr,
                cack_psn: off(mine, cack),
            })
        }
        Forged::Ack { cack, cmsn } => {
            bth.opcode = Opcode::Ack;
            Body::Ack(Ack {
                cack_psn: off(mine, cack),
                cmsn,
            })
        }
        Forged::Probe { ev, ts, ack_req } => {
            bth.opcode = Opcode::Probe;
            bth.ack_req = ack_req;
            Body::Probe(Probe { ev, ts })
        }
        Forged::EpRequest {
            op,
            req_id,
            port_mask,
            ev,
            ts,
        } => {
            bth.opcode = Opcode::EpRequest;
            Body::EpRequest(EpRequest {
                op: EpOp::from_u8(op % 4),
                req_id,
                port_mask,
                ev,
                ts,
            })
        }
        Forged::EpResponse {
            op,
            rx_port,
            req_id,
            ev,
            ts_echo,
        } => {
            bth.opcode = Opcode::EpResponse;
            Body::EpResponse(EpResponse {
                op: EpOp::from_u8(op % 4),
                rx_port,
                req_id: req_id % 8,
                ev,
                ts_echo,
            })
        }
        Forged::Data { .. } => return None,
    })
}

/// Runs one input; panics on any violation.
pub fn run(input: &Input) -> Outcome {
    run_recording(input, false).0
}

/// Runs `input` and returns every datagram delivered (for seed corpora of the packet parsers).
pub fn record(input: &Input) -> Vec<Vec<u8>> {
    run_recording(input, true).1
}

fn run_recording(input: &Input, record: bool) -> (Outcome, Vec<Vec<u8>>) {
    let mut w = World::new(&input.setup);
    if record {
        w.record = Some(Vec::new());
    }
    for op in input.ops.iter().take(512) {
        w.step(op);
    }
    w.settle();
    w.finish();
    (w.outcome, w.record.unwrap_or_default())
}
