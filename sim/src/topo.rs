//! Topologies as dense arrays: nodes and directed ports are indices, and forwarding is arithmetic.
//!
//! Hosts are nodes `0..hosts`; switches follow, plane by plane. Every plane is one copy of a (possibly
//! degenerate) three-tier tree: `pods` pods of `t0` leaves and `t1` spines each, with `t2_per_t1` super-spines
//! above every spine position. A two-tier fabric is the one-pod case without T2, where every T1 reaches every
//! T0. Static uSID forwarding becomes: a packet carries (destination host, plane, path index) and each switch
//! computes its output port from them (the path index picks the T1 and T2), with no table and no ECMP.

use std::path::Path;

use crate::scenario::{
    Direction, LinkCfg, LinkRef, LinkTier, ScenarioError, SwitchRef, TopoKind, TopologyCfg,
};

/// What a directed port connects.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
#[repr(u8)]
pub enum PortKind {
    /// Host NIC port → T0.
    HostUp = 0,
    /// T0 → host: the last hop (no ECN).
    T0Down = 1,
    /// T0 → T1.
    T0Up = 2,
    /// T1 → T0.
    T1Down = 3,
    /// T1 → T2.
    T1Up = 4,
    /// T2 → T1.
    T2Down = 5,
}

impl PortKind {
    /// All kinds, in order.
    pub const ALL: [Self; 6] = [
        Self::HostUp,
        Self::T0Down,
        Self::T0Up,
        Self::T1Down,
        Self::T1Up,
        Self::T2Down,
    ];
    /// Short name for reports.
    pub fn name(self) -> &'static str {
        match self {
            Self::HostUp => "host_up",
            Self::T0Down => "t0_down",
            Self::T0Up => "t0_up",
            Self::T1Down => "t1_down",
            Self::T1Up => "t1_up",
            Self::T2Down => "t2_down",
        }
    }
}

/// One directed port (an output queue plus the wire behind it).
#[derive(Debug, Clone, Copy)]
pub struct PortSpec {
    /// Node it belongs to.
    pub from: u32,
    /// Node at the far end.
    pub to: u32,
    /// The opposite direction of the same link.
    pub rev: u32,
    /// Kind.
    pub kind: PortKind,
    /// Plane.
    pub plane: u8,
    /// Rate in bit/s.
    pub rate_bps: u64,
    /// Propagation delay in ps.
    pub latency_ps: u64,
    /// Buffer in bytes.
    pub buffer: u64,
}

/// The shape shared by every plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Planes.
    pub planes: u32,
    /// Pods (1 for two-tier).
    pub pods: u32,
    /// T0 per pod.
    pub t0: u32,
    /// T1 per pod.
    pub t1: u32,
    /// T2 per T1 position (0 for two-tier).
    pub t2_per_t1: u32,
    /// Hosts per T0.
    pub hpt0: u32,
}

/// Element counts of a shape, computed with checked arithmetic: every node and port index fits in a `u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sizes {
    /// Hosts.
    pub hosts: u32,
    /// Switches over all planes.
    pub switches: u32,
    /// Directed ports (two per link).
    pub ports: u32,
}

/// Most nodes (hosts and switches) a topology may have.
pub const MAX_NODES: u64 = (u32::MAX / 4) as u64;
/// Most directed ports a topology may have (indices are `u32`, with `u32::MAX` as "none").
pub const MAX_PORTS: u64 = (u32::MAX - 1) as u64;

