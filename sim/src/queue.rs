//! The event queue: a radix heap on integer time, exact and deterministic.
//!
//! Simulated time never goes back, so a monotone priority queue is enough: an event lives in the bucket of
//! the highest bit in which its time differs from the last time popped, and a pop only ever redistributes
//! the lowest non-empty bucket. Most events are a few hundred ns to a few µs ahead, so they move through a
//! handful of buckets at most, with no comparisons against the rest of the queue.
//!
//! Ties at equal time pop in causal FIFO order (`Cause`): the event scheduled at the earlier simulated time
//! first, then the one whose scheduler was scheduled earlier, and so on four events back; then by the setup
//! event (failure action or transfer start) the event descends from, in setup order; then in the order its
//! scheduler pushed it; last by the event's key (the payload under a mask that leaves out hints, permuted per
//! time: `tie_key`). That is what insertion order means in a sequential FIFO queue (the event created
//! earlier goes first, and events created at the same instant follow their creators' order), but taken from
//! simulated times only: a partition of a parallel run (sim/par.rs) inserts events in another order than a
//! sequential run, and the cause and key are what both agree on, so every thread count gives the same run.
//! Neither a per-time permutation alone (a QP's packets get a new rank at every hop, so its paths' RTT
//! estimates spread and losses are found late) nor a fixed component order (the same inputs lose every tie)
//! matched the FIFO queue's results.

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
/// a FIFO queue. Gaps are `u32::MAX` minus the gap in ps (saturated at 4.3 ms), so that the event scheduled
/// longer ago sorts first; two of them to a word, so that ranks compare as three integers and an event takes
/// 40 bytes. Four scheduling times back (fid-slow-spine-1024's tail needed 4: with 1 or 2 its p99 or max FCT
/// slowdown broke its bound at some seeds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Rank {
    /// How long ago the event was scheduled (high half), and its scheduler (low half).
    near: u64,
    /// The gaps of the two schedulers before (high half nearer).
    far: u64,
    /// The rank of the chain's setup event (high half), and of the push among its scheduler's (low half).
    origin: u64,
}

const LOW: u64 = 0xFFFF_FFFF;

fn inverted_gap(from: u64, to: u64) -> u64 {
    u64::from(u32::MAX - to.saturating_sub(from).min(u64::from(u32::MAX)) as u32)
}

impl Rank {
    /// The rank of an event at `t` with cause `c`.
    #[inline]
    fn of(t: u64, c: Cause) -> Self {
        Rank {
            near: inverted_gap(c.created, t) << 32 | (c.up.near & LOW),
            ..c.up
        }
    }

