//! [`Host`]: one engine, its sockets, clock, peer table and the one progress loop, shared by every front end.
//!
//! Threads. Application threads post through a lock-free submission ring per QP (a doorbell) and poll a
//! lock-free completion ring per CQ; neither waits behind a progress round. Only the progress loop, and
//! control calls (creating objects, state transitions, registration), take the engine's lock. The loop runs
//! in a thread that sleeps in `ppoll` on the sockets and a doorbell eventfd ([`ProgressMode::Thread`]), in
//! a thread that never sleeps ([`ProgressMode::BusyPoll`]), or in the caller ([`ProgressMode::Manual`]:
//! [`Host::progress`]).

use std::collections::{BTreeMap, VecDeque};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering, fence};
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration as StdDuration, Instant as WallClock};

use crossbeam_queue::ArrayQueue;

use crate::share::WindowShare;
use mrc::endpoint::EndpointStats;
use mrc::{
    Access, Caps, Completion, CqId, EndpointConfig, EvState, Event, Pd, PeerId, PostError,
    QpConfig, QpInit, QpState, RecvWr, SendOp, SendWr, Sge, Transition, WcOpcode, WcStatus,
};
use smallvec::SmallVec;

use crate::bootstrap::{
    Blob, BlobKind, KEY_LEN, MAX_APP, MAX_LINK_QPS, Msg, QpHalf, proves, random_key, seal,
};
use crate::config::{NodeConfig, PeerPlane};
use crate::connect_queue::{ConnectQueues, Known, PendingConnect};
use crate::driver::{
    Datapath, DatapathConfig, DatapathStats, HostDatagram, initial_psn, software_cc,
};
use crate::error::HostError;
use crate::plane::{PlaneIo, UdpPlanes};
use crate::socket::{EventFd, wait};
use mrc::QpKeys;
use mrc::wire::{AUTH_LEN, AuthKey};

/// Longest sleep of the progress thread between rounds (timers and the doorbell usually end it sooner).
const MAX_SLEEP: StdDuration = StdDuration::from_millis(5);
/// Idle rounds the progress thread spins (yielding) before it sleeps.
const SPIN_ROUNDS: u32 = 64;
/// Bytes in flight on one QP from which [`Host::drive`] leaves rounds to the progress thread.
const DEEP_INFLIGHT: u64 = 16 * 1024;
/// How long a look that found a QP with [`DEEP_INFLIGHT`] bytes in flight holds: a bandwidth-bound
/// application's queue dips between its bursts of posts.
const DEEP_HOLD: StdDuration = StdDuration::from_millis(2);
/// Busy rounds between the progress thread's looks at the QPs' bytes in flight (every idle round looks).
const DEEP_EVERY: u32 = 16;
/// First retry interval of a bootstrap request (doubles up to a second).
const RETRY_FIRST: StdDuration = StdDuration::from_millis(20);
/// Accepted connections remembered, to answer a repeated CONNECT (its ACCEPT was lost) with the same ACCEPT.
const ACCEPT_CACHE: usize = 1024;
/// Async events kept until [`Host::poll_event`]; more are counted and dropped.
const EVENT_QUEUE: usize = 1024;
/// Links closed by peers whose CLOSE key is kept, to answer a repeated CLOSE (its CLOSED was lost).
const CLOSED_LINKS: usize = 1024;

/// How the progress loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProgressMode {
    /// A progress thread that spins briefly when idle, then sleeps in `ppoll` on the sockets, the next timer
    /// and a doorbell that posting rings.
    #[default]
    Thread,
    /// A progress thread that never sleeps: lowest latency, one core.
    BusyPoll,
    /// No thread: the caller runs rounds with [`Host::progress`] (a single-threaded application or a test).
    Manual,
}

/// The software QP and congestion-control profile every QP of a host gets (defaults = mrc-perf's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpProfile {
    /// Payload bytes per packet; 0 (the default): the largest the planes carry ([`PlaneIo::payload_mtu`]; over
    /// UDP [`pmtu::payload_mtu`](crate::pmtu::payload_mtu): 60000 on loopback, the link MTU less headers on a
    /// fabric).
    pub mtu: u32,
    /// Active EVs (paths) per plane.
    pub evs_per_plane: u16,
    /// Packets in flight per QP (a fixed window; see [`software_cc`]).
    pub window_packets: u32,
    /// NSCC sized for this rate instead of the fixed window.
    pub rate_bps: Option<u64>,
    /// MRC's ICRC on (off only where the UDP checksum protects the path).
    pub icrc: bool,
    /// QP local-ACK timeout, the engine's exponent: a QP that makes no progress for 1.024 µs × 2^`ack_timeout`
    /// retries; 0 waits forever (`QpConfig::timeout`, spec REL-QPTO-1). Default 14 (16.8 ms). Verbs counts
    /// 4.096 µs units: see [`QpRetry::from_verbs`].
    pub ack_timeout: u8,
    /// Retries at that timeout (`QpConfig::retry_linear`). Default 7.
    pub retry_cnt: u8,
    /// Retries after those at 2×, 4×, … the timeout (`QpConfig::retry_exp`); 25 or more: never give up. When
    /// the last one expires the oldest request completes with `RetryExcErr` and the QP enters ERROR. Default 3.
    pub retry_backoff: u8,
    /// New packets per EV before the next (`QpConfig::ev_burst`, spec PATH-EV-6); 0 (the default): enough for
    /// one segmented train when the planes take trains ([`crate::offload`]), else 1.
    pub ev_burst: u8,
}

impl Default for QpProfile {
    fn default() -> Self {
        Self {
            mtu: 0,
            evs_per_plane: 4,
            window_packets: 64,
            rate_bps: None,
            icrc: true,
            ack_timeout: 14,
            retry_cnt: 7,
            retry_backoff: 3,
            ev_burst: 0,
        }
    }
}

impl QpProfile {
    /// The profile's timeout and retry settings.
    pub fn retry(&self) -> QpRetry {
        QpRetry {
            ack_timeout: self.ack_timeout,
            retry_cnt: self.retry_cnt,
            retry_backoff: self.retry_backoff,
        }
    }
}

/// A QP's local-ACK timeout and retry counts (the engine's units; the fields of [`QpProfile`] of the same
/// names). Set per QP with [`Qp::set_retry`] or verbs' RTS ([`QpTransition::Rts`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpRetry {
    /// 1.024 µs × 2^`ack_timeout` without progress before a retry (0..=31; 0: wait forever).
    pub ack_timeout: u8,
    /// Retries at that timeout.
    pub retry_cnt: u8,
    /// Further retries at 2×, 4×, … the timeout (25 or more: unlimited).
    pub retry_backoff: u8,
}

impl QpRetry {
    /// Verbs' RTS values: `timeout` counts 4.096 µs × 2^timeout (0: infinite), so the engine's exponent is two
    /// more (capped at 31, 37 minutes: verbs 30 and 31 ask for longer than anyone waits); `retry_cnt` retries, all at
    /// that timeout (verbs has no back-off).
    pub fn from_verbs(timeout: u8, retry_cnt: u8) -> Self {
        Self {
            ack_timeout: if timeout == 0 {
                0
            } else {
                timeout.saturating_add(2).min(31)
            },
            retry_cnt,
            retry_backoff: 0,
        }
    }

    /// The verbs `timeout` these settings come from (the inverse of [`from_verbs`](Self::from_verbs)).
    pub fn verbs_timeout(&self) -> u8 {
        self.ack_timeout
            .saturating_sub(2)
            .max(u8::from(self.ack_timeout != 0))
    }

    /// How long a QP whose peer went silent keeps retrying, from its last progress to the error completion:
    /// `retry_cnt + 1` timeouts, then `2 + 4 + … + 2^retry_backoff` more. `None` when it never gives up.
    pub fn give_up_after(&self) -> Option<StdDuration> {
        if self.ack_timeout == 0 || self.retry_backoff >= 25 {
            return None;
        }
        let t = StdDuration::from_nanos(1024u64 << self.ack_timeout.min(31));
        let units = u32::from(self.retry_cnt) + 1 + ((2u32 << self.retry_backoff) - 2);
        Some(t.saturating_mul(units))
    }
}

/// Everything [`Host::start`] needs. `#[non_exhaustive]`: start from [`Default`], [`HostConfig::loopback`] or
/// [`HostConfig::from_env`] and set fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// Planes, local addresses, UDP port (0 = ephemeral), uSID or plain (the node-file format).
    pub node: NodeConfig,
    /// How progress runs.
    pub progress: ProgressMode,
    /// The QP/CC profile.
    pub profile: QpProfile,
    /// Most QPs at once.
    pub max_qps: u32,
    /// Most registrations at once.
    pub max_mrs: u32,
    /// Socket send and receive buffer size.
    pub socket_buffer: usize,
    /// How long bootstrap (connect, peer resolution) retries before it gives up.
    pub bootstrap_timeout: StdDuration,
    /// Send queue depth of each QP of a [`Link`].
    pub link_send_wr: u32,
    /// Receive queue depth of each QP of a [`Link`].
    pub link_recv_wr: u32,
    /// A pcapng capture of every datagram (off: `None`, unless `MRC_CAPTURE` is set; see
    /// [`CaptureConfig::from_env`](crate::capture::CaptureConfig::from_env)).
    pub capture: Option<crate::capture::CaptureConfig>,
    /// Where to serve the counters over HTTP (`/metrics`, `/counters.json`); off: `None`, unless `MRC_METRICS`
    /// is set (counters.rs).
    pub metrics: Option<std::net::SocketAddr>,
    /// UDP segmentation and receive offload ([`crate::offload`]); `None`: `MRC_OFFLOAD`, else auto (on in plain
    /// mode).
    pub offload: Option<crate::offload::Offload>,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self::loopback(2)
    }
}

impl HostConfig {
    /// `planes` UDP sockets on `::1`, ephemeral ports: no configuration at all.
    pub fn loopback(planes: usize) -> Self {
        Self {
            node: NodeConfig::loopback(planes),
            progress: ProgressMode::Thread,
            profile: QpProfile::default(),
            max_qps: 4096,
            max_mrs: 1 << 16,
            socket_buffer: 8 << 20,
            bootstrap_timeout: StdDuration::from_secs(10),
            link_send_wr: 1024,
            link_recv_wr: 1024,
            capture: None,
            metrics: None,
            offload: None,
        }
    }

