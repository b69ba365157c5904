//! What a QP's users see: its states and transitions, work requests, errors and counters.

use super::*;

/// QP states (spec QP-STATE-1), numbered as verbs numbers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum QpState {
    /// Just created or reset: nothing may be posted.
    Reset,
    /// Receives may be posted; nothing moves.
    Init,
    /// Ready to receive: the peer is known; incoming data is placed and acknowledged.
    Rtr,
    /// Ready to send.
    Rts,
    /// Failed: every outstanding work request has been flushed.
    Error,
}

impl QpState {
    /// The verbs `ibv_qp_state` value.
    pub const fn to_verbs(self) -> u32 {
        match self {
            Self::Reset => 0,
            Self::Init => 1,
            Self::Rtr => 2,
            Self::Rts => 3,
            Self::Error => 6,
        }
    }
}

/// Everything fixed at QP creation.
#[derive(Debug, Clone)]
pub struct QpInit {
    /// Protection domain: the QP touches only regions of this domain.
    pub pd: Pd,
    /// Where send completions go.
    pub send_cq: CqId,
    /// Where receive completions go.
    pub recv_cq: CqId,
    /// Send queue depth.
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Most scatter/gather elements per work request.
    pub max_sge: u32,
    /// Every send work request is signaled.
    pub sq_sig_all: bool,
    /// Transport parameters.
    pub config: QpConfig,
}

impl QpInit {
    /// Defaults for `pd` with both completion queues `cq`.
    pub fn new(pd: Pd, cq: CqId) -> Self {
        Self {
            pd,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            max_sge: 4,
            sq_sig_all: false,
            config: QpConfig::default(),
        }
    }
}

/// A state transition (the verbs `ibv_modify_qp` calls this engine supports).
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum Transition {
    /// RESET → INIT, with the remote access this QP grants.
    Init {
        /// `REMOTE_WRITE` and/or `REMOTE_READ`.
        access: Access,
    },
    /// INIT → RTR: the peer is known.
    Rtr {
        /// The peer endpoint.
        peer: PeerId,
        /// The peer's QPN.
        remote_qpn: u32,
        /// First PSN expected from the peer (24 bits).
        rq_psn: u32,
        /// Extensions the peer offers.
        remote_caps: Caps,
    },
    /// RTR → RTS.
    Rts {
        /// First PSN this QP sends (24 bits).
        sq_psn: u32,
    },
    /// Any state → ERROR: flush everything.
    Error,
    /// Any state → RESET: forget everything.
    Reset,
}

/// What a send work request does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum SendOp {
    /// RDMA WRITE to `remote_addr` in the peer's region `rkey`.
    Write {
        /// Target address.
        remote_addr: u64,
        /// Target region key.
        rkey: u32,
    },
    /// RDMA WRITE with immediate data, which completes a receive at the peer.
    WriteImm {
        /// Target address.
        remote_addr: u64,
        /// Target region key.
        rkey: u32,
        /// Immediate data.
        imm: u32,
    },
    /// SEND into the peer's next receive buffer (extension).
    Send {
        /// Immediate data, if any.
        imm: Option<u32>,
    },
    /// RDMA READ from `remote_addr` into the local buffers (extension).
    Read {
        /// Source address at the peer.
        remote_addr: u64,
        /// Source region key.
        rkey: u32,
    },
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Local buffers: the payload source, or the READ destination.
    pub sges: &'a [Sge],
    /// Generate a completion (always true when the QP signals all).
    pub signaled: bool,
    /// Ask for a solicited event at the peer (SEND, WRITE_WITH_IMM).
    pub solicited: bool,
}

/// A receive work request.
#[derive(Debug, Clone, Copy)]
pub struct RecvWr<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// Where a SEND's payload goes (may be empty for WRITE_WITH_IMM-only use).
    pub sges: &'a [Sge],
}

/// Why a work request was refused at posting.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum PostError {
    /// No QP has this number.
    NoSuchQp,
    /// The QP's state does not allow this.
    BadState(QpState),
    /// The queue is full (unsignaled requests free their slots only when a later signaled one completes).
    QueueFull,
    /// `max_wimm` WRITE_WITH_IMM are outstanding.
    WimmCap,
    /// The operation needs an extension the peer or this endpoint lacks.
    Unsupported,
    /// More scatter/gather elements than the QP allows.
    TooManySge,
    /// A local buffer failed its key, bounds or access check.
    LocalAccess(AccessError),
    /// The message is longer than 2^32 − 1 bytes.
    TooLong,
}

impl core::fmt::Display for PostError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchQp => write!(f, "no QP has this number"),
            Self::BadState(s) => write!(f, "the QP is in state {s:?}"),
            Self::QueueFull => write!(f, "the work queue is full"),
            Self::WimmCap => write!(f, "max_wimm WRITE_WITH_IMM are outstanding"),
            Self::Unsupported => write!(f, "the operation needs an extension the peer lacks"),
            Self::TooManySge => write!(f, "too many scatter/gather elements"),
            Self::LocalAccess(e) => write!(f, "local buffer: {e}"),
            Self::TooLong => write!(f, "the message is longer than 4 GiB - 1"),
        }
    }
}

