//! The seam to the host layer (`mrc-host`, issue 11): the only module that talks to the transport.
//!
//! A thin translation from verbs to the host API (`/work/wt/notes/host-api.md`): verbs access flags, scatter/
//! gather lists and work requests become the host's; its completions become `ibv_wc`s and its errors errno
//! values. Verbs-level checks (arguments, states, attribute masks) happen in the object modules before a call
//! lands here.
//!
//! One host runs per device and process, shared by every context opened on it, and stops when the last one
//! closes.

use std::collections::{HashMap, HashSet, VecDeque};
use std::ffi::{c_int, c_uint};
use std::net::Ipv6Addr;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use mrc::qp::QpStats;
use mrc::{Access, Completion, QpState, Sge};
use mrc_host as mh;

use crate::abi::{IBV_WC_WITH_IMM, ibv_qp_cap, ibv_sge, ibv_wc};
use crate::api::{self, AsyncEvent, Event};
use crate::config::DeviceConfig;
use crate::ffi::Error;
use crate::log::log;

/// What a send work request does: the engine's own operations (one vocabulary from verbs to the wire).
pub(crate) use mrc::SendOp;

fn host_err(what: &str, e: &mh::HostError) -> Error {
    Error::new(e.errno(), format!("{what}: {e}"))
}

/// The host-layer instance of one device, shared by every context opened on it.
pub(crate) struct HostDevice {
    host: mh::Host,
    local: mh::LocalInfo,
    /// Sorts the host's asynchronous events for their readers (verbs or libmrc).
    router: Arc<Router>,
    /// The thread that moves the host's events to the router's queues.
    router_thread: Option<JoinHandle<()>>,
    /// Counters of destroyed QPs, for the summary logged when the host stops.
    totals: Mutex<QpStats>,
    /// Application threads run progress rounds (`MRC_SHIM_ASSIST`).
    assist: bool,
    /// How long a poller of an empty CQ sleeps while the QPs are bandwidth-bound (`MRC_SHIM_NAP_US`).
    nap: Duration,
    /// The `MRC_SHIM_STATS_MS` printer.
    stats: Option<(Arc<AtomicBool>, JoinHandle<()>)>,
}

impl Drop for HostDevice {
    fn drop(&mut self) {
        if let Some((stop, t)) = self.stats.take() {
            stop.store(true, Ordering::Release);
            let _ = t.join();
        }
        if let Some(t) = self.router_thread.take() {
            mrc_ffi::eventfd::signal(&self.router.stop_fd);
            let _ = t.join();
        }
        let mut t = *self.totals.lock().unwrap_or_else(|p| p.into_inner());
        let d = self.host.inspect(|dp| {
            let e = dp.endpoint_ref();
            for q in e.qpns() {
                if let Some(s) = e.qp_stats(q) {
                    add_stats(&mut t, &s);
                }
            }
            dp.stats()
        });
        log!(
            Info,
            "mrc host: {} datagrams out, {} in; QPs: {} data packets, {} retransmitted, {} lost by time and {} \
             by timeout, {} receiver-not-ready, {} retry NACKs, {} paths retired",
            d.tx_datagrams,
            d.rx_datagrams,
            t.tx_data_packets,
            t.tx_retransmits,
            t.losses_rack,
            t.losses_rto,
            t.rx_no_resource,
            t.rx_retry_nacks,
            t.ev_retirements
        );
    }
}

fn add_stats(t: &mut QpStats, s: &QpStats) {
    t.tx_data_packets += s.tx_data_packets;
    t.tx_retransmits += s.tx_retransmits;
    t.losses_rack += s.losses_rack;
    t.losses_rto += s.losses_rto;
    t.rx_no_resource += s.rx_no_resource;
    t.rx_retry_nacks += s.rx_retry_nacks;
    t.ev_retirements += s.ev_retirements;
}

impl std::fmt::Debug for HostDevice {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostDevice")
            .field("port", &self.local.port)
            .finish_non_exhaustive()
    }
}

/// A protection domain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostPd(mrc::Pd);

impl HostPd {
    /// The handle `ibv_pd.handle` shows.
    pub(crate) fn id(self) -> u32 {
        self.0.id()
    }
}

