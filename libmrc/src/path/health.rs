//! How feedback moves an EV: deliveries and their delays, marks, trims, losses, retirement, probes and
//! restoration.

use super::*;

impl PathSet {
    /// Counts a packet sent on `idx` (payload `bytes`; `retx` for retransmissions); returns the EV's plane.
    /// Always inline: every packet sent calls it, and the call cost as much as the counting.
    #[inline(always)]
    pub fn on_sent(&mut self, idx: u16, bytes: u64, retx: bool) -> u8 {
        let plane = self.evs[usize::from(idx)].plane;
        count(&mut self.counters, usize::from(idx), |c| c.sent += 1);
        let ps = &mut self.planes[usize::from(plane)].stats;
        ps.tx_packets += 1;
        ps.tx_bytes += bytes;
        ps.retransmits += u64::from(retx);
        plane
    }

    /// A SACK or NACK echoed `idx`: the path delivers. `rtt_ns` is the sample it carried, if any.
    #[inline]
    pub fn on_delivery(&mut self, idx: u16, rtt_ns: Option<u64>) {
        count(&mut self.counters, usize::from(idx), |c| c.delivered += 1);
        let plane = usize::from(self.evs[usize::from(idx)].plane);
        self.planes[plane].losses_since_delivery = 0;
        let Some(r) = rtt_ns else {
            return;
        };
        let ev = &mut self.evs[usize::from(idx)];
        ev.last_rtt_ns = r;
        ev.delay_ns = if ev.delay_ns == 0 {
            r
        } else {
            (3 * ev.delay_ns + r) / 4
        };
        let d = ev.delay_ns;
        if d >= self.worst_delay.0 {
            self.worst_delay = (d, idx);
        } else if self.worst_delay.1 == idx {
            // The slowest EV got faster: find the slowest again (rare, and a QP has few EVs).
            self.worst_delay = self
                .evs
                .iter()
                .enumerate()
                .map(|(i, e)| (e.delay_ns, i as u16))
                .max()
                .unwrap_or((0, 0));
        }
    }

    /// Weighs `idx` by its delay after an RTT sample: an EV whose smoothed RTT exceeds the QP's `typical_ns`
    /// (its smoothed RTT over all paths) by more than a quarter is passed over for the next
    /// `4 × excess / typical` of its turns (at most 15). A path that delivers slowly (a link running below its
    /// rate, a long queue) so carries about what it can deliver instead of an equal share, and its queue stays
    /// short: a flow's last packets sprayed onto a long queue would hold its completion back by that queue.
    /// It stays GOOD: it is slow, not lossy, and its next sample sets the weight again, so it regains its share
    /// as its queue drains. Skipped turns do not surface as EV events. Returns whether `idx` is a slow outlier
    /// (RTT at least twice the typical one), whose delay says nothing about the QP's other paths.
    #[inline]
    pub fn weigh_by_delay(&mut self, idx: u16, typical_ns: u64) -> bool {
        let Some(ev) = self.evs.get_mut(usize::from(idx)) else {
            return false;
        };
        let typical = typical_ns.max(1);
        let excess = ev.delay_ns.saturating_sub(typical);
        let weight = if 4 * excess > typical {
            (4 * excess / typical).min(15) as u8
        } else {
            0
        };
        if ev.delay_weight == 0 || ev.delay_skips > weight {
            ev.delay_skips = weight;
        }
        ev.delay_weight = weight;
        weight > 0
    }

    /// Whether `idx` has no RTT sample yet or its smoothed RTT is at least twice `typical_ns`: its delay,
    /// trims and losses describe that one path, not the QP's.
    #[inline]
    pub fn slow_or_unmeasured(&self, idx: u16, typical_ns: u64) -> bool {
        self.evs
            .get(usize::from(idx))
            .is_some_and(|ev| ev.delay_ns == 0 || 4 * ev.delay_ns > 5 * typical_ns.max(1))
    }