    /// From environment variables named `{prefix}CONFIG` (a node file; otherwise `{prefix}PLANES` loopback
    /// planes, default 2), `{prefix}PROGRESS` (`thread`, `busy`, `manual`), `{prefix}MTU`, `{prefix}EVS`,
    /// `{prefix}WINDOW`, `{prefix}RATE_GBPS`, `{prefix}TIMEOUT_MS`.
    pub fn from_env(prefix: &str) -> Result<Self, HostError> {
        let var = |name: &str| std::env::var(format!("{prefix}{name}")).ok();
        let num = |name: &str| -> Result<Option<u64>, HostError> {
            var(name)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        HostError::Invalid(format!("{prefix}{name}={v}: not a number"))
                    })
                })
                .transpose()
        };
        let mut cfg = match var("CONFIG") {
            Some(path) => Self {
                node: NodeConfig::load(std::path::Path::new(&path))?,
                ..Self::loopback(1)
            },
            None => {
                let planes = num("PLANES")?.unwrap_or(2) as usize;
                if planes == 0 || planes > crate::config::MAX_PLANES {
                    return Err(HostError::Invalid(format!(
                        "{prefix}PLANES={planes}: give 1..=16"
                    )));
                }
                Self::loopback(planes)
            }
        };
        if let Some(p) = var("PROGRESS") {
            cfg.progress = match p.trim() {
                "thread" => ProgressMode::Thread,
                "busy" => ProgressMode::BusyPoll,
                "manual" => ProgressMode::Manual,
                other => {
                    return Err(HostError::Invalid(format!(
                        "{prefix}PROGRESS={other}: give thread, busy or manual"
                    )));
                }
            };
        }
        if let Some(m) = num("MTU")? {
            cfg.profile.mtu = (m as u32).clamp(256, 65_000);
        }
        if let Some(e) = num("EVS")? {
            cfg.profile.evs_per_plane = (e as u16).max(1);
        }
        if let Some(w) = num("WINDOW")? {
            cfg.profile.window_packets = (w as u32).max(1);
        }
        if let Some(r) = num("RATE_GBPS")? {
            cfg.profile.rate_bps = Some(r.saturating_mul(1_000_000_000));
        }
        if let Some(t) = num("TIMEOUT_MS")? {
            cfg.bootstrap_timeout = StdDuration::from_millis(t);
        }
        if let Some(t) = num("ACK_TIMEOUT")? {
            if t > 31 {
                return Err(HostError::Invalid(format!(
                    "{prefix}ACK_TIMEOUT={t}: give 0 (wait forever) or 1..=31 (1.024 µs × 2^t)"
                )));
            }
            cfg.profile.ack_timeout = t as u8;
        }
        if let Some(r) = num("RETRY_CNT")? {
            cfg.profile.retry_cnt = r.min(255) as u8;
        }
        if let Some(r) = num("RETRY_BACKOFF")? {
            cfg.profile.retry_backoff = r.min(255) as u8;
        }
        Ok(cfg)
    }
}

/// This host's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalInfo {
    /// Every plane's bound socket address.
    pub planes: Vec<SocketAddrV6>,
    /// Plane 0's UDP port (a verbs LID).
    pub port: u16,
    /// Plane 0's address (a verbs GID 0).
    pub gid0: Ipv6Addr,
}

/// Counters of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HostStats {
    /// The socket layer's counters.
    pub datapath: DatapathStats,
    /// The engine's counters.
    pub engine: EndpointStats,
    /// Async events dropped because nobody read them.
    pub events_dropped: u64,
    /// Completions lost because a completion ring was full (the CQ is then in error).
    pub cq_overruns: u64,
    /// Host datagrams dropped unanswered because they did not prove a secret (a CONNECT without its listener's
    /// key, a CLOSE without its link's) or named nothing this host has (spec HOST-AUTH-1, HOST-AUTH-2).
    pub bootstrap_rejected: u64,
    /// Waiting CONNECTs dropped because their listener's queue or the host's was full (spec HOST-QUEUE-1).
    pub connects_dropped: u64,
    /// CONNECTs refused by `poll_accept` (plane count, a peer address that belongs to another peer).
    pub connects_refused: u64,
}

/// Something that happened outside any work request (verbs async events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// A QP went to ERROR (retries exhausted, a CQ overran, the peer failed it).
    QpFatal {
        /// The QP.
        qpn: u32,
    },
    /// A CQ overran and is in error.
    CqError {
        /// The CQ's id.
        cq: u32,
    },
    /// A local plane came up.
    PortUp {
        /// The plane.
        plane: u8,
    },
    /// A local plane went down.
    PortDown {
        /// The plane.
        plane: u8,
    },
    /// A path (EV) of a QP was retired (loss, ICMP unreachable, denied).
    PathRetired {
        /// The QP.
        qpn: u32,
        /// The plane.
        plane: u8,
        /// The EV.
        ev: u32,
    },
    /// A retired path came back.
    PathRestored {
        /// The QP.
        qpn: u32,
        /// The plane.
        plane: u8,
        /// The EV.
        ev: u32,
    },
    /// The peer closed the link this QP belonged to ([`Link::close`]): both sides drained their QPs, and this
    /// one is destroyed (receives still posted are dropped without completions, as by `ibv_destroy_qp`).
    LinkClosed {
        /// The QP.
        qpn: u32,
    },
}

/// A registered region: the keys work requests and peers use. Valid until [`Host::dereg_mr`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    /// Key for local scatter/gather elements.
    pub lkey: u32,
    /// Key a peer names in a WRITE or READ.
    pub rkey: u32,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
    /// Memory the host allocated ([`Host::alloc_buffer`]) and frees at deregistration.
    pub(crate) owned: bool,
}

/// A peer as verbs names it: GID 0 (plane 0's address) and LID (its UDP port). The host asks the peer for its
/// other planes in band and remembers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr {
    /// Plane 0's address.
    pub plane0: Ipv6Addr,
    /// Plane 0's UDP port.
    pub port: u16,
}

/// One step of a QP's state machine, with what verbs gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QpTransition {
    /// RESET → INIT (or INIT → INIT): the remote access granted.
    Init {
        /// `REMOTE_WRITE` and/or `REMOTE_READ`.
        access: Access,
    },
    /// INIT → RTR: the peer is known.
    Rtr {
        /// The peer's plane 0.
        peer: PeerAddr,
        /// The peer's QP.
        remote_qpn: u32,
        /// First PSN expected from the peer.
        rq_psn: u32,
        /// Path MTU in bytes (the profile's MTU is used; smaller values are accepted and ignored).
        mtu: u32,
    },
    /// RTR → RTS.
    Rts {
        /// First PSN this QP sends.
        sq_psn: u32,
        /// verbs' local ACK timeout exponent: 4.096 µs × 2^timeout, 0 infinite ([`QpRetry::from_verbs`]).
        timeout: u8,
        /// verbs' retry count: retries at that timeout before the QP fails with `RetryExcErr`.
        retry_cnt: u8,
        /// verbs' RNR retry count (accepted and ignored: receiver-not-ready NACKs share the retry count).
        rnr_retry: u8,
    },
    /// Any → ERROR: flush.
    Error,
    /// Any → RESET.
    Reset,
}

/// What [`Host::create_qp`] needs.
#[derive(Debug, Clone, Copy)]
pub struct QpSpec<'a> {
    /// Protection domain.
    pub pd: Pd,
    /// Where send completions go.
    pub send_cq: &'a Cq,
    /// Where receive completions go.
    pub recv_cq: &'a Cq,
    /// Send queue depth (also the submission ring's).
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Most scatter/gather elements per work request.
    pub max_sge: u32,
    /// Most bytes a work request may carry inline.
    pub max_inline: u32,
    /// Every send work request is signaled.
    pub sq_sig_all: bool,
}

impl<'a> QpSpec<'a> {
    /// Defaults (256-deep queues, 4 SGEs, no inline) for `pd` and one CQ for both directions.
    pub fn new(pd: Pd, cq: &'a Cq) -> Self {
        Self {
            pd,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            max_sge: 4,
            max_inline: 0,
            sq_sig_all: false,
        }
    }
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Registered local buffers (ignored when `inline` is set).
    pub sges: &'a [Sge],
    /// Bytes copied now, at posting (at most the QP's `max_inline`); no key is needed.
    pub inline: Option<&'a [u8]>,
    /// Generate a completion.
    pub signaled: bool,
    /// Ask for a solicited event at the peer.
    pub solicited: bool,
    /// Wait for earlier READs (MRC orders a QP's operations anyway: accepted, no effect).
    pub fence: bool,
}

// ---- shared state ------------------------------------------------------------------------------------------

const ST_RESET: u8 = 0;
const ST_INIT: u8 = 1;
const ST_RTR: u8 = 2;
const ST_RTS: u8 = 3;
const ST_ERROR: u8 = 4;

