//! **Stand-in for the `mrc-host` crate** (issue 11) while the `host` branch has not published it: the subset of
//! the agreed API (`/work/wt/notes/host-api.md`) that the shim's seam (`host.rs`) calls, with the same names and
//! shapes, over `mrc::datapath::UdpEndpoint` and a progress thread of its own.
//!
//! It exists so the shim's data path can be built and tested now. When `mrc-host` lands, `host.rs` switches its
//! `use crate::mrc_host as mh` to `use mrc_host as mh` and this file goes. Differences from the contract that a
//! caller could notice:
//! - **Peer resolution.** The contract resolves a peer's other planes in-band from `(plane-0 address, port)`.
//!   Here every host publishes its planes in a small file, `$MRC_SHIM_PEER_DIR/<plane-0 address>-<port>`
//!   (default `/tmp/mrc-shim-peers`), and RTR reads the peer's file. That works for processes sharing a file
//!   system: loopback, and the namespaces of `mrc-fabric`.
//! - **Placement order.** The engine places packets as they arrive; the contract's "last byte last" is not
//!   provided here (one-packet messages, such as `ib_write_lat`'s default 2 B, are unaffected).
//! - **Submission.** Posting takes the endpoint's lock (no lock-free ring); the progress thread lets a waiting
//!   poster in before its next round. Completions, by contrast, are moved into per-CQ queues by the progress
//!   thread, so polling never takes the endpoint's lock.
#![allow(
    unsafe_code,
    reason = "eventfds, and lending the application's registered memory to the datapath"
)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::thread::JoinHandle;
use std::time::Duration;

use mrc::datapath::config::PeerPlane;
use mrc::datapath::socket::wait;
pub(crate) use mrc::datapath::{DatapathConfig, NodeConfig};
use mrc::datapath::{UdpEndpoint, software_cc};
use mrc::qp::QpStats;
pub(crate) use mrc::{Access, Completion, QpState, SendOp, Sge};
use mrc::{
    Caps, CqId, EndpointConfig, Event, PeerId, PostError, QpInit, RecvWr, SendWr, Transition,
};

// ---------------------------------------------------------------------------------------------------------
// Errors
// ---------------------------------------------------------------------------------------------------------

/// A failure, with the errno a verbs caller expects and a sentence naming the cause.
#[derive(Debug, Clone)]
pub(crate) struct HostError {
    errno: i32,
    why: String,
}

impl HostError {
    fn new(errno: i32, why: impl Into<String>) -> Self {
        Self {
            errno,
            why: why.into(),
        }
    }

    /// The errno value.
    pub(crate) fn errno(&self) -> i32 {
        self.errno
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

fn post_error(e: PostError) -> HostError {
    let errno = match e {
        PostError::QueueFull | PostError::WimmCap => libc::ENOMEM,
        PostError::Unsupported => libc::EOPNOTSUPP,
        PostError::NoSuchQp
        | PostError::BadState(_)
        | PostError::TooManySge
        | PostError::LocalAccess(_)
        | PostError::TooLong => libc::EINVAL,
    };
    HostError::new(errno, e.to_string())
}

// ---------------------------------------------------------------------------------------------------------
// Configuration
// ---------------------------------------------------------------------------------------------------------

/// How the datapath is driven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum ProgressMode {
    /// A progress thread that spins while busy and sleeps in `ppoll` when idle.
    #[default]
    Thread,
    /// A progress thread that never sleeps (lowest latency, one core).
    BusyPoll,
}

/// The software QP profile (mrc-perf's defaults).
#[derive(Debug, Clone)]
pub(crate) struct QpProfile {
    /// MRC payload bytes per packet.
    pub(crate) mtu: u32,
    /// Active EVs per plane.
    pub(crate) evs_per_plane: u16,
    /// Fixed window in packets.
    pub(crate) window_packets: u32,
    /// NSCC for this rate instead of the fixed window.
    pub(crate) rate_bps: Option<u64>,
    /// How long the progress thread spins after the last busy round before it sleeps.
    pub(crate) busy_poll: Duration,
    /// Print transport counters (per plane) on stderr at this interval.
    pub(crate) stats_interval: Option<Duration>,
}

/// Everything [`Host::start`] needs.
#[derive(Debug, Clone)]
pub(crate) struct HostConfig {
    pub(crate) node: NodeConfig,
    pub(crate) progress: ProgressMode,
    pub(crate) profile: QpProfile,
    /// Where hosts publish their planes for peers (see the module documentation).
    pub(crate) peer_dir: PathBuf,
}

impl HostConfig {
    /// A node with mrc-perf's profile: 60000-byte packets on loopback, 9000-byte links elsewhere.
    pub(crate) fn for_node(node: NodeConfig) -> Self {
        let mtu =
            if node.usid_block.is_none() && node.planes.iter().all(|p| p.addr.ip().is_loopback()) {
                60_000
            } else {
                9000 - (40 + 8 + 64)
            };
        Self {
            node,
            progress: ProgressMode::Thread,
            profile: QpProfile {
                mtu,
                evs_per_plane: 4,
                window_packets: 64,
                rate_bps: None,
                busy_poll: Duration::from_micros(200),
                stats_interval: None,
            },
            peer_dir: PathBuf::from("/tmp/mrc-shim-peers"),
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Public handles
// ---------------------------------------------------------------------------------------------------------

/// A protection domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Pd(mrc::Pd);

impl Pd {
    /// The domain's number.
    pub(crate) fn id(self) -> u32 {
        self.0.id()
    }
}

/// A registered region.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mr {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    pub(crate) addr: u64,
    pub(crate) len: usize,
}

/// Where a peer is: its plane-0 address and UDP port (verbs: GID 0 and LID).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct PeerAddr {
    pub(crate) plane0: Ipv6Addr,
    pub(crate) port: u16,
}

/// A state change.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QpTransition {
    Init {
        access: Access,
    },
    Rtr {
        peer: PeerAddr,
        remote_qpn: u32,
        rq_psn: u32,
        #[allow(
            dead_code,
            reason = "the QP's packet size is fixed at creation by the profile"
        )]
        mtu: u32,
    },
    Rts {
        sq_psn: u32,
        #[allow(dead_code, reason = "the profile's retry timing applies")]
        timeout: u8,
        #[allow(dead_code, reason = "the profile's retry timing applies")]
        retry_cnt: u8,
        #[allow(dead_code, reason = "the engine retries RNR NACKs after rnr_delay")]
        rnr_retry: u8,
    },
    Error,
    Reset,
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    pub(crate) sges: &'a [Sge],
    /// The bytes to send, copied at posting (then `sges` is ignored).
    pub(crate) inline: Option<&'a [u8]>,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    #[allow(
        dead_code,
        reason = "the engine completes in order; nothing passes a READ"
    )]
    pub(crate) fence: bool,
}