    /// A never-retransmitted packet sent on `idx` at `sent_at` was acknowledged at `now`.
    #[inline]
    pub fn on_clean_ack(&mut self, idx: u16, sent_at: Instant, now: Instant) {
        if let Some(ev) = self.evs.get_mut(usize::from(idx)) {
            ev.acked_sent = ev.acked_sent.max(sent_at);
            ev.losses_in_a_row = 0;
            let s = now
                .as_nanos()
                .saturating_sub(sent_at.as_nanos())
                .min(u64::from(u32::MAX)) as u32;
            ev.deliver_ns = if ev.deliver_ns == 0 {
                s
            } else {
                ((3 * u64::from(ev.deliver_ns) + u64::from(s)) / 4) as u32
            };
        }
    }

    /// What the loss rules know of when a packet sent on `idx` at `sent_at` should have been acknowledged
    /// (spec REL-LOSS-1).
    #[inline]
    pub fn expected_rtt(&self, idx: u16, sent_at: Instant) -> PathDelay {
        let Some(ev) = self.evs.get(usize::from(idx)) else {
            return PathDelay::Unknown(0);
        };
        if ev.acked_sent > sent_at {
            return PathDelay::Overtaken;
        }
        if ev.delay_ns == 0 && ev.deliver_ns == 0 {
            return if ev.fabric_trimmed {
                PathDelay::Congested
            } else {
                PathDelay::Unknown(self.worst_delay.0)
            };
        }
        PathDelay::Known(
            ev.delay_ns
                .max(ev.last_rtt_ns)
                .max(u64::from(ev.deliver_ns)),
        )
    }

    /// Losses of packets on `idx` since a packet on it was last acknowledged.
    #[inline]
    pub fn losses_in_a_row(&self, idx: u16) -> u8 {
        self.evs
            .get(usize::from(idx))
            .map_or(0, |ev| ev.losses_in_a_row)
    }

    /// Whether `idx` can carry a packet now (GOOD or SKIP, on a plane that is up).
    #[inline]
    pub fn usable_ev(&self, idx: u16) -> bool {
        self.evs.get(usize::from(idx)).is_some_and(|ev| {
            matches!(ev.state, EvState::Good | EvState::Skip)
                && self.planes[usize::from(ev.plane)].up()
        })
    }

    /// Applies a SACK's marking advice for `idx`.
    // spec: PATH-EV-1
    pub fn on_mark(&mut self, idx: u16, mark: SackMark, now: Instant) {
        match mark {
            SackMark::None => {}
            SackMark::SkipOnce => {
                count(&mut self.counters, usize::from(idx), |c| c.ecn += 1);
                self.planes[usize::from(self.evs[usize::from(idx)].plane)]
                    .stats
                    .ecn += 1;
                self.skip(idx);
            }
            SackMark::AlwaysSkip => {
                count(&mut self.counters, usize::from(idx), |c| c.ecn += 1);
                self.retire(idx, now);
            }
        }
    }

    /// A packet sent on `idx` was trimmed. TRIMMED moves the EV to SKIP; TRIMMED_LASTHOP says nothing about the
    /// path (the congestion is at the receiver) and leaves it alone.
    pub fn on_trim(&mut self, idx: u16, last_hop: bool) {
        count(&mut self.counters, usize::from(idx), |c| c.trims += 1);
        let ev = &mut self.evs[usize::from(idx)];
        self.planes[usize::from(ev.plane)].stats.trims += 1;
        // spec: PATH-EV-3
        if !last_hop {
            ev.fabric_trimmed = true;
            self.skip(idx);
        }
    }

    fn skip(&mut self, idx: u16) {
        let ev = &mut self.evs[usize::from(idx)];
        if ev.state == EvState::Good {
            ev.state = EvState::Skip;
            self.changes.push(EvChange {
                ev: ev.value,
                plane: ev.plane,
                from: EvState::Good,
                to: EvState::Skip,
            });
        }
    }