fn state_code(s: QpState) -> u8 {
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

fn state_of(c: u8) -> QpState {
    match c {
        ST_RESET => QpState::Reset,
        ST_INIT => QpState::Init,
        ST_RTR => QpState::Rtr,
        ST_RTS => QpState::Rts,
        _ => QpState::Error,
    }
}

/// A send work request as it waits in a submission ring: owns its SGEs and inline bytes.
struct SendItem {
    wr_id: u64,
    op: SendOp,
    sges: SmallVec<[Sge; 4]>,
    inline: Option<Box<[u8]>>,
    signaled: bool,
    solicited: bool,
}

struct RecvItem {
    wr_id: u64,
    sges: SmallVec<[Sge; 4]>,
}

struct CqShared {
    id: CqId,
    ring: ArrayQueue<Completion>,
    fd: EventFd,
    /// 0: not armed; 1: any completion signals the fd; 2: solicited only (treated as any: a wake-up too many is
    /// harmless, one too few is not).
    armed: AtomicU8,
    /// Completions lost because the ring was full.
    overruns: AtomicU64,
}

impl CqShared {
    fn push(&self, c: Completion) -> bool {
        if self.ring.push(c).is_err() {
            self.overruns.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        true
    }

    fn notify(&self) {
        if self.armed.swap(0, Ordering::AcqRel) != 0 {
            self.fd.signal();
        }
    }
}

struct QpShared {
    qpn: u32,
    psn: u32,
    /// Receive key: the peer's QP tags what it sends here with it (spec SEC-AUTH-1).
    key: [u8; KEY_LEN],
    mtu: u32,
    caps: Caps,
    sq: ArrayQueue<SendItem>,
    rq: ArrayQueue<RecvItem>,
    state: AtomicU8,
    max_sge: u32,
    max_inline: u32,
    send_cq: Arc<CqShared>,
    recv_cq: Arc<CqShared>,
}

/// Inline bytes are copied into a host-owned registered arena, one slot per work request, reused round robin:
/// with twice the send queue's depth in slots plus one, a slot comes round again only after its request left
/// both the ring and the engine's send queue.
struct InlineArena {
    addr: u64,
    lkey: u32,
    slot: usize,
    slots: usize,
    next: usize,
}

enum ConnectReply {
    Waiting,
    Accepted(Vec<PeerPlane>, Vec<QpHalf>, Vec<u8>),
    Refused,
}

/// Where a link QP leads.
struct LinkPeer {
    peer: PeerId,
    remote_qpn: u32,
    /// The peer QP's receive key: tags the CLOSE sent to it (spec HOST-AUTH-2).
    remote_key: [u8; KEY_LEN],
}

/// A peer's CLOSE waiting for this host's QPs of the link to drain.
struct PeerClose {
    src: SocketAddrV6,
    plane: usize,
    token: u64,
    qpns: Vec<u32>,
    /// The key the CLOSE proved, kept to answer its repeats once the QPs are gone.
    key: AuthKey,
    /// Destroy the QPs and answer even if they have not drained by then.
    deadline: WallClock,
}

/// A sent ACCEPT, kept to answer a repeated CONNECT: (connector's address, token) → (plane, datagram).
type AcceptedEntry = ((SocketAddrV6, u64), (usize, Vec<u8>));

/// What the engine lock guards.
struct Core<P: PlaneIo> {
    dp: Datapath<P>,
    qps: BTreeMap<u32, Arc<QpShared>>,
    qp_list: Vec<Arc<QpShared>>,
    stalled: BTreeMap<u32, SendItem>,
    inline: BTreeMap<u32, InlineArena>,
    cqs: BTreeMap<u32, Arc<CqShared>>,
    cq_list: Vec<Arc<CqShared>>,
    listeners: ConnectQueues,
    accepted: VecDeque<AcceptedEntry>,
    connecting: BTreeMap<u64, ConnectReply>,
    resolving: BTreeMap<u64, SocketAddrV6>,
    /// Every link QP: its peer and the peer's QP (to check a CLOSE against).
    links: BTreeMap<u32, LinkPeer>,
    /// CLOSEs this host sent, by token: `true` once CLOSED came back.
    closing: BTreeMap<u64, bool>,
    /// CLOSEs from peers whose QPs are still draining here.
    peer_closes: Vec<PeerClose>,
    /// Peers' CLOSEs done here: (source, token) and the key they proved, to answer a repeat.
    closed_links: VecDeque<(SocketAddrV6, u64, AuthKey)>,
    /// Host datagrams dropped unanswered ([`HostStats::bootstrap_rejected`]).
    rejected: u64,
    /// CONNECTs refused by `poll_accept`.
    refused: u64,
    mrs: u32,
    scratch: Vec<Completion>,
    /// Manual mode: when the last busy round ended, and how long to keep spinning after it (the progress
    /// thread spins as long).
    last_busy: WallClock,
    busy_poll: StdDuration,
    /// How the fixed-window QPs share one in-flight budget ([`crate::share`]).
    share: Option<WindowShare>,
}

struct Inner<P: PlaneIo> {
    core: Mutex<Core<P>>,
    mode: ProgressMode,
    profile: QpProfile,
    max_qps: u32,
    max_mrs: u32,
    bootstrap_timeout: StdDuration,
    link_send_wr: u32,
    link_recv_wr: u32,
    local: LocalInfo,
    local_planes: Vec<PeerPlane>,
    /// The protection domain of every link's QPs (register link memory in it: [`Host::default_pd`]).
    default_pd: Pd,
    usid: bool,
    doorbell: EventFd,
    sleeping: AtomicBool,
    /// Until when (nanoseconds after `epoch`) application threads leave rounds to the progress thread: it
    /// last saw a QP with [`DEEP_INFLIGHT`] bytes in flight [`DEEP_HOLD`] before ([`Host::drive`]).
    deep_until: AtomicU64,
    /// Whether anyone called [`Host::drive`]: only then does the progress thread look at bytes in flight.
    driven: AtomicBool,
    epoch: WallClock,
    stop: AtomicBool,
    failed: AtomicBool,
    events: ArrayQueue<AsyncEvent>,
    events_fd: EventFd,
    events_dropped: AtomicU64,
    /// What the controller calls read (control.rs).
    ctl: crate::control::Ctl,
}

pub(crate) struct Handle<P: PlaneIo> {
    inner: Arc<Inner<P>>,
    thread: Mutex<Option<JoinHandle<()>>>,
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

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held leaves the state consistent between rounds: keep going.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// The host layer: one per process per node. Cheap to clone; `Send + Sync`. Dropping the last clone stops the
/// progress thread.
///
/// Generic over how datagrams travel ([`PlaneIo`]): UDP sockets ([`UdpPlanes`]) unless the host was started
/// with [`start_with`](Self::start_with) on another carrier (e.g. [`MemFabric`](crate::MemFabric) in tests).
pub struct Host<P: PlaneIo = UdpPlanes>(Arc<Handle<P>>);

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

impl Host {
    /// Binds the planes' sockets, starts the engine and (unless [`ProgressMode::Manual`]) the progress thread.
    pub fn start(cfg: HostConfig) -> Result<Host, HostError> {
        let offload = match cfg.offload {
            Some(o) => o,
            None => crate::offload::Offload::from_env()
                .map_err(HostError::Invalid)?
                .unwrap_or_default(),
        };
        let usid = cfg.node.usid_block.is_some();
        let on = offload.enabled(usid);
        // Without offload, uSID hops make UDP checksums wrong at the receiver: send none (spec WIRE-ICRC-1).
        let io = UdpPlanes::bind(&cfg.node, usid && !on, cfg.socket_buffer)?;
        let io = if on { io.with_offload()? } else { io };
        Host::start_with(cfg, io)
    }
}

impl<P: PlaneIo> Host<P> {
    /// Starts a host whose datagrams travel over `io` (which carries as many planes as `cfg.node` has; the
    /// node gives T0s and the uSID plan, `io` the addresses), the engine and (unless [`ProgressMode::Manual`])
    /// the progress thread. [`start`](Host::start) is this over the node's UDP sockets.
    pub fn start_with(mut cfg: HostConfig, io: P) -> Result<Self, HostError> {
        if cfg.profile.mtu == 0 {
            cfg.profile.mtu = io.payload_mtu();
        }
        if cfg.profile.ev_burst == 0 {
            cfg.profile.ev_burst = if io.offload() {
                crate::offload::ev_burst(
                    cfg.profile.mtu as usize + crate::pmtu::PACKET_OVERHEAD as usize,
                )
            } else {
                1
            };
        }
        let p = cfg.profile;
        let mut dp = Datapath::with_io(
            io,
            cfg.node.clone(),
            EndpointConfig::default(),
            DatapathConfig {
                socket_buffer: cfg.socket_buffer,
                // Room for the largest bootstrap datagram too (64 QPs, 16 planes, 1 KiB of app data).
                max_datagram: (p.mtu as usize + 128).max(4096),
                ..DatapathConfig::default()
            },
        )?;
        let default_pd = dp.endpoint().alloc_pd();
        let share = WindowShare::new(&p, cfg.node.plane_count(), dp.io().receive_buffer());
        let local_planes = dp.local_planes();
        let local = LocalInfo {
            planes: local_planes.iter().map(|p| p.addr).collect(),
            port: local_planes.first().map_or(0, |p| p.addr.port()),
            gid0: local_planes
                .first()
                .map_or(Ipv6Addr::UNSPECIFIED, |p| *p.addr.ip()),
        };
        let inner = Arc::new(Inner {
            core: Mutex::new(Core {
                dp,
                qps: BTreeMap::new(),
                qp_list: Vec::new(),
                stalled: BTreeMap::new(),
                inline: BTreeMap::new(),
                cqs: BTreeMap::new(),
                cq_list: Vec::new(),
                listeners: ConnectQueues::default(),
                accepted: VecDeque::new(),
                connecting: BTreeMap::new(),
                resolving: BTreeMap::new(),
                links: BTreeMap::new(),
                closing: BTreeMap::new(),
                peer_closes: Vec::new(),
                closed_links: VecDeque::new(),
                rejected: 0,
                refused: 0,
                mrs: 0,
                scratch: vec![Completion::default(); 64],
                last_busy: WallClock::now(),
                busy_poll: StdDuration::from_micros(200),
                share,
            }),
            mode: cfg.progress,
            profile: p,
            max_qps: cfg.max_qps,
            max_mrs: cfg.max_mrs,
            bootstrap_timeout: cfg.bootstrap_timeout,
            link_send_wr: cfg.link_send_wr.max(1),
            link_recv_wr: cfg.link_recv_wr.max(1),
            local,
            local_planes,
            default_pd,
            usid: cfg.node.usid_block.is_some(),
            doorbell: EventFd::new()?,
            sleeping: AtomicBool::new(false),
            deep_until: AtomicU64::new(0),
            driven: AtomicBool::new(false),
            epoch: WallClock::now(),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            events: ArrayQueue::new(EVENT_QUEUE),
            events_fd: EventFd::new()?,
            events_dropped: AtomicU64::new(0),
            ctl: Default::default(),
        });
        let thread = match cfg.progress {
            ProgressMode::Manual => None,
            mode => {
                let i = Arc::clone(&inner);
                Some(
                    std::thread::Builder::new()
                        .name("mrc-progress".into())
                        .spawn(move || run(&i, mode == ProgressMode::BusyPoll))?,
                )
            }
        };
        let host = Host(Arc::new(Handle {
            inner,
            thread: Mutex::new(thread),
            counters: Mutex::new(None),
        }));
        let capture = match cfg.capture {
            Some(c) => Some(c),
            None => crate::capture::CaptureConfig::from_env().map_err(HostError::Invalid)?,
        };
        if let Some(c) = capture {
            host.start_capture(&c)?;
        }
        let metrics = match cfg.metrics {
            Some(a) => Some(a),
            None => crate::counters::metrics_from_env()?,
        };
        if let Some(addr) = metrics {
            let server = host.serve_counters_from(addr)?;
            *lock(&host.0.counters) = Some(server);
        }
        Ok(host)
    }

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

    fn inner(&self) -> &Arc<Inner<P>> {
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

    /// One round of progress (receive, timers, transmit, completions); `true` when it did work. Meant for
    /// [`ProgressMode::Manual`]; with a progress thread it runs a round only if the thread is not in one.
    pub fn progress(&self) -> Result<bool, HostError> {
        let i = self.inner();
        if i.failed.load(Ordering::Acquire) {
            return Err(HostError::Stopped);
        }
        match i.mode {
            ProgressMode::Manual => i.round(&mut lock(&i.core)),
            _ => match i.core.try_lock() {
                Ok(mut c) => i.round(&mut c),
                Err(_) => Ok(false),
            },
        }
    }

    /// A round from an application thread that spins anyway (polling an empty CQ, posting a lone request), as
    /// [`Host::progress`], unless the progress thread saw a QP with many bytes in flight in the last
    /// 2 ms: then the caller is bandwidth-bound and its rounds (even its tries for the lock) only
    /// contend with the thread for the lock and, on few cores, the CPU (measured on 2 cores: ib_write_bw
    /// 0.6-0.8x with every empty poll running a round, 1.0-1.4x of mrc-perf without). A latency-bound caller
    /// (a small message in flight) still runs the round itself and sees its completion without waiting for the
    /// thread to wake.
    pub fn drive(&self) -> Result<bool, HostError> {
        let i = self.inner();
        if !i.driven.load(Ordering::Relaxed) {
            i.driven.store(true, Ordering::Relaxed);
        }
        if self.bandwidth_bound() {
            return Ok(false);
        }
        self.progress()
    }

    /// Whether the progress thread saw a QP with many bytes in flight in the last 2 ms (then
    /// [`Host::drive`] leaves rounds to it): a caller that spins on an empty CQ may as well sleep briefly.
    pub fn bandwidth_bound(&self) -> bool {
        let i = self.inner();
        i.mode != ProgressMode::Manual
            && (i.epoch.elapsed().as_nanos() as u64) < i.deep_until.load(Ordering::Relaxed)
    }

    /// Manual mode's application loop: one round, and when nothing has happened for a while (the datapath's
    /// busy-poll time), a sleep on the sockets and the next timer of at most `max_wait`.
    pub fn progress_wait(&self, max_wait: StdDuration) -> Result<(), HostError> {
        let i = self.inner();
        if i.mode != ProgressMode::Manual {
            std::thread::yield_now();
            return Ok(());
        }
        let mut c = lock(&i.core);
        let busy = i.round(&mut c)?;
        if busy {
            c.last_busy = WallClock::now();
            return Ok(());
        }
        if c.last_busy.elapsed() < c.busy_poll {
            return Ok(());
        }
        let sleep = c.dp.idle_timeout(mrc::time::Duration::from_nanos(
            max_wait.as_nanos().min(u128::from(u64::MAX)) as u64,
        ));
        let (fds, blocked) = (c.dp.fds(), c.dp.blocked().to_vec());
        drop(c);
        if sleep.as_nanos() > 0 {
            wait(
                &fds,
                &blocked,
                Some(StdDuration::from_nanos(sleep.as_nanos() as u64)),
            )?;
        }
        Ok(())
    }

    /// Adds a peer whose planes the application learned out of band (e.g. a perftest-style TCP exchange), so
    /// connecting to it needs no in-band resolution. A peer already known at `planes[0]` is returned as is.
    pub fn learn_peer(&self, planes: &[PeerPlane]) -> Result<(), HostError> {
        let i = self.inner();
        let mut c = lock(&i.core);
        i.peer_for(&mut c, planes).map(|_| ())
    }

    /// Read-only access to the datapath and engine under the lock, for diagnostics (per-QP and per-plane
    /// counters, EV states): tools only, never on a data path.
    pub fn inspect<R>(&self, f: impl FnOnce(&Datapath<P>) -> R) -> R {
        f(&lock(&self.inner().core).dp)
    }

    /// What a peer needs to reach this host's planes (addresses and T0s), for [`learn_peer`](Self::learn_peer)
    /// at the other end.
    pub fn local_planes(&self) -> Vec<PeerPlane> {
        self.inner().local_planes.clone()
    }

    /// Plane addresses and port.
    pub fn local(&self) -> LocalInfo {
        self.inner().local.clone()
    }

    /// Counters.
    pub fn stats(&self) -> HostStats {
        let i = self.inner();
        let c = lock(&i.core);
        HostStats {
            datapath: c.dp.stats(),
            engine: c.dp.endpoint_ref().stats(),
            events_dropped: i.events_dropped.load(Ordering::Relaxed),
            cq_overruns: c
                .cq_list
                .iter()
                .map(|q| q.overruns.load(Ordering::Relaxed))
                .sum(),
            bootstrap_rejected: c.rejected,
            connects_dropped: c.listeners.dropped,
            connects_refused: c.refused,
        }
    }

    /// The next async event, if any.
    pub fn poll_event(&self) -> Option<AsyncEvent> {
        let i = self.inner();
        let e = i.events.pop();
        if i.events.is_empty() {
            i.events_fd.drain();
            // An event pushed between the pop and the drain must keep the fd readable.
            if !i.events.is_empty() {
                i.events_fd.signal();
            }
        }
        e
    }

    /// Readable while async events are queued.
    pub fn event_fd(&self) -> RawFd {
        self.inner().events_fd.fd()
    }

    /// Takes plane `plane` down or up (link state from outside, or a test): QPs move their traffic off a down
    /// plane at once. Raises [`AsyncEvent::PortDown`] / [`AsyncEvent::PortUp`].
    pub fn set_port(&self, plane: u8, up: bool) -> Result<(), HostError> {
        let i = self.inner();
        if usize::from(plane) >= i.local.planes.len() {
            return Err(HostError::Invalid(format!("plane {plane}: no such plane")));
        }
        {
            let mut c = lock(&i.core);
            let now = c.dp.now();
            c.dp.endpoint().set_port_state(now, plane, up);
            i.port_changed(&c, plane, up);
        }
        i.kick();
        Ok(())
    }

    /// The protection domain every [`Link`]'s QPs belong to: register memory a link uses in it.
    pub fn default_pd(&self) -> Pd {
        self.inner().default_pd
    }

    /// A protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, HostError> {
        Ok(lock(&self.inner().core).dp.endpoint().alloc_pd())
    }

    /// Frees a protection domain.
    pub fn dealloc_pd(&self, pd: Pd) -> Result<(), HostError> {
        lock(&self.inner().core)
            .dp
            .endpoint()
            .dealloc_pd(pd)
            .map_err(|_| HostError::NoSuchObject("protection domain"))
    }

    /// A completion queue of `depth` entries: a lock-free ring the progress loop fills, and an eventfd.
    pub fn create_cq(&self, depth: u32) -> Result<Cq, HostError> {
        let i = self.inner();
        let sh = lock(&i.core).new_cq(depth.max(1) as usize)?;
        Ok(Cq { sh })
    }

    /// Destroys a CQ (no QP may still complete into it).
    pub fn destroy_cq(&self, cq: &Cq) -> Result<(), HostError> {
        lock(&self.inner().core).destroy_cq(&cq.sh)
    }

    /// A QP in RESET.
    pub fn create_qp(&self, spec: QpSpec<'_>) -> Result<Qp<P>, HostError> {
        let i = self.inner();
        let mut c = lock(&i.core);
        i.create_qp_locked(&mut c, &spec)
    }

    /// Destroys a QP: its outstanding work is dropped without completions, as in verbs.
    pub fn destroy_qp(&self, qp: &Qp<P>) -> Result<(), HostError> {
        let mut c = lock(&self.inner().core);
        c.destroy_qp(qp.sh.qpn)
    }

    /// Starts listening for [`connect`](Self::connect)s; the listener's [`blob`](Listener::blob) tells a peer
    /// how to reach it.
    pub fn listen(&self) -> Result<Listener<P>, HostError> {
        let i = self.inner();
        let key = random_key();
        let id = loop {
            let id = random_u64();
            let mut c = lock(&i.core);
            if id != 0 && !c.listeners.taken(id) {
                c.listeners.open(id, AuthKey::new(key));
                break id;
            }
        };
        let blob = i.blob(BlobKind::Listener { id }, key);
        Ok(Listener {
            host: Arc::clone(i),
            id,
            blob,
        })
    }

    /// Starts connecting `qps` QPs to the listener described by `blob`, sending `app` (at most 1 KiB) with the
    /// request; [`Connecting::poll`] finishes it. The request is repeated until the listener answers or
    /// [`HostConfig::bootstrap_timeout`] passes.
    pub fn connect(&self, blob: &[u8], qps: usize, app: &[u8]) -> Result<Connecting<P>, HostError> {
        let i = self.inner();
        let b = Blob::decode(blob)?;
        let BlobKind::Listener { id } = b.kind else {
            return Err(HostError::Invalid(
                "the blob names a QP, not a listener".into(),
            ));
        };
        if qps == 0 || qps > MAX_LINK_QPS {
            return Err(HostError::Invalid(format!(
                "{qps} QPs per link; give 1..={MAX_LINK_QPS}"
            )));
        }
        if app.len() > MAX_APP {
            return Err(HostError::Invalid(format!(
                "{} bytes of app data; at most {MAX_APP}",
                app.len()
            )));
        }
        if usize::from(b.planes) != i.local.planes.len() {
            return Err(HostError::Invalid(format!(
                "the listener has {} planes and this host {}; both ends need the same planes",
                b.planes,
                i.local.planes.len()
            )));
        }
        let token = random_u64();
        let mut c = lock(&i.core);
        let mut half = i.link_half(&mut c, qps)?;
        if let Err(e) = i.build_link(&mut c, &mut half, None) {
            for q in &half.qps {
                let _ = c.destroy_qp(q.qpn);
            }
            return Err(e);
        }
        // spec: HOST-AUTH-1
        let msg = seal(
            &Msg::Connect {
                token,
                listener: id,
                planes: i.local_planes.clone(),
                qps: half.halves(),
                app: app.to_vec(),
                mac: [0; AUTH_LEN],
            },
            &AuthKey::new(b.key),
        );
        let dest = i.bootstrap_dest(&c, &b);
        c.connecting.insert(token, ConnectReply::Waiting);
        let _ = c.dp.send_host(0, dest, &msg);
        drop(c);
        i.kick();
        let now = WallClock::now();
        Ok(Connecting {
            host: Arc::clone(i),
            token,
            dest,
            msg,
            half: Some(half),
            deadline: now + i.bootstrap_timeout,
            next_send: now + RETRY_FIRST,
            interval: RETRY_FIRST,
        })
    }
}

impl<P: PlaneIo> Inner<P> {
    /// A plane went down or came up (the engine already knows): the controller's EV events and the async
    /// event.
    fn port_changed(&self, c: &Core<P>, plane: u8, up: bool) {
        self.ctl.port_changed(c.dp.endpoint_ref(), plane, up);
        self.event(if up {
            AsyncEvent::PortUp { plane }
        } else {
            AsyncEvent::PortDown { plane }
        });
    }

    fn kick(&self) {
        // Pairs with the fence in the progress thread before it sleeps: either it sees our work, or we see that
        // it sleeps and ring the doorbell.
        fence(Ordering::SeqCst);
        if self.sleeping.load(Ordering::Relaxed) {
            self.doorbell.signal();
        }
    }

    fn event(&self, e: AsyncEvent) {
        if self.events.push(e).is_err() {
            self.events_dropped.fetch_add(1, Ordering::Relaxed);
        }
        self.events_fd.signal();
    }

    fn blob(&self, kind: BlobKind, key: [u8; KEY_LEN]) -> Blob {
        let p0 = self.local_planes.first().copied().unwrap_or(PeerPlane {
            addr: SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0),
            t0: 0,
        });
        Blob {
            planes: self.local_planes.len() as u8,
            usid: self.usid,
            plane0: p0.addr,
            t0: p0.t0,
            kind,
            rkey_hint: 0,
            addr_hint: 0,
            key,
        }
    }

    /// Where bootstrap datagrams for the node of `b` go: plane 0's address, through the uSID plan if any.
    fn bootstrap_dest(&self, c: &Core<P>, b: &Blob) -> SocketAddrV6 {
        if self.usid {
            c.dp.node().destination(
                0,
                &PeerPlane {
                    addr: b.plane0,
                    t0: b.t0,
                },
                0,
            )
        } else {
            b.plane0
        }
    }

    fn qp_config(&self, c: &Core<P>) -> QpConfig {
        let p = self.profile;
        QpConfig {
            icrc: p.icrc,
            // Verbs initiators keep as many READs outstanding as their send queue holds (perftest: up to 128),
            // and the engine does not hold back the ones beyond the responder's limit: with the default 16 the
            // rest are NACKed and retried until the QP timeout gives up on large READs (ib_read_bw -a, 4 MiB).
            max_read_dest: 256,
            timeout: p.ack_timeout,
            retry_linear: p.retry_cnt,
            retry_exp: p.retry_backoff,
            ev_burst: p.ev_burst.clamp(1, 64),
            ..c.dp.software_qp_config(
                p.mtu,
                p.evs_per_plane,
                software_cc(p.mtu, p.window_packets, p.rate_bps),
            )
        }
    }

    fn create_qp_locked(
        self: &Arc<Self>,
        c: &mut Core<P>,
        spec: &QpSpec<'_>,
    ) -> Result<Qp<P>, HostError> {
        if c.qps.len() >= self.max_qps as usize {
            return Err(HostError::Full("the QP table"));
        }
        let max_send_wr = spec.max_send_wr.max(1);
        let max_recv_wr = spec.max_recv_wr.max(1);
        let mut init = QpInit::new(spec.pd, spec.send_cq.sh.id);
        init.recv_cq = spec.recv_cq.sh.id;
        init.max_send_wr = max_send_wr;
        init.max_recv_wr = max_recv_wr;
        init.max_sge = spec.max_sge.max(1);
        init.sq_sig_all = spec.sq_sig_all;
        init.config = self.qp_config(c);
        let mtu = init.config.mtu;
        let qpn = c.dp.endpoint().create_qp(init)?;
        let caps = c.dp.endpoint_ref().config().caps;
        if spec.max_inline > 0 {
            let slots = 2 * max_send_wr as usize + 1;
            let slot = spec.max_inline as usize;
            match c.dp.alloc_mr(spec.pd, slots * slot, Access::LOCAL_WRITE) {
                Ok((addr, keys)) => {
                    c.inline.insert(
                        qpn,
                        InlineArena {
                            addr,
                            lkey: keys.lkey,
                            slot,
                            slots,
                            next: 0,
                        },
                    );
                }
                Err(e) => {
                    let _ = c.dp.endpoint().destroy_qp(qpn);
                    return Err(e.into());
                }
            }
        }
        let sh = Arc::new(QpShared {
            qpn,
            psn: initial_psn(),
            key: random_key(),
            mtu,
            caps,
            sq: ArrayQueue::new(max_send_wr as usize),
            rq: ArrayQueue::new(max_recv_wr as usize),
            state: AtomicU8::new(ST_RESET),
            max_sge: spec.max_sge.max(1),
            max_inline: spec.max_inline,
            send_cq: Arc::clone(&spec.send_cq.sh),
            recv_cq: Arc::clone(&spec.recv_cq.sh),
        });
        c.qps.insert(qpn, Arc::clone(&sh));
        c.qp_list.push(Arc::clone(&sh));
        c.reshare();
        Ok(Qp {
            host: Arc::clone(self),
            sh,
        })
    }

    fn modify_locked(
        &self,
        c: &mut Core<P>,
        sh: &QpShared,
        t: Transition,
    ) -> Result<(), HostError> {
        let now = c.dp.now();
        let r = c.dp.endpoint().modify_qp(sh.qpn, t, now);
        if let Some(s) = c.dp.endpoint_ref().qp_state(sh.qpn) {
            sh.state.store(state_code(s), Ordering::Release);
        }
        r.map_err(HostError::from)
    }

    /// Brings `sh` from RESET or INIT to RTS toward `remote` of `peer`.
    fn connect_locked(
        &self,
        c: &mut Core<P>,
        sh: &QpShared,
        peer: PeerId,
        remote: &QpHalf,
    ) -> Result<(), HostError> {
        if sh.state.load(Ordering::Acquire) == ST_RESET {
            self.modify_locked(
                c,
                sh,
                Transition::Init {
                    access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                },
            )?;
        }
        // INIT → RTR → RTS is the engine's one-step `connect_qp`; it reads the peer's QPN, PSN and caps.
        let now = c.dp.now();
        let mut info =
            c.dp.endpoint_ref()
                .conn_info(sh.qpn, sh.psn)
                .ok_or(HostError::NoSuchObject("QP"))?;
        info.qpn = remote.qpn;
        info.psn = remote.psn;
        info.caps = remote.caps;
        // spec: SEC-AUTH-1
        let keys = QpKeys {
            tx: AuthKey::new(remote.key),
            rx: AuthKey::new(sh.key),
        };
        c.dp.endpoint().set_qp_keys(sh.qpn, Some(keys))?;
        let r = c.dp.endpoint().connect_qp(sh.qpn, peer, &info, sh.psn, now);
        if let Some(s) = c.dp.endpoint_ref().qp_state(sh.qpn) {
            sh.state.store(state_code(s), Ordering::Release);
        }
        r.map_err(HostError::from)
    }

    /// The peer at `planes`, added to the table if new. A live peer is never rebound: planes that are partly
    /// another peer's are refused (spec HOST-PEER-1).
    // spec: HOST-PEER-1
    fn peer_for(&self, c: &mut Core<P>, planes: &[PeerPlane]) -> Result<PeerId, HostError> {
        let first = planes
            .first()
            .ok_or_else(|| HostError::Invalid("a peer with no planes".into()))?;
        if let Some(id) = c.dp.peer_at(&first.addr) {
            let same = c.dp.peer_planes(id).is_some_and(|known| {
                known.len() == planes.len()
                    && known.iter().zip(planes).all(|(k, p)| k.addr == p.addr)
            });
            if !same {
                return Err(HostError::Invalid(
                    "the peer's plane addresses differ from those of the live peer at its plane 0"
                        .into(),
                ));
            }
            return Ok(id);
        }
        Ok(c.dp.add_peer(planes.to_vec())?)
    }

    /// QPs (in INIT) and their two CQs for one side of a link.
    fn link_half(&self, c: &mut Core<P>, n: usize) -> Result<LinkHalf, HostError> {
        let pd = self.default_pd;
        let depth = |wr: u32| (n as u32).saturating_mul(wr).saturating_add(64) as usize;
        let send = c.new_cq(depth(self.link_send_wr))?;
        let recv = c.new_cq(depth(self.link_recv_wr))?;
        Ok(LinkHalf {
            pd,
            send,
            recv,
            qps: Vec::with_capacity(n),
            n,
        })
    }
}

/// One side of a link under construction.
struct LinkHalf {
    pd: Pd,
    send: Arc<CqShared>,
    recv: Arc<CqShared>,
    qps: Vec<Arc<QpShared>>,
    n: usize,
}

impl LinkHalf {
    fn halves(&self) -> Vec<QpHalf> {
        self.qps
            .iter()
            .map(|q| QpHalf {
                qpn: q.qpn,
                psn: q.psn,
                caps: q.caps,
                key: q.key,
            })
            .collect()
    }
}

impl<P: PlaneIo> Core<P> {
    /// A CQ of `depth` entries in the engine, its ring and eventfd, registered for the progress loop.
    fn new_cq(&mut self, depth: usize) -> Result<Arc<CqShared>, HostError> {
        let fd = EventFd::new()?;
        let id = self.dp.endpoint().create_cq(depth);
        let sh = Arc::new(CqShared {
            id,
            ring: ArrayQueue::new(depth),
            fd,
            armed: AtomicU8::new(0),
            overruns: AtomicU64::new(0),
        });
        self.cqs.insert(id.id(), Arc::clone(&sh));
        self.cq_list.push(Arc::clone(&sh));
        Ok(sh)
    }

    /// Whether QP `qpn` has nothing left to send or to have acknowledged (or no longer exists).
    fn quiet(&self, qpn: u32) -> bool {
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
    fn destroy_cq(&mut self, cq: &Arc<CqShared>) -> Result<(), HostError> {
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
    fn reshare(&mut self) {
        let Some(s) = self.share else { return };
        let window = s.window(self.qps.len());
        for &qpn in self.qps.keys() {
            // QPs the controller moved to NSCC size their own windows: refused, and that is right.
            let _ = self.dp.endpoint().set_qp_window(qpn, window);
        }
    }

    fn destroy_qp(&mut self, qpn: u32) -> Result<(), HostError> {
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

// ---- the progress loop ---------------------------------------------------------------------------------------

fn run<P: PlaneIo>(i: &Arc<Inner<P>>, busy_poll: bool) {
    let mut idle = 0u32;
    let spin_for = lock(&i.core).busy_poll;
    let mut last_busy = WallClock::now();
    let mut rounds = 0u32;
    while !i.stop.load(Ordering::Acquire) {
        let busy = {
            let mut c = lock(&i.core);
            let busy = match i.round(&mut c) {
                Ok(b) => b,
                Err(_) => {
                    i.failed.store(true, Ordering::Release);
                    return;
                }
            };
            rounds = rounds.wrapping_add(1);
            if i.driven.load(Ordering::Relaxed) && (rounds.is_multiple_of(DEEP_EVERY) || !busy) {
                let c = &mut *c;
                let ep = c.dp.endpoint();
                let deep = c
                    .qp_list
                    .iter()
                    .any(|q| ep.qp_transport(q.qpn).is_some_and(|t| t.2 >= DEEP_INFLIGHT));
                if deep {
                    let until = i.epoch.elapsed() + DEEP_HOLD;
                    i.deep_until
                        .store(until.as_nanos() as u64, Ordering::Relaxed);
                }
            }
            busy
        };
        if busy {
            idle = 0;
            last_busy = WallClock::now();
            continue;
        }
        if busy_poll {
            std::hint::spin_loop();
            continue;
        }
        idle += 1;
        // Spin (yielding) for the datapath's busy-poll time after the last busy round, as mrc-perf's poll mode
        // does: a reply due within it then needs no wake-up from ppoll.
        if idle < SPIN_ROUNDS || last_busy.elapsed() < spin_for {
            std::thread::yield_now();
            continue;
        }
        let (fds, blocked, sleep) = {
            let c = lock(&i.core);
            i.sleeping.store(true, Ordering::Relaxed);
            // Pairs with `kick`: a post after this fence sees `sleeping`; one before it is seen here.
            fence(Ordering::SeqCst);
            if c.qp_list
                .iter()
                .any(|q| !q.sq.is_empty() || !q.rq.is_empty())
            {
                i.sleeping.store(false, Ordering::Relaxed);
                continue;
            }
            let mut fds = c.dp.fds();
            fds.push(i.doorbell.fd());
            (
                fds,
                c.dp.blocked().to_vec(),
                c.dp.idle_timeout(mrc::time::Duration::from_nanos(MAX_SLEEP.as_nanos() as u64)),
            )
        };
        if sleep.as_nanos() > 0 {
            let _ = wait(
                &fds,
                &blocked,
                Some(StdDuration::from_nanos(sleep.as_nanos() as u64)),
            );
        }
        i.sleeping.store(false, Ordering::Relaxed);
        i.doorbell.drain();
        idle = 0;
    }
}

impl<P: PlaneIo> Inner<P> {
    /// One round: submissions into the engine, sockets and timers, bootstrap datagrams, completions out to the
    /// rings, engine events out to the event queue.
    fn round(&self, c: &mut Core<P>) -> Result<bool, HostError> {
        let mut busy = self.drain_submissions(c);
        busy |= c.dp.progress()?;
        for (plane, up) in c.dp.take_port_changes() {
            self.port_changed(c, plane, up);
        }
        busy |= self.host_datagrams(c);
        busy |= self.peer_closes(c);
        busy |= deliver_completions(c);
        busy |= self.engine_events(c);
        // Requests posted while this round read the sockets (an application answering data the round just
        // landed, or a completion it delivered) go out now rather than a round later.
        if self.drain_submissions(c) {
            c.dp.transmit()?;
            busy = true;
        }
        Ok(busy)
    }

    fn drain_submissions(&self, c: &mut Core<P>) -> bool {
        let list = std::mem::take(&mut c.qp_list);
        let mut any = false;
        for q in &list {
            // Receives first: a WRITE_WITH_IMM in this round's datagrams may need one.
            while let Some(r) = q.rq.pop() {
                any = true;
                let wr = RecvWr {
                    wr_id: r.wr_id,
                    sges: &r.sges,
                };
                if let Err(e) = c.dp.endpoint().post_recv(q.qpn, &wr) {
                    let c2 = failed_completion(q, r.wr_id, WcOpcode::Recv, e);
                    if !q.recv_cq.push(c2) {
                        self.event(AsyncEvent::CqError {
                            cq: q.recv_cq.id.id(),
                        });
                    }
                    q.recv_cq.notify();
                }
            }
            let mut next = c.stalled.remove(&q.qpn);
            loop {
                let item = match next.take() {
                    Some(it) => it,
                    None => match q.sq.pop() {
                        Some(it) => it,
                        None => break,
                    },
                };
                any = true;
                if let Some(back) = self.post_one(c, q, item) {
                    c.stalled.insert(q.qpn, back);
                    break;
                }
            }
        }
        c.qp_list = list;
        any
    }

    /// Hands one request to the engine; gives it back when the engine's queue is full (retry next round).
    fn post_one(&self, c: &mut Core<P>, q: &QpShared, item: SendItem) -> Option<SendItem> {
        let mut inline_sge = [Sge {
            addr: 0,
            len: 0,
            lkey: 0,
        }];
        let sges: &[Sge] = match &item.inline {
            // Without an arena the QP allows no inline bytes, so `bytes` is empty (checked at posting).
            Some(bytes) => match c.inline.get_mut(&q.qpn) {
                Some(a) if !bytes.is_empty() => {
                    let off = a.next * a.slot;
                    a.next = (a.next + 1) % a.slots;
                    let (base, lkey) = (a.addr, a.lkey);
                    if let Some(buf) = c.dp.mem.bytes_mut(base) {
                        buf[off..off + bytes.len()].copy_from_slice(bytes);
                    }
                    inline_sge[0] = Sge {
                        addr: base + off as u64,
                        len: bytes.len() as u32,
                        lkey,
                    };
                    &inline_sge
                }
                _ => &[],
            },
            None => &item.sges,
        };
        let wr = SendWr {
            wr_id: item.wr_id,
            op: item.op,
            sges,
            signaled: item.signaled,
            solicited: item.solicited,
        };
        let now = c.dp.now();
        match c.dp.endpoint().post_send(q.qpn, &wr, now) {
            Ok(()) => None,
            Err(PostError::QueueFull | PostError::WimmCap) => Some(item),
            Err(e) => {
                let comp = failed_completion(q, item.wr_id, opcode_of(&item.op), e);
                if !q.send_cq.push(comp) {
                    self.event(AsyncEvent::CqError {
                        cq: q.send_cq.id.id(),
                    });
                }
                q.send_cq.notify();
                None
            }
        }
    }

    fn host_datagrams(&self, c: &mut Core<P>) -> bool {
        let ds = c.dp.take_host_datagrams();
        let any = !ds.is_empty();
        for d in ds {
            let Ok(msg) = Msg::decode(&d.bytes) else {
                continue;
            };
            match msg {
                Msg::ResolveRequest { token } => {
                    let reply = Msg::ResolveReply {
                        token,
                        planes: self.local_planes.clone(),
                    }
                    .encode();
                    let _ = c.dp.send_host(d.plane, d.src, &reply);
                }
                Msg::ResolveReply { token, planes } => {
                    // spec: HOST-DGRAM-3
                    if c.resolving.remove(&token).is_some() {
                        let _ = self.peer_for(c, &planes);
                    }
                }
                Msg::Connect {
                    token,
                    listener,
                    planes,
                    qps,
                    app,
                    ..
                } => {
                    // Nothing is answered, queued or looked up further before the request proves the key of
                    // the listener it names (spec HOST-AUTH-1).
                    // spec: HOST-AUTH-1
                    let open = match c.listeners.lookup(listener) {
                        Some(Known::Open(k)) if proves(&d.bytes, &k) => true,
                        Some(Known::Closed(k)) if proves(&d.bytes, &k) => false,
                        _ => {
                            c.rejected += 1;
                            continue;
                        }
                    };
                    if !open {
                        let refuse = Msg::Refuse { token, reason: 1 }.encode();
                        let _ = c.dp.send_host(d.plane, d.src, &refuse);
                        continue;
                    }
                    let key = (d.src, token);
                    // spec: HOST-DGRAM-4
                    if let Some((_, (plane, bytes))) = c.accepted.iter().find(|(k, _)| *k == key) {
                        let (plane, bytes) = (*plane, bytes.clone());
                        let _ = c.dp.send_host(plane, d.src, &bytes);
                        continue;
                    }
                    let p = PendingConnect::new(d.src, d.plane, token, (planes, qps, app));
                    c.listeners.push(listener, p);
                }
                Msg::Accept {
                    token,
                    planes,
                    qps,
                    app,
                } => {
                    if let Some(r @ ConnectReply::Waiting) = c.connecting.get_mut(&token) {
                        *r = ConnectReply::Accepted(planes, qps, app);
                    }
                }
                Msg::Refuse { token, .. } => {
                    if let Some(r @ ConnectReply::Waiting) = c.connecting.get_mut(&token) {
                        *r = ConnectReply::Refused;
                    }
                }
                Msg::Close { token, pairs, .. } => {
                    self.peer_close(c, &d, token, &pairs);
                }
                Msg::Closed { token } => {
                    if let Some(done) = c.closing.get_mut(&token) {
                        *done = true;
                    }
                }
            }
        }
        any
    }

    /// A peer's CLOSE: only for QPs of a link to that peer, named with their remote QPNs, and only when it proves
    /// the receive key of the first QP it names here; otherwise it is dropped unanswered (spec HOST-DGRAM-6,
    /// HOST-AUTH-2).
    // spec: HOST-DGRAM-6
    // spec: HOST-AUTH-2
    fn peer_close(&self, c: &mut Core<P>, d: &HostDatagram, token: u64, pairs: &[(u32, u32)]) {
        let (src, plane) = (d.src, d.plane);
        let sender = c.dp.peer_at(&src);
        let ours = |c: &Core<P>, theirs: u32, ours: u32| {
            c.links
                .get(&ours)
                .is_some_and(|l| Some(l.peer) == sender && l.remote_qpn == theirs)
        };
        let key = pairs
            .first()
            .filter(|&&(t, o)| ours(c, t, o))
            .and_then(|&(_, o)| c.qps.get(&o))
            .map(|q| AuthKey::new(q.key));
        let Some(key) = key.filter(|k| proves(&d.bytes, k)) else {
            // An earlier CLOSED may have been lost: a repeat of a CLOSE done here proves the key it had.
            let done = c
                .closed_links
                .iter()
                .any(|(s, t, k)| *s == src && *t == token && proves(&d.bytes, k));
            if done {
                let _ = c.dp.send_host(plane, src, &Msg::Closed { token }.encode());
            } else {
                c.rejected += 1;
            }
            return;
        };
        let mine: Vec<u32> = pairs
            .iter()
            .filter(|&&(t, o)| ours(c, t, o))
            .map(|&(_, o)| o)
            .collect();
        if !c
            .peer_closes
            .iter()
            .any(|p| p.token == token && p.src == src)
        {
            c.peer_closes.push(PeerClose {
                src,
                plane,
                token,
                qpns: mine,
                key,
                deadline: WallClock::now() + self.bootstrap_timeout,
            });
        }
    }

    /// Peers' CLOSEs whose QPs have drained here (or ran out of time): destroy the QPs, tell the application,
    /// answer CLOSED.
    fn peer_closes(&self, c: &mut Core<P>) -> bool {
        if c.peer_closes.is_empty() {
            return false;
        }
        let now = WallClock::now();
        let mut any = false;
        let mut k = 0;
        while k < c.peer_closes.len() {
            let p = &c.peer_closes[k];
            if now < p.deadline && !p.qpns.iter().all(|&q| c.quiet(q)) {
                k += 1;
                continue;
            }
            let p = c.peer_closes.swap_remove(k);
            for &qpn in &p.qpns {
                if c.destroy_qp(qpn).is_ok() {
                    self.event(AsyncEvent::LinkClosed { qpn });
                }
            }
            let _ =
                c.dp.send_host(p.plane, p.src, &Msg::Closed { token: p.token }.encode());
            if c.closed_links.len() >= CLOSED_LINKS {
                c.closed_links.pop_front();
            }
            c.closed_links.push_back((p.src, p.token, p.key));
            any = true;
        }
        any
    }

    fn engine_events(&self, c: &mut Core<P>) -> bool {
        let mut any = false;
        while let Some(e) = c.dp.endpoint().poll_event() {
            any = true;
            match e {
                Event::QpError { qpn } => {
                    if let Some(q) = c.qps.get(&qpn) {
                        q.state.store(ST_ERROR, Ordering::Release);
                    }
                    self.event(AsyncEvent::QpFatal { qpn });
                }
                Event::CqError { cq } => self.event(AsyncEvent::CqError { cq: cq.id() }),
                Event::EvChanged { qpn, change } => {
                    self.ctl.ev_changed(qpn, change);
                    let retired = matches!(change.to, EvState::AssumedBad | EvState::Denied);
                    let was = matches!(change.from, EvState::AssumedBad | EvState::Denied);
                    if retired && !was {
                        self.event(AsyncEvent::PathRetired {
                            qpn,
                            plane: change.plane,
                            ev: change.ev,
                        });
                    } else if was && !retired {
                        self.event(AsyncEvent::PathRestored {
                            qpn,
                            plane: change.plane,
                            ev: change.ev,
                        });
                    }
                }
                Event::EvProbeReply { peer, ev, rtt, .. } => self.ctl.probe_answer(peer, ev, rtt),
                Event::PortStatusReply { peer, ev, rtt, .. } => {
                    self.ctl.port_status_answer(peer, ev, rtt);
                }
                _ => {}
            }
        }
        any
    }
}

/// Moves the engine's completions into the CQs' rings (as much as each ring has room for: the rest waits in the
/// engine's queue, whose depth then bounds it as verbs does).
fn deliver_completions<P: PlaneIo>(c: &mut Core<P>) -> bool {
    let mut any = false;
    for q in &c.cq_list {
        let mut delivered = 0;
        loop {
            let room = q.ring.capacity() - q.ring.len();
            if room == 0 {
                break;
            }
            let want = room.min(c.scratch.len());
            let n = c.dp.endpoint().poll_cq(q.id, &mut c.scratch[..want]);
            for comp in &c.scratch[..n] {
                q.push(*comp);
            }
            delivered += n;
            if n < want {
                break;
            }
        }
        if delivered > 0 {
            any = true;
            q.notify();
        }
    }
    any
}

fn set_retry<P: PlaneIo>(c: &mut Core<P>, qpn: u32, r: QpRetry) -> Result<(), HostError> {
    c.dp.endpoint()
        .set_qp_retry(qpn, r.ack_timeout, r.retry_cnt, r.retry_backoff)
        .map_err(HostError::from)
}

fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Write { .. } | SendOp::WriteImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        _ => WcOpcode::Send,
    }
}

/// The completion of a request the engine refused after it left the ring (what a NIC reports for a bad SGE).
fn failed_completion(q: &QpShared, wr_id: u64, opcode: WcOpcode, e: PostError) -> Completion {
    let status = match e {
        PostError::LocalAccess(_) => WcStatus::LocProtErr,
        PostError::TooManySge | PostError::TooLong => WcStatus::LocLenErr,
        PostError::BadState(QpState::Error) => WcStatus::WrFlushErr,
        _ => WcStatus::LocQpOpErr,
    };
    Completion {
        wr_id,
        status,
        opcode,
        byte_len: 0,
        imm: None,
        qpn: q.qpn,
    }
}

fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    if getrandom::fill(&mut b).is_err() {
        return u64::from(initial_psn()) << 32 | u64::from(initial_psn());
    }
    u64::from_ne_bytes(b)
}

// ---- CQs and QPs -----------------------------------------------------------------------------------------------

/// A completion queue: a lock-free ring the progress loop fills, and an eventfd for completion channels.
#[derive(Clone)]
pub struct Cq {
    sh: Arc<CqShared>,
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
    /// [`ProgressMode::Manual`] call [`Host::progress`] to fill the ring).
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

    /// Arms the CQ: the next completion makes [`fd`](Self::fd) readable (`solicited_only` is treated as any).
    pub fn req_notify(&self, solicited_only: bool) {
        self.sh
            .armed
            .store(if solicited_only { 2 } else { 1 }, Ordering::Release);
        // A completion that arrived before arming would otherwise wait for the next one.
        if !self.sh.ring.is_empty() {
            self.sh.notify();
        }
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

/// A queue pair. Posting goes through a lock-free submission ring that the progress loop drains.
pub struct Qp<P: PlaneIo = UdpPlanes> {
    host: Arc<Inner<P>>,
    sh: Arc<QpShared>,
}

impl<P: PlaneIo> Clone for Qp<P> {
    fn clone(&self) -> Self {
        Qp {
            host: Arc::clone(&self.host),
            sh: Arc::clone(&self.sh),
        }
    }
}

impl<P: PlaneIo> std::fmt::Debug for Qp<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.sh.qpn)
            .field("state", &self.state())
            .finish()
    }
}

impl<P: PlaneIo> Qp<P> {
    /// The QP's number.
    pub fn qpn(&self) -> u32 {
        self.sh.qpn
    }

    /// The first PSN this QP sends (what a verbs program passes as `sq_psn`, and the peer as `rq_psn`).
    pub fn psn(&self) -> u32 {
        self.sh.psn
    }

    /// The state (as of the last transition or progress round).
    pub fn state(&self) -> QpState {
        state_of(self.sh.state.load(Ordering::Acquire))
    }

    /// One verbs-style transition. RTR resolves the peer's planes in band (asking `plane0:port` once; the answer
    /// is cached), which may take a round trip.
    pub fn modify(&self, t: QpTransition) -> Result<(), HostError> {
        let i = &self.host;
        let mut retry = None;
        let t = match t {
            QpTransition::Init { access } => Transition::Init { access },
            QpTransition::Rtr {
                peer,
                remote_qpn,
                rq_psn,
                mtu: _,
            } => {
                let peer = i.resolve(SocketAddrV6::new(peer.plane0, peer.port, 0, 0), 0)?;
                Transition::Rtr {
                    peer,
                    remote_qpn,
                    rq_psn,
                    remote_caps: self.sh.caps,
                }
            }
            QpTransition::Rts {
                sq_psn,
                timeout,
                retry_cnt,
                ..
            } => {
                retry = Some(QpRetry::from_verbs(timeout, retry_cnt));
                Transition::Rts { sq_psn }
            }
            QpTransition::Error => Transition::Error,
            QpTransition::Reset => Transition::Reset,
        };
        let reset = matches!(t, Transition::Reset);
        let mut c = lock(&i.core);
        let mut r = i.modify_locked(&mut c, &self.sh, t);
        if let (Ok(()), Some(q)) = (&r, retry) {
            r = set_retry(&mut c, self.sh.qpn, q);
        }
        if reset {
            c.stalled.remove(&self.sh.qpn);
            while self.sh.sq.pop().is_some() {}
            while self.sh.rq.pop().is_some() {}
        }
        drop(c);
        i.kick();
        r
    }

    /// Connects this QP to the QP a peer's [`blob`](Self::blob) describes: RESET/INIT → RTR → RTS in one step.
    pub fn connect(&self, remote: &Blob) -> Result<(), HostError> {
        let i = &self.host;
        let BlobKind::Qp { qpn, psn, caps, .. } = remote.kind else {
            return Err(HostError::Invalid(
                "the blob names a listener, not a QP".into(),
            ));
        };
        let dest = i.bootstrap_dest(&lock(&i.core), remote);
        let peer = i.resolve_at(remote.plane0, dest)?;
        let mut c = lock(&i.core);
        let half = QpHalf {
            qpn,
            psn,
            caps,
            key: remote.key,
        };
        let r = i.connect_locked(&mut c, &self.sh, peer, &half);
        drop(c);
        i.kick();
        r
    }

    /// Changes this QP's local-ACK timeout and retry counts, in any state (they apply from the next time the
    /// QP timeout is armed). `EINVAL` for a timeout above 31.
    pub fn set_retry(&self, retry: QpRetry) -> Result<(), HostError> {
        set_retry(&mut lock(&self.host.core), self.sh.qpn, retry)
    }

    /// This QP's local-ACK timeout and retry counts, as the engine has them.
    pub fn retry(&self) -> Option<QpRetry> {
        let c = lock(&self.host.core);
        c.dp.endpoint_ref().qp_config(self.sh.qpn).map(|q| QpRetry {
            ack_timeout: q.timeout,
            retry_cnt: q.retry_linear,
            retry_backoff: q.retry_exp,
        })
    }

    /// What a peer needs to connect to this QP (≤ 128 bytes once encoded).
    pub fn blob(&self) -> Blob {
        self.host.blob(
            BlobKind::Qp {
                qpn: self.sh.qpn,
                psn: self.sh.psn,
                caps: self.sh.caps,
                mtu: self.sh.mtu,
            },
            self.sh.key,
        )
    }

    /// Posts a send work request without waiting for the engine. Queue full → `ENOMEM`; QP in RESET, INIT or
    /// RTR → `EINVAL` (verbs semantics). Errors the engine finds later (keys, bounds) come back as completions
    /// with an error status, as from a NIC.
    pub fn post_send(&self, wr: &SendRequest<'_>) -> Result<(), HostError> {
        let s = self.state();
        if matches!(s, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(HostError::BadState(s));
        }
        let inline = match wr.inline {
            Some(b) => {
                if b.len() > self.sh.max_inline as usize {
                    return Err(HostError::Invalid(format!(
                        "{} inline bytes; the QP allows {}",
                        b.len(),
                        self.sh.max_inline
                    )));
                }
                Some(Box::<[u8]>::from(b))
            }
            None => {
                if wr.sges.len() > self.sh.max_sge as usize {
                    return Err(HostError::Post(PostError::TooManySge));
                }
                None
            }
        };
        let item = SendItem {
            wr_id: wr.wr_id,
            op: wr.op,
            sges: if inline.is_some() {
                SmallVec::new()
            } else {
                SmallVec::from_slice(wr.sges)
            },
            inline,
            signaled: wr.signaled,
            solicited: wr.solicited,
        };
        self.sh
            .sq
            .push(item)
            .map_err(|_| HostError::Full("the send queue"))?;
        self.host.kick();
        Ok(())
    }

    /// Posts a receive (an empty `sges` takes a WRITE_WITH_IMM's notification only).
    pub fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<(), HostError> {
        let s = self.state();
        if s == QpState::Reset {
            return Err(HostError::BadState(s));
        }
        if sges.len() > self.sh.max_sge as usize {
            return Err(HostError::Post(PostError::TooManySge));
        }
        self.sh
            .rq
            .push(RecvItem {
                wr_id,
                sges: SmallVec::from_slice(sges),
            })
            .map_err(|_| HostError::Full("the receive queue"))?;
        self.host.kick();
        Ok(())
    }
}

impl<P: PlaneIo> Inner<P> {
    /// The peer whose plane 0 is `plane0`, asking it for its planes if unknown (verbs RTR).
    fn resolve(&self, plane0: SocketAddrV6, t0: u16) -> Result<PeerId, HostError> {
        let dest = if self.usid {
            let c = lock(&self.core);
            c.dp.node()
                .destination(0, &PeerPlane { addr: plane0, t0 }, 0)
        } else {
            plane0
        };
        self.resolve_at(plane0, dest)
    }

    fn resolve_at(&self, plane0: SocketAddrV6, dest: SocketAddrV6) -> Result<PeerId, HostError> {
        let token = random_u64();
        let start = WallClock::now();
        let mut next = start;
        let mut interval = RETRY_FIRST;
        loop {
            {
                let mut c = lock(&self.core);
                if let Some(id) = c.dp.peer_at(&plane0) {
                    c.resolving.remove(&token);
                    return Ok(id);
                }
                let now = WallClock::now();
                if now.duration_since(start) > self.bootstrap_timeout {
                    c.resolving.remove(&token);
                    return Err(HostError::Timeout("peer resolution (RESOLVE)"));
                }
                if now >= next {
                    c.resolving.insert(token, plane0);
                    let _ =
                        c.dp.send_host(0, dest, &Msg::ResolveRequest { token }.encode());
                    next = now + interval;
                    interval = (interval * 2).min(StdDuration::from_secs(1));
                }
                if self.mode == ProgressMode::Manual {
                    self.round(&mut c)?;
                    continue;
                }
            }
            self.kick();
            std::thread::sleep(StdDuration::from_micros(200));
        }
    }
}

// ---- bootstrap: listeners, connections, links ---------------------------------------------------------------------

/// Waits for connection requests; [`blob`](Self::blob) tells connectors where.
pub struct Listener<P: PlaneIo = UdpPlanes> {
    host: Arc<Inner<P>>,
    id: u64,
    blob: Blob,
}

impl<P: PlaneIo> std::fmt::Debug for Listener<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("id", &self.id).finish()
    }
}

