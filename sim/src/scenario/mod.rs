//! Scenario files (TOML): topology, transport, workload, failures, outputs and validation thresholds.
//!
//! Parsing rejects unknown fields and unknown enum values (serde names the field and lists the allowed
//! values); [`Scenario::check`] (in `check.rs`) then refuses every value out of range, every field that does
//! not apply where it stands, every time outside the run and every threshold the run cannot compute, naming
//! the field and the fix. What needs the fabric's shape (references to planes, hosts and switches, sizes and
//! memory) is checked by `crate::plan` before anything is built.

mod check;
mod failures;

pub use check::*;

use std::fmt;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// A scenario error: the offending field and what would be accepted.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioError {
    /// Dotted path of the field, e.g. `failures[2].link.plane`.
    pub field: String,
    /// What is wrong and how to fix it.
    pub problem: String,
}

impl ScenarioError {
    /// An error for `field`.
    pub fn new(field: impl Into<String>, problem: impl Into<String>) -> Self {
        Self {
            field: field.into(),
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ScenarioError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ScenarioError {}

/// A whole scenario.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    /// Short name, used in reports.
    pub name: String,
    /// What it shows.
    #[serde(default)]
    pub description: String,
    /// RNG seed (ECN marking, grey loss, workload shuffles).
    #[serde(default = "one")]
    pub seed: u64,
    /// The fabric.
    pub topology: TopologyCfg,
    /// Transport (MRC engine) settings.
    #[serde(default)]
    pub transport: TransportCfg,
    /// Traffic.
    pub workload: WorkloadCfg,
    /// Failures, applied at their times.
    #[serde(default)]
    pub failures: Vec<FailureCfg>,
    /// Run limits and outputs.
    #[serde(default)]
    pub run: RunCfg,
    /// Sweep dimensions.
    #[serde(default)]
    pub sweep: SweepCfg,
    /// Thresholds `mrc-sim validate` checks.
    #[serde(default)]
    pub validate: Vec<Threshold>,
    /// Folder of the scenario file: `topology.file` and `workload.file` are relative to it.
    #[serde(skip)]
    pub base_dir: Option<PathBuf>,
}

fn one() -> u64 {
    1
}

/// Which fabric.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum TopoKind {
    /// Leaves (T0) and spines (T1), one such fabric per plane; `planes = 1` is a plain leaf-spine.
    TwoTier,
    /// Pods of T0 and T1 with T2 spines above, one per plane.
    ThreeTier,
    /// An htsim `.topo` file (2 or 3 tiers), one copy per plane.
    Htsim,
}

/// Speed and delay of one tier's links.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct LinkCfg {
    /// Rate in Gbit/s.
    pub gbps: f64,
    /// Propagation delay in ns (switch latency included).
    #[serde(default = "default_latency")]
    pub latency_ns: u64,
    /// Output buffer per port in bytes; default 1 BDP of the fabric.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffer_bytes: Option<u64>,
    /// Buffer of the port towards the spine (T0→T1 of `t0_t1_link`, T1→T2 of `t1_t2_link`) when it differs
    /// from `buffer_bytes` (htsim's `Queue_Up`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub up_buffer_bytes: Option<u64>,
}

fn default_latency() -> u64 {
    1000
}

/// Topology.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TopologyCfg {
    /// Shape.
    pub kind: TopoKind,
    /// Planes (one NIC port each), 1..=16.
    #[serde(default = "one_u8")]
    pub planes: u8,
    /// Hosts under one T0.
    #[serde(default)]
    pub hosts_per_t0: u32,
    /// T0 switches per plane (two-tier) or per pod (three-tier).
    #[serde(default)]
    pub t0: u32,
    /// T1 switches per plane (two-tier) or per pod (three-tier).
    #[serde(default)]
    pub t1: u32,
    /// Pods (three-tier).
    #[serde(default)]
    pub pods: u32,
    /// T2 switches above each T1 position (three-tier).
    #[serde(default)]
    pub t2_per_t1: u32,
    /// Host–T0 links (default 100 Gbit/s, 1 µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host_link: Option<LinkCfg>,
    /// T0–T1 links (default 100 Gbit/s, 1 µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t0_t1_link: Option<LinkCfg>,
    /// T1–T2 links (three-tier; default 100 Gbit/s, 1 µs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub t1_t2_link: Option<LinkCfg>,
    /// `.topo` file for `kind = "htsim"`, relative to the scenario file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<PathBuf>,
    /// Queues.
    #[serde(default)]
    pub queue: QueueCfg,
}

