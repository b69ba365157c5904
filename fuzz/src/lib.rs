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

use std::collections::{BTreeMap, BTreeSet};

use arbitrary::Arbitrary;
use mrc::cc::CcConfig;
use mrc::wire::{
    Ack, Body, Bth, Data, EpOp, EpRequest, EpResponse, Meth, Nack, NackReason, Opcode, PSN_MASK,
    Packet, ParseOptions, Probe, Reth, Sack, SackMark,
};
use mrc::{Access, Caps, Completion, CqId, Duration, Endpoint, EndpointConfig, EvConfig, Instant, Memory, MrKeys, PeerId, QpConfig, QpInit, RecvMeta, RecvWr, SendOp, SendWr, Sge, Transition, TrimMark, WcOpcode, WcStatus};
use mrc::testing::{QpEnd, connect_pair};

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

/// A node's memory: buffers between guard bytes, and the regions registered in them. Every access the engine
/// asks for is checked against the live regions.
#[derive(Debug, Clone)]
pub struct CheckedMemory {
    base: u64,
    bytes: Vec<u8>,
    /// Buffer start addresses.
    buffers: Vec<u64>,
    /// Live registrations: (lkey, address, length, rights).
    regions: Vec<(u32, u64, u64, Access)>,
    /// Lend payloads in place, so the engine sends zero-copy.
    lend: bool,
}

impl CheckedMemory {
    fn new(base: u64, lend: bool) -> Self {
        let mut m = Self {
            base,
            bytes: Vec::new(),
            buffers: Vec::new(),
            regions: Vec::new(),
            lend,
        };
        for i in 0..BUFFERS {
            let start = m.bytes.len() as u64 + GUARD_LEN;
            m.bytes
                .resize((start + BUFFER_LEN + GUARD_LEN) as usize, GUARD);
            for (k, b) in m.bytes[start as usize..(start + BUFFER_LEN) as usize]
                .iter_mut()
                .enumerate()
            {
                *b = (k as u8).wrapping_mul(7) ^ (i as u8) ^ (base >> 28) as u8;
            }
            m.buffers.push(base + start);
        }
        m
    }

    /// Asserts that the engine may touch `[addr, addr + len)`: inside one live region, with a write right if
    /// it writes. A zero-length access must still name a place in (or at the end of) a region.
    fn check(&self, addr: u64, len: usize, write: bool) {
        let ok = self.regions.iter().any(|&(_, a, l, acc)| {
            addr >= a
                && addr.checked_add(len as u64).is_some_and(|e| e <= a + l)
                && (!write
                    || acc.contains(Access::LOCAL_WRITE)
                    || acc.contains(Access::REMOTE_WRITE))
        });
        assert!(
            ok,
            "the engine {} [{addr:#x}, +{len}) outside every registered region: {:x?}",
            if write { "wrote" } else { "read" },
            self.regions
        );
    }

    fn offset(&self, addr: u64, len: usize) -> std::ops::Range<usize> {
        let off = (addr - self.base) as usize;
        off..off + len
    }

    /// Whether every byte outside the buffers still holds the guard value.
    fn guards_intact(&self) -> bool {
        let mut pos = self.base;
        for &b in &self.buffers {
            if !self.bytes[self.offset(pos, (b - pos) as usize)]
                .iter()
                .all(|&x| x == GUARD)
            {
                return false;
            }
            pos = b + BUFFER_LEN;
        }
        let end = self.base + self.bytes.len() as u64;
        self.bytes[self.offset(pos, (end - pos) as usize)]
            .iter()
            .all(|&x| x == GUARD)
    }

    fn slice(&self, addr: u64, len: usize) -> &[u8] {
        &self.bytes[self.offset(addr, len)]
    }
}

impl Memory for CheckedMemory {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        self.check(addr, dst.len(), false);
        dst.copy_from_slice(&self.bytes[self.offset(addr, dst.len())]);
    }

    fn write(&mut self, addr: u64, src: &[u8]) {
        self.check(addr, src.len(), true);
        let r = self.offset(addr, src.len());
        self.bytes[r].copy_from_slice(src);
    }

    fn view(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.lend {
            return None;
        }
        self.check(addr, len, false);
        Some(&self.bytes[self.offset(addr, len)])
    }
}

/// Which peer a hand-made datagram claims to come from.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum From {
    /// The QP's own peer (spoofed source, the attacker's best case).
    Peer,
    /// Another endpoint the driver knows.
    Other,
    /// A source the driver cannot name.
    Unknown,
}

