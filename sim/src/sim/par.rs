//! One scenario on several threads, with the outcome of one.
//!
//! The fabric splits by T0 position (a leaf, or a pod's leaf, in every plane at once) into partitions: each
//! owns a block of T0 positions with the hosts under them, a block of the T1s and one of the T2s, the ports
//! leaving what it owns, and the events on them, in its own event queue. Hosts never leave their T0s, so
//! only switch-to-switch links cross partitions, and the shortest of their latencies is a lookahead: a packet
//! put on such a wire at `t` leaves it at `t + latency`, not before `t + lookahead`.
//!
//! Conservative synchronisation in windows: every partition processes its events before `m + lookahead`,
//! where `m` is the earliest pending event over all partitions; packets that reach the end of a wire into
//! another partition are handed over at the end of the window (one list per pair of partitions, holding at
//! most the packets a wire carries in one lookahead: no more than its latency over the serialization time of
//! the smallest frame, plus one, per crossing port), and the partitions agree on the next window. No window
//! crosses a point of a grid of two lookaheads (`grid_after`), and every way of running (threads, time order,
//! phases.rs) stops at the same point: the grid's first after the last transfer finished (or the limit).
//! Equal-time events pop by kind and component (queue/mod.rs
//! `tie_key`) and random draws are per port (sim.rs `draw`), so nothing depends on which thread ran what:
//! report.json and flows.csv are byte-identical for every thread count (tests/parallel.rs).
//!
//! Inside a window, each partition runs its T0 positions one after another (window.rs), for the same reason
//! they may run on different threads. One thread without failure actions goes further: the leaves' side and
//! the spines' side of the fabric take turns in phases of two lookaheads (phases.rs).
//!
//! One thread only: with a packet capture (one file, written in event order), with triggers (a completion
//! there starts transfers anywhere, with no delay to look ahead by) and when some switch-to-switch link has no
//! latency.

use super::*;
use crate::queue::Cause;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Condvar, Mutex};

/// `Port::dest` of a port whose far end is in its own partition.
pub(super) const LOCAL: u16 = u16::MAX;

/// A packet leaving a wire into another partition: it left port `port`, and arrives at `pkt.arrive`.
pub(super) struct Msg {
    port: u32,
    pkt: Pkt,
    /// The long control packet's bytes (empty if it fits the header).
    big: Vec<u8>,
    /// Its arrival event's cause, as the sequential run queues it.
    cause: Cause,
}

/// The shortest latency of a switch-to-switch link (those are the links that may cross partitions).
pub fn lookahead_ps(topo: &Topology) -> u64 {
    topo.ports
        .iter()
        .filter(|p| !matches!(p.kind, PortKind::HostUp | PortKind::T0Down))
        .map(|p| p.latency_ps)
        .min()
        .unwrap_or(u64::MAX)
}

/// How many partitions `threads` threads get on this fabric: at most one per T0 position.
pub fn partitions(topo: &Topology, threads: usize) -> usize {
    let positions = (topo.shape.pods as usize).saturating_mul(topo.shape.t0 as usize);
    threads.clamp(1, positions.clamp(1, usize::from(LOCAL) - 1))
}

/// The partition of every node: T0 positions (with their hosts), T1s and T2s each cut into `n` blocks in
/// index order.
pub(super) fn node_parts(topo: &Topology, n: usize) -> Vec<u16> {
    let s = &topo.shape;
    let block = |i: u32, total: u32| (u64::from(i) * n as u64 / u64::from(total.max(1))) as u16;
    let positions = s.pods * s.t0;
    let hosts = (0..topo.hosts).map(|h| block(h / s.hpt0.max(1), positions));
    let switches = topo.sw.iter().map(|id| match id.tier {
        0 => block(id.pod * s.t0 + id.index, positions),
        1 => block(id.pod * s.t1 + id.index, s.pods * s.t1),
        _ => block(id.pod * s.t2_per_t1 + id.index, s.t1 * s.t2_per_t1),
    });
    hosts.chain(switches).collect()
}

