//! Two endpoints back to back, a tiny lossless driver between them, and record/replay of each endpoint's calls.
//!
//! The engine is deterministic: the same calls with the same `now` values and the same bytes give the same
//! outputs. So the driver records every call each endpoint receives, and a bench replays one endpoint's calls
//! into a fresh endpoint built the same way. That times one side alone (no peer, no driver, no network), and
//! [`verify`] proves the replay emits exactly what the recording did, byte for byte.
//!
//! The network: A (peer 0) writes to B (peer 1) over [`PLANES`] planes, each packet arriving [`ONE_WAY`] after
//! it was sent, in order, never lost. Every port is always ready. Time jumps to the next arrival or timer; one
//! packet is delivered per step and the receiving endpoint is polled right after it (as a driver that reads
//! packet by packet does), so SACK coalescing follows the engine's own rules (every `sack_every_packets`).

use std::collections::VecDeque;
use std::time::Instant as WallClock;

use mrc::QpStats;
use mrc::testing::{QpEnd, connect_pair};
use mrc::wire::{AuthKey, TrafficClass};
use mrc::{
    Access, CqId, Duration, Endpoint, EndpointConfig, Instant, Memory, MrKeys, PeerId, QpConfig,
    QpInit, QpKeys, RecvMeta, SendOp, SendWr, Sge, Transmit,
};

/// Payload bytes per packet.
pub const MTU: u32 = 4096;
/// Planes (NIC ports) of both endpoints; the QPs spray over all of them.
pub const PLANES: u8 = 8;
/// One-way delay of every packet.
pub const ONE_WAY: Duration = Duration::from_micros(2);
/// Address of each side's registered region (both sides are built the same way).
pub const REGION_BASE: u64 = 0x1000_0000;

/// What the pair transfers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    /// WRITEs A posts, all at time zero.
    pub messages: u32,
    /// Bytes per WRITE.
    pub message_len: u32,
    /// Whether the QPs compute and check the ICRC.
    pub icrc: bool,
    /// Whether the QPs have keys: every packet carries an AUTH tag and every packet taken is checked (spec
    /// SEC-AUTH-1).
    pub auth: bool,
}

impl Scenario {
    /// Payload bytes moved.
    pub const fn bytes(&self) -> u64 {
        self.messages as u64 * self.message_len as u64
    }

    /// The QP configuration of both sides: defaults (NSCC, 8 planes × 16 EVs) with [`MTU`] and `icrc`.
    pub fn qp_config(&self) -> QpConfig {
        QpConfig {
            mtu: MTU,
            icrc: self.icrc,
            ..QpConfig::default()
        }
    }
}

/// One endpoint with its single connected QP.
#[derive(Debug)]
pub struct Side {
    /// The engine.
    pub ep: Endpoint,
    /// Its QP.
    pub qpn: u32,
    /// Its completion queue.
    pub cq: CqId,
    /// Keys of its region `[REGION_BASE, REGION_BASE + bytes)`.
    pub keys: MrKeys,
}

/// Builds A and B and connects them. Creation order is fixed, so QPNs and keys are the same every time: a
/// replay's fresh endpoint is indistinguishable from the recorded one.
pub fn build_pair(s: &Scenario) -> [Side; 2] {
    let make = || {
        let mut ep = Endpoint::new(EndpointConfig {
            ports: PLANES,
            ..EndpointConfig::default()
        })
        .expect("endpoint config");
        let pd = ep.alloc_pd();
        let cq = ep.create_cq(s.messages as usize + 16);
        let keys = ep
            .reg_mr(
                pd,
                REGION_BASE,
                s.bytes(),
                Access::LOCAL_WRITE | Access::REMOTE_WRITE,
            )
            .expect("registration");
        let mut init = QpInit::new(pd, cq);
        init.config = s.qp_config();
        init.max_send_wr = s.messages.max(1);
        let qpn = ep
            .open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)
            .expect("QP config");
        Side { ep, qpn, cq, keys }
    };
    let [mut a, mut b] = [make(), make()];
    let end = |side: &Side, k: usize| QpEnd {
        qpn: side.qpn,
        peer: PeerId(1 - k as u32),
        sq_psn: start_psn(k),
    };
    let (a_end, b_end) = (end(&a, 0), end(&b, 1));
    if s.auth {
        // spec: SEC-AUTH-1
        let (ab, ba) = (AuthKey::new([0xA5; 16]), AuthKey::new([0x5A; 16]));
        let keys = [QpKeys { tx: ab, rx: ba }, QpKeys { tx: ba, rx: ab }];
        for (side, k) in [&mut a, &mut b].into_iter().zip(keys) {
            side.ep.set_qp_keys(side.qpn, Some(k)).expect("keys");
        }
    }
    connect_pair(Instant::ZERO, &mut a.ep, a_end, &mut b.ep, b_end).expect("connect");
    [a, b]
}

