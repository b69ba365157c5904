//! The event core and the models: ports (output queue + wire), switches, hosts running `mrc` endpoints.
//!
//! Time is integer picoseconds. A radix heap orders events by (time, insertion sequence), so ties break
//! deterministically. Events carry no data beyond a component index: a port has one pending event for the end
//! of serialization of its head packet and one per packet on its wire (its arrival; a wire is FIFO, so the
//! event pops the wire's head), and a host at most one live timer. Switch forwarding, ECN marking, trimming and enqueueing happen inside the arrival event as
//! plain calls. Packets live in one arena and move between intrusive FIFO lists (queue, wire) by index; they
//! carry only their headers (payload bytes are regenerated from the source address at delivery).

use mrc::cc::CcConfig;
use mrc::cc::NsccConfig;
use mrc::mem::Memory;
use mrc::wire::TrafficClass;
use mrc::{
    Access, Caps, CqId, Endpoint, EndpointConfig, EvConfig, EvState, Event, Instant, Pd, PeerId,
    QpConfig, QpInit, RecvMeta, SendOp, SendWr, Sge, TrimMark,
};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::capture::{Seen, SimCapture};
use crate::drill::FlowCounters;
use crate::prefetch::{prefetch, prefetch_line};
use crate::queue::EventQueue;
use crate::scenario::{CcKind, Recovery, TransportCfg};
use crate::topo::{PortKind, Topology};
use crate::workload::{Transfer, Trigger, TriggerKind, Workload};
use mrc_host::capture::Direction;
use std::sync::Arc;

mod arena;
mod host;
mod outcome;
mod par;
mod phases;
mod window;
pub use par::{lookahead_ps, partitions};
mod port;

use arena::{Arena, List};
use host::{Built, Conn, Host, build_hosts};
pub use outcome::{Counters, Outcome};

const NONE: u32 = u32::MAX;
/// Bytes of one simulated directed port (for the memory estimate).
pub const PORT_BYTES: usize = size_of::<Port>();
/// Bytes of a port's cold half (for the memory estimate).
pub const PORT_COLD_BYTES: usize = size_of::<PortCold>();
/// Bytes of one packet slot (for the memory estimate).
pub const PKT_BYTES: usize = size_of::<Pkt>();
/// Header bytes a packet keeps inline: a data header, a trimmed packet, most control packets.
const HDR: usize = 64;
// Two cache lines each (see the structs).
const _: () = assert!(size_of::<Port>() == 128 && size_of::<Pkt>() == 128);
/// Salt of the placement markers.
const SALT: u64 = 0x9E37_79B9_7F4A_7C15;

/// A directed port: output queues (high priority for control and trimmed headers, low for data) and a wire.
/// Two cache lines, aligned: the first holds what an arrival, an end of serialization and a start of
/// serialization read; the second what an enqueue adds. At 8K hosts the ports no longer fit the cache, so an
/// unaligned 136-byte port cost up to three misses per hop. Fields no packet reads live in `PortCold`.
#[derive(Clone)]
#[repr(C, align(64))]
struct Port {
    wire: List,
    /// Packet being serialized.
    tx: u32,
    to: u32,
    /// The host whose NIC port this is (`NONE` on switch ports): the end of a serialization may pump it.
    host: u32,
    /// Reasons the link is down (link, switch, flap...).
    down_refs: u16,
    /// The packet being serialized was caught by a failure.
    doomed: bool,
    /// Grey loss is configured (its probability is in `PortCold`).
    lossy: bool,
    ecn: bool,
    trim: bool,
    kind: PortKind,
    /// Partition of the node at the far end when it is not this port's own (`LOCAL` otherwise): a packet
    /// leaving the wire there is handed over (par.rs).
    dest: u16,
    /// Serialization time per byte, ps × 2^16 (no division per packet).
    ps_per_byte_q16: u64,
    latency_ps: u64,
    /// When the link last came up (nothing that entered the wire earlier may arrive).
    last_up: u64,
    low: List,
    // Second line.
    high: List,
    low_bytes: u64,
    high_bytes: u64,
    buffer: u64,
    /// Bytes the high-priority FIFO holds.
    hbuffer: u64,
    kmin: u64,
    kmax: u64,
    /// Random draws taken (ECN marks, grey loss): each port has its own sequence, so a draw does not depend
    /// on what other ports (maybe in other threads) did before.
    draws: u64,
}

