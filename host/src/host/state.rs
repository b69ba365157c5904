//! The shared state: what the engine lock guards (`Core`), what every handle shares (`Inner`), the rings'
//! items, and the [`Host`] handle itself. Every other file of the host builds on these.

use super::config::{ProgressMode, QpProfile};
use super::info::{AsyncEvent, LocalInfo};
use std::collections::{BTreeMap, VecDeque};
use std::net::SocketAddrV6;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as WallClock};

use crossbeam_queue::ArrayQueue;

use crate::share::WindowShare;
use mrc::{Caps, Completion, CqId, Pd, PeerId, QpState, SendOp, Sge};
use smallvec::SmallVec;

use crate::bootstrap::{KEY_LEN, QpHalf};
use crate::config::PeerPlane;
use crate::connect_queue::ConnectQueues;
use crate::driver::{Datapath, initial_psn};
use crate::error::HostError;
use crate::plane::{PlaneIo, UdpPlanes};
use crate::socket::EventFd;
use mrc::wire::AuthKey;

/// Longest sleep of the progress thread between rounds (timers and the doorbell usually end it sooner).
pub(super) const MAX_SLEEP: StdDuration = StdDuration::from_millis(5);
/// Idle rounds the progress thread spins (yielding) before it sleeps.
pub(super) const SPIN_ROUNDS: u32 = 64;
/// Bytes in flight on one QP from which [`Host::drive`] leaves rounds to the progress thread.
pub(super) const DEEP_INFLIGHT: u64 = 16 * 1024;
/// How long a look that found a QP with [`DEEP_INFLIGHT`] bytes in flight holds: a bandwidth-bound
/// application's queue dips between its bursts of posts.
pub(super) const DEEP_HOLD: StdDuration = StdDuration::from_millis(2);
/// Busy rounds between the progress thread's looks at the QPs' bytes in flight (every idle round looks).
pub(super) const DEEP_EVERY: u32 = 16;
/// First retry interval of a bootstrap request (doubles up to a second).
pub(super) const RETRY_FIRST: StdDuration = StdDuration::from_millis(20);
/// Accepted connections remembered, to answer a repeated CONNECT (its ACCEPT was lost) with the same ACCEPT.
pub(super) const ACCEPT_CACHE: usize = 1024;
/// Async events kept until [`Host::poll_event`]; more are counted and dropped.
pub(super) const EVENT_QUEUE: usize = 1024;
/// Links closed by peers whose CLOSE key is kept, to answer a repeated CLOSE (its CLOSED was lost).
pub(super) const CLOSED_LINKS: usize = 1024;

// ---- shared state ------------------------------------------------------------------------------------------

/// A send work request as it waits in a submission ring: owns its SGEs and inline bytes.
pub(super) struct SendItem {
    pub(super) wr_id: u64,
    pub(super) op: SendOp,
    pub(super) sges: SmallVec<[Sge; 4]>,
    pub(super) inline: Option<Box<[u8]>>,
    pub(super) signaled: bool,
    pub(super) solicited: bool,
}

pub(super) struct RecvItem {
    pub(super) wr_id: u64,
    pub(super) sges: SmallVec<[Sge; 4]>,
}

pub(super) struct CqShared {
    pub(super) id: CqId,
    pub(super) ring: ArrayQueue<Completion>,
    pub(super) fd: EventFd,
    /// Completions pushed so far: arming remembers it, so that only later ones signal.
    pub(super) pushed: AtomicU64,
    /// 0: not armed; otherwise 1 + [`pushed`](Self::pushed) when [`Cq::req_notify`](crate::Cq::req_notify)
    /// armed it: the next completion pushed after that signals the fd (solicited-only arming is treated as any:
    /// a wake-up too many is harmless, one too few is not).
    pub(super) armed: AtomicU64,
    /// Completions lost because the ring was full.
    pub(super) overruns: AtomicU64,
}

