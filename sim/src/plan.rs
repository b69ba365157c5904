//! What a scenario will build, worked out before anything is allocated: the fabric's shape (from the scenario
//! or its htsim file), element counts in checked arithmetic, every reference to a plane, host, switch or link
//! checked against that shape, the imported workload, and an estimate of the memory the run will need, so a
//! scenario that cannot fit is refused with the fields to change instead of being killed by the kernel.

use crate::scenario::{FailureCfg, FailureKind, Scenario, ScenarioError, WorkloadKind};
use crate::topo::{self, Links, Shape, Sizes};
use crate::workload::{self, Workload};

/// Bytes each element of a run takes, measured with `/usr/bin/time -f %M` on runs from 256 to 4096 hosts and
/// 1 to 8 planes (see `memory_estimate_is_close` in `tests/plan.rs`).
mod cost {
    /// An endpoint with its completion queue, besides its QPs.
    pub(super) const HOST: u64 = 12_000;
    /// Per plane of an endpoint (port state, per-plane counters).
    pub(super) const HOST_PLANE: u64 = 600;
    /// A QP (one end), besides its EVs and windows.
    pub(super) const QP: u64 = 4_000;
    /// An EV of one QP end: its 80-byte state (RTT and delay included; the simulator keeps no per-EV counters)
    /// and its share of the plane lists.
    pub(super) const EV: u64 = 120;
    /// One PSN of a sender's or receiver's window in use.
    pub(super) const PSN: u64 = 48;
    /// A packet in flight (arena slot, event) and a directed port's queue state besides `Port`/`PortSpec`.
    pub(super) const PKT: u64 = 200;
    /// A transfer (and its times, trigger list and report row).
    pub(super) const TRANSFER: u64 = 160;
    /// The process before the run (binary, allocator, CLI).
    pub(super) const BASE: u64 = 6 << 20;
    /// The heap is on 2 MiB pages (src/pages.rs): the resident set grows a whole page at a time, up to one more
    /// than the bytes in use (t1-failure's peak read 13.5-13.9 MB on 4 KiB pages, 13.9-15.9 on 2 MiB pages;
    /// since windows are two lookaheads long, 15.5-16.3 in 12 runs and 18.2 once in CI, against 14.3 estimated
    /// before the event queues were counted).
    pub(super) const HUGE_PAGE: u64 = 2 << 20;
}

/// The memory a run is expected to need, by part.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MemoryEstimate {
    /// Total bytes (peak resident set).
    pub bytes: u64,
    /// (part, bytes), largest first.
    pub parts: Vec<(&'static str, u64)>,
}

/// The checked plan of a scenario.
#[derive(Debug, Clone)]
pub struct Plan {
    /// One plane's shape times the planes.
    pub shape: Shape,
    /// Port parameters per port kind.
    pub links: Links,
    /// Element counts.
    pub sizes: Sizes,
    /// Transfers.
    pub transfers: u64,
    /// QP pairs (one per ordered pair of hosts with transfers).
    pub qp_pairs: u64,
    /// EVs per QP (active and backup, all planes).
    pub evs_per_qp: u64,
    /// The htsim workload, parsed and checked against the fabric.
    pub matrix: Option<Workload>,
    /// Expected peak memory.
    pub memory: MemoryEstimate,
}

/// Active EVs per plane: the scenario's, else one per distinct path so a QP sprays over every spine (as many
/// as fit in `MAX_EVS_PER_QP` with the backups).
pub fn evs_per_plane(tr: &crate::scenario::TransportCfg, paths: u32, planes: u32) -> u16 {
    tr.evs_per_plane.unwrap_or_else(|| {
        let room = (crate::scenario::MAX_EVS_PER_QP / planes.max(1))
            .saturating_sub(u32::from(tr.backup_evs_per_plane));
        paths.min(room).clamp(1, u32::from(u16::MAX)) as u16
    })
}

/// Wire bytes of a full data packet.
pub fn frame_bytes(s: &Scenario) -> u64 {
    u64::from(s.transport.mtu + s.transport.frame_overhead)
        + mrc::wire::MAX_DATA_HEADER_LEN as u64
        + 4
}

fn read(s: &Scenario, field: &str, f: &std::path::Path) -> Result<String, ScenarioError> {
    read_regular(&s.resolve(f), field, MAX_DATA_FILE)
}

/// Most bytes of an htsim topology or connection-matrix file this reader takes.
pub(crate) const MAX_DATA_FILE: u64 = 64 << 20;