/// What a port keeps that packets do not read: its configured rate and buffer (a slowed link's are derived
/// from them) and its grey-loss probability.
#[derive(Clone, Copy)]
struct PortCold {
    base_rate_bps: u64,
    /// Buffer at the full rate (a slowed link may scale it).
    base_buffer: u64,
    loss: f64,
    /// When the link last went down: a packet handed over from another partition that entered the wire
    /// before it was on the wire then, and is lost as the wire's flush would have lost it.
    last_down: Option<u64>,
}

fn q16(rate_bps: u64) -> u64 {
    ((8_000_000_000_000u128 << 16) / u128::from(rate_bps.max(1))) as u64
}

/// Hot fields first: forwarding touches only the first cache line (the struct is two aligned lines). The link
/// of the FIFO list a packet is on is in that line too: a pop reads it from the packet it takes, which it
/// reads anyway (in an array apart, at 8,192 hosts, it was a miss of its own per pop).
#[derive(Clone, Copy)]
#[repr(C, align(64))]
struct Pkt {
    /// When it leaves the wire it is on.
    arrive: u64,
    /// Source address of the payload (valid when `plen > 0`).
    tag: u64,
    dst: u32,
    path: u32,
    /// The destination's location (pod, T0, slot), copied at injection so forwarding reads no table.
    dloc: (u32, u32, u32),
    /// Wire bytes.
    wire: u32,
    src: u32,
    /// Datagram length (at most 65,000 payload bytes and the headers: `transport.mtu`'s bound).
    dlen: u16,
    /// Payload offset and length inside the datagram (0 when none or trimmed).
    poff: u16,
    plen: u16,
    /// The next packet of the FIFO list (queue or wire) it is on.
    next: u32,
    /// Overflow storage for long control packets.
    big: u32,
    plane: u8,
    class: u8,
    /// bit 0: CE, bit 1: trimmed in the fabric, bit 2: trimmed at the last hop.
    flags: u8,
    hdr: [u8; HDR],
}

const CLASS_DATA: u8 = 0;
const CLASS_CTRL: u8 = 1;
const F_CE: u8 = 1;
const F_TRIM: u8 = 2;
const F_TRIM_LAST: u8 = 4;

/// What happens at a failure time.
#[derive(Debug, Clone)]
pub enum Action {
    /// Links (ports towards the spine; both directions change) go down or up.
    Links {
        /// Ports.
        ports: Vec<u32>,
        /// Down (true) or up.
        down: bool,
    },
    /// Random loss on directed ports.
    Loss {
        /// Directed ports.
        ports: Vec<u32>,
        /// Probability.
        rate: f64,
    },
    /// Rate fraction on directed ports.
    Slow {
        /// Directed ports.
        ports: Vec<u32>,
        /// Fraction of the base rate.
        fraction: f64,
    },
}

/// The simulator.
pub struct Sim {
    topo: Arc<Topology>,
    cfg: Cfg,
    ports: Vec<Port>,
    cold: Vec<PortCold>,
    arena: Arena,
    /// Per host of this partition: some NIC port had no room at its last pump.
    blocked: Vec<bool>,
    q: EventQueue,
    now: u64,
    /// This partition's hosts, `host_base..host_base + hosts.len()` (all of them in a sequential run).
    hosts: Vec<Host>,
    host_base: u32,
    conns: Vec<Conn>,
    xfers: Vec<Transfer>,
    /// Per transfer: the receiver's region key, registered before the run (a sender in one partition never
    /// touches a receiver in another).
    rkeys: Vec<Option<u32>>,
    triggers: Vec<Trigger>,
    /// Activations of each trigger so far.
    fired: Vec<u32>,
    xconn: Vec<u32>,
    times: Vec<(u64, u64)>,
    /// Unfinished transfers whose sender is in this partition.
    remaining: usize,
    actions: Vec<(u64, Action)>,
    /// Per action: it takes some link down (worked out before the run, so every partition agrees).
    takes_down: Vec<bool>,
    c: Counters,
    goodput: Vec<Vec<u64>>,
    queues: Vec<[u64; 6]>,
    last_down_at: Option<u64>,
    txbuf: Vec<u8>,
    rxbuf: Vec<u8>,
    cqe: Vec<mrc::Completion>,
    /// The pcapng capture, if asked for (capture.rs): tested once per packet and hop.
    capture: Option<Box<SimCapture>>,
    /// Payload bytes placed so far: how far the run is.
    placed: u64,
    /// Packets leaving for other partitions (par.rs), one list per partition.
    outbox: Vec<Vec<par::Msg>>,
    /// This partition's number (0 in a sequential run).
    me: u16,
    win: window::Window,
    /// A run by phases' second queue (phases.rs).
    ph: phases::Phases,
}