fn one_u8() -> u8 {
    1
}

/// The links of a tier when the scenario gives none.
pub const DEFAULT_LINK: LinkCfg = LinkCfg {
    gbps: 100.0,
    latency_ns: 1000,
    buffer_bytes: None,
    up_buffer_bytes: None,
};

impl TopologyCfg {
    /// The links of a tier: `host`, `t0_t1` or `t1_t2`, with the default where none is given.
    pub fn link(&self, tier: LinkTier) -> LinkCfg {
        match tier {
            LinkTier::Host => self.host_link,
            LinkTier::T0T1 => self.t0_t1_link,
            LinkTier::T1T2 => self.t1_t2_link,
        }
        .unwrap_or(DEFAULT_LINK)
    }
}

/// Switch output queues.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueCfg {
    /// Cut overflowing data packets to a header and forward it with priority (else drop-tail).
    #[serde(default = "yes")]
    pub trimming: bool,
    /// ECN marking (on the last hop to a host too unless `ecn_last_hop` is off).
    #[serde(default = "yes")]
    pub ecn: bool,
    /// Marking starts above this fraction of the buffer...
    #[serde(default = "kmin")]
    pub ecn_kmin: f64,
    /// ...and every packet is marked above this fraction.
    #[serde(default = "kmax")]
    pub ecn_kmax: f64,
    /// Default buffer in BDPs when a tier gives no `buffer_bytes`.
    #[serde(default = "one_f")]
    pub buffer_bdp: f64,
    /// Where ECN marks: `enqueue` (default: the queue a packet joins) or `dequeue` (the queue it leaves
    /// behind when it starts to be sent, as fresh as the queue gets).
    #[serde(default)]
    pub ecn_mark: EcnMark,
    /// ECN on the last hop (T0 → host) too. On by default: a switch applies one marking profile to every
    /// egress queue, host-facing ones included (as htsim's default). Without it an incast's senders see
    /// delay but no mark, grow past one MTU each and are trimmed ~45% more often (`fid-incast-128-spread`).
    #[serde(default = "yes")]
    pub ecn_last_hop: bool,
    /// Which packet a full data queue trims: the `arrival` only, or (default) `arrival_or_tail`: with
    /// probability 1/2 the packet at the queue's tail instead, the arrival taking its place (as NDP switches
    /// and htsim's composite queue). With equal latencies a deterministic model phase-locks an incast: the
    /// same senders' packets keep arriving just after a departure and win, so FCTs spread.
    #[serde(default)]
    pub trim_victim: TrimVictim,
    /// Wire bytes of a trimmed packet, all headers included (default 64, as htsim). The receiver always sees
    /// the first 64 bytes of the MRC datagram (spec WIRE-ICRC-2); this is only what the header costs on the
    /// links it still crosses. A real frame adds Ethernet, IPv6 and UDP to those 64 bytes: 130.
    #[serde(default = "trim_bytes")]
    pub trimmed_bytes: u32,
    /// Bytes the high-priority queue (control packets and trimmed headers) of a port holds; a trimmed header
    /// or control packet that does not fit is dropped (and counted). Default: the port's data buffer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub header_buffer_bytes: Option<u64>,
    /// What a slowed link (`link_slow`) does with its buffer: `keep` its bytes (default: a switch port's
    /// buffer does not shrink when its link runs slower, so its queue delay grows by 1 / fraction) or
    /// `scale` them with the rate (the same queue delay as at full rate).
    #[serde(default)]
    pub slowed_buffer: SlowedBuffer,
}

/// Where switch ports mark ECN.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum EcnMark {
    /// When a packet joins the data queue, from the queue it finds.
    #[default]
    Enqueue,
    /// When a packet starts to be sent, from the data queue it leaves behind.
    Dequeue,
}

/// Which packet a full trimming queue cuts (`QueueCfg::trim_victim`).
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum TrimVictim {
    /// Always the arriving packet.
    Arrival,
    /// The arriving packet or, with probability 1/2, the one at the queue's tail.
    #[default]
    ArrivalOrTail,
}

