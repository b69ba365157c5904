//! The endpoint: one NIC (one port per plane) with its QPs, completion queues and registered memory.
//!
//! Sans-IO, in the style of quinn-proto: the driver feeds datagrams with [`Endpoint::handle_datagram`],
//! drains packets with [`Endpoint::poll_transmit`], sleeps until [`Endpoint::poll_timeout`] and then calls
//! [`Endpoint::handle_timeout`]. Any call can make the previous answers of `poll_transmit` and `poll_timeout`
//! stale, so drivers ask again after each.

use std::collections::{BTreeMap, VecDeque};

mod control;
mod ports;
mod timers;

use timers::TimerIndex;

use crate::completion::{Completion, Cq, CqId};
use crate::config::{ConfigError, EndpointConfig, QpConfig};
pub use crate::error::NoSuchObject;
pub use crate::io::{PayloadRef, RecvMeta, Transmit, TrimMark};
use crate::mem::{Access, AccessError, Memory, MrKeys, MrTable, Pd};
use crate::path::{EvChange, EvInfo, PlaneStats};
use crate::qp::{
    ConnInfo, ModifyError, PeerId, PostError, Qp, QpInit, QpKeys, QpState, QpStats, RecvWr, SendWr,
    Transition,
};
use crate::time::{Duration, Instant};
use crate::wire::{
    AuthKey, AuthTag, Body, Bth, EP_QPN, EpOp, EpRequest, EpResponse, Error as WireError, Opcode,
    Packet, ParseOptions, TrafficClass,
};

/// Asynchronous events (verbs async events and MRC's EV-event queue).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Event {
    /// A QP entered the error state.
    QpError {
        /// The QP.
        qpn: u32,
    },
    /// A completion queue overran its depth (verbs `IBV_EVENT_CQ_ERR`): a completion was lost, the queue is in
    /// error for good and every QP completing into it went to ERROR (spec QP-CQ-4).
    CqError {
        /// The queue.
        cq: CqId,
    },
    /// An EV of a QP changed state.
    EvChanged {
        /// The QP.
        qpn: u32,
        /// The change.
        change: EvChange,
    },
    /// A peer reported its port status.
    PortStatus {
        /// The peer.
        peer: PeerId,
        /// Its ports that are up.
        mask: u32,
    },
    /// An EV probe was answered.
    EvProbeReply {
        /// The peer.
        peer: PeerId,
        /// The EV probed.
        ev: u32,
        /// Round-trip time.
        rtt: Duration,
        /// The peer's port it arrived on.
        rx_port: u8,
    },
    /// A PORT_STATUS sent with [`Endpoint::send_port_status`] was answered.
    PortStatusReply {
        /// The peer.
        peer: PeerId,
        /// The EV it travelled on.
        ev: u32,
        /// Round-trip time.
        rtt: Duration,
        /// The peer's port it arrived on.
        rx_port: u8,
    },
}

/// Endpoint-wide counters (mostly drops, by reason).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct EndpointStats {
    /// Datagrams handed in.
    pub rx_datagrams: u64,
    /// Datagrams produced.
    pub tx_datagrams: u64,
    /// Shorter than their headers.
    pub rx_truncated: u64,
    /// Wrong TVer.
    pub rx_bad_version: u64,
    /// Unknown opcode.
    pub rx_unknown_opcode: u64,
    /// ICRC mismatch.
    pub rx_bad_icrc: u64,
    /// Malformed otherwise (lengths, trimmed control packets).
    pub rx_malformed: u64,
    /// Addressed to no QP of this endpoint.
    pub rx_unknown_qp: u64,
    /// Wrong P_Key.
    pub rx_bad_pkey: u64,
    /// From a peer other than the QP's, or from a source the driver could not name.
    pub rx_wrong_peer: u64,
    /// Without the AUTH tag their connection's key requires, or with a wrong one (forged: dropped unanswered).
    pub rx_bad_auth: u64,
    /// Endpoint requests answered.
    pub rx_ep_requests: u64,
    /// PORT_STATUS reports that deny the very port they arrived through (forged: dropped).
    pub rx_bad_port_status: u64,
    /// Endpoint responses received.
    pub rx_ep_responses: u64,
    /// Events dropped because nobody drained them.
    pub events_dropped: u64,
    /// Bounced datagrams ([`Endpoint::handle_bounce`]) that retired the path they were sent on.
    pub bounces: u64,
    /// Bounced datagrams ignored: unreadable, naming no path, or not addressed to a QP connected to the peer.
    pub bounces_ignored: u64,
}