/// What QP creation needs.
pub(crate) struct QpSpec<'a> {
    pub(crate) pd: Pd,
    pub(crate) send_cq: &'a Cq,
    pub(crate) recv_cq: &'a Cq,
    pub(crate) max_send_wr: u32,
    pub(crate) max_recv_wr: u32,
    pub(crate) max_sge: u32,
    pub(crate) max_inline: u32,
    pub(crate) sq_sig_all: bool,
}

/// Asynchronous events.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum AsyncEvent {
    /// A QP went to the error state.
    QpFatal { qpn: u32 },
    /// A CQ overran.
    CqError { cq: u32 },
}

/// This host's addresses.
#[derive(Debug, Clone)]
pub(crate) struct LocalInfo {
    /// Plane 0's UDP port.
    pub(crate) port: u16,
    /// Plane 0's address.
    pub(crate) gid0: Ipv6Addr,
}

// ---------------------------------------------------------------------------------------------------------
// The host
// ---------------------------------------------------------------------------------------------------------

struct Inner {
    ep: Mutex<UdpEndpoint>,
    /// Application threads waiting for `ep`: the progress thread lets them in before its next round.
    waiters: AtomicU32,
    doorbell: OwnedFd,
    sleeping: AtomicBool,
    posted: AtomicBool,
    stop: AtomicBool,
    cqs: Mutex<Vec<Weak<CqInner>>>,
    events: Mutex<VecDeque<AsyncEvent>>,
    event_fd: OwnedFd,
    peers: Mutex<HashMap<PeerAddr, PeerId>>,
    /// Lent memory: start → (length, registrations using it).
    lent: Mutex<BTreeMap<u64, (u64, u32)>>,
    local: LocalInfo,
    /// Counters of destroyed QPs.
    totals: Mutex<QpStats>,
    profile: QpProfile,
    mode: ProgressMode,
    peer_dir: PathBuf,
    peer_file: Option<PathBuf>,
}

struct Shared {
    inner: Arc<Inner>,
    thread: Option<JoinHandle<()>>,
}

