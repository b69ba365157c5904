//! Queue pairs: the verbs-like state machine, work requests, and the per-QP transport state.
//!
//! A QP is both a requester (its send queue, sprayed over its EVs, made reliable by SACKs) and a responder (the
//! peer's stream, placed on arrival and completed in message order). `api.rs` holds the public types (states,
//! transitions, work requests, errors, counters), `send.rs`, `acks.rs` and `loss.rs` the requester half, `recv.rs`
//! the responder half.

mod acks;
mod api;
mod ce;
mod conn;
mod loss;
mod recv;
mod send;
mod timers;

use std::collections::VecDeque;

use smallvec::SmallVec;

pub use crate::io::PeerId;
pub use api::{
    ModifyError, PostError, QpInit, QpState, QpStats, RecvWr, SendOp, SendWr, Transition,
};
pub use conn::ConnInfo;

use crate::cc::CongestionControl;
use crate::completion::{Completion, CqId, WcOpcode, WcStatus};
use crate::config::{Caps, QpConfig};
use crate::error::ConfigError;
use crate::mem::{Access, AccessError, MrTable, Pd, Sge};
use crate::path::{EvChange, PathSet};
use crate::reliability::{PsnTracker, RttEstimator, SendOrder, SentWindow};
use crate::time::Instant;
use crate::wire::AuthKey;
pub(crate) use timers::{Timer, TimerTable};

/// Kinds of message in a send queue.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum WqeKind {
    Write,
    Send,
    Read,
    /// A READ this QP serves for its peer: no completion, no queue slot.
    ReadResponse {
        req_msn: u16,
    },
}

#[derive(Debug, Clone)]
pub(crate) struct SendWqe {
    pub(crate) wr_id: u64,
    pub(crate) kind: WqeKind,
    pub(crate) sges: SmallVec<[Sge; 2]>,
    pub(crate) len: u32,
    pub(crate) remote_addr: u64,
    pub(crate) rkey: u32,
    pub(crate) imm: Option<u32>,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    /// Assigned when the first packet goes out.
    pub(crate) msn: u64,
    pub(crate) rqmsn: u64,
    pub(crate) first_psn: u64,
    pub(crate) npkts: u32,
    pub(crate) started: bool,
    /// READ: response bytes received, and whether all arrived.
    pub(crate) read_bytes: u64,
    pub(crate) read_done: bool,
}

impl SendWqe {
    /// A request not yet transmitted (numbers are assigned when its first packet goes out).
    #[allow(
        clippy::too_many_arguments,
        reason = "a plain constructor of a plain record"
    )]
    pub(crate) fn new(
        wr_id: u64,
        kind: WqeKind,
        sges: SmallVec<[Sge; 2]>,
        len: u32,
        remote_addr: u64,
        rkey: u32,
        imm: Option<u32>,
        signaled: bool,
        solicited: bool,
    ) -> Self {
        Self {
            wr_id,
            kind,
            sges,
            len,
            remote_addr,
            rkey,
            imm,
            signaled,
            solicited,
            msn: 0,
            rqmsn: 0,
            first_psn: 0,
            npkts: 0,
            started: false,
            read_bytes: 0,
            read_done: false,
        }
    }

    fn consumes_recv(&self) -> bool {
        self.kind == WqeKind::Send || (self.kind == WqeKind::Write && self.imm.is_some())
    }

    fn opcode(&self) -> WcOpcode {
        match self.kind {
            WqeKind::Write | WqeKind::ReadResponse { .. } => WcOpcode::RdmaWrite,
            WqeKind::Send => WcOpcode::Send,
            WqeKind::Read => WcOpcode::RdmaRead,
        }
    }
}

#[derive(Debug, Clone)]
pub(crate) struct RecvWqe {
    pub(crate) wr_id: u64,
    pub(crate) sges: SmallVec<[Sge; 2]>,
    pub(crate) len: u64,
}

/// Feedback the responder owes: echo of the triggering packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Echo {
    pub(crate) ev: u32,
    pub(crate) ts: Option<u32>,
    pub(crate) ce: bool,
    pub(crate) psn: u64,
}

#[derive(Debug, Clone, Copy)]
pub(crate) enum Ctl {
    Sack {
        echo: Echo,
        probe_reply: bool,
    },
    /// The second SACK of spec REL-SACK-2: a bitmap from `base`, no TS echo, no marking advice.
    SackBlock {
        ev: u32,
        base: u64,
    },
    Nack {
        reason: crate::wire::NackReason,
        echo: Echo,
    },
}