/// A slowed link's buffer.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum SlowedBuffer {
    /// Keeps its bytes.
    #[default]
    Keep,
    /// Scales with the rate.
    Scale,
}

fn yes() -> bool {
    true
}
fn kmin() -> f64 {
    0.2
}
fn kmax() -> f64 {
    0.8
}
fn one_f() -> f64 {
    1.0
}
fn trim_bytes() -> u32 {
    64
}

impl Default for QueueCfg {
    fn default() -> Self {
        Self {
            trimming: true,
            ecn: true,
            ecn_kmin: kmin(),
            ecn_kmax: kmax(),
            buffer_bdp: 1.0,
            ecn_mark: EcnMark::default(),
            ecn_last_hop: true,
            trim_victim: TrimVictim::default(),
            trimmed_bytes: trim_bytes(),
            header_buffer_bytes: None,
            slowed_buffer: SlowedBuffer::default(),
        }
    }
}

/// How lost packets are recovered.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Recovery {
    /// MRC: selective ACKs, only holes are resent.
    #[default]
    Sack,
    /// For comparison: the receiver discards every packet after the first hole, so everything from the hole
    /// on is resent (a go-back-N receiver in front of the engine).
    GoBackN,
}

/// Congestion control.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum CcKind {
    /// The engine's NSCC-like controller.
    #[default]
    Nscc,
    /// A fixed window of one BDP (no congestion control).
    Fixed,
}

/// Transport settings.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct TransportCfg {
    /// Payload bytes per packet.
    #[serde(default = "mtu")]
    pub mtu: u32,
    /// Bytes each packet carries on the wire besides the MRC datagram (Ethernet, IPv6, UDP, FCS).
    #[serde(default = "overhead")]
    pub frame_overhead: u32,
    /// Active EVs per plane; default: the number of distinct paths per plane (every spine is used), as many
    /// as fit in 4096 EVs per QP with the backups.
    #[serde(default)]
    pub evs_per_plane: Option<u16>,
    /// Backup EVs per plane.
    #[serde(default = "two_u16")]
    pub backup_evs_per_plane: u16,
    /// Congestion control.
    #[serde(default)]
    pub cc: CcKind,
    /// Loss recovery.
    #[serde(default)]
    pub recovery: Recovery,
    /// Unloaded RTT in ns given to the engine; default computed from the topology.
    #[serde(default)]
    pub base_rtt_ns: Option<u64>,
    /// Reorder allowance of time-based loss detection in ns: how much longer than its path's expected round
    /// trip (plus four RTT deviations) a packet may take before it is lost; default the engine's, a quarter of
    /// the base RTT.
    #[serde(default)]
    pub reorder_ns: Option<u64>,
    /// NSCC's largest window in BDPs (the BDP of the host rate and the base RTT). Default 1.3, not UET's 1.5:
    /// a flow that its NIC already limits to line rate gains nothing from window beyond the pipe (about 1.2
    /// BDP here, with SACKs every 4 packets and sprayed packets' jitter), and every byte above it waits in a
    /// fabric queue. In a permutation at full load every link runs at 100%, so that excess never drains:
    /// with 1.5 the queues grew to a BDP, ECN marked the flows that crossed them, their windows were cut
    /// while the RTT stayed inflated by the others' excess, and FCT p99 reached 1.20 × p50 at 8,192 hosts
    /// (1.06 with 1.3; 1.2 starves the pipe: p50 +4%).
    #[serde(default)]
    pub max_cwnd_bdp: Option<f64>,
    /// Check every placed packet against the address it was read from (cheap; on by default).
    #[serde(default = "yes")]
    pub check_placement: bool,
    /// New packets per EV before the next (spec PATH-EV-6): 1 sprays packet by packet (MRC's way); a software
    /// host that sends segmented trains uses a few (mrc-host's offload: 7 at MTU 9000).
    #[serde(default = "one_u8")]
    pub ev_burst: u8,
}

/// Default of `transport.max_cwnd_bdp`.
pub const DEFAULT_MAX_CWND_BDP: f64 = 1.3;

fn mtu() -> u32 {
    4096
}
fn overhead() -> u32 {
    66
}
fn two_u16() -> u16 {
    2
}