impl Drop for Shared {
    fn drop(&mut self) {
        {
            let ep = lock(&self.inner.ep);
            let d = ep.stats();
            let mut t = *lock(&self.inner.totals);
            for q in ep.endpoint_ref().qpns() {
                if let Some(s) = ep.endpoint_ref().qp_stats(q) {
                    add_stats(&mut t, &s);
                }
            }
            crate::log::log!(
                Info,
                "mrc host: {} datagrams out, {} in ({} from unknown sources); QPs: {} data packets, {} \
                 retransmitted, {} lost by time and {} by timeout, {} receiver-not-ready, {} retry NACKs, \
                 {} out of window, {} paths retired",
                d.tx_datagrams,
                d.rx_datagrams,
                d.rx_unknown_source,
                t.tx_data_packets,
                t.tx_retransmits,
                t.losses_rack,
                t.losses_rto,
                t.rx_no_resource,
                t.rx_retry_nacks,
                t.rx_out_of_window,
                t.ev_retirements
            );
        }
        self.inner.stop.store(true, Ordering::SeqCst);
        ring(&self.inner.doorbell);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        if let Some(f) = &self.inner.peer_file {
            let _ = std::fs::remove_file(f);
        }
    }
}

/// One host per process and node; cheap to clone.
#[derive(Clone)]
pub(crate) struct Host(Arc<Shared>);

fn new_eventfd(flags: i32) -> Result<OwnedFd, HostError> {
    // SAFETY: plain system call; the result is checked.
    let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | flags) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(HostError::new(
            e.raw_os_error().unwrap_or(libc::EMFILE),
            format!("eventfd: {e}"),
        ));
    }
    // SAFETY: `fd` is a fresh descriptor nobody else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn ring(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; a full counter cannot happen.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

fn drain(fd: RawFd) -> u64 {
    let mut v: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
    let n = unsafe { libc::read(fd, (&raw mut v).cast(), 8) };
    if n == 8 { v } else { 0 }
}

fn peer_file_name(dir: &std::path::Path, a: &PeerAddr) -> PathBuf {
    dir.join(format!("{}-{}", a.plane0, a.port))
}

