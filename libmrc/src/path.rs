//! Paths: the entropy values (EVs) of one QP, their health, and the per-packet choice among them.
//!
//! Each plane has an *active* list of EVs that carry traffic and a *backup* pool. Packets go to planes in
//! strict rotation (planes are never rebalanced, which would create false incasts), and within a plane to its
//! active EVs in rotation. Feedback moves EVs through GOOD, SKIP, ASSUMED_BAD and DENIED; a retired EV is
//! replaced from its own plane's backup pool and probed until it answers cleanly again.

use std::collections::VecDeque;

use crate::error::ConfigError;
use crate::time::{Duration, Instant};
use crate::wire::SackMark;

/// Health of one EV (spec PATH-EV-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[non_exhaustive]
pub enum EvState {
    /// Usable.
    Good,
    /// Usable, but passed over once at its next turn (ECN or trim feedback).
    Skip,
    /// Retired after loss; probed until it answers cleanly.
    AssumedBad,
    /// Excluded by the operator; only the controller API changes this.
    Denied,
}

/// Where an EV sits in its plane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Active,
    Backup,
    /// Retired or denied: in neither list.
    Out,
}

/// How a QP's EVs are chosen and managed.
#[derive(Debug, Clone, PartialEq)]
pub struct EvConfig {
    /// Planes used, numbered 0..planes (one NIC port each), 1..=32.
    pub planes: u8,
    /// Low EV bits that hold the plane number; at least enough for `planes`.
    pub plane_bits: u8,
    /// Active EVs per plane.
    pub per_plane: u16,
    /// Reserve EVs per plane that replace retired ones.
    pub backup_per_plane: u16,
    /// A loss does not retire an EV when that would leave fewer active EVs in its plane (the floor).
    pub min_active_per_plane: u16,
    /// Generated EVs are `(first_index + i) << plane_bits | plane`; QPs may use different ranges.
    pub first_index: u32,
    /// Use exactly these EVs instead of generated ones (plane = low `plane_bits` bits); per plane, the first
    /// `per_plane` are active and the rest are backups. Every plane must have the same number.
    pub explicit: Option<Vec<u32>>,
    /// Losses on a plane without a delivery in between after which the whole plane is retired and probed.
    pub plane_dead_after: u32,
    /// First probe interval of a retired EV; doubles per unanswered probe...
    pub probe_min: Duration,
    /// First probe interval of a plane retired whole for silence (`None`: `probe_min`); doubles likewise. A
    /// plane goes silent when its links fail and comes back when they return, so it may be probed sooner than
    /// an EV retired for its own loss or marks, whose probes never see the congestion that retired it.
    pub plane_probe_min: Option<Duration>,
    /// ...up to this.
    pub probe_max: Duration,
    /// Clean probe answers needed to restore an EV.
    pub probe_clean: u8,
    /// Keep per-EV counters ([`EvInfo::stats`]; the RTT is always there). Off, a QP saves 64 bytes per EV: a
    /// simulator of thousands of QPs that reports per plane and per flow leaves them off.
    pub counters: bool,
}

impl Default for EvConfig {
    fn default() -> Self {
        Self {
            planes: 8,
            plane_bits: 3,
            per_plane: 16,
            backup_per_plane: 32,
            min_active_per_plane: 4,
            first_index: 0,
            explicit: None,
            plane_dead_after: 8,
            probe_min: Duration::from_micros(100),
            plane_probe_min: None,
            probe_max: Duration::from_millis(10),
            probe_clean: 3,
            counters: true,
        }
    }
}

/// Most EVs one QP may hold.
pub const MAX_EVS: usize = 4096;

