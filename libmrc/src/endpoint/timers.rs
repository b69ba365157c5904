//! The endpoint's index of QP deadlines.

use std::collections::BTreeSet;

use crate::time::Instant;

/// QP deadlines by time, with the earliest kept beside the tree: the driver asks for it after every call, and at
/// scale (thousands of endpoints) the tree's nodes are rarely in cache while the endpoint itself is.
#[derive(Debug)]
pub(super) struct TimerIndex {
    set: BTreeSet<(Instant, usize)>,
    first: Instant,
}

impl Default for TimerIndex {
    fn default() -> Self {
        Self {
            set: BTreeSet::new(),
            first: Instant::MAX,
        }
    }
}

impl TimerIndex {
    /// The earliest deadline filed (`Instant::MAX` when none).
    #[inline]
    pub(super) fn first(&self) -> Instant {
        self.first
    }

    pub(super) fn insert(&mut self, t: Instant, slot: usize) {
        self.set.insert((t, slot));
        self.first = self.first.min(t);
    }

    pub(super) fn remove(&mut self, t: Instant, slot: usize) {
        if self.set.remove(&(t, slot)) && t == self.first {
            self.first = self.set.first().map_or(Instant::MAX, |&(t, _)| t);
        }
    }

    /// Slots whose deadline is at or before `now`, earliest first.
    pub(super) fn due(&self, now: Instant) -> impl Iterator<Item = usize> + '_ {
        self.set
            .iter()
            .take_while(move |&&(t, _)| t <= now)
            .map(|&(_, s)| s)
    }
}