    /// A packet sent on `idx` at `sent_at` was lost without explanation (no SACK, no trim): retire the EV,
    /// unless the floor forbids it; retire the whole plane when it has gone silent. Returns the plane when this
    /// loss retired it.
    ///
    /// Not when a packet sent later on the same EV was already acknowledged: the path delivers now. That is how
    /// the losses of a silent outage are found once the failed link is back (the first packets after it
    /// overtake them), and retiring the EVs then threw away a plane that had just returned: its EVs came back
    /// only after `probe_min` (100 µs by default) and three clean probe answers, and a job whose plane came
    /// back finished almost as late as one whose plane stayed down. The loss is still counted and its packet
    /// resent, and congestion control still hears of it.
    // spec: PATH-EV-4
    pub fn on_loss(
        &mut self,
        idx: u16,
        now: Instant,
        sent_at: Instant,
        not_the_path: bool,
    ) -> Option<u8> {
        count(&mut self.counters, usize::from(idx), |c| c.losses += 1);
        let ev = &mut self.evs[usize::from(idx)];
        ev.losses_in_a_row = ev.losses_in_a_row.saturating_add(1);
        let p = usize::from(ev.plane);
        let delivers_since = ev.acked_sent > sent_at;
        let plane = &mut self.planes[p];
        plane.stats.losses += 1;
        if delivers_since || not_the_path {
            return None;
        }
        plane.losses_since_delivery += 1;
        if plane.losses_since_delivery >= self.plane_dead_after {
            let was_dead = plane.dead;
            self.retire_plane(p, now);
            (!was_dead).then_some(p as u8)
        } else {
            self.retire(idx, now);
            if self.evs[usize::from(idx)].state == EvState::AssumedBad {
                self.probe_mut(idx).retired_by = Some(sent_at.ts32());
            }
            None
        }
    }

    /// A data packet sent on `idx` at `ts` (low 32 bits of ns) was delivered. If a loss retired `idx` and this
    /// packet was sent no earlier than the one taken for lost, the path delivers, late: the loss was its delay
    /// (a slowed link's queue), and `idx` takes its place in the rotation again at once instead of after
    /// `probe_clean` probes, its delay weight (from this sample) keeping its share small. Returns whether it did.
    // spec: PATH-EV-7
    #[inline]
    pub fn on_late_delivery(&mut self, idx: u16, ts: u32) -> bool {
        // Every SACK asks; only a retired EV needs the rest, so the common answer costs no call.
        self.evs
            .get(usize::from(idx))
            .is_some_and(|ev| ev.state == EvState::AssumedBad)
            && self.restore_if_late(idx, ts)
    }

    #[inline(never)]
    fn restore_if_late(&mut self, idx: u16, ts: u32) -> bool {
        let (Some(ev), Some(pr)) = (
            self.evs.get(usize::from(idx)),
            self.probes.get_mut(usize::from(idx)),
        ) else {
            return false;
        };
        let p = usize::from(ev.plane);
        let disproved = pr
            .retired_by
            .is_some_and(|t| ts.wrapping_sub(t) as i32 >= 0);
        if ev.state != EvState::AssumedBad || !disproved || self.planes[p].dead {
            return false;
        }
        pr.probe_ts = None;
        self.mark_restored(idx, EvState::Good);
        // Undo the retirement: back among the active EVs, and the backup that stood in for it back in reserve.
        let plane = &mut self.planes[p];
        plane.active.push(idx);
        self.evs[usize::from(idx)].role = Role::Active;
        if plane.active.len() > self.per_plane
            && let Some(pos) = plane.active.iter().rposition(|&x| x != idx)
        {
            let b = plane.active.remove(pos);
            if plane.cursor > pos {
                plane.cursor -= 1;
            }
            plane.backup.push_front(b);
            self.evs[usize::from(b)].role = Role::Backup;
        }
        true
    }

    /// Retires every EV of plane `p` (it has lost `plane_dead_after` packets in a row); probes bring them back.
    // spec: PATH-PLANE-2
    fn retire_plane(&mut self, p: usize, now: Instant) {
        let plane = &mut self.planes[p];
        plane.losses_since_delivery = 0;
        if plane.dead {
            return;
        }
        plane.stats.plane_retirements += 1;
        plane.dead = true;
        plane.probe_at = now + self.plane_probe_min;
        plane.probe_interval = self.plane_probe_min;
        plane.probe_outstanding = false;
        let mut victims: Vec<u16> = plane.active.drain(..).collect();
        victims.extend(plane.backup.drain(..));
        plane.cursor = 0;
        for idx in victims {
            self.evs[usize::from(idx)].role = Role::Out;
            self.mark_bad(idx, now);
        }
        // The plane is probed as a whole; its EVs wait for it.
        for &m in &self.planes[p].members {
            if let Some(pr) = self.probes.get_mut(usize::from(m)) {
                pr.next_probe = Instant::MAX;
            }
        }
        self.probe_deadline = self.probe_deadline.min(self.planes[p].probe_at);
    }