/// First QP slot number; lower QPNs are reserved (QPN 2 is the endpoint's).
const SLOT_BASE: u32 = 0x10;
/// Values of a QPN's low 16 bits that name slots.
const SLOT_SPACE: u32 = 0x1_0000 - SLOT_BASE;
const MAX_SLOTS: usize = (0xFFFF - SLOT_BASE) as usize;

/// One round of SplitMix64: a fixed bijection that spreads a seed over all bits.
fn mix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[derive(Debug, Clone, Copy)]
struct SlotMeta {
    generation: u8,
    queued: bool,
    timer: Instant,
}

#[derive(Debug, Clone, Copy)]
struct EpOut {
    peer: PeerId,
    plane: u8,
    ev: u32,
    body: EpBody,
    /// The receiver's QPN whose key tags the packet, and that key (spec SEC-AUTH-2).
    auth: Option<(u32, AuthKey)>,
}

#[derive(Debug, Clone, Copy)]
enum EpBody {
    Request(EpRequest),
    Response(EpResponse),
}

/// One MRC endpoint.
///
/// `repr(C)` keeps the declared order: what every packet and every poll reads comes first, in a few adjacent
/// cache lines, and the rest after it (a simulator runs thousands of endpoints, where each line is a miss).
#[repr(C)]
pub struct Endpoint {
    qps: Vec<Option<Qp>>,
    slots: Vec<SlotMeta>,
    /// Offset of slot numbers in the QPN's low 16 bits, from [`EndpointConfig::qpn_seed`].
    slot_offset: u32,
    ports_up: u32,
    port_status_deadline: Instant,
    ready: VecDeque<usize>,
    timers: TimerIndex,
    ep_out: VecDeque<EpOut>,
    /// QPs that had data but only busy ports at the last attempt.
    port_blocked: Vec<usize>,
    /// Completion queues that overran since the last check (spec QP-CQ-4).
    overrun_cqs: Vec<CqId>,
    cqs: Vec<Option<Cq>>,
    mrs: MrTable,
    events: VecDeque<Event>,
    stats: EndpointStats,
    cfg: EndpointConfig,
    pds: Vec<bool>,
    free_slots: Vec<usize>,
    /// Scratch list of QPs whose timers are due.
    due: Vec<usize>,
    next_req_id: u32,
    ev_probes: BTreeMap<u32, (PeerId, u32, Instant)>,
    /// PORT_STATUS requests of [`Endpoint::send_port_status`] awaiting their answer.
    port_reports: BTreeMap<u32, (PeerId, u32, Instant)>,
}

impl core::fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Endpoint")
            .field("qps", &self.qps.iter().flatten().count())
            .field("regions", &self.mrs.len())
            .field("ports_up", &format_args!("{:#x}", self.ports_up))
            .finish()
    }
}

impl Endpoint {
    /// A new endpoint with every port up.
    pub fn new(cfg: EndpointConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let ports_up = if cfg.ports >= 32 {
            u32::MAX
        } else {
            (1u32 << cfg.ports) - 1
        };
        Ok(Self {
            mrs: MrTable::default(),
            pds: Vec::new(),
            cqs: Vec::new(),
            qps: Vec::new(),
            slots: Vec::new(),
            free_slots: Vec::new(),
            ready: VecDeque::new(),
            port_blocked: Vec::new(),
            timers: TimerIndex::default(),
            due: Vec::new(),
            ep_out: VecDeque::new(),
            ports_up,
            port_status_deadline: Instant::MAX,
            next_req_id: 1,
            ev_probes: BTreeMap::new(),
            port_reports: BTreeMap::new(),
            events: VecDeque::new(),
            stats: EndpointStats::default(),
            slot_offset: if cfg.qpn_seed == 0 {
                0
            } else {
                (mix64(cfg.qpn_seed) % u64::from(SLOT_SPACE)) as u32
            },
            overrun_cqs: Vec::new(),
            cfg,
        })
    }

    /// The first generation of a slot: 0 in the plain numbering, else drawn from the seed, so that the QPN's top
    /// 8 bits are as hard to guess as its slot (spec SEC-QPN-1).
    fn first_generation(&self, slot: usize) -> u8 {
        if self.cfg.qpn_seed == 0 {
            0
        } else {
            (mix64(self.cfg.qpn_seed ^ mix64(slot as u64)) >> 56) as u8
        }
    }

    /// The QPN of `slot` in `generation`.
    // spec: SEC-QPN-1
    fn qpn_of(&self, slot: usize, generation: u8) -> u32 {
        let field = (slot as u32 + self.slot_offset) % SLOT_SPACE + SLOT_BASE;
        (u32::from(generation) << 16) | field
    }