impl<P: PlaneIo> Listener<P> {
    /// What a connector passes to [`Host::connect`] (≤ 128 bytes).
    pub fn blob(&self) -> Vec<u8> {
        self.blob.encode()
    }

    /// Accepts one waiting connection request, answering `reply` (at most 1 KiB): the link (QPs in RTS) and the
    /// connector's app data. `Ok(None)` when nobody is waiting.
    pub fn poll_accept(&mut self, reply: &[u8]) -> Result<Option<Accepted<P>>, HostError> {
        let i = &self.host;
        if reply.len() > MAX_APP {
            return Err(HostError::Invalid(format!(
                "{} bytes of reply; at most {MAX_APP}",
                reply.len()
            )));
        }
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        // A request this host cannot take is refused and the next one served (spec HOST-QUEUE-1).
        while let Some(p) = c.listeners.pop(self.id) {
            let refuse = |c: &mut Core<P>| {
                c.refused += 1;
                let m = Msg::Refuse {
                    token: p.token,
                    reason: 2,
                }
                .encode();
                let _ = c.dp.send_host(p.plane, p.src, &m);
            };
            if p.planes.len() != i.local_planes.len() {
                refuse(&mut c);
                continue;
            }
            let peer = match i.peer_for(&mut c, &p.planes) {
                Ok(peer) => peer,
                Err(_) => {
                    refuse(&mut c);
                    continue;
                }
            };
            let mut half = i.link_half(&mut c, p.qps.len())?;
            let link = match i.build_link(&mut c, &mut half, Some((peer, &p.qps))) {
                Ok(l) => l,
                Err(e) => {
                    for q in &half.qps {
                        let _ = c.destroy_qp(q.qpn);
                    }
                    refuse(&mut c);
                    return Err(e);
                }
            };
            let accept = Msg::Accept {
                token: p.token,
                planes: i.local_planes.clone(),
                qps: half.halves(),
                app: reply.to_vec(),
            }
            .encode();
            let _ = c.dp.send_host(p.plane, p.src, &accept);
            if c.accepted.len() >= ACCEPT_CACHE {
                c.accepted.pop_front();
            }
            c.accepted.push_back(((p.src, p.token), (p.plane, accept)));
            drop(c);
            i.kick();
            return Ok(Some((link, p.app)));
        }
        Ok(None)
    }
}