impl EvConfig {
    /// A configuration for `planes` planes with `per_plane` active EVs each (backups 2×, floor ¼).
    pub fn with_planes(planes: u8, per_plane: u16) -> Self {
        let plane_bits = (u32::from(planes.max(1)) - 1)
            .checked_ilog2()
            .map_or(0, |b| b + 1) as u8;
        Self {
            planes,
            plane_bits,
            per_plane,
            backup_per_plane: per_plane.saturating_mul(2),
            min_active_per_plane: (per_plane / 4).max(1),
            ..Self::default()
        }
    }

    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=32).contains(&self.planes) {
            return Err(ConfigError::new(
                "qp.ev.planes",
                format!("{} planes; use 1..=32", self.planes),
            ));
        }
        if self.plane_bits > 16 || (1u32 << self.plane_bits) < u32::from(self.planes) {
            return Err(ConfigError::new(
                "qp.ev.plane_bits",
                format!(
                    "{} bits cannot number {} planes; use at least {} (at most 16)",
                    self.plane_bits,
                    self.planes,
                    u32::from(self.planes).next_power_of_two().trailing_zeros()
                ),
            ));
        }
        if self.per_plane == 0 {
            return Err(ConfigError::new(
                "qp.ev.per_plane",
                "must be at least 1; MRC uses 128..=256 EVs in all, e.g. 16 per plane on 8 planes",
            ));
        }
        if self.min_active_per_plane > self.per_plane {
            return Err(ConfigError::new(
                "qp.ev.min_active_per_plane",
                format!(
                    "{} exceeds per_plane {}; the floor must be at most the active count",
                    self.min_active_per_plane, self.per_plane
                ),
            ));
        }
        let plane_min = self.plane_probe_min.unwrap_or(self.probe_min);
        if self.probe_min.is_zero()
            || self.probe_max < self.probe_min
            || plane_min.is_zero()
            || self.probe_max < plane_min
        {
            return Err(ConfigError::new(
                "qp.ev.probe_min",
                "need 0 < probe_min, plane_probe_min <= probe_max (defaults 100 µs and 10 ms)",
            ));
        }
        if self.probe_clean == 0 {
            return Err(ConfigError::new(
                "qp.ev.probe_clean",
                "must be at least 1; 3 is the default",
            ));
        }
        if self.plane_dead_after == 0 {
            return Err(ConfigError::new(
                "qp.ev.plane_dead_after",
                "must be at least 1; 8 is the default",
            ));
        }
        match &self.explicit {
            None => {
                let per = u64::from(self.per_plane) + u64::from(self.backup_per_plane);
                if per * u64::from(self.planes) > MAX_EVS as u64 {
                    return Err(ConfigError::new(
                        "qp.ev.backup_per_plane",
                        format!(
                            "{} EVs in all; (per_plane + backup_per_plane) × planes must be at most {MAX_EVS}",
                            per * u64::from(self.planes)
                        ),
                    ));
                }
                let top = (u64::from(self.first_index) + per) << self.plane_bits;
                if top > 1 << 32 {
                    return Err(ConfigError::new(
                        "qp.ev.first_index",
                        "generated EVs would not fit in 32 bits; lower first_index or the EV counts",
                    ));
                }
            }
            Some(list) => {
                if list.len() > MAX_EVS {
                    return Err(ConfigError::new(
                        "qp.ev.explicit",
                        format!("{} EVs; at most {MAX_EVS}", list.len()),
                    ));
                }
                let mut counts = vec![0usize; usize::from(self.planes)];
                let mut sorted = list.clone();
                sorted.sort_unstable();
                if sorted.windows(2).any(|w| w[0] == w[1]) {
                    return Err(ConfigError::new(
                        "qp.ev.explicit",
                        "lists an EV twice; every EV must be distinct",
                    ));
                }
                for &ev in list {
                    let plane = crate::wire::plane_of(ev, self.plane_bits) as usize;
                    match counts.get_mut(plane) {
                        Some(c) => *c += 1,
                        None => {
                            return Err(ConfigError::new(
                                "qp.ev.explicit",
                                format!(
                                    "EV {ev:#x} is on plane {plane}, but only {} planes are configured",
                                    self.planes
                                ),
                            ));
                        }
                    }
                }
                if counts.iter().any(|&c| c != counts[0]) || counts[0] < usize::from(self.per_plane)
                {
                    return Err(ConfigError::new(
                        "qp.ev.explicit",
                        format!(
                            "EVs per plane are {counts:?}; every plane needs the same number, at least per_plane ({})",
                            self.per_plane
                        ),
                    ));
                }
            }
        }
        Ok(())
    }
}

/// What the loss rules know of one EV's round trip (see [`PathSet::expected_rtt`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathDelay {
    /// A packet sent later on the same EV was acknowledged: one path delivers in order, so an older packet
    /// still unacknowledged was overtaken, i.e. lost.
    Overtaken,
    /// The EV's round trip in ns: the largest of its smoothed RTT, its latest RTT sample and its smoothed
    /// send-to-acknowledgement time.
    Known(u64),
    /// No packet on it has been acknowledged yet; the largest smoothed RTT of the QP's other EVs (0 when none
    /// has one) in ns: one of them may share its path.
    Unknown(u64),
    /// No packet on it has been acknowledged yet, but packets on it were trimmed in the fabric: the trimmed
    /// header proves the path delivers and that a full queue sits on it, whose length only a sample will tell
    /// (a path slowed to a fraction of its rate from the start trims before its first packet is acknowledged).
    Congested,
}

/// Counters of one EV.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EvStats {
    /// Packets sent on it (data, retransmissions and probes).
    pub sent: u64,
    /// SACKs or NACKs that echoed it (proof the path delivers).
    pub delivered: u64,
    /// Trim NACKs for packets sent on it.
    pub trims: u64,
    /// SACKs that reported it CE-marked.
    pub ecn: u64,
    /// Packets on it declared lost.
    pub losses: u64,
    /// Times it was retired.
    pub retired: u32,
    /// Times probes restored it.
    pub restored: u32,
    /// Probes sent on it.
    pub probes: u64,
    /// Last RTT measured on it, in ns (0 before the first sample).
    pub last_rtt_ns: u64,
}

/// A snapshot of one EV for counters and tools.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EvInfo {
    /// The EV.
    pub ev: u32,
    /// Its plane.
    pub plane: u8,
    /// Its health.
    pub state: EvState,
    /// Whether it is in its plane's active list (as opposed to backup or retired).
    pub active: bool,
    /// Its counters.
    pub stats: EvStats,
}

/// An EV changed state; surfaced as an endpoint event (the EV-event CQ of MRC's controller API).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct EvChange {
    /// The EV.
    pub ev: u32,
    /// Its plane.
    pub plane: u8,
    /// State before.
    pub from: EvState,
    /// State after.
    pub to: EvState,
}

impl EvChange {
    /// A change of `ev` on `plane` (for drivers that report changes the engine did not make itself, such as a
    /// whole plane's EVs when its port goes down).
    pub fn new(ev: u32, plane: u8, from: EvState, to: EvState) -> Self {
        Self {
            ev,
            plane,
            from,
            to,
        }
    }
}

/// Counters of one plane of one QP.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct PlaneStats {
    /// Data packets sent on the plane (first transmissions and retransmissions).
    pub tx_packets: u64,
    /// Payload bytes sent on the plane.
    pub tx_bytes: u64,
    /// Retransmissions sent on the plane.
    pub retransmits: u64,
    /// Trim NACKs for packets sent on the plane.
    pub trims: u64,
    /// Losses detected for packets sent on the plane.
    pub losses: u64,
    /// CE marks reported for the plane.
    pub ecn: u64,
    /// Times the whole plane was retired for silence.
    pub plane_retirements: u32,
}