    /// The rank (but for its age) of an event scheduled by the event of this rank: its gaps move one place
    /// back, the last falls off.
    #[inline]
    fn child(self, seq: u32) -> Self {
        Rank {
            near: self.near >> 32,
            far: self.near << 32 | self.far >> 32,
            origin: (self.origin & !LOW) | u64::from(seq),
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

/// An event at the queue's current time, with its full order among those: rank, then tie key (computed once,
/// when the event reaches the current time), then payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Tied {
    rank: Rank,
    tie: u64,
    e: u64,
}

/// The order of an event among those at time `t`: its key's high half (the simulator's event kind) first, then
/// its low half (the component) under a permutation that changes with the time, so that ties do not always
/// favour the lowest-numbered port or host (a fixed order would put the same flows last at every tie, as a
/// seeded one does not). A bijection for each `t`: equal tie keys mean equal keys.
pub fn tie_key(t: u64, key: u64) -> u64 {
    permuted(tie_hash(t), key)
}

/// The per-time part of `tie_key`.
#[inline]
fn tie_hash(t: u64) -> u32 {
    let mut h = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    h as u32
}

#[inline]
fn permuted(h: u32, key: u64) -> u64 {
    let lo = (key as u32 ^ h).wrapping_mul(0x9E37_79B1);
    (key & !LOW) | u64::from(lo)
}

/// A radix heap of events.
#[derive(Debug)]
pub struct EventQueue {
    /// Bucket 0: events at exactly `last`, in order from `head` on (those before it popped).
    now: Vec<Tied>,
    head: usize,
    /// Bucket b (1..=64): events whose time first differs from `last` in bit b − 1.
    buckets: Vec<Vec<Item>>,
    last: u64,
    /// `tie_hash(last)`.
    last_hash: u32,
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

/// Sorts `v`, fast when it is nearly sorted already: events reach the current time in about their order (a
/// sequential run pushes them in time order, and an event's pushes follow its own order), so an insertion
/// sort (binary search, one move per event out of place) is cheap; one that would move too many (a
/// partition's handed-over events) falls back to a full sort.
fn sort_nearly_sorted(v: &mut [Tied]) {
    let mut budget = 32 * v.len() + 256;
    for i in 1..v.len() {
        let x = v[i];
        if x >= v[i - 1] {
            continue;
        }
        let j = v[..i - 1].partition_point(|y| *y <= x);
        if i - j > budget {
            v.sort_unstable();
            return;
        }
        budget -= i - j;
        v.copy_within(j..i, j + 1);
        v[j] = x;
    }
}

/// The most events a drained bucket keeps room for.
const KEEP: usize = 4096;

#[inline]
fn bucket(t: u64, last: u64) -> usize {
    64 - (t ^ last).leading_zeros() as usize
}

impl EventQueue {
    /// An empty queue at time 0; events at equal time pop by cause, then in the order of `payload & key_mask`.
    pub fn new(key_mask: u64) -> Self {
        Self {
            now: Vec::new(),
            head: 0,
            buckets: (0..=64).map(|_| Vec::new()).collect(),
            last: 0,
            last_hash: tie_hash(0),
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
        Cause {
            created: self.last,
            up: self.popped.child(self.seq),
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
        c.up.origin = u64::from(root) << 32;
        self.push_caused(t, e, c);
    }

    /// Adds event `e` at time `t` with the cause it got where it was scheduled (another partition).
    #[inline]
    pub fn push_caused(&mut self, t: u64, e: u64, cause: Cause) {
        let t = t.max(self.last);
        let rank = Rank::of(t, cause);
        self.len += 1;
        let b = bucket(t, self.last);
        if b == 0 {
            self.push_now(rank, e);
        } else {
            self.buckets[b].push(Item { t, rank, e });
        }
    }

    /// Adds an event due now (rare: most are scheduled ahead). Scheduled now, it goes after most of what is due
    /// now: a short move at the end.
    #[cold]
    #[inline(never)]
    fn push_now(&mut self, rank: Rank, e: u64) {
        let it = self.tied(rank, e);
        let at = self.head + self.now[self.head..].partition_point(|i| *i <= it);
        self.now.insert(at, it);
    }

    #[inline]
    fn tied(&self, rank: Rank, e: u64) -> Tied {
        Tied {
            rank,
            tie: permuted(self.last_hash, e & self.key_mask),
            e,
        }
    }

    /// Time of the next event, without moving the queue's clock (a parallel run may still push events
    /// earlier than it, but not earlier than the last one popped).
    pub fn next_time(&self) -> Option<u64> {
        if self.head < self.now.len() {
            return Some(self.last);
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
        if self.head == self.now.len() && !self.refill(end) {
            return None;
        }
        if self.last >= end {
            return None;
        }
        let it = *self.now.get(self.head)?;
        self.head += 1;
        self.popped = it.rank;
        self.seq = 0;
        self.len -= 1;
        Some((self.last, it.e))
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
        let mut items = std::mem::take(&mut self.buckets[b]);
        self.now.clear();
        self.head = 0;
        self.last = min;
        self.last_hash = tie_hash(min);
        for it in &items {
            let nb = bucket(it.t, min);
            if nb == 0 {
                let tied = self.tied(it.rank, it.e);
                self.now.push(tied);
            } else {
                self.buckets[nb].push(*it);
            }
        }
        // Keep a small allocation for reuse; a large one goes (every bucket keeping the most it ever held took
        // several times the queue's peak: 4 MB of bench-leafspine-1024-perm's 40).
        items.clear();
        if self.buckets[b].is_empty() && items.capacity() <= KEEP {
            self.buckets[b] = items;
        }
        sort_nearly_sorted(&mut self.now);
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
                c.up.far = (c.up.far & !LOW) | (rng.next_u64() % 3);
                c.up.origin = (c.up.origin & LOW) | (rng.next_u64() % 2) << 32;
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

    /// The insertion sort gives a full sort's order, in order, nearly in order (a few far out of place) and in
    /// reverse (the fallback).
    #[test]
    fn sorts_nearly_sorted_input() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
        let item = |k: u64| Tied {
            rank: Rank {
                near: k / 16,
                far: 0,
                origin: k % 4,
            },
            tie: k % 3,
            e: k,
        };
        for n in [0, 1, 2, 50, 5_000] {
            let mut sorted: Vec<Tied> = (0..n).map(item).collect();
            sorted.sort_unstable();
            let mut few = sorted.clone();
            for _ in 0..n / 20 {
                let (i, j) = (rng.next_u64() % n, rng.next_u64() % n);
                few.swap(i as usize, j as usize);
            }
            let mut shuffled = sorted.clone();
            for i in (1..shuffled.len()).rev() {
                shuffled.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
            }
            let reversed: Vec<Tied> = sorted.iter().rev().copied().collect();
            for mut v in [sorted.clone(), few, shuffled, reversed] {
                sort_nearly_sorted(&mut v);
                assert_eq!(v, sorted);
            }
        }
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