    /// The configuration.
    pub fn config(&self) -> &EndpointConfig {
        &self.cfg
    }

    // ---- resources ------------------------------------------------------------------------------------------

    /// Allocates a protection domain.
    pub fn alloc_pd(&mut self) -> Pd {
        self.pds.push(true);
        Pd(self.pds.len() as u32 - 1)
    }

    /// Frees a protection domain.
    pub fn dealloc_pd(&mut self, pd: Pd) -> Result<(), NoSuchObject> {
        match self.pds.get_mut(pd.0 as usize) {
            Some(alive @ true) => {
                *alive = false;
                Ok(())
            }
            _ => Err(NoSuchObject),
        }
    }

    /// Registers `[addr, addr + len)` for access by QPs of `pd`.
    pub fn reg_mr(
        &mut self,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MrKeys, AccessError> {
        if !self.pds.get(pd.0 as usize).copied().unwrap_or(false) {
            return Err(AccessError::WrongPd);
        }
        self.mrs.register(pd, addr, len, access)
    }

    /// Deregisters the region with local key `lkey`.
    pub fn dereg_mr(&mut self, lkey: u32) -> Result<(), AccessError> {
        self.mrs.deregister(lkey)
    }

    /// Creates a completion queue of `depth` entries (at least 1). The depth is a limit, as in verbs: size it for
    /// every completion that can be outstanding between two polls, or an overrun fails the queue (spec QP-CQ-4).
    pub fn create_cq(&mut self, depth: usize) -> CqId {
        self.cqs.push(Some(Cq::new(depth.max(1))));
        CqId(self.cqs.len() as u32 - 1)
    }

    /// Destroys a completion queue.
    pub fn destroy_cq(&mut self, cq: CqId) -> Result<(), NoSuchObject> {
        match self.cqs.get_mut(cq.0 as usize) {
            Some(c @ Some(_)) => {
                *c = None;
                Ok(())
            }
            _ => Err(NoSuchObject),
        }
    }

    /// Moves up to `out.len()` completions of `cq` into `out`; returns how many.
    pub fn poll_cq(&mut self, cq: CqId, out: &mut [Completion]) -> usize {
        let Some(Some(q)) = self.cqs.get_mut(cq.0 as usize) else {
            return 0;
        };
        let n = out.len().min(q.entries.len());
        for (slot, c) in out.iter_mut().zip(q.entries.drain(..n)) {
            *slot = c;
        }
        n
    }

    /// Completions waiting in `cq`, and completions lost to overruns so far.
    pub fn cq_len(&self, cq: CqId) -> Option<(usize, u64)> {
        match self.cqs.get(cq.0 as usize) {
            Some(Some(q)) => Some((q.entries.len(), q.overruns)),
            _ => None,
        }
    }

    /// Whether `cq` overran and is in error (spec QP-CQ-4); `None` for no such queue. Only destroying it ends
    /// the error.
    pub fn cq_failed(&self, cq: CqId) -> Option<bool> {
        match self.cqs.get(cq.0 as usize) {
            Some(Some(q)) => Some(q.failed),
            _ => None,
        }
    }

    /// Creates a QP (in RESET) and returns its number.
    pub fn create_qp(&mut self, init: QpInit) -> Result<u32, ConfigError> {
        if !self.pds.get(init.pd.0 as usize).copied().unwrap_or(false) {
            return Err(ConfigError::new(
                "qp.pd",
                "no such protection domain; allocate one with alloc_pd",
            ));
        }
        for (cq, field) in [(init.send_cq, "qp.send_cq"), (init.recv_cq, "qp.recv_cq")] {
            match self.cqs.get(cq.0 as usize) {
                Some(Some(q)) if q.failed => {
                    return Err(ConfigError::new(
                        field,
                        "the completion queue overran and is in error; destroy it and create a deeper one",
                    ));
                }
                Some(Some(_)) => {}
                _ => {
                    return Err(ConfigError::new(
                        field,
                        "no such completion queue; create one with create_cq",
                    ));
                }
            }
        }
        if u32::from(init.config.ev.planes) > u32::from(self.cfg.ports) {
            return Err(ConfigError::new(
                "qp.ev.planes",
                format!(
                    "{} planes but the endpoint has {} ports; use at most {}",
                    init.config.ev.planes, self.cfg.ports, self.cfg.ports
                ),
            ));
        }
        let slot = match self.free_slots.pop() {
            Some(s) => s,
            None => {
                if self.qps.len() >= MAX_SLOTS {
                    return Err(ConfigError::exhausted(
                        "endpoint.qps",
                        "too many QPs (at most 65519)",
                    ));
                }
                self.qps.push(None);
                let generation = self.first_generation(self.slots.len());
                self.slots.push(SlotMeta {
                    generation,
                    queued: false,
                    timer: Instant::MAX,
                });
                self.qps.len() - 1
            }
        };
        let qpn = self.qpn_of(slot, self.slots[slot].generation);
        let mut qp = match Qp::new(qpn, init, self.cfg.caps) {
            Ok(q) => q,
            Err(e) => {
                self.free_slots.push(slot);
                return Err(e);
            }
        };
        for p in 0..usize::from(self.cfg.ports) {
            if self.ports_up >> p & 1 == 0 {
                qp.paths.set_local_port(p, false);
            }
        }
        self.qps[slot] = Some(qp);
        Ok(qpn)
    }

    /// Replaces the transport parameters (EVs, congestion control, ...) of a QP still in RESET: MRC's controller
    /// API assigns a QP its EV and CC profiles at RESET → INIT, after the QP (and its QPN) exist.
    pub fn reconfigure_qp(&mut self, qpn: u32, config: QpConfig) -> Result<(), ConfigError> {
        let slot = self
            .slot_of(qpn)
            .ok_or_else(|| ConfigError::new("qp", "no such QP"))?;
        let Some(old) = self.qps[slot].as_ref() else {
            return Err(ConfigError::new("qp", "no such QP"));
        };
        if old.state != QpState::Reset {
            return Err(ConfigError::new(
                "qp.state",
                "a QP's parameters change only in RESET; move it to RESET first",
            ));
        }
        if u32::from(config.ev.planes) > u32::from(self.cfg.ports) {
            return Err(ConfigError::new(
                "qp.ev.planes",
                format!(
                    "{} planes but the endpoint has {} ports",
                    config.ev.planes, self.cfg.ports
                ),
            ));
        }
        let mut init = old.init.clone();
        init.config = config;
        let auth = old.auth;
        let mut qp = Qp::new(qpn, init, self.cfg.caps)?;
        qp.auth = auth;
        for p in 0..usize::from(self.cfg.ports) {
            if self.ports_up >> p & 1 == 0 {
                qp.paths.set_local_port(p, false);
            }
        }
        self.qps[slot] = Some(qp);
        Ok(())
    }

    /// Sets a QP's local-ACK timeout and retry counts ([`QpConfig`]'s `timeout`, `retry_linear`, `retry_exp`) in
    /// any state: verbs gives them at RTR → RTS, after the QP's other parameters are fixed. They apply from the
    /// next arming of the QP timeout (spec REL-QPTO-1).
    pub fn set_qp_retry(
        &mut self,
        qpn: u32,
        timeout: u8,
        retry_linear: u8,
        retry_exp: u8,
    ) -> Result<(), ConfigError> {
        let mut cfg = self
            .qp(qpn)
            .ok_or_else(|| ConfigError::new("qp", "no such QP"))?
            .cfg()
            .clone();
        cfg.timeout = timeout;
        cfg.retry_linear = retry_linear;
        cfg.retry_exp = retry_exp;
        cfg.validate()?;
        let slot = self
            .slot_of(qpn)
            .ok_or_else(|| ConfigError::new("qp", "no such QP"))?;
        if let Some(qp) = self.qps[slot].as_mut() {
            qp.init.config = cfg;
        }
        Ok(())
    }

    /// Sets the window of a QP whose congestion control is a fixed window (`CcConfig::Fixed`), in any state: a
    /// host that shares one in-flight budget among its QPs resizes their shares as QPs come and go. Packets
    /// already in flight stay; a smaller window only holds back new ones. Refused for a QP whose controller
    /// computes its own window.
    pub fn set_qp_window(&mut self, qpn: u32, window: u64) -> Result<(), ConfigError> {
        let slot = self
            .slot_of(qpn)
            .ok_or_else(|| ConfigError::new("qp", "no such QP"))?;
        let Some(qp) = self.qps[slot].as_mut() else {
            return Err(ConfigError::new("qp", "no such QP"));
        };
        if window == 0 {
            return Err(ConfigError::new("qp.cc.window", "must be at least 1 byte"));
        }
        if !qp.req.cc.set_window(window) {
            return Err(ConfigError::new(
                "qp.cc",
                "the QP's controller computes its own window; only a fixed window is set from outside",
            ));
        }
        qp.init.config.cc = crate::cc::CcConfig::Fixed { window };
        Ok(())
    }

    /// Whether a QP has nothing left to send or to be acknowledged (its send queue is empty and every packet it
    /// Gives QP `qpn` (in RESET or INIT, before it is connected) the keys of its connection, or takes them away:
    /// with keys every packet it sends carries an AUTH tag and every packet it takes must prove the peer's key
    /// (spec SEC-AUTH-1). A transition to RESET forgets them.
    pub fn set_qp_keys(&mut self, qpn: u32, keys: Option<QpKeys>) -> Result<(), ModifyError> {
        let slot = self.slot_of(qpn).ok_or(ModifyError::NoSuchQp)?;
        let qp = self.qps[slot].as_mut().ok_or(ModifyError::NoSuchQp)?;
        if !matches!(qp.state, QpState::Reset | QpState::Init) {
            return Err(ModifyError::BadTransition(qp.state));
        }
        qp.auth = keys;
        Ok(())
    }

    /// Whether QP `qpn` runs with keys.
    pub fn qp_keyed(&self, qpn: u32) -> Option<bool> {
        self.qp(qpn).map(|q| q.auth.is_some())
    }

    /// sent is acknowledged): a graceful close waits for this before it destroys the QP.
    pub fn qp_idle(&self, qpn: u32) -> Option<bool> {
        self.qp(qpn).map(|q| !q.has_outstanding())
    }

    /// The peer a QP is connected to (from RTR on).
    pub fn qp_peer(&self, qpn: u32) -> Option<PeerId> {
        self.qp(qpn).and_then(|q| q.peer)
    }

    /// A QP's transport parameters.
    pub fn qp_config(&self, qpn: u32) -> Option<&QpConfig> {
        self.qp(qpn).map(|q| q.cfg())
    }

    /// Destroys a QP; its outstanding work is dropped without completions, as in verbs.
    pub fn destroy_qp(&mut self, qpn: u32) -> Result<(), NoSuchObject> {
        let slot = self.slot_of(qpn).ok_or(NoSuchObject)?;
        self.qps[slot] = None;
        let m = &mut self.slots[slot];
        if m.timer != Instant::MAX {
            self.timers.remove(m.timer, slot);
        }
        m.timer = Instant::MAX;
        m.queued = false;
        m.generation = m.generation.wrapping_add(1);
        self.ready.retain(|&s| s != slot);
        self.port_blocked.retain(|&s| s != slot);
        self.free_slots.push(slot);
        Ok(())
    }

    fn slot_of(&self, qpn: u32) -> Option<usize> {
        let field = (qpn & 0xFFFF).checked_sub(SLOT_BASE)?;
        let s = ((field + SLOT_SPACE - self.slot_offset) % SLOT_SPACE) as usize;
        match (self.qps.get(s), self.slots.get(s)) {
            (Some(Some(q)), Some(_)) if q.qpn == qpn => Some(s),
            _ => None,
        }
    }

    fn qp(&self, qpn: u32) -> Option<&Qp> {
        self.slot_of(qpn).and_then(|s| self.qps[s].as_ref())
    }

    /// Applies a state transition.
    pub fn modify_qp(&mut self, qpn: u32, t: Transition, now: Instant) -> Result<(), ModifyError> {
        let slot = self.slot_of(qpn).ok_or(ModifyError::NoSuchQp)?;
        let ports_up = self.ports_up;
        let nports = usize::from(self.cfg.ports);
        let qp = self.qps[slot].as_mut().ok_or(ModifyError::NoSuchQp)?;
        let reset = matches!(t, Transition::Reset);
        let r = qp.modify(t, now);
        if reset {
            qp.auth = None;
            for p in 0..nports {
                if ports_up >> p & 1 == 0 {
                    qp.paths.set_local_port(p, false);
                }
            }
        }
        self.after_qp(slot, now);
        r
    }

    /// Creates a QP and brings it to INIT granting `access` (RESET → INIT): what every front end does before it
    /// exchanges [`ConnInfo`] with the peer and calls [`connect_qp`](Self::connect_qp).
    pub fn open_qp(
        &mut self,
        init: QpInit,
        access: Access,
        now: Instant,
    ) -> Result<u32, ConfigError> {
        let qpn = self.create_qp(init)?;
        // A QP just created is in RESET, from which INIT is always allowed.
        if let Err(e) = self.modify_qp(qpn, Transition::Init { access }, now) {
            let _ = self.destroy_qp(qpn);
            return Err(ConfigError::new("qp.access", e.to_string()));
        }
        Ok(qpn)
    }

    /// The connection blob a peer needs to connect to QP `qpn`, which will send from `sq_psn` (pass the same PSN
    /// to [`connect_qp`](Self::connect_qp)). `addr` is left 0: the datapath fills in its address. `None` for no
    /// such QP.
    pub fn conn_info(&self, qpn: u32, sq_psn: u32) -> Option<ConnInfo> {
        let qp = self.qp(qpn)?;
        let cfg = qp.cfg();
        Some(ConnInfo {
            qpn,
            psn: sq_psn & crate::wire::PSN_MASK,
            caps: self.cfg.caps,
            mtu: cfg.mtu,
            mpr: cfg.mpr,
            ports: self.ports_up,
            plane_bits: cfg.ev.plane_bits,
            addr: 0,
        })
    }

    /// Connects QP `qpn` (in INIT) to the peer's QP that `remote` describes, in one step: INIT → RTR → RTS. The
    /// QP sends from `sq_psn`, the PSN its own [`conn_info`](Self::conn_info) advertised. On error the QP is
    /// left as it was: only a QP in INIT is touched, and RTR → RTS cannot fail.
    // spec: QP-CONN-1
    pub fn connect_qp(
        &mut self,
        qpn: u32,
        peer: PeerId,
        remote: &ConnInfo,
        sq_psn: u32,
        now: Instant,
    ) -> Result<(), ModifyError> {
        match self.qp_state(qpn) {
            None => return Err(ModifyError::NoSuchQp),
            Some(QpState::Init) => {}
            Some(s) => return Err(ModifyError::BadTransition(s)),
        }
        self.modify_qp(
            qpn,
            Transition::Rtr {
                peer,
                remote_qpn: remote.qpn,
                rq_psn: remote.psn,
                remote_caps: remote.caps,
            },
            now,
        )?;
        self.modify_qp(qpn, Transition::Rts { sq_psn }, now)
    }

    /// Posts a send work request.
    pub fn post_send(&mut self, qpn: u32, wr: &SendWr<'_>, now: Instant) -> Result<(), PostError> {
        let slot = self.slot_of(qpn).ok_or(PostError::NoSuchQp)?;
        let qp = self.qps[slot].as_mut().ok_or(PostError::NoSuchQp)?;
        let r = qp.post_send(wr, &self.mrs);
        if r.is_ok() {
            qp.arm_retry(now, false);
            qp.release_held_sack();
        }
        self.after_qp(slot, now);
        r
    }

    /// Posts a receive work request.
    pub fn post_recv(&mut self, qpn: u32, wr: &RecvWr<'_>) -> Result<(), PostError> {
        let slot = self.slot_of(qpn).ok_or(PostError::NoSuchQp)?;
        let qp = self.qps[slot].as_mut().ok_or(PostError::NoSuchQp)?;
        qp.post_recv(wr, &self.mrs)
    }

    // ---- I/O ------------------------------------------------------------------------------------------------

    /// Feeds one received UDP payload. Malformed, spoofed or out-of-window packets are counted and dropped or
    /// NACKed; nothing is written outside a registered region with the right key and rights.
    // spec: QP-RX-2
    pub fn handle_datagram<M: Memory>(
        &mut self,
        now: Instant,
        meta: RecvMeta,
        data: &[u8],
        mem: &mut M,
    ) {
        self.stats.rx_datagrams += 1;
        let Some(qpn) = crate::wire::peek_dest_qp(data) else {
            self.stats.rx_truncated += 1;
            return;
        };
        if qpn == EP_QPN {
            self.handle_endpoint_packet(now, meta, data);
            return;
        }
        let Some(slot) = self.slot_of(qpn) else {
            self.stats.rx_unknown_qp += 1;
            return;
        };
        let Some(qp) = self.qps[slot].as_mut() else {
            return;
        };
        let opts = ParseOptions {
            // spec: WIRE-ICRC-1
            verify_icrc: qp.cfg().icrc && meta.trim.is_none(),
            trimmed: meta.trim.is_some(),
        };
        let (pkt, tag) = match Packet::parse_auth(data, opts) {
            Ok(p) => p,
            Err(e) => {
                count_wire_error(&mut self.stats, e);
                return;
            }
        };
        // Before anything acts on it, answers it or counts it against the QP.
        // spec: SEC-AUTH-1
        if let Some(k) = &qp.auth
            && !matches!(&tag, Some(t) if t.proves(&k.rx, data))
        {
            self.stats.rx_bad_auth += 1;
            return;
        }
        // spec: WIRE-BTH-3
        if pkt.bth.pkey != qp.cfg().pkey {
            self.stats.rx_bad_pkey += 1;
            return;
        }
        // spec: SEC-PEER-1
        if qp.peer.is_some() && meta.peer != qp.peer {
            self.stats.rx_wrong_peer += 1;
            return;
        }
        match pkt.body {
            Body::Data(d) => {
                qp.on_data(now, &meta, &pkt.bth, &d, mem, &self.mrs);
                if qp.nothing_to_file() {
                    // Receiving data moved no deadline earlier and produced nothing to file: only the ready
                    // queue may need this QP (to send a SACK or NACK, or a READ response).
                    if !self.slots[slot].queued && qp.wants_transmit(now) {
                        self.slots[slot].queued = true;
                        self.ready.push_back(slot);
                    }
                    return;
                }
            }
            Body::Sack(s) => qp.on_sack(now, &s),
            Body::Nack(n) => qp.on_nack(now, &n),
            Body::Ack(a) => qp.on_ack(now, &a),
            Body::Probe(p) => qp.on_probe(&meta, &pkt.bth, &p),
            Body::EpRequest(_) | Body::EpResponse(_) => self.stats.rx_malformed += 1,
        }
        self.after_qp(slot, now);
    }

    /// Writes the next packet to send into `buf` (which must hold the QP MTU plus 64 bytes of headers) and
    /// says where it goes; `None` when nothing is due now. Every port is taken to have room; drivers whose
    /// ports can fill up use [`poll_transmit_on`](Self::poll_transmit_on).
    #[must_use = "a returned packet must be sent"]
    pub fn poll_transmit<M: Memory>(
        &mut self,
        now: Instant,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        self.poll_transmit_on(now, u32::MAX, buf, mem)
    }

    /// Like [`poll_transmit`](Self::poll_transmit), but data goes only to ports whose bit is set in
    /// `ports_ready` (ports with room in their transmit queue), so a NIC port never builds a standing queue and
    /// traffic follows the ports' real rates (spec PATH-SEL-2). Control packets ignore the mask. A QP that
    /// found only busy ports is tried again at the next call.
    #[must_use = "a returned packet must be sent"]
    pub fn poll_transmit_on<M: Memory>(
        &mut self,
        now: Instant,
        ports_ready: u32,
        buf: &mut [u8],
        mem: &mut M,
    ) -> Option<Transmit> {
        if !self.ep_out.is_empty()
            && let Some(t) = self.poll_endpoint_out(buf)
        {
            self.stats.tx_datagrams += 1;
            return Some(t);
        }
        if ports_ready != 0 {
            while let Some(slot) = self.port_blocked.pop() {
                let m = &mut self.slots[slot];
                if !m.queued && self.qps[slot].is_some() {
                    m.queued = true;
                    self.ready.push_back(slot);
                }
            }
        }
        while let Some(&slot) = self.ready.front() {
            let Some(qp) = self.qps[slot].as_mut() else {
                self.ready.pop_front();
                self.slots[slot].queued = false;
                continue;
            };
            let t = qp.poll_transmit(now, ports_ready, buf, mem, &self.mrs);
            if t.is_some() {
                self.stats.tx_datagrams += 1;
                let data = t.is_some_and(|t| t.class != TrafficClass::Control);
                if data && qp.nothing_to_file() {
                    // A data packet changed nothing the endpoint files (no completion, event or earlier deadline)
                    // and more data usually follows: it stays queued, at the front while the QP is in a burst on
                    // one EV, else behind the others. If there is none, the next poll finds out.
                    if !qp.bursting() && self.ready.len() > 1 {
                        self.ready.pop_front();
                        self.ready.push_back(slot);
                    }
                } else {
                    self.ready.pop_front();
                    self.slots[slot].queued = false;
                    self.after_qp(slot, now);
                }
                return t;
            }
            self.ready.pop_front();
            self.slots[slot].queued = false;
            if qp.req_used && std::mem::take(&mut qp.req.port_blocked) {
                self.port_blocked.push(slot);
            }
            // Nothing after all: it is looked at again after its next event, timer or port. The packets it sent
            // before moved no deadline earlier unless `nothing_to_file` said so, so there may be nothing to file.
            if !qp.nothing_to_file() {
                self.after_qp_quiet(slot, now);
            }
        }
        None
    }

    /// The next time [`handle_timeout`](Self::handle_timeout) must be called, if any.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        let t = self.timers.first().min(self.port_status_deadline);
        (t != Instant::MAX).then_some(t)
    }