impl Shape {
    /// Counts hosts, switches and ports without overflow; refuses shapes whose indices would not fit.
    pub fn sizes(&self) -> Result<Sizes, ScenarioError> {
        let too_big = |what: &str| {
            ScenarioError::new(
                "topology",
                format!(
                    "{what} overflows 64 bits: {} planes x {} pods x {} T0 x {} hosts per T0, {} T1, {} T2 per T1; \
                     use smaller counts",
                    self.planes, self.pods, self.t0, self.hpt0, self.t1, self.t2_per_t1
                ),
            )
        };
        // Products and sums in u64, any overflow refused.
        let prod = |xs: &[u32]| {
            xs.iter()
                .try_fold(1u64, |acc, &x| acc.checked_mul(u64::from(x)))
        };
        let sum = |xs: &[Option<u64>]| {
            xs.iter()
                .try_fold(0u64, |acc, &x| x.and_then(|x| acc.checked_add(x)))
        };
        let (p, pods) = (self.planes, self.pods);
        let hosts = prod(&[pods, self.t0, self.hpt0]).ok_or_else(|| too_big("the host count"))?;
        let switches = sum(&[
            prod(&[p, pods, self.t0]),
            prod(&[p, pods, self.t1]),
            prod(&[p, self.t1, self.t2_per_t1]),
        ])
        .ok_or_else(|| too_big("the switch count"))?;
        let nodes = sum(&[Some(hosts), Some(switches)]).ok_or_else(|| too_big("the node count"))?;
        // Two directed ports per link: host-T0, T0-T1 and T1-T2 links of every plane.
        let ports = sum(&[
            prod(&[2, p, pods, self.t0, self.hpt0]),
            prod(&[2, p, pods, self.t0, self.t1]),
            prod(&[2, p, pods, self.t1, self.t2_per_t1]),
        ])
        .ok_or_else(|| too_big("the port count"))?;
        if hosts < 2 {
            return Err(ScenarioError::new(
                "topology",
                format!("{hosts} hosts; a fabric needs at least 2"),
            ));
        }
        if nodes > MAX_NODES || ports > MAX_PORTS {
            return Err(ScenarioError::new(
                "topology",
                format!(
                    "{hosts} hosts, {nodes} nodes and {ports} directed ports; the simulator indexes at most \
                     {MAX_NODES} nodes and {MAX_PORTS} ports: use fewer hosts, switches or planes"
                ),
            ));
        }
        Ok(Sizes {
            hosts: hosts as u32,
            switches: switches as u32,
            ports: ports as u32,
        })
    }

    /// Hosts.
    pub fn hosts(&self) -> u32 {
        self.pods * self.t0 * self.hpt0
    }
    /// Switches per plane.
    pub fn switches_per_plane(&self) -> u32 {
        self.pods * (self.t0 + self.t1) + self.t1 * self.t2_per_t1
    }
    /// Tiers of switches.
    pub fn tiers(&self) -> u32 {
        if self.t2_per_t1 == 0 { 2 } else { 3 }
    }
    /// Distinct paths per plane between hosts in different pods (or leaves).
    pub fn paths_per_plane(&self) -> u32 {
        self.t1 * self.t2_per_t1.max(1)
    }
}

/// Switch identity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SwitchId {
    /// 0, 1 or 2.
    pub tier: u8,
    /// Plane.
    pub plane: u8,
    /// Pod (T0/T1) or T1 position (T2).
    pub pod: u32,
    /// Index within the pod (or T2 index above its T1 position).
    pub index: u32,
}

/// A built topology.
#[derive(Debug, Clone)]
pub struct Topology {
    /// Shape.
    pub shape: Shape,
    /// Hosts.
    pub hosts: u32,
    /// Directed ports; host `h`'s NIC port on plane `p` is `h * planes + p`.
    pub ports: Vec<PortSpec>,
    /// First port of each switch (indexed by node − hosts).
    pub first_port: Vec<u32>,
    /// Identity of each switch (indexed by node − hosts).
    pub sw: Vec<SwitchId>,
    /// Per host: (pod, T0 index in pod, slot under the T0).
    pub loc: Vec<(u32, u32, u32)>,
    /// Host link rate in bit/s.
    pub host_rate_bps: u64,
    /// Unloaded RTT of the longest path for a full packet and a small ack, in ps.
    pub base_rtt_ps: u64,
    /// Longest one-way hop count.
    pub max_hops: u32,
}