/// Settings every partition shares.
#[derive(Debug, Clone)]
struct Cfg {
    gbn: bool,
    overhead: u32,
    ecn_dequeue: bool,
    trim_tail: bool,
    trimmed_bytes: u32,
    scale_slowed_buffer: bool,
    kmin_frac: f64,
    kmax_frac: f64,
    ready_bytes: u64,
    planes: u32,
    plane_bits: u8,
    bin_ps: u64,
    settle_ps: u64,
    evs_per_qp: usize,
    total_bytes: u64,
    /// Seeds the per-port draws of ECN marking and grey loss.
    seed: u64,
    /// Threads asked for (par.rs caps them).
    threads: usize,
    time_order: bool,
}

/// Where a run stands, now and then during [`Sim::run`].
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Progress {
    /// Simulated time, ps.
    pub now_ps: u64,
    /// Events processed.
    pub events: u64,
    /// Fraction of the workload's payload bytes placed (0 to 1; retransmitted bytes count once).
    pub done: f64,
}

const EV_TXDONE: u64 = 0;
const EV_ARRIVE: u64 = 1;
const EV_TIMER: u64 = 2;
const EV_ACTION: u64 = 3;
const EV_START: u64 = 4;

fn ev(kind: u64, id: u32) -> u64 {
    (kind << 61) | u64::from(id)
}

/// How many events ahead [`Sim::prefetch_ahead`] starts fetching an event's port and packet, and what they lead
/// to: far enough for a miss to complete (about a microsecond of events), near enough that the queue holds it.
const AHEAD: usize = 16;
const AHEAD_NEAR: usize = 4;

/// Bits of a packet index an event carries as a prefetch hint.
const HINT_MASK: u64 = (1 << 29) - 1;
/// What orders events at equal time: kind, then component (port, host, action, transfer), never the hint (a
/// packet slot, which differs between partitionings). Two events with equal keys at equal time are the same
/// event (one pending end of serialization per port, strictly increasing arrivals per wire, a host's timer),
/// so the order is total where it matters and the same for every thread count.
const KEY_MASK: u64 = !(HINT_MASK << 32);

/// An event about port `pi` and packet `pkt`: the port is the event's subject, the packet only a hint to
/// fetch early (the event pops the packet from the port's lists as before, so a stale or truncated hint costs
/// a wasted fetch, never a wrong result).
fn ev_pkt(kind: u64, pi: u32, pkt: u32) -> u64 {
    (kind << 61) | ((u64::from(pkt) & HINT_MASK) << 32) | u64::from(pi)
}

/// The packet slot an event made by [`ev_pkt`] carries as its hint.
fn hint(e: u64) -> usize {
    ((e >> 32) & HINT_MASK) as usize
}

/// Settings of one run besides topology and workload.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Transport.
    pub transport: TransportCfg,
    /// ECN on switch ports.
    pub ecn: bool,
    /// Trimming.
    pub trimming: bool,
    /// ECN thresholds as fractions of the buffer.
    pub kmin: f64,
    /// Upper threshold.
    pub kmax: f64,
    /// Mark ECN when a packet leaves the data queue (else when it joins it).
    pub ecn_dequeue: bool,
    /// ECN on the last hop (T0 → host) too.
    pub ecn_last_hop: bool,
    /// A full trimming queue trims its tail packet instead of the arrival with probability 1/2.
    pub trim_tail: bool,
    /// Wire bytes of a trimmed packet.
    pub trimmed_bytes: u32,
    /// Bytes of each port's high-priority queue (default: its data buffer).
    pub header_buffer: Option<u64>,
    /// A slowed link's buffer scales with its rate.
    pub scale_slowed_buffer: bool,
    /// Seed.
    pub seed: u64,
    /// Timeline bin, ps.
    pub bin_ps: u64,
    /// Settle time after failures, ps.
    pub settle_ps: u64,
    /// Threads to run on (par.rs caps them by the fabric's size; 0 or 1: one). The outcome is the same for
    /// every count.
    pub threads: usize,
    /// Run each window in time order, not by T0 position (window.rs). The outcome is the same.
    pub time_order: bool,
}

