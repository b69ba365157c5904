//! The event queue: a radix heap on integer time, exact and deterministic.
//!
//! Simulated time never goes back, so a monotone priority queue is enough: an event lives in the bucket of
//! the highest bit in which its time differs from the last time popped, and a pop only ever redistributes
//! the lowest non-empty bucket. Most events are a few hundred ns to a few µs ahead, so they move through a
//! handful of buckets at most, with no comparisons against the rest of the queue.
//!
//! Ties at equal time pop in causal FIFO order (`Cause`): the event scheduled at the earlier simulated time
//! first, then the one whose scheduler was scheduled earlier, and so on back `DEPTH` events; then by the setup
//! event (failure action or transfer start) the event descends from, in setup order; then in the order its
//! scheduler pushed it; last by the event's key (the payload under a mask that leaves out hints, permuted per
//! time: `tie_key`). That is what insertion order means in a sequential FIFO queue (the event created
//! earlier goes first, and events created at the same instant follow their creators' order), but taken from
//! simulated times only: a partition of a parallel run (sim/par.rs) inserts events in another order than a
//! sequential run, and the cause and key are what both agree on, so every thread count gives the same run.
//! Neither a per-time permutation alone (a QP's packets get a new rank at every hop, so its paths' RTT
//! estimates spread and losses are found late) nor a fixed component order (the same inputs lose every tie)
//! matched the FIFO queue's results.

use std::collections::VecDeque;

/// Where an event comes from: the time at which it was scheduled, the gaps back to the times at which its
/// scheduler, its scheduler's scheduler... were scheduled, the setup event at the root of that chain (its rank
/// in setup order), and the rank of the push among its scheduler's pushes. A function of simulated history
/// only; it travels with a packet handed to another partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cause {
    created: u64,
    up: Rank,
}

/// The order of an event among those at its time: a smaller rank pops first, as the earlier insertion did in
/// a FIFO queue. Gaps are stored as `u32::MAX` minus the gap in ps (saturated at 4.3 ms), so that the event
/// scheduled longer ago sorts first; 24 bytes, so that an event takes 40.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Rank {
    /// How long ago the event was scheduled (inverted).
    age: u32,
    /// The gaps between its ancestors' scheduling times (inverted), nearest first.
    gaps: [u32; DEPTH - 1],
    root: u32,
    seq: u32,
}

/// How many scheduling times back a rank reaches (fid-slow-spine-1024's tail needed 4: with 1 or 2 its
/// p99 or max FCT slowdown broke its bound at some seeds).
const DEPTH: usize = 4;

fn inverted_gap(from: u64, to: u64) -> u32 {
    u32::MAX - to.saturating_sub(from).min(u64::from(u32::MAX)) as u32
}

impl Rank {
    /// The rank of an event at `t` with cause `c`.
    #[inline]
    fn of(t: u64, c: Cause) -> Self {
        Rank {
            age: inverted_gap(c.created, t),
            ..c.up
        }
    }
}

/// One event: time in ps, rank among its time's events, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    t: u64,
    rank: Rank,
    e: u64,
}

/// The order of an event among those at time `t`: its key's high half (the simulator's event kind) first, then
/// its low half (the component) under a permutation that changes with the time, so that ties do not always
/// favour the lowest-numbered port or host (a fixed order would put the same flows last at every tie, as a
/// seeded one does not). A bijection for each `t`: equal tie keys mean equal keys.
pub fn tie_key(t: u64, key: u64) -> u64 {
    let mut h = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    let lo = (key as u32 ^ h as u32).wrapping_mul(0x9E37_79B1);
    (key & !0xFFFF_FFFF) | u64::from(lo)
}

/// A radix heap of events.
#[derive(Debug)]
pub struct EventQueue {
    /// Bucket 0: events at exactly `last`, in rank order.
    now: VecDeque<Item>,
    /// Bucket b (1..=64): events whose time first differs from `last` in bit b − 1.
    buckets: Vec<Vec<Item>>,
    last: u64,
    /// The rank of the event popped last (what an event scheduled now descends from).
    popped: Rank,
    /// Pushes (and handed-over causes) since the last pop.
    seq: u32,
    len: usize,
    /// The bits of a payload that order events at equal time.
    key_mask: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new(u64::MAX)
    }
}

/// The order of an item among those at its time: rank, then key (tie_key, computed when compared rather than
/// stored).
#[inline]
fn order(i: &Item, mask: u64) -> (Rank, u64) {
    (i.rank, tie_key(i.t, i.e & mask))
}

#[inline]
fn bucket(t: u64, last: u64) -> usize {
    64 - (t ^ last).leading_zeros() as usize
}