impl std::error::Error for PostError {}

impl PostError {
    /// The `errno` a C API returns, as `ibv_post_send` does: `ENOMEM` for a full queue (or the WRITE_WITH_IMM
    /// cap), `E2BIG` for too many elements, `EOPNOTSUPP`, `EMSGSIZE`, the buffer's own code for a local access
    /// error, and `EINVAL` for a bad QP or state.
    pub const fn errno(&self) -> i32 {
        use crate::error::errno;
        match self {
            Self::NoSuchQp | Self::BadState(_) => errno::EINVAL,
            Self::QueueFull | Self::WimmCap => errno::ENOMEM,
            Self::Unsupported => errno::EOPNOTSUPP,
            Self::TooManySge => errno::E2BIG,
            Self::LocalAccess(e) => e.errno(),
            Self::TooLong => errno::EMSGSIZE,
        }
    }
}

/// Why a transition was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ModifyError {
    /// No QP has this number.
    NoSuchQp,
    /// This transition is not allowed from the current state.
    BadTransition(QpState),
    /// The configuration is invalid.
    Config(ConfigError),
}

impl core::fmt::Display for ModifyError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoSuchQp => write!(f, "no QP has this number"),
            Self::BadTransition(s) => write!(f, "transition not allowed from state {s:?}"),
            Self::Config(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for ModifyError {}

impl ModifyError {
    /// The `errno` a C API returns, as `ibv_modify_qp` does: `EINVAL` for a bad QP or transition, the
    /// configuration's own code otherwise.
    pub const fn errno(&self) -> i32 {
        match self {
            Self::NoSuchQp | Self::BadTransition(_) => crate::error::errno::EINVAL,
            Self::Config(e) => e.errno(),
        }
    }
}

/// Counters of one QP. Those every data packet or SACK moves come first, next to each other in the QP's record
/// (two cache lines there: aligning the block to one line grew the record by 64 bytes and cost more misses than
/// it saved, sim/README.md "Where the 8K/1K gap sits").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct QpStats {
    /// Data packets sent (first transmissions and retransmissions).
    pub tx_data_packets: u64,
    /// Payload bytes sent.
    pub tx_data_bytes: u64,
    /// Data packets accepted and placed.
    pub rx_data_packets: u64,
    /// Payload bytes placed.
    pub rx_data_bytes: u64,
    /// SACKs sent.
    pub tx_sacks: u64,
    /// SACKs received.
    pub rx_sacks: u64,
    /// CE marks reported by the peer.
    pub ecn_marks: u64,
    /// Successful completions generated.
    pub completions: u64,
    /// Retransmissions sent.
    pub tx_retransmits: u64,
    /// Path probes sent.
    pub tx_probes: u64,
    /// NACKs sent.
    pub tx_nacks: u64,
    /// Transport ACKs sent.
    pub tx_acks: u64,
    /// Duplicate data packets (already received).
    pub rx_duplicates: u64,
    /// Trimmed packets received.
    pub rx_trimmed: u64,
    /// Data packets beyond the receive window.
    pub rx_out_of_window: u64,
    /// Data packets refused for key, bounds or access.
    pub rx_access_errors: u64,
    /// Data packets refused for want of a receive buffer or an immediate slot.
    pub rx_no_resource: u64,
    /// Data packets refused as invalid (unsupported, too long, inconsistent).
    pub rx_invalid: u64,
    /// SACKs or NACKs that made no sense (acknowledging unsent PSNs).
    pub rx_bad_acks: u64,
    /// NACKs received, by kind: trims.
    pub rx_trim_nacks: u64,
    /// NACKs received asking to retry later (no resource, out of window).
    pub rx_retry_nacks: u64,
    /// Fatal NACKs received.
    pub rx_fatal_nacks: u64,
    /// NACKs with an unknown reason.
    pub rx_unknown_nacks: u64,
    /// Transport ACKs received.
    pub rx_acks: u64,
    /// Probes answered.
    pub rx_probes: u64,
    /// READ responses that matched no outstanding READ.
    pub rx_unexpected_read_responses: u64,
    /// Packets declared lost by time-based detection.
    pub losses_rack: u64,
    /// Packets declared lost by the per-packet RTO.
    pub losses_rto: u64,
    /// PSNs presumed lost because the EV they were in flight on was retired for a loss (spec PATH-EV-4).
    pub losses_path: u64,
    /// Tail loss probes sent (spec REL-TLP-1).
    pub tail_probes: u64,
    /// PSNs presumed lost because the plane they were in flight on was retired (spec PATH-PLANE-2).
    pub losses_plane: u64,
    /// QP-timeout retries.
    pub retries: u64,
    /// Error completions generated (flushes included).
    pub error_completions: u64,
    /// EV retirements.
    pub ev_retirements: u64,
    /// EV restorations.
    pub ev_restorations: u64,
}
