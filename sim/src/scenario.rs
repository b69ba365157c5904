//! Scenario files (TOML): topology, transport, workload, failures, outputs and validation thresholds.
//!
//! Parsing rejects unknown fields and unknown enum values (serde names the field and lists the allowed
//! values); [`Scenario::check`] then checks ranges and cross-field rules, naming the field and the fix.

use std::fmt;
use std::path::{Path, PathBuf};

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
    #[serde(default)]
    pub buffer_bytes: Option<u64>,
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
    /// Host–T0 links.
    #[serde(default = "default_link")]
    pub host_link: LinkCfg,
    /// T0–T1 links.
    #[serde(default = "default_link")]
    pub t0_t1_link: LinkCfg,
    /// T1–T2 links (three-tier).
    #[serde(default = "default_link")]
    pub t1_t2_link: LinkCfg,
    /// `.topo` file for `kind = "htsim"`, relative to the scenario file.
    #[serde(default)]
    pub file: Option<PathBuf>,
    /// Queues.
    #[serde(default)]
    pub queue: QueueCfg,
}

fn one_u8() -> u8 {
    1
}

fn default_link() -> LinkCfg {
    LinkCfg {
        gbps: 100.0,
        latency_ns: 1000,
        buffer_bytes: None,
    }
}

/// Switch output queues.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct QueueCfg {
    /// Cut overflowing data packets to a header and forward it with priority (else drop-tail).
    #[serde(default = "yes")]
    pub trimming: bool,
    /// ECN marking (never on the last hop to a host).
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