impl EventQueue {
    /// An empty queue at time 0; events at equal time pop by cause, then in the order of `payload & key_mask`.
    pub fn new(key_mask: u64) -> Self {
        Self {
            now: VecDeque::new(),
            buckets: (0..=64).map(|_| Vec::new()).collect(),
            last: 0,
            popped: Rank::default(),
            seq: 0,
            len: 0,
            key_mask,
        }
    }

    /// Pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No pending events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cause of the next event scheduled by the event popped last.
    #[inline]
    pub fn cause(&mut self) -> Cause {
        self.seq += 1;
        let mut gaps = [self.popped.age; DEPTH - 1];
        gaps[1..].copy_from_slice(&self.popped.gaps[..DEPTH - 2]);
        Cause {
            created: self.last,
            up: Rank {
                age: 0,
                gaps,
                root: self.popped.root,
                seq: self.seq,
            },
        }
    }

    /// Adds event `e` at time `t`, scheduled now by the event popped last; a time before that event's is
    /// taken as its time.
    #[inline]
    pub fn push(&mut self, t: u64, e: u64) {
        let c = self.cause();
        self.push_caused(t, e, c);
    }

    /// Adds event `e`, known before the run, at time `t`: the root of its descendants' causes, `root` its
    /// rank among such events (every partition must give an event the same).
    pub fn push_root(&mut self, t: u64, e: u64, root: u32) {
        let mut c = Cause::default();
        c.up.root = root;
        self.push_caused(t, e, c);
    }

    /// Adds event `e` at time `t` with the cause it got where it was scheduled (another partition).
    #[inline]
    pub fn push_caused(&mut self, t: u64, e: u64, cause: Cause) {
        let t = t.max(self.last);
        let it = Item {
            t,
            rank: Rank::of(t, cause),
            e,
        };
        self.len += 1;
        let b = bucket(t, self.last);
        if b == 0 {
            let mask = self.key_mask;
            let k = order(&it, mask);
            let at = self.now.partition_point(|i| order(i, mask) <= k);
            self.now.insert(at, it);
        } else {
            self.buckets[b].push(it);
        }
    }

    /// Time of the next event, without moving the queue's clock (a parallel run may still push events
    /// earlier than it, but not earlier than the last one popped).
    pub fn next_time(&self) -> Option<u64> {
        if let Some(i) = self.now.front() {
            return Some(i.t);
        }
        let b = (1..=64).find(|&b| !self.buckets[b].is_empty())?;
        self.buckets[b].iter().map(|i| i.t).min()
    }