    /// The datapath says packets on `idx` cannot be delivered (e.g. ICMP unreachable): retire it now.
    pub fn on_unreachable(&mut self, idx: u16, now: Instant) {
        if usize::from(idx) < self.evs.len() {
            self.retire(idx, now);
        }
    }

    /// Whether the local port of plane `p` is up.
    pub fn local_up(&self, p: usize) -> bool {
        self.planes.get(p).is_some_and(|x| !x.local_down)
    }

    /// Moves `idx` to ASSUMED_BAD and replaces it from the backup pool, respecting the floor.
    // spec: PATH-FLOOR-1
    fn retire(&mut self, idx: u16, now: Instant) {
        let i = usize::from(idx);
        if matches!(self.evs[i].state, EvState::AssumedBad | EvState::Denied) {
            return;
        }
        let p = usize::from(self.evs[i].plane);
        let plane = &mut self.planes[p];
        match self.evs[i].role {
            Role::Active => {
                if let Some(b) = plane.backup.pop_front() {
                    // spec: PATH-SET-2
                    plane.active.push(b);
                    self.evs[usize::from(b)].role = Role::Active;
                } else if plane.active.len() <= self.min_active {
                    self.suppressed_retirements += 1;
                    return;
                }
                let plane = &mut self.planes[p];
                if let Some(pos) = plane.active.iter().position(|&x| x == idx) {
                    plane.active.remove(pos);
                    if plane.cursor > pos {
                        plane.cursor -= 1;
                    }
                }
            }
            Role::Backup => {
                if let Some(pos) = plane.backup.iter().position(|&x| x == idx) {
                    plane.backup.remove(pos);
                }
            }
            Role::Out => {}
        }
        self.evs[i].role = Role::Out;
        self.mark_bad(idx, now);
    }

    fn mark_bad(&mut self, idx: u16, now: Instant) {
        let ev = &mut self.evs[usize::from(idx)];
        if matches!(ev.state, EvState::AssumedBad | EvState::Denied) {
            return;
        }
        self.changes.push(EvChange {
            ev: ev.value,
            plane: ev.plane,
            from: ev.state,
            to: EvState::AssumedBad,
        });
        ev.state = EvState::AssumedBad;
        count(&mut self.counters, usize::from(idx), |c| c.retired += 1);
        ev.clean = 0;
        let pr = self
            .probes
            .at(usize::from(idx), self.evs.len(), self.probe_min);
        pr.probe_ts = None;
        pr.probe_interval = self.probe_min;
        // spec: PATH-PROBE-1
        pr.next_probe = now + self.probe_min;
        self.probe_deadline = self.probe_deadline.min(pr.next_probe);
    }

    /// Names this QP in the draw of its probe waits (spec PATH-PROBE-1): its peer and both QP numbers.
    pub fn set_probe_salt(&mut self, salt: u64) {
        self.probe_salt = salt;
    }

    /// When the next probe is due (`Instant::MAX` when none is).
    #[inline]
    pub fn probe_deadline(&self) -> Instant {
        self.probe_deadline
    }

    /// The next EV to probe at `now`, if one is due; records the probe as outstanding with timestamp `ts`.
    /// Probes go only to planes whose ports are up.
    // spec: PATH-PROBE-1
    #[inline]
    pub fn poll_probe(&mut self, now: Instant) -> Option<u16> {
        if now < self.probe_deadline {
            return None;
        }
        self.poll_probe_due(now)
    }