impl Host {
    /// Binds the node's sockets, publishes its planes for peers and starts the progress thread.
    pub(crate) fn start(cfg: HostConfig) -> Result<Host, HostError> {
        let ep = UdpEndpoint::new(
            cfg.node,
            EndpointConfig::default(),
            DatapathConfig {
                max_datagram: cfg.profile.mtu as usize + 128,
                busy_poll: cfg.profile.busy_poll,
                ..DatapathConfig::default()
            },
        )
        .map_err(|e| HostError::new(libc::EADDRNOTAVAIL, e.to_string()))?;
        let mut ep = ep;
        // Key 0 is a valid engine key, but C programs treat an lkey of 0 as unset: spend it on a byte nobody
        // uses, so applications' keys start at 1 << 8.
        let pd0 = ep.endpoint().alloc_pd();
        ep.alloc_mr(pd0, 1, Access::NONE)
            .map_err(|e| HostError::new(libc::ENOMEM, e.to_string()))?;
        let planes = ep.local_planes();
        let first = planes
            .first()
            .map(|p| p.addr)
            .unwrap_or_else(|| SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0));
        let local = LocalInfo {
            port: first.port(),
            gid0: *first.ip(),
        };
        let me = PeerAddr {
            plane0: local.gid0,
            port: local.port,
        };
        let text: String = planes
            .iter()
            .map(|p| format!("{} {} {}\n", p.addr.ip(), p.addr.port(), p.t0))
            .collect();
        let file = peer_file_name(&cfg.peer_dir, &me);
        let _ = std::fs::create_dir_all(&cfg.peer_dir);
        // Readable by peers of other users too (the directory is shared).
        let tmp = cfg
            .peer_dir
            .join(format!(".{}-{}.tmp", me.plane0, std::process::id()));
        std::fs::write(&tmp, text)
            .and_then(|()| std::fs::rename(&tmp, &file))
            .map_err(|e| {
                HostError::new(
                    libc::EACCES,
                    format!(
                        "publishing this host's planes in {}: {e} (set MRC_SHIM_PEER_DIR to a writable folder)",
                        cfg.peer_dir.display()
                    ),
                )
            })?;
        let inner = Arc::new(Inner {
            ep: Mutex::new(ep),
            waiters: AtomicU32::new(0),
            doorbell: new_eventfd(libc::EFD_NONBLOCK)?,
            sleeping: AtomicBool::new(false),
            posted: AtomicBool::new(false),
            stop: AtomicBool::new(false),
            cqs: Mutex::new(Vec::new()),
            events: Mutex::new(VecDeque::new()),
            event_fd: new_eventfd(libc::EFD_SEMAPHORE)?,
            peers: Mutex::new(HashMap::new()),
            lent: Mutex::new(BTreeMap::new()),
            local,
            totals: Mutex::new(QpStats::default()),
            profile: cfg.profile,
            mode: cfg.progress,
            peer_dir: cfg.peer_dir,
            peer_file: Some(file),
        });
        let i = Arc::clone(&inner);
        let thread = std::thread::Builder::new()
            .name("mrc-shim-progress".into())
            .spawn(move || run(&i))
            .map_err(|e| HostError::new(libc::EAGAIN, format!("progress thread: {e}")))?;
        Ok(Host(Arc::new(Shared {
            inner,
            thread: Some(thread),
        })))
    }

    fn inner(&self) -> &Arc<Inner> {
        &self.0.inner
    }

    /// Plane 0's address and port.
    pub(crate) fn local(&self) -> LocalInfo {
        self.inner().local.clone()
    }

    /// The next asynchronous event (one count of [`event_fd`](Self::event_fd) each).
    pub(crate) fn poll_event(&self) -> Option<AsyncEvent> {
        lock(&self.inner().events).pop_front()
    }

    /// Readable (semaphore eventfd) once per queued event.
    pub(crate) fn event_fd(&self) -> RawFd {
        self.inner().event_fd.as_raw_fd()
    }

    pub(crate) fn alloc_pd(&self) -> Result<Pd, HostError> {
        Ok(Pd(self.inner().with(|ep| ep.endpoint().alloc_pd())))
    }

    pub(crate) fn dealloc_pd(&self, pd: Pd) -> Result<(), HostError> {
        self.inner()
            .with(|ep| ep.endpoint().dealloc_pd(pd.0))
            .map_err(|_| HostError::new(libc::EINVAL, "no such protection domain"))
    }

    /// Registers the caller's `[addr, addr + len)`.
    ///
    /// # Safety
    /// The range stays valid for reads and writes until [`dereg_mr`](Self::dereg_mr).
    pub(crate) unsafe fn reg_mr(
        &self,
        pd: Pd,
        addr: *mut u8,
        len: usize,
        access: Access,
    ) -> Result<Mr, HostError> {
        let a = addr as u64;
        let inner = self.inner();
        inner.with(|ep| {
            let keys = ep
                .endpoint()
                .reg_mr(pd.0, a, len as u64, access)
                .map_err(|e| HostError::new(libc::EINVAL, format!("registration: {e:?}")))?;
            let mut lent = lock(&inner.lent);
            // A range inside memory already lent is covered; otherwise lend it.
            let covering = lent
                .range(..=a)
                .next_back()
                .filter(|(s, (l, _))| a + len as u64 <= *s + *l)
                .map(|(s, _)| *s);
            match covering {
                Some(s) => {
                    if let Some(e) = lent.get_mut(&s) {
                        e.1 += 1;
                    }
                }
                None => {
                    // A shorter region lent from the same start grows to this one (one entry per start).
                    let refs = match lent.remove(&a) {
                        Some((_, r)) => {
                            ep.mem.forget(a);
                            r
                        }
                        None => 0,
                    };
                    // SAFETY: the caller's promise above; `dereg_mr` forgets it.
                    unsafe { ep.mem.lend(a, len as u64) };
                    lent.insert(a, (len as u64, refs + 1));
                }
            }
            Ok(Mr {
                lkey: keys.lkey,
                rkey: keys.rkey,
                addr: a,
                len,
            })
        })
    }

    pub(crate) fn dereg_mr(&self, mr: &Mr) -> Result<(), HostError> {
        let inner = self.inner();
        inner.with(|ep| {
            ep.endpoint()
                .dereg_mr(mr.lkey)
                .map_err(|e| HostError::new(libc::EINVAL, format!("deregistration: {e:?}")))?;
            let mut lent = lock(&inner.lent);
            let a = mr.addr;
            let covering = lent
                .range(..=a)
                .next_back()
                .filter(|(s, (l, _))| a + mr.len as u64 <= *s + *l)
                .map(|(s, _)| *s);
            if let Some(s) = covering
                && let Some(e) = lent.get_mut(&s)
            {
                e.1 -= 1;
                if e.1 == 0 {
                    lent.remove(&s);
                    ep.mem.forget(s);
                }
            }
            Ok(())
        })
    }

    /// A completion queue with room for `depth` entries and an eventfd for notifications.
    pub(crate) fn create_cq(&self, depth: u32) -> Result<Cq, HostError> {
        let inner = self.inner();
        // The engine's queue is drained every round, so its depth only has to cover one round's completions.
        let id = inner.with(|ep| ep.endpoint().create_cq(depth as usize + 65_536));
        let cq = Arc::new(CqInner {
            id,
            ring: Mutex::new(VecDeque::new()),
            armed: AtomicU8::new(0),
            efd: new_eventfd(libc::EFD_NONBLOCK)?,
            host: Arc::downgrade(inner),
        });
        let mut cqs = lock(&inner.cqs);
        cqs.retain(|w| w.strong_count() > 0);
        cqs.push(Arc::downgrade(&cq));
        Ok(Cq(cq))
    }

    /// A QP in RESET.
    pub(crate) fn create_qp(&self, spec: QpSpec<'_>) -> Result<Qp, HostError> {
        let inner = self.inner();
        let p = &inner.profile;
        inner.with(|ep| {
            let mut init = QpInit::new(spec.pd.0, spec.send_cq.0.id);
            init.recv_cq = spec.recv_cq.0.id;
            // The engine frees an unsignaled request's slot only when a later signaled one completes: keep
            // room for a few more than the caller's depth.
            init.max_send_wr = spec.max_send_wr.max(1) + 1;
            init.max_recv_wr = spec.max_recv_wr.max(1);
            init.max_sge = spec.max_sge.max(1);
            init.sq_sig_all = spec.sq_sig_all;
            init.config = mrc::QpConfig {
                // 134 ms per retry (1.024 µs × 2^17), about 2.8 s without progress before RETRY_EXC: a
                // software host on a busy machine can stall for hundreds of milliseconds.
                timeout: 17,
                // Verbs initiators keep as many READs outstanding as their send queue holds (perftest: 128);
                // serving them all avoids a NACK-and-retry cycle per READ beyond the engine's default 16.
                max_read_dest: 256,
                ..ep.software_qp_config(
                    p.mtu,
                    p.evs_per_plane,
                    software_cc(p.mtu, p.window_packets, p.rate_bps),
                )
            };
            let qpn = ep
                .endpoint()
                .create_qp(init)
                .map_err(|e| HostError::new(libc::EINVAL, e.to_string()))?;
            // Inline data is copied into a ring of slots, one per send slot plus one (see `post_send`).
            let inline = if spec.max_inline > 0 {
                let slots = spec.max_send_wr as u64 + 2;
                let size = u64::from(spec.max_inline);
                let pd = spec.pd.0;
                match ep.alloc_mr(pd, (slots * size) as usize, Access::NONE) {
                    Ok((addr, keys)) => Some(InlineRing {
                        addr,
                        lkey: keys.lkey,
                        slot: size,
                        slots,
                        next: AtomicU64::new(0),
                    }),
                    Err(e) => {
                        let _ = ep.endpoint().destroy_qp(qpn);
                        return Err(HostError::new(libc::ENOMEM, e.to_string()));
                    }
                }
            } else {
                None
            };
            Ok(Qp(Arc::new(QpInner {
                qpn,
                host: Arc::clone(inner),
                inline,
            })))
        })
    }
}

