//! Base transport header (spec §2): 12 bytes at the front of every MRC packet.

use super::{BTH_LEN, Error, Opcode, PSN_MASK, Reader, Result, TVER, Writer, get_u24, put_u24};

const SE: u8 = 0x80;
const RTX: u8 = 0x40;
const TS: u8 = 0x20;
const TVER_MASK: u8 = 0x0F;
const ACK_REQ: u8 = 0x80;

/// The base transport header.
///
/// The TS flag is not a field: it says whether a TSETH follows, so [`Packet`](super::Packet) derives it from
/// the body when emitting and consumes it when parsing.
// spec: WIRE-BTH-1
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bth {
    /// What the packet is and which headers follow.
    pub opcode: Opcode,
    // spec: WIRE-BTH-2
    /// Solicited event, from the verbs work request.
    pub se: bool,
    /// Set on every retransmission.
    pub rtx: bool,
    // spec: WIRE-BTH-3
    /// Partition key; [`DEFAULT_PKEY`](super::DEFAULT_PKEY) unless configured otherwise.
    pub pkey: u16,
    /// Destination QP number, 24 bits.
    pub dest_qp: u32,
    /// Asks the receiver for an immediate SACK.
    pub ack_req: bool,
    // spec: WIRE-BTH-4
    /// Low 24 bits of the packet sequence number; 0 on packets that consume no PSN.
    pub psn: u32,
}

impl Bth {
    /// A header with no flags, the default P_Key and PSN 0.
    pub const fn new(opcode: Opcode, dest_qp: u32) -> Self {
        Self {
            opcode,
            se: false,
            rtx: false,
            pkey: super::DEFAULT_PKEY,
            dest_qp: dest_qp & PSN_MASK,
            ack_req: false,
            psn: 0,
        }
    }

    /// Parses the first [`BTH_LEN`] bytes; returns the header and its TS flag.
    pub fn parse(buf: &[u8]) -> Result<(Self, bool)> {
        Self::decode(Reader::new(buf).take()?)
    }

    /// Writes the header into the first [`BTH_LEN`] bytes, with TS set as given.
    pub fn emit(&self, ts: bool, buf: &mut [u8]) -> Result<()> {
        self.encode(ts, Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; BTH_LEN]) -> Result<(Self, bool)> {
        let opcode = Self::check(b)?;
        Ok((Self::decode_checked(opcode, b), Self::ts(b)))
    }

    /// The opcode of a BTH whose version is right; the only fallible part of decoding.
    #[inline]
    pub(crate) fn check(b: &[u8; BTH_LEN]) -> Result<Opcode> {
        // spec: WIRE-BTH-1
        let tver = b[1] & TVER_MASK;
        if tver != TVER {
            return Err(Error::BadVersion(tver));
        }
        // spec: WIRE-OP-1
        Opcode::from_u8(b[0]).ok_or(Error::UnknownOpcode(b[0]))
    }

    /// The TS flag.
    #[inline]
    pub(crate) fn ts(b: &[u8; BTH_LEN]) -> bool {
        b[1] & TS != 0
    }

    /// The header, once [`check`](Self::check) gave its opcode. Kept infallible so that the caller builds the
    /// packet in place instead of moving a `Result` through memory.
    #[inline]
    pub(crate) fn decode_checked(opcode: Opcode, b: &[u8; BTH_LEN]) -> Self {
        Self {
            opcode,
            se: b[1] & SE != 0,
            rtx: b[1] & RTX != 0,
            pkey: u16::from_be_bytes([b[2], b[3]]),
            dest_qp: get_u24([b[5], b[6], b[7]]),
            ack_req: b[8] & ACK_REQ != 0,
            psn: get_u24([b[9], b[10], b[11]]),
        }
    }

    #[inline]
    pub(crate) fn encode(&self, ts: bool, b: &mut [u8; BTH_LEN]) {
        let flags = if self.se { SE } else { 0 }
            | if self.rtx { RTX } else { 0 }
            | if ts { TS } else { 0 }
            | TVER;
        let pkey = self.pkey.to_be_bytes();
        let qp = put_u24(self.dest_qp);
        let psn = put_u24(self.psn);
        let a = if self.ack_req { ACK_REQ } else { 0 };
        *b = [
            self.opcode as u8,
            flags,
            pkey[0],
            pkey[1],
            0,
            qp[0],
            qp[1],
            qp[2],
            a,
            psn[0],
            psn[1],
            psn[2],
        ];
    }
}

/// The DestQP of a UDP payload, read without parsing or checking anything else, so a datagram can be routed
/// to its QP before the QP spends time on it. `None` if the buffer is shorter than a BTH.
pub fn peek_dest_qp(buf: &[u8]) -> Option<u32> {
    let b: &[u8; BTH_LEN] = Reader::new(buf).take().ok()?;
    Some(get_u24([b[5], b[6], b[7]]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_matches_spec() {
        let bth = Bth {
            opcode: Opcode::WriteOnly,
            se: true,
            rtx: false,
            pkey: 0xABCD,
            dest_qp: 0x12_3456,
            ack_req: true,
            psn: 0xFE_DCBA,
        };
        let mut b = [0xEEu8; BTH_LEN];
        bth.emit(true, &mut b).unwrap();
        assert_eq!(
            b,
            [
                0xCA, // opcode
                0xA1, // SE, TS, TVer 1
                0xAB, 0xCD, // P_Key
                0x00, // reserved
                0x12, 0x34, 0x56, // DestQP
                0x80, // A
                0xFE, 0xDC, 0xBA, // PSN
            ]
        );
        assert_eq!(Bth::parse(&b), Ok((bth, true)));
        assert_eq!(peek_dest_qp(&b), Some(0x12_3456));
        assert_eq!(peek_dest_qp(&b[..11]), None);
    }

    #[test]
    fn reserved_bits_ignored_and_fields_masked() {
        let b = [0xD1, 0x51, 0xFF, 0xFF, 0xFF, 0, 0, 2, 0x7F, 0, 0, 0];
        let (bth, ts) = Bth::parse(&b).unwrap();
        assert!(!ts && bth.rtx && !bth.se && !bth.ack_req);
        assert_eq!((bth.opcode, bth.dest_qp, bth.psn), (Opcode::Ack, 2, 0));

        let mut out = [0u8; BTH_LEN];
        let wide = Bth {
            dest_qp: 0xFF00_0001,
            psn: 0x1FF_FFFF,
            ..Bth::new(Opcode::Probe, 0)
        };
        wide.emit(false, &mut out).unwrap();
        let (back, _) = Bth::parse(&out).unwrap();
        assert_eq!((back.dest_qp, back.psn), (1, PSN_MASK));
    }

    #[test]
    fn rejects_version_opcode_and_short_buffers() {
        let mut b = [0xC6, 0x01, 0xFF, 0xFF, 0, 0, 0, 1, 0, 0, 0, 0];
        assert!(Bth::parse(&b).is_ok());
        b[1] = 0x02;
        assert_eq!(Bth::parse(&b), Err(Error::BadVersion(2)));
        b[1] = 0x01;
        b[0] = 0x00;
        assert_eq!(Bth::parse(&b), Err(Error::UnknownOpcode(0)));
        assert_eq!(Bth::parse(&b[..11]), Err(Error::Truncated));
        assert_eq!(
            Bth::new(Opcode::Ack, 1).emit(false, &mut [0; 11]),
            Err(Error::Truncated)
        );
    }
}