/// Gbit/s to bit/s.
fn bps(l: &LinkCfg) -> u64 {
    (l.gbps * 1e9).round() as u64
}

/// Serialization time in ps of `bytes` at `rate_bps`.
pub fn ser_ps(bytes: u64, rate_bps: u64) -> u64 {
    (u128::from(bytes) * 8_000_000_000_000 / u128::from(rate_bps.max(1))) as u64
}

impl Topology {
    /// Builds the topology; `frame` is the wire size of a full data packet (for the BDP).
    pub fn build(cfg: &TopologyCfg, frame: u64) -> Result<Self, ScenarioError> {
        let (shape, links) = match cfg.kind {
            TopoKind::TwoTier => (
                Shape {
                    planes: u32::from(cfg.planes),
                    pods: 1,
                    t0: cfg.t0,
                    t1: cfg.t1,
                    t2_per_t1: 0,
                    hpt0: cfg.hosts_per_t0,
                },
                [cfg.host_link, cfg.t0_t1_link, cfg.t1_t2_link],
            ),
            TopoKind::ThreeTier => (
                Shape {
                    planes: u32::from(cfg.planes),
                    pods: cfg.pods,
                    t0: cfg.t0,
                    t1: cfg.t1,
                    t2_per_t1: cfg.t2_per_t1,
                    hpt0: cfg.hosts_per_t0,
                },
                [cfg.host_link, cfg.t0_t1_link, cfg.t1_t2_link],
            ),
            TopoKind::Htsim => {
                let path = cfg.file.as_deref().unwrap_or(Path::new(""));
                let text = std::fs::read_to_string(path).map_err(|e| {
                    ScenarioError::new("topology.file", format!("{}: {e}", path.display()))
                })?;
                let (mut s, l) = parse_htsim_topo(&text)?;
                s.planes = u32::from(cfg.planes);
                (s, l)
            }
        };
        let sizes = shape.sizes()?;
        for (f, l) in ["host_link", "t0_t1_link", "t1_t2_link"].iter().zip(&links) {
            if l.latency_ns > crate::scenario::MAX_LATENCY_NS {
                return Err(ScenarioError::new(
                    format!("topology.{f}.latency_ns"),
                    format!(
                        "{} ns; use 0..={}",
                        l.latency_ns,
                        crate::scenario::MAX_LATENCY_NS
                    ),
                ));
            }
        }
        let hosts = sizes.hosts;
        let host_rate = bps(&links[0]);
        let tiers = shape.tiers();
        let max_hops = if tiers == 3 { 6 } else { 4 };
        let one_way: u64 = [links[0], links[1], links[2]]
            .iter()
            .take(tiers as usize)
            .map(|l| 2 * (2 * l.latency_ns * 1000 + ser_ps(frame, bps(l)) + ser_ps(128, bps(l))))
            .sum();
        // Data one way plus a small ack back.
        let base_rtt_ps = one_way;
        let bdp = (u128::from(base_rtt_ps) * u128::from(host_rate) / 8_000_000_000_000) as f64;
        let q = cfg.queue;
        let buf = |l: &LinkCfg| {
            l.buffer_bytes
                .unwrap_or(((bdp * q.buffer_bdp) as u64).max(2 * frame))
        };
        let mut ports: Vec<PortSpec> = Vec::with_capacity(sizes.ports as usize);
        let planes = shape.planes;
        let sw_pp = shape.switches_per_plane();
        let t0_node = |p: u32, pod: u32, a: u32| hosts + p * sw_pp + pod * shape.t0 + a;
        let t1_node = |p: u32, pod: u32, b: u32| {
            hosts + p * sw_pp + shape.pods * shape.t0 + pod * shape.t1 + b
        };
        let t2_node = |p: u32, b: u32, c: u32| {
            hosts + p * sw_pp + shape.pods * (shape.t0 + shape.t1) + b * shape.t2_per_t1 + c
        };
        let mk = |from, to, kind, plane: u32, l: &LinkCfg| PortSpec {
            from,
            to,
            rev: u32::MAX,
            kind,
            plane: plane as u8,
            rate_bps: bps(l),
            latency_ps: l.latency_ns * 1000,
            buffer: buf(l),
        };
        // Host NIC ports first.
        for h in 0..hosts {
            let pod = h / (shape.t0 * shape.hpt0);
            let a = (h / shape.hpt0) % shape.t0;
            for p in 0..planes {
                ports.push(mk(h, t0_node(p, pod, a), PortKind::HostUp, p, &links[0]));
            }
        }
        let mut first_port = Vec::with_capacity((planes * sw_pp) as usize);
        for p in 0..planes {
            for pod in 0..shape.pods {
                for a in 0..shape.t0 {
                    first_port.push(ports.len() as u32);
                    let me = t0_node(p, pod, a);
                    for s in 0..shape.hpt0 {
                        let h = (pod * shape.t0 + a) * shape.hpt0 + s;
                        ports.push(mk(me, h, PortKind::T0Down, p, &links[0]));
                    }
                    for b in 0..shape.t1 {
                        ports.push(mk(me, t1_node(p, pod, b), PortKind::T0Up, p, &links[1]));
                    }
                }
            }
            for pod in 0..shape.pods {
                for b in 0..shape.t1 {
                    first_port.push(ports.len() as u32);
                    let me = t1_node(p, pod, b);
                    for a in 0..shape.t0 {
                        ports.push(mk(me, t0_node(p, pod, a), PortKind::T1Down, p, &links[1]));
                    }
                    for c in 0..shape.t2_per_t1 {
                        ports.push(mk(me, t2_node(p, b, c), PortKind::T1Up, p, &links[2]));
                    }
                }
            }
            for b in 0..shape.t1 {
                for c in 0..shape.t2_per_t1 {
                    first_port.push(ports.len() as u32);
                    let me = t2_node(p, b, c);
                    for pod in 0..shape.pods {
                        ports.push(mk(me, t1_node(p, pod, b), PortKind::T2Down, p, &links[2]));
                    }
                }
            }
        }
        let mut t = Self {
            shape,
            hosts,
            ports,
            first_port,
            sw: Vec::new(),
            loc: (0..hosts)
                .map(|h| {
                    (
                        h / (shape.t0 * shape.hpt0),
                        (h / shape.hpt0) % shape.t0,
                        h % shape.hpt0,
                    )
                })
                .collect(),
            host_rate_bps: host_rate,
            base_rtt_ps,
            max_hops,
        };
        t.sw = (0..planes * sw_pp)
            .map(|k| t.switch_id(hosts + k))
            .collect();
        // Reverse directions, by arithmetic on the other end's port layout.
        for i in 0..t.ports.len() {
            let rev = t.reverse_of(i as u32);
            t.ports[i].rev = rev;
        }
        Ok(t)
    }