/// Windows start on a grid of two lookaheads (phases.rs runs the fabric's two sides in turns of that length):
/// its first point after `t`.
fn grid_after(t: u64, lookahead: u64) -> u64 {
    let span = lookahead.max(1).saturating_mul(2);
    (t / span + 1).saturating_mul(span)
}

/// The grid's first point at or after `t`.
pub(super) fn grid_from(t: u64, lookahead: u64) -> u64 {
    if t == 0 {
        0
    } else {
        grid_after(t - 1, lookahead)
    }
}

fn window_end(t: u64, lookahead: u64, limit: u64) -> u64 {
    t.saturating_add(lookahead.max(1))
        .min(grid_after(t, lookahead))
        .min(limit.saturating_add(1))
}

/// Runs `sim` (see `Sim::run`).
pub(super) fn run(
    mut sim: Sim,
    limit: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Outcome {
    let la = lookahead_ps(&sim.topo);
    let one = sim.capture.is_some() || !sim.triggers.is_empty() || la == 0;
    let n = if one {
        1
    } else {
        partitions(&sim.topo, sim.cfg.threads)
    };
    if !one && !sim.cfg.time_order {
        sim.win = window::Window::by_position(&sim.topo);
        sim.q = EventQueue::with_slot_shift(KEY_MASK, window::SLOT_SHIFT);
    }
    // By phases: one thread by position, no failure action (it changes both sides at one instant), and a
    // lookahead short enough for the grid.
    let phases =
        (n == 1 && !one && !sim.cfg.time_order && sim.actions.is_empty() && la < u64::MAX / 4)
            .then(|| phases::Phases::new(&sim.topo, la))
            .flatten();
    let by_phases = phases.is_some();
    if let Some(p) = phases {
        sim.ph = p;
        // Arrivals: the kind bits of `ev` (sim.rs) that name EV_ARRIVE.
        sim.q.set_late_lane(ev(0b111, 0), ev(EV_ARRIVE, 0));
    }
    if std::env::var_os("MRC_SIM_DEBUG").is_some() {
        eprintln!(
            "partitions {n}, lookahead {la} ps, by phases {by_phases} (spines by position {})",
            sim.ph.spines_apart()
        );
    }
    let (parts, end, events) = if n == 1 {
        sim.seed_events();
        let (end, events) = if by_phases {
            phases::sequential(&mut sim, la, limit, progress)
        } else {
            sequential(&mut sim, la, limit, progress)
        };
        (vec![sim], end, events)
    } else {
        let mut parts = sim.split(n);
        let (end, events) = parallel(&mut parts, la, limit, progress);
        (parts, end, events)
    };
    let (mut sim, inflight) = merge(parts);
    sim.c.events = events;
    sim.finish(end, inflight)
}

impl Sim {
    /// Where a run on one thread stands after `events`.
    pub(super) fn progress(&self, events: u64) -> Progress {
        Progress {
            now_ps: self.now,
            events,
            done: self.placed as f64 / self.cfg.total_bytes.max(1) as f64,
        }
    }
}

fn sequential(
    sim: &mut Sim,
    la: u64,
    limit: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> (u64, u64) {
    let mut events = 0;
    // The run stops at the grid's first point after the last transfer finished: `at` is the grid's next
    // point after what has run.
    let mut at = 0;
    while let Some(t) = sim.q.next_time() {
        if t > limit || (sim.remaining == 0 && t >= at) {
            break;
        }
        let w = window_end(t, la, limit);
        events += sim.run_window(w);
        at = grid_from(w, la);
        if !progress(&sim.progress(events)) {
            return ((w - 1).min(limit), events);
        }
    }
    (limit, events)
}

/// What the partitions' threads share: each one's next event time, unfinished transfers, events and bytes
/// placed (for progress), the handed-over packets per (from, to) pair, and the stop a progress callback asked
/// for.
struct Shared {
    n: usize,
    next: Vec<AtomicU64>,
    remaining: Vec<AtomicU64>,
    events: Vec<AtomicU64>,
    placed: Vec<AtomicU64>,
    mail: Vec<Mutex<Vec<Msg>>>,
    stop: AtomicBool,
    stop_at: AtomicU64,
    gate: Gate,
}

/// A barrier that a panicking partition breaks, so that the others stop waiting for it (the thread scope then
/// re-raises the panic) instead of hanging.
struct Gate {
    n: usize,
    /// (arrived, generation, broken).
    state: Mutex<(usize, u64, bool)>,
    cv: Condvar,
}

impl Gate {
    fn new(n: usize) -> Self {
        Self {
            n,
            state: Mutex::new((0, 0, false)),
            cv: Condvar::new(),
        }
    }

    /// Waits for all `n`; false if the gate is broken.
    fn wait(&self) -> bool {
        let mut g = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if g.2 {
            return false;
        }
        g.0 += 1;
        let generation = g.1;
        if g.0 == self.n {
            g.0 = 0;
            g.1 += 1;
            self.cv.notify_all();
            return true;
        }
        while g.1 == generation && !g.2 {
            g = self.cv.wait(g).unwrap_or_else(|e| e.into_inner());
        }
        !g.2
    }

    fn break_all(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).2 = true;
        self.cv.notify_all();
    }
}

/// Breaks the gate when its thread unwinds.
struct BreakOnPanic<'a>(&'a Gate);

