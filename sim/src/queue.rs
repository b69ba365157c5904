//! The event queue: a radix heap on integer time, exact and deterministic.
//!
//! Simulated time never goes back, so a monotone priority queue is enough: an event lives in the bucket of
//! the highest bit in which its time differs from the last time popped, and a pop only ever redistributes
//! the lowest non-empty bucket. Most events are a few hundred ns to a few µs ahead, so they move through a
//! handful of buckets at most, with no comparisons against the rest of the queue.
//!
//! Ties at equal time pop in the order of the event's key (the payload under a mask that leaves out hints,
//! permuted per time: `tie_key`), not in insertion order: a partition of a parallel run (sim/par.rs) inserts events in another order than
//! a sequential run, and the key is what both agree on, so every thread count gives the same run.

use std::collections::VecDeque;

/// One event: time in ps, tie key, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    t: u64,
    key: u64,
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
    /// Bucket 0: events at exactly `last`, in key order.
    now: VecDeque<Item>,
    /// Bucket b (1..=64): events whose time first differs from `last` in bit b − 1.
    buckets: Vec<Vec<Item>>,
    last: u64,
    len: usize,
    /// The bits of a payload that order events at equal time.
    key_mask: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new(u64::MAX)
    }
}

#[inline]
fn bucket(t: u64, last: u64) -> usize {
    64 - (t ^ last).leading_zeros() as usize
}

impl EventQueue {
    /// An empty queue at time 0; events at equal time pop in the order of `payload & key_mask`.
    pub fn new(key_mask: u64) -> Self {
        Self {
            now: VecDeque::new(),
            buckets: (0..=64).map(|_| Vec::new()).collect(),
            last: 0,
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

    /// Adds event `e` at time `t`; a time before the last one popped is taken as that time.
    #[inline]
    pub fn push(&mut self, t: u64, e: u64) {
        let t = t.max(self.last);
        let key = tie_key(t, e & self.key_mask);
        let it = Item { t, key, e };
        self.len += 1;
        let b = bucket(t, self.last);
        if b == 0 {
            let at = self.now.partition_point(|i| i.key <= key);
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
        self.now.make_contiguous().sort_unstable_by_key(|i| i.key);
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

    /// Same order as a binary heap on (time, key) under random monotone use, ties included (few keys, so
    /// equal times meet equal and unequal keys often), with pushes at the current time between pops.
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
                q.push(now + dt, e);
                h.push(Reverse((now + dt, tie_key(now + dt, e & mask), e)));
            } else {
                let Reverse((t, _, e)) = h.pop().unwrap();
                assert_eq!(q.next_time(), Some(t));
                let (qt, qe) = q.pop().unwrap();
                assert_eq!((qt, qe & mask), (t, e & mask));
                assert_eq!(tie_key(t, qe & mask), tie_key(t, e & mask));
                // Equal keys at equal time are the same event to the simulator: either may come first.
                if qe != e {
                    let mut back: Vec<_> = h.drain().collect();
                    let k = back.iter().position(|r| r.0.2 == qe).unwrap();
                    back[k] = Reverse((t, tie_key(t, e & mask), e));
                    h.extend(back);
                }
                now = t;
            }
            assert_eq!(q.len(), h.len());
        }
        while let Some(Reverse((t, k, _))) = h.pop() {
            assert_eq!(
                q.pop().map(|(t, e)| (t, tie_key(t, e & mask))),
                Some((t, k))
            );
        }
        assert!(q.is_empty() && q.pop().is_none());
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
        // Ties pop by tie key, whatever the order of insertion, also when pushed at the current time.
        let order = |t: u64, a: u64, b: u64| {
            if tie_key(t, a) < tie_key(t, b) {
                [a, b]
            } else {
                [b, a]
            }
        };
        for (a, b) in [(9, 4), (4, 9)] {
            q.push(5_000, a);
            q.push(5_000, b);
        }
        let [x, y] = order(5_000, 4, 9);
        assert_eq!(
            (0..4).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(),
            [x, x, y, y]
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