/// First PSN of side `k`: not zero, so wrap-around arithmetic is exercised as in real use.
fn start_psn(k: usize) -> u32 {
    0x00AB_0000 + 0x1111 * k as u32
}

/// One WRITE that A posts.
#[derive(Debug, Clone, Copy)]
pub struct Post {
    /// Work request id.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Its single local buffer.
    pub sge: Sge,
}

/// A's WRITEs: message `i` goes from A's region at offset `i × len` to the same offset in B's region.
pub fn posts(s: &Scenario, a: &Side, b: &Side) -> Vec<Post> {
    (0..s.messages)
        .map(|i| {
            let off = u64::from(i) * u64::from(s.message_len);
            Post {
                wr_id: u64::from(i),
                op: SendOp::Write {
                    remote_addr: REGION_BASE + off,
                    rkey: b.keys.rkey,
                },
                sge: Sge {
                    addr: REGION_BASE + off,
                    len: s.message_len,
                    lkey: a.keys.lkey,
                },
            }
        })
        .collect()
}

fn post(side: &mut Side, p: &Post, now: Instant) {
    let wr = SendWr {
        wr_id: p.wr_id,
        op: p.op,
        sges: core::slice::from_ref(&p.sge),
        signaled: true,
        solicited: false,
    };
    side.ep.post_send(side.qpn, &wr, now).expect("post_send");
}

/// One call an endpoint received.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Call {
    /// `post_send` of `posts[index]`.
    Post {
        /// Time given.
        now: Instant,
        /// Index into the recording's posts.
        index: u32,
    },
    /// `poll_transmit` until it said `None`; it returned `count` packets first.
    Poll {
        /// Time given.
        now: Instant,
        /// Packets returned.
        count: u32,
    },
    /// `handle_datagram` of `bytes[start..start + len]` of the trace.
    Deliver {
        /// Time given.
        now: Instant,
        /// Metadata given.
        meta: RecvMeta,
        /// Offset in the trace's byte arena.
        start: usize,
        /// Datagram length.
        len: usize,
    },
    /// `handle_timeout`.
    Timeout {
        /// Time given.
        now: Instant,
    },
}

/// Packets counted on one side of an endpoint.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// All packets.
    pub packets: u64,
    /// Data packets (first transmissions and retransmissions).
    pub data: u64,
}

/// Everything one endpoint received, in order, and what it sent.
#[derive(Debug, Clone, Default)]
pub struct SideTrace {
    /// The calls.
    pub calls: Vec<Call>,
    /// The delivered datagrams, back to back.
    pub bytes: Vec<u8>,
    /// What it sent.
    pub sent: Tally,
    /// What it was handed.
    pub received: Tally,
    /// Hash of every emitted datagram and its [`mrc::Transmit`] fields.
    pub sent_hash: u64,
}

impl SideTrace {
    /// Index of the first call that is not one of the leading posts (which a replay's setup performs).
    pub fn first_timed(&self) -> usize {
        self.calls
            .iter()
            .position(|c| !matches!(c, Call::Post { .. }))
            .unwrap_or(self.calls.len())
    }

    /// Delivered packets that were not data (for A: the SACKs).
    pub fn control_received(&self) -> u64 {
        self.received.packets - self.received.data
    }
}

/// A run recorded call by call.
#[derive(Debug, Clone)]
pub struct Recording {
    /// What was transferred.
    pub scenario: Scenario,
    /// A's WRITEs.
    pub posts: Vec<Post>,
    /// A's and B's traces.
    pub sides: [SideTrace; 2],
    /// A's and B's QP counters at the end.
    pub stats: [QpStats; 2],
    /// Engine time when A's last completion arrived.
    pub end: Instant,
}

/// What the driver reports as it runs; the recorder keeps it, the throughput bench ignores it.
pub trait Tap {
    /// Poll into a per-side scratch buffer and copy out, so the buffer an endpoint writes into evolves exactly
    /// as in a replay (with [`NoCopy`](crate::NoCopy) its stale payload bytes are part of the output).
    const SCRATCH: bool;
    /// A `post_send`.
    fn post(&mut self, side: usize, now: Instant, index: u32);
    /// A poll loop.
    fn poll(&mut self, side: usize, now: Instant, count: u32);
    /// One packet out of `side`.
    fn sent(&mut self, side: usize, t: &Transmit, bytes: &[u8]);
    /// A `handle_datagram`.
    fn deliver(&mut self, side: usize, now: Instant, meta: RecvMeta, bytes: &[u8], data: bool);
    /// A `handle_timeout`.
    fn timeout(&mut self, side: usize, now: Instant);
}

