//! Listeners' keys and their queues of CONNECTs waiting for `poll_accept` (spec HOST-AUTH-1, HOST-QUEUE-1):
//! bounded per listener and in total, the oldest request dropped (and counted) when a new one finds no room.

use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddrV6;

use mrc::wire::AuthKey;

use crate::bootstrap::QpHalf;
use crate::config::PeerPlane;

/// CONNECTs one listener keeps waiting.
pub(crate) const PER_LISTENER: usize = 64;
/// CONNECTs all listeners of a host keep waiting together.
pub(crate) const TOTAL: usize = 1024;
/// Closed listeners whose keys are kept, to refuse (authenticated) a late CONNECT instead of ignoring it.
const CLOSED_KEPT: usize = 1024;

/// A CONNECT that proved the listener's key, waiting for `poll_accept`.
pub(crate) struct PendingConnect {
    pub(crate) src: SocketAddrV6,
    pub(crate) plane: usize,
    pub(crate) token: u64,
    pub(crate) planes: Vec<PeerPlane>,
    pub(crate) qps: Vec<QpHalf>,
    pub(crate) app: Vec<u8>,
    /// Arrival order across all listeners (the oldest goes first when the host is full).
    seq: u64,
}

impl PendingConnect {
    pub(crate) fn new(
        src: SocketAddrV6,
        plane: usize,
        token: u64,
        link: (Vec<PeerPlane>, Vec<QpHalf>, Vec<u8>),
    ) -> Self {
        let (planes, qps, app) = link;
        Self {
            src,
            plane,
            token,
            planes,
            qps,
            app,
            seq: 0,
        }
    }
}

struct Listening {
    key: AuthKey,
    queue: VecDeque<PendingConnect>,
}

/// What a listener id names.
pub(crate) enum Known {
    /// A listener of this host, with its key.
    Open(AuthKey),
    /// A listener closed lately, with the key it had.
    Closed(AuthKey),
}

/// Every listener of a host and the CONNECTs waiting for them.
#[derive(Default)]
pub(crate) struct ConnectQueues {
    listeners: BTreeMap<u64, Listening>,
    closed: VecDeque<(u64, AuthKey)>,
    total: usize,
    next_seq: u64,
    /// Requests dropped because their listener's queue or the host's was full.
    pub(crate) dropped: u64,
}

impl ConnectQueues {
    /// Whether `id` names a listener (open or lately closed).
    pub(crate) fn taken(&self, id: u64) -> bool {
        self.listeners.contains_key(&id) || self.closed.iter().any(|&(c, _)| c == id)
    }

    pub(crate) fn open(&mut self, id: u64, key: AuthKey) {
        self.listeners.insert(
            id,
            Listening {
                key,
                queue: VecDeque::new(),
            },
        );
    }

    /// Closes a listener: its waiting requests are dropped, its key kept a while.
    pub(crate) fn close(&mut self, id: u64) {
        if let Some(l) = self.listeners.remove(&id) {
            self.total -= l.queue.len();
            if self.closed.len() >= CLOSED_KEPT {
                self.closed.pop_front();
            }
            self.closed.push_back((id, l.key));
        }
    }

    pub(crate) fn lookup(&self, id: u64) -> Option<Known> {
        if let Some(l) = self.listeners.get(&id) {
            return Some(Known::Open(l.key));
        }
        self.closed
            .iter()
            .find(|&&(c, _)| c == id)
            .map(|&(_, k)| Known::Closed(k))
    }

    /// Queues a request for listener `id` (one already waiting from the same source and token is not queued
    /// twice). A full listener queue drops its oldest request, a full host the oldest of all.
    // spec: HOST-QUEUE-1
    pub(crate) fn push(&mut self, id: u64, mut p: PendingConnect) {
        let Some(l) = self.listeners.get_mut(&id) else {
            return;
        };
        if l.queue.iter().any(|q| q.src == p.src && q.token == p.token) {
            return;
        }
        if l.queue.len() >= PER_LISTENER {
            l.queue.pop_front();
            self.total -= 1;
            self.dropped += 1;
        }
        if self.total >= TOTAL {
            self.drop_oldest();
        }
        p.seq = self.next_seq;
        self.next_seq += 1;
        if let Some(l) = self.listeners.get_mut(&id) {
            l.queue.push_back(p);
            self.total += 1;
        }
    }

    fn drop_oldest(&mut self) {
        let oldest = self
            .listeners
            .iter()
            .filter_map(|(&id, l)| l.queue.front().map(|p| (p.seq, id)))
            .min();
        if let Some((_, id)) = oldest
            && let Some(l) = self.listeners.get_mut(&id)
        {
            l.queue.pop_front();
            self.total -= 1;
            self.dropped += 1;
        }
    }

    /// The oldest request waiting for listener `id`.
    pub(crate) fn pop(&mut self, id: u64) -> Option<PendingConnect> {
        let p = self.listeners.get_mut(&id)?.queue.pop_front()?;
        self.total -= 1;
        Some(p)
    }

    /// Requests waiting, all listeners together.
    #[cfg(test)]
    pub(crate) fn waiting(&self) -> usize {
        self.total
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv6Addr;

    fn req(port: u16, token: u64) -> PendingConnect {
        PendingConnect::new(
            SocketAddrV6::new(Ipv6Addr::LOCALHOST, port, 0, 0),
            0,
            token,
            (Vec::new(), Vec::new(), Vec::new()),
        )
    }

    #[test]
    fn bounded_per_listener_and_in_total_oldest_dropped() {
        let mut q = ConnectQueues::default();
        q.open(1, AuthKey::new([1; 16]));
        for t in 0..(PER_LISTENER as u64 + 5) {
            q.push(1, req(1, t));
        }
        assert_eq!((q.waiting(), q.dropped), (PER_LISTENER, 5));
        assert_eq!(q.pop(1).map(|p| p.token), Some(5), "the oldest went first");
        q.push(1, req(1, 6));
        assert_eq!(
            q.waiting(),
            PER_LISTENER - 1,
            "a repeat is not queued twice"
        );
        let listeners = TOTAL / PER_LISTENER + 2;
        for id in 2..=listeners as u64 {
            q.open(id, AuthKey::new([2; 16]));
            for t in 0..PER_LISTENER as u64 {
                q.push(id, req(2, t));
            }
        }
        assert_eq!(q.waiting(), TOTAL);
        assert!(q.dropped > 5);
        // Listener 1's requests were the oldest: they went first.
        assert!(q.pop(1).is_none());
        let last = listeners as u64;
        q.close(last);
        assert_eq!(q.waiting(), TOTAL - PER_LISTENER);
        assert!(matches!(q.lookup(last), Some(Known::Closed(_))));
        assert!(q.taken(last) && q.lookup(999).is_none());
    }
}