impl Sim {
    /// Builds hosts, QPs and queues; `actions` are failure actions at their times.
    pub fn new(
        topo: Topology,
        workload: Workload,
        actions: Vec<(u64, Action)>,
        rs: &RunSettings,
    ) -> Result<Self, crate::scenario::ScenarioError> {
        let Workload {
            transfers: xfers,
            triggers,
        } = workload;
        let tr = &rs.transport;
        let planes = topo.shape.planes;
        let frame =
            u64::from(tr.mtu + tr.frame_overhead) + mrc::wire::MAX_DATA_HEADER_LEN as u64 + 4;
        let (ports, cold) = build_ports(&topo, rs);
        let (qcfg, paths, evs_per_qp) = qp_config(&topo, tr)?;
        let plane_bits = qcfg.ev.plane_bits;
        let Built {
            mut hosts,
            conns,
            xconn,
        } = build_hosts(&topo, tr, &xfers, &qcfg, paths, rs.seed)?;
        let fired = vec![0; triggers.len()];
        let n = xfers.len();
        let total_bytes: u64 = xfers.iter().map(|t| t.bytes).sum();
        let mut rkeys = Vec::with_capacity(n);
        for (x, t) in xfers.iter().enumerate() {
            let hd = &mut hosts[t.dst as usize];
            let addr = (x as u64 + 1) << 32;
            let access = Access::LOCAL_WRITE | Access::REMOTE_WRITE;
            rkeys.push(
                hd.ep
                    .reg_mr(hd.pd, addr, t.bytes, access)
                    .ok()
                    .map(|k| k.rkey),
            );
        }
        let takes_down = takes_down(&topo, &actions);
        let sim = Self {
            ports,
            cold,
            arena: Arena::default(),
            blocked: vec![false; hosts.len()],
            q: EventQueue::new(KEY_MASK),
            ph: phases::Phases::default(),
            now: 0,
            hosts,
            host_base: 0,
            conns,
            xfers,
            rkeys,
            triggers,
            fired,
            xconn,
            times: vec![(u64::MAX, u64::MAX); n],
            remaining: n,
            actions,
            takes_down,
            c: Counters::default(),
            cfg: Cfg {
                gbn: tr.recovery == Recovery::GoBackN,
                overhead: tr.frame_overhead,
                ecn_dequeue: rs.ecn_dequeue,
                trim_tail: rs.trim_tail,
                trimmed_bytes: rs.trimmed_bytes,
                scale_slowed_buffer: rs.scale_slowed_buffer,
                kmin_frac: rs.kmin,
                kmax_frac: rs.kmax,
                ready_bytes: frame,
                planes,
                plane_bits,
                bin_ps: rs.bin_ps.max(1),
                settle_ps: rs.settle_ps,
                evs_per_qp,
                total_bytes,
                seed: rs.seed,
                threads: rs.threads.max(1),
                time_order: rs.time_order,
            },
            goodput: Vec::new(),
            queues: Vec::new(),
            last_down_at: None,
            txbuf: vec![0; tr.mtu as usize + 256],
            rxbuf: vec![0; tr.mtu as usize + 256],
            cqe: vec![
                mrc::Completion {
                    wr_id: 0,
                    status: mrc::WcStatus::Success,
                    opcode: mrc::WcOpcode::RdmaWrite,
                    byte_len: 0,
                    imm: None,
                    qpn: 0
                };
                64
            ],
            placed: 0,
            capture: None,
            outbox: Vec::new(),
            me: 0,
            win: window::Window::default(),
            topo: Arc::new(topo),
        };
        Ok(sim)
    }