impl CqShared {
    pub(super) fn push(&self, c: Completion) -> bool {
        if self.ring.push(c).is_err() {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        self.pushed.fetch_add(1, Ordering::AcqRel);
        true
    }

    /// Signals the fd if the CQ is armed and a completion arrived since it was: verbs generates no event for
    /// entries already in the CQ when `ibv_req_notify_cq` armed it (the application polls those after arming).
    pub(super) fn notify(&self) {
        let armed = self.armed.load(Ordering::Acquire);
        if armed != 0
            && self.pushed.load(Ordering::Acquire) >= armed
            && self
                .armed
                .compare_exchange(armed, 0, Ordering::AcqRel, Ordering::Acquire)
                .is_ok()
        {
            self.fd.signal();
        }
    }

    /// Arms the CQ for the next completion pushed from now on.
    pub(super) fn arm(&self) {
        let now = self.pushed.load(Ordering::Acquire);
        self.armed.store(now + 1, Ordering::Release);
    }
}

pub(super) struct QpShared {
    pub(super) qpn: u32,
    pub(super) psn: u32,
    /// Receive key: the peer's QP tags what it sends here with it (spec SEC-AUTH-1).
    pub(super) key: [u8; KEY_LEN],
    pub(super) mtu: u32,
    pub(super) caps: Caps,
    pub(super) sq: ArrayQueue<SendItem>,
    pub(super) rq: ArrayQueue<RecvItem>,
    pub(super) state: AtomicU8,
    pub(super) max_sge: u32,
    pub(super) max_inline: u32,
    pub(super) send_cq: Arc<CqShared>,
    pub(super) recv_cq: Arc<CqShared>,
}

/// Inline bytes are copied into a host-owned registered arena, one slot per work request, reused round robin:
/// with twice the send queue's depth in slots plus one, a slot comes round again only after its request left
/// both the ring and the engine's send queue.
pub(super) struct InlineArena {
    pub(super) addr: u64,
    pub(super) lkey: u32,
    pub(super) slot: usize,
    pub(super) slots: usize,
    pub(super) next: usize,
}

pub(super) enum ConnectReply {
    Waiting,
    Accepted(Vec<PeerPlane>, Vec<QpHalf>, Vec<u8>),
    Refused,
}

/// Where a link QP leads.
pub(super) struct LinkPeer {
    pub(super) peer: PeerId,
    pub(super) remote_qpn: u32,
    /// The peer QP's receive key: tags the CLOSE sent to it (spec HOST-AUTH-2).
    pub(super) remote_key: [u8; KEY_LEN],
}

/// A peer's CLOSE waiting for this host's QPs of the link to drain.
pub(super) struct PeerClose {
    pub(super) src: SocketAddrV6,
    pub(super) plane: usize,
    pub(super) token: u64,
    pub(super) qpns: Vec<u32>,
    /// The key the CLOSE proved, kept to answer its repeats once the QPs are gone.
    pub(super) key: AuthKey,
    /// Destroy the QPs and answer even if they have not drained by then.
    pub(super) deadline: WallClock,
}

/// A sent ACCEPT, kept to answer a repeated CONNECT: (connector's address, token) → (plane, datagram).
pub(super) type AcceptedEntry = ((SocketAddrV6, u64), (usize, Vec<u8>));

/// What the engine lock guards.
pub(super) struct Core<P: PlaneIo> {
    pub(super) dp: Datapath<P>,
    pub(super) qps: BTreeMap<u32, Arc<QpShared>>,
    pub(super) qp_list: Vec<Arc<QpShared>>,
    pub(super) stalled: BTreeMap<u32, SendItem>,
    pub(super) inline: BTreeMap<u32, InlineArena>,
    pub(super) cqs: BTreeMap<u32, Arc<CqShared>>,
    pub(super) cq_list: Vec<Arc<CqShared>>,
    pub(super) listeners: ConnectQueues,
    pub(super) accepted: VecDeque<AcceptedEntry>,
    pub(super) connecting: BTreeMap<u64, ConnectReply>,
    pub(super) resolving: BTreeMap<u64, SocketAddrV6>,
    /// Every link QP: its peer and the peer's QP (to check a CLOSE against).
    pub(super) links: BTreeMap<u32, LinkPeer>,
    /// CLOSEs this host sent, by token: `true` once CLOSED came back.
    pub(super) closing: BTreeMap<u64, bool>,
    /// CLOSEs from peers whose QPs are still draining here.
    pub(super) peer_closes: Vec<PeerClose>,
    /// Peers' CLOSEs done here: (source, token) and the key they proved, to answer a repeat.
    pub(super) closed_links: VecDeque<(SocketAddrV6, u64, AuthKey)>,
    /// Host datagrams dropped unanswered ([`HostStats::bootstrap_rejected`]).
    pub(super) rejected: u64,
    /// CONNECTs refused by `poll_accept`.
    pub(super) refused: u64,
    pub(super) mrs: u32,
    pub(super) scratch: Vec<Completion>,
    /// Manual mode: when the last busy round ended, and how long to keep spinning after it (the progress
    /// thread spins as long).
    pub(super) last_busy: WallClock,
    pub(super) busy_poll: StdDuration,
    /// How the fixed-window QPs share one in-flight budget ([`crate::share`]).
    pub(super) share: Option<WindowShare>,
}

pub(super) struct Inner<P: PlaneIo> {
    pub(super) core: Mutex<Core<P>>,
    pub(super) mode: ProgressMode,
    pub(super) profile: QpProfile,
    pub(super) max_qps: u32,
    pub(super) max_mrs: u32,
    pub(super) bootstrap_timeout: StdDuration,
    pub(super) link_send_wr: u32,
    pub(super) link_recv_wr: u32,
    pub(super) local: LocalInfo,
    pub(super) local_planes: Vec<PeerPlane>,
    /// The protection domain of every link's QPs (register link memory in it: [`Host::default_pd`]).
    pub(super) default_pd: Pd,
    pub(super) usid: bool,
    pub(super) doorbell: EventFd,
    pub(super) sleeping: AtomicBool,
    /// Until when (nanoseconds after `epoch`) application threads leave rounds to the progress thread: it
    /// last saw a QP with [`DEEP_INFLIGHT`] bytes in flight [`DEEP_HOLD`] before ([`Host::drive`]).
    pub(super) deep_until: AtomicU64,
    /// Whether anyone called [`Host::drive`]: only then does the progress thread look at bytes in flight.
    pub(super) driven: AtomicBool,
    /// Where and when a latency-bound [`Host::drive`] call last ran: the progress thread keeps off that CPU
    /// (`affinity.rs`).
    pub(super) app_cpu: super::affinity::AppCpu,
    pub(super) epoch: WallClock,
    pub(super) stop: AtomicBool,
    pub(super) failed: AtomicBool,
    pub(super) events: ArrayQueue<AsyncEvent>,
    pub(super) events_fd: EventFd,
    pub(super) events_dropped: AtomicU64,
    /// What the controller calls read (control.rs).
    pub(super) ctl: crate::control::Ctl,
}

pub(crate) struct Handle<P: PlaneIo> {
    pub(super) inner: Arc<Inner<P>>,
    pub(super) thread: Mutex<Option<JoinHandle<()>>>,
    /// The counters endpoint, when one was asked for at start (counters.rs).
    pub(crate) counters: Mutex<Option<crate::counters::CountersServer>>,
}

impl<P: PlaneIo> Drop for Handle<P> {
    fn drop(&mut self) {
        self.inner.stop.store(true, Ordering::Release);
        self.inner.doorbell.signal();
        if let Some(t) = lock(&self.thread).take() {
            let _ = t.join();
        }
    }
}

pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held leaves the state consistent between rounds: keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The host layer: one per process per node. Cheap to clone; `Send + Sync`. Dropping the last clone stops the
/// progress thread.
///
/// Generic over how datagrams travel ([`PlaneIo`]): UDP sockets ([`UdpPlanes`]) unless the host was started
/// with [`start_with`](Self::start_with) on another carrier (e.g. [`MemFabric`](crate::MemFabric) in tests).
pub struct Host<P: PlaneIo = UdpPlanes>(pub(super) Arc<Handle<P>>);

impl<P: PlaneIo> Clone for Host<P> {
    fn clone(&self) -> Self {
        Host(Arc::clone(&self.0))
    }
}

impl<P: PlaneIo> std::fmt::Debug for Host<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host")
            .field("local", &self.0.inner.local)
            .field("mode", &self.0.inner.mode)
            .finish_non_exhaustive()
    }
}