    /// Switch identity of node `n` (must be a switch).
    pub fn switch_id(&self, n: u32) -> SwitchId {
        let s = &self.shape;
        let k = n - self.hosts;
        let plane = (k / s.switches_per_plane()) as u8;
        let r = k % s.switches_per_plane();
        if r < s.pods * s.t0 {
            SwitchId {
                tier: 0,
                plane,
                pod: r / s.t0,
                index: r % s.t0,
            }
        } else if r < s.pods * (s.t0 + s.t1) {
            let r = r - s.pods * s.t0;
            SwitchId {
                tier: 1,
                plane,
                pod: r / s.t1,
                index: r % s.t1,
            }
        } else {
            let r = r - s.pods * (s.t0 + s.t1);
            SwitchId {
                tier: 2,
                plane,
                pod: r / s.t2_per_t1,
                index: r % s.t2_per_t1,
            }
        }
    }

    /// Node of a switch.
    pub fn switch_node(&self, id: SwitchId) -> u32 {
        let s = &self.shape;
        let base = self.hosts + u32::from(id.plane) * s.switches_per_plane();
        match id.tier {
            0 => base + id.pod * s.t0 + id.index,
            1 => base + s.pods * s.t0 + id.pod * s.t1 + id.index,
            _ => base + s.pods * (s.t0 + s.t1) + id.pod * s.t2_per_t1 + id.index,
        }
    }

