//! The MRC v1 wire format (`spec/wire.md`): packet headers, ICRC, IPv6/UDP framing, uSID containers and EV
//! expansion.
//!
//! Every header follows smoltcp's Repr contract: `parse` checks lengths before it reads a byte, and once a
//! length check has passed nothing can panic, whatever the bytes say. Parsing borrows the payload instead of
//! copying it, and neither parsing nor emitting allocates.
//!
//! The unit of work is [`Packet`], one UDP payload: BTH, extension headers, payload, ICRC. [`Frame`] wraps it in
//! IPv6 and UDP for test vectors, simulator traces and pcap export.

mod auth;
mod bth;
mod control;
mod data;
mod ev;
mod icrc;
mod ip;
mod opcode;
mod packet;
mod usid;

pub use auth::{AUTH_LEN, AuthKey, AuthTag};
pub use bth::{Bth, peek_dest_qp};
pub use control::{
    Ack, EpOp, EpRequest, EpResponse, Nack, NackReason, Probe, SACK_LEN, Sack, SackMark,
};
pub use data::{Data, DataHeader, Meth, Reth};
pub use ev::{EvField, EvTemplate, EvTemplateError, PlaneTemplates, path_of, plane_of};
pub use icrc::{icrc, icrc_parts, seal};
pub use ip::{
    ECN_CE, ECN_ECT0, ECN_ECT1, ECN_NOT_ECT, Frame, IP_PROTO_UDP, Ipv6Header, TrafficClass,
    UdpHeader, traffic_class,
};
pub use opcode::{OpKind, Opcode, Position};
pub use packet::{Body, Packet, ParseOptions};
pub use usid::{MAX_USIDS, UsidContainer, UsidError};

use core::fmt;

// spec: WIRE-ENC-1
/// UDP destination port of every MRC packet.
pub const UDP_PORT: u16 = 4791;
// spec: WIRE-BTH-1
/// Transport version written in BTH.TVer; parsing rejects any other.
pub const TVER: u8 = 1;
// spec: WIRE-EP-1
/// Reserved QPN that endpoint packets (EP_REQUEST, EP_RESPONSE) are addressed to.
pub const EP_QPN: u32 = 2;
// spec: WIRE-BTH-3
/// P_Key of a QP that was not configured otherwise.
pub const DEFAULT_PKEY: u16 = 0xFFFF;

/// Base transport header.
pub const BTH_LEN: usize = 12;
/// Message extended transport header.
pub const METH_LEN: usize = 8;
/// Timestamp extended transport header.
pub const TSETH_LEN: usize = 4;
/// RDMA extended transport header.
pub const RETH_LEN: usize = 16;
/// Immediate data.
pub const IMM_LEN: usize = 4;
/// Selective-ACK extended transport header.
pub const SETH_LEN: usize = 24;
/// Congestion-control extended transport header (follows the SETH).
pub const CCETH_LEN: usize = 8;
/// NACK extended transport header.
pub const NETH_LEN: usize = 16;
/// Probe extended transport header.
pub const PETH_LEN: usize = 8;
/// ACK extended transport header.
pub const AETH_LEN: usize = 8;
/// Endpoint request header.
pub const ERTH_LEN: usize = 16;
/// Endpoint response header.
pub const EETH_LEN: usize = 16;
/// Invariant CRC trailer.
pub const ICRC_LEN: usize = 4;
/// The longest header stack of a data packet (BTH METH TSETH RETH ImmDt): 44 bytes.
pub const MAX_DATA_HEADER_LEN: usize = BTH_LEN + METH_LEN + TSETH_LEN + RETH_LEN + IMM_LEN;
/// PSNs (and QPNs) are 24 bits on the wire.
pub const PSN_MASK: u32 = 0x00FF_FFFF;
// spec: WIRE-ICRC-2
/// Bytes of UDP payload a trimming switch keeps at least; every data header stack fits in them.
pub const TRIM_KEEP_LEN: usize = 64;
const _: () = assert!(MAX_DATA_HEADER_LEN <= TRIM_KEEP_LEN);

/// Why bytes could not be parsed (or a representation could not be emitted).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Error {
    /// The buffer ends before the headers do (or is too short to emit into).
    Truncated,
    /// BTH.TVer is not [`TVER`]; carries the version found.
    BadVersion(u8),
    /// The opcode is none of the spec's; carries the byte found.
    UnknownOpcode(u8),
    /// The ICRC does not match the bytes.
    BadIcrc,
    /// The lengths or fields contradict each other (trailing bytes after a control header, a payload on a
    /// READ_REQUEST, a body that does not match its opcode, inconsistent IPv6/UDP lengths, ...).
    Malformed,
}

/// Result of the wire functions.
pub type Result<T> = core::result::Result<T, Error>;

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Truncated => f.write_str("packet truncated"),
            Error::BadVersion(v) => write!(f, "unsupported transport version {v}"),
            Error::UnknownOpcode(op) => write!(f, "unknown opcode {op:#04x}"),
            Error::BadIcrc => f.write_str("ICRC mismatch"),
            Error::Malformed => f.write_str("malformed packet"),
        }
    }
}

impl std::error::Error for Error {}

/// Reads fixed-size headers off the front of a buffer; every read is length-checked, so nothing after it can
/// index out of bounds.
pub(crate) struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    pub(crate) fn new(buf: &'a [u8]) -> Self {
        Self { rest: buf }
    }

    /// The next `N` bytes, or `Truncated`.
    #[inline]
    pub(crate) fn take<const N: usize>(&mut self) -> Result<&'a [u8; N]> {
        let (head, tail) = self.rest.split_first_chunk::<N>().ok_or(Error::Truncated)?;
        self.rest = tail;
        Ok(head)
    }

    /// The bytes not consumed yet.
    pub(crate) fn rest(&self) -> &'a [u8] {
        self.rest
    }
}

/// Writes fixed-size headers at the front of a buffer, length-checked like [`Reader`].
pub(crate) struct Writer<'a> {
    rest: &'a mut [u8],
    pos: usize,
}

impl<'a> Writer<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> Self {
        Self { rest: buf, pos: 0 }
    }

    /// The next `N` bytes to fill, or `Truncated` (after which the writer is spent).
    #[inline]
    pub(crate) fn take<const N: usize>(&mut self) -> Result<&'a mut [u8; N]> {
        let (head, tail) = core::mem::take(&mut self.rest)
            .split_first_chunk_mut::<N>()
            .ok_or(Error::Truncated)?;
        self.rest = tail;
        self.pos += N;
        Ok(head)
    }

    /// Bytes written so far.
    pub(crate) fn pos(&self) -> usize {
        self.pos
    }
}

/// A 24-bit big-endian field.
#[inline]
pub(crate) const fn get_u24(b: [u8; 3]) -> u32 {
    u32::from_be_bytes([0, b[0], b[1], b[2]])
}

/// The low 24 bits of `v`, big-endian.
#[inline]
pub(crate) const fn put_u24(v: u32) -> [u8; 3] {
    let b = v.to_be_bytes();
    [b[1], b[2], b[3]]
}