/// A registered region.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostMr {
    mr: mh::Mr,
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// A completion queue.
pub(crate) struct HostCq(mh::Cq);

impl HostCq {
    /// The handle `ibv_cq.handle` shows.
    pub(crate) fn id(&self) -> u32 {
        self.0.id()
    }

    /// The eventfd a completion channel waits on.
    pub(crate) fn fd(&self) -> RawFd {
        self.0.fd()
    }

    /// Arms the CQ for its channel.
    pub(crate) fn req_notify(&self, solicited_only: bool) {
        self.0.req_notify(solicited_only);
    }

    /// Takes the pending notification, if any.
    pub(crate) fn take_event(&self) -> bool {
        self.0.ack_events() > 0
    }

    /// Up to `out.len()` completions as `ibv_wc`s. An empty poll runs a progress round in the caller if the
    /// progress thread is not in one (applications spin on `ibv_poll_cq` while they wait, and so drive timers
    /// and acknowledgements without waiting for the thread to wake, as mrc-perf's poll mode does; with a deep
    /// send queue the thread then stands aside, `Host::drive`), else yields the CPU, which the thread may need
    /// where cores are scarce.
    pub(crate) fn poll(&self, dev: &HostDevice, out: &mut [ibv_wc]) -> usize {
        let mut buf = [Completion::default(); 32];
        let mut done = 0;
        while done < out.len() {
            let want = (out.len() - done).min(buf.len());
            let n = self.0.poll(&mut buf[..want]);
            for (w, c) in out[done..done + n].iter_mut().zip(&buf[..n]) {
                *w = to_wc(c);
            }
            done += n;
            if n < want {
                break;
            }
        }
        if done == 0 && !(dev.assist && matches!(dev.host.drive(), Ok(true))) {
            if !dev.nap.is_zero() && dev.host.bandwidth_bound() {
                // A completion is due soon anyway: give the CPU to the progress threads meanwhile.
                std::thread::sleep(dev.nap);
            } else {
                std::thread::yield_now();
            }
        }
        done
    }
}

fn to_wc(c: &Completion) -> ibv_wc {
    ibv_wc {
        wr_id: c.wr_id,
        status: c.status.to_verbs(),
        opcode: c.opcode.to_verbs(),
        vendor_err: 0,
        byte_len: c.byte_len,
        imm_data: c.imm.map_or(0, u32::to_be),
        qp_num: c.qpn,
        src_qp: 0,
        wc_flags: if c.imm.is_some() { IBV_WC_WITH_IMM } else { 0 },
        pkey_index: 0,
        slid: 0,
        sl: 0,
        dlid_path_bits: 0,
    }
}

/// A queue pair; `qpn` is what the peer names at RTR.
pub(crate) struct HostQp {
    qp: mh::Qp,
    pub(crate) qpn: u32,
    /// When the last send was posted (nanoseconds since `EPOCH`), to tell a lone post from a burst.
    last_post: AtomicU64,
}

/// Posts further apart than this are "lone" (a latency test's one message per round trip): the posting thread
/// then runs a progress round itself, so the message leaves now instead of after the progress thread wakes
/// up. Bursts (bandwidth tests) post back to back, well under a µs apart, and leave the rounds to the
/// progress thread. Well under a fast round trip: at 30 µs, ib_write_lat's posts (one per round trip, 25-35
/// µs apart on 2 cores) stopped counting as lone just as the latency approached mrc-perf's.
const LONE_POST: Duration = Duration::from_micros(5);

static EPOCH: std::sync::LazyLock<std::time::Instant> =
    std::sync::LazyLock::new(std::time::Instant::now);

impl HostQp {
    /// Whether the transport failed the QP (it is in ERROR whatever verbs last set).
    pub(crate) fn failed(&self) -> bool {
        self.qp.state() == QpState::Error
    }
}

/// A state change, with what verbs gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// RESET → INIT (or INIT → INIT): the remote access granted.
    Init { access: c_int },
    /// INIT → RTR: the peer as the verbs exchange names it.
    Rtr {
        gid: [u8; 16],
        lid: u16,
        dest_qpn: u32,
        rq_psn: u32,
        /// Path MTU in bytes.
        mtu: u32,
    },
    /// RTR → RTS.
    Rts {
        sq_psn: u32,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
    },
    /// Any → ERR: flush.
    Error,
    /// Any → RESET.
    Reset,
}

