//! A run on one thread in phases of two lookaheads: the leaves' side and the spines' side take turns.
//!
//! The fabric splits in two sides: the leaves' (hosts and T0s) and the spines' (T1s and T2s). Every link
//! between the sides is a switch-to-switch link, at least one lookahead `L` long (par.rs), and the leaves'
//! positions reach one another only through the spines. So an event at a leaf at `t` can have been caused by a
//! spine event at `t - L` at the latest, and a spine event by a leaf event at `t - L`. The sides then run in
//! staggered phases of `2L`: the spines up to `g + L`, the leaves over `[g, g + 2L)` (what reaches them before
//! `g + 2L` left a spine before `g + L`), the spines up to `g + 3L`, the leaves over `[g + 2L, g + 4L)`, and so
//! on. Each side's events go to a queue of its own; an event for the other side is at least `L` ahead, so it is
//! never earlier than where that side stands.
//!
//! What this buys: window.rs runs each leaf position's events of a window together, so that its hosts' state
//! stays in cache between them; but at 8,192 hosts the hosts' state outgrows the cache, and each window reads
//! it again from memory. A phase of two lookaheads reads it once for two. By a lackey trace of a 128-host
//! `scale-8192-perm` (windows 15 to 30), two consecutive windows touch 1.21 times the cache lines one does.
//!
//! The leaves' phases go by position (window.rs), and so do the spines' on a fabric of two tiers (no link joins
//! two spines, so a spine reaches no other inside a phase); with T2s the spines' phases go in time order. Windows
//! start on a grid of `2L` (par.rs `grid_after`), in every way of running, so the run stops at the same point
//! in each: the first point of the grid after the last transfer finished, or the limit.

use super::*;

/// Which side of the fabric each event runs on, and the other side's queue while one side runs.
#[derive(Debug, Default)]
pub(super) struct Phases {
    /// Per port: bit 0 set when its end of serialization is a spine's event, bit 1 when its arrivals are.
    /// Empty: one queue, no phases.
    side: Vec<u8>,
    /// The queue of the side not running.
    pub(super) other: EventQueue,
    /// The spines' side is running.
    spine: bool,
    /// No link joins two spines (a fabric of two tiers): the spines' phases too run by position.
    spines_apart: bool,
}

/// Whether node `n` is a spine (T1 or T2).
fn is_spine(topo: &Topology, n: u32) -> bool {
    n >= topo.hosts && topo.sw[(n - topo.hosts) as usize].tier > 0
}

impl Phases {
    /// Phases on `topo` with lookahead `la`, the spines' queue empty; none if some link breaks the premise:
    /// one that joins the sides in less than `la`, or one inside the leaves' side that is not a host's (it
    /// could join two positions in less than a phase).
    pub(super) fn new(topo: &Topology, la: u64) -> Option<Self> {
        let fits =
            topo.ports
                .iter()
                .all(|p| match (is_spine(topo, p.from), is_spine(topo, p.to)) {
                    (false, false) => matches!(p.kind, PortKind::HostUp | PortKind::T0Down),
                    (a, b) => a == b || p.latency_ps >= la,
                });
        if !fits {
            return None;
        }
        let side: Vec<u8> = topo
            .ports
            .iter()
            .map(|p| u8::from(is_spine(topo, p.from)) | u8::from(is_spine(topo, p.to)) << 1)
            .collect();
        let spines_apart = side.iter().all(|&s| s != 3);
        let other = if spines_apart {
            EventQueue::with_slot_shift(KEY_MASK, window::SLOT_SHIFT)
        } else {
            EventQueue::new(KEY_MASK)
        };
        Some(Self {
            side,
            other,
            spine: false,
            spines_apart,
        })
    }

    /// Whether the spines' phases run by position.
    pub(super) fn spines_apart(&self) -> bool {
        self.spines_apart
    }

