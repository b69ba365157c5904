//! Control headers (spec §5): SACK (SETH + CCETH), NACK (NETH), PROBE (PETH), ACK (AETH) and the endpoint
//! headers ERTH and EETH. Each control packet is its BTH plus exactly these bytes (and the ICRC).

use core::fmt;

use super::{
    AETH_LEN, CCETH_LEN, EETH_LEN, ERTH_LEN, NETH_LEN, PETH_LEN, PSN_MASK, Reader, Result,
    SETH_LEN, TSETH_LEN, Writer, get_u24, put_u24,
};

/// SETH followed by CCETH.
pub const SACK_LEN: usize = SETH_LEN + CCETH_LEN;

// spec: WIRE-SACK-1
/// Path-marking advice a SACK gives for the EV it echoes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SackMark {
    /// No advice (wire 0, and the reserved 3).
    None,
    /// The triggering packet arrived CE-marked: skip this EV once (wire 1).
    SkipOnce,
    /// The EV is persistently marked (wire 2).
    AlwaysSkip,
}

impl SackMark {
    /// The mark of the 2-bit `m` field; the reserved value 3 reads as `None`.
    pub const fn from_bits(m: u8) -> Self {
        match m & 3 {
            1 => SackMark::SkipOnce,
            2 => SackMark::AlwaysSkip,
            _ => SackMark::None,
        }
    }

    /// The 2-bit `m` field.
    pub const fn to_bits(self) -> u8 {
        match self {
            SackMark::None => 0,
            SackMark::SkipOnce => 1,
            SackMark::AlwaysSkip => 2,
        }
    }
}

impl fmt::Display for SackMark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SackMark::None => "NONE",
            SackMark::SkipOnce => "SKIP_ONCE",
            SackMark::AlwaysSkip => "ALWAYS_SKIP",
        })
    }
}

const SACK_PR: u8 = 0x20;
const SACK_TSV: u8 = 0x10;
const CWND_PEN_MASK: u8 = 0x7F;

/// A selective ACK: SETH and CCETH.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sack {
    /// Path-marking advice for `ev`.
    pub mark: SackMark,
    // spec: WIRE-PROBE-1
    /// PR: this SACK answers a PROBE.
    pub probe_reply: bool,
    // spec: WIRE-SACK-3
    /// The receiver's PSN window in units of 128 PSNs.
    pub mpr: u8,
    // spec: WIRE-SACK-4
    /// EV of the packet that triggered the SACK; the SACK travels on it.
    pub ev: u32,
    // spec: WIRE-SACK-2
    /// Highest PSN up to which everything has arrived (24 bits).
    pub cack_psn: u32,
    /// PSN of bitmap bit 0 (24 bits); above `cack_psn`.
    pub sack_base: u32,
    /// Bit i, `(bitmap >> i) & 1`, says PSN `sack_base + i` has arrived.
    pub bitmap: u64,
    /// TSETH of the triggering packet; `Some` exactly when TSV is set.
    pub ts_echo: Option<u32>,
    // spec: WIRE-SACK-5
    /// RCV_CWND_PEN, 7 bits: 0 no penalty, 127 one packet per RTT.
    pub cwnd_pen: u8,
    /// Number of PSNs received above `cack_psn` (24 bits).
    pub ooo_count: u32,
}