impl<P: PlaneIo> Host<P> {
    /// A reference that does not keep the host alive (the counters endpoint's).
    pub(crate) fn downgrade(&self) -> std::sync::Weak<Handle<P>> {
        Arc::downgrade(&self.0)
    }

    /// The shared part (counters.rs reads its endpoint).
    pub(crate) fn handle(&self) -> &Handle<P> {
        &self.0
    }

    /// The host a [`downgrade`](Self::downgrade)d reference upgraded to.
    pub(crate) fn from_handle(h: Arc<Handle<P>>) -> Self {
        Host(h)
    }

    pub(super) fn inner(&self) -> &Arc<Inner<P>> {
        &self.0.inner
    }

    /// Runs `f` on the datapath under the engine lock, with the registration count and its limit (memory.rs).
    pub(crate) fn with_datapath<R>(
        &self,
        f: impl FnOnce(&mut Datapath<P>, &mut u32, u32) -> R,
    ) -> R {
        let i = self.inner();
        let mut c = lock(&i.core);
        let c = &mut *c;
        f(&mut c.dp, &mut c.mrs, i.max_mrs)
    }

    /// The controller's share of the host (control.rs).
    pub(crate) fn ctl(&self) -> &crate::control::Ctl {
        &self.inner().ctl
    }

    /// Wakes the progress thread after a control call queued work for the engine.
    pub(crate) fn wake(&self) {
        self.inner().kick();
    }
}

impl<P: PlaneIo> Inner<P> {
    /// A plane went down or came up (the engine already knows): the controller's EV events and the async
    /// event.
    pub(super) fn port_changed(&self, c: &Core<P>, plane: u8, up: bool) {
        self.ctl.port_changed(c.dp.endpoint_ref(), plane, up);
        self.event(if up {
            AsyncEvent::PortUp { plane }
        } else {
            AsyncEvent::PortDown { plane }
        });
    }

