//! Data-packet extension headers (spec §4): METH, TSETH, RETH and ImmDt.

use super::{BTH_LEN, Error, IMM_LEN, METH_LEN, RETH_LEN, Reader, Result, TSETH_LEN, Writer};

/// Message extended transport header: carried by every data, READ request and READ response packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Meth {
    // spec: WIRE-ENC-5
    // spec: WIRE-METH-1
    /// The EV the packet was sent on; the authoritative copy, since flow label and source port may be lost.
    pub ev: u32,
    /// Message sequence number of this direction of the QP, modulo 2^16.
    pub msn: u16,
    // spec: WIRE-METH-2
    /// Ordinal of the receive-consuming message (SEND, WRITE_IMM) so an out-of-order SEND finds its receive
    /// buffer; on other messages, the count of receive-consuming messages sent before it.
    pub rqmsn: u16,
}

impl Meth {
    /// Parses the first [`METH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the header into the first [`METH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; METH_LEN]) -> Self {
        Self {
            ev: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            msn: u16::from_be_bytes([b[4], b[5]]),
            rqmsn: u16::from_be_bytes([b[6], b[7]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; METH_LEN]) {
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        let [m0, m1] = self.msn.to_be_bytes();
        let [r0, r1] = self.rqmsn.to_be_bytes();
        *b = [e0, e1, e2, e3, m0, m1, r0, r1];
    }
}

/// RDMA extended transport header: where this packet's payload goes, so any packet can be placed on arrival.
// spec: WIRE-RETH-1
// spec: WIRE-RETH-2
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Reth {
    /// WRITE: target address of this packet's first payload byte. SEND and READ response: byte offset of
    /// the payload in the message. READ_REQUEST: remote source address.
    pub va: u64,
    /// WRITE and READ_REQUEST: the remote key. SEND: zero. READ response: the READ_REQUEST's MSN.
    pub rkey: u32,
    /// Length of the whole message (of the read, for READ packets).
    pub dma_len: u32,
}

impl Reth {
    /// Parses the first [`RETH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the header into the first [`RETH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; RETH_LEN]) -> Self {
        Self {
            va: u64::from_be_bytes([b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7]]),
            rkey: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            dma_len: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; RETH_LEN]) {
        let [v0, v1, v2, v3, v4, v5, v6, v7] = self.va.to_be_bytes();
        let [k0, k1, k2, k3] = self.rkey.to_be_bytes();
        let [l0, l1, l2, l3] = self.dma_len.to_be_bytes();
        *b = [
            v0, v1, v2, v3, v4, v5, v6, v7, k0, k1, k2, k3, l0, l1, l2, l3,
        ];
    }
}

/// The body of a data packet (WRITE, SEND, READ request or response): everything after the BTH.
///
/// Which of `imm` may be present is the opcode's decision ([`Opcode::has_imm`](super::Opcode::has_imm));
/// `ts` sets BTH.TS.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Data<'a> {
    /// Message header.
    pub meth: Meth,
    // spec: WIRE-TSETH-1
    /// TSETH: low 32 bits of the sender's nanosecond clock at transmission, echoed in the SACK or NACK.
    pub ts: Option<u32>,
    /// Placement header.
    pub reth: Reth,
    // spec: WIRE-IMM-1
    /// Immediate data; `Some` exactly on the `*_IMM` opcodes.
    pub imm: Option<u32>,
    // spec: WIRE-PAY-1
    /// Everything between the last header and the ICRC; empty on a READ_REQUEST and on a trimmed packet.
    pub payload: &'a [u8],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    #[test]
    fn meth_layout() {
        let m = Meth {
            ev: 0x0102_0304,
            msn: 0x0506,
            rqmsn: 0x0708,
        };
        let mut b = [0u8; METH_LEN];
        m.emit(&mut b).unwrap();
        assert_eq!(b, [1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(Meth::parse(&b), Ok(m));
        assert_eq!(Meth::parse(&b[..7]), Err(Error::Truncated));
    }

    #[test]
    fn reth_layout() {
        let r = Reth {
            va: 0x1122_3344_5566_7788,
            rkey: 0x99AA_BBCC,
            dma_len: 0xDDEE_FF00,
        };
        let mut b = [0u8; RETH_LEN + 1];
        r.emit(&mut b).unwrap();
        assert_eq!(
            b,
            [
                0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, // VA
                0x99, 0xAA, 0xBB, 0xCC, // R_Key
                0xDD, 0xEE, 0xFF, 0x00, // DMA length
                0x00, // untouched
            ]
        );
        assert_eq!(Reth::parse(&b), Ok(r));
        assert_eq!(r.emit(&mut [0; RETH_LEN - 1]), Err(Error::Truncated));
    }
}

/// The headers of one data packet (WRITE, SEND, READ request or response) as a single record, which is what the
/// transmit path builds for every packet. [`Packet::emit_header`](super::Packet::emit_header) writes data
/// packets through it, so the layout is defined once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataHeader {
    /// Base transport header (its TS flag follows `ts`).
    pub bth: super::Bth,
    /// Message header.
    pub meth: Meth,
    /// Transmit timestamp (TSETH), if any.
    pub ts: Option<u32>,
    /// RDMA header.
    pub reth: Reth,
    /// Immediate data: present exactly on the `*_IMM` opcodes.
    pub imm: Option<u32>,
}

impl DataHeader {
    /// Header bytes: BTH, METH, TSETH if any, RETH, ImmDt if any.
    #[inline]
    pub const fn header_len(&self) -> usize {
        BTH_LEN
            + METH_LEN
            + RETH_LEN
            + if self.ts.is_some() { TSETH_LEN } else { 0 }
            + if self.imm.is_some() { IMM_LEN } else { 0 }
    }

    /// Writes the headers into `buf[..header_len()]` and returns `header_len()`. `Malformed` when the opcode is not a data
    /// opcode or `imm` disagrees with it; `Truncated` when `buf` is too short.
    #[inline]
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let op = self.bth.opcode;
        if !op.is_data() || self.imm.is_some() != op.has_imm() {
            return Err(Error::Malformed);
        }
        let n = self.header_len();
        let mut w = Writer::new(buf.get_mut(..n).ok_or(Error::Truncated)?);
        // spec: WIRE-BTH-2
        self.bth.encode(self.ts.is_some(), w.take()?);
        self.meth.encode(w.take()?);
        if let Some(ts) = self.ts {
            *w.take::<TSETH_LEN>()? = ts.to_be_bytes();
        }
        self.reth.encode(w.take()?);
        if let Some(imm) = self.imm {
            *w.take::<IMM_LEN>()? = imm.to_be_bytes();
        }
        Ok(n)
    }
}