#[derive(Debug, Clone)]
struct Ev {
    value: u32,
    plane: u8,
    state: EvState,
    role: Role,
    clean: u8,
    /// Outstanding probe timestamp (low 32 bits of ns), if a probe is unanswered.
    probe_ts: Option<u32>,
    probe_interval: Duration,
    next_probe: Instant,
    /// Smoothed RTT of packets on this EV in ns (0 before the first sample): how late its path delivers.
    delay_ns: u64,
    /// Turns this EV is passed over (while Good) because its path is much slower than the QP's typical one.
    delay_skips: u8,
    /// What `delay_skips` restarts from each time the EV carries a packet: its latest sample's weight. A count
    /// spent once would leave a slow path its full share until its next sample, one of its long RTTs later.
    delay_weight: u8,
    /// Send time (low 32 bits of ns) of the packet whose loss retired this EV: a later delivery of a packet
    /// sent no earlier proves the loss was only delay (spec PATH-EV-7).
    retired_by: Option<u32>,
    /// A packet on it was trimmed in the fabric (not at the last hop): a full queue sits on its path.
    fabric_trimmed: bool,
    /// Losses on it since a packet on it was last acknowledged.
    losses_in_a_row: u8,
    /// Newest send time of a never-retransmitted packet on this EV that was acknowledged: one path is FIFO, so
    /// an older packet of it still unacknowledged was overtaken, i.e. lost.
    acked_sent: Instant,
    /// Smoothed time from sending a packet on this EV to its acknowledgement, ns (0 before the first): every
    /// packet acknowledged on its first transmission is a sample, a little above its RTT (the receiver
    /// coalesces SACKs), so a path is known by many more samples than the TS echoes alone give.
    deliver_ns: u32,
    /// Last RTT measured on it, ns (0 before the first sample).
    last_rtt_ns: u64,
}

#[derive(Debug, Clone, Default)]
struct Plane {
    active: Vec<u16>,
    backup: VecDeque<u16>,
    /// Every EV of the plane, for plane-level probing.
    members: Vec<u16>,
    cursor: usize,
    local_down: bool,
    remote_down: bool,
    losses_since_delivery: u32,
    /// Retired whole: one probe per interval, rotating over its EVs, until one answers.
    dead: bool,
    probe_at: Instant,
    probe_interval: Duration,
    probe_cursor: usize,
    probe_outstanding: bool,
    stats: PlaneStats,
}

impl Plane {
    fn up(&self) -> bool {
        !self.local_down && !self.remote_down
    }
}

/// The EVs of one QP and their health.
#[derive(Debug, Clone)]
pub struct PathSet {
    evs: Vec<Ev>,
    /// Counters of each EV, by index, kept apart from the state that sending reads (empty when
    /// [`EvConfig::counters`] is off).
    counters: Vec<EvStats>,
    planes: Vec<Plane>,
    plane_cursor: usize,
    any_cursor: usize,
    /// (EV value, index) sorted by value, for looking up echoed EVs of explicit sets.
    lookup: Vec<(u32, u16)>,
    /// For generated sets: (first index, plane bits, planes), so an EV's index is arithmetic.
    generated: Option<(u32, u8, u32)>,
    per_plane: usize,
    min_active: usize,
    plane_dead_after: u32,
    probe_min: Duration,
    plane_probe_min: Duration,
    probe_max: Duration,
    probe_clean: u8,
    /// Earliest `next_probe` of any probing EV (cached).
    probe_deadline: Instant,
    changes: Vec<EvChange>,
    suppressed_retirements: u64,
    /// Largest smoothed RTT of any EV, ns, and which EV has it: the round trip an EV without a sample of its
    /// own may have.
    worst_delay: (u64, u16),

    /// Low EV bits that name the plane (for EVs put in by [`PathSet::replace_ev`]).
    plane_bits: u8,
}

impl PathSet {
    /// Builds the EV set of a QP from a validated configuration.
    // spec: PATH-SET-1
    pub fn new(cfg: &EvConfig) -> Self {
        let nplanes = usize::from(cfg.planes);
        let mut planes = vec![Plane::default(); nplanes];
        let mut evs = Vec::new();
        let push = |value: u32, plane: usize, evs: &mut Vec<Ev>, planes: &mut Vec<Plane>| {
            let idx = evs.len() as u16;
            let p = &mut planes[plane];
            p.members.push(idx);
            let role = if p.active.len() < usize::from(cfg.per_plane) {
                p.active.push(idx);
                Role::Active
            } else {
                p.backup.push_back(idx);
                Role::Backup
            };
            evs.push(Ev {
                value,
                plane: plane as u8,
                state: EvState::Good,
                role,
                clean: 0,
                probe_ts: None,
                probe_interval: cfg.probe_min,
                next_probe: Instant::MAX,
                delay_ns: 0,
                acked_sent: Instant::ZERO,
                deliver_ns: 0,
                delay_skips: 0,
                delay_weight: 0,
                retired_by: None,
                fabric_trimmed: false,
                losses_in_a_row: 0,
                last_rtt_ns: 0,
            });
        };
        match &cfg.explicit {
            Some(list) => {
                for &v in list {
                    let plane = crate::wire::plane_of(v, cfg.plane_bits) as usize;
                    if plane < nplanes {
                        push(v, plane, &mut evs, &mut planes);
                    }
                }
            }
            None => {
                let per = u32::from(cfg.per_plane) + u32::from(cfg.backup_per_plane);
                // Interleave planes so that EV indices rotate over planes as well.
                for i in 0..per {
                    for plane in 0..nplanes {
                        let v = ((cfg.first_index + i) << cfg.plane_bits) | plane as u32;
                        push(v, plane, &mut evs, &mut planes);
                    }
                }
            }
        }
        // A QP keeps its EVs for life; growth by doubling left up to half of this table unused (8 MB of the
        // 1024-host bench's 44).
        evs.shrink_to_fit();
        // Generated sets find an EV by arithmetic (`find`); only explicit ones need the sorted table.
        let mut lookup: Vec<(u32, u16)> = match cfg.explicit {
            Some(_) => evs
                .iter()
                .enumerate()
                .map(|(i, e)| (e.value, i as u16))
                .collect(),
            None => Vec::new(),
        };
        lookup.sort_unstable();
        let counters = if cfg.counters {
            vec![EvStats::default(); evs.len()]
        } else {
            Vec::new()
        };
        Self {
            evs,
            counters,
            planes,
            plane_cursor: 0,
            any_cursor: 0,
            lookup,
            generated: cfg.explicit.is_none().then_some((
                cfg.first_index,
                cfg.plane_bits,
                u32::from(cfg.planes),
            )),
            per_plane: usize::from(cfg.per_plane),
            min_active: usize::from(cfg.min_active_per_plane),
            plane_dead_after: cfg.plane_dead_after,
            probe_min: cfg.probe_min,
            plane_probe_min: cfg.plane_probe_min.unwrap_or(cfg.probe_min),
            probe_max: cfg.probe_max,
            probe_clean: cfg.probe_clean,
            probe_deadline: Instant::MAX,
            changes: Vec::new(),
            suppressed_retirements: 0,
            worst_delay: (0, 0),
            plane_bits: cfg.plane_bits,
        }
    }