/// Control packets queued beyond this are dropped (the peer's timers recover them).
const MAX_CTL_QUEUE: usize = 1024;

/// One message of the peer's stream being received.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct MsgSlot {
    pub(crate) open: bool,
    pub(crate) kind: u8,
    pub(crate) total: u32,
    pub(crate) bytes: u64,
    pub(crate) last_seen: bool,
    pub(crate) imm: Option<u32>,
    pub(crate) rqmsn: u64,
    /// A WRITE's final byte (address, value), placed only once every other byte is (spec QP-PLACE-2).
    pub(crate) held: Option<(u64, u8)>,
    /// The R_Key of the WRITE, to check the final byte's region again when it is placed late.
    pub(crate) rkey: u32,
}

/// The QP's congestion controller with its window cached: the window is read before every transmission and
/// changes only when the controller hears of an event.
#[derive(Debug)]
pub(crate) struct CachedCc {
    inner: Box<dyn CongestionControl>,
    window: u64,
}

impl CachedCc {
    fn new(inner: Box<dyn CongestionControl>) -> Self {
        let window = inner.window();
        Self { inner, window }
    }

    #[inline]
    pub(crate) fn window(&self) -> u64 {
        self.window
    }

    pub(crate) fn on_ack(&mut self, now: Instant, sample: &crate::cc::AckSample) {
        self.inner.on_ack(now, sample);
        self.window = self.inner.window();
    }

    pub(crate) fn on_trim(&mut self, now: Instant, bytes: u64, last_hop: bool) {
        self.inner.on_trim(now, bytes, last_hop);
        self.window = self.inner.window();
    }

    pub(crate) fn on_loss(&mut self, now: Instant, bytes: u64) {
        self.inner.on_loss(now, bytes);
        self.window = self.inner.window();
    }

    pub(crate) fn counters(&self) -> crate::cc::CcCounters {
        self.inner.counters()
    }

    pub(crate) fn set_window(&mut self, window: u64) -> bool {
        let set = self.inner.set_window(window);
        self.window = self.inner.window();
        set
    }
}

/// Internal PSNs and MSNs start one wrap above the wire value so that "one before the first" never underflows.
const PSN_BASE: u64 = 1 << 24;
const MSN_BASE: u64 = 1 << 16;

/// The tail loss probe's state (spec REL-TLP-1).
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct TailProbe {
    /// A probe is to go out at the next transmit opportunity.
    pub(crate) wanted: bool,
    /// The unanswered probe: its timestamp and when it was sent.
    pub(crate) outstanding: Option<(u32, Instant)>,
    /// Probes repeated without an answer (backoff).
    pub(crate) count: u8,
    /// The EV whose delivery was acknowledged last: a path known to work now.
    pub(crate) last_delivered: Option<u16>,
}

/// The two keys of an authenticated connection (spec SEC-AUTH-1): one tags what this QP sends, the other
/// checks what it receives. Drivers draw them at random and exchange them in the connection's bootstrap.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpKeys {
    /// Tags this QP's packets (the peer checks them with it).
    pub tx: AuthKey,
    /// Checks the peer's packets.
    pub rx: AuthKey,
}

/// A queue pair: its identity and state, the three roles it plays (requester, responder, the feedback the
/// responder owes), its paths, and what the endpoint collects from it.
///
/// `repr(C)` keeps the declared order and the alignment starts it on a cache line: identity and keys share
/// the first lines, the per-packet state follows, counters and the configuration (read for a few values) come
/// last. A simulator runs thousands of QPs, where every line a packet touches is a miss.
#[repr(C, align(64))]
pub(crate) struct Qp {
    pub(crate) qpn: u32,
    pub(crate) remote_qpn: u32,
    pub(crate) state: QpState,
    pub(crate) peer: Option<PeerId>,
    pub(crate) access: Access,
    pub(crate) local_caps: Caps,
    pub(crate) caps: Caps,
    /// Work was ever posted to the send queue, or a READ served from it. Until then the requester has nothing
    /// queued, in flight or due, and the checks that ask it are skipped: a QP that only receives (half of a
    /// permutation's) then leaves the requester's 7 cache lines alone, which at 8,192 simulated hosts are
    /// misses in every window.
    pub(crate) req_used: bool,
    /// The connection's keys: every packet sent carries an AUTH tag, every packet taken must prove one.
    pub(crate) auth: Option<QpKeys>,
    pub(crate) feedback: Feedback,
    pub(crate) req: Requester,
    pub(crate) resp: Responder,
    pub(crate) paths: PathSet,
    pub(crate) timers: TimerTable,
    pub(crate) out: Outputs,
    pub(crate) stats: QpStats,
    pub(crate) init: QpInit,
}