/// The text of `path`, a regular file of at most `max` bytes: anything else (a device, a FIFO, a directory, a
/// larger file) is refused before a byte is read, and no byte of it is quoted in the error (spec SEC-FILE-1).
// spec: SEC-FILE-1
pub(crate) fn read_regular(
    path: &std::path::Path,
    field: &str,
    max: u64,
) -> Result<String, ScenarioError> {
    use std::io::Read;
    let fail = |why: String| ScenarioError::new(field, format!("{}: {why}", path.display()));
    let regular = |m: &std::fs::Metadata| -> Result<(), ScenarioError> {
        if !m.is_file() {
            return Err(fail("not a regular file; give a file of text".into()));
        }
        if m.len() > max {
            return Err(fail(format!("{} bytes; at most {max} are read", m.len())));
        }
        Ok(())
    };
    // Looked at before it is opened: opening a FIFO would wait for a writer.
    regular(&std::fs::metadata(path).map_err(|e| fail(format!("cannot read: {e}")))?)?;
    let f = std::fs::File::open(path).map_err(|e| fail(format!("cannot read: {e}")))?;
    regular(
        &f.metadata()
            .map_err(|e| fail(format!("cannot read: {e}")))?,
    )?;
    let mut text = String::new();
    f.take(max + 1)
        .read_to_string(&mut text)
        .map_err(|_| fail("not UTF-8 text".into()))?;
    if text.len() as u64 > max {
        return Err(fail(format!("more than {max} bytes")));
    }
    Ok(text)
}

impl Plan {
    /// Works out and checks everything that needs the fabric's shape. Allocates nothing in proportion to the
    /// fabric (an htsim matrix is parsed: its size is the file's).
    pub fn new(s: &Scenario) -> Result<Self, ScenarioError> {
        let t = &s.topology;
        let (mut shape, links) = match (&t.file, t.kind) {
            (Some(f), crate::scenario::TopoKind::Htsim) => {
                topo::parse_htsim_topo(&read(s, "topology.file", f)?)?
            }
            _ => (topo::shape_of(t), topo::links_of(t)),
        };
        shape.planes = u32::from(t.planes);
        let sizes = shape.sizes()?;
        let hosts = sizes.hosts;
        for (i, f) in s.failures.iter().enumerate() {
            check_failure_refs(&shape, hosts, &format!("failures[{i}]"), f)?;
        }
        for (si, set) in s.sweep.failure_sets.iter().enumerate() {
            for (i, f) in set.failures.iter().enumerate() {
                let at = format!("sweep.failure_sets[{si}].failures[{i}]");
                check_failure_refs(&shape, hosts, &at, f)?;
            }
        }
        check_workload_refs(s, hosts)?;
        let (matrix, transfers, qp_pairs) = match (&s.workload.file, s.workload.kind) {
            (Some(f), WorkloadKind::Htsim) => {
                let w = workload::parse_htsim_cm(&read(s, "workload.file", f)?, hosts)?;
                let limit = (s.run.limit_us * 1e6).round() as u64;
                if let Some((i, t)) = w
                    .transfers
                    .iter()
                    .enumerate()
                    .find(|(_, t)| !t.triggered && t.start_ps >= limit)
                {
                    return Err(ScenarioError::new(
                        "workload.file",
                        format!(
                            "flow {i} ({}->{}) starts at {} us, not before the end of the run (run.limit_us \
                             = {}); raise limit_us",
                            t.src,
                            t.dst,
                            t.start_ps as f64 / 1e6,
                            s.run.limit_us
                        ),
                    ));
                }
                let mut pairs: Vec<(u32, u32)> =
                    w.transfers.iter().map(|t| (t.src, t.dst)).collect();
                pairs.sort_unstable();
                pairs.dedup();
                let n = w.transfers.len() as u64;
                (Some(w), n, pairs.len() as u64)
            }
            _ => {
                let (n, q) = workload::counts(&s.workload, hosts).unwrap_or((0, 0));
                (None, n, q)
            }
        };
        let tr = &s.transport;
        let per_plane = u64::from(evs_per_plane(tr, shape.paths_per_plane(), shape.planes));
        let evs_per_qp = (per_plane + u64::from(tr.backup_evs_per_plane)) * u64::from(shape.planes);
        let mut plan = Self {
            shape,
            links,
            sizes,
            transfers,
            qp_pairs,
            evs_per_qp,
            matrix,
            memory: MemoryEstimate {
                bytes: 0,
                parts: Vec::new(),
            },
        };
        plan.memory = plan.estimate(s);
        Ok(plan)
    }