    /// Removes the next event: (time, payload).
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        self.pop_before(u64::MAX)
    }

    /// Removes the next event if its time is before `end`: (time, payload).
    #[inline]
    pub fn pop_before(&mut self, end: u64) -> Option<(u64, u64)> {
        if self.now.is_empty() && !self.refill(end) {
            return None;
        }
        let it = *self.now.front()?;
        if it.t >= end {
            return None;
        }
        self.now.pop_front();
        self.popped = it.rank;
        self.seq = 0;
        self.len -= 1;
        Some((it.t, it.e))
    }

    /// Moves the earliest events into bucket 0 if they are before `end` (else leaves the clock where it is).
    fn refill(&mut self, end: u64) -> bool {
        let Some(b) = (1..=64).find(|&b| !self.buckets[b].is_empty()) else {
            return false;
        };
        let min = self.buckets[b]
            .iter()
            .map(|i| i.t)
            .min()
            .unwrap_or(self.last);
        if min >= end {
            return false;
        }
        let items = std::mem::take(&mut self.buckets[b]);
        self.last = min;
        for it in &items {
            let nb = bucket(it.t, min);
            if nb == 0 {
                self.now.push_back(*it);
            } else {
                self.buckets[nb].push(*it);
            }
        }
        // Keep the (usually tiny) allocation for reuse.
        let mut items = items;
        items.clear();
        if self.buckets[b].is_empty() {
            self.buckets[b] = items;
        }
        let mask = self.key_mask;
        self.now
            .make_contiguous()
            .sort_unstable_by_key(|i| order(i, mask));
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand_core::{Rng, SeedableRng};
    use rand_xoshiro::Xoshiro256PlusPlus;
    use std::cmp::Reverse;
    use std::collections::BinaryHeap;

    /// Same order as a binary heap on (time, cause, key) under random monotone use, ties included (few keys
    /// and causes, so equal times meet equal and unequal ranks often), with pushes at the current time
    /// between pops.
    #[test]
    fn matches_a_binary_heap() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mask = 0xFFFF;
        let mut q = EventQueue::new(mask);
        let mut h = BinaryHeap::new();
        let mut now = 0u64;
        for step in 0..200_000u64 {
            if rng.next_u64() % 3 != 0 || h.is_empty() {
                let dt = match rng.next_u64() % 4 {
                    0 => 0,
                    1 => rng.next_u64() % 100,
                    2 => rng.next_u64() % 100_000,
                    _ => rng.next_u64() % 10_000_000_000,
                };
                // The bits above the mask are a hint that must not order anything: distinct per event.
                let e = (step << 16) | (rng.next_u64() % 64);
                let mut c = q.cause();
                c.up.gaps[DEPTH - 2] = (rng.next_u64() % 3) as u32;
                c.up.root = (rng.next_u64() % 2) as u32;
                q.push_caused(now + dt, e, c);
                let r = Rank::of(now + dt, c);
                h.push(Reverse((now + dt, r, tie_key(now + dt, e & mask), e)));
            } else {
                let Reverse((t, c, k, e)) = h.pop().unwrap();
                assert_eq!(q.next_time(), Some(t));
                let (qt, qe) = q.pop().unwrap();
                assert_eq!((qt, qe & mask, q.popped), (t, e & mask, c));
                assert_eq!(tie_key(t, qe & mask), k);
                // Equal ranks at equal time are the same event to the simulator: either may come first.
                if qe != e {
                    let mut back: Vec<_> = h.drain().collect();
                    let i = back.iter().position(|r| r.0.3 == qe).unwrap();
                    back[i] = Reverse((t, c, k, e));
                    h.extend(back);
                }
                now = t;
            }
            assert_eq!(q.len(), h.len());
        }
        while let Some(Reverse((t, _, k, _))) = h.pop() {
            assert_eq!(
                q.pop().map(|(t, e)| (t, tie_key(t, e & mask))),
                Some((t, k))
            );
        }
        assert!(q.is_empty() && q.pop().is_none());
    }

    /// Causal FIFO whatever the keys and setup order: at a tie the event scheduled earlier pops first (the
    /// child of the last root, though it has the first setup rank), and of two scheduled at the same instant,
    /// the one whose scheduler popped first (roots at equal time pop in setup order); a cause handed to
    /// another queue orders there as it did here.
    #[test]
    fn ties_pop_in_causal_fifo_order() {
        for keys in [[20, 10, 5], [5, 10, 20]] {
            let mut q = EventQueue::new(u64::MAX);
            let mut far = EventQueue::new(u64::MAX);
            q.push_root(100, 1, 2);
            q.push_root(100, 2, 1);
            q.push_root(300, 3, 0);
            let mut causes = Vec::new();
            for (root, key) in [2, 1, 3].into_iter().zip(keys) {
                assert_eq!(q.pop().map(|(_, e)| e), Some(root));
                q.push(1_000, key);
                causes.push((q.cause(), key));
            }
            for &(c, key) in causes.iter().rev() {
                far.push_caused(1_000, key, c);
            }
            for q in [&mut q, &mut far] {
                assert_eq!((0..3).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(), keys);
            }
        }
    }

    /// `pop_before` leaves later events where they are and does not move the clock past `end`, so an event
    /// pushed afterwards between `end` and them (a parallel run's delivery) keeps its own time.
    #[test]
    fn pop_before_keeps_the_clock() {
        let mut q = EventQueue::new(u64::MAX);
        q.push(1_000, 1);
        q.push(5_000, 2);
        assert_eq!(q.pop_before(2_000), Some((1_000, 1)));
        assert_eq!(q.pop_before(2_000), None);
        assert_eq!(q.next_time(), Some(5_000));
        q.push(3_000, 3);
        assert_eq!(q.pop(), Some((3_000, 3)));
        assert_eq!(q.pop(), Some((5_000, 2)));
        // Ties of one cause pop by tie key, whatever the order of insertion, also when pushed at the current
        // time; pushes of one event pop in push order.
        let order = |t: u64, a: u64, b: u64| {
            if tie_key(t, a) < tie_key(t, b) {
                [a, b]
            } else {
                [b, a]
            }
        };
        let c = q.cause();
        for (a, b) in [(9, 4), (4, 9)] {
            q.push_caused(5_000, a, c);
            q.push_caused(5_000, b, c);
        }
        let [x, y] = order(5_000, 4, 9);
        assert_eq!(
            (0..4).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(),
            [x, x, y, y]
        );
        for e in [9, 4, 7] {
            q.push(5_000, e);
        }
        assert_eq!(
            (0..3).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(),
            [9, 4, 7]
        );
    }

    /// The kind (high half) orders first; among components the order changes with the time, so no component
    /// comes first at every tie.
    #[test]
    fn ties_are_permuted_by_time() {
        assert!(tie_key(7, 1 << 61) > tie_key(7, 0xFFFF_FFFF));
        let first = |t: u64| (0..8u64).min_by_key(|&c| tie_key(t, c)).unwrap();
        let firsts: std::collections::BTreeSet<u64> = (0..64).map(first).collect();
        assert!(firsts.len() >= 4, "{firsts:?}");
    }
}