    fn reverse_of(&self, port: u32) -> u32 {
        let p = self.ports[port as usize];
        let s = &self.shape;
        let planes = s.planes;
        match p.kind {
            PortKind::HostUp => {
                let h = p.from;
                let fp = self.first_port[(p.to - self.hosts) as usize];
                fp + h % s.hpt0
            }
            PortKind::T0Down => p.to * planes + u32::from(p.plane),
            PortKind::T0Up => {
                let me = self.switch_id(p.from);
                let t1 = self.first_port[(p.to - self.hosts) as usize];
                t1 + me.index
            }
            PortKind::T1Down => {
                let me = self.switch_id(p.from);
                self.first_port[(p.to - self.hosts) as usize] + s.hpt0 + me.index
            }
            PortKind::T1Up => {
                let me = self.switch_id(p.from);
                self.first_port[(p.to - self.hosts) as usize] + me.pod
            }
            PortKind::T2Down => {
                let me = self.switch_id(p.from);
                self.first_port[(p.to - self.hosts) as usize] + s.t0 + me.index
            }
        }
    }

    /// Output port at switch `node` for a packet to host `dst` on path `path`.
    #[inline]
    pub fn forward(&self, node: u32, dst: u32, path: u32) -> u32 {
        let s = &self.shape;
        let k = (node - self.hosts) as usize;
        let id = self.sw[k];
        let fp = self.first_port[k];
        let (dpod, da, slot) = self.loc[dst as usize];
        match id.tier {
            0 => {
                if dpod == id.pod && da == id.index {
                    fp + slot
                } else {
                    fp + s.hpt0 + path % s.t1
                }
            }
            1 => {
                if dpod == id.pod {
                    fp + da
                } else {
                    fp + s.t0 + (path / s.t1) % s.t2_per_t1
                }
            }
            _ => fp + dpod,
        }
    }

