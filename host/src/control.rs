//! The controller's calls (MRC's `mrc_ctl.h`, issue 15): explicit EV lists and congestion control per QP, EV state
//! changes (DENY) on live QPs, the EV-event queue and EV probes with their round-trip times.
//!
//! A controller (libmrc's C API, or a Rust program) acts on QPs by number. The engine does the work
//! (`Endpoint::reconfigure_qp`, `set_ev_denied`, `send_ev_probe`); the calls (`host/control.rs`) take the engine lock
//! for it, and this module keeps what the progress loop hands over: every EV state change (also the ones that do not
//! retire or restore a path, which [`AsyncEvent`](crate::AsyncEvent) leaves out) and the probe answers. The EV-event
//! queue is separate from the async-event queue so that a verbs front end, which turns async events into
//! `ibv_get_async_event`, and a controller can both read theirs.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::Duration as StdDuration;

use mrc::EvChange;
use mrc::{EvState, PeerId};

/// EV events kept until [`Host::poll_ev_event`]; more are counted ([`Host::ev_events_dropped`]) and dropped.
const EV_EVENT_QUEUE: usize = 4096;
/// Probe answers kept for [`Host::probe_evs`]; older ones are dropped (nobody waits for them any more).
const PROBE_ANSWERS: usize = 4096;

/// One EV of one QP changed state.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EvEvent {
    /// The QP.
    pub qpn: u32,
    /// The EV as the engine names it (plane in the low `plane_bits` bits).
    pub ev: u32,
    /// Its plane.
    pub plane: u8,
    /// State before.
    pub from: EvState,
    /// State after.
    pub to: EvState,
}

/// A QP's EVs chosen by the controller instead of generated ones.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExplicitEvs {
    /// The EVs, plane in the low `plane_bits` bits; every plane must have the same number.
    pub evs: Vec<u32>,
    /// Low bits that hold the plane (at least enough for the host's planes).
    pub plane_bits: u8,
    /// How many of each plane's EVs are active; the rest are backups.
    pub active_per_plane: u16,
}

/// What the progress loop hands over to the controller (one per host).
#[derive(Debug, Default)]
pub(crate) struct Ctl {
    pub(crate) events: Mutex<VecDeque<EvEvent>>,
    /// Readable while EV events are queued ([`Host::ev_event_fd`]; made at its first call, so hosts without a
    /// controller spend no descriptor on it).
    pub(crate) events_fd: OnceLock<Option<crate::socket::EventFd>>,
    pub(crate) dropped: AtomicU64,
    pub(crate) answers: Mutex<VecDeque<(PeerId, u32, StdDuration, Answer)>>,
}

/// What an endpoint answer answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Answer {
    Probe,
    PortStatus,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Ctl {
    /// An EV state change from the engine (the progress loop, under the engine lock).
    pub(crate) fn ev_changed(&self, qpn: u32, c: EvChange) {
        let mut q = lock(&self.events);
        if q.len() >= EV_EVENT_QUEUE {
            self.dropped.fetch_add(1, Ordering::Relaxed);
            return;
        }
        q.push_back(EvEvent {
            qpn,
            ev: c.ev,
            plane: c.plane,
            from: c.from,
            to: c.to,
        });
        drop(q);
        if let Some(Some(fd)) = self.events_fd.get() {
            fd.signal();
        }
    }

    /// A local plane went down or came up (`Host::set_port`): every EV of every QP on it becomes unusable or
    /// usable at once, which the controller sees as ASSUMED_BAD / GOOD events (the engine keeps the EVs' own
    /// states and masks the plane; a denied EV stays denied and raises nothing).
    pub(crate) fn port_changed(&self, ep: &mrc::Endpoint, plane: u8, up: bool) {
        let (from, to) = if up {
            (EvState::AssumedBad, EvState::Good)
        } else {
            (EvState::Good, EvState::AssumedBad)
        };
        for qpn in ep.qpns() {
            for i in ep.ev_infos(qpn) {
                if i.plane == plane && i.state != EvState::Denied {
                    self.ev_changed(qpn, EvChange::new(i.ev, plane, from, to));
                }
            }
        }
    }

    /// An EV probe answer from the engine.
    pub(crate) fn probe_answer(&self, peer: PeerId, ev: u32, rtt: mrc::Duration) {
        self.answer(peer, ev, rtt, Answer::Probe);
    }

    /// The answer to a PORT_STATUS of [`Host::send_port_status`].
    pub(crate) fn port_status_answer(&self, peer: PeerId, ev: u32, rtt: mrc::Duration) {
        self.answer(peer, ev, rtt, Answer::PortStatus);
    }

    fn answer(&self, peer: PeerId, ev: u32, rtt: mrc::Duration, kind: Answer) {
        let mut a = lock(&self.answers);
        if a.len() >= PROBE_ANSWERS {
            a.pop_front();
        }
        a.push_back((
            peer,
            ev,
            StdDuration::from_nanos(u64::try_from(rtt.as_nanos()).unwrap_or(u64::MAX)),
            kind,
        ));
    }
}