/// A QPN: the real one or any.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Qpn {
    /// The target QP.
    Real,
    /// The endpoint QPN (2).
    Endpoint,
    /// Anything.
    Raw(u32),
}

/// A forged packet; PSNs are offsets from the newest PSN the other side really sent, so that the fuzzer hits
/// windows easily.
#[derive(Debug, Clone, Arbitrary)]
pub enum Forged {
    /// A data packet.
    Data {
        /// Opcode byte (all data opcodes and more).
        opcode: u8,
        /// PSN offset.
        psn: i16,
        /// MSN.
        msn: u16,
        /// RQMSN.
        rqmsn: u16,
        /// Target buffer of the receiver (any number: may name none).
        buffer: u8,
        /// Offset in it (may leave it).
        offset: u16,
        /// Use the region's key, or this one.
        rkey: Option<u32>,
        /// DMA length.
        dma_len: u16,
        /// Immediate.
        imm: Option<u32>,
        /// Payload length.
        payload: u16,
        /// TSETH.
        ts: Option<u32>,
        /// BTH flags.
        rtx: bool,
        /// BTH.A.
        ack_req: bool,
    },
    /// A SACK.
    Sack {
        /// CACK_PSN offset.
        cack: i16,
        /// Base offset from CACK_PSN.
        base: i16,
        /// Bitmap.
        bitmap: u64,
        /// Mark (0..=2).
        mark: u8,
        /// PR.
        probe_reply: bool,
        /// MPR.
        mpr: u8,
        /// EV.
        ev: u32,
        /// TS echo.
        ts_echo: Option<u32>,
        /// Penalty.
        cwnd_pen: u8,
    },
    /// A NACK.
    Nack {
        /// Reason byte.
        reason: u8,
        /// PSN offset.
        psn: i16,
        /// CACK_PSN offset.
        cack: i16,
        /// EV.
        ev: u32,
        /// Echo the send time of the newest real data packet, or this value.
        ts_echo: Option<u32>,
        /// MPR.
        mpr: u8,
    },
    /// A transport ACK.
    Ack {
        /// CACK_PSN offset.
        cack: i16,
        /// CMSN.
        cmsn: u16,
    },
    /// A probe.
    Probe {
        /// EV.
        ev: u32,
        /// TS.
        ts: u32,
        /// BTH.A.
        ack_req: bool,
    },
    /// An endpoint request.
    EpRequest {
        /// Op byte.
        op: u8,
        /// Request id.
        req_id: u32,
        /// Port mask.
        port_mask: u32,
        /// EV.
        ev: u32,
        /// TS.
        ts: Option<u32>,
    },
    /// An endpoint response.
    EpResponse {
        /// Op byte.
        op: u8,
        /// Port.
        rx_port: u8,
        /// Request id (small values match probes in flight).
        req_id: u32,
        /// EV.
        ev: u32,
        /// TS echo.
        ts_echo: u32,
    },
}

/// A send work request.
#[derive(Debug, Clone, Arbitrary)]
pub struct Wr {
    /// WRITE, WRITE_IMM, SEND, READ.
    pub kind: u8,
    /// Local buffer, offset, length.
    pub local: (u8, u16, u16),
    /// A second scatter/gather element, if any.
    pub second: Option<(u8, u16, u16)>,
    /// Remote buffer and offset.
    pub remote: (u8, u16),
    /// Use the remote region's key, or this one.
    pub rkey: Option<u32>,
    /// Signaled.
    pub signaled: bool,
    /// Immediate.
    pub imm: u32,
}

