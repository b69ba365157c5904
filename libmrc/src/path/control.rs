//! What the host and the controller change and read: local and remote ports, denied and replaced EVs, the
//! change log and the per-EV and per-plane views.

use super::*;

impl PathSet {
    /// A local port (plane) went down or came up: its EVs are masked at once, without changing their state.
    // spec: PATH-PLANE-1
    pub fn set_local_port(&mut self, plane: usize, up: bool) {
        if let Some(p) = self.planes.get_mut(plane) {
            p.local_down = !up;
            p.losses_since_delivery = 0;
        }
        self.probe_deadline = Instant::ZERO;
    }

    /// The peer reported which of its ports are up (bit p = plane p). Returns the planes that this report
    /// took down (bit p = plane p).
    pub fn set_remote_ports(&mut self, mask: u32) -> u32 {
        let mut went_down = 0;
        for (i, p) in self.planes.iter_mut().enumerate() {
            let down = i < 32 && mask >> i & 1 == 0;
            if down && !p.remote_down {
                went_down |= 1 << i;
                // Probed from now on (PATH-PLANE-3).
                p.probe_at = Instant::ZERO;
                p.probe_interval = self.probe_min;
                p.probe_outstanding = false;
            }
            p.remote_down = down;
            p.losses_since_delivery = 0;
        }
        self.probe_deadline = Instant::ZERO;
        went_down
    }

    /// Operator action: deny or allow an EV. Returns whether the EV exists.
    // spec: PATH-EV-5
    pub fn set_denied(&mut self, ev: u32, denied: bool) -> bool {
        let Some(idx) = self.find(ev) else {
            return false;
        };
        let i = usize::from(idx);
        let from = self.evs[i].state;
        if denied && from != EvState::Denied {
            let p = usize::from(self.evs[i].plane);
            let plane = &mut self.planes[p];
            if let Some(pos) = plane.active.iter().position(|&x| x == idx) {
                plane.active.remove(pos);
                if plane.cursor > pos {
                    plane.cursor -= 1;
                }
                if let Some(b) = plane.backup.pop_front() {
                    plane.active.push(b);
                    self.evs[usize::from(b)].role = Role::Active;
                }
            } else if let Some(pos) = plane.backup.iter().position(|&x| x == idx) {
                plane.backup.remove(pos);
            }
            let e = &mut self.evs[i];
            e.role = Role::Out;
            e.state = EvState::Denied;
            if let Some(pr) = self.probes.get_mut(i) {
                pr.next_probe = Instant::MAX;
            }
            self.changes.push(EvChange {
                ev,
                plane: self.evs[i].plane,
                from,
                to: EvState::Denied,
            });
        } else if !denied && from == EvState::Denied {
            self.evs[i].state = EvState::Good;
            self.changes.push(EvChange {
                ev,
                plane: self.evs[i].plane,
                from,
                to: EvState::Good,
            });
            self.rejoin(idx);
        }
        true
    }

    /// Operator action: puts EV `new` in the place of `old` (an explicit set only: generated EVs follow from
    /// their index). The new EV starts GOOD with fresh counters, on the plane its low bits name, in `old`'s
    /// index (packets still in flight on `old` are acknowledged by PSN as before; their EV echo no longer
    /// matches and is ignored). Returns whether it was done: `old` must be the QP's and `new` not, its plane
    /// one of the QP's, and `old` not the last EV of its plane when `new` is on another.
    pub fn replace_ev(&mut self, old: u32, new: u32) -> bool {
        if self.generated.is_some() || self.find(new).is_some() {
            return false;
        }
        let Some(idx) = self.find(old) else {
            return false;
        };
        let i = usize::from(idx);
        let to = crate::wire::plane_of(new, self.plane_bits) as usize;
        let from = usize::from(self.evs[i].plane);
        if to >= self.planes.len() || (to != from && self.planes[from].members.len() <= 1) {
            return false;
        }
        // Out of its plane's lists, as a denial takes it out.
        let p = &mut self.planes[from];
        if let Some(pos) = p.active.iter().position(|&x| x == idx) {
            p.active.remove(pos);
            if p.cursor > pos {
                p.cursor -= 1;
            }
            if let Some(b) = p.backup.pop_front() {
                p.active.push(b);
                self.evs[usize::from(b)].role = Role::Active;
            }
        } else if let Some(pos) = p.backup.iter().position(|&x| x == idx) {
            p.backup.remove(pos);
        }
        if to != from {
            p.members.retain(|&x| x != idx);
            p.probe_cursor = 0;
            self.planes[to].members.push(idx);
        }
        self.evs[i] = Ev {
            value: new,
            plane: to as u8,
            state: EvState::Good,
            role: Role::Out,
            clean: 0,
            delay_ns: 0,
            delay_skips: 0,
            delay_weight: 0,
            fabric_trimmed: false,
            losses_in_a_row: 0,
            acked_sent: Instant::ZERO,
            deliver_ns: 0,
            last_rtt_ns: 0,
        };
        if let Some(pr) = self.probes.get_mut(i) {
            *pr = EvProbe::new(self.probe_min);
        }
        count(&mut self.counters, i, |c| *c = EvStats::default());
        self.rejoin(idx);
        if self.worst_delay.1 == idx {
            self.worst_delay = (0, 0);
        }
        let mut lookup: Vec<(u32, u16)> = self
            .evs
            .iter()
            .enumerate()
            .map(|(i, e)| (e.value, i as u16))
            .collect();
        lookup.sort_unstable();
        self.lookup = lookup;
        true
    }

    /// Takes the state changes since the last call.
    pub fn drain_changes(&mut self) -> std::vec::Drain<'_, EvChange> {
        self.changes.drain(..)
    }

    /// Whether state changes are waiting to be drained.
    pub fn has_changes(&self) -> bool {
        !self.changes.is_empty()
    }

    /// A snapshot of every EV.
    pub fn infos(&self) -> impl Iterator<Item = EvInfo> + '_ {
        self.evs.iter().enumerate().map(|(i, e)| EvInfo {
            ev: e.value,
            plane: e.plane,
            state: e.state,
            active: e.role == Role::Active,
            stats: EvStats {
                last_rtt_ns: e.last_rtt_ns,
                ..self.counters.get(i).copied().unwrap_or_default()
            },
        })
    }

    /// Counters of plane `p`.
    pub fn plane_stats(&self, p: usize) -> Option<PlaneStats> {
        self.planes.get(p).map(|x| x.stats)
    }

    /// Number of EVs per state on plane `p`: (good, skip, assumed_bad, denied).
    #[cfg(test)]
    pub fn plane_state_counts(&self, p: usize) -> (usize, usize, usize, usize) {
        let mut c = (0, 0, 0, 0);
        for e in self.evs.iter().filter(|e| usize::from(e.plane) == p) {
            match e.state {
                EvState::Good => c.0 += 1,
                EvState::Skip => c.1 += 1,
                EvState::AssumedBad => c.2 += 1,
                EvState::Denied => c.3 += 1,
            }
        }
        c
    }
}
