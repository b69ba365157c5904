//! What the fuzzer chooses: the setup, and the steps (real datagrams, forged packets, posts, time).

use arbitrary::Arbitrary;

/// Which peer a hand-made datagram claims to come from.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum From {
    /// The QP's own peer (spoofed source, the attacker's best case).
    Peer,
    /// Another endpoint the driver knows.
    Other,
    /// A source the driver cannot name.
    Unknown,
}

/// A QPN: the real one or any.
#[derive(Debug, Clone, Copy, Arbitrary)]
pub enum Qpn {
    /// The target QP.
    Real,
    /// The endpoint QPN (2).
    Endpoint,
    /// Anything.
    Raw(u32),
}

/// A forged packet; PSNs are offsets from the newest PSN the other side really sent, so that the fuzzer hits
/// windows easily.
#[derive(Debug, Clone, Arbitrary)]
pub enum Forged {
    /// A data packet.
    Data {
        /// Opcode byte (all data opcodes and more).
        opcode: u8,
        /// PSN offset.
        psn: i16,
        /// MSN.
        msn: u16,
        /// RQMSN.
        rqmsn: u16,
        /// Target buffer of the receiver (any number: may name none).
        buffer: u8,
        /// Offset in it (may leave it).
        offset: u16,
        /// Use the region's key, or this one.
        rkey: Option<u32>,
        /// DMA length.
        dma_len: u16,
        /// Immediate.
        imm: Option<u32>,
        /// Payload length.
        payload: u16,
        /// TSETH.
        ts: Option<u32>,
        /// BTH flags.
        rtx: bool,
        /// BTH.A.
        ack_req: bool,
    },
    /// A SACK.
    Sack {
        /// CACK_PSN offset.
        cack: i16,
        /// Base offset from CACK_PSN.
        base: i16,
        /// Bitmap.
        bitmap: u64,
        /// Mark (0..=2).
        mark: u8,
        /// PR.
        probe_reply: bool,
        /// MPR.
        mpr: u8,
        /// EV.
        ev: u32,
        /// TS echo.
        ts_echo: Option<u32>,
        /// Penalty.
        cwnd_pen: u8,
    },
    /// A NACK.
    Nack {
        /// Reason byte.
        reason: u8,
        /// PSN offset.
        psn: i16,
        /// CACK_PSN offset.
        cack: i16,
        /// EV.
        ev: u32,
        /// Echo the send time of the newest real data packet, or this value.
        ts_echo: Option<u32>,
        /// MPR.
        mpr: u8,
    },
    /// A transport ACK.
    Ack {
        /// CACK_PSN offset.
        cack: i16,
        /// CMSN.
        cmsn: u16,
    },
    /// A probe.
    Probe {
        /// EV.
        ev: u32,
        /// TS.
        ts: u32,
        /// BTH.A.
        ack_req: bool,
    },
    /// An endpoint request.
    EpRequest {
        /// Op byte.
        op: u8,
        /// Request id.
        req_id: u32,
        /// Port mask.
        port_mask: u32,
        /// EV.
        ev: u32,
        /// TS.
        ts: Option<u32>,
    },
    /// An endpoint response.
    EpResponse {
        /// Op byte.
        op: u8,
        /// Port.
        rx_port: u8,
        /// Request id (small values match probes in flight).
        req_id: u32,
        /// EV.
        ev: u32,
        /// TS echo.
        ts_echo: u32,
    },
}

/// A send work request.
#[derive(Debug, Clone, Arbitrary)]
pub struct Wr {
    /// WRITE, WRITE_IMM, SEND, READ.
    pub kind: u8,
    /// Local buffer, offset, length.
    pub local: (u8, u16, u16),
    /// A second scatter/gather element, if any.
    pub second: Option<(u8, u16, u16)>,
    /// Remote buffer and offset.
    pub remote: (u8, u16),
    /// Use the remote region's key, or this one.
    pub rkey: Option<u32>,
    /// Signaled.
    pub signaled: bool,
    /// Immediate.
    pub imm: u32,
}