impl<P: PlaneIo> Drop for Listener<P> {
    fn drop(&mut self) {
        lock(&self.host.core).listeners.close(self.id);
    }
}

impl<P: PlaneIo> Inner<P> {
    /// Creates the half's QPs (if not yet) and, with `remote`, connects them; returns the link.
    fn build_link(
        self: &Arc<Self>,
        c: &mut Core<P>,
        half: &mut LinkHalf,
        remote: Option<(PeerId, &[QpHalf])>,
    ) -> Result<Link<P>, HostError> {
        let send_cq = Cq {
            sh: Arc::clone(&half.send),
        };
        let recv_cq = Cq {
            sh: Arc::clone(&half.recv),
        };
        let n = remote.map_or(half.n, |(_, r)| r.len());
        while half.qps.len() < n {
            let spec = QpSpec {
                pd: half.pd,
                send_cq: &send_cq,
                recv_cq: &recv_cq,
                max_send_wr: self.link_send_wr,
                max_recv_wr: self.link_recv_wr,
                max_sge: 4,
                max_inline: 0,
                sq_sig_all: false,
            };
            let q = self.create_qp_locked(c, &spec)?;
            self.modify_locked(
                c,
                &q.sh,
                Transition::Init {
                    access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                },
            )?;
            half.qps.push(q.sh);
        }
        if let Some((peer, r)) = remote {
            // spec: HOST-DGRAM-5
            for (q, r) in half.qps.iter().zip(r) {
                self.connect_locked(c, q, peer, r)?;
                c.links.insert(
                    q.qpn,
                    LinkPeer {
                        peer,
                        remote_qpn: r.qpn,
                        remote_key: r.key,
                    },
                );
            }
        }
        Ok(Link {
            qps: half
                .qps
                .iter()
                .map(|q| Qp {
                    host: Arc::clone(self),
                    sh: Arc::clone(q),
                })
                .collect(),
            send_cq,
            recv_cq,
            pd: half.pd,
        })
    }
}