/// The requester's side: the send queue, packets in flight and their recovery, congestion control.
///
/// `repr(C)` keeps the declared order: what every transmit opportunity reads comes first.
#[repr(C)]
pub(crate) struct Requester {
    pub(crate) sq_base: u64,
    pub(crate) sq_next: u64,
    /// PSNs the requester may have outstanding: `min(mpr, peer's mpr) × 128`.
    pub(crate) psn_window: u64,
    pub(crate) cc: CachedCc,
    pub(crate) seg_offset: u32,
    pub(crate) sq_used: u32,
    /// The EV new packets go on and how many more may follow it there ([`QpConfig::ev_burst`]).
    pub(crate) burst: Option<(u16, u8)>,
    pub(crate) ack_probe_wanted: bool,
    pub(crate) force_any_ev: bool,
    /// The last transmit attempt found only busy ports.
    pub(crate) port_blocked: bool,
    pub(crate) last_nack_rnr: bool,
    pub(crate) peer_mpr: u8,
    pub(crate) tail: TailProbe,
    /// The latest acknowledged transmission, in send order: the time rule's reference.
    pub(crate) rack: SendOrder,
    pub(crate) sq: VecDeque<SendWqe>,
    pub(crate) retx: VecDeque<u64>,
    /// PSNs in flight on an EV when a loss retired it: resent once nothing new is left to send.
    pub(crate) suspects: VecDeque<u64>,
    pub(crate) delayed: VecDeque<(Instant, u64)>,
    pub(crate) sent: SentWindow,
    pub(crate) rtt: RttEstimator,
    /// Until when a TRIMMED_LASTHOP NACK says the receiver's own port is congested.
    pub(crate) lasthop_trim_until: Instant,
    pub(crate) unsignaled_done: u32,
    pub(crate) wimm_inflight: u32,
    pub(crate) next_msn: u64,
    pub(crate) next_rqmsn: u64,
    pub(crate) wimm_msns: VecDeque<u64>,
    pub(crate) peer_cmsn: u64,
    pub(crate) serving_reads: u32,
    pub(crate) retries: u32,
}

/// The responder's side: the PSNs received, messages being reassembled, the receive queue.
pub(crate) struct Responder {
    pub(crate) rx: PsnTracker,
    pub(crate) msgs: VecDeque<MsgSlot>,
    pub(crate) msn_base: u64,
    pub(crate) rq: VecDeque<RecvWqe>,
    pub(crate) rq_base: u64,
    pub(crate) pending_imm: u32,
}

/// What the responder owes the requester: control packets queued, when the next SACK is due and what it
/// covers, the CE marks it echoes, the receive-window penalty it advertises.
///
/// `repr(C)` keeps the declared order: what every arrival and every transmit opportunity reads comes first.
#[repr(C)]
pub(crate) struct Feedback {
    pub(crate) sack_now: bool,
    pub(crate) ack_pending: bool,
    /// A SACK owed to a lone packet's A flag waits for the next send or `sack_hold` (spec REL-SACK-4).
    pub(crate) sack_held: bool,
    pub(crate) rcv_pen: u8,
    pub(crate) sack_pkts: u16,
    pub(crate) sack_bytes: u32,
    /// Lowest and highest PSN that arrived since the previous SACK (`u64::MAX`, 0 when none).
    pub(crate) sack_lo: u64,
    pub(crate) sack_hi: u64,
    pub(crate) ctl: VecDeque<Ctl>,
    pub(crate) sack_echo: Echo,
    pub(crate) cmsn_sent: u64,
    /// CE marks per EV, for ALWAYS_SKIP advice.
    pub(crate) ce: ce::CeTrack,
}

/// What the endpoint collects from a QP after each call.
#[derive(Default)]
pub(crate) struct Outputs {
    pub(crate) cqes: Vec<(CqId, Completion)>,
    pub(crate) ev_changes: Vec<EvChange>,
    pub(crate) went_to_error: bool,
}