    /// Index of the EV with this value (every SACK and NACK echoes one).
    #[inline]
    pub fn find(&self, ev: u32) -> Option<u16> {
        if let Some((first, bits, planes)) = self.generated {
            // Generated EVs interleave planes: index = (ev >> plane_bits - first_index) × planes + plane.
            let plane = crate::wire::plane_of(ev, bits);
            let i = crate::wire::path_of(ev, bits).checked_sub(first)?;
            let idx = usize::try_from(u64::from(i) * u64::from(planes) + u64::from(plane)).ok()?;
            return match self.evs.get(idx) {
                Some(e) if e.value == ev => Some(idx as u16),
                _ => None,
            };
        }
        self.lookup
            .binary_search_by_key(&ev, |&(v, _)| v)
            .ok()
            .map(|i| self.lookup[i].1)
    }

    /// The EV value at `idx`.
    #[inline]
    pub fn value(&self, idx: u16) -> u32 {
        self.evs[usize::from(idx)].value
    }

    /// The plane of the EV at `idx`.
    #[inline]
    pub fn plane(&self, idx: u16) -> u8 {
        self.evs[usize::from(idx)].plane
    }

    /// The state of the EV at `idx`.
    #[inline]
    pub fn state(&self, idx: u16) -> EvState {
        self.evs[usize::from(idx)].state
    }

    /// Number of planes.
    pub fn planes(&self) -> usize {
        self.planes.len()
    }

    /// Retirements the floor prevented.
    #[cfg(test)]
    pub fn suppressed_retirements(&self) -> u64 {
        self.suppressed_retirements
    }

    /// Chooses the EV for the next packet: the next usable plane in rotation, then the next active EV of that
    /// plane in rotation, passing over (and clearing) SKIP once. `None` when no plane is usable.
    // spec: PATH-SEL-1
    #[inline]
    pub fn next_ev(&mut self) -> Option<u16> {
        self.next_ev_on(u32::MAX)
    }

    /// Like [`next_ev`](Self::next_ev), but only on planes whose bit is set in `ports_ready` (ports with room to
    /// transmit; MRC's `GetSendParams`).
    // spec: PATH-SEL-2
    #[inline]
    pub fn next_ev_on(&mut self, ports_ready: u32) -> Option<u16> {
        let n = self.planes.len();
        for _ in 0..n {
            let p = self.plane_cursor;
            self.plane_cursor = if p + 1 == n { 0 } else { p + 1 };
            if p < 32 && ports_ready >> p & 1 == 0 {
                continue;
            }
            if let Some(idx) = self.pick_in_plane(p) {
                return Some(idx);
            }
        }
        None
    }

    #[inline]
    fn pick_in_plane(&mut self, p: usize) -> Option<u16> {
        let plane = &mut self.planes[p];
        if !plane.up() || plane.active.is_empty() {
            return None;
        }
        let len = plane.active.len();
        // Two passes: the first may only clear SKIP marks and pass over slow EVs.
        for turn in 0..2 * len {
            if plane.cursor >= len {
                plane.cursor = 0;
            }
            let idx = plane.active[plane.cursor];
            plane.cursor += 1;
            let ev = &mut self.evs[usize::from(idx)];
            match ev.state {
                EvState::Good if ev.delay_skips > 0 && turn < len => ev.delay_skips -= 1,
                EvState::Good => {
                    ev.delay_skips = ev.delay_weight;
                    return Some(idx);
                }
                EvState::Skip => {
                    // spec: PATH-EV-2
                    ev.state = EvState::Good;
                    self.changes.push(EvChange {
                        ev: ev.value,
                        plane: ev.plane,
                        from: EvState::Skip,
                        to: EvState::Good,
                    });
                }
                EvState::AssumedBad | EvState::Denied => {}
            }
        }
        None
    }

    /// Whether EV `idx` may carry the next packet: GOOD, on a plane that is up and whose port is ready.
    pub fn can_send_on(&self, idx: u16, ports_ready: u32) -> bool {
        let Some(ev) = self.evs.get(usize::from(idx)) else {
            return false;
        };
        let p = usize::from(ev.plane);
        ev.state == EvState::Good
            && self.planes.get(p).is_some_and(|pl| pl.up())
            && (p >= 32 || ports_ready >> p & 1 == 1)
    }