/// A connection being set up by [`Host::connect`].
pub struct Connecting<P: PlaneIo = UdpPlanes> {
    host: Arc<Inner<P>>,
    token: u64,
    dest: SocketAddrV6,
    msg: Vec<u8>,
    half: Option<LinkHalf>,
    deadline: WallClock,
    next_send: WallClock,
    interval: StdDuration,
}

impl<P: PlaneIo> std::fmt::Debug for Connecting<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connecting")
            .field("dest", &self.dest)
            .finish_non_exhaustive()
    }
}

impl<P: PlaneIo> Connecting<P> {
    /// The link (QPs in RTS) and the listener's reply once it answered; `Ok(None)` while waiting. A listener
    /// closed lately → `ECONNREFUSED`; no answer within the bootstrap timeout → `ETIMEDOUT` (a listener that
    /// never existed answers nothing: spec HOST-AUTH-1).
    pub fn poll(&mut self) -> Result<Option<Accepted<P>>, HostError> {
        let i = Arc::clone(&self.host);
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        let Some(half) = self.half.as_mut() else {
            return Err(HostError::Invalid(
                "this connection already finished".into(),
            ));
        };
        match c.connecting.get_mut(&self.token) {
            Some(ConnectReply::Accepted(..)) => {
                let Some(ConnectReply::Accepted(planes, remote, app)) =
                    c.connecting.remove(&self.token)
                else {
                    unreachable!("matched above");
                };
                if remote.len() != half.qps.len() {
                    return Err(HostError::Invalid(format!(
                        "the listener answered with {} QPs for {}",
                        remote.len(),
                        half.qps.len()
                    )));
                }
                let peer = i.peer_for(&mut c, &planes)?;
                let Some(mut half) = self.half.take() else {
                    return Err(HostError::Invalid(
                        "this connection already finished".into(),
                    ));
                };
                let link = i.build_link(&mut c, &mut half, Some((peer, &remote)))?;
                drop(c);
                i.kick();
                Ok(Some((link, app)))
            }
            Some(ConnectReply::Refused) => {
                c.connecting.remove(&self.token);
                Err(HostError::Refused)
            }
            Some(ConnectReply::Waiting) => {
                let now = WallClock::now();
                if now >= self.deadline {
                    c.connecting.remove(&self.token);
                    return Err(HostError::Timeout("connect (no ACCEPT from the listener)"));
                }
                if now >= self.next_send {
                    let _ = c.dp.send_host(0, self.dest, &self.msg);
                    self.interval = (self.interval * 2).min(StdDuration::from_secs(1));
                    self.next_send = now + self.interval;
                }
                Ok(None)
            }
            None => Err(HostError::Invalid(
                "this connection already finished".into(),
            )),
        }
    }
}