/// Records nothing.
#[derive(Debug, Default)]
pub struct NoTap;

impl Tap for NoTap {
    const SCRATCH: bool = false;
    fn post(&mut self, _: usize, _: Instant, _: u32) {}
    fn poll(&mut self, _: usize, _: Instant, _: u32) {}
    fn sent(&mut self, _: usize, _: &Transmit, _: &[u8]) {}
    fn deliver(&mut self, _: usize, _: Instant, _: RecvMeta, _: &[u8], _: bool) {}
    fn timeout(&mut self, _: usize, _: Instant) {}
}

/// Records both sides.
#[derive(Debug)]
pub struct Recorder {
    /// A's and B's traces.
    pub sides: [SideTrace; 2],
}

impl Default for Recorder {
    fn default() -> Self {
        let side = SideTrace {
            sent_hash: HASH_SEED,
            ..SideTrace::default()
        };
        Self {
            sides: [side.clone(), side],
        }
    }
}

impl Tap for Recorder {
    const SCRATCH: bool = true;
    fn post(&mut self, side: usize, now: Instant, index: u32) {
        self.sides[side].calls.push(Call::Post { now, index });
    }
    fn poll(&mut self, side: usize, now: Instant, count: u32) {
        self.sides[side].calls.push(Call::Poll { now, count });
    }
    fn sent(&mut self, side: usize, t: &Transmit, bytes: &[u8]) {
        let s = &mut self.sides[side];
        s.sent.packets += 1;
        s.sent.data += u64::from(is_data(t));
        s.sent_hash = hash_transmit(s.sent_hash, t, bytes);
    }
    fn deliver(&mut self, side: usize, now: Instant, meta: RecvMeta, bytes: &[u8], data: bool) {
        let s = &mut self.sides[side];
        let start = s.bytes.len();
        s.bytes.extend_from_slice(bytes);
        s.calls.push(Call::Deliver {
            now,
            meta,
            start,
            len: bytes.len(),
        });
        s.received.packets += 1;
        s.received.data += u64::from(data);
    }
    fn timeout(&mut self, side: usize, now: Instant) {
        self.sides[side].calls.push(Call::Timeout { now });
    }
}

fn is_data(t: &Transmit) -> bool {
    matches!(t.class, TrafficClass::Data | TrafficClass::DataRetx)
}

/// Seed of [`hash_transmit`].
pub const HASH_SEED: u64 = 0xCBF2_9CE4_8422_2325;

/// Folds one emitted datagram and where it goes into `h` (word-wise FNV-1a; a checksum, not a secure hash).
pub fn hash_transmit(h: u64, t: &Transmit, bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01B3;
    let head = [
        u64::from(t.peer.0),
        u64::from(t.ev),
        u64::from(t.plane),
        t.class as u64,
        t.len as u64,
        u64::from(t.qpn),
    ];
    let (words, tail) = bytes.as_chunks::<8>();
    let mut h = h;
    for x in head
        .into_iter()
        .chain(words.iter().map(|w| u64::from_le_bytes(*w)))
        .chain(tail.iter().map(|&b| u64::from(b)))
    {
        h = (h ^ x).wrapping_mul(PRIME);
    }
    h
}

struct Flight {
    at: Instant,
    plane: u8,
    data: bool,
    len: usize,
    buf: Vec<u8>,
}

/// The packets in flight between the two sides, and the buffers they travel in.
///
/// Reused across runs, its buffers are already allocated and faulted in, so a timed run measures the loop rather
/// than first-touch page faults.
#[derive(Default)]
pub struct Wire {
    queues: [VecDeque<Flight>; 2],
    /// Buffers go back to the pool of the side that filled them.
    pools: [Vec<Vec<u8>>; 2],
    scratch: [Vec<u8>; 2],
}

impl core::fmt::Debug for Wire {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Wire")
            .field("in_flight", &(self.queues[0].len() + self.queues[1].len()))
            .finish()
    }
}

