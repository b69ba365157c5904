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
use mrc::testing::{QpEnd, connect_pair};
use mrc::wire::TrafficClass;
use mrc::{
    Access, Caps, CqId, Endpoint, EndpointConfig, EvConfig, EvState, Event, Instant, Pd, PeerId,
    QpConfig, QpInit, RecvMeta, SendOp, SendWr, Sge, TrimMark,
};
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::capture::{Seen, SimCapture};
use crate::drill::FlowCounters;
use crate::queue::EventQueue;
use crate::scenario::{CcKind, Recovery, TransportCfg};
use crate::topo::{PortKind, Topology};
use crate::workload::{Transfer, Trigger, TriggerKind, Workload};
use mrc_host::capture::Direction;

const NONE: u32 = u32::MAX;
/// Bytes of one simulated directed port (for the memory estimate).
pub const PORT_BYTES: usize = size_of::<Port>();
/// Bytes of one packet slot (for the memory estimate).
pub const PKT_BYTES: usize = size_of::<Pkt>();
/// Header bytes a packet keeps inline: a data header, a trimmed packet, most control packets.
const HDR: usize = 64;
// Two cache lines each (see the structs).
const _: () = assert!(size_of::<Port>() == 128 && size_of::<Pkt>() == 128);
/// Salt of the placement markers.
const SALT: u64 = 0x9E37_79B9_7F4A_7C15;

#[derive(Clone, Copy, Default)]
struct List {
    head: u32,
    tail: u32,
}

impl List {
    const EMPTY: Self = Self {
        head: NONE,
        tail: NONE,
    };
}

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
}

/// What a port keeps that packets do not read: its configured rate and buffer (a slowed link's are derived
/// from them) and its grey-loss probability.
#[derive(Clone, Copy)]
struct PortCold {
    base_rate_bps: u64,
    /// Buffer at the full rate (a slowed link may scale it).
    base_buffer: u64,
    loss: f64,
}

fn q16(rate_bps: u64) -> u64 {
    ((8_000_000_000_000u128 << 16) / u128::from(rate_bps.max(1))) as u64
}

/// Hot fields first: forwarding touches only the first cache line (the struct is two aligned lines; the
/// links of the FIFO lists live apart in `Sim::next`, so appending to a list does not touch its tail packet).
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
    /// Datagram length.
    dlen: u32,
    /// Payload offset and length inside the datagram (0 when none or trimmed).
    poff: u32,
    plen: u32,
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

/// Host memory that stores nothing: reads record where a payload came from; writes check that the bytes
/// landed at the address they were read from (every transfer uses the same address at both ends), using
/// markers the simulator regenerates at delivery.
#[derive(Debug, Default)]
struct PatMem {
    read_addr: u64,
    read_ptr: usize,
    read_len: usize,
    reads: u32,
    written: u64,
    errors: u64,
    check: bool,
    /// Final bytes of WRITEs still to come: address → the byte that completes its packet's end marker.
    final_bytes: std::collections::BTreeMap<u64, u8>,
}

impl Memory for PatMem {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        if self.reads == 0 {
            self.read_addr = addr;
            self.read_ptr = dst.as_ptr() as usize;
        }
        self.read_len += dst.len();
        self.reads += 1;
    }
    fn write(&mut self, addr: u64, src: &[u8]) {
        self.written += src.len() as u64;
        if !self.check {
            return;
        }
        let n = src.len();
        if n == 1 {
            // A WRITE's final byte, placed apart and last (spec QP-PLACE-2): it must finish the marker its
            // packet's other bytes began.
            if let Some(want) = self.final_bytes.remove(&addr)
                && want != src[0]
            {
                self.errors += 1;
            }
            return;
        }
        if n < 8 {
            return;
        }
        let head = u64::from_le_bytes(src[..8].try_into().unwrap_or([0; 8]));
        let tail = u64::from_le_bytes(src[n - 8..].try_into().unwrap_or([0; 8]));
        if head != addr ^ SALT {
            self.errors += 1;
        } else if tail != (addr + n as u64 - 8) ^ SALT {
            // The last packet of a WRITE without its final byte: its end marker lacks that byte.
            let marker = ((addr + n as u64 - 7) ^ SALT).to_le_bytes();
            if src[n - 7..] == marker[..7] {
                self.final_bytes.insert(addr + n as u64, marker[7]);
            } else {
                self.errors += 1;
            }
        }
    }
}

struct Host {
    ep: Endpoint,
    mem: PatMem,
    cq: CqId,
    pd: Pd,
    /// Earliest pending timer event.
    timer_at: u64,
    /// (local QPN, connection) sorted by QPN.
    qps: Vec<(u32, u32)>,
}

/// A QP pair.
struct Conn {
    src: u32,
    dst: u32,
    sq: u32,
    rq: u32,
    /// Go-back-N receiver: next PSN accepted.
    expect: u32,
    /// Transfers waiting for send-queue room.
    backlog: Vec<u32>,
    posted: u32,
}

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