/// One step.
#[derive(Debug, Clone, Arbitrary)]
pub enum Op {
    /// Let `node` send up to `n` datagrams.
    Pump {
        /// A (false) or B (true).
        node: bool,
        /// How many.
        n: u8,
    },
    /// Deliver the datagram at `pick` of the queue from `from`.
    Deliver {
        /// Sender.
        from: bool,
        /// Index (modulo the queue length).
        pick: u16,
        /// ECN CE.
        ce: bool,
    },
    /// Deliver everything queued from `from`, in order.
    DeliverAll {
        /// Sender.
        from: bool,
    },
    /// Drop a queued datagram.
    Drop {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
    },
    /// Deliver a copy and keep the original queued.
    Duplicate {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
    },
    /// Deliver a changed copy of a queued datagram.
    Mutate {
        /// Sender.
        from: bool,
        /// Index.
        pick: u16,
        /// Byte to flip, and how.
        flip: Option<(u16, u8)>,
        /// Keep only this many bytes.
        cut: Option<u16>,
        /// Recompute the ICRC afterwards.
        reseal: bool,
        /// Deliver as trimmed (cut to 64 bytes, marked).
        trim: Option<bool>,
        /// Claimed sender.
        claim: From,
    },
    /// A forged packet to `to`'s QP (or endpoint).
    Forge {
        /// Receiver.
        to: bool,
        /// Destination QPN.
        qpn: Qpn,
        /// The packet.
        packet: Forged,
        /// Claimed sender.
        claim: From,
        /// Arrival port.
        port: u8,
    },
    /// Bytes as they come.
    Raw {
        /// Receiver.
        to: bool,
        /// The datagram.
        bytes: Vec<u8>,
        /// Claimed sender.
        claim: From,
    },
    /// Post a send work request.
    Post {
        /// Poster.
        node: bool,
        /// The request.
        wr: Wr,
    },
    /// Post a receive.
    PostRecv {
        /// Poster.
        node: bool,
        /// Buffer, offset, length; `None`: no buffer (WRITE_WITH_IMM only).
        sge: Option<(u8, u16, u16)>,
    },
    /// Time passes; due timers run.
    Advance {
        /// Nanoseconds (up to about 4 ms).
        ns: u32,
    },
    /// Jump to the next timer of either side and run it.
    NextTimer,
    /// Poll completions.
    PollCq {
        /// Node.
        node: bool,
        /// At most this many.
        n: u8,
    },
    /// A port goes down or up.
    Port {
        /// Node.
        node: bool,
        /// Port.
        port: u8,
        /// Up.
        up: bool,
    },
    /// Register a piece of a buffer.
    Register {
        /// Node.
        node: bool,
        /// Buffer, offset, length.
        at: (u8, u16, u16),
        /// Rights (verbs bits).
        access: u8,
    },
    /// Deregister a region.
    Deregister {
        /// Node.
        node: bool,
        /// Which live region.
        pick: u8,
    },
    /// Deny or allow an EV.
    Deny {
        /// Node.
        node: bool,
        /// Which EV.
        pick: u8,
        /// Deny.
        deny: bool,
    },
    /// Report an EV unreachable (an ICMP error): an even `pick` names an EV directly, an odd one bounces a
    /// datagram the node has queued (it is not delivered), quoted whole or cut short.
    Unreachable {
        /// Node.
        node: bool,
        /// Which EV.
        pick: u8,
    },
    /// Send an endpoint EV probe.
    EvProbe {
        /// Node.
        node: bool,
        /// EV.
        ev: u32,
        /// Plane.
        plane: u8,
    },
    /// Set the receive penalty.
    Penalty {
        /// Node.
        node: bool,
        /// Penalty.
        pen: u8,
    },
    /// Move the QP to ERROR.
    Fail {
        /// Node.
        node: bool,
    },
}

/// Transport settings chosen by the fuzzer.
#[derive(Debug, Clone, Arbitrary)]
pub struct Setup {
    /// Planes (1..=3).
    pub planes: u8,
    /// EVs per plane (1..=4).
    pub per_plane: u8,
    /// Payload bytes per packet (64..=319).
    pub mtu: u8,
    /// ICRC on.
    pub icrc: bool,
    /// Receive window (1..=2 × 128 PSNs).
    pub mpr: bool,
    /// `max_wimm`, `max_wimm_dest`, `max_read_dest` (1..=4 each).
    pub caps: (u8, u8, u8),
    /// Extensions of each side.
    pub ext: (bool, bool),
    /// QP timeout exponent (0: none, else 8..=15) and retries.
    pub timeout: (u8, u8, u8),
    /// Small CQs that can overrun (else 128 entries).
    pub small_cq: Option<u8>,
    /// First PSNs.
    pub psns: (u32, u32),
    /// QPN seeds.
    pub seeds: (u64, u64),
    /// Zero-copy memory on each side.
    pub lend: (bool, bool),
}

/// A whole fuzz input.
#[derive(Debug, Clone, Arbitrary)]
pub struct Input {
    /// Settings.
    pub setup: Setup,
    /// Steps.
    pub ops: Vec<Op>,
}