    /// Queues the events known before the run: every failure action (each partition applies its own part)
    /// and the start of every untriggered transfer whose sender lives here, each the root of its
    /// descendants' causes (queue/mod.rs), in one order over all partitions.
    fn seed_events(&mut self) {
        let n = self.actions.len();
        for i in 0..n {
            let t = self.actions[i].0;
            self.q.push_root(t, ev(EV_ACTION, i as u32), i as u32);
        }
        for i in 0..self.xfers.len() {
            let x = &self.xfers[i];
            if !x.triggered && self.is_local_host(x.src) {
                let t = x.start_ps;
                self.q.push_root(t, ev(EV_START, i as u32), (n + i) as u32);
            }
        }
    }

    fn is_local_host(&self, h: u32) -> bool {
        h.wrapping_sub(self.host_base) < self.hosts.len() as u32
    }

    /// The topology.
    pub fn topo(&self) -> &Topology {
        &self.topo
    }

    /// Captures what `c` names during the run; the file is complete when the run ends.
    pub fn set_capture(&mut self, c: SimCapture) {
        self.capture = Some(Box::new(c));
    }

    /// The packet in slot `i` as the capture sees it, its datagram rebuilt into `rxbuf`.
    fn seen(&mut self, i: u32) -> (Pkt, usize) {
        let p = self.arena.pkts[i as usize];
        (p, self.rebuild(i))
    }

    #[cold]
    fn capture_port(&mut self, pi: u32, i: u32) {
        let (p, n) = self.seen(i);
        let s = seen_of(&p, self.cfg.plane_bits, &self.rxbuf[..n]);
        if let Some(c) = &mut self.capture {
            c.at_port(self.now, pi, &s);
        }
    }

    #[inline]
    fn push(&mut self, t: u64, e: u64) {
        let cause = self.q.cause();
        let q = if self.ph.crosses(e) {
            &mut self.ph.other
        } else {
            &mut self.q
        };
        q.push_caused(t, e, cause);
    }

    /// Runs until every transfer finished or `limit_ps`; `progress` is called now and then with where the run
    /// stands and may stop the run there by returning false. The run goes in windows of one lookahead (the
    /// shortest switch-to-switch link latency), on `RunSettings::threads` threads (par.rs), or on one thread in
    /// phases of two (phases.rs); it stops at the first point of a grid of two lookaheads after the last
    /// transfer finished, whatever the thread count.
    pub fn run(self, limit_ps: u64, mut progress: impl FnMut(&Progress) -> bool) -> Outcome {
        par::run(self, limit_ps, &mut progress)
    }

    /// Processes this partition's events before `end`; returns how many, a failure action counted by
    /// partition 0 alone (every partition applies its own part of it). By T0 position when the run allows it
    /// (window.rs), else in time order.
    fn run_window(&mut self, end: u64) -> u64 {
        if self.win.is_on() {
            return self.run_window_by_position(end);
        }
        self.run_in_time_order(end)
    }

    /// Runs the queue's events before `end` in time order.
    fn run_in_time_order(&mut self, end: u64) -> u64 {
        let mut n = 0;
        while let Some((t, e)) = self.q.pop_before(end) {
            self.prefetch_ahead(self.q.peek_ahead(AHEAD), self.q.peek_ahead(AHEAD_NEAR));
            n += self.dispatch(t, e);
        }
        n
    }

    /// Runs event `e` at `t`; 1, or 0 for a failure action outside partition 0.
    #[inline]
    fn dispatch(&mut self, t: u64, e: u64) -> u64 {
        self.now = t;
        let id = e as u32;
        let kind = e >> 61;
        if kind <= EV_ARRIVE {
            prefetch(&self.arena.pkts, hint(e));
        }
        match kind {
            EV_TXDONE => self.tx_done(id),
            EV_ARRIVE => self.arrive(id),
            EV_TIMER => self.timer(id),
            EV_ACTION => {
                self.action(id as usize);
                return u64::from(self.me == 0);
            }
            _ => self.start(id),
        }
        1
    }