impl Qp {
    pub(crate) fn new(qpn: u32, init: QpInit, local_caps: Caps) -> Result<Self, ConfigError> {
        init.config.validate()?;
        if init.max_send_wr == 0 || init.max_recv_wr == 0 {
            return Err(ConfigError::new(
                "qp.max_send_wr",
                "max_send_wr and max_recv_wr must be at least 1",
            ));
        }
        let cfg = &init.config;
        let cc = cfg.cc.build()?;
        let paths = PathSet::new(&cfg.ev);
        let window = u64::from(cfg.mpr) * 128;
        Ok(Self {
            qpn,
            state: QpState::Reset,
            access: Access::NONE,
            peer: None,
            remote_qpn: 0,
            local_caps,
            caps: Caps::MRC_1_0,
            req_used: false,
            auth: None,
            paths,
            req: Requester {
                sq: VecDeque::new(),
                sq_base: 0,
                sq_next: 0,
                seg_offset: 0,
                sq_used: 0,
                unsignaled_done: 0,
                next_msn: MSN_BASE,
                next_rqmsn: MSN_BASE,
                sent: SentWindow::new(PSN_BASE),
                retx: VecDeque::new(),
                suspects: VecDeque::new(),
                delayed: VecDeque::new(),
                rtt: RttEstimator::new(cfg.base_rtt, cfg.rto_min(), cfg.reorder_min()),
                rack: SendOrder::default(),
                tail: TailProbe::default(),
                lasthop_trim_until: Instant::ZERO,
                cc: CachedCc::new(cc),
                peer_mpr: cfg.mpr,
                psn_window: window,
                wimm_inflight: 0,
                wimm_msns: VecDeque::new(),
                peer_cmsn: MSN_BASE - 1,
                ack_probe_wanted: false,
                serving_reads: 0,
                retries: 0,
                force_any_ev: false,
                port_blocked: false,
                burst: None,
                last_nack_rnr: false,
            },
            resp: Responder {
                rx: PsnTracker::new(PSN_BASE, window),
                msgs: VecDeque::new(),
                msn_base: MSN_BASE,
                rq: VecDeque::new(),
                rq_base: MSN_BASE,
                pending_imm: 0,
            },
            feedback: Feedback {
                ctl: VecDeque::new(),
                sack_echo: Echo::default(),
                sack_now: false,
                sack_pkts: 0,
                sack_bytes: 0,
                sack_lo: u64::MAX,
                sack_hi: 0,
                cmsn_sent: MSN_BASE - 1,
                ack_pending: false,
                sack_held: false,
                rcv_pen: 0,
                ce: ce::CeTrack::default(),
            },
            timers: TimerTable::default(),
            out: Outputs::default(),
            stats: QpStats::default(),
            init,
        })
    }

    pub(crate) fn cfg(&self) -> &QpConfig {
        &self.init.config
    }

    /// Applies a verbs-style transition (spec QP-STATE-1).
    // spec: QP-STATE-1
    pub(crate) fn modify(&mut self, t: Transition, now: Instant) -> Result<(), ModifyError> {
        use QpState::*;
        match (self.state, t) {
            (Reset, Transition::Init { access }) => {
                self.access = access;
                self.state = Init;
            }
            (
                Init,
                Transition::Rtr {
                    peer,
                    remote_qpn,
                    rq_psn,
                    remote_caps,
                },
            ) => {
                self.peer = Some(peer);
                self.remote_qpn = remote_qpn & crate::wire::PSN_MASK;
                self.paths.set_probe_salt(
                    u64::from(peer.0) << 48
                        ^ u64::from(self.qpn) << 24
                        ^ u64::from(self.remote_qpn),
                );
                // spec: WIRE-OP-2
                self.caps = self.local_caps.intersect(remote_caps);
                let start = PSN_BASE + u64::from(rq_psn & crate::wire::PSN_MASK);
                self.resp.rx = PsnTracker::new(start, u64::from(self.cfg().mpr) * 128);
                self.state = Rtr;
            }
            (Rtr, Transition::Rts { sq_psn }) => {
                self.req.sent =
                    SentWindow::new(PSN_BASE + u64::from(sq_psn & crate::wire::PSN_MASK));
                self.state = Rts;
            }
            (_, Transition::Error) => self.enter_error(None, now),
            (_, Transition::Reset) => {
                let fresh = Qp::new(self.qpn, self.init.clone(), self.local_caps)
                    .map_err(ModifyError::Config)?;
                *self = fresh;
            }
            (s, _) => return Err(ModifyError::BadTransition(s)),
        }
        Ok(())
    }