    #[cold]
    fn poll_probe_due(&mut self, now: Instant) -> Option<u16> {
        let probes = self.probes.all(self.evs.len(), self.probe_min);
        let mut found = None;
        let mut deadline = Instant::MAX;
        // Planes the peer reported down: probed like dead planes, and back in service at the first answer,
        // whatever the peer reports (a report may be stale, or forged).
        // spec: PATH-PLANE-3
        for plane in self.planes.iter_mut() {
            if plane.remote_down && !plane.local_down {
                let due = found.is_none() && plane.probe_at <= now;
                if due {
                    found = probe_plane(
                        plane,
                        (&self.evs, &mut *probes),
                        &mut self.counters,
                        self.probe_max,
                        self.probe_salt,
                        now,
                        |s| s != EvState::Denied,
                    );
                }
                deadline = deadline.min(plane.probe_at);
            }
        }
        // Dead planes: one probe per interval each, rotating over the plane's EVs.
        // spec: PATH-PLANE-2
        for plane in self.planes.iter_mut() {
            if plane.dead && plane.up() {
                let due = found.is_none() && plane.probe_at <= now;
                if due {
                    found = probe_plane(
                        plane,
                        (&self.evs, &mut *probes),
                        &mut self.counters,
                        self.probe_max,
                        self.probe_salt,
                        now,
                        |s| s == EvState::AssumedBad,
                    );
                }
                deadline = deadline.min(plane.probe_at);
            }
        }
        for (i, (ev, pr)) in self.evs.iter_mut().zip(probes).enumerate() {
            if ev.state != EvState::AssumedBad {
                continue;
            }
            let plane = &self.planes[usize::from(ev.plane)];
            if plane.dead || !plane.up() {
                // Re-examined when the plane answers or its port comes back.
                continue;
            }
            if found.is_none() && pr.next_probe <= now {
                if pr.probe_ts.is_some() {
                    // The previous probe went unanswered: back off and start counting again.
                    ev.clean = 0;
                    pr.probe_interval = (pr.probe_interval * 2).min(self.probe_max);
                }
                pr.probe_ts = Some(now.ts32());
                pr.next_probe = now
                    + probe_wait(
                        pr.probe_interval,
                        now,
                        self.probe_salt ^ u64::from(ev.value),
                    );
                count(&mut self.counters, i, |c| {
                    c.probes += 1;
                    c.sent += 1;
                });
                found = Some(i as u16);
            }
            deadline = deadline.min(pr.next_probe);
        }
        self.probe_deadline = deadline;
        found
    }

    /// A probe answer for `idx` arrived, echoing `ts` with marking `mark`. After `probe_clean` consecutive
    /// clean answers the EV returns to service (GOOD, or SKIP when the last answer was CE-marked).
    // spec: PATH-PROBE-2
    pub fn on_probe_reply(&mut self, idx: u16, ts: u32, mark: SackMark, now: Instant) {
        let i = usize::from(idx);
        count(&mut self.counters, i, |c| c.delivered += 1);
        let p = usize::from(self.evs[i].plane);
        self.planes[p].losses_since_delivery = 0;
        let probe_ts = self.probes.get(i).and_then(|pr| pr.probe_ts);
        if self.planes[p].remote_down && probe_ts == Some(ts) {
            // spec: PATH-PLANE-3
            let plane = &mut self.planes[p];
            plane.remote_down = false;
            plane.probe_outstanding = false;
            plane.probe_interval = self.probe_min;
            if self.evs[i].state != EvState::AssumedBad {
                self.probe_mut(idx).probe_ts = None;
                return;
            }
        }
        if self.evs[i].state != EvState::AssumedBad || probe_ts != Some(ts) {
            return;
        }
        if self.planes[p].dead {
            // The plane answers again: probe each of its EVs on its own from now on.
            let plane = &mut self.planes[p];
            plane.dead = false;
            plane.probe_outstanding = false;
            for &m in &plane.members {
                let e = &mut self.evs[usize::from(m)];
                if e.state == EvState::AssumedBad && m != idx {
                    e.clean = 0;
                    let pr = self
                        .probes
                        .at(usize::from(m), self.evs.len(), self.probe_min);
                    pr.next_probe = now;
                    pr.probe_ts = None;
                    pr.probe_interval = self.probe_min;
                }
            }
            self.probe_deadline = self.probe_deadline.min(now);
        }
        let n = self.evs.len();
        let (ev, pr) = (&mut self.evs[i], self.probes.at(i, n, self.probe_min));
        pr.probe_ts = None;
        if mark == SackMark::AlwaysSkip {
            ev.clean = 0;
            return;
        }
        ev.clean += 1;
        pr.probe_interval = self.probe_min;
        if ev.clean < self.probe_clean {
            // Ask again right away: restoring takes a few RTTs once the path answers.
            pr.next_probe = now;
            self.probe_deadline = self.probe_deadline.min(now);
            return;
        }
        let to = if mark == SackMark::SkipOnce {
            EvState::Skip
        } else {
            EvState::Good
        };
        self.mark_restored(idx, to);
        self.rejoin(idx);
    }

