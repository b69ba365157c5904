//! A deterministic in-memory network of N planes between endpoints, for tests, examples and benchmarks.
//!
//! Each plane connects every endpoint. A packet leaves its sender through that node's port on the plane
//! (serialized at the plane's rate), crosses the plane on one of `paths_per_plane` spines chosen by its EV,
//! and queues at the destination's port on the plane (bounded buffer: trim or drop when full, ECN above a
//! threshold). Per plane the network can lose, reorder, duplicate, trim and corrupt packets at random, and
//! faults scheduled at given times kill and restore planes, spines (paths), NIC ports and whole nodes.
//!
//! Same seed, same configuration, same calls → the same run, bit for bit; [`Net::trace_hash`] proves it.

mod connect;
mod memory;
mod skip;
pub mod vectors;

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub use connect::{QpEnd, connect_pair};
pub use memory::{GUARD, GUARD_LEN, VecMemory, pattern_byte};
pub use skip::{SKIP_LOG, skip};

use crate::config::{EndpointConfig, QpConfig};
use crate::endpoint::{Endpoint, RecvMeta, TrimMark};
use crate::mem::{Access, MrKeys, Pd};
use crate::qp::{PeerId, QpInit};
use crate::time::{Duration, Instant, nanos};
use crate::wire::TrafficClass;
use crate::{Caps, CqId};

/// Behaviour of one plane.
#[derive(Debug, Clone, PartialEq)]
pub struct PlaneConfig {
    /// One-way propagation delay across the plane.
    pub delay: Duration,
    /// Port rate in bit/s (both the sender's and the receiver's port); 0 = unlimited.
    pub rate_bps: u64,
    /// Buffer of a receiver's port in bytes; beyond it data is trimmed (or dropped without trimming).
    pub buffer_bytes: u64,
    /// Whether full buffers trim data packets instead of dropping them.
    pub trimming: bool,
    /// Backlog above which packets are CE-marked; `None` disables ECN.
    pub ecn_threshold_bytes: Option<u64>,
    /// Probability a packet is silently lost.
    pub loss: f64,
    /// Probability a packet is delayed by up to `reorder_delay` extra.
    pub reorder: f64,
    /// Largest extra delay of a reordered packet.
    pub reorder_delay: Duration,
    /// Probability a packet is delivered twice.
    pub duplicate: f64,
    /// Probability a data packet is trimmed inside the fabric (TRIMMED).
    pub trim: f64,
    /// Probability one random bit of a packet is flipped.
    pub corrupt: f64,
}

impl Default for PlaneConfig {
    fn default() -> Self {
        Self {
            delay: Duration::from_micros(2),
            rate_bps: 100_000_000_000,
            buffer_bytes: 256 * 1024,
            trimming: true,
            ecn_threshold_bytes: Some(64 * 1024),
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::from_micros(5),
            duplicate: 0.0,
            trim: 0.0,
            corrupt: 0.0,
        }
    }
}

/// The network.
#[derive(Debug, Clone, PartialEq)]
pub struct NetConfig {
    /// One configuration per plane.
    pub planes: Vec<PlaneConfig>,
    /// Spines per plane; a packet's spine is `(ev >> plane_bits) % paths_per_plane`.
    pub paths_per_plane: u32,
    /// EV bits that hold the plane.
    pub plane_bits: u8,
    /// RNG seed.
    pub seed: u64,
}

impl NetConfig {
    /// `planes` identical planes.
    pub fn uniform(planes: u8, plane: PlaneConfig, seed: u64) -> Self {
        let ev = crate::path::EvConfig::with_planes(planes, 1);
        Self {
            planes: vec![plane; usize::from(planes)],
            paths_per_plane: 16,
            plane_bits: ev.plane_bits,
            seed,
        }
    }
}