    /// Starts fetching what the events due soon will read, so that their misses overlap with this event's work
    /// instead of following it (+15% events per CPU second at 8,192 hosts, identical outputs): the port and the
    /// packet of the arrival or end of serialization [`AHEAD`] events on, and, [`AHEAD_NEAR`] on (their
    /// port and packet fetched by now), the port a switch arrival is forwarded to, the header of a packet a
    /// host receives, and the packet a port's end of serialization starts next.
    #[inline]
    fn prefetch_ahead(&self, far: Option<u64>, near: Option<u64>) {
        if let Some(f) = far
            && f >> 61 <= EV_ARRIVE
        {
            prefetch(&self.ports, f as u32 as usize);
            prefetch(&self.arena.pkts, hint(f));
        }
        // Only these two kinds name a port: a timer's or a start's id is not one, and reading it would be a
        // wasted load.
        let Some(f) = near.filter(|f| f >> 61 <= EV_ARRIVE) else {
            return;
        };
        let Some(port) = self.ports.get(f as u32 as usize) else {
            return;
        };
        match f >> 61 {
            EV_ARRIVE if port.to >= self.topo.hosts => {
                if let Some(p) = self.arena.pkts.get(hint(f)) {
                    prefetch(
                        &self.ports,
                        self.topo.forward_to(port.to, p.dloc, p.path) as usize,
                    );
                }
            }
            EV_TXDONE => {
                let next = if port.high.head != NONE {
                    port.high.head
                } else {
                    port.low.head
                };
                prefetch(&self.arena.pkts, next as usize);
            }
            // A delivery rebuilds the datagram from the header the packet stores in its second line, and the
            // engine's lookups wait on those bytes.
            EV_ARRIVE => prefetch_line(&self.arena.pkts, hint(f), 1),
            _ => {}
        }
    }

    /// Packets and wire bytes still in this partition's arena (queued, serializing or on a wire).
    fn inflight(&self) -> (u64, u64) {
        let mut is_free = vec![false; self.arena.pkts.len()];
        for &f in &self.arena.free {
            is_free[f as usize] = true;
        }
        let bytes = self
            .arena
            .pkts
            .iter()
            .zip(&is_free)
            .filter(|(_, f)| !**f)
            .map(|(p, _)| u64::from(p.wire))
            .sum();
        (
            (self.arena.pkts.len() - self.arena.free.len()) as u64,
            bytes,
        )
    }

    /// The outcome of a run whose partitions were merged into this one (par.rs); `inflight` is what their
    /// arenas held at the end.
    fn finish(mut self, limit_ps: u64, inflight: (u64, u64)) -> Outcome {
        (self.c.inflight_pkts, self.c.inflight_bytes) = inflight;
        let finished = self.remaining == 0;
        if std::env::var_os("MRC_SIM_DEBUG").is_some() {
            for (x, t) in self.times.iter().enumerate() {
                if t.1 == u64::MAX {
                    let c = &self.conns[self.xconn[x] as usize];
                    let s = &self.hosts[c.src as usize].ep;
                    eprintln!(
                        "unfinished {x}: {}->{} start {} state {:?} stats {:?} transport {:?} timeout {:?} timer_at {}",
                        c.src,
                        c.dst,
                        t.0,
                        s.qp_state(c.sq),
                        s.qp_stats(c.sq),
                        s.qp_transport(c.sq),
                        s.poll_timeout(),
                        self.hosts[c.src as usize].timer_at
                    );
                    for e in s.ev_infos(c.sq) {
                        eprintln!("   ev {:?}", e);
                    }
                    break;
                }
            }
        }
        let end_ps = if finished {
            self.times.iter().map(|t| t.1).max().unwrap_or(0)
        } else {
            limit_ps
        };
        let capture = self
            .capture
            .take()
            .map(|c| c.finish(end_ps).map_err(|e| e.to_string()));
        let mut per_conn: Vec<FlowCounters> = self
            .conns
            .iter()
            .map(|c| {
                let (s, r) = (
                    &self.hosts[c.src as usize].ep,
                    &self.hosts[c.dst as usize].ep,
                );
                FlowCounters::read(s, c.sq, r, c.rq, self.cfg.planes)
            })
            .collect();
        for &c in &self.xconn {
            per_conn[c as usize].transfers += 1;
        }
        let flows = self
            .xconn
            .iter()
            .map(|&c| per_conn[c as usize].clone())
            .collect();
        let mut plane_tx = vec![[0u64; 5]; self.cfg.planes as usize];
        let mut tx_payload = 0;
        let mut placed = 0;
        for c in &self.conns {
            let s = &self.hosts[c.src as usize].ep;
            if let Some(st) = s.qp_stats(c.sq) {
                tx_payload += st.tx_data_bytes;
                self.c.losses_rack += st.losses_rack;
                self.c.losses_rto += st.losses_rto;
                self.c.losses_plane += st.losses_plane;
                self.c.losses_path += st.losses_path;
            }
            if let Some(st) = self.hosts[c.dst as usize].ep.qp_stats(c.rq) {
                placed += st.rx_data_bytes;
                self.c.rx_duplicates += st.rx_duplicates;
            }
            for (p, row) in plane_tx.iter_mut().enumerate() {
                if let Some(ps) = s.plane_stats(c.sq, p) {
                    row[0] += ps.tx_packets;
                    row[1] += ps.retransmits;
                    row[2] += ps.trims;
                    row[3] += ps.losses;
                    row[4] += u64::from(ps.plane_retirements);
                }
            }
        }
        for h in &self.hosts {
            self.c.placement_errors += h.mem.errors;
        }
        Outcome {
            c: self.c,
            times: self.times,
            end_ps,
            finished,
            goodput: self.goodput,
            queues: self.queues,
            plane_tx,
            tx_payload_bytes: tx_payload,
            placed_bytes: placed,
            evs_per_qp: self.cfg.evs_per_qp,
            capture,
            flows,
        }
    }
}

