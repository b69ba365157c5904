//! Loading and checking a scenario as strictly as a compiler: every number in range, every field applying where
//! it stands (a field that would be ignored is an error naming it and what to write instead), every time
//! inside the run, every threshold computable by the run as configured.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use super::failures::check_repairs;
use super::{
    FailureCfg, LinkCfg, LinkTier, Scenario, ScenarioError, Threshold, TopoKind, WorkloadKind,
};
use crate::metrics::{self, Needs};

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

impl WorkloadKind {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Permutation => "permutation",
            Self::AllToAll => "all_to_all",
            Self::Incast => "incast",
            Self::RingAllreduce => "ring_allreduce",
            Self::TreeAllreduce => "tree_allreduce",
            Self::Htsim => "htsim",
        }
    }
}

impl LinkTier {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Self::Host => "host",
            Self::T0T1 => "t0_t1",
            Self::T1T2 => "t1_t2",
        }
    }
}

pub(super) fn err(field: impl Into<String>, problem: impl Into<String>) -> ScenarioError {
    ScenarioError::new(field, problem)
}

/// A time in µs must be a finite number in `[lo, hi]`.
pub(super) fn time_in(field: &str, v: f64, lo: f64, hi: f64) -> Result<(), ScenarioError> {
    if v.is_finite() && v >= lo && v <= hi {
        return Ok(());
    }
    let low = if lo > 0.0 { "> 0" } else { ">= 0" };
    Err(err(
        field,
        format!("{v} us; use a finite time {low} and at most {hi:e} us"),
    ))
}

impl LinkCfg {
    fn check(&self, f: &str, host_tier: bool) -> Result<(), ScenarioError> {
        if !(self.gbps > 0.0 && self.gbps <= MAX_GBPS) {
            return Err(err(
                format!("{f}.gbps"),
                format!("{} Gbit/s; use a rate in (0, {MAX_GBPS}]", self.gbps),
            ));
        }
        if self.latency_ns > MAX_LATENCY_NS {
            return Err(err(
                format!("{f}.latency_ns"),
                format!(
                    "{} ns; use 0..={MAX_LATENCY_NS} (propagation plus switch latency, e.g. 1000)",
                    self.latency_ns
                ),
            ));
        }
        for (name, v) in [
            ("buffer_bytes", self.buffer_bytes),
            ("up_buffer_bytes", self.up_buffer_bytes),
        ] {
            if let Some(b) = v
                && !(1..=MAX_BUFFER_BYTES).contains(&b)
            {
                return Err(err(
                    format!("{f}.{name}"),
                    format!("{b} bytes; use 1..={MAX_BUFFER_BYTES} (or leave it out for 1 BDP)"),
                ));
            }
        }
        if host_tier && self.up_buffer_bytes.is_some() {
            return Err(err(
                format!("{f}.up_buffer_bytes"),
                "does not apply to host links: the port towards the fabric is the NIC's, which never \
                 queues more than one frame; give buffer_bytes for the T0's port to the host",
            ));
        }
        Ok(())
    }
}