impl std::ops::Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.break_all();
        }
    }
}

fn counters(n: usize) -> Vec<AtomicU64> {
    (0..n).map(|_| AtomicU64::new(0)).collect()
}

fn parallel(
    parts: &mut [Sim],
    la: u64,
    limit: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> (u64, u64) {
    let n = parts.len();
    let sh = Shared {
        n,
        next: counters(n),
        remaining: counters(n),
        events: counters(n),
        placed: counters(n),
        mail: (0..n * n).map(|_| Mutex::new(Vec::new())).collect(),
        stop: AtomicBool::new(false),
        stop_at: AtomicU64::new(limit),
        gate: Gate::new(n),
    };
    let (first, rest) = parts.split_at_mut(1);
    let end = std::thread::scope(|scope| {
        for (k, p) in rest.iter_mut().enumerate() {
            let sh = &sh;
            scope.spawn(move || worker(p, k + 1, sh, la, limit, None));
        }
        worker(&mut first[0], 0, &sh, la, limit, Some(progress))
    });
    let events = sh.events.iter().map(|e| e.load(Relaxed)).sum();
    (end, events)
}

/// One partition's rounds: take over the packets handed to it, publish its next event time, agree on the
/// window, process it, hand packets over. Partition 0 (the caller's thread) reports progress.
fn worker(
    sim: &mut Sim,
    k: usize,
    sh: &Shared,
    la: u64,
    limit: u64,
    mut progress: Option<&mut dyn FnMut(&Progress) -> bool>,
) -> u64 {
    let n = sh.n;
    let mut events = 0;
    let mut inbox = Vec::new();
    let mut at = 0;
    let _guard = BreakOnPanic(&sh.gate);
    loop {
        for from in (0..n).filter(|&f| f != k) {
            std::mem::swap(&mut inbox, &mut *lock(&sh.mail[from * n + k]));
            for m in inbox.drain(..) {
                sim.take_over(m);
            }
        }
        sh.next[k].store(sim.q.next_time().unwrap_or(u64::MAX), Relaxed);
        sh.remaining[k].store(sim.remaining as u64, Relaxed);
        if !sh.gate.wait() || sh.stop.load(Relaxed) {
            return sh.stop_at.load(Relaxed);
        }
        let t = sh
            .next
            .iter()
            .map(|x| x.load(Relaxed))
            .min()
            .unwrap_or(u64::MAX);
        let left: u64 = sh.remaining.iter().map(|x| x.load(Relaxed)).sum();
        if t > limit || (left == 0 && t >= at) {
            return limit;
        }
        let w = window_end(t, la, limit);
        events += sim.run_window(w);
        at = grid_from(w, la);
        for (to, out) in sim.outbox.iter_mut().enumerate() {
            if !out.is_empty() {
                // The receiver emptied its mail last round: hand the list over instead of copying it.
                let mut mail = lock(&sh.mail[k * n + to]);
                if mail.is_empty() {
                    std::mem::swap(&mut *mail, out);
                } else {
                    mail.append(out);
                }
            }
        }
        sh.events[k].store(events, Relaxed);
        sh.placed[k].store(sim.placed, Relaxed);
        if !sh.gate.wait() {
            return limit;
        }
        if let Some(progress) = progress.as_mut() {
            let sum = |v: &[AtomicU64]| v.iter().map(|x| x.load(Relaxed)).sum::<u64>();
            let p = Progress {
                now_ps: sim.now,
                events: sum(&sh.events),
                done: sum(&sh.placed) as f64 / sim.cfg.total_bytes.max(1) as f64,
            };
            if !progress(&p) {
                sh.stop_at.store((w - 1).min(limit), Relaxed);
                sh.stop.store(true, Relaxed);
            }
        }
    }
}

/// A poisoned lock only means another partition panicked, which the scope re-raises: the list is still whole.
fn lock(m: &Mutex<Vec<Msg>>) -> std::sync::MutexGuard<'_, Vec<Msg>> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Joins the partitions into one `Sim` for `finish`, with what their arenas still held.
fn merge(parts: Vec<Sim>) -> (Sim, (u64, u64)) {
    let mut inflight = (0, 0);
    for p in &parts {
        let (a, b) = p.inflight();
        inflight.0 += a;
        inflight.1 += b;
    }
    let mut parts = parts.into_iter();
    let Some(mut sim) = parts.next() else {
        unreachable!("a run has at least one partition")
    };
    for p in parts {
        sim.hosts.extend(p.hosts);
        sim.c = sim.c.plus(&p.c);
        for (a, b) in sim.times.iter_mut().zip(&p.times) {
            *a = ((a.0).min(b.0), (a.1).min(b.1));
        }
        if sim.goodput.len() < p.goodput.len() {
            sim.goodput
                .resize(p.goodput.len(), vec![0; sim.cfg.planes as usize]);
        }
        for (a, b) in sim.goodput.iter_mut().zip(&p.goodput) {
            for (x, y) in a.iter_mut().zip(b) {
                *x += y;
            }
        }
        if sim.queues.len() < p.queues.len() {
            sim.queues.resize(p.queues.len(), [0; 6]);
        }
        for (a, b) in sim.queues.iter_mut().zip(&p.queues) {
            for (x, y) in a.iter_mut().zip(b) {
                *x = (*x).max(*y);
            }
        }
        sim.placed += p.placed;
        sim.remaining += p.remaining;
    }
    sim.host_base = 0;
    (sim, inflight)
}

impl Sim {
    /// Splits a sequential `Sim` (before its run) into `n` partitions.
    fn split(mut self, n: usize) -> Vec<Sim> {
        let parts = node_parts(&self.topo, n);
        for (port, spec) in self.ports.iter_mut().zip(&self.topo.ports) {
            let (a, b) = (parts[spec.from as usize], parts[spec.to as usize]);
            port.dest = if a == b { LOCAL } else { b };
        }
        let mut first = vec![u32::MAX; n];
        for h in (0..self.topo.hosts).rev() {
            first[usize::from(parts[h as usize])] = h;
        }
        let mut hosts = std::mem::take(&mut self.hosts);
        let mut out: Vec<Sim> = (0..n)
            .rev()
            .map(|k| {
                let mine = hosts.split_off(first[k] as usize);
                self.part(k, n, first[k], mine)
            })
            .collect();
        out.reverse();
        out
    }

    /// Partition `k` of `n`: hosts from `base` on, a copy of the ports and of what every host may read, its
    /// own queue, arena and counters.
    fn part(&self, k: usize, n: usize, base: u32, hosts: Vec<Host>) -> Sim {
        let mut s = Sim {
            topo: Arc::clone(&self.topo),
            cfg: self.cfg.clone(),
            ports: self.ports.clone(),
            cold: self.cold.clone(),
            arena: Arena::default(),
            blocked: vec![false; hosts.len()],
            q: EventQueue::with_slot_shift(KEY_MASK, self.q.shift()),
            ph: phases::Phases::default(),
            now: 0,
            hosts,
            host_base: base,
            conns: self.conns.clone(),
            xfers: self.xfers.clone(),
            rkeys: self.rkeys.clone(),
            triggers: self.triggers.clone(),
            fired: self.fired.clone(),
            xconn: self.xconn.clone(),
            times: self.times.clone(),
            remaining: 0,
            actions: self.actions.clone(),
            takes_down: self.takes_down.clone(),
            c: Counters::default(),
            goodput: Vec::new(),
            queues: Vec::new(),
            last_down_at: None,
            txbuf: self.txbuf.clone(),
            rxbuf: self.rxbuf.clone(),
            cqe: self.cqe.clone(),
            capture: None,
            placed: 0,
            outbox: (0..n).map(|_| Vec::new()).collect(),
            me: k as u16,
            win: self.win.clone(),
        };
        s.remaining = s.xfers.iter().filter(|x| s.is_local_host(x.src)).count();
        s.seed_events();
        s
    }

    /// Packet `i` leaves port `pi`'s wire in partition `dest`: it goes there at the end of the window.
    pub(super) fn hand_over(&mut self, dest: u16, pi: u32, i: u32) {
        let pkt = self.arena.pkts[i as usize];
        let big = if pkt.big == NONE {
            Vec::new()
        } else {
            std::mem::take(&mut self.arena.big[pkt.big as usize])
        };
        let cause = self.q.cause();
        self.outbox[usize::from(dest)].push(Msg {
            port: pi,
            pkt,
            big,
            cause,
        });
        self.release(i);
    }

    /// A packet handed over by another partition: onto the wire's end here, unless the link went down after
    /// it entered the wire (the flush would have taken it); either way its arrival event is queued, as the
    /// sequential run queued one when the packet entered the wire.
    fn take_over(&mut self, m: Msg) {
        let pi = m.port;
        let i = self.alloc();
        let mut pkt = m.pkt;
        pkt.big = NONE;
        if !m.big.is_empty() {
            let b = match self.arena.free_big.pop() {
                Some(b) => b,
                None => {
                    self.arena.big.push(Vec::new());
                    self.arena.big.len() as u32 - 1
                }
            };
            self.arena.big[b as usize] = m.big;
            pkt.big = b;
        }
        self.arena.pkts[i as usize] = pkt;
        let entered = pkt.arrive - self.ports[pi as usize].latency_ps;
        if self.cold[pi as usize]
            .last_down
            .is_some_and(|d| d >= entered)
        {
            self.drop_pkt(i, Drop::Flushed);
        } else {
            let l = self.ports[pi as usize].wire;
            let l = self.list_push(l, i);
            self.ports[pi as usize].wire = l;
        }
        self.q
            .push_caused(pkt.arrive, ev_pkt(EV_ARRIVE, pi, i), m.cause);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A partition that panics breaks the gate: the others return instead of waiting for it forever.
    #[test]
    fn a_panicking_partition_does_not_hang_the_others() {
        let gate = Gate::new(3);
        let r = std::thread::scope(|s| {
            let waiters: Vec<_> = (0..2).map(|_| s.spawn(|| gate.wait())).collect();
            let bad = s.spawn(|| {
                let _g = BreakOnPanic(&gate);
                panic!("a partition fails");
            });
            assert!(bad.join().is_err());
            waiters
                .into_iter()
                .map(|w| w.join().unwrap())
                .collect::<Vec<_>>()
        });
        assert_eq!(r, vec![false, false]);
        // A whole gate lets everyone through, round after round.
        let gate = Gate::new(2);
        std::thread::scope(|s| {
            let a = s.spawn(|| (0..100).all(|_| gate.wait()));
            assert!((0..100).all(|_| gate.wait()));
            assert!(a.join().unwrap());
        });
    }
}
