//! Which addresses are live objects a C front end handed out, and of what kind.
//!
//! A C caller gets raw pointers back; a pointer the library never handed out, one already destroyed, or one of
//! the wrong kind must be refused with an error code instead of being dereferenced. Each front end keeps one
//! [`Registry`] of its own kinds (the verbs shim: contexts, PDs, CQs…; the NCCL plugin: comms, requests,
//! registrations) and checks every object argument of a control call against it.

use std::collections::BTreeMap;
use std::sync::{Mutex, MutexGuard};

/// Why an address was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal<K> {
    /// NULL.
    Null,
    /// A live object of another kind.
    Wrong(K),
    /// Not a live object of this library (never handed out, destroyed, or from someone else).
    NotLive,
}

/// Live objects by address.
#[derive(Debug)]
pub struct Registry<K> {
    live: Mutex<BTreeMap<usize, K>>,
}

impl<K> Default for Registry<K> {
    fn default() -> Self {
        Self::new()
    }
}

impl<K> Registry<K> {
    /// An empty registry (usable in a `static`).
    pub const fn new() -> Self {
        Self {
            live: Mutex::new(BTreeMap::new()),
        }
    }

    fn live(&self) -> MutexGuard<'_, BTreeMap<usize, K>> {
        // A panic while holding the lock cannot leave the map half-updated (single insert/remove calls).
        self.live.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl<K: Copy + PartialEq> Registry<K> {
    /// Records a new object at `addr`.
    pub fn insert(&self, addr: usize, kind: K) {
        self.live().insert(addr, kind);
    }

    /// Whether `addr` is a live object of one of `kinds`; which one.
    pub fn check_any(&self, addr: usize, kinds: &[K]) -> Result<K, Refusal<K>> {
        if addr == 0 {
            return Err(Refusal::Null);
        }
        match self.live().get(&addr) {
            Some(k) if kinds.contains(k) => Ok(*k),
            Some(k) => Err(Refusal::Wrong(*k)),
            None => Err(Refusal::NotLive),
        }
    }

    /// Whether `addr` is a live object of `kind`.
    pub fn check(&self, addr: usize, kind: K) -> Result<(), Refusal<K>> {
        self.check_any(addr, &[kind]).map(|_| ())
    }

    /// Forgets the object at `addr`; refused as by [`check`](Self::check) when it is not a live `kind`.
    pub fn remove(&self, addr: usize, kind: K) -> Result<(), Refusal<K>> {
        let mut l = self.live();
        match l.get(&addr) {
            Some(k) if *k == kind => {
                l.remove(&addr);
                Ok(())
            }
            Some(k) => Err(Refusal::Wrong(*k)),
            None if addr == 0 => Err(Refusal::Null),
            None => Err(Refusal::NotLive),
        }
    }

    /// Forgets every object in `[start, end)` (the parts of a container being freed: a comm's requests).
    pub fn remove_range(&self, start: usize, end: usize) {
        let mut l = self.live();
        let doomed: Vec<usize> = l.range(start..end).map(|(&a, _)| a).collect();
        for a in doomed {
            l.remove(&a);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    enum Kind {
        A,
        B,
    }

    #[test]
    fn kinds_removal_and_ranges() {
        static R: Registry<Kind> = Registry::new();
        R.insert(0x1000, Kind::A);
        R.insert(0x2000, Kind::B);
        R.insert(0x2008, Kind::B);
        assert_eq!(R.check(0x1000, Kind::A), Ok(()));
        assert_eq!(R.check(0x1000, Kind::B), Err(Refusal::Wrong(Kind::A)));
        assert_eq!(R.check(0, Kind::A), Err(Refusal::Null));
        assert_eq!(R.check_any(0x2000, &[Kind::A, Kind::B]), Ok(Kind::B));
        assert_eq!(R.remove(0x1000, Kind::B), Err(Refusal::Wrong(Kind::A)));
        assert_eq!(R.remove(0x1000, Kind::A), Ok(()));
        assert_eq!(R.remove(0x1000, Kind::A), Err(Refusal::NotLive));
        R.remove_range(0x2000, 0x2010);
        assert_eq!(R.check(0x2008, Kind::B), Err(Refusal::NotLive));
    }
}