/// A send work request, checked by the shim (opcode, sge count, inline size).
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    /// Registered buffers, or with `inline` the bytes to copy now (their keys are not checked).
    pub(crate) sges: &'a [ibv_sge],
    pub(crate) inline: bool,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
}

/// An asynchronous event for `ibv_get_async_event`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HostEvent {
    /// `IBV_EVENT_QP_FATAL` for this `ibv_qp`.
    QpFatal(usize),
    /// `IBV_EVENT_CQ_ERR` for this `ibv_cq`.
    CqError(usize),
}

/// `IBV_EVENT_PORT_ACTIVE` / `IBV_EVENT_PORT_ERR` (rdma-core's values).
const IBV_EVENT_PORT_ACTIVE: c_uint = 9;
const IBV_EVENT_PORT_ERR: c_uint = 10;

/// The host has one asynchronous-event queue; its events have two readers. QPs and CQs that libmrc created
/// (api.rs) are invisible to the application (it holds libmrc's objects, not these), so their events, and port
/// (plane) changes, which MRC reports per port, go to libmrc's handler ([`api::deliver`]), as do the host's EV
/// state changes; the rest to the verbs queue behind the context's `async_fd`. One thread per host moves them,
/// so that verbs readers can wait on their descriptor and libmrc's handler runs while the application sleeps.
pub(crate) struct Router {
    /// The device's index (how libmrc names it).
    device: u32,
    /// QPN → `ibv_qp` address and CQ id → `ibv_cq` address, to name the element of asynchronous events.
    elements: Mutex<HashMap<(u8, u32), usize>>,
    /// `ibv_qp` / `ibv_cq` addresses created by libmrc.
    libmrc_objects: Mutex<HashSet<usize>>,
    verbs: Mutex<VecDeque<HostEvent>>,
    /// The contexts' `async_fd`: a semaphore eventfd, readable once per queued verbs event; blocking unless the
    /// application makes it non-blocking, as verbs documents.
    verbs_fd: OwnedFd,
    /// MRC contexts of libmrc on this host: libmrc gets port and EV events only while there are any.
    libmrc_users: AtomicUsize,
    /// Wakes the thread to look at `libmrc_users` again (non-blocking).
    wake_fd: OwnedFd,
    stop_fd: OwnedFd,
}

impl Router {
    fn new(device: u32) -> Result<Self, Error> {
        Ok(Self {
            device,
            elements: Mutex::new(HashMap::new()),
            libmrc_objects: Mutex::new(HashSet::new()),
            verbs: Mutex::new(VecDeque::new()),
            verbs_fd: mrc_ffi::eventfd::new(0)?,
            libmrc_users: AtomicUsize::new(0),
            wake_fd: mrc_ffi::eventfd::new(libc::EFD_NONBLOCK)?,
            stop_fd: mrc_ffi::eventfd::new(libc::EFD_NONBLOCK)?,
        })
    }

    /// One more (`true`) or one less MRC context of libmrc on this host.
    pub(crate) fn libmrc_user(&self, add: bool) {
        if add {
            if self.libmrc_users.fetch_add(1, Ordering::AcqRel) == 0 {
                mrc_ffi::eventfd::signal(&self.wake_fd);
            }
        } else {
            self.libmrc_users.fetch_sub(1, Ordering::AcqRel);
        }
    }

    fn libmrc_attached(&self) -> bool {
        self.libmrc_users.load(Ordering::Acquire) > 0
    }