    /// Runs every timer due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        if self.port_status_deadline <= now {
            self.queue_port_status(now);
        }
        // Each due QP runs once, even if its timer is re-armed at or before `now`.
        let mut due = std::mem::take(&mut self.due);
        due.extend(self.timers.due(now));
        for &slot in &due {
            let m = &mut self.slots[slot];
            self.timers.remove(m.timer, slot);
            m.timer = Instant::MAX;
            if let Some(qp) = self.qps[slot].as_mut() {
                qp.on_timeout(now);
            }
            self.after_qp(slot, now);
        }
        due.clear();
        self.due = due;
    }

    /// Re-files a QP after anything touched it: completions, events, timer, ready queue.
    fn after_qp(&mut self, slot: usize, now: Instant) {
        self.refile(slot, now, true);
    }

    fn after_qp_quiet(&mut self, slot: usize, now: Instant) {
        self.refile(slot, now, false);
    }

    fn refile(&mut self, slot: usize, now: Instant, may_queue: bool) {
        self.refile_one(slot, now, may_queue);
        if !self.overrun_cqs.is_empty() {
            self.fail_overrun_cqs(now);
        }
    }

    /// A completion queue overran: raise its event and fail every QP that completes into it, as a verbs device
    /// does; their flushes may overrun further queues, which are handled the same way (spec QP-CQ-4).
    // spec: QP-CQ-4
    fn fail_overrun_cqs(&mut self, now: Instant) {
        while let Some(cq) = self.overrun_cqs.pop() {
            self.push_event(Event::CqError { cq });
            for slot in 0..self.qps.len() {
                let Some(qp) = self.qps[slot].as_mut() else {
                    continue;
                };
                if qp.init.send_cq == cq || qp.init.recv_cq == cq {
                    qp.enter_error(None, now);
                    self.refile_one(slot, now, false);
                }
            }
        }
    }

    fn refile_one(&mut self, slot: usize, now: Instant, may_queue: bool) {
        let Some(qp) = self.qps[slot].as_mut() else {
            return;
        };
        for (cq, c) in qp.out.cqes.drain(..) {
            if let Some(Some(q)) = self.cqs.get_mut(cq.0 as usize)
                && q.push(c)
            {
                self.overrun_cqs.push(cq);
            }
        }
        let qpn = qp.qpn;
        // Taking an empty Vec allocates nothing, so the common path stays allocation-free.
        let changes = std::mem::take(&mut qp.out.ev_changes);
        let failed = std::mem::take(&mut qp.out.went_to_error);
        let deadline = qp.next_deadline();
        let wants = may_queue && qp.wants_transmit(now);
        let bursting = qp.bursting();
        for change in changes {
            self.push_event(Event::EvChanged { qpn, change });
        }
        if failed {
            self.push_event(Event::QpError { qpn });
        }
        // The index only ever moves a QP's timer earlier. A deadline that moved later (the common case: every
        // acknowledgement pushes the RTO and retry timers back) leaves the old entry, which then wakes the QP
        // early; `handle_timeout` finds nothing due and files the true deadline. One early wake-up per timer
        // period costs far less than re-indexing on every packet.
        let m = &mut self.slots[slot];
        if deadline < m.timer {
            if m.timer != Instant::MAX {
                self.timers.remove(m.timer, slot);
            }
            self.timers.insert(deadline, slot);
            m.timer = deadline;
        }
        if let Some(qp) = self.qps[slot].as_mut() {
            qp.timers.filed(m.timer);
        }
        if wants && !m.queued {
            m.queued = true;
            // A QP in a burst on one EV goes first, so the burst leaves back to back (spec PATH-EV-6).
            if bursting {
                self.ready.push_front(slot);
            } else {
                self.ready.push_back(slot);
            }
        }
    }

    fn push_event(&mut self, e: Event) {
        if self.events.len() >= self.cfg.max_events {
            self.events.pop_front();
            self.stats.events_dropped += 1;
        }
        self.events.push_back(e);
    }

    /// The next asynchronous event, if any.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.events.pop_front()
    }
}

fn count_wire_error(stats: &mut EndpointStats, e: WireError) {
    match e {
        WireError::Truncated => stats.rx_truncated += 1,
        WireError::BadVersion(_) => stats.rx_bad_version += 1,
        WireError::UnknownOpcode(_) => stats.rx_unknown_opcode += 1,
        WireError::BadIcrc => stats.rx_bad_icrc += 1,
        WireError::Malformed => stats.rx_malformed += 1,
    }
}