    /// Expected peak resident memory of one run of `s` (with its baseline, which runs first and is freed).
    fn estimate(&self, s: &Scenario) -> MemoryEstimate {
        let z = &self.sizes;
        let frame = frame_bytes(s);
        let mtu = u64::from(s.transport.mtu);
        let rtt = topo::base_rtt_ps(&self.shape, &self.links, frame);
        let host_bps = self.links[0].rate_bps * u64::from(self.shape.planes);
        // A QP's window in use: one BDP of the NIC (NSCC starts there), in packets, at least 8.
        let bdp = (u128::from(rtt) * u128::from(host_bps) / 8_000_000_000_000) as u64;
        let window_pkts = (bdp / mtu.max(1)).max(8);
        let mul = |a: u64, b: u64| a.saturating_mul(b);
        let ports = mul(
            u64::from(z.ports),
            (crate::sim::PORT_BYTES + size_of::<topo::PortSpec>()) as u64 + 8,
        );
        let switches = mul(u64::from(z.switches), 24);
        let hosts = mul(
            u64::from(z.hosts),
            cost::HOST + cost::HOST_PLANE * u64::from(self.shape.planes) + 16,
        );
        let qps = mul(
            mul(self.qp_pairs, 2),
            cost::QP + cost::EV * self.evs_per_qp + cost::PSN * window_pkts,
        );
        // Packets: every busy QP's window in flight, bounded by what the fabric's buffers and wires hold.
        let fabric_pkts = mul(u64::from(z.ports), 4);
        let busy = self.qp_pairs.min(u64::from(z.hosts));
        let pkts = mul(
            mul(busy, window_pkts).min(fabric_pkts.max(window_pkts)),
            (crate::sim::PKT_BYTES as u64) + cost::PKT,
        );
        let transfers = mul(self.transfers, cost::TRANSFER);
        let bins = (s.run.limit_us / s.run.bin_us).ceil() as u64;
        let timeline = mul(bins, 8 * u64::from(self.shape.planes) + 48).saturating_mul(3);
        // A parallel run: every partition past the first holds its own copy of the ports (sim/par.rs) and of
        // the per-transfer tables.
        let positions = u64::from(self.shape.pods) * u64::from(self.shape.t0);
        let copies = (s.run.threads.max(1) as u64).min(positions.max(1)) - 1;
        let per_copy = mul(
            u64::from(z.ports),
            (crate::sim::PORT_BYTES + crate::sim::PORT_COLD_BYTES) as u64,
        )
        .saturating_add(mul(self.transfers, cost::TRANSFER));
        let mut parts = vec![
            ("ports", ports),
            ("switches", switches),
            ("endpoints", hosts),
            ("QPs", qps),
            ("packets in flight", pkts),
            ("transfers", transfers),
            ("timelines", timeline),
            ("process", cost::BASE),
            ("huge-page rounding", cost::HUGE_PAGE),
        ];
        if copies > 0 {
            parts.push(("partition copies", mul(copies, per_copy)));
        }
        // A queue per partition, and on one thread a second for the spines' side (src/sim/phases.rs).
        let queues = if copies == 0 { 2 } else { copies + 1 };
        parts.push(("event queues", mul(queues, crate::queue::WHEEL_BYTES)));
        parts.sort_by_key(|p| std::cmp::Reverse(p.1));
        let bytes = parts.iter().fold(0u64, |a, p| a.saturating_add(p.1));
        MemoryEstimate { bytes, parts }
    }

    /// Refuses the scenario when its memory estimate exceeds `limit` bytes; `source` says where the limit came
    /// from (for the message).
    pub fn check_memory(
        &self,
        s: &Scenario,
        limit: u64,
        source: &str,
    ) -> Result<(), ScenarioError> {
        if self.memory.bytes <= limit {
            return Ok(());
        }
        let parts: Vec<String> = self
            .memory
            .parts
            .iter()
            .take(3)
            .map(|(n, b)| format!("{} {n}", human_bytes(*b)))
            .collect();
        let z = &self.sizes;
        let field = match (s.topology.kind, s.workload.kind) {
            (_, WorkloadKind::AllToAll) if self.transfers > u64::from(z.hosts) * 64 => {
                "workload.kind"
            }
            (crate::scenario::TopoKind::Htsim, _) => "topology.file",
            _ => "topology",
        };
        Err(ScenarioError::new(
            field,
            format!(
                "this run needs about {} ({} hosts x {} planes, {} ports, {} QP pairs, {} transfers: {}), more \
                 than the {} {source}; use fewer hosts (topology.hosts_per_t0, topology.t0, topology.pods), \
                 planes or transfers, or pass --max-memory SIZE if the estimate is wrong for this machine",
                human_bytes(self.memory.bytes),
                z.hosts,
                self.shape.planes,
                z.ports,
                self.qp_pairs,
                self.transfers,
                parts.join(", "),
                human_bytes(limit),
            ),
        ))
    }
}