    /// Chooses an EV regardless of health (QP retries when nothing is usable): every non-denied EV in turn.
    pub fn next_any_ev(&mut self) -> Option<u16> {
        let n = self.evs.len();
        for _ in 0..n {
            let i = self.any_cursor % n;
            self.any_cursor = i + 1;
            if self.evs[i].state != EvState::Denied {
                return Some(i as u16);
            }
        }
        None
    }

    /// Whether any plane can carry traffic now.
    #[inline]
    pub fn usable(&self) -> bool {
        self.usable_except(u8::MAX)
    }

    /// Whether any plane but `plane` can carry traffic now.
    #[inline]
    pub fn usable_except(&self, plane: u8) -> bool {
        self.planes.iter().enumerate().any(|(n, p)| {
            n != usize::from(plane)
                && p.up()
                && p.active.iter().any(|&i| {
                    matches!(
                        self.evs[usize::from(i)].state,
                        EvState::Good | EvState::Skip
                    )
                })
        })
    }

    /// Counts a packet sent on `idx` (payload `bytes`; `retx` for retransmissions); returns the EV's plane.
    #[inline]
    pub fn on_sent(&mut self, idx: u16, bytes: u64, retx: bool) -> u8 {
        let plane = self.evs[usize::from(idx)].plane;
        count(&mut self.counters, usize::from(idx), |c| c.sent += 1);
        let ps = &mut self.planes[usize::from(plane)].stats;
        ps.tx_packets += 1;
        ps.tx_bytes += bytes;
        ps.retransmits += u64::from(retx);
        plane
    }