/// Counters of one run.
#[derive(Debug, Clone, Default, serde::Serialize, PartialEq)]
pub struct Counters {
    /// Events processed.
    pub events: u64,
    /// Packets and wire bytes hosts put on the fabric.
    pub injected_pkts: u64,
    /// Wire bytes injected.
    pub injected_bytes: u64,
    /// Packets delivered to hosts.
    pub delivered_pkts: u64,
    /// Wire bytes delivered.
    pub delivered_bytes: u64,
    /// Dropped because a link or switch was down.
    pub dropped_failure_pkts: u64,
    /// Dropped by grey loss.
    pub dropped_loss_pkts: u64,
    /// Dropped by a full queue (no trimming, or a full header queue).
    pub dropped_overflow_pkts: u64,
    /// Wire bytes of all drops.
    pub dropped_bytes: u64,
    /// Packets trimmed.
    pub trimmed_pkts: u64,
    /// Wire bytes cut off by trimming.
    pub trimmed_bytes: u64,
    /// Packets CE-marked.
    pub ecn_marked: u64,
    /// Data packets dropped at failed components later than the settle time after the last failure.
    pub lasting_data_drops: u64,
    /// Data packets a go-back-N receiver discarded (out of order).
    pub gbn_discards: u64,
    /// Packets in flight at the end, and their wire bytes.
    pub inflight_pkts: u64,
    /// Wire bytes in flight at the end.
    pub inflight_bytes: u64,
    /// Packets that arrived over a link that had failed after they entered it (must be 0).
    pub failed_link_crossings: u64,
    /// Payload writes whose bytes did not match their address (must be 0).
    pub placement_errors: u64,
    /// EVs retired (to ASSUMED_BAD).
    pub ev_retirements: u64,
    /// EVs restored by probes.
    pub ev_recoveries: u64,
    /// QPs that went to the error state.
    pub qp_errors: u64,
    /// Transfers completed with an error status.
    pub failed_transfers: u64,
    /// Data packets the senders declared lost by time (a later packet was acknowledged a reorder window on).
    pub losses_rack: u64,
    /// Data packets declared lost by the per-packet RTO.
    pub losses_rto: u64,
    /// Data packets presumed lost with an EV retired for a loss (they were in flight on the same path).
    pub losses_path: u64,
    /// Data packets presumed lost with a retired plane or a port that went down.
    pub losses_plane: u64,
    /// Data packets that reached a receiver which already had them: each is a retransmission of a packet that
    /// was never lost (or the late original of one), i.e. a spurious retransmission.
    pub rx_duplicates: u64,
}

/// What a run produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Counters.
    pub c: Counters,
    /// Per transfer: (start, end) in ps; end is `u64::MAX` if it did not finish.
    pub times: Vec<(u64, u64)>,
    /// Time the last transfer finished (or the limit), ps.
    pub end_ps: u64,
    /// All transfers finished.
    pub finished: bool,
    /// Per bin and plane: payload bytes placed.
    pub goodput: Vec<Vec<u64>>,
    /// Per bin and port kind: largest queue (bytes) seen.
    pub queues: Vec<[u64; 6]>,
    /// Per plane (summed over QPs): data packets sent, retransmits, trims, losses, plane retirements.
    pub plane_tx: Vec<[u64; 5]>,
    /// Payload bytes the senders transmitted (first sends and retransmissions).
    pub tx_payload_bytes: u64,
    /// Payload bytes the receivers placed (duplicates excluded).
    pub placed_bytes: u64,
    /// Peak memory of one QP estimate is left to the caller; EV count per QP.
    pub evs_per_qp: usize,
    /// The capture's packets written and left out by its size cap, if one was on.
    pub capture: Option<Result<(u64, u64), String>>,
    /// Per transfer: its QP pair's counters (drill.rs).
    pub flows: Vec<FlowCounters>,
}

