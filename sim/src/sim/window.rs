//! A window's events by T0 position: the same run, in an order that keeps each leaf's state in cache.
//!
//! Within a window (one lookahead, par.rs) nothing done at one T0 position (a leaf in every plane, its hosts,
//! and a share of the T1s and T2s) reaches another before the window ends: only switch-to-switch links join
//! positions, and none is shorter than the lookahead. That is what lets par.rs run positions on different
//! threads; it also lets one thread run a window position by position, each position's events in the order
//! its own queue would pop them, and get the same run. In time order, at 8,192 hosts, consecutive events
//! belong to hosts far apart and each reads engine state that left the cache since that host's last event;
//! by position, a leaf's 64 hosts run their microsecond together and their state stays in cache between
//! their events.
//!
//! A failure action is global (it changes ports of every position at one instant): a window holding one runs
//! in time order. So does a run with a capture (one file written in event order) or with triggers, which
//! never has more than one partition (par.rs).

use super::*;
use crate::queue::Due;

/// Slot width of the event queue in a run by position: 4 ns (2^12 ps). Its events are appended position by
/// position, each position's across the window: with 256-ps slots, at 8,192 hosts, the lists they go to
/// outgrew the cache.
pub(super) const SLOT_SHIFT: u32 = 12;

/// How many late events ahead (the few a group has scheduled inside the window and not run yet) a late event
/// fetches the port and packet of.
const LATE_AHEAD: usize = 2;

/// The position of every event's subject, and the window being run.
#[derive(Debug, Clone, Default)]
pub(super) struct Window {
    /// Per port: the position of the node it leaves (its ends of serialization) and of the node it enters
    /// (its arrivals). Empty: windows run in time order.
    port_pos: Arc<Vec<[u16; 2]>>,
    /// Per host: its position (its timers and transfer starts).
    host_pos: Arc<Vec<u16>>,
    /// Per position: its events in the window being run.
    due: Vec<Vec<Due>>,
}

impl Window {
    /// Windows by position on `topo`, cut as par.rs cuts it into one partition per position.
    pub(super) fn by_position(topo: &Topology) -> Self {
        let positions = partitions(topo, usize::MAX);
        let parts = par::node_parts(topo, positions);
        let port_pos = topo
            .ports
            .iter()
            .map(|p| [parts[p.from as usize], parts[p.to as usize]])
            .collect();
        Self {
            port_pos: Arc::new(port_pos),
            host_pos: Arc::new(parts[..topo.hosts as usize].to_vec()),
            due: vec![Vec::new(); positions],
        }
    }

    pub(super) fn is_on(&self) -> bool {
        self.due.len() > 1
    }
}

impl Sim {
    /// `run_window` by position: takes the window's events out of the queue, groups them by position, and
    /// runs each group in queue order, merged with the events its own events schedule inside the window
    /// (which the queue keeps).
    pub(super) fn run_window_by_position(&mut self, end: u64) -> u64 {
        // Up to the start of the queue's slot that holds `end` by position, the rest in time order: what the
        // window schedules for after its end then never lands in a slot the queue has drained.
        let cut = self.q.slot_start(end);
        let mut w = std::mem::take(&mut self.win);
        let mut global = false;
        let xfers = &self.xfers;
        let Window {
            port_pos,
            host_pos,
            due,
        } = &mut w;
        let group = |e: u64| {
            let id = e as u32 as usize;
            usize::from(match e >> 61 {
                EV_TXDONE => port_pos[id][0],
                EV_ARRIVE => port_pos[id][1],
                EV_TIMER => host_pos[id],
                EV_ACTION => {
                    global = true;
                    0
                }
                _ => host_pos[xfers[id].src as usize],
            })
        };
        self.q.drain_before(cut, group, due);
        if global {
            // A failure action changes every position at one instant: this window runs in time order, as one
            // group (sorted below like any other).
            let (first, rest) = w.due.split_at_mut(1);
            for v in rest {
                first[0].append(v);
            }
        }
        let mut n = 0;
        for v in &mut w.due {
            if !v.is_empty() {
                sort_nearly_sorted(v);
                n += self.run_group(v, cut);
                v.clear();
            }
        }
        self.win = w;
        while let Some((t, e)) = self.q.pop_before(end) {
            n += self.dispatch(t, e);
        }
        n
    }

    /// Runs `group` (events of one position, in queue order) and what they schedule before `cut`, merged in
    /// queue order.
    fn run_group(&mut self, group: &[Due], cut: u64) -> u64 {
        let mut n = 0;
        for (i, d) in group.iter().enumerate() {
            while let Some((t, e)) = self.q.pop_late(Some(d), cut) {
                self.prefetch_ahead(self.q.peek_late(LATE_AHEAD), self.q.peek_late(0));
                n += self.dispatch(t, e);
            }
            self.q.resume(d);
            let at = |k: usize| group.get(i + k).map(Due::e);
            self.prefetch_ahead(at(AHEAD), at(AHEAD_NEAR));
            n += self.dispatch(d.t(), d.e());
        }
        while let Some((t, e)) = self.q.pop_late(None, cut) {
            n += self.dispatch(t, e);
        }
        n
    }
}

/// Sorts a position's events, which come in slot order and are out of order only within a slot (usually a
/// few events of one position): an insertion sort, unless it would move too many.
fn sort_nearly_sorted<T: Ord + Copy>(v: &mut [T]) {
    let mut budget = 4 * v.len();
    for i in 1..v.len() {
        let x = v[i];
        let mut j = i;
        while j > 0 && x < v[j - 1] {
            if budget == 0 {
                v[j] = x;
                v.sort();
                return;
            }
            budget -= 1;
            v[j] = v[j - 1];
            j -= 1;
        }
        v[j] = x;
    }
}

#[cfg(test)]
mod tests {
    use super::sort_nearly_sorted;

    /// Nearly sorted input is sorted in place, and so is input that exhausts the insertion sort's budget (the
    /// fallback must start from every element, the one being moved included).
    #[test]
    fn sorts_nearly_sorted_and_reversed_input() {
        let mut v: Vec<u32> = (0..200).collect();
        v.swap(10, 11);
        v.swap(150, 152);
        sort_nearly_sorted(&mut v);
        assert_eq!(v, (0..200).collect::<Vec<_>>());
        let mut v: Vec<u32> = (0..200).rev().collect();
        sort_nearly_sorted(&mut v);
        assert_eq!(v, (0..200).collect::<Vec<_>>());
    }
}