    /// Validates and queues a send work request (spec QP-POST-1).
    // spec: QP-POST-1
    pub(crate) fn post_send(&mut self, wr: &SendWr<'_>, mrs: &MrTable) -> Result<(), PostError> {
        if self.state != QpState::Rts {
            return Err(PostError::BadState(self.state));
        }
        self.req_used = true;
        if self.req.sq_used >= self.init.max_send_wr {
            return Err(PostError::QueueFull);
        }
        if wr.sges.len() > self.init.max_sge as usize {
            return Err(PostError::TooManySge);
        }
        let (kind, remote_addr, rkey, imm, need) = match wr.op {
            SendOp::Write { remote_addr, rkey } => {
                (WqeKind::Write, remote_addr, rkey, None, Access::NONE)
            }
            SendOp::WriteImm {
                remote_addr,
                rkey,
                imm,
            } => {
                // spec: QP-WIMM-1
                if self.req.wimm_inflight >= u32::from(self.cfg().max_wimm) {
                    self.req.ack_probe_wanted = true;
                    return Err(PostError::WimmCap);
                }
                (WqeKind::Write, remote_addr, rkey, Some(imm), Access::NONE)
            }
            SendOp::Send { imm } => {
                if !self.caps.send {
                    return Err(PostError::Unsupported);
                }
                (WqeKind::Send, 0, 0, imm, Access::NONE)
            }
            SendOp::Read { remote_addr, rkey } => {
                if !self.caps.read {
                    return Err(PostError::Unsupported);
                }
                (WqeKind::Read, remote_addr, rkey, None, Access::LOCAL_WRITE)
            }
        };
        let mut len: u64 = 0;
        for s in wr.sges {
            mrs.check(s.lkey, self.init.pd, s.addr, u64::from(s.len), need)
                .map_err(PostError::LocalAccess)?;
            len += u64::from(s.len);
        }
        let len = u32::try_from(len).map_err(|_| PostError::TooLong)?;
        if imm.is_some() && kind == WqeKind::Write {
            self.req.wimm_inflight += 1;
        }
        self.req.sq.push_back(SendWqe::new(
            wr.wr_id,
            kind,
            wr.sges.iter().copied().collect(),
            len,
            remote_addr,
            rkey,
            imm,
            wr.signaled || self.init.sq_sig_all,
            wr.solicited,
        ));
        self.req.sq_used += 1;
        Ok(())
    }

    /// Validates and queues a receive work request.
    pub(crate) fn post_recv(&mut self, wr: &RecvWr<'_>, mrs: &MrTable) -> Result<(), PostError> {
        if matches!(self.state, QpState::Reset | QpState::Error) {
            return Err(PostError::BadState(self.state));
        }
        if self.resp.rq.len() >= self.init.max_recv_wr as usize {
            return Err(PostError::QueueFull);
        }
        if wr.sges.len() > self.init.max_sge as usize {
            return Err(PostError::TooManySge);
        }
        let mut len = 0u64;
        for s in wr.sges {
            mrs.check(
                s.lkey,
                self.init.pd,
                s.addr,
                u64::from(s.len),
                Access::LOCAL_WRITE,
            )
            .map_err(PostError::LocalAccess)?;
            len += u64::from(s.len);
        }
        self.resp.rq.push_back(RecvWqe {
            wr_id: wr.wr_id,
            sges: wr.sges.iter().copied().collect(),
            len,
        });
        Ok(())
    }

    pub(crate) fn complete(&mut self, cq: CqId, c: Completion) {
        if c.status == WcStatus::Success {
            self.stats.completions += 1;
        } else {
            self.stats.error_completions += 1;
        }
        self.out.cqes.push((cq, c));
    }