    pub(super) fn kick(&self) {
        // Pairs with the fence in the progress thread before it sleeps: either it sees our work, or we see that
        // it sleeps and ring the doorbell.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.doorbell.signal();
        }
    }

    pub(super) fn event(&self, e: AsyncEvent) {
        if self.events.push(e).is_err() {
            self.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
        self.events_fd.signal();
    }
}

pub(super) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return u64::from(initial_psn()) << 32 | u64::from(initial_psn());
    }
    u64::from_ne_bytes(b)
}

pub(super) const ST_RESET: u8 = 0;
pub(super) const ST_INIT: u8 = 1;
pub(super) const ST_RTR: u8 = 2;
pub(super) const ST_RTS: u8 = 3;
pub(super) const ST_ERROR: u8 = 4;

pub(super) fn state_code(s: QpState) -> u8 {
    match s {
        QpState::Reset => ST_RESET,
        QpState::Init => ST_INIT,
        QpState::Rtr => ST_RTR,
        QpState::Rts => ST_RTS,
        QpState::Error => ST_ERROR,
        // A state this build does not know (the engine's enum may grow) reads as ERROR: nothing is posted to it.
        _ => ST_ERROR,
    }
}

pub(super) fn state_of(c: u8) -> QpState {
    match c {
        ST_RESET => QpState::Reset,
        ST_INIT => QpState::Init,
        ST_RTR => QpState::Rtr,
        ST_RTS => QpState::Rts,
        _ => QpState::Error,
    }
}

impl<P: PlaneIo> Core<P> {
    /// A CQ of `depth` entries in the engine, its ring and eventfd, registered for the progress loop.
    pub(super) fn new_cq(&mut self, depth: usize) -> Result<Arc<CqShared>, HostError> {
        let fd = EventFd::new()?;
        let id = self.dp.endpoint().create_cq(depth);
        let sh = Arc::new(CqShared {
            id,
            ring: ArrayQueue::new(depth),
            fd,
            pushed: AtomicU64::new(0),
            armed: AtomicU64::new(0),
            overruns: AtomicU64::new(0),
        });
        self.cqs.insert(id.id(), Arc::clone(&sh));
        self.cq_list.push(Arc::clone(&sh));
        Ok(sh)
    }

    /// Whether QP `qpn` has nothing left to send or to have acknowledged (or no longer exists).
    pub(super) fn quiet(&self, qpn: u32) -> bool {
        match self.qps.get(&qpn) {
            None => true,
            Some(sh) => {
                sh.sq.is_empty()
                    && !self.stalled.contains_key(&qpn)
                    && self.dp.endpoint_ref().qp_idle(qpn).unwrap_or(true)
            }
        }
    }

    /// Destroys a CQ no QP completes into any more.
    pub(super) fn destroy_cq(&mut self, cq: &Arc<CqShared>) -> Result<(), HostError> {
        if self
            .qp_list
            .iter()
            .any(|q| Arc::ptr_eq(&q.send_cq, cq) || Arc::ptr_eq(&q.recv_cq, cq))
        {
            return Err(HostError::Invalid(
                "a QP still completes into this CQ; destroy it first".into(),
            ));
        }
        self.dp
            .endpoint()
            .destroy_cq(cq.id)
            .map_err(|_| HostError::NoSuchObject("completion queue"))?;
        self.cqs.remove(&cq.id.id());
        self.cq_list.retain(|q| !Arc::ptr_eq(q, cq));
        Ok(())
    }

    /// Resizes every fixed-window QP's share of the in-flight budget for the QPs there are now.
    pub(super) fn reshare(&mut self) {
        let Some(s) = self.share else { return };
        let window = s.window(self.qps.len());
        for &qpn in self.qps.keys() {
            // QPs the controller moved to NSCC size their own windows: refused, and that is right.
            let _ = self.dp.endpoint().set_qp_window(qpn, window);
        }
    }

    pub(super) fn destroy_qp(&mut self, qpn: u32) -> Result<(), HostError> {
        self.dp
            .endpoint()
            .destroy_qp(qpn)
            .map_err(|_| HostError::NoSuchObject("QP"))?;
        if let Some(sh) = self.qps.remove(&qpn) {
            self.qp_list.retain(|q| !Arc::ptr_eq(q, &sh));
            sh.state.store(ST_ERROR, Ordering::Release);
        }
        self.stalled.remove(&qpn);
        self.links.remove(&qpn);
        self.reshare();
        if let Some(a) = self.inline.remove(&qpn) {
            if let Some(k) = self.dp.mem.bytes(a.addr).map(|_| a.lkey) {
                let _ = self.dp.endpoint().dereg_mr(k);
            }
            self.dp.mem.forget(a.addr);
        }
        Ok(())
    }
}