impl<P: PlaneIo> Drop for Connecting<P> {
    fn drop(&mut self) {
        let mut c = lock(&self.host.core);
        c.connecting.remove(&self.token);
        if let Some(h) = self.half.take() {
            for q in h.qps {
                let _ = c.destroy_qp(q.qpn);
            }
        }
    }
}

/// A link that came up, with the application bytes the other side sent with it.
pub type Accepted<P = UdpPlanes> = (Link<P>, Vec<u8>);

/// A connected set of QPs toward one peer (all in RTS), with their own send and receive CQs.
#[derive(Debug)]
pub struct Link<P: PlaneIo = UdpPlanes> {
    qps: Vec<Qp<P>>,
    send_cq: Cq,
    recv_cq: Cq,
    pd: Pd,
}

impl<P: PlaneIo> Link<P> {
    /// The QPs, in the order both sides agree on.
    pub fn qps(&self) -> &[Qp<P>] {
        &self.qps
    }

    /// Where the link's send completions go.
    pub fn send_cq(&self) -> &Cq {
        &self.send_cq
    }

    /// Where the link's receive completions go.
    pub fn recv_cq(&self) -> &Cq {
        &self.recv_cq
    }

    /// The protection domain memory for this link must be registered in.
    pub fn pd(&self) -> Pd {
        self.pd
    }