    /// Moves to ERROR: the failing request (if any) completes with its status, everything else is flushed
    /// (spec QP-ERR-1).
    // spec: QP-ERR-1
    pub(crate) fn enter_error(&mut self, failed: Option<(u64, WcStatus)>, _now: Instant) {
        if self.state == QpState::Error {
            return;
        }
        self.state = QpState::Error;
        self.out.went_to_error = true;
        let qpn = self.qpn;
        let send_cq = self.init.send_cq;
        let recv_cq = self.init.recv_cq;
        let sq = std::mem::take(&mut self.req.sq);
        for (i, w) in sq.into_iter().enumerate() {
            if matches!(w.kind, WqeKind::ReadResponse { .. }) {
                continue;
            }
            let seq = self.req.sq_base + i as u64;
            let status = match failed {
                Some((s, st)) if s == seq => st,
                _ => WcStatus::WrFlushErr,
            };
            let opcode = w.opcode();
            self.complete(
                send_cq,
                Completion {
                    wr_id: w.wr_id,
                    status,
                    opcode,
                    byte_len: 0,
                    imm: None,
                    qpn,
                },
            );
        }
        let rq = std::mem::take(&mut self.resp.rq);
        for w in rq {
            self.complete(
                recv_cq,
                Completion {
                    wr_id: w.wr_id,
                    status: WcStatus::WrFlushErr,
                    opcode: WcOpcode::Recv,
                    byte_len: 0,
                    imm: None,
                    qpn,
                },
            );
        }
        self.req.sq_used = 0;
        self.req.unsignaled_done = 0;
        self.req.retx.clear();
        self.req.suspects.clear();
        self.req.delayed.clear();
        self.feedback.ctl.clear();
        self.feedback.sack_now = false;
        self.feedback.ack_pending = false;
        self.timers.stop_all();
    }

    /// Whether the endpoint has nothing to collect from this QP: no completion, no event, no deadline that may
    /// have moved earlier (a timer set before the filed one, or a new front of the window for the deadlines
    /// derived from it). Then only its place in the ready queue can need attention.
    pub(crate) fn nothing_to_file(&self) -> bool {
        self.out.cqes.is_empty()
            && self.out.ev_changes.is_empty()
            && !self.out.went_to_error
            && !self.timers.moved_earlier()
            && (self.state != QpState::Rts || !self.req_used || !self.req.sent.front_moved())
    }

    /// Whether the requester has work that is not yet acknowledged.
    pub(crate) fn has_outstanding(&self) -> bool {
        !self.req.sent.is_empty() || self.req.sq_next < self.req.sq_base + self.req.sq.len() as u64
    }

    /// The earliest time this QP needs [`on_timeout`](Self::on_timeout). The timers derived from the packets
    /// in flight and the paths are brought up to date first.
    pub(crate) fn next_deadline(&mut self) -> Instant {
        if matches!(self.state, QpState::Reset | QpState::Init | QpState::Error) {
            return Instant::MAX;
        }
        let requester = self.state == QpState::Rts;
        if requester {
            self.timers
                .derive(Timer::PathProbe, self.paths.probe_deadline());
            if !self.req_used {
                // The other requester timers have never run.
                return self.timers.next(requester);
            }
        }
        let rnr = self.req.delayed.front().map_or(Instant::MAX, |&(t, _)| t);
        self.timers.derive(Timer::RnrResend, rnr);
        if requester {
            let min = self.min_rtt_ns();
            let d = self
                .req
                .sent
                .deadlines(self.req.rack, min, self.req.rtt.rto_ns());
            self.timers
                .derive(Timer::LossTime, d.loss.unwrap_or(Instant::MAX));
            let tail = self.tail_probe_due_after(d.oldest, min);
            self.timers
                .derive(Timer::TailProbe, tail.unwrap_or(Instant::MAX));
            self.timers
                .derive(Timer::Rto, d.rto.unwrap_or(Instant::MAX));
        }
        self.timers.next(requester)
    }

    /// Handles every timer that has expired at `now`.
    pub(crate) fn on_timeout(&mut self, now: Instant) {
        if matches!(self.state, QpState::Reset | QpState::Init | QpState::Error) {
            return;
        }
        if self.timers.take_expired(Timer::Sack, now) {
            self.feedback.sack_now = true;
        }
        if !self.req_used {
            if self.state == QpState::Rts {
                self.collect_ev_changes();
            }
            return;
        }
        while let Some(&(t, psn)) = self.req.delayed.front() {
            if t > now {
                break;
            }
            self.req.delayed.pop_front();
            if self
                .req
                .sent
                .get(psn)
                .is_some_and(|p| p.state == crate::reliability::PktState::Lost)
            {
                self.req.retx.push_back(psn);
            }
        }
        if self.state != QpState::Rts {
            return;
        }
        self.detect_losses_rack(now);
        // Only here, not after every SACK: a tail probe that an acknowledgement makes due is filed as a deadline
        // already passed, so the timer fires at once; asking on every SACK cost as much as the time rule did.
        self.check_tail(now);
        self.detect_losses_rto(now);
        if self.timers.is_expired(Timer::Retry, now) {
            self.on_retry_timeout(now);
        }
        self.collect_ev_changes();
    }

