//! Completion queues: the lock-free ring the progress loop fills and the eventfd of completion channels.

use super::state::CqShared;
use std::os::fd::RawFd;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use mrc::Completion;

/// A completion queue: a lock-free ring the progress loop fills, and an eventfd for completion channels.
#[derive(Clone)]
pub struct Cq {
    pub(super) sh: Arc<CqShared>,
}

impl std::fmt::Debug for Cq {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cq").field("id", &self.sh.id.id()).finish()
    }
}

impl Cq {
    /// The CQ's number.
    pub fn id(&self) -> u32 {
        self.sh.id.id()
    }

    /// Moves up to `out.len()` completions into `out`; never waits for a progress round (in
    /// [`ProgressMode::Manual`](crate::ProgressMode::Manual) call [`Host::progress`](crate::Host::progress) to fill
    /// the ring).
    pub fn poll(&self, out: &mut [Completion]) -> usize {
        let mut n = 0;
        while n < out.len() {
            match self.sh.ring.pop() {
                Some(c) => {
                    out[n] = c;
                    n += 1;
                }
                None => break,
            }
        }
        n
    }

    /// Arms the CQ: the next completion added from now on makes [`fd`](Self::fd) readable, as
    /// `ibv_req_notify_cq` defines it: completions already in the CQ raise no event, so poll after arming
    /// (`solicited_only` is treated as any).
    pub fn req_notify(&self, solicited_only: bool) {
        let _ = solicited_only;
        self.sh.arm();
    }

    /// The eventfd a completion channel sleeps on.
    pub fn fd(&self) -> RawFd {
        self.sh.fd.fd()
    }

    /// Reads and clears the eventfd's count (verbs `ibv_ack_cq_events` after `ibv_get_cq_event`).
    pub fn ack_events(&self) -> u64 {
        self.sh.fd.drain()
    }

    /// Completions lost because the ring was full.
    pub fn overruns(&self) -> u64 {
        self.sh.overruns.load(Ordering::Relaxed)
    }
}