    /// The index in [`qps`](Self::qps) of QP `qpn` (to map a completion back to its QP).
    pub fn qp_index(&self, qpn: u32) -> Option<usize> {
        self.qps.iter().position(|q| q.qpn() == qpn)
    }

    /// Closes the link gracefully; poll the returned [`Closing`] until it says done. This side's QPs drain
    /// first (everything posted is sent and acknowledged), then a CLOSE tells the peer, whose QPs drain in turn
    /// and are destroyed ([`AsyncEvent::LinkClosed`] there), and its CLOSED lets this side destroy its QPs and
    /// the link's CQs. The peer sees a clean close, never a retry timeout. Everything must be done within the
    /// host's bootstrap timeout; after it the QPs are destroyed anyway and `poll` says `ETIMEDOUT`.
    pub fn close(self) -> Closing<P> {
        let host = self.qps.first().map(|q| Arc::clone(&q.host));
        let deadline = WallClock::now()
            + host
                .as_ref()
                .map_or(StdDuration::ZERO, |h| h.bootstrap_timeout);
        Closing {
            host,
            qpns: self.qps.iter().map(Qp::qpn).collect(),
            cqs: [Arc::clone(&self.send_cq.sh), Arc::clone(&self.recv_cq.sh)],
            token: random_u64(),
            deadline,
            waiting: None,
            done: false,
        }
    }
}

/// A link being closed ([`Link::close`]).
pub struct Closing<P: PlaneIo = UdpPlanes> {
    host: Option<Arc<Inner<P>>>,
    qpns: Vec<u32>,
    cqs: [Arc<CqShared>; 2],
    token: u64,
    deadline: WallClock,
    /// Once CLOSE is out: (destination, datagram, next resend, interval).
    waiting: Option<(SocketAddrV6, Vec<u8>, WallClock, StdDuration)>,
    done: bool,
}

impl<P: PlaneIo> std::fmt::Debug for Closing<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closing")
            .field("qpns", &self.qpns)
            .field("sent", &self.waiting.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl<P: PlaneIo> Closing<P> {
    /// One step: `Ok(true)` once both sides destroyed their QPs (or the peer's were gone already), `Ok(false)`
    /// while draining or waiting for the peer; `ETIMEDOUT` when the bootstrap timeout passed first (this side's
    /// QPs are destroyed then too). In [`ProgressMode::Manual`] it runs a progress round.
    pub fn poll(&mut self) -> Result<bool, HostError> {
        if self.done {
            return Ok(true);
        }
        let Some(i) = self.host.clone() else {
            self.done = true;
            return Ok(true);
        };
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        let now = WallClock::now();
        match &mut self.waiting {
            None => {
                // Closed by the peer already, or nobody to tell: just free what is left.
                let peer = self
                    .qpns
                    .iter()
                    .find_map(|q| c.links.get(q).map(|l| l.peer));
                let dest = peer
                    .and_then(|p| c.dp.peer_planes(p).and_then(|pl| pl.first().copied()))
                    .map(|p0| c.dp.node().destination(0, &p0, 0));
                let Some(dest) = dest else {
                    self.finish(&mut c);
                    return Ok(true);
                };
                if !self.qpns.iter().all(|&q| c.quiet(q)) {
                    if now >= self.deadline {
                        self.finish(&mut c);
                        return Err(HostError::Timeout("close (the link's QPs did not drain)"));
                    }
                    return Ok(false);
                }
                let pairs: Vec<(u32, u32)> = self
                    .qpns
                    .iter()
                    .filter_map(|&q| c.links.get(&q).map(|l| (q, l.remote_qpn)))
                    .collect();
                // Tagged with the receive key of the peer's first QP named (spec HOST-AUTH-2).
                let Some(key) = pairs
                    .first()
                    .and_then(|(q, _)| c.links.get(q))
                    .map(|l| AuthKey::new(l.remote_key))
                else {
                    self.finish(&mut c);
                    return Ok(true);
                };
                let msg = seal(
                    &Msg::Close {
                        token: self.token,
                        pairs,
                        mac: [0; AUTH_LEN],
                    },
                    &key,
                );
                c.closing.insert(self.token, false);
                let _ = c.dp.send_host(0, dest, &msg);
                self.waiting = Some((dest, msg, now + RETRY_FIRST, RETRY_FIRST));
                Ok(false)
            }
            Some((dest, msg, next, interval)) => {
                if c.closing.get(&self.token) == Some(&true) {
                    self.finish(&mut c);
                    return Ok(true);
                }
                if now >= self.deadline {
                    self.finish(&mut c);
                    return Err(HostError::Timeout("close (no CLOSED from the peer)"));
                }
                if now >= *next {
                    let _ = c.dp.send_host(0, *dest, msg);
                    *interval = (*interval * 2).min(StdDuration::from_secs(1));
                    *next = now + *interval;
                }
                Ok(false)
            }
        }
    }

    /// Destroys this side's QPs and the link's CQs.
    fn finish(&mut self, c: &mut Core<P>) {
        for &q in &self.qpns {
            let _ = c.destroy_qp(q);
        }
        for cq in &self.cqs {
            let _ = c.destroy_cq(cq);
        }
        c.closing.remove(&self.token);
        self.done = true;
    }
}

impl<P: PlaneIo> Drop for Closing<P> {
    fn drop(&mut self) {
        if let Some(i) = &self.host {
            lock(&i.core).closing.remove(&self.token);
        }
    }
}