    /// The ports (one direction per link, towards the spine) of the links a reference selects.
    pub fn select_links(&self, r: &LinkRef, field: &str) -> Result<Vec<u32>, ScenarioError> {
        let s = &self.shape;
        let bad = |f: &str, v: u64, n: u64| {
            Err(ScenarioError::new(
                format!("{field}.{f}"),
                format!("{v} is out of range; use 0..{n}"),
            ))
        };
        if let Some(p) = r.plane
            && u32::from(p) >= s.planes
        {
            return bad("plane", u64::from(p), u64::from(s.planes));
        }
        let mut out = Vec::new();
        match r.tier {
            LinkTier::Host => {
                if let Some(h) = r.host
                    && h >= self.hosts
                {
                    return bad("host", u64::from(h), u64::from(self.hosts));
                }
                for h in 0..self.hosts {
                    if r.host.is_some_and(|x| x != h) {
                        continue;
                    }
                    for p in 0..s.planes {
                        if r.plane.is_some_and(|x| u32::from(x) != p) {
                            continue;
                        }
                        out.push(h * s.planes + p);
                    }
                }
            }
            LinkTier::T0T1 => {
                for (f, v, n) in [
                    ("t0", r.t0, s.t0),
                    ("t1", r.t1, s.t1),
                    ("pod", r.pod, s.pods),
                ] {
                    if let Some(v) = v
                        && v >= n
                    {
                        return bad(f, u64::from(v), u64::from(n));
                    }
                }
                for p in 0..s.planes {
                    for pod in 0..s.pods {
                        for a in 0..s.t0 {
                            let sw = self.switch_node(SwitchId {
                                tier: 0,
                                plane: p as u8,
                                pod,
                                index: a,
                            });
                            let fp = self.first_port[(sw - self.hosts) as usize];
                            for b in 0..s.t1 {
                                let keep = r.plane.is_none_or(|x| u32::from(x) == p)
                                    && r.pod.is_none_or(|x| x == pod)
                                    && r.t0.is_none_or(|x| x == a)
                                    && r.t1.is_none_or(|x| x == b);
                                if keep {
                                    out.push(fp + s.hpt0 + b);
                                }
                            }
                        }
                    }
                }
            }
            LinkTier::T1T2 => {
                if s.t2_per_t1 == 0 {
                    return Err(ScenarioError::new(
                        format!("{field}.tier"),
                        "t1_t2 links exist only in three-tier topologies; use host or t0_t1",
                    ));
                }
                for p in 0..s.planes {
                    for pod in 0..s.pods {
                        for b in 0..s.t1 {
                            let sw = self.switch_node(SwitchId {
                                tier: 1,
                                plane: p as u8,
                                pod,
                                index: b,
                            });
                            let fp = self.first_port[(sw - self.hosts) as usize];
                            for c in 0..s.t2_per_t1 {
                                let keep = r.plane.is_none_or(|x| u32::from(x) == p)
                                    && r.pod.is_none_or(|x| x == pod)
                                    && r.t1.is_none_or(|x| x == b)
                                    && r.t2.is_none_or(|x| x == c);
                                if keep {
                                    out.push(fp + s.t0 + c);
                                }
                            }
                        }
                    }
                }
            }
        }
        if out.is_empty() {
            return Err(ScenarioError::new(field, "selects no link"));
        }
        Ok(out)
    }

    /// Directed ports of the selected links in the given direction(s).
    pub fn directed(&self, up_ports: &[u32], d: Direction) -> Vec<u32> {
        let mut v = Vec::with_capacity(up_ports.len() * 2);
        for &p in up_ports {
            if d != Direction::Down {
                v.push(p);
            }
            if d != Direction::Up {
                v.push(self.ports[p as usize].rev);
            }
        }
        v
    }

    /// Node of a switch reference, checked.
    pub fn switch_ref(&self, r: &SwitchRef, field: &str) -> Result<u32, ScenarioError> {
        let s = &self.shape;
        let (pods, n) = match r.tier {
            0 => (s.pods, s.t0),
            1 => (s.pods, s.t1),
            _ => (s.t1, s.t2_per_t1),
        };
        if u32::from(r.plane) >= s.planes || r.pod >= pods || r.index >= n {
            return Err(ScenarioError::new(
                field,
                format!(
                    "tier {} plane {} pod {} index {} does not exist; planes 0..{}, pod 0..{pods}, index 0..{n}",
                    r.tier, r.plane, r.pod, r.index, s.planes
                ),
            ));
        }
        Ok(self.switch_node(SwitchId {
            tier: r.tier,
            plane: r.plane,
            pod: r.pod,
            index: r.index,
        }))
    }

    /// Ports (both directions) of every link of switch `node`.
    pub fn switch_links(&self, node: u32) -> Vec<u32> {
        let k = (node - self.hosts) as usize;
        let start = self.first_port[k];
        let end = self
            .first_port
            .get(k + 1)
            .copied()
            .unwrap_or(self.ports.len() as u32);
        (start..end).collect()
    }
}