impl Default for QueueCfg {
    fn default() -> Self {
        Self {
            trimming: true,
            ecn: true,
            ecn_kmin: kmin(),
            ecn_kmax: kmax(),
            buffer_bdp: 1.0,
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
    /// Active EVs per plane; default: the number of distinct paths per plane, at most 32.
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
    /// Smallest reorder window of time-based loss detection in ns; default 2 × base RTT, since 1-BDP
    /// queues at two tiers can reorder sprayed packets by about that much.
    #[serde(default)]
    pub reorder_ns: Option<u64>,
    /// Check every placed packet against the address it was read from (cheap; on by default).
    #[serde(default = "yes")]
    pub check_placement: bool,
}

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
            check_placement: true,
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
    /// `up` (towards the spine), `down` or `both` (default): grey loss and slowness may be one-way.
    #[serde(default)]
    pub direction: Direction,
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
    /// Plane.
    #[serde(default)]
    pub plane: u8,
    /// Index within the plane (two-tier) or pod (three-tier T0/T1).
    pub index: u32,
    /// Pod (three-tier T0/T1) or T1 position (three-tier T2).
    #[serde(default)]
    pub pod: u32,
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
    /// Failure sets; each replaces `failures` (default: the scenario's failures).
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

impl Scenario {
    /// Reads and checks a scenario file; relative file references are resolved against its folder.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ScenarioError::new(path.display().to_string(), format!("cannot read: {e}"))
        })?;
        let mut s = Self::parse(&text)?;
        let dir = path.parent().unwrap_or(Path::new("."));
        if let Some(f) = &s.topology.file {
            s.topology.file = Some(dir.join(f));
        }
        if let Some(f) = &s.workload.file {
            s.workload.file = Some(dir.join(f));
        }
        Ok(s)
    }

    /// The scenario as TOML text.
    pub fn to_toml(&self) -> String {
        toml::to_string(self).unwrap_or_default()
    }

    /// Parses and checks scenario text.
    pub fn parse(text: &str) -> Result<Self, ScenarioError> {
        let s: Self = toml::from_str(text).map_err(|e| {
            let msg = e.message().to_string();
            let field = msg
                .split('`')
                .nth(1)
                .filter(|_| msg.starts_with("unknown field"))
                .unwrap_or("scenario")
                .to_string();
            ScenarioError::new(field, e.to_string().trim().to_string())
        })?;
        s.check()?;
        Ok(s)
    }

    /// Checks ranges and cross-field rules.
    pub fn check(&self) -> Result<(), ScenarioError> {
        self.check_topology()?;
        self.check_transport()?;
        self.check_run()?;
        self.check_workload()?;
        for (i, f) in self.failures.iter().enumerate() {
            check_failure(&format!("failures[{i}]"), f)?;
        }
        for (si, set) in self.sweep.failure_sets.iter().enumerate() {
            for (i, f) in set.failures.iter().enumerate() {
                check_failure(&format!("sweep.failure_sets[{si}].failures[{i}]"), f)?;
            }
        }
        for (i, th) in self.validate.iter().enumerate() {
            if !crate::report::METRICS.iter().any(|(m, _)| *m == th.metric) {
                let names: Vec<&str> = crate::report::METRICS.iter().map(|(m, _)| *m).collect();
                return Err(ScenarioError::new(
                    format!("validate[{i}].metric"),
                    format!(
                        "unknown metric `{}`; use one of {}",
                        th.metric,
                        names.join(", ")
                    ),
                ));
            }
            if th.min.is_none() && th.max.is_none() {
                return Err(ScenarioError::new(
                    format!("validate[{i}]"),
                    "give min, max or both",
                ));
            }
            for (f, v) in [("min", th.min), ("max", th.max)] {
                if v.is_some_and(|x| !x.is_finite()) {
                    return Err(ScenarioError::new(
                        format!("validate[{i}].{f}"),
                        "must be a finite number; leave it out for no bound on this side",
                    ));
                }
            }
            if let (Some(a), Some(b)) = (th.min, th.max)
                && a > b
            {
                return Err(ScenarioError::new(
                    format!("validate[{i}].min"),
                    format!("min {a} is above max {b}; no value could pass"),
                ));
            }
        }
        Ok(())
    }

    fn check_topology(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        if !(1..=16).contains(&t.planes) {
            return Err(ScenarioError::new(
                "topology.planes",
                format!("{} planes; use 1..=16", t.planes),
            ));
        }
        let counts: &[(&str, u32)] = match t.kind {
            TopoKind::TwoTier => &[("hosts_per_t0", t.hosts_per_t0), ("t0", t.t0), ("t1", t.t1)],
            TopoKind::ThreeTier => &[
                ("hosts_per_t0", t.hosts_per_t0),
                ("t0", t.t0),
                ("t1", t.t1),
                ("pods", t.pods),
                ("t2_per_t1", t.t2_per_t1),
            ],
            TopoKind::Htsim => &[],
        };
        for &(f, v) in counts {
            if !(1..=MAX_COUNT).contains(&v) {
                return Err(ScenarioError::new(
                    format!("topology.{f}"),
                    format!(
                        "{v}; use 1..={MAX_COUNT} for kind = \"{}\" (a switch has at most {MAX_COUNT} ports a side)",
                        t.kind.name()
                    ),
                ));
            }
        }
        if t.kind == TopoKind::Htsim && t.file.is_none() {
            return Err(ScenarioError::new(
                "topology.file",
                "kind = \"htsim\" needs file = \"path/to/x.topo\"",
            ));
        }
        for (f, l) in [
            ("topology.host_link", &t.host_link),
            ("topology.t0_t1_link", &t.t0_t1_link),
            ("topology.t1_t2_link", &t.t1_t2_link),
        ] {
            l.check(f)?;
        }
        let q = &t.queue;
        if !(0.0..=1.0).contains(&q.ecn_kmin) || !(q.ecn_kmin..=1.0).contains(&q.ecn_kmax) {
            return Err(ScenarioError::new(
                "topology.queue.ecn_kmin",
                "need 0 <= ecn_kmin <= ecn_kmax <= 1 (fractions of the buffer)",
            ));
        }
        if !(q.buffer_bdp > 0.0 && q.buffer_bdp <= 1000.0) {
            return Err(ScenarioError::new(
                "topology.queue.buffer_bdp",
                "must be in (0, 1000]",
            ));
        }
        Ok(())
    }

    fn check_transport(&self) -> Result<(), ScenarioError> {
        let tr = &self.transport;
        if !(256..=65000).contains(&tr.mtu) {
            return Err(ScenarioError::new(
                "transport.mtu",
                format!("{} payload bytes; use 256..=65000", tr.mtu),
            ));
        }
        if tr.frame_overhead > MAX_FRAME_OVERHEAD {
            return Err(ScenarioError::new(
                "transport.frame_overhead",
                format!(
                    "{} bytes; use 0..={MAX_FRAME_OVERHEAD} (Ethernet + IPv6 + UDP + FCS is 66)",
                    tr.frame_overhead
                ),
            ));
        }
        let evs = |v: u16| u32::from(v) * u32::from(self.topology.planes);
        if let Some(e) = tr.evs_per_plane
            && !(1..=MAX_EVS_PER_QP).contains(&evs(e))
        {
            return Err(ScenarioError::new(
                "transport.evs_per_plane",
                format!(
                    "{e}; use at least 1 (or leave it out for one per path), and at most {MAX_EVS_PER_QP} EVs over all planes"
                ),
            ));
        }
        let active = tr.evs_per_plane.unwrap_or(0);
        if evs(active).saturating_add(evs(tr.backup_evs_per_plane)) > MAX_EVS_PER_QP {
            return Err(ScenarioError::new(
                "transport.backup_evs_per_plane",
                format!(
                    "{}; (evs_per_plane + backup_evs_per_plane) x planes must be at most {MAX_EVS_PER_QP}",
                    tr.backup_evs_per_plane
                ),
            ));
        }
        for (f, v, max) in [
            ("base_rtt_ns", tr.base_rtt_ns, MAX_RTT_NS),
            ("reorder_ns", tr.reorder_ns, MAX_RTT_NS),
        ] {
            if let Some(v) = v
                && !(1..=max).contains(&v)
            {
                return Err(ScenarioError::new(
                    format!("transport.{f}"),
                    format!("{v} ns; use 1..={max} (or leave it out for the computed default)"),
                ));
            }
        }
        Ok(())
    }

    fn check_run(&self) -> Result<(), ScenarioError> {
        let r = &self.run;
        time_in("run.limit_us", r.limit_us, f64::MIN_POSITIVE, MAX_TIME_US)?;
        time_in("run.bin_us", r.bin_us, f64::MIN_POSITIVE, MAX_TIME_US)?;
        time_in("run.settle_us", r.settle_us, 0.0, MAX_TIME_US)?;
        if r.limit_us / r.bin_us > 1e6 {
            return Err(ScenarioError::new(
                "run.bin_us",
                "more than a million bins; use a larger bin_us",
            ));
        }
        Ok(())
    }

    fn check_workload(&self) -> Result<(), ScenarioError> {
        let w = &self.workload;
        if w.kind != WorkloadKind::Htsim && !(1..=MAX_TRANSFER).contains(&w.bytes) {
            return Err(ScenarioError::new(
                "workload.bytes",
                format!(
                    "{} bytes; use 1..={MAX_TRANSFER}: bytes per transfer (or per all-reduce)",
                    w.bytes
                ),
            ));
        }
        if let Some(v) = w.victim
            && !(1..=MAX_TRANSFER).contains(&v.bytes)
        {
            return Err(ScenarioError::new(
                "workload.victim.bytes",
                format!("{} bytes; use 1..={MAX_TRANSFER}", v.bytes),
            ));
        }
        if w.kind == WorkloadKind::Htsim && w.file.is_none() {
            return Err(ScenarioError::new(
                "workload.file",
                "kind = \"htsim\" needs file = \"path/to/x.cm\"",
            ));
        }
        if w.kind == WorkloadKind::Incast && w.senders == 0 && w.sources.is_none() {
            return Err(ScenarioError::new(
                "workload.senders",
                "an incast needs senders = N (hosts 1..=N) or sources = [..]",
            ));
        }
        time_in("workload.start_us", w.start_us, 0.0, MAX_TIME_US)?;
        time_in("workload.compute_us", w.compute_us, 0.0, MAX_TIME_US)?;
        Ok(())
    }
}