    fn route(&self, host: &mh::Host, e: mh::AsyncEvent) {
        let (kind, id, ty) = match e {
            mh::AsyncEvent::QpFatal { qpn } => {
                if let Some(s) = host.inspect(|dp| dp.endpoint_ref().qp_stats(qpn)) {
                    log!(Info, "mrc host: QP {qpn:#x} failed; its counters: {s:?}");
                }
                (QP_ELEMENT, qpn, crate::abi::IBV_EVENT_QP_FATAL)
            }
            mh::AsyncEvent::CqError { cq } => (CQ_ELEMENT, cq, crate::abi::IBV_EVENT_CQ_ERR),
            // Planes are MRC's business: the verbs port stays ACTIVE while any plane works; libmrc names them.
            mh::AsyncEvent::PortUp { plane } | mh::AsyncEvent::PortDown { plane } => {
                if self.libmrc_attached() {
                    let up = matches!(e, mh::AsyncEvent::PortUp { .. });
                    let event_type = if up {
                        IBV_EVENT_PORT_ACTIVE
                    } else {
                        IBV_EVENT_PORT_ERR
                    };
                    let port = u32::from(plane) + 1;
                    let e = AsyncEvent {
                        event_type,
                        port,
                        element: 0,
                    };
                    api::deliver(self.device, Event::Async(e));
                }
                return;
            }
            _ => return,
        };
        let Some(addr) = self
            .elements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&(kind, id))
            .copied()
        else {
            return;
        };
        if self
            .libmrc_objects
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .contains(&addr)
        {
            let e = AsyncEvent {
                event_type: ty,
                port: 0,
                element: addr,
            };
            api::deliver(self.device, Event::Async(e));
        } else {
            self.verbs
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_back(if kind == QP_ELEMENT {
                    HostEvent::QpFatal(addr)
                } else {
                    HostEvent::CqError(addr)
                });
            mrc_ffi::eventfd::signal(&self.verbs_fd);
        }
    }

    fn alive(&self, addr: usize) -> bool {
        self.elements
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .values()
            .any(|&a| a == addr)
    }

    /// Marks an `ibv_qp` / `ibv_cq` as libmrc's (or no longer).
    pub(crate) fn set_libmrc(&self, addr: usize, libmrc: bool) {
        let mut b = self
            .libmrc_objects
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        if libmrc {
            b.insert(addr);
        } else {
            b.remove(&addr);
        }
    }

    /// Hands the host's queued EV state changes to libmrc (dropped while no MRC context is attached: they
    /// would concern no QP of libmrc's).
    fn move_ev_events(&self, host: &mh::Host) {
        loop {
            let events: Vec<mh::EvEvent> = std::iter::from_fn(|| host.poll_ev_event())
                .take(64)
                .collect();
            let n = events.len();
            if n > 0 && self.libmrc_attached() {
                let dropped = host.ev_events_dropped();
                api::deliver(self.device, Event::Ev { events, dropped });
            }
            if n < 64 {
                return;
            }
        }
    }
}

/// The router's thread: waits for the host's events and sorts them until `stop_fd` is signalled; watches the
/// EV-event queue while libmrc is attached.
fn route_events(host: &mh::Host, r: &Router) {
    let ev_fd = host.ev_event_fd().unwrap_or(-1);
    loop {
        let fds = [
            host.event_fd(),
            r.stop_fd.as_raw_fd(),
            r.wake_fd.as_raw_fd(),
            if r.libmrc_attached() { ev_fd } else { -1 },
        ];
        let mut p = fds.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: polls live descriptors (the host outlives this thread, which holds a handle on it); poll
        // skips the negative one.
        let n = unsafe { libc::poll(p.as_mut_ptr(), 4, -1) };
        if n < 0 {
            continue;
        }
        if p[1].revents != 0 {
            return;
        }
        if p[2].revents != 0 {
            mrc_ffi::eventfd::take(r.wake_fd.as_raw_fd());
        }
        while let Some(e) = host.poll_event() {
            r.route(host, e);
        }
        if p[3].revents != 0 {
            r.move_ev_events(host);
        }
    }
}

/// The first PSN QP `from` sends to QP `to` (24 bits): a mix of both numbers, which are themselves random
/// (engine QPNs come from an OS-seeded generator), so the PSN stays unpredictable off-path.
pub(crate) fn derived_psn(from: u32, to: u32) -> u32 {
    let mut x = (u64::from(from) << 32 | u64::from(to)) ^ 0x9e37_79b9_7f4a_7c15;
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (x ^ (x >> 31)) as u32 & 0xff_ffff
}

const QP_ELEMENT: u8 = 0;
const CQ_ELEMENT: u8 = 1;

/// Most scatter/gather elements translated on the stack (the device's `max_sge`).
const SGE_MAX: usize = crate::device::limits::MAX_SGE as usize;
/// Most inline bytes (the device's `max_inline_data`).
const INLINE_MAX: usize = crate::device::limits::MAX_INLINE as usize;