impl Sack {
    /// Parses the first [`SACK_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes SETH and CCETH into the first [`SACK_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; SACK_LEN]) -> Self {
        Self {
            // spec: WIRE-SACK-1
            mark: SackMark::from_bits(b[0] >> 6),
            probe_reply: b[0] & SACK_PR != 0,
            mpr: b[1],
            ev: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            cack_psn: get_u24([b[9], b[10], b[11]]),
            sack_base: get_u24([b[13], b[14], b[15]]),
            bitmap: u64::from_be_bytes([b[16], b[17], b[18], b[19], b[20], b[21], b[22], b[23]]),
            // CCETH starts at byte 24.
            ts_echo: (b[0] & SACK_TSV != 0)
                .then_some(u32::from_be_bytes([b[24], b[25], b[26], b[27]])),
            cwnd_pen: b[28] & CWND_PEN_MASK,
            ooo_count: get_u24([b[29], b[30], b[31]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; SACK_LEN]) {
        let flags = (self.mark.to_bits() << 6)
            | if self.probe_reply { SACK_PR } else { 0 }
            | if self.ts_echo.is_some() { SACK_TSV } else { 0 };
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        let [c0, c1, c2] = put_u24(self.cack_psn);
        let [s0, s1, s2] = put_u24(self.sack_base);
        let [m0, m1, m2, m3, m4, m5, m6, m7] = self.bitmap.to_be_bytes();
        // With TSV clear the TS echo field is sent as zero.
        let [t0, t1, t2, t3] = self.ts_echo.unwrap_or(0).to_be_bytes();
        let [o0, o1, o2] = put_u24(self.ooo_count);
        *b = [
            flags,
            self.mpr,
            0,
            0,
            e0,
            e1,
            e2,
            e3,
            0,
            c0,
            c1,
            c2,
            0,
            s0,
            s1,
            s2,
            m0,
            m1,
            m2,
            m3,
            m4,
            m5,
            m6,
            m7,
            // CCETH
            t0,
            t1,
            t2,
            t3,
            self.cwnd_pen & CWND_PEN_MASK,
            o0,
            o1,
            o2,
        ];
    }
}

// spec: WIRE-NACK-1
/// Why a packet was NACKed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NackReason {
    /// 0x01: a switch trimmed the packet (congestion on the way).
    Trimmed,
    /// 0x02: trimmed at the last hop (receiver-side congestion).
    TrimmedLastHop,
    /// 0x0A: receive queue empty or immediate cap reached; retry later.
    NoResource,
    /// 0x0B: the PSN is outside the receiver's window.
    PsnOutOfWindow,
    /// 0x10 (extension): rkey, bounds or access check failed. Fatal.
    RemoteAccess,
    /// 0x11 (extension): unsupported opcode or capability, or a message longer than its buffer. Fatal.
    InvalidRequest,
    /// 0x19: unexpected event. Fatal.
    Unexpected,
    /// A value the spec does not define (never one of the values above); counted and ignored.
    Unknown(u8),
}

impl NackReason {
    /// The reason of a reason byte.
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0x01 => NackReason::Trimmed,
            0x02 => NackReason::TrimmedLastHop,
            0x0A => NackReason::NoResource,
            0x0B => NackReason::PsnOutOfWindow,
            0x10 => NackReason::RemoteAccess,
            0x11 => NackReason::InvalidRequest,
            0x19 => NackReason::Unexpected,
            other => NackReason::Unknown(other),
        }
    }

    /// The reason byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            NackReason::Trimmed => 0x01,
            NackReason::TrimmedLastHop => 0x02,
            NackReason::NoResource => 0x0A,
            NackReason::PsnOutOfWindow => 0x0B,
            NackReason::RemoteAccess => 0x10,
            NackReason::InvalidRequest => 0x11,
            NackReason::Unexpected => 0x19,
            NackReason::Unknown(v) => v,
        }
    }

    /// Whether the reason ends the connection instead of asking for a retransmission.
    pub const fn is_fatal(self) -> bool {
        matches!(
            self,
            NackReason::RemoteAccess | NackReason::InvalidRequest | NackReason::Unexpected
        )
    }
}

impl fmt::Display for NackReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NackReason::Trimmed => "TRIMMED",
            NackReason::TrimmedLastHop => "TRIMMED_LASTHOP",
            NackReason::NoResource => "NO_RESOURCE",
            NackReason::PsnOutOfWindow => "PSN_OOR_WINDOW",
            NackReason::RemoteAccess => "REMOTE_ACCESS",
            NackReason::InvalidRequest => "INVALID_REQUEST",
            NackReason::Unexpected => "UNEXPECTED",
            NackReason::Unknown(v) => return write!(f, "UNKNOWN({v:#04x})"),
        })
    }
}

// spec: WIRE-NACK-2
/// A negative ACK (NETH).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Nack {
    /// Why.
    pub reason: NackReason,
    /// NACK_PSN: the PSN refused (24 bits).
    pub psn: u32,
    /// EV of the NACKed packet; the NACK travels on it.
    pub ev: u32,
    /// TSETH of the NACKed packet (0 when it had none).
    pub ts_echo: u32,
    /// As in the SACK.
    pub mpr: u8,
    /// As in the SACK (24 bits).
    pub cack_psn: u32,
}

