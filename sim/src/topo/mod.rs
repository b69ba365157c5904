//! Topologies as dense arrays: nodes and directed ports are indices, and forwarding is arithmetic.
//!
//! Hosts are nodes `0..hosts`; switches follow, plane by plane. Every plane is one copy of a (possibly
//! degenerate) three-tier tree: `pods` pods of `t0` leaves and `t1` spines each, with `t2_per_t1` super-spines
//! above every spine position. A two-tier fabric is the one-pod case without T2, where every T1 reaches every
//! T0. Static uSID forwarding becomes: a packet carries (destination host, plane, path index) and each switch
//! computes its output port from them (the path index picks the T1 and T2), with no table and no ECMP.

use crate::scenario::{
    Direction, LinkCfg, LinkRef, LinkTier, MAX_BUFFER_BYTES, MAX_GBPS, MAX_LATENCY_NS, QueueCfg,
    ScenarioError, SwitchRef, TopoKind, TopologyCfg,
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

    /// Checks that every index of a link selection exists in this shape.
    pub fn check_link_ref(&self, r: &LinkRef, field: &str) -> Result<(), ScenarioError> {
        if r.tier == LinkTier::T1T2 && self.tiers() < 3 {
            return Err(ScenarioError::new(
                format!("{field}.tier"),
                "t1_t2 links exist only in three-tier fabrics; use host or t0_t1",
            ));
        }
        let hosts = self.pods.saturating_mul(self.t0).saturating_mul(self.hpt0);
        for (f, v, n, what) in [
            ("plane", r.plane.map(u32::from), self.planes, "planes"),
            ("host", r.host, hosts, "hosts"),
            ("t0", r.t0, self.t0, "T0 switches per pod"),
            ("t1", r.t1, self.t1, "T1 switches per pod"),
            ("pod", r.pod, self.pods, "pods"),
            ("t2", r.t2, self.t2_per_t1, "T2 switches per T1 position"),
        ] {
            if let Some(v) = v
                && v >= n
            {
                return Err(ScenarioError::new(
                    format!("{field}.{f}"),
                    format!(
                        "{v} does not exist: the fabric has {n} {what}, so use 0..={}",
                        n.saturating_sub(1)
                    ),
                ));
            }
        }
        Ok(())
    }

    /// Checks that a switch reference names a switch of this shape.
    pub fn check_switch_ref(&self, r: &SwitchRef, field: &str) -> Result<(), ScenarioError> {
        let (pods, n, what) = match r.tier {
            0 => (self.pods, self.t0, "T0 per pod"),
            1 => (self.pods, self.t1, "T1 per pod"),
            2 if self.tiers() == 3 => (self.t1, self.t2_per_t1, "T2 per T1 position"),
            _ => {
                return Err(ScenarioError::new(
                    format!("{field}.tier"),
                    format!(
                        "tier {} does not exist in this {}-tier fabric",
                        r.tier,
                        self.tiers()
                    ),
                ));
            }
        };
        let plane = r.plane.map_or(0, u32::from);
        if plane >= self.planes {
            return Err(ScenarioError::new(
                format!("{field}.plane"),
                format!(
                    "plane {plane} does not exist; use 0..={}",
                    self.planes.saturating_sub(1)
                ),
            ));
        }
        if self.tiers() == 2 && r.pod.is_some() {
            return Err(ScenarioError::new(
                format!("{field}.pod"),
                "does not apply to a two-tier fabric (it has no pods); leave it out",
            ));
        }
        if self.tiers() == 3 && r.pod.is_none() {
            return Err(ScenarioError::new(
                format!("{field}.pod"),
                "a switch of a three-tier fabric needs pod = P (for a T2: its T1 position)",
            ));
        }
        let pod = r.pod.unwrap_or(0);
        if pod >= pods || r.index >= n {
            return Err(ScenarioError::new(
                field,
                format!(
                    "tier {} plane {plane} pod {pod} index {} does not exist; pod 0..={}, index 0..={} \
                     ({n} {what})",
                    r.tier,
                    r.index,
                    pods.saturating_sub(1),
                    n.saturating_sub(1)
                ),
            ));
        }
        Ok(())
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

/// Rate, delay and buffer of one kind of directed port.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PortParams {
    /// Rate in bit/s.
    pub rate_bps: u64,
    /// Propagation delay plus the sending switch's latency, in ps.
    pub latency_ps: u64,
    /// Output buffer in bytes; `None` means `buffer_bdp` BDPs.
    pub buffer: Option<u64>,
}

/// The parameters of each port kind, indexed by `PortKind as usize`.
pub type Links = [PortParams; 6];

/// Gbit/s to bit/s.
fn bps(gbps: f64) -> u64 {
    (gbps * 1e9).round() as u64
}

/// Port parameters from the scenario's per-tier links: both directions of a link alike, except the buffer of
/// the port towards the spine when `up_buffer_bytes` is given.
pub fn links_of(cfg: &TopologyCfg) -> Links {
    let p = |l: LinkCfg, up: bool| PortParams {
        rate_bps: bps(l.gbps),
        latency_ps: l.latency_ns * 1000,
        buffer: if up {
            l.up_buffer_bytes.or(l.buffer_bytes)
        } else {
            l.buffer_bytes
        },
    };
    let (h, a, c) = (
        cfg.link(LinkTier::Host),
        cfg.link(LinkTier::T0T1),
        cfg.link(LinkTier::T1T2),
    );
    // HostUp, T0Down, T0Up, T1Down, T1Up, T2Down.
    [
        p(h, false),
        p(h, false),
        p(a, true),
        p(a, false),
        p(c, true),
        p(c, false),
    ]
}

/// The shape of a two- or three-tier scenario fabric (an htsim fabric's comes from its file).
pub fn shape_of(cfg: &TopologyCfg) -> Shape {
    let three = cfg.kind == TopoKind::ThreeTier;
    Shape {
        planes: u32::from(cfg.planes),
        pods: if three { cfg.pods } else { 1 },
        t0: cfg.t0,
        t1: cfg.t1,
        t2_per_t1: if three { cfg.t2_per_t1 } else { 0 },
        hpt0: cfg.hosts_per_t0,
    }
}

/// Serialization time in ps of `bytes` at `rate_bps`.
pub fn ser_ps(bytes: u64, rate_bps: u64) -> u64 {
    (u128::from(bytes) * 8_000_000_000_000 / u128::from(rate_bps.max(1))) as u64
}

/// Unloaded RTT of the longest path in ps: a full frame out and a 128-byte ack back, every hop's latency
/// and serialization.
pub fn base_rtt_ps(shape: &Shape, links: &Links, frame: u64) -> u64 {
    let mut path = vec![PortKind::HostUp, PortKind::T0Up];
    if shape.tiers() == 3 {
        path.extend([PortKind::T1Up, PortKind::T2Down]);
    }
    path.extend([PortKind::T1Down, PortKind::T0Down]);
    path.iter()
        .map(|&k| {
            let l = links[k as usize];
            2 * l.latency_ps + ser_ps(frame, l.rate_bps) + ser_ps(128, l.rate_bps)
        })
        .sum()
}

impl Topology {
    /// Builds the topology; `frame` is the wire size of a full data packet (for the BDP).
    pub fn build(
        shape: Shape,
        links: &Links,
        queue: &QueueCfg,
        frame: u64,
    ) -> Result<Self, ScenarioError> {
        let sizes = shape.sizes()?;
        let hosts = sizes.hosts;
        let host_rate = links[PortKind::HostUp as usize].rate_bps;
        let tiers = shape.tiers();
        let max_hops = if tiers == 3 { 6 } else { 4 };
        let base_rtt_ps = base_rtt_ps(&shape, links, frame);
        let bdp = (u128::from(base_rtt_ps) * u128::from(host_rate) / 8_000_000_000_000) as f64;
        let default_buf = ((bdp * queue.buffer_bdp) as u64).max(2 * frame);
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
        let mk = |from, to, kind: PortKind, plane: u32| {
            let l = links[kind as usize];
            PortSpec {
                from,
                to,
                rev: u32::MAX,
                kind,
                plane: plane as u8,
                rate_bps: l.rate_bps,
                latency_ps: l.latency_ps,
                buffer: l.buffer.unwrap_or(default_buf),
            }
        };
        // Host NIC ports first.
        for h in 0..hosts {
            let pod = h / (shape.t0 * shape.hpt0);
            let a = (h / shape.hpt0) % shape.t0;
            for p in 0..planes {
                ports.push(mk(h, t0_node(p, pod, a), PortKind::HostUp, p));
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
                        ports.push(mk(me, h, PortKind::T0Down, p));
                    }
                    for b in 0..shape.t1 {
                        ports.push(mk(me, t1_node(p, pod, b), PortKind::T0Up, p));
                    }
                }
            }
            for pod in 0..shape.pods {
                for b in 0..shape.t1 {
                    first_port.push(ports.len() as u32);
                    let me = t1_node(p, pod, b);
                    for a in 0..shape.t0 {
                        ports.push(mk(me, t0_node(p, pod, a), PortKind::T1Down, p));
                    }
                    for c in 0..shape.t2_per_t1 {
                        ports.push(mk(me, t2_node(p, b, c), PortKind::T1Up, p));
                    }
                }
            }
            for b in 0..shape.t1 {
                for c in 0..shape.t2_per_t1 {
                    first_port.push(ports.len() as u32);
                    let me = t2_node(p, b, c);
                    for pod in 0..shape.pods {
                        ports.push(mk(me, t1_node(p, pod, b), PortKind::T2Down, p));
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
        self.forward_to(node, self.loc[dst as usize], path)
    }

    /// `forward` with the destination's location (`loc[dst]`) given: a packet carries it, so a hop reads no
    /// per-host table (at 8K hosts that table misses the cache).
    #[inline]
    pub fn forward_to(&self, node: u32, (dpod, da, slot): (u32, u32, u32), path: u32) -> u32 {
        let s = &self.shape;
        let k = (node - self.hosts) as usize;
        let id = self.sw[k];
        let fp = self.first_port[k];
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
        s.check_link_ref(r, field)?;
        let plane_ok = |p: u32| r.plane.is_none_or(|x| u32::from(x) == p);
        let mut out = Vec::new();
        match r.tier {
            LinkTier::Host => {
                for h in 0..self.hosts {
                    let (pod, a, _) = self.loc[h as usize];
                    let keep = r.host.is_none_or(|x| x == h)
                        && r.t0.is_none_or(|x| x == a)
                        && r.pod.is_none_or(|x| x == pod);
                    if keep {
                        out.extend(
                            (0..s.planes)
                                .filter(|&p| plane_ok(p))
                                .map(|p| h * s.planes + p),
                        );
                    }
                }
            }
            LinkTier::T0T1 => {
                for p in (0..s.planes).filter(|&p| plane_ok(p)) {
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
                                let keep = r.pod.is_none_or(|x| x == pod)
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
                for p in (0..s.planes).filter(|&p| plane_ok(p)) {
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
                                let keep = r.pod.is_none_or(|x| x == pod)
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
        self.shape.check_switch_ref(r, field)?;
        Ok(self.switch_node(SwitchId {
            tier: r.tier,
            plane: r.plane.unwrap_or(0),
            pod: r.pod.unwrap_or(0),
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

mod htsim;
pub use htsim::{TOPO_TIER_KEYS, parse_htsim_topo};

/// A small fabric of every kind of link, for tests: 2 planes, 2 pods (three tiers) of 3 leaves of 4 hosts, 2 T1s,
/// 2 T2s per T1.
#[cfg(test)]
pub(crate) fn small_cfg(kind: TopoKind) -> TopologyCfg {
    TopologyCfg {
        kind,
        planes: 2,
        hosts_per_t0: 4,
        t0: 3,
        t1: 2,
        pods: 2,
        t2_per_t1: 2,
        host_link: None,
        t0_t1_link: None,
        t1_t2_link: None,
        file: None,
        queue: QueueCfg::default(),
    }
}

#[cfg(test)]
mod tests;