    /// A SACK or NACK echoed `idx`: the path delivers. `rtt` is the sample it carried, if any.
    #[inline]
    pub fn on_delivery(&mut self, idx: u16, rtt: Option<Duration>) {
        count(&mut self.counters, usize::from(idx), |c| c.delivered += 1);
        let plane = usize::from(self.evs[usize::from(idx)].plane);
        self.planes[plane].losses_since_delivery = 0;
        let Some(rtt) = rtt else {
            return;
        };
        let ev = &mut self.evs[usize::from(idx)];
        let r = crate::time::nanos(rtt);
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
            let ev = &mut self.evs[usize::from(idx)];
            if ev.state == EvState::AssumedBad {
                ev.retired_by = Some(sent_at.ts32());
            }
            None
        }
    }

    /// A data packet sent on `idx` at `ts` (low 32 bits of ns) was delivered. If a loss retired `idx` and this
    /// packet was sent no earlier than the one taken for lost, the path delivers, late: the loss was its delay
    /// (a slowed link's queue), and `idx` takes its place in the rotation again at once instead of after
    /// `probe_clean` probes, its delay weight (from this sample) keeping its share small. Returns whether it did.
    // spec: PATH-EV-7
    pub fn on_late_delivery(&mut self, idx: u16, ts: u32) -> bool {
        let Some(ev) = self.evs.get_mut(usize::from(idx)) else {
            return false;
        };
        let p = usize::from(ev.plane);
        let disproved = ev
            .retired_by
            .is_some_and(|t| ts.wrapping_sub(t) as i32 >= 0);
        if ev.state != EvState::AssumedBad || !disproved || self.planes[p].dead {
            return false;
        }
        ev.probe_ts = None;
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
            self.evs[usize::from(m)].next_probe = Instant::MAX;
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
        ev.probe_ts = None;
        ev.probe_interval = self.probe_min;
        // spec: PATH-PROBE-1
        ev.next_probe = now + self.probe_min;
        self.probe_deadline = self.probe_deadline.min(ev.next_probe);
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
        let mut found = None;
        let mut deadline = Instant::MAX;
        // Planes the peer reported down: probed like dead planes, and back in service at the first answer,
        // whatever the peer reports (a report may be stale, or forged).
        // spec: PATH-PLANE-3
        for plane in self.planes.iter_mut() {
            if !plane.remote_down || plane.local_down {
                continue;
            }
            if found.is_none() && plane.probe_at <= now {
                if plane.probe_outstanding {
                    plane.probe_interval = (plane.probe_interval * 2).min(self.probe_max);
                }
                let n = plane.members.len();
                for _ in 0..n {
                    let idx = plane.members[plane.probe_cursor % n];
                    plane.probe_cursor = plane.probe_cursor.wrapping_add(1);
                    let ev = &mut self.evs[usize::from(idx)];
                    if ev.state != EvState::Denied {
                        ev.probe_ts = Some(now.ts32());
                        count(&mut self.counters, usize::from(idx), |c| {
                            c.probes += 1;
                            c.sent += 1;
                        });
                        found = Some(idx);
                        break;
                    }
                }
                plane.probe_outstanding = found.is_some();
                plane.probe_at = now + plane.probe_interval;
            }
            deadline = deadline.min(plane.probe_at);
        }
        // Dead planes: one probe per interval each, rotating over the plane's EVs.
        // spec: PATH-PLANE-2
        for plane in self.planes.iter_mut() {
            if !plane.dead || !plane.up() {
                continue;
            }
            if found.is_none() && plane.probe_at <= now {
                if plane.probe_outstanding {
                    plane.probe_interval = (plane.probe_interval * 2).min(self.probe_max);
                }
                let n = plane.members.len();
                for _ in 0..n {
                    let idx = plane.members[plane.probe_cursor % n];
                    plane.probe_cursor = plane.probe_cursor.wrapping_add(1);
                    let ev = &mut self.evs[usize::from(idx)];
                    if ev.state == EvState::AssumedBad {
                        ev.probe_ts = Some(now.ts32());
                        count(&mut self.counters, usize::from(idx), |c| {
                            c.probes += 1;
                            c.sent += 1;
                        });
                        found = Some(idx);
                        break;
                    }
                }
                plane.probe_outstanding = found.is_some();
                plane.probe_at = now + plane.probe_interval;
            }
            deadline = deadline.min(plane.probe_at);
        }
        for (i, ev) in self.evs.iter_mut().enumerate() {
            if ev.state != EvState::AssumedBad {
                continue;
            }
            let plane = &self.planes[usize::from(ev.plane)];
            if plane.dead || !plane.up() {
                // Re-examined when the plane answers or its port comes back.
                continue;
            }
            if found.is_none() && ev.next_probe <= now {
                if ev.probe_ts.is_some() {
                    // The previous probe went unanswered: back off and start counting again.
                    ev.clean = 0;
                    ev.probe_interval = (ev.probe_interval * 2).min(self.probe_max);
                }
                ev.probe_ts = Some(now.ts32());
                ev.next_probe = now + ev.probe_interval;
                count(&mut self.counters, i, |c| {
                    c.probes += 1;
                    c.sent += 1;
                });
                found = Some(i as u16);
            }
            deadline = deadline.min(ev.next_probe);
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
        if self.planes[p].remote_down && self.evs[i].probe_ts == Some(ts) {
            // spec: PATH-PLANE-3
            let plane = &mut self.planes[p];
            plane.remote_down = false;
            plane.probe_outstanding = false;
            plane.probe_interval = self.probe_min;
            if self.evs[i].state != EvState::AssumedBad {
                self.evs[i].probe_ts = None;
                return;
            }
        }
        if self.evs[i].state != EvState::AssumedBad || self.evs[i].probe_ts != Some(ts) {
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
                    e.next_probe = now;
                    e.probe_ts = None;
                    e.clean = 0;
                    e.probe_interval = self.probe_min;
                }
            }
            self.probe_deadline = self.probe_deadline.min(now);
        }
        let ev = &mut self.evs[i];
        ev.probe_ts = None;
        if mark == SackMark::AlwaysSkip {
            ev.clean = 0;
            return;
        }
        ev.clean += 1;
        ev.probe_interval = self.probe_min;
        if ev.clean < self.probe_clean {
            // Ask again right away: restoring takes a few RTTs once the path answers.
            ev.next_probe = now;
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

    /// ASSUMED_BAD → `to`: its probing ends and the change is reported.
    fn mark_restored(&mut self, idx: u16, to: EvState) {
        let ev = &mut self.evs[usize::from(idx)];
        ev.state = to;
        ev.retired_by = None;
        ev.clean = 0;
        ev.next_probe = Instant::MAX;
        count(&mut self.counters, usize::from(idx), |c| c.restored += 1);
        self.changes.push(EvChange {
            ev: ev.value,
            plane: ev.plane,
            from: EvState::AssumedBad,
            to,
        });
    }

    /// Puts a healthy EV back in its plane: active if the plane is short, else backup.
    fn rejoin(&mut self, idx: u16) {
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
            e.next_probe = Instant::MAX;
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
            probe_ts: None,
            probe_interval: self.probe_min,
            next_probe: Instant::MAX,
            delay_ns: 0,
            delay_skips: 0,
            delay_weight: 0,
            retired_by: None,
            fabric_trimmed: false,
            losses_in_a_row: 0,
            acked_sent: Instant::ZERO,
            deliver_ns: 0,
            last_rtt_ns: 0,
        };
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

/// Adds to the counters of EV `idx`, if they are kept (a free function: callers hold other fields of the set).
#[inline]
fn count(counters: &mut [EvStats], idx: usize, add: impl FnOnce(&mut EvStats)) {
    if let Some(c) = counters.get_mut(idx) {
        add(c);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(planes: u8, per: u16, backup: u16, floor: u16) -> EvConfig {
        EvConfig {
            backup_per_plane: backup,
            min_active_per_plane: floor,
            ..EvConfig::with_planes(planes, per)
        }
    }

    #[test]
    fn counters_are_kept_only_when_asked_and_the_rtt_always() {
        for counters in [true, false] {
            let mut s = PathSet::new(&EvConfig {
                counters,
                ..cfg(2, 2, 0, 1)
            });
            let i = s.next_ev().unwrap();
            s.on_sent(i, 1000, false);
            s.on_delivery(i, Some(Duration::from_micros(7)));
            s.on_trim(i, true);
            let info = s.infos().nth(usize::from(i)).unwrap();
            assert_eq!(
                info.stats.last_rtt_ns, 7_000,
                "the RTT steers sending: always kept"
            );
            let n = u64::from(counters);
            assert_eq!(
                (info.stats.sent, info.stats.delivered, info.stats.trims),
                (n, n, n),
                "counters {counters}"
            );
        }
    }

    #[test]
    fn rotation_is_plane_equal() {
        let mut s = PathSet::new(&cfg(4, 4, 0, 1));
        let mut per_plane = [0; 4];
        for _ in 0..400 {
            let i = s.next_ev().unwrap();
            per_plane[usize::from(s.plane(i))] += 1;
        }
        assert_eq!(per_plane, [100; 4]);
    }

    #[test]
    fn plane_stays_equal_when_some_evs_retire() {
        let mut s = PathSet::new(&cfg(2, 8, 0, 1));
        // Retire 6 of plane 0's 8 EVs (indices of plane 0 are the even ones).
        let now = Instant::ZERO;
        for i in (0..12).step_by(2) {
            s.on_loss(i, now, Instant::ZERO, false);
        }
        let (good, _, bad, _) = s.plane_state_counts(0);
        assert_eq!((good, bad), (2, 6));
        let mut per_plane = [0; 2];
        for _ in 0..100 {
            let i = s.next_ev().unwrap();
            per_plane[usize::from(s.plane(i))] += 1;
        }
        assert_eq!(per_plane, [50, 50], "planes are never rebalanced");
    }

    #[test]
    fn skip_is_passed_over_once() {
        let mut s = PathSet::new(&cfg(1, 3, 0, 1));
        s.on_trim(1, false);
        assert_eq!(s.state(1), EvState::Skip);
        let picks: Vec<u16> = (0..5).map(|_| s.next_ev().unwrap()).collect();
        assert_eq!(picks, vec![0, 2, 0, 1, 2]);
        assert_eq!(s.state(1), EvState::Good);
        s.on_trim(0, true);
        assert_eq!(
            s.state(0),
            EvState::Good,
            "last-hop trims leave the path alone"
        );
    }

    /// A slow path keeps its weight between its few samples: it is passed over `w` turns after every packet it
    /// carries, not once (a spent count gave a spine slowed to 25% its full share again until its next sample,
    /// one long RTT later, and the QPs that kept it in rotation finished last: p99 +8.7% over healthy).
    #[test]
    fn slow_ev_keeps_its_weight_between_samples() {
        let mut s = PathSet::new(&cfg(1, 4, 0, 1));
        for i in 0..3 {
            s.on_delivery(i, Some(Duration::from_micros(10)));
        }
        // Three times the typical RTT: 4 × 20 / 10 = 8 turns passed over per packet carried.
        s.on_delivery(3, Some(Duration::from_micros(30)));
        assert!(s.weigh_by_delay(3, 10_000));
        let slow = (0..280).filter(|_| s.next_ev() == Some(3)).count();
        assert_eq!(slow, 10, "1 packet per 9 of its turns (28 picks)");
    }

    /// A loss that was only delay is undone by the delivery it was waiting for: the EV is active again and its
    /// stand-in back in reserve (a spine slowed to 25% otherwise lost half its QPs for a probe cycle: p50 +4.2%
    /// over healthy, +3.5% undone). A delivery of an older packet proves nothing about the loss.
    #[test]
    fn late_delivery_undoes_a_retirement() {
        let mut s = PathSet::new(&cfg(1, 2, 1, 1));
        let lost = Instant::from_nanos(5_000);
        assert_eq!(s.on_loss(0, Instant::from_nanos(20_000), lost, false), None);
        assert_eq!(s.state(0), EvState::AssumedBad);
        assert!(!s.on_late_delivery(0, 4_999), "sent before the lost packet");
        assert!(s.on_late_delivery(0, 5_000));
        assert_eq!(s.state(0), EvState::Good);
        let mut picks: Vec<u16> = (0..4).map(|_| s.next_ev().unwrap()).collect();
        picks.sort();
        assert_eq!(picks, vec![0, 0, 1, 1], "EV 2 is a backup again");
        assert!(!s.on_late_delivery(0, 6_000), "only once");
    }

    #[test]
    fn loss_replaces_from_backup_and_respects_floor() {
        let mut s = PathSet::new(&cfg(1, 2, 1, 1));
        let now = Instant::ZERO;
        s.on_loss(0, now, Instant::ZERO, false);
        assert_eq!(s.state(0), EvState::AssumedBad);
        let actives: Vec<_> = s.infos().filter(|e| e.active).map(|e| e.ev).collect();
        assert_eq!(actives, vec![1, 2], "backup 2 promoted");
        s.on_delivery(1, None);
        s.on_loss(1, now, Instant::ZERO, false);
        assert_eq!(s.state(1), EvState::AssumedBad);
        s.on_delivery(2, None);
        s.on_loss(2, now, Instant::ZERO, false);
        assert_eq!(s.state(2), EvState::Good, "floor of 1 active EV holds");
        assert_eq!(s.suppressed_retirements(), 1);
    }

    #[test]
    fn a_loss_overtaken_on_its_own_ev_does_not_retire_it() {
        let mut s = PathSet::new(&cfg(1, 2, 0, 0));
        let t = |us: u64| Instant::from_nanos(us * 1000);
        // A packet sent at 30 us on EV 0 was acknowledged; one sent at 10 us on it is found lost afterwards
        // (a link came back between the two): the path delivers now.
        s.on_clean_ack(0, t(30), t(40));
        assert_eq!(s.on_loss(0, t(40), t(10), false), None);
        assert_eq!(s.state(0), EvState::Good);
        assert_eq!(s.infos().next().unwrap().stats.losses, 1, "still counted");
        // A loss newer than anything EV 1 delivered retires it as before.
        s.on_clean_ack(1, t(10), t(20));
        s.on_loss(1, t(40), t(30), false);
        assert_eq!(s.state(1), EvState::AssumedBad);
    }

    #[test]
    fn probes_restore_after_clean_answers() {
        let mut s = PathSet::new(&cfg(1, 2, 0, 0));
        let t0 = Instant::from_nanos(1_000_000);
        s.on_loss(0, t0, Instant::ZERO, false);
        assert_eq!(s.probe_deadline(), t0 + Duration::from_micros(100));
        assert_eq!(s.poll_probe(t0), None);
        let mut t = t0 + Duration::from_micros(100);
        for round in 0..3 {
            let i = s.poll_probe(t).expect("probe due");
            assert_eq!(i, 0);
            assert_eq!(s.state(0), EvState::AssumedBad, "round {round}");
            s.on_probe_reply(0, t.ts32(), SackMark::None, t + Duration::from_micros(5));
            t += Duration::from_micros(5);
        }
        assert_eq!(s.state(0), EvState::Good);
        assert_eq!(s.poll_probe(t + Duration::from_millis(50)), None);
        assert_eq!(s.probe_deadline(), Instant::MAX);
        let kinds: Vec<_> = s.drain_changes().map(|c| (c.from, c.to)).collect();
        assert_eq!(
            kinds,
            vec![
                (EvState::Good, EvState::AssumedBad),
                (EvState::AssumedBad, EvState::Good)
            ]
        );
    }

    #[test]
    fn unanswered_probes_back_off() {
        let mut s = PathSet::new(&cfg(1, 2, 0, 0));
        s.on_loss(0, Instant::ZERO, Instant::ZERO, false);
        let mut t = Instant::ZERO;
        let mut gaps = Vec::new();
        let mut last = None;
        for _ in 0..12 {
            t = s.probe_deadline();
            assert!(s.poll_probe(t).is_some());
            if let Some(l) = last {
                gaps.push((t - l).as_micros());
            }
            last = Some(t);
        }
        assert_eq!(gaps[..4], [100, 200, 400, 800]);
        assert_eq!(*gaps.last().unwrap(), 10_000, "capped at probe_max");
        let _ = t;
    }

    #[test]
    fn silent_plane_is_retired_whole_and_ports_mask() {
        let mut s = PathSet::new(&cfg(2, 4, 4, 2));
        for k in 0..8 {
            s.on_loss(2 * (k % 4), Instant::ZERO, Instant::ZERO, false);
        }
        assert_eq!(s.plane_state_counts(0), (0, 0, 8, 0));
        for _ in 0..10 {
            let i = s.next_ev().unwrap();
            assert_eq!(s.plane(i), 1);
        }
        s.set_local_port(1, false);
        assert_eq!(s.next_ev(), None);
        assert!(!s.usable());
        assert!(s.next_any_ev().is_some());
        s.set_local_port(1, true);
        s.set_remote_ports(0b01);
        assert_eq!(s.next_ev(), None, "peer's port 1 down, plane 0 retired");
        s.set_remote_ports(0b11);
        assert!(s.next_ev().is_some());
    }

    #[test]
    fn find_agrees_with_a_search_for_generated_and_explicit_sets() {
        for cfg in [
            EvConfig {
                first_index: 7,
                ..cfg(8, 4, 8, 1)
            },
            cfg(1, 16, 0, 1),
            EvConfig {
                explicit: Some(vec![0x101, 0x200, 0x301, 0x400]),
                ..cfg(2, 2, 0, 1)
            },
        ] {
            let s = PathSet::new(&cfg);
            for (i, e) in s.infos().enumerate() {
                assert_eq!(s.find(e.ev), Some(i as u16), "{cfg:?}");
            }
            for bogus in [u32::MAX, 0xdead_beef, 5 << 3 | 9] {
                if !s.infos().any(|e| e.ev == bogus) {
                    assert_eq!(s.find(bogus), None);
                }
            }
        }
    }

    #[test]
    fn deny_and_allow() {
        let mut s = PathSet::new(&cfg(1, 2, 1, 1));
        assert!(s.set_denied(0, true));
        assert_eq!(s.state(0), EvState::Denied);
        for _ in 0..4 {
            assert_ne!(s.next_ev(), Some(0));
        }
        assert!(s.set_denied(0, false));
        assert_eq!(s.state(0), EvState::Good);
        assert!(!s.set_denied(12345, true));
    }

    #[test]
    fn replace_ev_swaps_an_explicit_ev_in_place() {
        // Plane bits 1 (two planes): 0x100, 0x102 on plane 0; 0x201, 0x203 on plane 1.
        let c = EvConfig {
            plane_bits: 1,
            explicit: Some(vec![0x100, 0x102, 0x201, 0x203]),
            ..cfg(2, 2, 0, 1)
        };
        let mut s = PathSet::new(&c);
        assert!(s.replace_ev(0x102, 0x104));
        assert_eq!(s.find(0x102), None);
        let i = s.find(0x104).expect("the new EV is the QP's");
        assert_eq!((s.plane(i), s.state(i)), (0, EvState::Good));
        // It carries packets like the others.
        assert!((0..16).any(|_| s.next_ev() == Some(i)));
        // Onto another plane.
        assert!(s.replace_ev(0x104, 0x205));
        assert_eq!(s.plane(s.find(0x205).unwrap()), 1);
        // Refused: an unknown old EV, a new one already there, the last EV of a plane moving away, generated sets.
        assert!(!s.replace_ev(0x999, 0x106));
        assert!(!s.replace_ev(0x100, 0x201));
        assert!(!s.replace_ev(0x100, 0x207));
        assert!(!PathSet::new(&cfg(2, 2, 0, 1)).replace_ev(0, 0x10));
        for (i, e) in s.infos().enumerate() {
            assert_eq!(s.find(e.ev), Some(i as u16));
        }
    }

    #[test]
    fn config_validation_names_fields() {
        let mut c = EvConfig::with_planes(8, 16);
        assert!(c.validate().is_ok());
        c.plane_bits = 2;
        assert_eq!(c.validate().unwrap_err().field, "qp.ev.plane_bits");
        c.plane_bits = 3;
        c.explicit = Some(vec![0, 1, 9]);
        assert_eq!(c.validate().unwrap_err().field, "qp.ev.explicit");
        c.explicit = None;
        c.min_active_per_plane = 17;
        assert_eq!(
            c.validate().unwrap_err().field,
            "qp.ev.min_active_per_plane"
        );
        assert_eq!(EvConfig::with_planes(1, 4).plane_bits, 0);
        assert_eq!(EvConfig::with_planes(5, 4).plane_bits, 3);
    }
}