impl Inner {
    /// The peer at `a`: known already, or read from its published file.
    fn resolve(&self, ep: &mut UdpEndpoint, a: PeerAddr) -> Result<PeerId, HostError> {
        let inner = self;
        if let Some(&id) = lock(&inner.peers).get(&a) {
            return Ok(id);
        }
        let f = peer_file_name(&inner.peer_dir, &a);
        let text = std::fs::read_to_string(&f).map_err(|e| {
            HostError::new(
                libc::EHOSTUNREACH,
                format!(
                    "no MRC host answers at [{}]:{} (GID 0 and LID of the peer): {}: {e}",
                    a.plane0,
                    a.port,
                    f.display()
                ),
            )
        })?;
        let mut planes = Vec::new();
        for line in text.lines() {
            let mut it = line.split_whitespace();
            let (Some(ip), Some(port), Some(t0)) = (it.next(), it.next(), it.next()) else {
                continue;
            };
            let (Ok(ip), Ok(port), Ok(t0)) = (
                ip.parse::<Ipv6Addr>(),
                port.parse::<u16>(),
                t0.parse::<u16>(),
            ) else {
                return Err(HostError::new(
                    libc::EINVAL,
                    format!("{}: malformed line {line:?}", f.display()),
                ));
            };
            planes.push(PeerPlane {
                addr: SocketAddrV6::new(ip, port, 0, 0),
                t0,
            });
        }
        let id = ep
            .add_peer(planes)
            .map_err(|e| HostError::new(libc::EINVAL, e.to_string()))?;
        lock(&inner.peers).insert(a, id);
        Ok(id)
    }