#[derive(Clone, Copy)]
enum Drop {
    Failure,
    /// On a wire when its link went down (at that instant, so never a lasting loss).
    Flushed,
    Loss,
    Overflow,
}

/// A stored packet as the capture sees it.
fn seen_of<'a>(p: &Pkt, plane_bits: u8, bytes: &'a [u8]) -> Seen<'a> {
    Seen {
        src: p.src,
        dst: p.dst,
        plane: p.plane,
        ev: (p.path << plane_bits) | u32::from(p.plane),
        data: p.class == CLASS_DATA,
        ce: p.flags & F_CE != 0,
        trimmed: if p.flags & F_TRIM_LAST != 0 {
            Some(true)
        } else if p.flags & F_TRIM != 0 {
            Some(false)
        } else {
            None
        },
        bytes,
    }
}

/// Draw number `n` of port `pi` in a run with seed `seed`: a counter-based generator (SplitMix64's mixer
/// over seed, port and counter), so a port's draws are the same whichever thread runs it and whatever other
/// ports drew before.
fn draw(seed: u64, pi: u32, n: u64) -> u64 {
    let mut z = seed
        ^ (u64::from(pi) << 32)
            .wrapping_add(n)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15);
    for _ in 0..2 {
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^= z >> 31;
    }
    z
}

/// Per failure action: whether it takes some link down, replaying the links' down counts in the order the
/// actions run (time, then index).
fn takes_down(topo: &Topology, actions: &[(u64, Action)]) -> Vec<bool> {
    let mut refs = std::collections::BTreeMap::<u32, u32>::new();
    let mut order: Vec<usize> = (0..actions.len()).collect();
    order.sort_by_key(|&i| (actions[i].0, i));
    let mut out = vec![false; actions.len()];
    for i in order {
        let Action::Links { ports, down } = &actions[i].1 else {
            continue;
        };
        for &p in ports {
            let p = p.min(topo.ports[p as usize].rev);
            let r = refs.entry(p).or_insert(0);
            if *down {
                out[i] |= *r == 0;
                *r += 1;
            } else {
                *r = r.saturating_sub(1);
            }
        }
    }
    out
}