impl Nack {
    /// Parses the first [`NETH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the NETH into the first [`NETH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; NETH_LEN]) -> Self {
        Self {
            reason: NackReason::from_u8(b[0]),
            psn: get_u24([b[1], b[2], b[3]]),
            ev: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            ts_echo: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            mpr: b[12],
            cack_psn: get_u24([b[13], b[14], b[15]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; NETH_LEN]) {
        let [p0, p1, p2] = put_u24(self.psn);
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        let [t0, t1, t2, t3] = self.ts_echo.to_be_bytes();
        let [c0, c1, c2] = put_u24(self.cack_psn);
        *b = [
            self.reason.to_u8(),
            p0,
            p1,
            p2,
            e0,
            e1,
            e2,
            e3,
            t0,
            t1,
            t2,
            t3,
            self.mpr,
            c0,
            c1,
            c2,
        ];
    }
}

// spec: WIRE-PROBE-1
/// A reliability probe (PETH): tests one EV; answered by a SACK with PR set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Probe {
    /// The EV the probe is sent on.
    pub ev: u32,
    /// The sender's clock, echoed in the answering SACK.
    pub ts: u32,
}

impl Probe {
    /// Parses the first [`PETH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the PETH into the first [`PETH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; PETH_LEN]) -> Self {
        Self {
            ev: u32::from_be_bytes([b[0], b[1], b[2], b[3]]),
            ts: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; PETH_LEN]) {
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        let [t0, t1, t2, t3] = self.ts.to_be_bytes();
        *b = [e0, e1, e2, e3, t0, t1, t2, t3];
    }
}

// spec: WIRE-ACK-1
/// A transport ACK (AETH): how far receive-side processing has completed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ack {
    /// As in the SACK (24 bits).
    pub cack_psn: u32,
    /// MSN of the last message whose receive-side processing is complete, in MSN order.
    pub cmsn: u16,
}

impl Ack {
    /// Parses the first [`AETH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the AETH into the first [`AETH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; AETH_LEN]) -> Self {
        Self {
            cack_psn: get_u24([b[1], b[2], b[3]]),
            cmsn: u16::from_be_bytes([b[4], b[5]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; AETH_LEN]) {
        let [c0, c1, c2] = put_u24(self.cack_psn & PSN_MASK);
        let [m0, m1] = self.cmsn.to_be_bytes();
        *b = [0, c0, c1, c2, m0, m1, 0, 0];
    }
}

// spec: WIRE-EP-1
/// What an endpoint packet asks or answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EpOp {
    /// 0: port status; the request's port mask has bit p set when the sender's port p is up.
    PortStatus,
    /// 1: EV probe.
    EvProbe,
    /// A value the spec does not define (never 0 or 1).
    Unknown(u8),
}

impl EpOp {
    /// The op of an op byte.
    pub const fn from_u8(v: u8) -> Self {
        match v {
            0 => EpOp::PortStatus,
            1 => EpOp::EvProbe,
            other => EpOp::Unknown(other),
        }
    }

    /// The op byte.
    pub const fn to_u8(self) -> u8 {
        match self {
            EpOp::PortStatus => 0,
            EpOp::EvProbe => 1,
            EpOp::Unknown(v) => v,
        }
    }
}

impl fmt::Display for EpOp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EpOp::PortStatus => f.write_str("PORT_STATUS"),
            EpOp::EvProbe => f.write_str("EV_PROBE"),
            EpOp::Unknown(v) => write!(f, "UNKNOWN({v:#04x})"),
        }
    }
}

/// An endpoint request: ERTH, then a TSETH when `ts` is `Some` (BTH.TS). Sent to QPN
/// [`EP_QPN`](super::EP_QPN).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpRequest {
    /// What is asked.
    pub op: EpOp,
    /// Echoed in the response to match it.
    pub req_id: u32,
    /// Bit p set: the sender's port p is up.
    pub port_mask: u32,
    /// The EV the request is sent on; the response returns on it.
    pub ev: u32,
    /// The sender's clock, echoed in the response.
    pub ts: Option<u32>,
}

impl EpRequest {
    /// Bytes after the BTH: ERTH, and TSETH if `ts` is set.
    pub const fn wire_len(&self) -> usize {
        ERTH_LEN + if self.ts.is_some() { TSETH_LEN } else { 0 }
    }