impl Default for TransportCfg {
    fn default() -> Self {
        Self {
            mtu: mtu(),
            frame_overhead: overhead(),
            evs_per_plane: None,
            backup_evs_per_plane: 2,
            cc: CcKind::default(),
            recovery: Recovery::default(),
            base_rtt_ns: None,
            reorder_ns: None,
            max_cwnd_bdp: None,
            check_placement: true,
            ev_burst: 1,
        }
    }
}

/// Traffic pattern.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum WorkloadKind {
    /// Every host sends `bytes` to one other host; each receives from one (random derangement).
    Permutation,
    /// Every host sends `bytes` to every other.
    AllToAll,
    /// `senders` hosts send `bytes` each to host `target`, plus an optional victim flow.
    Incast,
    /// Ring all-reduce of `bytes` over the hosts: 2(N−1) steps, each a transfer to the next rank.
    RingAllreduce,
    /// Binary-tree all-reduce of `bytes`: reduce up the tree, then broadcast down.
    TreeAllreduce,
    /// An htsim connection matrix file.
    Htsim,
}

/// A victim flow for incast scenarios.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct VictimCfg {
    /// Sender.
    pub src: u32,
    /// Receiver.
    pub dst: u32,
    /// Bytes.
    pub bytes: u64,
}

/// Workload.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct WorkloadCfg {
    /// Pattern.
    pub kind: WorkloadKind,
    /// Bytes per transfer (all-reduce: the whole buffer).
    #[serde(default)]
    pub bytes: u64,
    /// Hosts taking part: the first N (default all).
    #[serde(default)]
    pub hosts: Option<u32>,
    /// Start time in µs.
    #[serde(default)]
    pub start_us: f64,
    /// Incast: number of senders (hosts 1..=senders unless `sources` is given).
    #[serde(default)]
    pub senders: u32,
    /// Incast: explicit senders.
    #[serde(default)]
    pub sources: Option<Vec<u32>>,
    /// Incast: receiver.
    #[serde(default)]
    pub target: u32,
    /// Incast: a flow whose completion time is compared with its time alone.
    #[serde(default)]
    pub victim: Option<VictimCfg>,
    /// Collectives: compute time between receiving a step and sending the next, in µs.
    #[serde(default)]
    pub compute_us: f64,
    /// Connection matrix file for `kind = "htsim"`, relative to the scenario file.
    #[serde(default)]
    pub file: Option<PathBuf>,
}

/// Failure kinds.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// The selected links go down (both directions).
    LinkDown,
    /// They come back.
    LinkUp,
    /// Down for `(1 − duty) × period`, up for `duty × period`, repeated from `at_us` to `until_us`.
    LinkFlap,
    /// A switch goes down (all its links); back at `until_us` if given (a reboot).
    SwitchDown,
    /// A switch comes back.
    SwitchUp,
    /// Every switch of a plane goes down; back at `until_us` if given.
    PlaneDown,
    /// A NIC port (the host link of one plane) goes down; back at `until_us` if given.
    NicPortDown,
    /// Random loss with probability `rate` on the selected links (grey failure); `rate = 0` ends it.
    LinkLoss,
    /// The selected links run at `fraction` of their rate; 1.0 restores them.
    LinkSlow,
}

/// Which links: every field left out matches all.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct LinkRef {
    /// `host` (host–T0), `t0_t1` or `t1_t2`.
    pub tier: LinkTier,
    /// Plane.
    #[serde(default)]
    pub plane: Option<u8>,
    /// Host (tier `host`).
    #[serde(default)]
    pub host: Option<u32>,
    /// T0 index within the plane (two-tier) or pod (three-tier).
    #[serde(default)]
    pub t0: Option<u32>,
    /// T1 index within the plane (two-tier) or pod (three-tier).
    #[serde(default)]
    pub t1: Option<u32>,
    /// Pod (three-tier).
    #[serde(default)]
    pub pod: Option<u32>,
    /// T2 index above its T1 position (three-tier).
    #[serde(default)]
    pub t2: Option<u32>,
    /// `up` (towards the spine), `down` or `both` (default): grey loss and slowness may be one-way
    /// (`link_loss` and `link_slow` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub direction: Option<Direction>,
}

/// Link tiers.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum LinkTier {
    /// Host–T0.
    Host,
    /// T0–T1.
    T0T1,
    /// T1–T2.
    T1T2,
}