fn sges<'a>(list: &[ibv_sge], buf: &'a mut [Sge; SGE_MAX]) -> Result<&'a [Sge], Error> {
    if list.len() > SGE_MAX {
        return Err(Error::inval(format!(
            "{} scatter/gather elements exceed {SGE_MAX}",
            list.len()
        )));
    }
    for (o, s) in buf.iter_mut().zip(list) {
        *o = Sge {
            addr: s.addr,
            len: s.length,
            lkey: s.lkey,
        };
    }
    Ok(&buf[..list.len()])
}

/// Prints per-plane payload rates and good EVs of every QP every `every` (`MRC_SHIM_STATS_MS`): a plane
/// failing shows as its rate dropping to 0 while the others carry the traffic.
fn print_stats(host: &mh::Host, every: Duration, stop: &AtomicBool) {
    let start = std::time::Instant::now();
    let port = host.local().port;
    let mut last: Vec<(u64, u64)> = Vec::new();
    let mut at = start;
    while !stop.load(Ordering::Acquire) {
        std::thread::sleep(every.min(Duration::from_millis(50)));
        let now = std::time::Instant::now();
        if now < at + every {
            continue;
        }
        let secs = (now - at).as_secs_f64();
        at = now;
        let (cur, good) = host.inspect(|dp| {
            let e = dp.endpoint_ref();
            let planes = dp.node().plane_count();
            let mut cur = vec![(0u64, 0u64); planes];
            let mut good = vec![0usize; planes];
            for q in e.qpns() {
                for (p, c) in cur.iter_mut().enumerate() {
                    if let Some(st) = e.plane_stats(q, p) {
                        c.0 += st.tx_bytes;
                        c.1 += st.retransmits;
                    }
                }
                for ev in e.ev_infos(q) {
                    if ev.active && ev.state == mrc::EvState::Good {
                        good[usize::from(ev.plane).min(planes.saturating_sub(1))] += 1;
                    }
                }
            }
            (cur, good)
        });
        last.resize(cur.len(), (0, 0));
        let mut total = 0.0;
        let mut retx = 0;
        let mut rates = String::new();
        for (c, l) in cur.iter().zip(&last) {
            let mb = c.0.saturating_sub(l.0) as f64 / secs / 1e6;
            total += mb;
            retx += c.1.saturating_sub(l.1);
            rates.push_str(&format!(" {mb:.0}"));
        }
        let good: Vec<String> = good.iter().map(ToString::to_string).collect();
        eprintln!(
            "mrc-verbs-shim: stats port {port} t={:.1}s tx {total:.1} MB/s retx {retx} | per plane MB/s{rates} | \
             good EVs {}",
            (now - start).as_secs_f64(),
            good.join(" ")
        );
        last = cur;
    }
}

/// Live hosts by device name (weak: the last context to close stops its host).
static HOSTS: Mutex<Vec<(String, Weak<HostDevice>)>> = Mutex::new(Vec::new());

impl HostDevice {
    /// The host instance, for libmrc's controller calls (api.rs).
    pub(crate) fn host(&self) -> &mh::Host {
        &self.host
    }

    /// Opens (or joins) the host instance of device `index`.
    pub(crate) fn open(cfg: &DeviceConfig, index: u32) -> Result<Arc<Self>, Error> {
        let mut hosts = HOSTS.lock().unwrap_or_else(|p| p.into_inner());
        hosts.retain(|(_, w)| w.strong_count() > 0);
        if let Some(h) = hosts
            .iter()
            .find(|(n, _)| *n == cfg.name)
            .and_then(|(_, w)| w.upgrade())
        {
            return Ok(h);
        }
        let host = mh::Host::start(cfg.host_config())
            .map_err(|e| host_err(&format!("starting the MRC host of {}", cfg.name), &e))?;
        // Key 0 is a valid engine key, but C programs treat an lkey of 0 as unset: spend it on a byte nobody
        // uses, so applications' keys are never 0.
        let _ = host.alloc_buffer(host.default_pd(), 1, Access::NONE);
        let local = host.local();
        let stats = cfg.stats_interval().and_then(|every| {
            let stop = Arc::new(AtomicBool::new(false));
            let (h, s) = (host.clone(), Arc::clone(&stop));
            std::thread::Builder::new()
                .name("mrc-shim-stats".into())
                .spawn(move || print_stats(&h, every, &s))
                .ok()
                .map(|t| (stop, t))
        });
        let router = Arc::new(Router::new(index)?);
        let router_thread = {
            let (h, r) = (host.clone(), Arc::clone(&router));
            Some(
                std::thread::Builder::new()
                    .name("mrc-shim-events".into())
                    .spawn(move || route_events(&h, &r))
                    .map_err(|e| {
                        Error::new(libc::EAGAIN, format!("starting the event thread: {e}"))
                    })?,
            )
        };
        let d = Arc::new(Self {
            host,
            local,
            router,
            router_thread,
            totals: Mutex::new(QpStats::default()),
            assist: cfg.assist(),
            nap: cfg.nap(),
            stats,
        });
        hosts.push((cfg.name.clone(), Arc::downgrade(&d)));
        Ok(d)
    }