    /// Reads ERTH and, if `ts` (the BTH.TS flag), the TSETH after it.
    pub(crate) fn read(r: &mut Reader<'_>, ts: bool) -> Result<Self> {
        let b: &[u8; ERTH_LEN] = r.take()?;
        let ts = if ts {
            Some(u32::from_be_bytes(*r.take::<TSETH_LEN>()?))
        } else {
            None
        };
        Ok(Self {
            op: EpOp::from_u8(b[0]),
            req_id: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            port_mask: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            ev: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
            ts,
        })
    }

    pub(crate) fn write(&self, w: &mut Writer<'_>) -> Result<()> {
        let [q0, q1, q2, q3] = self.req_id.to_be_bytes();
        let [p0, p1, p2, p3] = self.port_mask.to_be_bytes();
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        *w.take::<ERTH_LEN>()? = [
            self.op.to_u8(),
            0,
            0,
            0,
            q0,
            q1,
            q2,
            q3,
            p0,
            p1,
            p2,
            p3,
            e0,
            e1,
            e2,
            e3,
        ];
        if let Some(ts) = self.ts {
            *w.take::<TSETH_LEN>()? = ts.to_be_bytes();
        }
        Ok(())
    }
}

/// An endpoint response (EETH), sent on the request's EV.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EpResponse {
    /// The request's op.
    pub op: EpOp,
    /// The responder's port the request arrived on.
    pub rx_port: u8,
    /// The request's id.
    pub req_id: u32,
    /// The request's EV.
    pub ev: u32,
    /// The request's TSETH, 0 when it had none.
    pub ts_echo: u32,
}

impl EpResponse {
    /// Parses the first [`EETH_LEN`] bytes.
    pub fn parse(buf: &[u8]) -> Result<Self> {
        Ok(Self::decode(Reader::new(buf).take()?))
    }

    /// Writes the EETH into the first [`EETH_LEN`] bytes.
    pub fn emit(&self, buf: &mut [u8]) -> Result<()> {
        self.encode(Writer::new(buf).take()?);
        Ok(())
    }

    pub(crate) fn decode(b: &[u8; EETH_LEN]) -> Self {
        Self {
            op: EpOp::from_u8(b[0]),
            rx_port: b[1],
            req_id: u32::from_be_bytes([b[4], b[5], b[6], b[7]]),
            ev: u32::from_be_bytes([b[8], b[9], b[10], b[11]]),
            ts_echo: u32::from_be_bytes([b[12], b[13], b[14], b[15]]),
        }
    }