    /// Runs `f` on the endpoint, ahead of the progress thread's next round.
    fn with<R>(&self, f: impl FnOnce(&mut UdpEndpoint) -> R) -> R {
        self.waiters.fetch_add(1, Ordering::SeqCst);
        let r = {
            let mut g = lock(&self.ep);
            self.waiters.fetch_sub(1, Ordering::SeqCst);
            f(&mut g)
        };
        self.posted.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst) {
            ring(&self.doorbell);
        }
        r
    }

    /// One round of progress in the calling thread if nobody else is running one (never waits): an
    /// application that polls or posts moves its own packets, as in mrc-perf's poll mode, instead of waiting
    /// for the progress thread to be scheduled.
    ///
    /// Only while the progress thread sleeps: an awake one is already running rounds, and competing for the
    /// endpoint would only slow it down; then the caller yields instead, which lets a progress thread that
    /// shares its core run.
    fn assist(&self) {
        if self.sleeping.load(Ordering::SeqCst)
            && self.waiters.load(Ordering::Relaxed) == 0
            && let Ok(mut ep) = self.ep.try_lock()
        {
            self.round(&mut ep);
            return;
        }
        std::thread::yield_now();
    }

    /// One round on a locked endpoint: progress, then completions and events delivered.
    fn round(&self, ep: &mut UdpEndpoint) -> bool {
        match ep.progress() {
            Ok(true) => {
                let mut batch = [Completion::default(); 64];
                deliver(self, ep, &mut batch);
                true
            }
            // An error stops the progress thread, which logs it.
            _ => false,
        }
    }

    fn push_event(&self, e: AsyncEvent) {
        lock(&self.events).push_back(e);
        ring(&self.event_fd);
    }
}

fn add_stats(t: &mut QpStats, s: &QpStats) {
    t.tx_data_packets += s.tx_data_packets;
    t.tx_retransmits += s.tx_retransmits;
    t.losses_rack += s.losses_rack;
    t.losses_rto += s.losses_rto;
    t.rx_no_resource += s.rx_no_resource;
    t.rx_retry_nacks += s.rx_retry_nacks;
    t.rx_out_of_window += s.rx_out_of_window;
    t.ev_retirements += s.ev_retirements;
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The progress thread: rounds of receive, timers and transmit; completions moved to their CQs; sleeps in
/// `ppoll` once idle for the profile's `busy_poll`.
fn run(s: &Inner) {
    let mut stats = s
        .profile
        .stats_interval
        .map(|i| Ticker::new(i, s.local.port));
    let mut last_busy = std::time::Instant::now();
    let mut batch = vec![Completion::default(); 256];
    let mut failed = false;
    while !s.stop.load(Ordering::SeqCst) {
        // Let posting and registering threads in first.
        let mut spins = 0u32;
        while s.waiters.load(Ordering::SeqCst) > 0 && spins < 10_000 {
            std::hint::spin_loop();
            spins += 1;
        }
        let (busy, fds, blocked, sleep) = {
            let mut ep = lock(&s.ep);
            let busy = if failed {
                false
            } else {
                match ep.progress() {
                    Ok(b) => b,
                    Err(e) => {
                        crate::log::log!(Error, "mrc host: the datapath stopped: {e}");
                        failed = true;
                        false
                    }
                }
            };
            if busy {
                deliver(s, &mut ep, &mut batch);
            }
            if let Some(t) = &mut stats {
                t.tick(&ep);
            }
            let mut fds = ep.fds();
            fds.push(s.doorbell.as_raw_fd());
            (
                busy,
                fds,
                ep.blocked().to_vec(),
                ep.idle_timeout(Duration::from_millis(5)),
            )
        };
        if busy {
            last_busy = std::time::Instant::now();
            continue;
        }
        if s.mode == ProgressMode::BusyPoll || last_busy.elapsed() < s.profile.busy_poll {
            // Yield rather than spin: where cores are scarce, the application's thread may be the one with
            // work (it runs rounds itself when it polls or posts).
            std::thread::yield_now();
            continue;
        }
        s.sleeping.store(true, Ordering::SeqCst);
        if !s.posted.swap(false, Ordering::SeqCst) && !sleep.is_zero() {
            let mut blocked = blocked;
            blocked.push(false);
            if wait(&fds, &blocked, Some(sleep)).is_err() {
                std::thread::sleep(Duration::from_micros(50));
            }
        }
        s.sleeping.store(false, Ordering::SeqCst);
        drain(s.doorbell.as_raw_fd());
        last_busy = std::time::Instant::now()
            .checked_sub(s.profile.busy_poll)
            .unwrap_or(last_busy);
    }
}

/// Counters printed every interval (`MRC_SHIM_STATS_MS`): per-plane payload rates show a plane failing and
/// traffic moving to the others.
struct Ticker {
    every: Duration,
    start: std::time::Instant,
    next: std::time::Instant,
    port: u16,
    /// Per plane: payload bytes and retransmissions sent so far.
    last: Vec<(u64, u64)>,
}

impl Ticker {
    fn new(every: Duration, port: u16) -> Self {
        let now = std::time::Instant::now();
        Self {
            every,
            start: now,
            next: now + every,
            port,
            last: Vec::new(),
        }
    }

    fn tick(&mut self, ep: &UdpEndpoint) {
        let now = std::time::Instant::now();
        if now < self.next {
            return;
        }
        let secs = (now - self.next + self.every).as_secs_f64();
        self.next = now + self.every;
        let e = ep.endpoint_ref();
        let planes = ep.node().plane_count();
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
                    good[usize::from(ev.plane).min(planes - 1)] += 1;
                }
            }
        }
        self.last.resize(planes, (0, 0));
        let mut total = 0.0;
        let mut rates = String::new();
        let mut retx = 0;
        for (c, l) in cur.iter().zip(&self.last) {
            let mb = c.0.saturating_sub(l.0) as f64 / secs / 1e6;
            total += mb;
            retx += c.1.saturating_sub(l.1);
            rates.push_str(&format!(" {mb:.0}"));
        }
        let good: Vec<String> = good.iter().map(ToString::to_string).collect();
        eprintln!(
            "mrc-verbs-shim: stats port {} t={:.1}s tx {total:.1} MB/s retx {retx} | per plane MB/s{rates} | \
             good EVs {}",
            self.port,
            (now - self.start).as_secs_f64(),
            good.join(" ")
        );
        self.last = cur;
    }
}