    /// Plane 0's UDP port (the port's LID).
    pub(crate) fn port(&self) -> u16 {
        self.local.port
    }

    /// GID 0: plane 0's address, with the port folded in on loopback (`mrc_host::LocalInfo::gid`).
    pub(crate) fn gid(&self) -> Ipv6Addr {
        self.local.gid
    }

    /// Readable once per queued asynchronous event (the contexts' `async_fd`).
    pub(crate) fn event_fd(&self) -> RawFd {
        self.router.verbs_fd.as_raw_fd()
    }

    /// The asynchronous events' router (libmrc's queue, api.rs).
    pub(crate) fn router(&self) -> &Router {
        &self.router
    }

    /// The next asynchronous event verbs has a name for, whose element still exists (`Some(None)`: an
    /// event to skip).
    pub(crate) fn next_event(&self) -> Option<Option<HostEvent>> {
        let e = self
            .router
            .verbs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .pop_front()?;
        let (HostEvent::QpFatal(a) | HostEvent::CqError(a)) = e;
        Some(self.router.alive(a).then_some(e))
    }

    fn element(&self, kind: u8, id: u32, addr: Option<usize>) {
        let mut el = self
            .router
            .elements
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        match addr {
            Some(a) => {
                el.insert((kind, id), a);
            }
            // A destroyed object's address may come back for another one: it is nobody's any more.
            None => {
                if let Some(a) = el.remove(&(kind, id)) {
                    drop(el);
                    self.router.set_libmrc(a, false);
                }
            }
        }
    }

    /// Names the `ibv_qp` (or `ibv_cq`) behind a host QP (CQ) for asynchronous events.
    pub(crate) fn name_qp(&self, qpn: u32, raw: Option<usize>) {
        self.element(QP_ELEMENT, qpn, raw);
    }

    pub(crate) fn name_cq(&self, id: u32, raw: Option<usize>) {
        self.element(CQ_ELEMENT, id, raw);
    }

    pub(crate) fn alloc_pd(&self) -> Result<HostPd, Error> {
        self.host
            .alloc_pd()
            .map(HostPd)
            .map_err(|e| host_err("allocating a PD", &e))
    }

    pub(crate) fn dealloc_pd(&self, pd: HostPd) {
        let _ = self.host.dealloc_pd(pd.0);
    }

    pub(crate) fn reg_mr(
        &self,
        pd: HostPd,
        addr: u64,
        len: usize,
        access: c_int,
    ) -> Result<HostMr, Error> {
        // SAFETY: verbs' contract: the application keeps `[addr, addr + len)` mapped until `ibv_dereg_mr`,
        // which calls `dereg_mr` below; `mr.rs` checked that the range is mapped.
        let mr = unsafe {
            self.host
                .reg_mr(pd.0, addr as *mut u8, len, Access::from_bits(access as u32))
        }
        .map_err(|e| host_err("registering memory", &e))?;
        Ok(HostMr {
            mr,
            lkey: mr.lkey,
            rkey: mr.rkey,
        })
    }

    pub(crate) fn dereg_mr(&self, mr: HostMr) {
        let _ = self.host.dereg_mr(&mr.mr);
    }

    pub(crate) fn create_cq(&self, depth: u32) -> Result<HostCq, Error> {
        self.host
            .create_cq(depth)
            .map(HostCq)
            .map_err(|e| host_err("creating a CQ", &e))
    }