    /// QP local-ACK timeout: no progress for the timeout. Retry (linear, then exponential backoff), and after
    /// the last retry fail the oldest request with RETRY_EXC (spec REL-QPTO-1).
    fn on_retry_timeout(&mut self, now: Instant) {
        let Some(timeout) = self.cfg().qp_timeout() else {
            self.timers.stop(Timer::Retry);
            return;
        };
        if !self.has_outstanding() {
            self.timers.stop(Timer::Retry);
            return;
        }
        self.req.retries += 1;
        self.stats.retries += 1;
        let linear = u32::from(self.cfg().retry_linear);
        let exp = u32::from(self.cfg().retry_exp);
        let unlimited = exp >= 25;
        if !unlimited && self.req.retries > linear + exp {
            let status = if self.req.last_nack_rnr {
                WcStatus::RnrRetryExcErr
            } else {
                WcStatus::RetryExcErr
            };
            let failed = self.oldest_app_wqe().map(|s| (s, status));
            self.enter_error(failed, now);
            return;
        }
        // spec: REL-QPTO-2
        let interval = if self.req.retries <= linear {
            timeout
        } else {
            timeout.saturating_mul(1 << (self.req.retries - linear).min(16))
        };
        self.timers.set(Timer::Retry, now + interval);
        // Nothing acknowledged for a whole QP timeout: whatever is still in flight is lost, as TCP's RTO takes
        // it, and is resent oldest first, on any EV if none is usable. Only the oldest used to be: packets that
        // the time rule held for a long wait kept the window shut, so not even that one could go, until the
        // retries ran out (a proptest at 27% loss).
        for psn in (self.req.sent.una()..self.req.sent.nxt()).rev() {
            if self.req.sent.mark_lost(psn).is_some() {
                self.req.retx.push_front(psn);
            }
        }
        self.req.force_any_ev = !self.paths.usable();
    }

    fn oldest_app_wqe(&self) -> Option<u64> {
        self.req
            .sq
            .iter()
            .position(|w| !matches!(w.kind, WqeKind::ReadResponse { .. }))
            .map(|i| self.req.sq_base + i as u64)
    }

    /// (Re)arms the QP timeout after progress or when work appears.
    #[inline]
    pub(crate) fn arm_retry(&mut self, now: Instant, progress: bool) {
        if !progress && self.timers.is_running(Timer::Retry) {
            // Every packet sent asks; only work appearing with the timer stopped arms it.
            return;
        }
        let Some(timeout) = self.cfg().qp_timeout() else {
            return;
        };
        if progress {
            self.req.retries = 0;
            self.req.last_nack_rnr = false;
            if self.has_outstanding() {
                self.timers.set(Timer::Retry, now + timeout);
            } else {
                self.timers.stop(Timer::Retry);
            }
        } else if !self.timers.is_running(Timer::Retry) && self.has_outstanding() {
            self.timers.set(Timer::Retry, now + timeout);
        }
    }

    /// Inline, as every SACK asks and few find a change.
    #[inline]
    pub(crate) fn collect_ev_changes(&mut self) {
        if self.paths.has_changes() {
            self.move_ev_changes();
        }
    }

    #[inline(never)]
    fn move_ev_changes(&mut self) {
        for c in self.paths.drain_changes() {
            match c.to {
                crate::path::EvState::AssumedBad => self.stats.ev_retirements += 1,
                crate::path::EvState::Good | crate::path::EvState::Skip
                    if c.from == crate::path::EvState::AssumedBad =>
                {
                    self.stats.ev_restorations += 1
                }
                _ => {}
            }
            self.out.ev_changes.push(c);
        }
    }

    /// Receive-window penalty advertised to the peer (0 none … 127 one packet per RTT).
    pub(crate) fn set_receive_penalty(&mut self, pen: u8) {
        self.feedback.rcv_pen = pen.min(127);
    }
}