/// Moves the engine's completions into the CQs' queues (notifying armed ones) and its events into the
/// asynchronous event queue.
fn deliver(s: &Inner, ep: &mut UdpEndpoint, batch: &mut [Completion]) {
    let cqs: Vec<Arc<CqInner>> = lock(&s.cqs).iter().filter_map(Weak::upgrade).collect();
    for q in &cqs {
        let mut moved = 0;
        loop {
            let n = ep.endpoint().poll_cq(q.id, batch);
            if n == 0 {
                break;
            }
            lock(&q.ring).extend(batch[..n].iter().copied());
            moved += n;
            if n < batch.len() {
                break;
            }
        }
        if moved > 0 && q.armed.swap(0, Ordering::AcqRel) != 0 {
            ring(&q.efd);
        }
    }
    while let Some(e) = ep.endpoint().poll_event() {
        match e {
            Event::QpError { qpn } => {
                if let Some(st) = ep.endpoint_ref().qp_stats(qpn) {
                    crate::log::log!(Info, "mrc host: QP {qpn:#x} failed; its counters: {st:?}");
                }
                s.push_event(AsyncEvent::QpFatal { qpn });
            }
            Event::CqError { cq } => s.push_event(AsyncEvent::CqError { cq: cq.id() }),
            _ => {}
        }
    }
}

// ---------------------------------------------------------------------------------------------------------
// Completion queues
// ---------------------------------------------------------------------------------------------------------

struct CqInner {
    id: CqId,
    ring: Mutex<VecDeque<Completion>>,
    /// 0 disarmed, 1 armed.
    armed: AtomicU8,
    efd: OwnedFd,
    host: Weak<Inner>,
}

impl Drop for CqInner {
    fn drop(&mut self) {
        if let Some(h) = self.host.upgrade() {
            let id = self.id;
            h.with(|ep| {
                let _ = ep.endpoint().destroy_cq(id);
            });
        }
    }
}

/// A completion queue.
#[derive(Clone)]
pub(crate) struct Cq(Arc<CqInner>);

impl Cq {
    pub(crate) fn id(&self) -> u32 {
        self.0.id.id()
    }

    /// Up to `out.len()` completions, oldest first; never waits.
    pub(crate) fn poll(&self, out: &mut [Completion]) -> usize {
        if lock(&self.0.ring).is_empty()
            && let Some(h) = self.0.host.upgrade()
        {
            h.assist();
        }
        let mut r = lock(&self.0.ring);
        let n = out.len().min(r.len());
        for (o, c) in out.iter_mut().zip(r.drain(..n)) {
            *o = c;
        }
        n
    }

    /// Arms the queue: the next completion makes [`fd`](Self::fd) readable. Completions carry no solicited
    /// flag here, so a solicited-only arming fires on any completion (verbs allows extra events).
    pub(crate) fn req_notify(&self, _solicited_only: bool) {
        self.0.armed.store(1, Ordering::Release);
        // A completion that arrived before arming but is still queued counts, as on hardware that compares
        // producer and arm indexes.
        if !lock(&self.0.ring).is_empty() && self.0.armed.swap(0, Ordering::AcqRel) != 0 {
            ring(&self.0.efd);
        }
    }

    /// A non-blocking eventfd, readable after an armed completion.
    pub(crate) fn fd(&self) -> RawFd {
        self.0.efd.as_raw_fd()
    }

    /// Reads and clears the notification count.
    pub(crate) fn ack_events(&self) -> u64 {
        drain(self.0.efd.as_raw_fd())
    }
}

// ---------------------------------------------------------------------------------------------------------
// Queue pairs
// ---------------------------------------------------------------------------------------------------------