    pub(crate) fn destroy_cq(&self, cq: &HostCq) {
        if let Err(e) = self.host.destroy_cq(&cq.0) {
            log!(Warn, "ibv_destroy_cq: the host kept CQ {}: {e}", cq.id());
        }
    }

    pub(crate) fn destroy_qp(&self, qp: &HostQp) {
        let qpn = qp.qpn;
        if let Some(s) = self.host.inspect(|dp| dp.endpoint_ref().qp_stats(qpn)) {
            add_stats(
                &mut self.totals.lock().unwrap_or_else(|p| p.into_inner()),
                &s,
            );
        }
        if let Err(e) = self.host.destroy_qp(&qp.qp) {
            log!(Warn, "ibv_destroy_qp: the host kept QP {qpn:#x}: {e}");
        }
    }

    pub(crate) fn create_qp(
        &self,
        pd: HostPd,
        send_cq: &HostCq,
        recv_cq: &HostCq,
        cap: &ibv_qp_cap,
        sq_sig_all: bool,
    ) -> Result<HostQp, Error> {
        let qp = self
            .host
            .create_qp(mh::QpSpec {
                pd: pd.0,
                send_cq: &send_cq.0,
                recv_cq: &recv_cq.0,
                max_send_wr: cap.max_send_wr,
                max_recv_wr: cap.max_recv_wr,
                max_sge: cap.max_send_sge.max(cap.max_recv_sge),
                max_inline: cap.max_inline_data,
                sq_sig_all,
            })
            .map_err(|e| host_err("creating a QP", &e))?;
        Ok(HostQp {
            qpn: qp.qpn(),
            qp,
            last_post: AtomicU64::new(0),
        })
    }

    /// Applies a verbs transition.
    ///
    /// **RTR also starts the send side** (host RTR then RTS): an MRC responder sends READ responses in its own
    /// send PSN space, and perftest leaves the passive side of `ib_read_bw` in RTR. The PSNs are therefore
    /// derived from the two QPNs ([`derived_psn`]), which both ends know at RTR, instead of the ones the
    /// application exchanged (kept for `ibv_query_qp` only); verbs RTS then only sets the QP's ACK timeout and
    /// retry count (`timeout`, `retry_cnt`: a silent peer fails the QP with `IBV_WC_RETRY_EXC_ERR` after
    /// `retry_cnt + 1` timeouts of 4.096 µs × 2^timeout).
    pub(crate) fn modify_qp(&self, qp: &HostQp, t: Transition) -> Result<(), Error> {
        if let Transition::Rtr { dest_qpn, .. } = t {
            let (local, remote) = (qp.qpn, dest_qpn);
            self.apply(qp, t, derived_psn(remote, local))?;
            return self.apply(
                qp,
                Transition::Rts {
                    sq_psn: derived_psn(local, remote),
                    timeout: 14,
                    retry_cnt: 7,
                    rnr_retry: 7,
                },
                0,
            );
        }
        if let Transition::Rts {
            timeout, retry_cnt, ..
        } = t
        {
            // The QP has been sending since RTR (with verbs' usual 14 / 7 from there); RTS brings the application's
            // ACK timeout and retry count.
            return qp
                .qp
                .set_retry(mh::QpRetry::from_verbs(timeout, retry_cnt))
                .map_err(|e| host_err("setting the QP's timeout and retry count", &e));
        }
        self.apply(qp, t, 0)
    }

    fn apply(&self, qp: &HostQp, t: Transition, rtr_psn: u32) -> Result<(), Error> {
        let t = match t {
            Transition::Init { access } => mh::QpTransition::Init {
                access: Access::from_bits(access as u32),
            },
            Transition::Rtr {
                gid,
                lid,
                dest_qpn,
                rq_psn: _,
                mtu,
            } => mh::QpTransition::Rtr {
                peer: mh::PeerAddr::from_verbs(Ipv6Addr::from(gid), lid)
                    .map_err(|e| host_err("RTR", &e))?,
                remote_qpn: dest_qpn,
                rq_psn: rtr_psn,
                mtu,
            },
            Transition::Rts {
                sq_psn,
                timeout,
                retry_cnt,
                rnr_retry,
            } => mh::QpTransition::Rts {
                sq_psn,
                timeout,
                retry_cnt,
                rnr_retry,
            },
            Transition::Error => mh::QpTransition::Error,
            Transition::Reset => mh::QpTransition::Reset,
        };
        let peer = match t {
            mh::QpTransition::Rtr { peer, .. } => Some(peer),
            _ => None,
        };
        qp.qp.modify(t).map_err(|e| match peer {
            Some(p) => host_err(
                &format!(
                    "RTR toward {} (from ah_attr.grh.dgid, ah_attr.dlid)",
                    p.socket_addr()
                ),
                &e,
            ),
            None => host_err("changing the QP's state", &e),
        })
    }