/// Largest switch count per tier, hosts per T0 and pods: a switch has at most this many ports a side.
pub const MAX_COUNT: u32 = 65_536;
/// Largest link or switch latency, ns (1 s).
pub const MAX_LATENCY_NS: u64 = 1_000_000_000;
/// Largest output buffer, bytes (1 TiB).
pub const MAX_BUFFER_BYTES: u64 = 1 << 40;
/// Largest link rate, Gbit/s.
pub const MAX_GBPS: f64 = 100_000.0;
/// Largest simulated time of any field, µs (1000 s: picoseconds stay far inside 64 bits).
pub const MAX_TIME_US: f64 = 1e9;
/// Largest base RTT or reorder window, ns (1 s).
pub const MAX_RTT_NS: u64 = 1_000_000_000;
/// Largest per-packet wire overhead besides the MRC datagram, bytes.
pub const MAX_FRAME_OVERHEAD: u32 = 1024;
/// Most EVs one QP may have (active and backup over all planes; the engine's limit).
pub const MAX_EVS_PER_QP: u32 = 4096;
/// Largest transfer (one RDMA message).
pub const MAX_TRANSFER: u64 = (1 << 32) - 1;

/// A time in µs must be a finite number in `[lo, hi]`.
fn time_in(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= lo && v <= hi {
        return Ok(());
    }
    let low = if lo > 0.0 { "> 0" } else { ">= 0" };
    Err(ScenarioError::new(
        field,
        format!("{v} us; use a finite time {low} and at most {hi:e} us"),
    ))
}