/// Something that happens to the network at a given time.
#[derive(Debug, Clone, PartialEq)]
pub enum Fault {
    /// The whole plane silently drops everything.
    PlaneDown(u8),
    /// The plane works again.
    PlaneUp(u8),
    /// One spine of a plane silently drops everything.
    PathDown {
        /// Plane.
        plane: u8,
        /// Spine index.
        path: u32,
    },
    /// The spine works again.
    PathUp {
        /// Plane.
        plane: u8,
        /// Spine index.
        path: u32,
    },
    /// One EV (path) silently drops everything, in both directions.
    EvDown(u32),
    /// The EV works again.
    EvUp(u32),
    /// A node's NIC port goes down: its traffic on that plane stops and its endpoint is told at once.
    PortDown {
        /// Node.
        node: usize,
        /// Plane.
        plane: u8,
    },
    /// The port comes back.
    PortUp {
        /// Node.
        node: usize,
        /// Plane.
        plane: u8,
    },
    /// A node goes silent (a killed peer): everything to and from it is dropped.
    NodeSilent(usize),
    /// A node stops running (a descheduled process): it sends nothing, its timers wait, and what arrives for it
    /// waits in its socket, in order, until it resumes. Nothing is lost.
    NodePaused(usize),
    /// The paused node runs again and reads what waited for it.
    NodeResumed(usize),
    /// Replace a plane's behaviour.
    SetPlane(u8, PlaneConfig),
}

/// Counters of one plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct PlaneCounters {
    /// Packets handed to the plane.
    pub sent: u64,
    /// Packets delivered.
    pub delivered: u64,
    /// Bytes delivered.
    pub delivered_bytes: u64,
    /// Dropped at random.
    pub lost: u64,
    /// Dropped because the plane, path, port or node was down.
    pub dead_drops: u64,
    /// Dropped because a buffer was full and trimming was off.
    pub overflow_drops: u64,
    /// Trimmed (at random or by a full buffer).
    pub trimmed: u64,
    /// CE-marked.
    pub ecn_marked: u64,
    /// Duplicated.
    pub duplicated: u64,
    /// Corrupted copies delivered (a corrupted packet that is also duplicated counts twice).
    pub corrupted: u64,
}

/// One endpoint of the network with its memory.
#[derive(Debug)]
pub struct Node {
    /// The engine under test.
    pub ep: Endpoint,
    /// Its memory.
    pub mem: VecMemory,
    /// Its protection domain (allocated at creation).
    pub pd: Pd,
    /// Its completion queue (allocated at creation).
    pub cq: CqId,
    silent: bool,
    /// While paused, what arrived for it, in order (see [`Fault::NodePaused`]).
    held: Option<Vec<InFlight>>,
    port_down: Vec<bool>,
    /// Per plane: when the node's sending port is free again.
    tx_busy: Vec<Instant>,
    /// Per plane: when the node's receiving port is free again.
    rx_busy: Vec<Instant>,
    /// When a busy sending port will have room again, if the node is waiting for one.
    port_wake: Option<Instant>,
}

/// A sending port has room while less than this much is queued on it.
const PORT_QUEUE_BYTES: u64 = 16 * 1024;

#[derive(Debug)]
struct InFlight {
    dst: usize,
    src: usize,
    plane: u8,
    trim: Option<TrimMark>,
    ce: bool,
    bytes: Vec<u8>,
}

enum Ev {
    Deliver(InFlight),
    Fault(Fault),
}

/// The network and its nodes.
pub struct Net {
    cfg: NetConfig,
    /// The endpoints.
    pub nodes: Vec<Node>,
    now: Instant,
    seq: u64,
    queue: BinaryHeap<Reverse<(Instant, u64)>>,
    events: Vec<Option<Ev>>,
    free_events: Vec<usize>,
    rng: Xoshiro256PlusPlus,
    plane_down: Vec<bool>,
    path_down: Vec<Vec<bool>>,
    ev_down: std::collections::BTreeSet<u32>,
    /// Counters per plane.
    pub counters: Vec<PlaneCounters>,
    hash: u64,
    buf: Vec<u8>,
    /// (node, QPN) → the first PSN that QP sends.
    first_psns: std::collections::BTreeMap<(usize, u32), u32>,
    keys: std::collections::BTreeMap<(usize, u32), crate::QpKeys>,
}