/// Bytes as `12.3 GB`.
pub fn human_bytes(b: u64) -> String {
    let units = ["B", "kB", "MB", "GB", "TB", "PB", "EB"];
    let mut v = b as f64;
    let mut u = 0;
    while v >= 1000.0 && u + 1 < units.len() {
        v /= 1000.0;
        u += 1;
    }
    if u == 0 {
        format!("{b} B")
    } else {
        format!("{v:.1} {}", units[u])
    }
}

/// Parses `--max-memory`: bytes, or a number with k, M, G, T (powers of 1000) or Ki, Mi, Gi, Ti, and an
/// optional trailing `B`.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let t = text.trim();
    let t = t.strip_suffix(['B', 'b']).unwrap_or(t);
    let split = t.find(|c: char| c.is_ascii_alphabetic()).unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let mult: u64 = match unit.to_ascii_lowercase().as_str() {
        "" => 1,
        "k" => 1_000,
        "m" => 1_000_000,
        "g" => 1_000_000_000,
        "t" => 1_000_000_000_000,
        "ki" => 1 << 10,
        "mi" => 1 << 20,
        "gi" => 1 << 30,
        "ti" => 1 << 40,
        _ => return Err(format!("--max-memory {text}: use e.g. 64G, 512M or 2Ti")),
    };
    let v: f64 = num
        .trim()
        .parse()
        .map_err(|_| format!("--max-memory {text}: use e.g. 64G, 512M or 2Ti"))?;
    if !(v.is_finite() && v > 0.0) {
        return Err(format!("--max-memory {text}: must be positive"));
    }
    Ok((v * mult as f64).min(u64::MAX as f64) as u64)
}

/// Memory this machine can give a run now (`MemAvailable`), if known.
pub fn available_memory() -> Option<u64> {
    let text = std::fs::read_to_string("/proc/meminfo").ok()?;
    let line = text.lines().find(|l| l.starts_with("MemAvailable:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

fn check_failure_refs(
    shape: &Shape,
    hosts: u32,
    at: &str,
    f: &FailureCfg,
) -> Result<(), ScenarioError> {
    if let Some(l) = &f.link {
        shape.check_link_ref(l, &format!("{at}.link"))?;
    }
    if let Some(r) = &f.switch {
        shape.check_switch_ref(r, &format!("{at}.switch"))?;
    }
    if f.kind == FailureKind::NicPortDown
        && let Some(h) = f.host
        && h >= hosts
    {
        return Err(ScenarioError::new(
            format!("{at}.host"),
            format!(
                "host {h} does not exist: the fabric has {hosts} hosts, so use 0..={}",
                hosts.saturating_sub(1)
            ),
        ));
    }
    Ok(())
}

fn check_workload_refs(s: &Scenario, hosts: u32) -> Result<(), ScenarioError> {
    let w = &s.workload;
    let host = |field: String, h: u32| {
        if h < hosts {
            Ok(())
        } else {
            Err(ScenarioError::new(
                field,
                format!(
                    "host {h} does not exist: the fabric has {hosts} hosts, so use 0..={}",
                    hosts.saturating_sub(1)
                ),
            ))
        }
    };
    if let Some(n) = w.hosts
        && n > hosts
    {
        return Err(ScenarioError::new(
            "workload.hosts",
            format!(
                "{n}; the fabric has {hosts} hosts, so use 2..={hosts} (or leave it out for all)"
            ),
        ));
    }
    if w.kind != WorkloadKind::Incast {
        return Ok(());
    }
    host("workload.target".into(), w.target)?;
    if w.senders >= hosts {
        return Err(ScenarioError::new(
            "workload.senders",
            format!(
                "{} senders; the fabric has {hosts} hosts, so at most {} besides the target",
                w.senders,
                hosts - 1
            ),
        ));
    }
    if let Some(src) = &w.sources {
        let mut seen = std::collections::BTreeSet::new();
        for (i, &h) in src.iter().enumerate() {
            let field = format!("workload.sources[{i}]");
            host(field.clone(), h)?;
            if h == w.target {
                return Err(ScenarioError::new(
                    field,
                    format!("host {h} is the target; an incast sender must be another host"),
                ));
            }
            if !seen.insert(h) {
                return Err(ScenarioError::new(
                    field,
                    format!("host {h} twice; list each sender once"),
                ));
            }
        }
    }
    if let Some(v) = w.victim {
        host("workload.victim.src".into(), v.src)?;
        host("workload.victim.dst".into(), v.dst)?;
        if v.src == v.dst {
            return Err(ScenarioError::new(
                "workload.victim.dst",
                "the victim flow needs two different hosts",
            ));
        }
    }
    Ok(())
}
