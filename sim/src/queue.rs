//! The event queue: a radix heap on integer time, exact and deterministic.
//!
//! Simulated time never goes back, so a monotone priority queue is enough: an event lives in the bucket of
//! the highest bit in which its time differs from the last time popped, and a pop only ever redistributes
//! the lowest non-empty bucket. Most events are a few hundred ns to a few µs ahead, so they move through a
//! handful of buckets at most, with no comparisons against the rest of the queue. Ties at equal time pop in
//! insertion order (a sequence number), which keeps runs reproducible.

use std::collections::VecDeque;

/// One event: time in ps, insertion sequence, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Item {
    t: u64,
    seq: u64,
    e: u64,
}

/// A radix heap of events.
#[derive(Debug)]
pub struct EventQueue {
    /// Bucket 0: events at exactly `last`, in sequence order.
    now: VecDeque<Item>,
    /// Bucket b (1..=64): events whose time first differs from `last` in bit b − 1.
    buckets: Vec<Vec<Item>>,
    last: u64,
    seq: u64,
    len: usize,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new()
    }
}

#[inline]
fn bucket(t: u64, last: u64) -> usize {
    64 - (t ^ last).leading_zeros() as usize
}

impl EventQueue {
    /// An empty queue at time 0.
    pub fn new() -> Self {
        Self {
            now: VecDeque::new(),
            buckets: (0..=64).map(|_| Vec::new()).collect(),
            last: 0,
            seq: 0,
            len: 0,
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
        self.seq += 1;
        let it = Item {
            t,
            seq: self.seq,
            e,
        };
        self.len += 1;
        let b = bucket(t, self.last);
        if b == 0 {
            self.now.push_back(it);
        } else {
            self.buckets[b].push(it);
        }
    }

    /// Time of the next event, refilling bucket 0 if needed.
    pub fn peek_time(&mut self) -> Option<u64> {
        if self.now.is_empty() && !self.refill() {
            return None;
        }
        self.now.front().map(|i| i.t)
    }

    /// Removes the next event: (time, payload).
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        if self.now.is_empty() && !self.refill() {
            return None;
        }
        let it = self.now.pop_front()?;
        self.len -= 1;
        Some((it.t, it.e))
    }

    fn refill(&mut self) -> bool {
        let Some(b) = (1..=64).find(|&b| !self.buckets[b].is_empty()) else {
            return false;
        };
        let items = std::mem::take(&mut self.buckets[b]);
        let min = items.iter().map(|i| i.t).min().unwrap_or(self.last);
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
        self.now.make_contiguous().sort_unstable_by_key(|i| i.seq);
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

    /// Same order as a binary heap on (time, sequence) under random monotone use.
    #[test]
    fn matches_a_binary_heap() {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
        let mut q = EventQueue::new();
        let mut h = BinaryHeap::new();
        let mut seq = 0u64;
        let mut now = 0u64;
        for step in 0..200_000u64 {
            if rng.next_u64() % 3 != 0 || h.is_empty() {
                let dt = match rng.next_u64() % 4 {
                    0 => 0,
                    1 => rng.next_u64() % 100,
                    2 => rng.next_u64() % 100_000,
                    _ => rng.next_u64() % 10_000_000_000,
                };
                seq += 1;
                q.push(now + dt, step);
                h.push(Reverse((now + dt, seq, step)));
            } else {
                let Reverse((t, _, e)) = h.pop().unwrap();
                assert_eq!(q.pop(), Some((t, e)));
                now = t;
            }
            assert_eq!(q.len(), h.len());
        }
        while let Some(Reverse((t, _, e))) = h.pop() {
            assert_eq!(q.pop(), Some((t, e)));
        }
        assert!(q.is_empty() && q.pop().is_none());
    }
}