    /// EV `idx`'s probing state, the table made if it is not yet.
    fn probe_mut(&mut self, idx: u16) -> &mut EvProbe {
        self.probes
            .at(usize::from(idx), self.evs.len(), self.probe_min)
    }

    /// ASSUMED_BAD → `to`: its probing ends and the change is reported.
    fn mark_restored(&mut self, idx: u16, to: EvState) {
        let pr = self.probe_mut(idx);
        pr.retired_by = None;
        pr.next_probe = Instant::MAX;
        let ev = &mut self.evs[usize::from(idx)];
        ev.state = to;
        ev.clean = 0;
        count(&mut self.counters, usize::from(idx), |c| c.restored += 1);
        self.changes.push(EvChange {
            ev: ev.value,
            plane: ev.plane,
            from: EvState::AssumedBad,
            to,
        });
    }

    /// Puts a healthy EV back in its plane: active if the plane is short, else backup.
    pub(super) fn rejoin(&mut self, idx: u16) {
        let ev = &mut self.evs[usize::from(idx)];
        let plane = &mut self.planes[usize::from(ev.plane)];
        if plane.active.len() < self.per_plane {
            plane.active.push(idx);
            ev.role = Role::Active;
        } else {
            plane.backup.push_back(idx);
            ev.role = Role::Backup;
        }
    }
}

/// One plane-level probe, due now: the next of the plane's EVs in rotation whose state `probe_it` accepts, on a
/// plane whose last probe, if unanswered, doubles the interval (up to `probe_max`).
fn probe_plane(
    plane: &mut Plane,
    (evs, probes): (&[Ev], &mut [EvProbe]),
    counters: &mut [EvStats],
    probe_max: Duration,
    salt: u64,
    now: Instant,
    probe_it: impl Fn(EvState) -> bool,
) -> Option<u16> {
    if plane.probe_outstanding {
        plane.probe_interval = (plane.probe_interval * 2).min(probe_max);
    }
    let mut found = None;
    let n = plane.members.len();
    for _ in 0..n {
        let idx = plane.members[plane.probe_cursor % n];
        plane.probe_cursor = plane.probe_cursor.wrapping_add(1);
        if probe_it(evs[usize::from(idx)].state) {
            probes[usize::from(idx)].probe_ts = Some(now.ts32());
            count(counters, usize::from(idx), |c| {
                c.probes += 1;
                c.sent += 1;
            });
            found = Some(idx);
            break;
        }
    }
    plane.probe_outstanding = found.is_some();
    let ev = found.map_or(0, |i| evs[usize::from(i)].value);
    plane.probe_at = now + probe_wait(plane.probe_interval, now, salt ^ u64::from(ev));
    found
}

/// The wait after a probe: `interval` and up to a quarter more, drawn from the clock and `salt` (the QP's probe
/// salt and the probed EV's value). A path that fails periodically, a link flapping at the period of the probe
/// cap, would otherwise take every probe in a down phase once the backoff reaches the cap, and stay retired
/// while it is up half the time. Deterministic: the same clock, QP and EV give the same wait.
// spec: PATH-PROBE-1
fn probe_wait(interval: Duration, now: Instant, salt: u64) -> Duration {
    let quarter = crate::time::nanos(interval) / 4;
    if quarter == 0 {
        return interval;
    }
    // SplitMix64's finaliser: every bit of the clock and the salt moves the draw.
    let mut x = now.as_nanos() ^ salt.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    interval + Duration::from_nanos(x % quarter)
}