/// One step.
#[derive(Debug, Clone, Arbitrary)]
pub enum Op {
    /// Let `node` send up to `n` datagrams.
    Pump {
        /// A (false) or B (true).
        node: bool,
        /// How many.
        n: u8,
    },
    /// Deliver the datagram at `pick` of the queue from `from`.
    Deliver {
        /// Sender.
        from: bool,
        /// Index (modulo the queue length).
        pick: u16,
        /// ECN CE.
        ce: bool,
    },
    /// Deliver everything queued from `from`, in order.
    DeliverAll {
        /// Sender.
        from: bool,
    },
    /// Drop a queued datagram.
    Drop {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
    },
    /// Deliver a copy and keep the original queued.
    Duplicate {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
    },
    /// Deliver a changed copy of a queued datagram.
    Mutate {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
        /// Byte to flip, and how.
        flip: Option<(u16, u8)>,
        /// Keep only this many bytes.
        cut: Option<u16>,
        /// Recompute the ICRC afterwards.
        reseal: bool,
        /// Deliver as trimmed (cut to 64 bytes, marked).
        trim: Option<bool>,
        /// Claimed sender.
        claim: From,
    },
    /// A forged packet to `to`'s QP (or endpoint).
    Forge {
        /// Receiver.
        to: bool,
        /// Destination QPN.
        qpn: Qpn,
        /// The packet.
        packet: Forged,
        /// Claimed sender.
        claim: From,
        /// Arrival port.
        port: u8,
    },
    /// Bytes as they come.
    Raw {
        /// Receiver.
        to: bool,
        /// The datagram.
        bytes: Vec<u8>,
        /// Claimed sender.
        claim: From,
    },
    /// Post a send work request.
    Post {
        /// Poster.
        node: bool,
        /// The request.
        wr: Wr,
    },
    /// Post a receive.
    PostRecv {
        /// Poster.
        node: bool,
        /// Buffer, offset, length; `None`: no buffer (WRITE_WITH_IMM only).
        sge: Option<(u8, u16, u16)>,
    },
    /// Time passes; due timers run.
    Advance {
        /// Nanoseconds (up to about 4 ms).
        ns: u32,
    },
    /// Jump to the next timer of either side and run it.
    NextTimer,
    /// Poll completions.
    PollCq {
        /// Node.
        node: bool,
        /// At most this many.
        n: u8,
    },
    /// A port goes down or up.
    Port {
        /// Node.
        node: bool,
        /// Port.
        port: u8,
        /// Up.
        up: bool,
    },
    /// Register a piece of a buffer.
    Register {
        /// Node.
        node: bool,
        /// Buffer, offset, length.
        at: (u8, u16, u16),
        /// Rights (verbs bits).
        access: u8,
    },
    /// Deregister a region.
    Deregister {
        /// Node.
        node: bool,
        /// Which live region.
        pick: u8,
    },
    /// Deny or allow an EV.
    Deny {
        /// Node.
        node: bool,
        /// Which EV.
        pick: u8,
        /// Deny.
        deny: bool,
    },
    /// Report an EV unreachable (an ICMP error): an even `pick` names an EV directly, an odd one bounces a
    /// datagram the node has queued (it is not delivered), quoted whole or cut short.
    Unreachable {
        /// Node.
        node: bool,
        /// Which EV.
        pick: u8,
    },
    /// Send an endpoint EV probe.
    EvProbe {
        /// Node.
        node: bool,
        /// EV.
        ev: u32,
        /// Plane.
        plane: u8,
    },
    /// Set the receive penalty.
    Penalty {
        /// Node.
        node: bool,
        /// Penalty.
        pen: u8,
    },
    /// Move the QP to ERROR.
    Fail {
        /// Node.
        node: bool,
    },
}

/// Transport settings chosen by the fuzzer.
#[derive(Debug, Clone, Arbitrary)]
pub struct Setup {
    /// Planes (1..=3).
    pub planes: u8,
    /// EVs per plane (1..=4).
    pub per_plane: u8,
    /// Payload bytes per packet (64..=319).
    pub mtu: u8,
    /// ICRC on.
    pub icrc: bool,
    /// Receive window (1..=2 × 128 PSNs).
    pub mpr: bool,
    /// `max_wimm`, `max_wimm_dest`, `max_read_dest` (1..=4 each).
    pub caps: (u8, u8, u8),
    /// Extensions of each side.
    pub ext: (bool, bool),
    /// QP timeout exponent (0: none, else 8..=15) and retries.
    pub timeout: (u8, u8, u8),
    /// Small CQs that can overrun (else 128 entries).
    pub small_cq: Option<u8>,
    /// First PSNs.
    pub psns: (u32, u32),
    /// QPN seeds.
    pub seeds: (u64, u64),
    /// Zero-copy memory on each side.
    pub lend: (bool, bool),
}

/// A whole fuzz input.
#[derive(Debug, Clone, Arbitrary)]
pub struct Input {
    /// Settings.
    pub setup: Setup,
    /// Steps.
    pub ops: Vec<Op>,
}

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
                    ts_echo: ts_echo.unwrap_or(target.last_ts),
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
            Op::Mutate {
                from,
                pick,
                flip,
                cut,
                reseal,
                trim,
                claim,
            } => {
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
                let n = &mut self.nodes[side(node)];
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
            Op::Deregister { node, pick } => {
                let n = &mut self.nodes[side(node)];
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
