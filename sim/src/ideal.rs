//! The ideal a run is measured against: every transfer drains at the fair share of its tightest bottleneck,
//! plus one unloaded round trip. A planner reads a result as "n % from ideal" instead of guessing whether a
//! 180 µs FCT is good.
//!
//! The model (fluid, perfect load balancing, no protocol):
//! - Resources: each host's NIC out (all its planes) and in, each T0 position's uplinks (all planes) and
//!   downlinks from the spine, and in three-tier fabrics each pod's uplinks to the T2s and downlinks from them.
//!   A resource's capacity is the sum of its links' rates, with the links slowed (`link_slow`) or down
//!   (`link_down`, `switch_down`, ...) at time 0 applied; failures later in the run are not in the ideal.
//! - A transfer uses its hosts' NICs, and the T0 (pod) resources when it leaves its T0 (pod). Its wire bytes
//!   are its payload plus, per packet, the frame overhead and the largest data header.
//! - Every transfer not waiting for a trigger shares its resources with every other one (exact for workloads
//!   that start together: permutations, all-to-all, incasts); triggered transfers (collectives) have no ideal.
//! - Ideal FCT = max over its resources of (wire bytes through it / its capacity) + the base RTT (longest
//!   path, a full frame out and an ack back) − the first frame's serialization at the NIC (already counted).

use serde::Serialize;

use crate::sim::Action;
use crate::topo::{PortKind, Topology, ser_ps};
use crate::workload::Transfer;

/// The ideal completion times of a run's transfers.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct Ideal {
    /// Transfers with an ideal (not triggered).
    pub count: usize,
    /// Median ideal FCT, µs.
    pub p50_us: f64,
    /// 99th percentile ideal FCT, µs.
    pub p99_us: f64,
    /// Largest ideal FCT, µs (the ideal job time for transfers that start together).
    pub max_us: f64,
    /// Per transfer: ideal FCT in µs (`None` for triggered transfers).
    #[serde(skip)]
    pub fct_us: Vec<Option<f64>>,
}

#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Res {
    NicOut(u32),
    NicIn(u32),
    T0Up(u32, u32),
    T0Down(u32, u32),
    PodUp(u32),
    PodDown(u32),
}

/// Computes the ideal FCT of every transfer. `frame` is the wire size of a full data packet, `mtu` its
/// payload.
pub fn ideal(
    topo: &Topology,
    xfers: &[Transfer],
    actions: &[(u64, Action)],
    frame: u64,
    mtu: u64,
) -> Ideal {
    // Port rates as they are at time 0.
    let mut rate: Vec<f64> = topo.ports.iter().map(|p| p.rate_bps as f64).collect();
    for (t, a) in actions {
        if *t > 0 {
            continue;
        }
        match a {
            Action::Slow { ports, fraction } => {
                for &p in ports {
                    rate[p as usize] = topo.ports[p as usize].rate_bps as f64 * fraction;
                }
            }
            Action::Links { ports, down: true } => {
                for &p in ports {
                    rate[p as usize] = 0.0;
                    rate[topo.ports[p as usize].rev as usize] = 0.0;
                }
            }
            _ => {}
        }
    }
    let three = topo.shape.tiers() == 3;
    // Capacity of every resource, bit/s.
    let mut cap: std::collections::BTreeMap<Res, f64> = std::collections::BTreeMap::new();
    let sw = |n: u32| topo.sw[(n - topo.hosts) as usize];
    for (i, p) in topo.ports.iter().enumerate() {
        let r = rate[i];
        let key = match p.kind {
            PortKind::HostUp => Res::NicOut(p.from),
            PortKind::T0Down => Res::NicIn(p.to),
            PortKind::T0Up => {
                let s = sw(p.from);
                Res::T0Up(s.pod, s.index)
            }
            PortKind::T1Down => {
                let s = sw(p.to);
                Res::T0Down(s.pod, s.index)
            }
            PortKind::T1Up => Res::PodUp(sw(p.from).pod),
            PortKind::T2Down => Res::PodDown(sw(p.to).pod),
        };
        *cap.entry(key).or_default() += r;
    }
    let wire = |bytes: u64| -> f64 {
        let pkts = bytes.div_ceil(mtu.max(1)).max(1);
        (bytes + pkts * (frame - mtu.min(frame))) as f64 * 8.0
    };
    let uses = |t: &Transfer| -> Vec<Res> {
        let (sp, st, _) = topo.loc[t.src as usize];
        let (dp, dt, _) = topo.loc[t.dst as usize];
        let mut v = vec![Res::NicOut(t.src), Res::NicIn(t.dst)];
        if (sp, st) != (dp, dt) {
            v.push(Res::T0Up(sp, st));
            v.push(Res::T0Down(dp, dt));
        }
        if three && sp != dp {
            v.push(Res::PodUp(sp));
            v.push(Res::PodDown(dp));
        }
        v
    };
    let mut load: std::collections::BTreeMap<Res, f64> = std::collections::BTreeMap::new();
    for t in xfers.iter().filter(|t| !t.triggered) {
        let w = wire(t.bytes);
        for r in uses(t) {
            *load.entry(r).or_default() += w;
        }
    }
    let latency_ps = topo
        .base_rtt_ps
        .saturating_sub(ser_ps(frame, topo.host_rate_bps)) as f64;
    let fct_us: Vec<Option<f64>> = xfers
        .iter()
        .map(|t| {
            if t.triggered {
                return None;
            }
            let drain_s = uses(t)
                .into_iter()
                .map(|r| {
                    let c = cap.get(&r).copied().unwrap_or(0.0);
                    let l = load.get(&r).copied().unwrap_or(0.0);
                    if c > 0.0 { l / c } else { f64::INFINITY }
                })
                .fold(0.0, f64::max);
            Some(drain_s * 1e6 + latency_ps / 1e6)
        })
        .collect();
    let mut sorted: Vec<f64> = fct_us.iter().flatten().copied().collect();
    sorted.sort_by(f64::total_cmp);
    let pct = |q: f64| -> f64 {
        if sorted.is_empty() {
            return 0.0;
        }
        let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
        sorted[i.min(sorted.len() - 1)]
    };
    Ideal {
        count: sorted.len(),
        p50_us: pct(0.5),
        p99_us: pct(0.99),
        max_us: sorted.last().copied().unwrap_or(0.0),
        fct_us,
    }
}