    pub(crate) fn encode(&self, b: &mut [u8; EETH_LEN]) {
        let [q0, q1, q2, q3] = self.req_id.to_be_bytes();
        let [e0, e1, e2, e3] = self.ev.to_be_bytes();
        let [t0, t1, t2, t3] = self.ts_echo.to_be_bytes();
        *b = [
            self.op.to_u8(),
            self.rx_port,
            0,
            0,
            q0,
            q1,
            q2,
            q3,
            e0,
            e1,
            e2,
            e3,
            t0,
            t1,
            t2,
            t3,
        ];
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::Error;

    #[test]
    fn sack_layout() {
        let s = Sack {
            mark: SackMark::AlwaysSkip,
            probe_reply: true,
            mpr: 0x11,
            ev: 0x2233_4455,
            cack_psn: 0x66_7788,
            sack_base: 0x99_AABB,
            bitmap: 0x0102_0304_0506_0708,
            ts_echo: Some(0xCAFE_BABE),
            cwnd_pen: 0x7F,
            ooo_count: 0x12_3456,
        };
        let mut b = [0xEEu8; SACK_LEN];
        s.emit(&mut b).unwrap();
        #[rustfmt::skip]
        let want = [
            0xB0, // m=2, PR, TSV
            0x11, // MPR
            0, 0, // reserved
            0x22, 0x33, 0x44, 0x55, // EV echo
            0, 0x66, 0x77, 0x88, // CACK_PSN
            0, 0x99, 0xAA, 0xBB, // SACK_BASE
            1, 2, 3, 4, 5, 6, 7, 8, // bitmap
            0xCA, 0xFE, 0xBA, 0xBE, // CCETH TS echo
            0x7F, // RCV_CWND_PEN
            0x12, 0x34, 0x56, // OOO_COUNT
        ];
        assert_eq!(b, want);
        assert_eq!(Sack::parse(&b), Ok(s));

        // TSV clear: the echo is absent and sent as zero; mark 3 reads as NONE; reserved bits ignored.
        let mut b2 = want;
        b2[0] = 0xCF;
        b2[28] = 0xFF;
        let p = Sack::parse(&b2).unwrap();
        assert_eq!(
            (p.mark, p.probe_reply, p.ts_echo, p.cwnd_pen),
            (SackMark::None, false, None, 0x7F)
        );
        let mut b3 = [0u8; SACK_LEN];
        p.emit(&mut b3).unwrap();
        assert_eq!(&b3[24..28], &[0, 0, 0, 0]);
        assert_eq!(Sack::parse(&b[..SACK_LEN - 1]), Err(Error::Truncated));
    }

    #[test]
    fn nack_layout_and_reasons() {
        let n = Nack {
            reason: NackReason::TrimmedLastHop,
            psn: 0x01_0203,
            ev: 0x0405_0607,
            ts_echo: 0x0809_0A0B,
            mpr: 0x0C,
            cack_psn: 0x0D_0E0F,
        };
        let mut b = [0u8; NETH_LEN];
        n.emit(&mut b).unwrap();
        assert_eq!(b, [2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15]);
        assert_eq!(Nack::parse(&b), Ok(n));
        for v in 0..=255u8 {
            let r = NackReason::from_u8(v);
            assert_eq!(r.to_u8(), v);
            assert_eq!(
                matches!(r, NackReason::Unknown(_)),
                ![1, 2, 0x0A, 0x0B, 0x10, 0x11, 0x19].contains(&v)
            );
            assert_eq!(r.is_fatal(), [0x10, 0x11, 0x19].contains(&v));
        }
    }

    #[test]
    fn probe_ack_layout() {
        let p = Probe {
            ev: 0xA1A2_A3A4,
            ts: 0xB1B2_B3B4,
        };
        let mut b = [0u8; PETH_LEN];
        p.emit(&mut b).unwrap();
        assert_eq!(b, [0xA1, 0xA2, 0xA3, 0xA4, 0xB1, 0xB2, 0xB3, 0xB4]);
        assert_eq!(Probe::parse(&b), Ok(p));

        let a = Ack {
            cack_psn: 0xAB_CDEF,
            cmsn: 0x1234,
        };
        let mut b = [0xEEu8; AETH_LEN];
        a.emit(&mut b).unwrap();
        assert_eq!(b, [0, 0xAB, 0xCD, 0xEF, 0x12, 0x34, 0, 0]);
        assert_eq!(
            Ack::parse(&[0xFF, 0xAB, 0xCD, 0xEF, 0x12, 0x34, 0xFF, 0xFF]),
            Ok(a)
        );
    }

    #[test]
    fn endpoint_layout() {
        let q = EpRequest {
            op: EpOp::PortStatus,
            req_id: 0x0102_0304,
            port_mask: 0x0000_000B,
            ev: 0x0506_0708,
            ts: Some(0x090A_0B0C),
        };
        let mut b = [0xEEu8; ERTH_LEN + TSETH_LEN];
        let mut w = Writer::new(&mut b);
        q.write(&mut w).unwrap();
        assert_eq!(w.pos(), q.wire_len());
        #[rustfmt::skip]
        assert_eq!(b, [0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0x0B, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(EpRequest::read(&mut Reader::new(&b), true), Ok(q));
        let no_ts = EpRequest::read(&mut Reader::new(&b), false).unwrap();
        assert_eq!((no_ts.ts, no_ts.wire_len()), (None, ERTH_LEN));
        assert_eq!(
            EpRequest::read(&mut Reader::new(&b[..19]), true),
            Err(Error::Truncated)
        );

        let r = EpResponse {
            op: EpOp::Unknown(7),
            rx_port: 3,
            req_id: 0x0102_0304,
            ev: 0x0506_0708,
            ts_echo: 0x090A_0B0C,
        };
        let mut b = [0xEEu8; EETH_LEN];
        r.emit(&mut b).unwrap();
        assert_eq!(b, [7, 3, 0, 0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]);
        assert_eq!(EpResponse::parse(&b), Ok(r));
        assert_eq!(EpOp::from_u8(1), EpOp::EvProbe);
    }
}
