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

mod control;
mod health;

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

/// One EV: what sending and acknowledging read (40 bytes), apart from its probing and retirement state
/// ([`EvProbe`]). A QP's EVs are its largest table and a packet reads one of them: at 8,192 hosts in the
/// simulator, 72-byte records, probe fields included, cost a cache line per EV, and 64 EVs of 8,192 QPs
/// outgrew the cache twice as fast.
#[derive(Debug, Clone)]
#[repr(C)]
struct Ev {
    value: u32,
    /// Smoothed time from sending a packet on this EV to its acknowledgement, ns (0 before the first): every
    /// packet acknowledged on its first transmission is a sample, a little above its RTT (the receiver
    /// coalesces SACKs), so a path is known by many more samples than the TS echoes alone give.
    deliver_ns: u32,
    /// Newest send time of a never-retransmitted packet on this EV that was acknowledged: one path is FIFO, so
    /// an older packet of it still unacknowledged was overtaken, i.e. lost.
    acked_sent: Instant,
    /// Smoothed RTT of packets on this EV in ns (0 before the first sample): how late its path delivers.
    delay_ns: u64,
    /// Last RTT measured on it, ns (0 before the first sample).
    last_rtt_ns: u64,
    plane: u8,
    state: EvState,
    role: Role,
    /// Turns this EV is passed over (while Good) because its path is much slower than the QP's typical one.
    delay_skips: u8,
    /// What `delay_skips` restarts from each time the EV carries a packet: its latest sample's weight. A count
    /// spent once would leave a slow path its full share until its next sample, one of its long RTTs later.
    delay_weight: u8,
    /// Losses on it since a packet on it was last acknowledged.
    losses_in_a_row: u8,
    /// A packet on it was trimmed in the fabric (not at the last hop): a full queue sits on its path.
    fabric_trimmed: bool,
    clean: u8,
}

/// What an EV needs only while it is retired or probed.
#[derive(Debug, Clone)]
struct EvProbe {
    /// Outstanding probe timestamp (low 32 bits of ns), if a probe is unanswered.
    probe_ts: Option<u32>,
    /// Send time (low 32 bits of ns) of the packet whose loss retired this EV: a later delivery of a packet
    /// sent no earlier proves the loss was only delay (spec PATH-EV-7).
    retired_by: Option<u32>,
    probe_interval: Duration,
    next_probe: Instant,
}

impl EvProbe {
    fn new(probe_min: Duration) -> Self {
        Self {
            probe_ts: None,
            retired_by: None,
            probe_interval: probe_min,
            next_probe: Instant::MAX,
        }
    }
}

/// The EVs' probing state, by index, made at the first retirement or probe: until then every entry would be
/// `EvProbe::new(probe_min)`, which is what a missing one reads as. Most QPs never retire an EV, and at 8,192
/// hosts the table was a sixth of the simulator's memory.
#[derive(Debug, Clone, Default)]
struct Probes(Vec<EvProbe>);

impl Probes {
    /// Entry `i`, if the table is made.
    fn get(&self, i: usize) -> Option<&EvProbe> {
        self.0.get(i)
    }

    /// Entry `i`, if the table is made.
    fn get_mut(&mut self, i: usize) -> Option<&mut EvProbe> {
        self.0.get_mut(i)
    }

    /// The table for `n` EVs, made now if it is not.
    fn all(&mut self, n: usize, probe_min: Duration) -> &mut [EvProbe] {
        if self.0.is_empty() {
            self.0 = vec![EvProbe::new(probe_min); n];
        }
        &mut self.0
    }

    /// Entry `i` of the table for `n` EVs, made now if it is not.
    fn at(&mut self, i: usize, n: usize, probe_min: Duration) -> &mut EvProbe {
        &mut self.all(n, probe_min)[i]
    }
}

/// One plane of a QP. `repr(C)` keeps the declared order: what choosing an EV and counting a packet read
/// comes first.
#[derive(Debug, Clone, Default)]
#[repr(C)]
struct Plane {
    active: Vec<u16>,
    cursor: usize,
    local_down: bool,
    remote_down: bool,
    losses_since_delivery: u32,
    stats: PlaneStats,
    backup: VecDeque<u16>,
    /// Every EV of the plane, for plane-level probing.
    members: Vec<u16>,
    /// Retired whole: one probe per interval, rotating over its EVs, until one answers.
    dead: bool,
    probe_at: Instant,
    probe_interval: Duration,
    probe_cursor: usize,
    probe_outstanding: bool,
}

impl Plane {
    fn up(&self) -> bool {
        !self.local_down && !self.remote_down
    }
}

/// The EVs of one QP and their health.
///
/// `repr(C)` keeps the declared order: what choosing an EV and taking feedback read comes first.
#[derive(Debug, Clone)]
#[repr(C)]
pub struct PathSet {
    evs: Vec<Ev>,
    /// Per EV, by index: its probing and retirement state (made at the first retirement or probe).
    probes: Probes,
    planes: Vec<Plane>,
    plane_cursor: usize,
    /// Earliest `next_probe` of any probing EV (cached).
    probe_deadline: Instant,
    /// Largest smoothed RTT of any EV, ns, and which EV has it: the round trip an EV without a sample of its
    /// own may have.
    worst_delay: (u64, u16),
    /// For generated sets: (first index, plane bits, planes), so an EV's index is arithmetic.
    generated: Option<(u32, u8, u32)>,
    /// Counters of each EV, by index, kept apart from the state that sending reads (empty when
    /// [`EvConfig::counters`] is off).
    counters: Vec<EvStats>,
    changes: Vec<EvChange>,
    any_cursor: usize,
    /// (EV value, index) sorted by value, for looking up echoed EVs of explicit sets.
    lookup: Vec<(u32, u16)>,
    per_plane: usize,
    min_active: usize,
    plane_dead_after: u32,
    probe_min: Duration,
    plane_probe_min: Duration,
    probe_max: Duration,
    probe_clean: u8,
    /// Mixed into the draw of each probe wait: QPs whose EVs are numbered alike and that were retired in the
    /// same instant (a fabric failure in the simulator) then still probe apart.
    probe_salt: u64,
    suppressed_retirements: u64,

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
                delay_ns: 0,
                acked_sent: Instant::ZERO,
                deliver_ns: 0,
                delay_skips: 0,
                delay_weight: 0,
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
            probes: Probes::default(),
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
            probe_salt: 0,
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
    /// transmit; MRC's `GetSendParams`). Always inline: every packet sent asks.
    // spec: PATH-SEL-2
    #[inline(always)]
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
}

/// Adds to the counters of EV `idx`, if they are kept (a free function: callers hold other fields of the set).
#[inline]
fn count(counters: &mut [EvStats], idx: usize, add: impl FnOnce(&mut EvStats)) {
    if let Some(c) = counters.get_mut(idx) {
        add(c);
    }
}

#[cfg(test)]
mod tests;