/// Parses htsim's `.topo` format (`Nodes`, `Tiers`, `Podsize`, then `Tier N` sections with
/// `Downlink_speed_Gbps`, `Radix_Up`, `Radix_Down`, `Queue_Up`, `Queue_Down`, `Oversubscribed`, `Bundle`,
/// `Switch_Latency_ns`, `Downlink_Latency_ns`).
pub fn parse_htsim_topo(text: &str) -> Result<(Shape, [LinkCfg; 3]), ScenarioError> {
    let mut nodes = 0u64;
    let mut tiers = 0u64;
    let mut podsize = 0u64;
    #[derive(Default, Clone, Copy)]
    struct Tier {
        speed: f64,
        up: u64,
        down: u64,
        qdown: Option<u64>,
        bundle: u64,
        lat: u64,
        sw_lat: u64,
    }
    let mut t = [Tier::default(); 3];
    let mut cur: Option<usize> = None;
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut it = line.split_whitespace();
        let key = it.next().unwrap_or("").to_ascii_lowercase();
        let val = it.next().unwrap_or("");
        let err = |what: &str| {
            ScenarioError::new(
                format!("topology.file line {}", ln + 1),
                format!("{what} in `{line}`"),
            )
        };
        let num = || val.parse::<f64>().map_err(|_| err("expected a number"));
        let v = num()?;
        let u = v as u64;
        match key.as_str() {
            "nodes" => nodes = u,
            "tiers" => tiers = u,
            "podsize" => podsize = u,
            "tier" => {
                if u > 2 {
                    return Err(err("tier must be 0, 1 or 2"));
                }
                cur = Some(u as usize);
            }
            _ => {
                let Some(c) = cur else {
                    return Err(err("a per-tier key before any `Tier N` line"));
                };
                let tt = &mut t[c];
                match key.as_str() {
                    "downlink_speed_gbps" => tt.speed = v,
                    "radix_up" => tt.up = u,
                    "radix_down" => tt.down = u,
                    "queue_up" => {}
                    "queue_down" => tt.qdown = Some(u),
                    "oversubscribed" => {}
                    "bundle" => tt.bundle = u,
                    "switch_latency_ns" => tt.sw_lat = u,
                    "downlink_latency_ns" => tt.lat = u,
                    _ => {
                        return Err(err(
                            "unknown key; use Nodes, Tiers, Podsize, Tier, Downlink_speed_Gbps, Radix_Up, \
                             Radix_Down, Queue_Up, Queue_Down, Oversubscribed, Bundle, Switch_Latency_ns, \
                             Downlink_Latency_ns",
                        ));
                    }
                }
            }
        }
    }
    let e = |f: &str, m: &str| {
        Err(ScenarioError::new(
            format!("topology.file {f}"),
            m.to_string(),
        ))
    };
    if !(2..=3).contains(&tiers) {
        return e("Tiers", "must be 2 or 3");
    }
    let hpt0 = t[0].down;
    if hpt0 == 0 || nodes == 0 || !nodes.is_multiple_of(hpt0) {
        return e("Tier 0 Radix_Down", "must divide Nodes");
    }
    let bundle = t[0].bundle.max(1);
    let link = |x: &Tier| LinkCfg {
        gbps: if x.speed > 0.0 { x.speed } else { 100.0 },
        latency_ns: if x.lat > 0 { x.lat } else { 1000 } + x.sw_lat,
        buffer_bytes: x.qdown,
    };
    let links = [link(&t[0]), link(&t[1]), link(&t[2])];
    let shape = if tiers == 2 {
        Shape {
            planes: 1,
            pods: 1,
            t0: (nodes / hpt0) as u32,
            t1: (t[0].up / bundle).max(1) as u32,
            t2_per_t1: 0,
            hpt0: hpt0 as u32,
        }
    } else {
        let ps = if podsize == 0 { nodes } else { podsize };
        if !ps.is_multiple_of(hpt0) || !nodes.is_multiple_of(ps) {
            return e(
                "Podsize",
                "must be a multiple of Tier 0 Radix_Down and divide Nodes",
            );
        }
        Shape {
            planes: 1,
            pods: (nodes / ps) as u32,
            t0: (ps / hpt0) as u32,
            t1: (t[0].up / bundle).max(1) as u32,
            t2_per_t1: t[1].up.max(1) as u32,
            hpt0: hpt0 as u32,
        }
    };
    Ok((shape, links))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::{QueueCfg, TopologyCfg};

    fn cfg(kind: TopoKind) -> TopologyCfg {
        let l = LinkCfg {
            gbps: 100.0,
            latency_ns: 1000,
            buffer_bytes: None,
        };
        TopologyCfg {
            kind,
            planes: 2,
            hosts_per_t0: 4,
            t0: 3,
            t1: 2,
            pods: 2,
            t2_per_t1: 2,
            host_link: l,
            t0_t1_link: l,
            t1_t2_link: l,
            file: None,
            queue: QueueCfg::default(),
        }
    }

    /// Following `forward` from every host on every path reaches the destination in the expected hops, and
    /// `rev` pairs ports of the same link.
    #[test]
    fn forwarding_reaches_every_host() {
        for kind in [TopoKind::TwoTier, TopoKind::ThreeTier] {
            let t = Topology::build(&cfg(kind), 4200).unwrap();
            for (i, p) in t.ports.iter().enumerate() {
                let r = t.ports[p.rev as usize];
                assert_eq!(
                    (r.from, r.to, r.rev),
                    (p.to, p.from, i as u32),
                    "{kind:?} port {i}"
                );
            }
            for src in 0..t.hosts {
                for dst in 0..t.hosts {
                    for plane in 0..t.shape.planes {
                        for path in 0..t.shape.paths_per_plane() {
                            let mut port = src * t.shape.planes + plane;
                            let mut hops = 1;
                            while t.ports[port as usize].to >= t.hosts {
                                let node = t.ports[port as usize].to;
                                port = t.forward(node, dst, path);
                                assert_eq!(t.ports[port as usize].from, node);
                                hops += 1;
                                assert!(hops <= t.max_hops);
                            }
                            assert_eq!(t.ports[port as usize].to, dst);
                        }
                    }
                }
            }
        }
    }

    /// Issue 10.3: `t0 + t1` wrapped in u32, the size guard passed and the port arrays ate all memory.
    #[test]
    fn sizes_that_overflow_are_refused_before_allocating() {
        let mut c = cfg(TopoKind::TwoTier);
        (c.hosts_per_t0, c.t0, c.t1) = (2, 1, u32::MAX);
        let e = Topology::build(&c, 4200).unwrap_err();
        assert_eq!(e.field, "topology");
        assert!(e.problem.contains("ports"), "{e}");
        let mut c = cfg(TopoKind::ThreeTier);
        (c.pods, c.t0, c.hosts_per_t0, c.planes) = (u32::MAX, u32::MAX, u32::MAX, 16);
        let e = Topology::build(&c, 4200).unwrap_err();
        assert!(e.problem.contains("overflows"), "{e}");
    }

    #[test]
    fn htsim_topo_parses() {
        let text = "Nodes 32\nTiers 2\nPodsize 32\n\nTier 0\nDownlink_speed_Gbps 400\nRadix_Down 8\nRadix_Up 4\n\
                    Downlink_Latency_ns 500\nSwitch_Latency_ns 0\n\nTier 1\nDownlink_speed_Gbps 400\nRadix_Down 4\n";
        let (s, l) = parse_htsim_topo(text).unwrap();
        assert_eq!((s.t0, s.t1, s.hpt0, s.hosts()), (4, 4, 8, 32));
        assert_eq!((l[0].gbps, l[0].latency_ns), (400.0, 500));
        let e = parse_htsim_topo("Nodes 8\nTiers 2\nTier 0\nRadix_Dn 4\n").unwrap_err();
        assert!(e.problem.contains("unknown key"), "{e}");
    }
}