impl core::fmt::Debug for Net {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Net")
            .field("now", &self.now)
            .field("nodes", &self.nodes.len())
            .finish()
    }
}

const FNV_PRIME: u64 = 0x0000_0100_0000_01B3;

impl Net {
    /// A network with no nodes yet.
    pub fn new(cfg: NetConfig) -> Self {
        let n = cfg.planes.len();
        Self {
            rng: Xoshiro256PlusPlus::seed_from_u64(cfg.seed),
            plane_down: vec![false; n],
            path_down: vec![vec![false; cfg.paths_per_plane.max(1) as usize]; n],
            ev_down: std::collections::BTreeSet::new(),
            counters: vec![PlaneCounters::default(); n],
            cfg,
            nodes: Vec::new(),
            now: Instant::ZERO,
            seq: 0,
            queue: BinaryHeap::new(),
            events: Vec::new(),
            free_events: Vec::new(),
            hash: 0xCBF2_9CE4_8422_2325,
            buf: vec![0; 70_000],
            first_psns: std::collections::BTreeMap::new(),
            keys: std::collections::BTreeMap::new(),
        }
    }

    /// Adds an endpoint with one port per plane; returns its index (which is also its [`PeerId`]).
    pub fn add_node(&mut self, caps: Caps) -> usize {
        let planes = self.cfg.planes.len();
        let i = self.nodes.len();
        let mut ep = Endpoint::new(EndpointConfig {
            ports: planes as u8,
            caps,
            // QP numbers as a real deployment scrambles them, from the seed (spec SEC-QPN-1).
            qpn_seed: self.derived(0x5150_4E00 ^ i as u64) | 1,
            ..EndpointConfig::default()
        })
        .expect("valid endpoint config");
        let pd = ep.alloc_pd();
        let cq = ep.create_cq(1 << 16);
        self.nodes.push(Node {
            ep,
            mem: VecMemory::new(0x1000_0000 * (i as u64 + 1)),
            pd,
            cq,
            silent: false,
            held: None,
            port_down: vec![false; planes],
            tx_busy: vec![Instant::ZERO; planes],
            rx_busy: vec![Instant::ZERO; planes],
            port_wake: None,
        });
        i
    }