    pub(crate) fn post_send(&self, qp: &HostQp, wr: &SendRequest<'_>) -> Result<(), Error> {
        let mut buf = [Sge {
            addr: 0,
            len: 0,
            lkey: 0,
        }; SGE_MAX];
        let mut bytes = [0u8; INLINE_MAX];
        let inline = if wr.inline {
            let mut n = 0;
            for s in wr.sges {
                let len = s.length as usize;
                if n + len > INLINE_MAX {
                    return Err(Error::inval(format!(
                        "inline data exceeds {INLINE_MAX} bytes"
                    )));
                }
                // SAFETY: with IBV_SEND_INLINE the caller's buffers are read now, whatever their keys; the
                // caller guarantees `length` readable bytes at `addr` for the duration of the post, and the
                // bound check above keeps the copy inside `bytes`.
                unsafe {
                    std::ptr::copy_nonoverlapping(
                        s.addr as *const u8,
                        bytes[n..].as_mut_ptr(),
                        len,
                    );
                }
                n += len;
            }
            Some(&bytes[..n])
        } else {
            None
        };
        let req = mh::SendRequest {
            wr_id: wr.wr_id,
            op: wr.op,
            sges: if wr.inline {
                &[]
            } else {
                sges(wr.sges, &mut buf)?
            },
            inline,
            signaled: wr.signaled,
            solicited: wr.solicited,
            fence: wr.fence,
        };
        qp.qp
            .post_send(&req)
            .map_err(|e| host_err("posting a send", &e))?;
        let now = EPOCH.elapsed().as_nanos() as u64;
        let before = qp.last_post.swap(now, Ordering::Relaxed);
        if self.assist && now.saturating_sub(before) > LONE_POST.as_nanos() as u64 {
            // A round only if the progress thread is not in one; its errors surface on the next call.
            let _ = self.host.drive();
        }
        Ok(())
    }

    pub(crate) fn post_recv(&self, qp: &HostQp, wr_id: u64, list: &[ibv_sge]) -> Result<(), Error> {
        let mut buf = [Sge {
            addr: 0,
            len: 0,
            lkey: 0,
        }; SGE_MAX];
        qp.qp
            .post_recv(wr_id, sges(list, &mut buf)?)
            .map_err(|e| host_err("posting a receive", &e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_psns_are_24_bits_and_differ_by_direction() {
        let (a, b) = (0x12_3456, 0xab_cdef);
        // What QP a sends first (its sq_psn) is what QP b expects (its rq_psn): both ends call
        // derived_psn(sender, receiver).
        let a_to_b = derived_psn(a, b);
        let b_to_a = derived_psn(b, a);
        assert!(a_to_b <= 0xff_ffff && b_to_a <= 0xff_ffff);
        assert_ne!(a_to_b, b_to_a);
        assert_ne!(derived_psn(a, b + 1), a_to_b);
    }

    #[test]
    fn completions_become_ibv_wcs() {
        let c = Completion {
            wr_id: 7,
            status: mrc::WcStatus::RnrRetryExcErr,
            opcode: mrc::WcOpcode::RecvRdmaWithImm,
            byte_len: 5,
            imm: Some(0x0102_0304),
            qpn: 0x42,
        };
        let w = to_wc(&c);
        assert_eq!(
            (w.wr_id, w.status, w.opcode, w.byte_len, w.qp_num),
            (7, 13, 129, 5, 0x42)
        );
        // Immediate data in network order, flagged.
        assert_eq!(w.imm_data.to_ne_bytes(), [1, 2, 3, 4]);
        assert_eq!(w.wc_flags, IBV_WC_WITH_IMM);
    }
}