/// The ports of `topo` as the simulator keeps them: what a hop reads, and what only failures read.
fn build_ports(topo: &Topology, rs: &RunSettings) -> (Vec<Port>, Vec<PortCold>) {
    let buffer_of = |p: &crate::topo::PortSpec| {
        if p.kind != PortKind::HostUp {
            p.buffer
        } else {
            u64::MAX / 4
        }
    };
    let cold: Vec<PortCold> = topo
        .ports
        .iter()
        .map(|p| PortCold {
            base_rate_bps: p.rate_bps,
            base_buffer: buffer_of(p),
            loss: 0.0,
            last_down: None,
        })
        .collect();
    let ports: Vec<Port> = topo
        .ports
        .iter()
        .map(|p| {
            let switch = p.kind != PortKind::HostUp;
            let buffer = buffer_of(p);
            Port {
                to: p.to,
                host: if switch { NONE } else { p.from },
                ps_per_byte_q16: q16(p.rate_bps),
                latency_ps: p.latency_ps,
                buffer,
                hbuffer: if switch {
                    rs.header_buffer.unwrap_or(2 * p.buffer)
                } else {
                    u64::MAX / 4
                },
                kmin: (p.buffer as f64 * rs.kmin) as u64,
                kmax: (p.buffer as f64 * rs.kmax) as u64,
                low_bytes: 0,
                high_bytes: 0,
                low: List::EMPTY,
                high: List::EMPTY,
                wire: List::EMPTY,
                tx: NONE,
                down_refs: 0,
                doomed: false,
                ecn: rs.ecn && switch && (rs.ecn_last_hop || p.kind != PortKind::T0Down),
                trim: rs.trimming && switch,
                kind: p.kind,
                dest: par::LOCAL,
                draws: 0,
                lossy: false,
                last_up: 0,
            }
        })
        .collect();
    (ports, cold)
}

/// Every QP's configuration (but for its first EV index), the paths per plane and the EVs per QP.
fn qp_config(
    topo: &Topology,
    tr: &TransportCfg,
) -> Result<(QpConfig, u32, usize), crate::scenario::ScenarioError> {
    let planes = topo.shape.planes;
    let base_rtt_ns = tr
        .base_rtt_ns
        .unwrap_or(topo.base_rtt_ps.div_ceil(1000))
        .max(1);
    let paths = topo.shape.paths_per_plane();
    let per_plane = crate::plan::evs_per_plane(tr, paths, planes).max(1);
    let mut evc = EvConfig::with_planes(planes as u8, per_plane);
    evc.backup_per_plane = tr.backup_evs_per_plane;
    // A plane retired for silence is probed from one base RTT on (doubling up to the engine's 10 ms): with
    // the engine's 100 µs a job of a few hundred µs would not see a plane come back within its lifetime.
    evc.plane_probe_min = Some(mrc::Duration::from_nanos(base_rtt_ns));
    evc.min_active_per_plane = (per_plane / 4).max(1);
    // Reports are per plane and per flow: per-EV counters would cost 64 bytes × EVs × QPs (64 MiB at 8K).
    evc.counters = false;
    let rate = topo.host_rate_bps * u64::from(planes);
    let base_rtt = mrc::Duration::from_nanos(base_rtt_ns);
    let bdp = (u128::from(base_rtt_ns) * u128::from(rate) / 8_000_000_000) as u64;
    let cc = match tr.cc {
        CcKind::Nscc => CcConfig::Nscc({
            let mut c = NsccConfig::for_path(u64::from(tr.mtu), base_rtt, rate);
            let f = tr
                .max_cwnd_bdp
                .unwrap_or(crate::scenario::DEFAULT_MAX_CWND_BDP);
            c.max_cwnd = Some(((c.bdp() as f64 * f) as u64).max(u64::from(tr.mtu)));
            c
        }),
        CcKind::Fixed => CcConfig::Fixed {
            window: bdp.max(u64::from(tr.mtu)),
        },
    };
    let mpr = (bdp / u64::from(tr.mtu) * 4 / 128).clamp(8, 255) as u8;
    let qcfg = QpConfig {
        mtu: tr.mtu,
        base_rtt,
        ev: evc,
        cc,
        mpr,
        icrc: false,
        reorder_min: tr.reorder_ns.map(mrc::Duration::from_nanos),
        ev_burst: tr.ev_burst,
        ..QpConfig::default()
    };
    qcfg.validate().map_err(|e| {
        crate::scenario::ScenarioError::new(format!("transport ({})", e.field), e.problem)
    })?;
    let evs_per_qp = usize::from(per_plane + tr.backup_evs_per_plane) * planes as usize;
    Ok((qcfg, paths, evs_per_qp))
}