    /// A value derived from the seed and `salt` without drawing from the network's random stream, so setting up
    /// endpoints and QPs leaves the stream of losses and delays as it was.
    fn derived(&self, salt: u64) -> u64 {
        let mut z = self.cfg.seed ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// The first PSN QP `qpn` of node `node` sends (drawn from the seed by [`connect`](Self::connect)).
    pub fn first_psn(&self, node: usize, qpn: u32) -> Option<u32> {
        self.first_psns.get(&(node, qpn)).copied()
    }

    /// Current time.
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Hash of every delivery so far (time, endpoints, plane, marks, bytes): equal hashes mean equal runs.
    pub fn trace_hash(&self) -> u64 {
        self.hash
    }

    /// Creates a connected QP pair between nodes `a` and `b` with the given configuration; returns their QPNs.
    /// Each side's first PSN is drawn from the seed (spec SEC-PSN-1); [`first_psn`](Self::first_psn) tells it.
    pub fn connect(&mut self, a: usize, b: usize, cfg: &QpConfig) -> (u32, u32) {
        self.connect_with(a, b, cfg, false)
    }

    /// [`connect`](Self::connect) with keys (spec SEC-AUTH-1), drawn from the seed: every packet of the pair
    /// carries an AUTH tag. [`keys`](Self::keys) tells them.
    pub fn connect_keyed(&mut self, a: usize, b: usize, cfg: &QpConfig) -> (u32, u32) {
        self.connect_with(a, b, cfg, true)
    }

    /// The keys node `node`'s QP `qpn` got from [`connect_keyed`](Self::connect_keyed).
    pub fn keys(&self, node: usize, qpn: u32) -> Option<crate::QpKeys> {
        self.keys.get(&(node, qpn)).copied()
    }

    fn connect_with(&mut self, a: usize, b: usize, cfg: &QpConfig, keyed: bool) -> (u32, u32) {
        let now = self.now;
        let mut qpn = [0u32; 2];
        for (k, &n) in [a, b].iter().enumerate() {
            let node = &mut self.nodes[n];
            let mut init = QpInit::new(node.pd, node.cq);
            init.config = cfg.clone();
            init.max_send_wr = 4096;
            init.max_recv_wr = 4096;
            qpn[k] = node
                .ep
                .open_qp(init, Access::REMOTE_WRITE | Access::REMOTE_READ, now)
                .expect("valid QP config");
        }
        // spec: SEC-PSN-1
        let psns = [a, b].map(|n| {
            let salt = 0x5053_4E00 ^ ((n as u64) << 32) ^ u64::from(qpn[usize::from(n == b)]);
            self.derived(salt) as u32 & 0xFF_FFFF
        });
        if keyed {
            let key = |salt: u64| {
                let mut k = [0u8; 16];
                k[..8].copy_from_slice(&self.derived(salt).to_le_bytes());
                k[8..].copy_from_slice(&self.derived(salt ^ 0x4B45_5931).to_le_bytes());
                crate::wire::AuthKey::new(k)
            };
            // One key per direction: what a sends, b checks, and the other way round.
            let (ab, ba) = (
                key(0x4155_5448 ^ u64::from(qpn[0])),
                key(0x4155_5448 ^ u64::from(qpn[1]) << 24),
            );
            let sides = [(a, qpn[0], ab, ba), (b, qpn[1], ba, ab)];
            for (n, q, tx, rx) in sides {
                let keys = crate::QpKeys { tx, rx };
                self.nodes[n]
                    .ep
                    .set_qp_keys(q, Some(keys))
                    .expect("a QP in INIT takes keys");
                self.keys.insert((n, q), keys);
            }
        }
        self.connect_qps([(a, qpn[0], psns[0]), (b, qpn[1], psns[1])]);
        self.first_psns.insert((a, qpn[0]), psns[0]);
        self.first_psns.insert((b, qpn[1]), psns[1]);
        (qpn[0], qpn[1])
    }

    /// Connects two QPs in INIT, `(node, qpn, first PSN it sends)` each, in one step (both INIT → RTR → RTS),
    /// with [`connect_pair`]; the nodes name each other by index. Both may be on one node (loopback).
    ///
    /// # Panics
    /// If either QP does not exist or is not in INIT.
    pub fn connect_qps(&mut self, sides: [(usize, u32, u32); 2]) {
        let now = self.now;
        let [(a, qa, pa), (b, qb, pb)] = sides;
        let ends = [
            QpEnd {
                qpn: qa,
                peer: PeerId(b as u32),
                sq_psn: pa,
            },
            QpEnd {
                qpn: qb,
                peer: PeerId(a as u32),
                sq_psn: pb,
            },
        ];
        if a == b {
            // Both QPs on one endpoint: connect each to the other's blob.
            let ep = &mut self.nodes[a].ep;
            let infos = ends.map(|e| ep.conn_info(e.qpn, e.sq_psn).expect("QP exists"));
            for (k, e) in ends.iter().enumerate() {
                ep.connect_qp(e.qpn, e.peer, &infos[1 - k], e.sq_psn, now)
                    .expect("connect");
            }
        } else {
            let (na, nb) = two_mut(&mut self.nodes, a, b);
            connect_pair(now, &mut na.ep, ends[0], &mut nb.ep, ends[1]).expect("connect");
        }
    }

    /// Allocates `len` bytes at node `n` and registers them with `access`; returns (address, keys).
    pub fn alloc_mr(&mut self, n: usize, len: u64, access: Access) -> (u64, MrKeys) {
        let node = &mut self.nodes[n];
        let addr = node.mem.alloc(len);
        let keys = node
            .ep
            .reg_mr(node.pd, addr, len, access | Access::LOCAL_WRITE)
            .expect("registration");
        (addr, keys)
    }

    /// Schedules `fault` at time `at`.
    pub fn schedule(&mut self, at: Instant, fault: Fault) {
        self.push_event(at, Ev::Fault(fault));
    }

    fn push_event(&mut self, at: Instant, ev: Ev) {
        let id = match self.free_events.pop() {
            Some(i) => {
                self.events[i] = Some(ev);
                i
            }
            None => {
                self.events.push(Some(ev));
                self.events.len() - 1
            }
        };
        // Ties are broken by insertion order: (time, sequence) is unique.
        self.seq += 1;
        self.queue.push(Reverse((at, (self.seq << 24) | id as u64)));
    }

    fn uniform(&mut self) -> f64 {
        (self.rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// Runs until `done` returns true (checked after every step) or simulated time passes `limit`.
    /// Returns whether `done` became true.
    pub fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Net) -> bool) -> bool {
        loop {
            self.flush();
            if done(self) {
                return true;
            }
            let Some(next) = self.next_time() else {
                return false;
            };
            if next > limit {
                self.now = limit;
                return false;
            }
            self.now = next;
            self.step_at(next);
        }
    }

    /// Runs for `d` of simulated time.
    pub fn run_for(&mut self, d: Duration) {
        let limit = self.now + d;
        self.run_until(limit, |_| false);
    }

    fn next_time(&self) -> Option<Instant> {
        let mut t = self.queue.peek().map(|Reverse((t, _))| *t);
        for n in self.nodes.iter().filter(|n| n.held.is_none()) {
            for x in [n.ep.poll_timeout(), n.port_wake].into_iter().flatten() {
                t = Some(t.map_or(x, |y| y.min(x)));
            }
        }
        t
    }

    fn step_at(&mut self, now: Instant) {
        while let Some(&Reverse((t, key))) = self.queue.peek() {
            if t > now {
                break;
            }
            self.queue.pop();
            let id = (key & 0xFF_FFFF) as usize;
            let Some(ev) = self.events[id].take() else {
                continue;
            };
            self.free_events.push(id);
            match ev {
                Ev::Deliver(p) => self.deliver(p),
                Ev::Fault(f) => self.apply(f),
            }
        }
        for i in 0..self.nodes.len() {
            let node = &mut self.nodes[i];
            if node.held.is_some() {
                continue;
            }
            if node.port_wake.is_some_and(|t| t <= now) {
                node.port_wake = None;
            }
            if node.ep.poll_timeout().is_some_and(|t| t <= now) {
                node.ep.handle_timeout(now);
            }
        }
    }

    /// Ports of node `i` with room to transmit, and when the first busy one will have room.
    fn ports_ready(&self, i: usize) -> (u32, Option<Instant>) {
        let mut mask = 0u32;
        let mut wake: Option<Instant> = None;
        for (p, pc) in self.cfg.planes.iter().enumerate() {
            let slack = Duration::from_nanos(ser_ns(PORT_QUEUE_BYTES, pc.rate_bps));
            let busy = self.nodes[i].tx_busy[p];
            if busy <= self.now + slack {
                mask |= 1 << p;
            } else {
                let t = Instant::from_nanos(busy.as_nanos() - nanos(slack));
                wake = Some(wake.map_or(t, |w| w.min(t)));
            }
        }
        (mask, wake)
    }

    fn deliver(&mut self, p: InFlight) {
        let dead = self.nodes[p.dst].silent
            || self.nodes[p.dst].port_down[usize::from(p.plane)]
            || self.plane_down[usize::from(p.plane)];
        if dead {
            self.counters[usize::from(p.plane)].dead_drops += 1;
            return;
        }
        if let Some(held) = &mut self.nodes[p.dst].held {
            held.push(p);
            return;
        }
        let c = &mut self.counters[usize::from(p.plane)];
        c.delivered += 1;
        c.delivered_bytes += p.bytes.len() as u64;
        let mut h = self.hash;
        for x in [
            self.now.as_nanos(),
            p.src as u64,
            p.dst as u64,
            u64::from(p.plane),
            u64::from(p.ce) | (p.trim.map_or(0, |m| m as u64 + 1) << 1),
            p.bytes.len() as u64,
        ]
        .into_iter()
        .chain(p.bytes.iter().map(|&b| u64::from(b)))
        {
            h = (h ^ x).wrapping_mul(FNV_PRIME);
        }
        self.hash = h;
        let meta = RecvMeta {
            peer: Some(PeerId(p.src as u32)),
            port: p.plane,
            ecn_ce: p.ce,
            trim: p.trim,
        };
        let now = self.now;
        let node = &mut self.nodes[p.dst];
        node.ep.handle_datagram(now, meta, &p.bytes, &mut node.mem);
    }

    fn apply(&mut self, f: Fault) {
        let now = self.now;
        match f {
            Fault::PlaneDown(p) => self.plane_down[usize::from(p)] = true,
            Fault::PlaneUp(p) => self.plane_down[usize::from(p)] = false,
            Fault::PathDown { plane, path } => {
                if let Some(x) = self.path_down[usize::from(plane)].get_mut(path as usize) {
                    *x = true;
                }
            }
            Fault::PathUp { plane, path } => {
                if let Some(x) = self.path_down[usize::from(plane)].get_mut(path as usize) {
                    *x = false;
                }
            }
            Fault::EvDown(ev) => {
                self.ev_down.insert(ev);
            }
            Fault::EvUp(ev) => {
                self.ev_down.remove(&ev);
            }
            Fault::PortDown { node, plane } => {
                let n = &mut self.nodes[node];
                n.port_down[usize::from(plane)] = true;
                n.ep.set_port_state(now, plane, false);
            }
            Fault::PortUp { node, plane } => {
                let n = &mut self.nodes[node];
                n.port_down[usize::from(plane)] = false;
                n.ep.set_port_state(now, plane, true);
            }
            Fault::NodeSilent(n) => self.nodes[n].silent = true,
            Fault::NodePaused(n) => self.nodes[n].held = Some(Vec::new()),
            Fault::NodeResumed(n) => {
                for p in self.nodes[n].held.take().unwrap_or_default() {
                    self.deliver(p);
                }
            }
            Fault::SetPlane(p, c) => self.cfg.planes[usize::from(p)] = c,
        }
    }

    /// Drains every node's transmissions at the current time into the network.
    fn flush(&mut self) {
        let now = self.now;
        let mut buf = std::mem::take(&mut self.buf);
        for i in 0..self.nodes.len() {
            if self.nodes[i].held.is_some() {
                continue;
            }
            loop {
                let (ready, wake) = self.ports_ready(i);
                let node = &mut self.nodes[i];
                let Some(t) = node
                    .ep
                    .poll_transmit_on(now, ready, &mut buf, &mut node.mem)
                else {
                    node.port_wake = wake;
                    break;
                };
                // A zero-copy packet is gathered the way a NIC or `sendmmsg` would: headers, payload, ICRC.
                let bytes = match t.payload {
                    None => buf[..t.len].to_vec(),
                    Some(p) => [
                        &buf[..p.at],
                        node.mem.slice(p.addr, p.len),
                        &buf[p.at..t.len],
                    ]
                    .concat(),
                };
                self.send(i, t.peer.0 as usize, t.plane, t.ev, t.class, bytes);
            }
        }
        self.buf = buf;
    }

    fn send(
        &mut self,
        src: usize,
        dst: usize,
        plane: u8,
        ev: u32,
        class: TrafficClass,
        mut bytes: Vec<u8>,
    ) {
        let p = usize::from(plane);
        if p >= self.cfg.planes.len() || dst >= self.nodes.len() {
            return;
        }
        let pc = self.cfg.planes[p].clone();
        self.counters[p].sent += 1;
        let path = (ev >> self.cfg.plane_bits) % self.cfg.paths_per_plane.max(1);
        if self.plane_down[p]
            || self.path_down[p][path as usize]
            || self.ev_down.contains(&ev)
            || self.nodes[src].silent
            || self.nodes[src].port_down[p]
        {
            self.counters[p].dead_drops += 1;
            return;
        }
        // Sender's port: serialization.
        let len = bytes.len() as u64 + 48;
        let ser = ser_ns(len, pc.rate_bps);
        let now = self.now;
        let depart = self.nodes[src].tx_busy[p].max(now) + Duration::from_nanos(ser);
        self.nodes[src].tx_busy[p] = depart;
        // Random impairments inside the fabric.
        if self.uniform() < pc.loss {
            self.counters[p].lost += 1;
            return;
        }
        let data = matches!(class, TrafficClass::Data | TrafficClass::DataRetx);
        let mut trim = None;
        if data && self.uniform() < pc.trim {
            trim = Some(TrimMark::Fabric);
        }
        let mut extra = 0;
        if self.uniform() < pc.reorder {
            extra = (self.uniform() * nanos(pc.reorder_delay) as f64) as u64;
        }
        // Receiver's port: queueing, trimming, ECN.
        let arrive = depart + pc.delay + Duration::from_nanos(extra);
        let busy = self.nodes[dst].rx_busy[p];
        let backlog_ns = nanos(busy.saturating_duration_since(arrive));
        let backlog_bytes = if pc.rate_bps == 0 {
            0
        } else {
            backlog_ns * pc.rate_bps / 8 / 1_000_000_000
        };
        let mut ce = false;
        if data && trim.is_none() && backlog_bytes + len > pc.buffer_bytes {
            if pc.trimming {
                trim = Some(TrimMark::LastHop);
            } else {
                self.counters[p].overflow_drops += 1;
                return;
            }
        }
        if let Some(th) = pc.ecn_threshold_bytes
            && data
            && backlog_bytes > th
        {
            ce = true;
            self.counters[p].ecn_marked += 1;
        }
        if trim.is_some() {
            // Keep the first 64 bytes of the UDP payload (spec WIRE-ICRC-2).
            bytes.truncate(64);
            self.counters[p].trimmed += 1;
        }
        let rser = ser_ns(bytes.len() as u64 + 48, pc.rate_bps);
        let done = busy.max(arrive) + Duration::from_nanos(rser);
        self.nodes[dst].rx_busy[p] = done;
        let corrupted = self.uniform() < pc.corrupt && !bytes.is_empty();
        if corrupted {
            let bit = (self.rng.next_u64() % (bytes.len() as u64 * 8)) as usize;
            bytes[bit / 8] ^= 1 << (bit % 8);
            self.counters[p].corrupted += 1;
        }
        if self.uniform() < pc.duplicate {
            self.counters[p].duplicated += 1;
            // The copy carries the same flipped bit.
            self.counters[p].corrupted += u64::from(corrupted);
            let dup = InFlight {
                dst,
                src,
                plane,
                trim,
                ce,
                bytes: bytes.clone(),
            };
            self.push_event(done + Duration::from_nanos(100), Ev::Deliver(dup));
        }
        self.push_event(
            done,
            Ev::Deliver(InFlight {
                dst,
                src,
                plane,
                trim,
                ce,
                bytes,
            }),
        );
    }
}

/// Nanoseconds to serialize `bytes` at `rate_bps` (0 = unlimited).
fn ser_ns(bytes: u64, rate_bps: u64) -> u64 {
    (bytes * 8 * 1_000_000_000)
        .checked_div(rate_bps)
        .unwrap_or(0)
}

/// Mutable references to two different elements of a slice.
fn two_mut<T>(v: &mut [T], a: usize, b: usize) -> (&mut T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (lo, hi) = v.split_at_mut(b);
        (&mut lo[a], &mut hi[0])
    } else {
        let (lo, hi) = v.split_at_mut(a);
        (&mut hi[0], &mut lo[b])
    }
}