    /// Whether event `e` belongs to the side not running (always false without phases).
    #[inline]
    pub(super) fn crosses(&self, e: u64) -> bool {
        let bit = match e >> 61 {
            EV_TXDONE => 1,
            EV_ARRIVE => 2,
            _ => return self.spine,
        };
        match self.side.get(e as u32 as usize) {
            Some(s) => (s & bit != 0) != self.spine,
            None => false,
        }
    }
}

impl Sim {
    /// Runs the spines' events before `end`: by position when no link joins two spines (each spine then
    /// reaches no other inside the phase), else in time order.
    fn run_spines(&mut self, end: u64) -> u64 {
        std::mem::swap(&mut self.q, &mut self.ph.other);
        self.ph.spine = true;
        let n = if self.ph.spines_apart {
            self.run_window_by_position(end)
        } else {
            self.run_in_time_order(end)
        };
        self.ph.spine = false;
        std::mem::swap(&mut self.q, &mut self.ph.other);
        n
    }

    /// The earliest pending event on either side.
    fn next_either(&self) -> Option<u64> {
        match (self.q.next_time(), self.ph.other.next_time()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }
}

/// Runs `sim` on one thread by phases (see the module doc): as par.rs `sequential`, with the same result.
pub(super) fn sequential(
    sim: &mut Sim,
    la: u64,
    limit: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> (u64, u64) {
    let span = 2 * la;
    let stop = limit.saturating_add(1);
    let mut events = 0;
    // Both sides have run every event before `at`, a point of the grid.
    let mut at = 0;
    while let Some(t) = sim.next_either() {
        if t > limit || (sim.remaining == 0 && t >= at) {
            break;
        }
        let mut g = t / span * span;
        events += sim.run_spines(g.saturating_add(la).min(stop));
        loop {
            let end = g.saturating_add(span).min(stop);
            events += sim.run_window(end);
            if !progress(&sim.progress(events)) {
                return ((end - 1).min(limit), events);
            }
            let idle = sim
                .next_either()
                .is_none_or(|t| t >= end.saturating_add(span));
            if end == stop || sim.remaining == 0 || idle {
                events += sim.run_spines(end);
                at = end;
                break;
            }
            events += sim.run_spines(end.saturating_add(la).min(stop));
            g = end;
        }
    }
    (limit, events)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::scenario::TopoKind;
    use crate::topo::{links_of, shape_of, small_cfg};

    fn fabric(kind: TopoKind) -> Topology {
        let c = small_cfg(kind);
        Topology::build(shape_of(&c), &links_of(&c), &c.queue, 4200).expect("a small fabric")
    }

    fn first(t: &Topology, kind: PortKind) -> usize {
        t.ports
            .iter()
            .position(|p| p.kind == kind)
            .expect("a port of each kind")
    }

    /// Phases run only where the sides meet over links of at least a lookahead and the leaves' positions meet
    /// only through the spines; with T2s the spines run in time order.
    #[test]
    fn phases_need_the_sides_a_lookahead_apart() {
        for kind in [TopoKind::TwoTier, TopoKind::ThreeTier] {
            let topo = fabric(kind);
            let la = lookahead_ps(&topo);
            let ph = Phases::new(&topo, la).expect("a fat tree splits");
            assert_eq!(ph.spines_apart(), kind == TopoKind::TwoTier);
            // A host link that reaches a spine, faster than the lookahead.
            let mut t = topo.clone();
            let up = first(&t, PortKind::HostUp);
            let spine = t
                .ports
                .iter()
                .find(|p| p.kind == PortKind::T0Up)
                .expect("an uplink")
                .to;
            t.ports[up].to = spine;
            t.ports[up].latency_ps = la - 1;
            assert!(
                Phases::new(&t, la).is_none(),
                "{kind:?}: a host one hop from a spine"
            );
            // A link between two leaves' switches.
            let mut t = topo.clone();
            let up = first(&t, PortKind::T0Up);
            let from = t.ports[up].from;
            let other = t
                .ports
                .iter()
                .find(|p| p.kind == PortKind::T0Up && p.from != from);
            t.ports[up].to = other.expect("two leaves").from;
            assert!(Phases::new(&t, la).is_none(), "{kind:?}: two leaves joined");
        }
    }
}