/// Link directions.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq, Default)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// Both.
    #[default]
    Both,
    /// Towards the spine.
    Up,
    /// Towards the hosts.
    Down,
}

/// A switch.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq, Eq)]
#[serde(deny_unknown_fields)]
pub struct SwitchRef {
    /// 0 (T0), 1 (T1) or 2 (T2).
    pub tier: u8,
    /// Plane; required when the fabric has more than one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plane: Option<u8>,
    /// Index within the plane (two-tier) or pod (three-tier T0/T1).
    pub index: u32,
    /// Pod (three-tier T0/T1) or T1 position (three-tier T2); required in three-tier fabrics, refused in
    /// two-tier ones.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<u32>,
}

/// One failure.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureCfg {
    /// What fails.
    pub kind: FailureKind,
    /// When, in µs.
    pub at_us: f64,
    /// When it ends (repair, reboot, end of flapping), in µs.
    #[serde(default)]
    pub until_us: Option<f64>,
    /// Links (link_* kinds).
    #[serde(default)]
    pub link: Option<LinkRef>,
    /// Switch (switch_* kinds).
    #[serde(default)]
    pub switch: Option<SwitchRef>,
    /// Plane (plane_down, nic_port_down).
    #[serde(default)]
    pub plane: Option<u8>,
    /// Host (nic_port_down).
    #[serde(default)]
    pub host: Option<u32>,
    /// Flap period in µs.
    #[serde(default)]
    pub period_us: Option<f64>,
    /// Flap: fraction of each period the link is up.
    #[serde(default)]
    pub duty: Option<f64>,
    /// Loss probability (link_loss).
    #[serde(default)]
    pub rate: Option<f64>,
    /// Fraction of the rate kept (link_slow).
    #[serde(default)]
    pub fraction: Option<f64>,
}

/// Limits and outputs.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct RunCfg {
    /// Simulated time limit in µs (the run stops there even if transfers remain).
    #[serde(default = "limit")]
    pub limit_us: f64,
    /// Width of the time bins of the goodput and queue timelines, in µs.
    #[serde(default = "bin")]
    pub bin_us: f64,
    /// Also run the scenario without failures (and victim alone) to report the slowdown.
    #[serde(default = "yes")]
    pub baseline: bool,
    /// After a failure, losses later than this are "lasting" (paths should be retired by then), in µs.
    #[serde(default = "settle")]
    pub settle_us: f64,
    /// Threads one run uses (`mrc-sim run --threads`; 0 or 1: one). Not part of the scenario file: the
    /// outcome is the same for every count.
    #[serde(skip)]
    pub threads: usize,
    /// Run each lookahead window in time order rather than by T0 position (`mrc-sim run --time-order`). Not
    /// part of the scenario file: the outcome is the same.
    #[serde(skip)]
    pub time_order: bool,
}

fn limit() -> f64 {
    100_000.0
}
fn bin() -> f64 {
    10.0
}
fn settle() -> f64 {
    100.0
}

impl Default for RunCfg {
    fn default() -> Self {
        Self {
            limit_us: limit(),
            bin_us: bin(),
            baseline: true,
            settle_us: settle(),
            threads: 0,
            time_order: false,
        }
    }
}

/// Sweep dimensions.
#[derive(Debug, Clone, Default, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct SweepCfg {
    /// Seeds to run (default: the scenario's seed).
    #[serde(default)]
    pub seeds: Vec<u64>,
    /// Failure sets: each run of the sweep has the scenario's `failures` (which apply in every run) followed
    /// by one set's (default: one run with the scenario's failures alone). `run`, `compare` and `validate`
    /// refuse a scenario with failure sets: `sweep` runs them.
    #[serde(default)]
    pub failure_sets: Vec<FailureSet>,
}

/// A named list of failures.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct FailureSet {
    /// Name used in the sweep table.
    pub name: String,
    /// The failures.
    #[serde(default)]
    pub failures: Vec<FailureCfg>,
}

/// A threshold on a reported metric.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Threshold {
    /// Metric name (see `mrc-sim metrics` or the README).
    pub metric: String,
    /// Smallest accepted value.
    #[serde(default)]
    pub min: Option<f64>,
    /// Largest accepted value.
    #[serde(default)]
    pub max: Option<f64>,
    /// Why this bound (printed with the result).
    #[serde(default)]
    pub why: String,
}