/// The simulator.
pub struct Sim {
    topo: Topology,
    ports: Vec<Port>,
    cold: Vec<PortCold>,
    pkts: Vec<Pkt>,
    /// Link to the next packet of the FIFO list (queue or wire) each packet is on.
    next: Vec<u32>,
    /// Per host: some NIC port had no room at its last pump.
    blocked: Vec<bool>,
    free: Vec<u32>,
    big: Vec<Vec<u8>>,
    free_big: Vec<u32>,
    q: EventQueue,
    now: u64,
    hosts: Vec<Host>,
    conns: Vec<Conn>,
    xfers: Vec<Transfer>,
    triggers: Vec<Trigger>,
    /// Activations of each trigger so far.
    fired: Vec<u32>,
    xconn: Vec<u32>,
    times: Vec<(u64, u64)>,
    remaining: usize,
    actions: Vec<(u64, Action)>,
    rng: Xoshiro256PlusPlus,
    c: Counters,
    gbn: bool,
    overhead: u32,
    ecn_dequeue: bool,
    trimmed_bytes: u32,
    scale_slowed_buffer: bool,
    kmin_frac: f64,
    kmax_frac: f64,
    ready_bytes: u64,
    planes: u32,
    plane_bits: u8,
    bin_ps: u64,
    goodput: Vec<Vec<u64>>,
    queues: Vec<[u64; 6]>,
    last_down_at: Option<u64>,
    settle_ps: u64,
    txbuf: Vec<u8>,
    rxbuf: Vec<u8>,
    cqe: Vec<mrc::Completion>,
    evs_per_qp: usize,
    /// The pcapng capture, if asked for (capture.rs): tested once per packet and hop.
    capture: Option<Box<SimCapture>>,
    /// Payload bytes placed so far, and all the workload's: how far the run is.
    placed: u64,
    total_bytes: u64,
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

/// Bits of a packet index an event carries as a prefetch hint.
const HINT_MASK: u64 = (1 << 29) - 1;

/// An event about port `pi` and packet `pkt`: the port is the event's subject, the packet only a hint to
/// fetch early (the event pops the packet from the port's lists as before, so a stale or truncated hint costs
/// a wasted fetch, never a wrong result).
fn ev_pkt(kind: u64, pi: u32, pkt: u32) -> u64 {
    (kind << 61) | ((u64::from(pkt) & HINT_MASK) << 32) | u64::from(pi)
}

/// Starts fetching packet `i`'s first line: an arrival or an end of serialization reads its port and then its
/// packet, two misses in a row at 8K hosts; with the hint they overlap.
#[inline]
fn prefetch_pkt(pkts: &[Pkt], i: usize) {
    #[cfg(target_arch = "x86_64")]
    if let Some(p) = pkts.get(i) {
        // SAFETY: a prefetch is only a hint to the cache: it reads nothing into the program and cannot fault;
        // `_mm_prefetch` needs SSE, which every x86_64 CPU has. The pointer comes from a live reference.
        unsafe {
            core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(
                (p as *const Pkt).cast(),
            );
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (pkts, i);
}

/// Settings of one run besides topology and workload.
#[derive(Debug, Clone)]
pub struct RunSettings {
    /// Transport.
    pub transport: TransportCfg,
    /// ECN on switch ports (never the last hop).
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
                    lossy: false,
                    last_up: 0,
                }
            })
            .collect();
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
        let plane_bits = evc.plane_bits;
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
        let mut hosts = Vec::with_capacity(topo.hosts as usize);
        for _ in 0..topo.hosts {
            let mut ep = Endpoint::new(EndpointConfig {
                ports: planes as u8,
                caps: Caps::MRC_1_0,
                ..EndpointConfig::default()
            })
            .map_err(|e| crate::scenario::ScenarioError::new(e.field, e.problem))?;
            let pd = ep.alloc_pd();
            let cq = ep.create_cq(1024);
            hosts.push(Host {
                ep,
                mem: PatMem {
                    check: tr.check_placement,
                    ..PatMem::default()
                },
                cq,
                pd,
                timer_at: u64::MAX,
                qps: Vec::new(),
            });
        }
        // One QP pair per ordered (src, dst) pair that has transfers.
        let mut pairs: Vec<(u32, u32, u32)> = xfers
            .iter()
            .enumerate()
            .map(|(i, t)| (t.src, t.dst, i as u32))
            .collect();
        pairs.sort_unstable();
        let mut conns: Vec<Conn> = Vec::new();
        let mut xconn = vec![0u32; xfers.len()];
        let mut last: Option<(u32, u32)> = None;
        let mut ev_rng = Xoshiro256PlusPlus::seed_from_u64(rs.seed ^ 0x4556_5321);
        for &(s, d, i) in &pairs {
            if last != Some((s, d)) {
                last = Some((s, d));
                // Each QP starts its EVs at its own random path index, so QPs spread over all T1s/T2s.
                let mut cfg = qcfg.clone();
                cfg.ev.first_index = (ev_rng.next_u64() % u64::from(paths.max(1))) as u32;
                let (sq, rq) = connect(&mut hosts, s, d, &cfg).map_err(|e| {
                    crate::scenario::ScenarioError::new(
                        "transport",
                        format!("QP setup failed: {e}"),
                    )
                })?;
                let c = conns.len() as u32;
                hosts[s as usize].qps.push((sq, c));
                hosts[d as usize].qps.push((rq, c));
                conns.push(Conn {
                    src: s,
                    dst: d,
                    sq,
                    rq,
                    expect: PSN0,
                    backlog: Vec::new(),
                    posted: 0,
                });
            }
            xconn[i as usize] = conns.len() as u32 - 1;
        }
        for h in &mut hosts {
            h.qps.sort_unstable();
        }
        let fired = vec![0; triggers.len()];
        let n = xfers.len();
        let total_bytes: u64 = xfers.iter().map(|t| t.bytes).sum();
        let mut sim = Self {
            ports,
            cold,
            pkts: Vec::new(),
            next: Vec::new(),
            blocked: vec![false; hosts.len()],
            free: Vec::new(),
            big: Vec::new(),
            free_big: Vec::new(),
            q: EventQueue::new(),
            now: 0,
            hosts,
            conns,
            xfers,
            triggers,
            fired,
            xconn,
            times: vec![(u64::MAX, u64::MAX); n],
            remaining: n,
            actions,
            rng: Xoshiro256PlusPlus::seed_from_u64(rs.seed),
            c: Counters::default(),
            gbn: tr.recovery == Recovery::GoBackN,
            overhead: tr.frame_overhead,
            ecn_dequeue: rs.ecn_dequeue,
            trimmed_bytes: rs.trimmed_bytes,
            scale_slowed_buffer: rs.scale_slowed_buffer,
            kmin_frac: rs.kmin,
            kmax_frac: rs.kmax,
            ready_bytes: frame,
            planes,
            plane_bits,
            bin_ps: rs.bin_ps.max(1),
            goodput: Vec::new(),
            queues: Vec::new(),
            last_down_at: None,
            settle_ps: rs.settle_ps,
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
            evs_per_qp,
            placed: 0,
            total_bytes,
            capture: None,
            topo,
        };
        for i in 0..sim.actions.len() {
            let t = sim.actions[i].0;
            sim.push(t, ev(EV_ACTION, i as u32));
        }
        for i in 0..n {
            if !sim.xfers[i].triggered {
                let t = sim.xfers[i].start_ps;
                sim.push(t, ev(EV_START, i as u32));
            }
        }
        Ok(sim)
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
        let p = self.pkts[i as usize];
        (p, self.rebuild(i))
    }

    #[cold]
    fn capture_port(&mut self, pi: u32, i: u32) {
        let (p, n) = self.seen(i);
        let s = seen_of(&p, self.plane_bits, &self.rxbuf[..n]);
        if let Some(c) = &mut self.capture {
            c.at_port(self.now, pi, &s);
        }
    }

    #[inline]
    fn push(&mut self, t: u64, e: u64) {
        self.q.push(t, e);
    }

    /// Runs until every transfer finished or `limit_ps`; `progress` is called now and then with where the run
    /// stands and may stop the run there by returning false.
    pub fn run(mut self, limit_ps: u64, mut progress: impl FnMut(&Progress) -> bool) -> Outcome {
        let mut n = 0u64;
        let mut end = limit_ps;
        while let Some(t) = self.q.peek_time() {
            if t > limit_ps || self.remaining == 0 {
                break;
            }
            let Some((t, e)) = self.q.pop() else { break };
            self.now = t;
            n += 1;

            let id = e as u32;
            let kind = e >> 61;
            if kind <= EV_ARRIVE {
                prefetch_pkt(&self.pkts, ((e >> 32) & HINT_MASK) as usize);
            }
            match kind {
                EV_TXDONE => self.tx_done(id),
                EV_ARRIVE => self.arrive(id),
                EV_TIMER => self.timer(id),
                EV_ACTION => self.action(id as usize),
                _ => self.start(id),
            }
            if n & 0xFFFF == 0
                && !progress(&Progress {
                    now_ps: self.now,
                    events: n,
                    done: self.placed as f64 / self.total_bytes.max(1) as f64,
                })
            {
                end = self.now;
                break;
            }
        }
        self.c.events = n;

        self.finish(end)
    }

    fn finish(mut self, limit_ps: u64) -> Outcome {
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
                FlowCounters::read(s, c.sq, r, c.rq, self.planes)
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
        // In flight: everything still in the arena.
        let live = self.pkts.len() - self.free.len();
        self.c.inflight_pkts = live as u64;
        let mut is_free = vec![false; self.pkts.len()];
        for &f in &self.free {
            is_free[f as usize] = true;
        }
        self.c.inflight_bytes = self
            .pkts
            .iter()
            .zip(&is_free)
            .filter(|(_, f)| !**f)
            .map(|(p, _)| u64::from(p.wire))
            .sum();
        let mut plane_tx = vec![[0u64; 5]; self.planes as usize];
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
            evs_per_qp: self.evs_per_qp,
            capture,
            flows,
        }
    }

    // ---- packets -------------------------------------------------------------------------------------------

    fn alloc(&mut self) -> u32 {
        if let Some(i) = self.free.pop() {
            return i;
        }
        self.next.push(NONE);
        self.pkts.push(Pkt {
            hdr: [0; HDR],
            tag: 0,
            arrive: 0,
            src: 0,
            dst: 0,
            path: 0,
            dloc: (0, 0, 0),
            dlen: 0,
            poff: 0,
            plen: 0,
            wire: 0,
            big: NONE,
            plane: 0,
            class: 0,
            flags: 0,
        });
        self.pkts.len() as u32 - 1
    }

    fn release(&mut self, i: u32) {
        let b = self.pkts[i as usize].big;
        if b != NONE {
            self.free_big.push(b);
            self.pkts[i as usize].big = NONE;
        }
        self.free.push(i);
    }

    fn drop_pkt(&mut self, i: u32, why: Drop) {
        let p = &self.pkts[i as usize];
        self.c.dropped_bytes += u64::from(p.wire);
        match why {
            Drop::Failure => {
                self.c.dropped_failure_pkts += 1;
                if p.class == CLASS_DATA
                    && p.flags & (F_TRIM | F_TRIM_LAST) == 0
                    && self
                        .last_down_at
                        .is_some_and(|t| self.now > t + self.settle_ps)
                {
                    self.c.lasting_data_drops += 1;
                }
            }
            Drop::Loss => self.c.dropped_loss_pkts += 1,
            Drop::Overflow => self.c.dropped_overflow_pkts += 1,
        }
        self.release(i);
    }

    fn list_push(&mut self, l: List, i: u32) -> List {
        self.next[i as usize] = NONE;
        if l.tail == NONE {
            List { head: i, tail: i }
        } else {
            self.next[l.tail as usize] = i;
            List {
                head: l.head,
                tail: i,
            }
        }
    }

    fn list_pop(&mut self, l: List) -> (List, u32) {
        let i = l.head;
        if i == NONE {
            return (l, NONE);
        }
        let next = self.next[i as usize];
        let l = if next == NONE {
            List::EMPTY
        } else {
            List {
                head: next,
                tail: l.tail,
            }
        };
        (l, i)
    }

    // ---- ports ---------------------------------------------------------------------------------------------

    /// Enqueues packet `i` at port `pi`: trimming, ECN and drops happen here.
    fn enqueue(&mut self, pi: u32, i: u32) {
        let port = &self.ports[pi as usize];
        if port.down_refs > 0 {
            self.drop_pkt(i, Drop::Failure);
            return;
        }
        let p = &mut self.pkts[i as usize];
        let high = p.class != CLASS_DATA || p.flags & (F_TRIM | F_TRIM_LAST) != 0;
        let mut to_high = high;
        if !high {
            let wire = u64::from(p.wire);
            if port.low_bytes + wire > port.buffer {
                if !port.trim {
                    self.drop_pkt(i, Drop::Overflow);
                    return;
                }
                // Cut to a header and send it with priority (spec WIRE-ICRC-2 keeps the first 64 bytes).
                let keep = p.dlen.min(mrc::wire::TRIM_KEEP_LEN as u32);
                let new_wire = self.trimmed_bytes.min(p.wire);
                self.c.trimmed_pkts += 1;
                self.c.trimmed_bytes += u64::from(p.wire - new_wire);
                p.wire = new_wire;
                p.dlen = keep;
                p.plen = 0;
                p.flags |= if port.kind == PortKind::T0Down {
                    F_TRIM_LAST
                } else {
                    F_TRIM
                };
                to_high = true;
            } else if port.ecn && !self.ecn_dequeue && port.low_bytes > port.kmin {
                let occ = port.low_bytes;
                self.maybe_mark(pi, i, occ);
            }
        }
        let p = &self.pkts[i as usize];
        let wire = u64::from(p.wire);
        let port = &mut self.ports[pi as usize];
        if to_high {
            if port.high_bytes + wire > port.hbuffer {
                self.drop_pkt(i, Drop::Overflow);
                return;
            }
            port.high_bytes += wire;
            let l = port.high;
            let l = self.list_push(l, i);
            self.ports[pi as usize].high = l;
        } else {
            port.low_bytes += wire;
            let l = port.low;
            let l = self.list_push(l, i);
            self.ports[pi as usize].low = l;
        }
        let port = &self.ports[pi as usize];
        let occ = port.low_bytes + port.high_bytes;
        let kind = port.kind as usize;
        let bin = (self.now / self.bin_ps) as usize;
        if self.queues.len() <= bin {
            self.queues.resize(bin + 1, [0; 6]);
        }
        let q = &mut self.queues[bin][kind];
        *q = (*q).max(occ);
        if self.ports[pi as usize].tx == NONE {
            self.start_tx(pi);
        }
    }

    /// Marks packet `i` CE with the linear RED-like probability of occupancy `occ` at port `pi`.
    fn maybe_mark(&mut self, pi: u32, i: u32, occ: u64) {
        let port = &self.ports[pi as usize];
        if occ <= port.kmin {
            return;
        }
        let mark = occ >= port.kmax || {
            let span = (port.kmax - port.kmin).max(1);
            let x = self.rng.next_u64() % span;
            x < occ - port.kmin
        };
        let p = &mut self.pkts[i as usize];
        if mark && p.flags & F_CE == 0 {
            p.flags |= F_CE;
            self.c.ecn_marked += 1;
        }
    }

    fn start_tx(&mut self, pi: u32) {
        let port = &self.ports[pi as usize];
        let (l, i, high) = if port.high.head != NONE {
            let (l, i) = self.list_pop(port.high);
            (l, i, true)
        } else {
            let (l, i) = self.list_pop(port.low);
            (l, i, false)
        };
        if i == NONE {
            return;
        }
        let wire = u64::from(self.pkts[i as usize].wire);
        let port = &mut self.ports[pi as usize];
        if high {
            port.high = l;
            port.high_bytes -= wire;
        } else {
            port.low = l;
            let occ = port.low_bytes;
            port.low_bytes -= wire;
            if self.ecn_dequeue && port.ecn && occ > port.kmin {
                self.maybe_mark(pi, i, occ);
            }
        }
        let port = &mut self.ports[pi as usize];
        port.tx = i;
        port.doomed = false;
        let t = self.now + ((wire * port.ps_per_byte_q16) >> 16);
        self.push(t, ev_pkt(EV_TXDONE, pi, i));
    }

    fn tx_done(&mut self, pi: u32) {
        let port = &mut self.ports[pi as usize];
        let i = port.tx;
        if i == NONE {
            return;
        }
        port.tx = NONE;
        if port.doomed || port.down_refs > 0 {
            port.doomed = false;
            self.drop_pkt(i, Drop::Failure);
        } else if port.lossy && uniform(&mut self.rng) < self.cold[pi as usize].loss {
            self.drop_pkt(i, Drop::Loss);
        } else {
            let port = &self.ports[pi as usize];
            let arrive = self.now + port.latency_ps;
            self.pkts[i as usize].arrive = arrive;
            if self.capture.as_ref().is_some_and(|c| c.wants_port(pi)) {
                self.capture_port(pi, i);
            }
            let port = &self.ports[pi as usize];
            let l = port.wire;
            let l = self.list_push(l, i);
            self.ports[pi as usize].wire = l;
            // One arrival event per packet, pushed now: the arrival then never reads the next packet on the
            // wire (a cache miss per packet and hop in large fabrics) to schedule it.
            self.push(arrive, ev_pkt(EV_ARRIVE, pi, i));
        }
        self.start_tx(pi);
        let port = &self.ports[pi as usize];
        if port.host != NONE {
            let host = port.host;
            if self.blocked[host as usize] && port.low_bytes + port.high_bytes < self.ready_bytes {
                self.pump(host);
            }
        }
    }

    fn arrive(&mut self, pi: u32) {
        let port = &self.ports[pi as usize];
        let i = port.wire.head;
        if i == NONE || self.pkts[i as usize].arrive > self.now {
            return; // a stale wake-up: the wire was flushed by a failure
        }
        let (l, _) = self.list_pop(port.wire);
        let port = &mut self.ports[pi as usize];
        port.wire = l;
        let port = &self.ports[pi as usize];
        let entered = self.pkts[i as usize].arrive - port.latency_ps;
        if port.down_refs > 0 || entered < port.last_up {
            // Invariant: no packet crosses a failed link after its failure time.
            self.c.failed_link_crossings += 1;
            self.drop_pkt(i, Drop::Failure);
            return;
        }
        let to = port.to;
        if to < self.topo.hosts {
            self.host_rx(to, i);
        } else {
            let p = &self.pkts[i as usize];
            let out = self.topo.forward_to(to, p.dloc, p.path);
            self.enqueue(out, i);
        }
    }

    // ---- failures ------------------------------------------------------------------------------------------

    fn set_link(&mut self, up_port: u32, down: bool) {
        let rev = self.topo.ports[up_port as usize].rev;
        let mut changed = false;
        for pi in [up_port, rev] {
            let port = &mut self.ports[pi as usize];
            let was = port.down_refs > 0;
            if down {
                port.down_refs += 1;
            } else {
                port.down_refs = port.down_refs.saturating_sub(1);
            }
            let is = port.down_refs > 0;
            if was == is {
                continue;
            }
            changed = true;
            if is {
                // Everything queued or on the wire is lost; the packet being serialized too.
                if port.tx != NONE {
                    port.doomed = true;
                }
                for which in 0..3 {
                    let port = &mut self.ports[pi as usize];
                    let l = match which {
                        0 => std::mem::replace(&mut port.low, List::EMPTY),
                        1 => std::mem::replace(&mut port.high, List::EMPTY),
                        _ => std::mem::replace(&mut port.wire, List::EMPTY),
                    };
                    let mut cur = l.head;
                    while cur != NONE {
                        let next = self.next[cur as usize];
                        self.drop_pkt(cur, Drop::Failure);
                        cur = next;
                    }
                }
                let port = &mut self.ports[pi as usize];
                port.low_bytes = 0;
                port.high_bytes = 0;
            } else {
                port.last_up = self.now;
            }
        }
        if down && changed {
            self.last_down_at = Some(self.now);
        }
        // A host link is a NIC port: the NIC sees the carrier change at once.
        let p = self.topo.ports[up_port as usize];
        if changed && p.kind == PortKind::HostUp {
            let now = Instant::from_nanos(self.now / 1000);
            let h = p.from;
            self.hosts[h as usize]
                .ep
                .set_port_state(now, p.plane, !down);
            self.pump(h);
        }
    }

    fn action(&mut self, idx: usize) {
        let a = std::mem::replace(
            &mut self.actions[idx].1,
            Action::Loss {
                ports: Vec::new(),
                rate: 0.0,
            },
        );
        match &a {
            Action::Links { ports, down } => {
                for &p in ports {
                    self.set_link(p, *down);
                }
            }
            Action::Loss { ports, rate } => {
                for &p in ports {
                    self.cold[p as usize].loss = *rate;
                    self.ports[p as usize].lossy = *rate > 0.0;
                }
            }
            Action::Slow { ports, fraction } => {
                for &p in ports {
                    let cold = self.cold[p as usize];
                    let port = &mut self.ports[p as usize];
                    port.ps_per_byte_q16 =
                        q16(((cold.base_rate_bps as f64) * fraction).max(1.0) as u64);
                    if self.scale_slowed_buffer && port.kind != PortKind::HostUp {
                        let b = ((cold.base_buffer as f64 * fraction.min(1.0)) as u64)
                            .max(2 * self.ready_bytes);
                        port.buffer = b;
                        port.kmin = (b as f64 * self.kmin_frac) as u64;
                        port.kmax = (b as f64 * self.kmax_frac) as u64;
                    }
                }
            }
        }
        self.actions[idx].1 = a;
    }

    // ---- hosts ---------------------------------------------------------------------------------------------

    fn start(&mut self, x: u32) {
        let c = self.xconn[x as usize];
        self.times[x as usize].0 = self.now;
        self.conns[c as usize].backlog.push(x);
        self.post_backlog(c);
        let s = self.conns[c as usize].src;
        self.pump(s);
    }

    fn post_backlog(&mut self, c: u32) {
        let now = Instant::from_nanos(self.now / 1000);
        let conn = &mut self.conns[c as usize];
        let (s, d, sq) = (conn.src, conn.dst, conn.sq);
        while conn.posted < MAX_WR && !conn.backlog.is_empty() {
            let x = conn.backlog.remove(0);
            let t = &self.xfers[x as usize];
            let addr = (u64::from(x) + 1) << 32;
            let len = t.bytes;
            let hs = &mut self.hosts[s as usize];
            let Ok(ks) = hs.ep.reg_mr(hs.pd, addr, len, Access::LOCAL_WRITE) else {
                self.c.failed_transfers += 1;
                continue;
            };
            let hd = &mut self.hosts[d as usize];
            let Ok(kd) = hd
                .ep
                .reg_mr(hd.pd, addr, len, Access::LOCAL_WRITE | Access::REMOTE_WRITE)
            else {
                self.c.failed_transfers += 1;
                continue;
            };
            let sge = [Sge {
                addr,
                len: len as u32,
                lkey: ks.lkey,
            }];
            let wr = SendWr {
                wr_id: u64::from(x),
                op: SendOp::Write {
                    remote_addr: addr,
                    rkey: kd.rkey,
                },
                sges: &sge,
                signaled: true,
                solicited: false,
            };
            if self.hosts[s as usize].ep.post_send(sq, &wr, now).is_err() {
                self.c.failed_transfers += 1;
                self.times[x as usize].1 = self.now;
                self.remaining -= 1;
                continue;
            }
            conn.posted += 1;
        }
    }

    fn complete(&mut self, x: u32, ok: bool) {
        let xi = x as usize;
        if self.times[xi].1 != u64::MAX {
            return;
        }
        if !ok {
            self.c.failed_transfers += 1;
        }
        self.times[xi].1 = self.now;
        self.remaining -= 1;
        let c = self.xconn[xi];
        self.conns[c as usize].posted -= 1;
        if !self.conns[c as usize].backlog.is_empty() {
            self.post_backlog(c);
        }
        let fires = std::mem::take(&mut self.xfers[xi].fires);
        for &k in &fires {
            let k = k as usize;
            self.fired[k] += 1;
            let n = self.fired[k];
            let tr = &self.triggers[k];
            let start: &[u32] = match tr.kind {
                TriggerKind::Oneshot if n == 1 => &tr.targets,
                TriggerKind::Barrier(need) if n == need => &tr.targets,
                TriggerKind::Multishot => tr
                    .targets
                    .get(n as usize - 1)
                    .map_or(&[], std::slice::from_ref),
                _ => &[],
            };
            let start: Vec<u32> = start.to_vec();
            let delay = tr.delay_ps;
            for y in start {
                let at = (self.now + delay).max(self.xfers[y as usize].start_ps);
                self.push(at, ev(EV_START, y));
            }
        }
        self.xfers[xi].fires = fires;
    }

    fn timer(&mut self, h: u32) {
        let host = &mut self.hosts[h as usize];
        if host.timer_at <= self.now {
            host.timer_at = u64::MAX;
        }
        let now = Instant::from_nanos(self.now / 1000);
        if host.ep.poll_timeout().is_some_and(|t| t <= now) {
            host.ep.handle_timeout(now);
        }
        self.pump(h);
    }

    /// Rebuilds packet `i`'s datagram into `rxbuf` (stored header, then placement markers where the payload
    /// was) and returns its length.
    fn rebuild(&mut self, i: u32) -> usize {
        let p = &self.pkts[i as usize];
        let n = p.dlen as usize;
        if p.big != NONE {
            let b = &self.big[p.big as usize];
            self.rxbuf[..n].copy_from_slice(&b[..n]);
        } else {
            let k = n.min(HDR);
            self.rxbuf[..k].copy_from_slice(&p.hdr[..k]);
        }
        if p.plen >= 8 {
            let o = p.poff as usize;
            let l = p.plen as usize;
            self.rxbuf[o..o + 8].copy_from_slice(&(p.tag ^ SALT).to_le_bytes());
            self.rxbuf[o + l - 8..o + l]
                .copy_from_slice(&((p.tag + l as u64 - 8) ^ SALT).to_le_bytes());
        }
        n
    }

    fn host_rx(&mut self, h: u32, i: u32) {
        let p = self.pkts[i as usize];
        self.c.delivered_pkts += 1;
        self.c.delivered_bytes += u64::from(p.wire);
        let trimmed = p.flags & (F_TRIM | F_TRIM_LAST) != 0;
        let n = self.rebuild(i);
        if let Some(c) = &mut self.capture
            && c.wants_host(h)
        {
            c.at_host(
                self.now,
                h,
                Direction::In,
                &seen_of(&p, self.plane_bits, &self.rxbuf[..n]),
            );
        }
        self.release(i);
        if self.gbn && p.class == CLASS_DATA && !trimmed && n >= 12 {
            let qpn = u32::from_be_bytes([0, self.rxbuf[5], self.rxbuf[6], self.rxbuf[7]]);
            let psn = u32::from_be_bytes([0, self.rxbuf[9], self.rxbuf[10], self.rxbuf[11]]);
            let host = &self.hosts[h as usize];
            if let Ok(k) = host.qps.binary_search_by_key(&qpn, |x| x.0) {
                let c = host.qps[k].1 as usize;
                let d = psn.wrapping_sub(self.conns[c].expect) & 0xFF_FFFF;
                if d == 0 {
                    self.conns[c].expect = (self.conns[c].expect + 1) & 0xFF_FFFF;
                } else if d < 0x80_0000 {
                    // Ahead of the first hole: a go-back-N receiver throws it away.
                    self.c.gbn_discards += 1;
                    return;
                }
            }
        }
        let meta = RecvMeta {
            peer: Some(PeerId(p.src)),
            port: p.plane,
            ecn_ce: p.flags & F_CE != 0,
            trim: if p.flags & F_TRIM_LAST != 0 {
                Some(TrimMark::LastHop)
            } else if p.flags & F_TRIM != 0 {
                Some(TrimMark::Fabric)
            } else {
                None
            },
        };
        let now = Instant::from_nanos(self.now / 1000);
        let host = &mut self.hosts[h as usize];
        host.mem.written = 0;
        host.ep
            .handle_datagram(now, meta, &self.rxbuf[..n], &mut host.mem);
        let w = host.mem.written;
        if w > 0 {
            let bin = (self.now / self.bin_ps) as usize;
            if self.goodput.len() <= bin {
                self.goodput.resize(bin + 1, vec![0; self.planes as usize]);
            }
            self.goodput[bin][p.plane as usize] += w;
            self.placed += w;
        }
        self.pump(h);
    }

    /// Drains a host's transmissions, completions and events, and re-arms its timer.
    fn pump(&mut self, h: u32) {
        let now = Instant::from_nanos(self.now / 1000);
        let planes = self.planes;
        let base = h * planes;
        let mut buf = std::mem::take(&mut self.txbuf);
        loop {
            let mut mask = 0u32;
            let mut up = 0u32;
            for p in 0..planes {
                let port = &self.ports[(base + p) as usize];
                if port.down_refs == 0 {
                    up |= 1 << p;
                    if port.low_bytes + port.high_bytes < self.ready_bytes {
                        mask |= 1 << p;
                    }
                }
            }
            self.blocked[h as usize] = mask != up;
            let host = &mut self.hosts[h as usize];
            host.mem.reads = 0;
            host.mem.read_len = 0;
            let Some(t) = host.ep.poll_transmit_on(now, mask, &mut buf, &mut host.mem) else {
                break;
            };
            let (reads, raddr, rptr, rlen) = (
                host.mem.reads,
                host.mem.read_addr,
                host.mem.read_ptr,
                host.mem.read_len,
            );
            let i = self.alloc();
            let data = matches!(t.class, TrafficClass::Data | TrafficClass::DataRetx);
            let p = &mut self.pkts[i as usize];
            p.src = h;
            p.dst = t.peer.0;
            p.dloc = self.topo.loc[t.peer.0 as usize];
            p.plane = t.plane;
            p.path = t.ev >> self.plane_bits;
            p.class = if data { CLASS_DATA } else { CLASS_CTRL };
            p.flags = 0;
            p.dlen = t.len as u32;
            p.wire = t.len as u32 + self.overhead;
            p.big = NONE;
            p.plen = 0;
            p.poff = 0;
            let off = rptr.wrapping_sub(buf.as_ptr() as usize);
            if reads > 0 && off <= HDR && off + rlen <= t.len {
                p.tag = raddr;
                p.poff = off as u32;
                p.plen = rlen as u32;
                p.hdr[..off].copy_from_slice(&buf[..off]);
            } else if t.len <= HDR {
                p.hdr[..t.len].copy_from_slice(&buf[..t.len]);
            } else {
                let b = match self.free_big.pop() {
                    Some(b) => b,
                    None => {
                        self.big.push(Vec::new());
                        self.big.len() as u32 - 1
                    }
                };
                let v = &mut self.big[b as usize];
                v.clear();
                v.extend_from_slice(&buf[..t.len]);
                self.pkts[i as usize].big = b;
            }
            if let Some(c) = &mut self.capture
                && c.wants_host(h)
            {
                let s = Seen {
                    src: h,
                    dst: t.peer.0,
                    plane: t.plane,
                    ev: t.ev,
                    data,
                    ce: false,
                    trimmed: None,
                    bytes: &buf[..t.len],
                };
                c.at_host(self.now, h, Direction::Out, &s);
            }
            let wire = u64::from(self.pkts[i as usize].wire);
            self.c.injected_pkts += 1;
            self.c.injected_bytes += wire;
            let pi = base + u32::from(t.plane);
            if u32::from(t.plane) >= planes || t.peer.0 >= self.topo.hosts {
                self.drop_pkt(i, Drop::Failure);
                continue;
            }
            self.enqueue(pi, i);
        }
        self.txbuf = buf;
        // Completions and events.
        loop {
            let host = &mut self.hosts[h as usize];
            let n = host.ep.poll_cq(host.cq, &mut self.cqe);
            if n == 0 {
                break;
            }
            for k in 0..n {
                let c = self.cqe[k];
                if c.opcode == mrc::WcOpcode::RdmaWrite {
                    self.complete(c.wr_id as u32, c.status == mrc::WcStatus::Success);
                }
            }
        }
        let host = &mut self.hosts[h as usize];
        while let Some(e) = host.ep.poll_event() {
            match e {
                Event::EvChanged { change, .. } => {
                    if change.to == EvState::AssumedBad && change.from != EvState::AssumedBad {
                        self.c.ev_retirements += 1;
                    } else if change.from == EvState::AssumedBad && change.to == EvState::Good {
                        self.c.ev_recoveries += 1;
                    }
                }
                Event::QpError { .. } => self.c.qp_errors += 1,
                _ => {}
            }
        }
        if let Some(t) = host.ep.poll_timeout() {
            let ps = t.as_nanos().saturating_mul(1000);
            let ps = ps.max(self.now);
            if ps < host.timer_at {
                host.timer_at = ps;
                self.push(ps, ev(EV_TIMER, h));
            }
        }
    }
}