impl LinkCfg {
    fn check(&self, f: &str) -> Result<(), ScenarioError> {
        if !(self.gbps > 0.0 && self.gbps <= MAX_GBPS) {
            return Err(ScenarioError::new(
                format!("{f}.gbps"),
                format!("{} Gbit/s; use a rate in (0, {MAX_GBPS}]", self.gbps),
            ));
        }
        if self.latency_ns > MAX_LATENCY_NS {
            return Err(ScenarioError::new(
                format!("{f}.latency_ns"),
                format!(
                    "{} ns; use 0..={MAX_LATENCY_NS} (propagation plus switch latency, e.g. 1000)",
                    self.latency_ns
                ),
            ));
        }
        if let Some(b) = self.buffer_bytes
            && !(1..=MAX_BUFFER_BYTES).contains(&b)
        {
            return Err(ScenarioError::new(
                format!("{f}.buffer_bytes"),
                format!("{b} bytes; use 1..={MAX_BUFFER_BYTES} (or leave it out for 1 BDP)"),
            ));
        }
        Ok(())
    }
}

impl TopoKind {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Self::TwoTier => "two_tier",
            Self::ThreeTier => "three_tier",
            Self::Htsim => "htsim",
        }
    }
}

fn check_failure(at: &str, f: &FailureCfg) -> Result<(), ScenarioError> {
    time_in(&format!("{at}.at_us"), f.at_us, 0.0, MAX_TIME_US)?;
    if let Some(u) = f.until_us {
        time_in(&format!("{at}.until_us"), u, 0.0, MAX_TIME_US)?;
        if u <= f.at_us {
            return Err(ScenarioError::new(
                format!("{at}.until_us"),
                format!("{u} us is not later than at_us = {} us", f.at_us),
            ));
        }
    }
    let need = |ok: bool, field: &str, what: &str| {
        if ok {
            Ok(())
        } else {
            Err(ScenarioError::new(
                format!("{at}.{field}"),
                what.to_string(),
            ))
        }
    };
    match f.kind {
        FailureKind::LinkDown | FailureKind::LinkUp => need(
            f.link.is_some(),
            "link",
            "needs link = { tier = \"host\" | \"t0_t1\" | \"t1_t2\", ... }",
        ),
        FailureKind::LinkFlap => {
            need(f.link.is_some(), "link", "needs link = { tier = ..., ... }")?;
            need(
                f.period_us
                    .is_some_and(|p| p.is_finite() && p > 0.0 && p <= MAX_TIME_US),
                "period_us",
                "needs a positive, finite period_us",
            )?;
            need(
                f.duty.is_some_and(|d| d > 0.0 && d < 1.0),
                "duty",
                "needs duty in (0, 1): the fraction of each period the link is up",
            )?;
            need(
                f.until_us.is_some(),
                "until_us",
                "needs until_us: when flapping stops (the link stays up)",
            )
        }
        FailureKind::SwitchDown | FailureKind::SwitchUp => need(
            f.switch.is_some_and(|s| s.tier <= 2),
            "switch",
            "needs switch = { tier = 0 | 1 | 2, plane = P, index = I }",
        ),
        FailureKind::PlaneDown => need(f.plane.is_some(), "plane", "needs plane = P"),
        FailureKind::NicPortDown => {
            need(f.plane.is_some(), "plane", "needs plane = P")?;
            need(f.host.is_some(), "host", "needs host = H")
        }
        FailureKind::LinkLoss => {
            need(f.link.is_some(), "link", "needs link = { tier = ..., ... }")?;
            need(
                f.rate.is_some_and(|r| (0.0..=1.0).contains(&r)),
                "rate",
                "needs rate in [0, 1]",
            )
        }
        FailureKind::LinkSlow => {
            need(f.link.is_some(), "link", "needs link = { tier = ..., ... }")?;
            need(
                f.fraction.is_some_and(|r| r > 0.0 && r <= 1.0),
                "fraction",
                "needs fraction in (0, 1]",
            )
        }
    }
}