impl Wire {
    /// Empties the links (their buffers go back to the pools) and sizes the buffers for `cap` bytes.
    fn reset(&mut self, cap: usize) {
        for side in 0..2 {
            while let Some(f) = self.queues[side].pop_front() {
                self.pools[1 - side].push(f.buf);
            }
            for b in self.pools[side].iter_mut().chain([&mut self.scratch[side]]) {
                if b.len() < cap {
                    b.resize(cap, 0);
                }
            }
        }
    }
}

/// Runs the transfer to the end (A has every completion) and returns the engine time then.
///
/// `sides` come from [`build_pair`]; `mems` are A's and B's memories.
pub fn run_pair<M: Memory, T: Tap>(
    s: &Scenario,
    sides: &mut [Side; 2],
    mems: &mut [M; 2],
    wire: &mut Wire,
    tap: &mut T,
) -> Instant {
    let cap = sides[0].ep.max_datagram_len();
    wire.reset(cap);
    let Wire {
        queues,
        pools,
        scratch,
    } = wire;
    let mut now = Instant::ZERO;
    let wrs = {
        let [a, b] = &*sides;
        posts(s, a, b)
    };
    for (i, p) in wrs.iter().enumerate() {
        post(&mut sides[0], p, now);
        tap.post(0, now, i as u32);
    }
    let mut dirty = [true, true];
    loop {
        for side in 0..2 {
            if !std::mem::take(&mut dirty[side]) {
                continue;
            }
            let mut count = 0;
            loop {
                let mut pkt = pools[side].pop().unwrap_or_else(|| vec![0; cap]);
                let (ep, mem) = (&mut sides[side].ep, &mut mems[side]);
                let t = if T::SCRATCH {
                    let t = ep.poll_transmit(now, &mut scratch[side], mem);
                    if let Some(t) = t {
                        pkt[..t.len].copy_from_slice(&scratch[side][..t.len]);
                    }
                    t
                } else {
                    ep.poll_transmit(now, &mut pkt, mem)
                };
                let Some(t) = t else {
                    pools[side].push(pkt);
                    break;
                };
                count += 1;
                tap.sent(side, &t, &pkt[..t.len]);
                queues[1 - side].push_back(Flight {
                    at: now + ONE_WAY,
                    plane: t.plane,
                    data: is_data(&t),
                    len: t.len,
                    buf: pkt,
                });
            }
            tap.poll(side, now, count);
        }
        if sides[0].ep.cq_len(sides[0].cq).map_or(0, |(n, _)| n) >= s.messages as usize {
            return now;
        }
        // The next event: an arrival (to A, then to B) or a timer (A's, then B's), earliest first.
        let events = [
            queues[0].front().map(|f| f.at),
            queues[1].front().map(|f| f.at),
            sides[0].ep.poll_timeout(),
            sides[1].ep.poll_timeout(),
        ];
        let (kind, at) = events
            .iter()
            .enumerate()
            .filter_map(|(k, t)| t.map(|t| (k, t)))
            .min_by_key(|&(k, t)| (t, k))
            .expect("the transfer stalled: no packet in flight and no timer");
        now = now.max(at);
        if kind < 2 {
            let side = kind;
            let f = queues[side].pop_front().expect("front exists");
            let meta = RecvMeta {
                peer: Some(PeerId(1 - side as u32)),
                port: f.plane,
                ecn_ce: false,
                trim: None,
            };
            let bytes = &f.buf[..f.len];
            sides[side]
                .ep
                .handle_datagram(now, meta, bytes, &mut mems[side]);
            tap.deliver(side, now, meta, bytes, f.data);
            pools[1 - side].push(f.buf);
            dirty[side] = true;
        } else {
            let side = kind - 2;
            sides[side].ep.handle_timeout(now);
            tap.timeout(side, now);
            dirty[side] = true;
        }
    }
}

/// Runs the transfer once with memories `mems` and records every call of both endpoints.
pub fn record<M: Memory>(s: &Scenario, mems: &mut [M; 2]) -> Recording {
    let mut sides = build_pair(s);
    let mut rec = Recorder::default();
    // A fresh wire: its zeroed scratch buffers evolve as a replay's fresh buffer does.
    let end = run_pair(s, &mut sides, mems, &mut Wire::default(), &mut rec);
    let stats = [
        sides[0].ep.qp_stats(sides[0].qpn).expect("qp"),
        sides[1].ep.qp_stats(sides[1].qpn).expect("qp"),
    ];
    let posts = posts(s, &sides[0], &sides[1]);
    Recording {
        scenario: *s,
        posts,
        sides: rec.sides,
        stats,
        end,
    }
}

