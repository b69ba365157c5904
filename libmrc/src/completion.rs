//! Work completions and completion queues, shaped like verbs' `ibv_wc` and `ibv_cq`.

use std::collections::VecDeque;

/// Outcome of a work request (the verbs `ibv_wc_status` values where one exists).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcStatus {
    /// Completed.
    Success,
    /// A receive buffer was too small for the message.
    LocLenErr,
    /// Local QP error.
    LocQpOpErr,
    /// A local key, bound or access right was wrong.
    LocProtErr,
    /// Flushed because the QP entered the error state.
    WrFlushErr,
    /// The peer rejected the request as invalid (unsupported opcode, message too long for its buffer).
    RemInvReqErr,
    /// The peer refused the remote key, bounds or access rights.
    RemAccessErr,
    /// The peer hit an operational error.
    RemOpErr,
    /// The QP retry count was exhausted without progress.
    RetryExcErr,
    /// The peer kept answering "no receive buffer" until the retries ran out.
    RnrRetryExcErr,
}

impl WcStatus {
    /// The verbs `ibv_wc_status` value.
    pub const fn to_verbs(self) -> u32 {
        match self {
            Self::Success => 0,
            Self::LocLenErr => 1,
            Self::LocQpOpErr => 2,
            Self::LocProtErr => 4,
            Self::WrFlushErr => 5,
            Self::RemInvReqErr => 9,
            Self::RemAccessErr => 10,
            Self::RemOpErr => 11,
            Self::RetryExcErr => 12,
            Self::RnrRetryExcErr => 13,
        }
    }
}

/// What completed (the verbs `ibv_wc_opcode` values).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WcOpcode {
    /// A SEND (with or without immediate).
    Send,
    /// An RDMA WRITE (with or without immediate).
    RdmaWrite,
    /// An RDMA READ.
    RdmaRead,
    /// A received SEND.
    Recv,
    /// A received WRITE_WITH_IMM.
    RecvRdmaWithImm,
}

impl WcOpcode {
    /// The verbs `ibv_wc_opcode` value.
    pub const fn to_verbs(self) -> u32 {
        match self {
            Self::Send => 0,
            Self::RdmaWrite => 1,
            Self::RdmaRead => 2,
            Self::Recv => 128,
            Self::RecvRdmaWithImm => 129,
        }
    }
}

/// One work completion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Completion {
    /// The work request's id.
    pub wr_id: u64,
    /// Outcome.
    pub status: WcStatus,
    /// What completed.
    pub opcode: WcOpcode,
    /// Bytes received (receive completions) or read; 0 otherwise.
    pub byte_len: u32,
    /// Immediate data, on receive completions of messages that carried it.
    pub imm: Option<u32>,
    /// The local QP.
    pub qpn: u32,
}

impl Default for Completion {
    /// A placeholder for completion buffers handed to `poll_cq`.
    fn default() -> Self {
        Self {
            wr_id: 0,
            status: WcStatus::Success,
            opcode: WcOpcode::Send,
            byte_len: 0,
            imm: None,
            qpn: 0,
        }
    }
}

/// A completion queue handle.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct CqId(pub(crate) u32);

impl CqId {
    /// The queue's number (for handles in C front ends).
    pub const fn id(self) -> u32 {
        self.0
    }
}

/// A completion queue of at most `depth` entries. As on a verbs device, a completion that finds it full is
/// lost and puts the queue in error for good: the endpoint raises a CQ error event and fails the QPs that
/// complete into it (spec QP-CQ-4). Completions arriving after that are lost too (counted as overruns).
#[derive(Debug, Clone)]
pub(crate) struct Cq {
    pub(crate) entries: VecDeque<Completion>,
    pub(crate) depth: usize,
    /// Completions lost.
    pub(crate) overruns: u64,
    /// The queue overran and is in error.
    pub(crate) failed: bool,
}

impl Cq {
    pub(crate) fn new(depth: usize) -> Self {
        Self {
            entries: VecDeque::new(),
            depth,
            overruns: 0,
            failed: false,
        }
    }

    /// Queues a completion; true when this one overran the queue (which is then in error).
    pub(crate) fn push(&mut self, c: Completion) -> bool {
        if self.failed {
            self.overruns += 1;
            return false;
        }
        if self.entries.len() >= self.depth {
            self.overruns += 1;
            self.failed = true;
            return true;
        }
        self.entries.push_back(c);
        false
    }
}