struct InlineRing {
    addr: u64,
    lkey: u32,
    slot: u64,
    slots: u64,
    next: AtomicU64,
}

struct QpInner {
    qpn: u32,
    host: Arc<Inner>,
    inline: Option<InlineRing>,
}

impl Drop for QpInner {
    fn drop(&mut self) {
        let (qpn, ring) = (self.qpn, self.inline.as_ref().map(|r| (r.addr, r.lkey)));
        self.host.with(|ep| {
            if let Some(s) = ep.endpoint_ref().qp_stats(qpn) {
                add_stats(&mut lock(&self.host.totals), &s);
            }
            let _ = ep.endpoint().destroy_qp(qpn);
            if let Some((addr, lkey)) = ring {
                let _ = ep.endpoint().dereg_mr(lkey);
                ep.mem.forget(addr);
            }
        });
    }
}

/// A queue pair.
#[derive(Clone)]
pub(crate) struct Qp(Arc<QpInner>);

impl Qp {
    pub(crate) fn qpn(&self) -> u32 {
        self.0.qpn
    }

    pub(crate) fn state(&self) -> QpState {
        let qpn = self.0.qpn;
        self.0
            .host
            .with(|ep| ep.endpoint_ref().qp_state(qpn))
            .unwrap_or(QpState::Error)
    }

    /// Applies a state change; RTR resolves the peer's planes.
    pub(crate) fn modify(&self, t: QpTransition) -> Result<(), HostError> {
        let qpn = self.0.qpn;
        self.0.host.with(|ep| {
            let now = ep.now();
            let cur = ep.endpoint_ref().qp_state(qpn);
            let tr = match t {
                QpTransition::Init { .. } if cur == Some(QpState::Init) => return Ok(()),
                QpTransition::Init { access } => Transition::Init { access },
                QpTransition::Rtr {
                    peer,
                    remote_qpn,
                    rq_psn,
                    ..
                } => Transition::Rtr {
                    peer: self.0.host.resolve(ep, peer)?,
                    remote_qpn,
                    rq_psn,
                    remote_caps: Caps::ALL,
                },
                QpTransition::Rts { sq_psn, .. } => Transition::Rts { sq_psn },
                QpTransition::Error => Transition::Error,
                QpTransition::Reset => Transition::Reset,
            };
            ep.endpoint()
                .modify_qp(qpn, tr, now)
                .map_err(|e| HostError::new(libc::EINVAL, e.to_string()))
        })
    }

    /// Posts a send; inline bytes are copied now.
    pub(crate) fn post_send(&self, wr: &SendRequest<'_>) -> Result<(), HostError> {
        let q = &self.0;
        let mut one = [Sge {
            addr: 0,
            len: 0,
            lkey: 0,
        }];
        let sges: &[Sge] = match (wr.inline, &q.inline) {
            (Some(bytes), Some(r)) if bytes.len() as u64 <= r.slot => {
                // Slot n is reused by request n + slots; the engine holds at most `max_send_wr + 1` requests,
                // so the request that used it before has completed (counted only for posts that succeed).
                let n = r.next.load(Ordering::Relaxed);
                let at = r.addr + (n % r.slots) * r.slot;
                // SAFETY: the slot lies inside the ring we allocated (`slots × slot` bytes) and no queued
                // request uses it (see above); `bytes` is the caller's, distinct from our ring.
                unsafe {
                    std::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len());
                }
                one[0] = Sge {
                    addr: at,
                    len: bytes.len() as u32,
                    lkey: r.lkey,
                };
                if bytes.is_empty() { &[] } else { &one }
            }
            (Some(bytes), _) => {
                return Err(HostError::new(
                    libc::EINVAL,
                    format!("{} inline bytes exceed the QP's max_inline", bytes.len()),
                ));
            }
            (None, _) => wr.sges,
        };
        let swr = SendWr {
            wr_id: wr.wr_id,
            op: wr.op,
            sges,
            signaled: wr.signaled,
            solicited: wr.solicited,
        };
        let qpn = q.qpn;
        q.host.with(|ep| {
            let now = ep.now();
            ep.endpoint()
                .post_send(qpn, &swr, now)
                .map_err(post_error)?;
            // Send it now from this thread rather than wake the sleeping progress thread for it.
            if q.host.sleeping.load(Ordering::SeqCst) {
                q.host.round(ep);
            }
            Ok::<(), HostError>(())
        })?;
        if wr.inline.is_some()
            && let Some(r) = &q.inline
        {
            r.next.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    pub(crate) fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<(), HostError> {
        let qpn = self.0.qpn;
        self.0.host.with(|ep| {
            ep.endpoint()
                .post_recv(qpn, &RecvWr { wr_id, sges })
                .map_err(post_error)
        })
    }
}