/// A fresh endpoint for replaying `side` of `rec`, with the trace's leading posts already made (setup, not
/// timed), and a zeroed transmit buffer like the recording's. Replay from [`SideTrace::first_timed`].
pub fn prepare(rec: &Recording, side: usize) -> (Side, Vec<u8>) {
    let [a, b] = build_pair(&rec.scenario);
    let mut me = if side == 0 { a } else { b };
    let trace = &rec.sides[side];
    for c in &trace.calls[..trace.first_timed()] {
        if let Call::Post { now, index } = *c {
            post(&mut me, &rec.posts[index as usize], now);
        }
    }
    let buf = vec![0u8; me.ep.max_datagram_len()];
    (me, buf)
}

/// What a replay did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Replayed {
    /// Packets `poll_transmit` returned.
    pub packets: u64,
    /// Sum of the wall time of each `handle_datagram` call, when timed.
    pub deliver_time: Duration,
}

/// Replays `side`'s calls from `from` into `me`. Panics if a poll loop returns a different number of packets
/// than recorded. `on_tx` sees every emitted packet; with `TIME_DELIVERS` each `handle_datagram` is timed.
///
/// Never inlined, so a profiler can collect exactly this (`valgrind --toggle-collect='*pair::replay'`).
#[inline(never)]
pub fn replay<M: Memory, const TIME_DELIVERS: bool>(
    rec: &Recording,
    side: usize,
    from: usize,
    me: &mut Side,
    buf: &mut [u8],
    mem: &mut M,
    mut on_tx: impl FnMut(&Transmit, &[u8]),
) -> Replayed {
    let trace = &rec.sides[side];
    let mut out = Replayed::default();
    for c in &trace.calls[from..] {
        match *c {
            Call::Post { now, index } => post(me, &rec.posts[index as usize], now),
            Call::Poll { now, count } => {
                let mut n = 0;
                while let Some(t) = me.ep.poll_transmit(now, buf, mem) {
                    on_tx(&t, &buf[..t.len]);
                    n += 1;
                }
                assert_eq!(n, count, "the replay diverged from the recording");
                out.packets += u64::from(n);
            }
            Call::Deliver {
                now,
                meta,
                start,
                len,
            } => {
                let bytes = &trace.bytes[start..start + len];
                if TIME_DELIVERS {
                    let t0 = WallClock::now();
                    me.ep.handle_datagram(now, meta, bytes, mem);
                    out.deliver_time += t0.elapsed();
                } else {
                    me.ep.handle_datagram(now, meta, bytes, mem);
                }
            }
            Call::Timeout { now } => me.ep.handle_timeout(now),
        }
    }
    out
}

/// Replays both sides once, untimed, and checks that each emits exactly the recorded packets (count and hash
/// of every byte and [`mrc::Transmit`] field). `mem` makes a side's memory as it was when recording.
pub fn verify<M: Memory>(rec: &Recording, mut mem: impl FnMut(usize) -> M) {
    for side in 0..2 {
        let (mut me, mut buf) = prepare(rec, side);
        let from = rec.sides[side].first_timed();
        let mut m = mem(side);
        let mut h = HASH_SEED;
        let r = replay::<M, false>(rec, side, from, &mut me, &mut buf, &mut m, |t, b| {
            h = hash_transmit(h, t, b);
        });
        assert_eq!(r.packets, rec.sides[side].sent.packets, "side {side}");
        assert_eq!(
            h, rec.sides[side].sent_hash,
            "side {side}: emitted bytes differ"
        );
    }
}

/// Replays `side` from a fresh endpoint `runs` times and returns the summed wall time of the replays alone
/// (setup excluded) and the summed [`Replayed`].
pub fn time_replays<M: Memory, const TIME_DELIVERS: bool>(
    rec: &Recording,
    side: usize,
    mem: &mut M,
    runs: u64,
) -> (Duration, Replayed) {
    let from = rec.sides[side].first_timed();
    let mut total = Duration::ZERO;
    let mut sum = Replayed::default();
    for _ in 0..runs {
        let (mut me, mut buf) = prepare(rec, side);
        let t0 = WallClock::now();
        let r = replay::<M, TIME_DELIVERS>(rec, side, from, &mut me, &mut buf, mem, |_, _| {});
        total += t0.elapsed();
        assert_eq!(r.packets, rec.sides[side].sent.packets);
        sum.packets += r.packets;
        sum.deliver_time += r.deliver_time;
        // Dropping the endpoint is not part of the replay.
        drop(std::hint::black_box(me));
    }
    (total, sum)
}