impl Scenario {
    /// Reads and checks a scenario file; `topology.file` and `workload.file` are relative to its folder.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = crate::plan::read_regular(path, "scenario", crate::plan::MAX_DATA_FILE)?;
        let mut s = Self::parse(&text)?;
        s.base_dir = Some(path.parent().unwrap_or(Path::new(".")).to_path_buf());
        Ok(s)
    }

    /// Where a file the scenario names lies: relative to the scenario's folder.
    pub fn resolve(&self, f: &Path) -> PathBuf {
        match &self.base_dir {
            Some(d) => d.join(f),
            None => f.to_path_buf(),
        }
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
            err(field, e.to_string().trim().to_string())
        })?;
        s.check()?;
        Ok(s)
    }

    /// Checks every field on its own and against the others (but not against the fabric's shape, which may
    /// come from a file: see `crate::plan`).
    pub fn check(&self) -> Result<(), ScenarioError> {
        self.check_topology()?;
        self.check_transport()?;
        self.check_run()?;
        self.check_workload()?;
        for (i, f) in self.failures.iter().enumerate() {
            self.check_failure(&format!("failures[{i}]"), f)?;
        }
        check_repairs("failures", &self.failures)?;
        self.check_sweep()?;
        for (i, th) in self.validate.iter().enumerate() {
            self.check_threshold(i, th)?;
        }
        Ok(())
    }

    fn check_topology(&self) -> Result<(), ScenarioError> {
        let t = &self.topology;
        if !(1..=16).contains(&t.planes) {
            return Err(err(
                "topology.planes",
                format!("{} planes; use 1..=16", t.planes),
            ));
        }
        let counts = [
            ("hosts_per_t0", t.hosts_per_t0),
            ("t0", t.t0),
            ("t1", t.t1),
            ("pods", t.pods),
            ("t2_per_t1", t.t2_per_t1),
        ];
        let kind = t.kind.name();
        for (f, v) in counts {
            let needed = match t.kind {
                TopoKind::TwoTier => !matches!(f, "pods" | "t2_per_t1"),
                TopoKind::ThreeTier => true,
                TopoKind::Htsim => false,
            };
            if needed && !(1..=MAX_COUNT).contains(&v) {
                return Err(err(
                    format!("topology.{f}"),
                    format!(
                        "{v}; use 1..={MAX_COUNT} for kind = \"{kind}\" (a switch has at most {MAX_COUNT} \
                         ports a side)"
                    ),
                ));
            }
            if !needed && v != 0 {
                let fix = match t.kind {
                    TopoKind::Htsim => "the .topo file gives the shape; leave it out".to_string(),
                    _ => format!(
                        "{f} exists only in three-tier fabrics: use kind = \"three_tier\" or leave it out"
                    ),
                };
                return Err(err(
                    format!("topology.{f}"),
                    format!("does not apply to kind = \"{kind}\" (it would be ignored); {fix}"),
                ));
            }
        }
        match (t.kind, &t.file) {
            (TopoKind::Htsim, None) => {
                return Err(err(
                    "topology.file",
                    "kind = \"htsim\" needs file = \"path/to/x.topo\"",
                ));
            }
            (TopoKind::TwoTier | TopoKind::ThreeTier, Some(_)) => {
                return Err(err(
                    "topology.file",
                    format!(
                        "does not apply to kind = \"{kind}\" (it would be ignored); use kind = \"htsim\" to \
                         import a .topo file"
                    ),
                ));
            }
            _ => {}
        }
        for (f, l, tier) in [
            ("host_link", t.host_link, LinkTier::Host),
            ("t0_t1_link", t.t0_t1_link, LinkTier::T0T1),
            ("t1_t2_link", t.t1_t2_link, LinkTier::T1T2),
        ] {
            let Some(l) = l else { continue };
            if t.kind == TopoKind::Htsim {
                return Err(err(
                    format!("topology.{f}"),
                    "does not apply to kind = \"htsim\" (it would be ignored): the .topo file gives each \
                     tier's Downlink_speed_Gbps, latencies and queues",
                ));
            }
            if t.kind == TopoKind::TwoTier && tier == LinkTier::T1T2 {
                return Err(err(
                    format!("topology.{f}"),
                    "does not apply to kind = \"two_tier\" (it would be ignored): T1-T2 links exist only \
                     in three-tier fabrics",
                ));
            }
            l.check(&format!("topology.{f}"), tier == LinkTier::Host)?;
        }
        let q = &t.queue;
        if !(0.0..=1.0).contains(&q.ecn_kmin) || !(q.ecn_kmin..=1.0).contains(&q.ecn_kmax) {
            return Err(err(
                "topology.queue.ecn_kmin",
                "need 0 <= ecn_kmin <= ecn_kmax <= 1 (fractions of the buffer)",
            ));
        }
        if !(q.buffer_bdp > 0.0 && q.buffer_bdp <= 1000.0) {
            return Err(err("topology.queue.buffer_bdp", "must be in (0, 1000]"));
        }
        if !(1..=4096).contains(&q.trimmed_bytes) {
            return Err(err(
                "topology.queue.trimmed_bytes",
                format!(
                    "{} bytes; use 1..=4096 (64 as htsim, 130 for a real Ethernet/IPv6/UDP frame)",
                    q.trimmed_bytes
                ),
            ));
        }
        if q.header_buffer_bytes.is_some_and(|b| b == 0 || b > 1 << 40) {
            return Err(err(
                "topology.queue.header_buffer_bytes",
                "must be in 1..=1 TiB (leave it out for the port's data buffer)",
            ));
        }
        Ok(())
    }

    fn check_transport(&self) -> Result<(), ScenarioError> {
        let tr = &self.transport;
        if !(256..=65000).contains(&tr.mtu) {
            return Err(err(
                "transport.mtu",
                format!("{} payload bytes; use 256..=65000", tr.mtu),
            ));
        }
        if tr.frame_overhead > MAX_FRAME_OVERHEAD {
            return Err(err(
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
            return Err(err(
                "transport.evs_per_plane",
                format!(
                    "{e}; use at least 1 (or leave it out for one per path), and at most {MAX_EVS_PER_QP} \
                     EVs over all planes"
                ),
            ));
        }
        let active = tr.evs_per_plane.unwrap_or(0);
        if evs(active).saturating_add(evs(tr.backup_evs_per_plane)) > MAX_EVS_PER_QP {
            return Err(err(
                "transport.backup_evs_per_plane",
                format!(
                    "{}; (evs_per_plane + backup_evs_per_plane) x planes must be at most {MAX_EVS_PER_QP}",
                    tr.backup_evs_per_plane
                ),
            ));
        }
        for (f, v) in [
            ("base_rtt_ns", tr.base_rtt_ns),
            ("reorder_ns", tr.reorder_ns),
        ] {
            if let Some(v) = v
                && !(1..=MAX_RTT_NS).contains(&v)
            {
                return Err(err(
                    format!("transport.{f}"),
                    format!(
                        "{v} ns; use 1..={MAX_RTT_NS} (or leave it out for the computed default)"
                    ),
                ));
            }
        }
        if let Some(x) = tr.max_cwnd_bdp
            && !(x.is_finite() && (0.1..=100.0).contains(&x))
        {
            return Err(err(
                "transport.max_cwnd_bdp",
                format!(
                    "{x}; use a number of BDPs in 0.1..=100 (or leave it out for {})",
                    super::DEFAULT_MAX_CWND_BDP
                ),
            ));
        }
        Ok(())
    }

    fn check_run(&self) -> Result<(), ScenarioError> {
        let r = &self.run;
        time_in("run.limit_us", r.limit_us, f64::MIN_POSITIVE, MAX_TIME_US)?;
        time_in("run.bin_us", r.bin_us, f64::MIN_POSITIVE, MAX_TIME_US)?;
        time_in("run.settle_us", r.settle_us, 0.0, MAX_TIME_US)?;
        if r.bin_us > r.limit_us {
            return Err(err(
                "run.bin_us",
                format!(
                    "{} us is longer than the run (limit_us = {}): the timelines would have one bin; use a \
                     bin_us below limit_us",
                    r.bin_us, r.limit_us
                ),
            ));
        }
        if r.limit_us / r.bin_us > 1e6 {
            return Err(err(
                "run.bin_us",
                "more than a million bins; use a larger bin_us",
            ));
        }
        Ok(())
    }

    fn check_workload(&self) -> Result<(), ScenarioError> {
        let w = &self.workload;
        let kind = w.kind.name();
        // Which optional fields each kind reads; any other one given would be ignored.
        let given = [
            ("bytes", w.bytes != 0),
            ("hosts", w.hosts.is_some()),
            ("start_us", w.start_us != 0.0),
            ("senders", w.senders != 0),
            ("sources", w.sources.is_some()),
            ("target", w.target != 0),
            ("victim", w.victim.is_some()),
            ("compute_us", w.compute_us != 0.0),
            ("file", w.file.is_some()),
        ];
        let reads: &[&str] = match w.kind {
            WorkloadKind::Permutation | WorkloadKind::AllToAll => &["bytes", "hosts", "start_us"],
            WorkloadKind::Incast => &[
                "bytes", "start_us", "senders", "sources", "target", "victim",
            ],
            WorkloadKind::RingAllreduce | WorkloadKind::TreeAllreduce => {
                &["bytes", "hosts", "start_us", "compute_us"]
            }
            WorkloadKind::Htsim => &["file"],
        };
        for (f, g) in given {
            if g && !reads.contains(&f) {
                let fix = match (w.kind, f) {
                    (WorkloadKind::Htsim, _) => {
                        "the connection matrix gives every flow's size, hosts and start".to_string()
                    }
                    (_, "senders" | "sources" | "target" | "victim") => {
                        format!("{f} belongs to kind = \"incast\"")
                    }
                    (_, "compute_us") => {
                        "compute_us belongs to kind = \"ring_allreduce\" or \"tree_allreduce\""
                            .to_string()
                    }
                    (_, "file") => "file belongs to kind = \"htsim\"".to_string(),
                    (WorkloadKind::Incast, "hosts") => {
                        "an incast names its hosts: senders = N or sources = [..], and target"
                            .to_string()
                    }
                    _ => "leave it out".to_string(),
                };
                return Err(err(
                    format!("workload.{f}"),
                    format!("does not apply to kind = \"{kind}\" (it would be ignored); {fix}"),
                ));
            }
        }
        if w.kind != WorkloadKind::Htsim && !(1..=MAX_TRANSFER).contains(&w.bytes) {
            return Err(err(
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
            return Err(err(
                "workload.victim.bytes",
                format!("{} bytes; use 1..={MAX_TRANSFER}", v.bytes),
            ));
        }
        if w.kind == WorkloadKind::Htsim && w.file.is_none() {
            return Err(err(
                "workload.file",
                "kind = \"htsim\" needs file = \"path/to/x.cm\"",
            ));
        }
        if w.kind == WorkloadKind::Incast {
            match (w.senders, &w.sources) {
                (0, None) => {
                    return Err(err(
                        "workload.senders",
                        "an incast needs senders = N (hosts after the target) or sources = [..]",
                    ));
                }
                (n, Some(_)) if n != 0 => {
                    return Err(err(
                        "workload.senders",
                        "give senders = N or sources = [..], not both (sources would win silently)",
                    ));
                }
                (_, Some(s)) if s.is_empty() => {
                    return Err(err("workload.sources", "lists no host; name the senders"));
                }
                _ => {}
            }
        }
        if let Some(h) = w.hosts
            && h < 2
        {
            return Err(err(
                "workload.hosts",
                format!("{h}; a workload needs at least 2 hosts (or leave it out for all)"),
            ));
        }
        time_in("workload.start_us", w.start_us, 0.0, MAX_TIME_US)?;
        time_in("workload.compute_us", w.compute_us, 0.0, MAX_TIME_US)?;
        if w.start_us >= self.run.limit_us {
            return Err(err(
                "workload.start_us",
                format!(
                    "{} us is not before the end of the run (run.limit_us = {}): nothing would be sent; \
                     start earlier or raise limit_us",
                    w.start_us, self.run.limit_us
                ),
            ));
        }
        Ok(())
    }

    fn check_sweep(&self) -> Result<(), ScenarioError> {
        let mut names = BTreeSet::new();
        for (si, set) in self.sweep.failure_sets.iter().enumerate() {
            let field = format!("sweep.failure_sets[{si}].name");
            let ok = !set.name.is_empty()
                && set.name.len() <= 64
                && set
                    .name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
                && !set.name.starts_with('.');
            if !ok {
                return Err(err(
                    field,
                    format!(
                        "`{}`; names name the run folders: use 1 to 64 letters, digits, '-', '_' or '.'",
                        set.name
                    ),
                ));
            }
            if !names.insert(set.name.as_str()) {
                return Err(err(
                    field,
                    format!("`{}` twice; every failure set needs its own name", set.name),
                ));
            }
            for (i, f) in set.failures.iter().enumerate() {
                self.check_failure(&format!("sweep.failure_sets[{si}].failures[{i}]"), f)?;
            }
            // The scenario's own failures apply in every run of the sweep, before the set's.
            let combined: Vec<FailureCfg> =
                self.failures.iter().chain(&set.failures).cloned().collect();
            check_repairs(&format!("sweep.failure_sets[{si}].failures"), &combined)?;
        }
        let mut seeds = BTreeSet::new();
        for (i, s) in self.sweep.seeds.iter().enumerate() {
            if !seeds.insert(*s) {
                return Err(err(
                    format!("sweep.seeds[{i}]"),
                    format!("seed {s} twice; each seed would run (and be counted) twice"),
                ));
            }
        }
        Ok(())
    }

    /// Whether every run of the scenario (each failure set of a sweep) has failures to compare against.
    fn always_fails(&self) -> bool {
        if self.sweep.failure_sets.is_empty() {
            !self.failures.is_empty()
        } else {
            !self.failures.is_empty()
                || self
                    .sweep
                    .failure_sets
                    .iter()
                    .all(|s| !s.failures.is_empty())
        }
    }

    /// Whether some run (the scenario, or one of its failure sets) has failures.
    fn ever_fails(&self) -> bool {
        !self.failures.is_empty()
            || self
                .sweep
                .failure_sets
                .iter()
                .any(|s| !s.failures.is_empty())
    }

    fn always_fails_a_nic(&self) -> bool {
        let any = |fs: &[FailureCfg]| fs.iter().any(|f| f.failed_nic_host().is_some());
        if self.sweep.failure_sets.is_empty() {
            any(&self.failures)
        } else {
            any(&self.failures) || self.sweep.failure_sets.iter().all(|s| any(&s.failures))
        }
    }

    fn check_threshold(&self, i: usize, th: &Threshold) -> Result<(), ScenarioError> {
        let Some(m) = metrics::find(&th.metric) else {
            let names: Vec<&str> = metrics::METRICS.iter().map(|m| m.name).collect();
            return Err(err(
                format!("validate[{i}].metric"),
                format!(
                    "unknown metric `{}`; use one of {}",
                    th.metric,
                    names.join(", ")
                ),
            ));
        };
        if th.min.is_none() && th.max.is_none() {
            return Err(err(format!("validate[{i}]"), "give min, max or both"));
        }
        for (f, v) in [("min", th.min), ("max", th.max)] {
            if v.is_some_and(|x| !x.is_finite()) {
                return Err(err(
                    format!("validate[{i}].{f}"),
                    "must be a finite number; leave it out for no bound on this side",
                ));
            }
        }
        if let (Some(a), Some(b)) = (th.min, th.max)
            && a > b
        {
            return Err(err(
                format!("validate[{i}].min"),
                format!("min {a} is above max {b}; no value could pass"),
            ));
        }
        let field = format!("validate[{i}].metric");
        let name = m.name;
        let baseline_off = || {
            err(
                &field,
                format!(
                    "`{name}` compares with the healthy baseline run, but run.baseline = false; set \
                     run.baseline = true or drop this threshold"
                ),
            )
        };
        match m.needs {
            Needs::Run => Ok(()),
            Needs::Failures if !self.always_fails() => Err(err(
                &field,
                format!(
                    "`{name}` looks at failure windows, but the scenario (or one of its failure sets) has no \
                     failures; add [[failures]] or drop this threshold"
                ),
            )),
            Needs::Baseline if !self.run.baseline => Err(baseline_off()),
            Needs::Baseline if !self.always_fails() => Err(err(
                &field,
                format!(
                    "`{name}` compares a run with failures with its healthy baseline, but the scenario (or \
                     one of its failure sets) has no failures; add [[failures]] or drop this threshold"
                ),
            )),
            Needs::NicFailure if !self.run.baseline => Err(baseline_off()),
            Needs::NicFailure if !self.always_fails_a_nic() => Err(err(
                &field,
                format!(
                    "`{name}` looks at the transfers of hosts whose NIC port failed, but no failure names \
                     one; add a nic_port_down (or a host link_down with host = H) or drop this threshold"
                ),
            )),
            Needs::Victim if self.workload.victim.is_none() => Err(err(
                &field,
                format!(
                    "`{name}` needs an incast victim flow: add workload.victim = {{ src, dst, bytes }} or \
                     drop this threshold"
                ),
            )),
            Needs::Healthy if !self.run.baseline && self.ever_fails() => Err(err(
                &field,
                format!(
                    "`{name}` looks at the run without failures, which this scenario makes only with \
                     run.baseline = true; set it or drop this threshold"
                ),
            )),
            Needs::Victim if !self.run.baseline => Err(err(
                &field,
                format!(
                    "`{name}` compares the victim with its run alone, which run.baseline = false skips; set \
                     run.baseline = true or drop this threshold"
                ),
            )),
            _ => Ok(()),
        }
    }
}