/// Most work requests posted per QP at once.
const MAX_WR: u32 = 200;
const PSN0: u32 = 0x10_0000;

#[derive(Clone, Copy)]
enum Drop {
    Failure,
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

fn uniform(rng: &mut Xoshiro256PlusPlus) -> f64 {
    (rng.next_u64() >> 11) as f64 / (1u64 << 53) as f64
}

/// Creates a connected QP pair (both sides RTS); returns (sender QPN, receiver QPN).
fn connect(
    hosts: &mut [Host],
    a: u32,
    b: u32,
    cfg: &QpConfig,
) -> Result<(u32, u32), Box<dyn std::error::Error>> {
    if a == b {
        return Err("a QP pair joins two different hosts".into());
    }
    let mut qpn = [0u32; 2];
    for (k, &n) in [a, b].iter().enumerate() {
        let h = &mut hosts[n as usize];
        let mut init = QpInit::new(h.pd, h.cq);
        init.config = cfg.clone();
        init.max_send_wr = MAX_WR;
        init.max_recv_wr = 1;
        init.max_sge = 1;
        qpn[k] = h.ep.open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)?;
    }
    let (lo, hi) = hosts.split_at_mut(a.max(b) as usize);
    let (ha, hb) = if a < b {
        (&mut lo[a as usize], &mut hi[0])
    } else {
        (&mut hi[0], &mut lo[b as usize])
    };
    let end = |k: usize, peer: u32| QpEnd {
        qpn: qpn[k],
        peer: PeerId(peer),
        sq_psn: PSN0,
    };
    connect_pair(Instant::ZERO, &mut ha.ep, end(0, b), &mut hb.ep, end(1, a))?;
    Ok((qpn[0], qpn[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placement check catches bytes written at another address than they were read from.
    #[test]
    fn placement_markers_catch_misplacement() {
        let mut m = PatMem {
            check: true,
            ..PatMem::default()
        };
        let addr = 5u64 << 32;
        let mut buf = vec![0u8; 64];
        buf[..8].copy_from_slice(&(addr ^ SALT).to_le_bytes());
        buf[56..].copy_from_slice(&((addr + 56) ^ SALT).to_le_bytes());
        m.write(addr, &buf);
        assert_eq!((m.errors, m.written), (0, 64));
        m.write(addr + 8, &buf);
        assert_eq!(m.errors, 1);
        m.write(addr, &buf[..32]);
        assert_eq!(m.errors, 2);
        // A WRITE's final byte placed apart (spec QP-PLACE-2): the rest first, then the byte that completes
        // the end marker; a wrong byte there is caught.
        m.write(addr, &buf[..63]);
        m.write(addr + 63, &buf[63..]);
        assert_eq!(m.errors, 2);
        m.write(addr, &buf[..63]);
        m.write(addr + 63, &[!buf[63]]);
        assert_eq!(m.errors, 3);
    }
}
