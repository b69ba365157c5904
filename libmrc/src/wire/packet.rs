//! A whole MRC packet, i.e. one UDP payload: BTH, the opcode's extension headers, payload, ICRC.

use super::auth::{AT, AUTH_LEN, AuthTag};
use super::{
    AETH_LEN, Ack, BTH_LEN, Bth, Data, DataHeader, EETH_LEN, EpRequest, EpResponse, Error,
    ICRC_LEN, IMM_LEN, METH_LEN, Meth, NETH_LEN, Nack, OpKind, Opcode, PETH_LEN, Probe, RETH_LEN,
    Reader, Result, Reth, SACK_LEN, Sack, TSETH_LEN, Writer, icrc,
};

/// Everything after the BTH, decided by the opcode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Body<'a> {
    /// WRITE, SEND, READ_REQUEST or READ response.
    Data(Data<'a>),
    /// SACK: SETH + CCETH.
    Sack(Sack),
    /// NACK: NETH.
    Nack(Nack),
    /// PROBE: PETH.
    Probe(Probe),
    /// ACK: AETH.
    Ack(Ack),
    /// EP_REQUEST: ERTH, then TSETH when BTH.TS is set.
    EpRequest(EpRequest),
    /// EP_RESPONSE: EETH.
    EpResponse(EpResponse),
}

/// One MRC packet (a UDP payload), borrowing its payload from the buffer it was parsed from or will be
/// emitted from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Packet<'a> {
    /// Base transport header.
    pub bth: Bth,
    /// Extension headers and payload.
    pub body: Body<'a>,
}

/// How [`Packet::parse`] treats the buffer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ParseOptions {
    /// Check the ICRC before anything else (ignored with `trimmed`).
    pub verify_icrc: bool,
    /// The packet arrived with a TRIMMED or TRIMMED_LASTHOP DSCP: its tail, ICRC included, is gone.
    pub trimmed: bool,
}

/// What follows the headers in a buffer being parsed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tail {
    /// The payload, then nothing (the ICRC is already cut off): control packets must end with their headers.
    Whole,
    /// A trimmed data packet: the payload and ICRC are gone; only data opcodes are valid.
    Trimmed,
    /// Anything or nothing: only the headers matter.
    Ignored,
}

impl<'a> Packet<'a> {
    /// Parses a UDP payload.
    ///
    /// With `trimmed`, only data opcodes are accepted (else `Malformed`), the ICRC is neither required nor
    /// checked, the headers must be complete, anything after them is ignored and the payload is empty.
    /// Otherwise the last 4 bytes are the ICRC, checked first when `verify_icrc` (`BadIcrc`), and the
    /// opcode's headers must fit before it (`Truncated`); a control packet with bytes after its headers, or a
    /// READ_REQUEST with a payload, is `Malformed`. The payload is borrowed, never copied.
    #[inline]
    pub fn parse(buf: &'a [u8], opts: ParseOptions) -> Result<Packet<'a>> {
        Self::parse_auth(buf, opts).map(|(p, _)| p)
    }

    /// [`parse`](Self::parse), and where the AUTH tag is when BTH.AT says one follows the headers (spec
    /// WIRE-AUTH-1): the caller checks it against the connection's key before acting on anything.
    ///
    /// Always inlined, with the header parser under it: the packet is then built where the caller reads it,
    /// not moved out through memory (the endpoint's receive path ran 1.6% fewer instructions and about 5% less
    /// time per data packet, `benches/README.md`).
    #[inline(always)]
    pub fn parse_auth(buf: &'a [u8], opts: ParseOptions) -> Result<(Packet<'a>, Option<AuthTag>)> {
        if opts.trimmed {
            // spec: WIRE-ICRC-2
            return Self::parse_headers(buf, Tail::Trimmed);
        }
        if buf.len() < BTH_LEN + ICRC_LEN {
            return Err(Error::Truncated);
        }
        // spec: WIRE-ICRC-1
        if opts.verify_icrc && !icrc::check(buf) {
            return Err(Error::BadIcrc);
        }
        let covered = buf.get(..buf.len() - ICRC_LEN).ok_or(Error::Truncated)?;
        Self::parse_headers(covered, Tail::Whole)
    }

    /// Parses only the headers at the start of `buf`, of any opcode, and ignores whatever follows them
    /// (payload, ICRC, or nothing at all): for a datagram of ours that came back in an ICMP error, which quotes
    /// only its start. The ICRC is not checked and the payload is empty; bytes short of the headers are
    /// `Truncated`.
    pub fn parse_prefix(buf: &'a [u8]) -> Result<Packet<'a>> {
        Self::parse_prefix_auth(buf).map(|(p, _)| p)
    }

    /// [`parse_prefix`](Self::parse_prefix), and the AUTH tag if the headers have one.
    pub fn parse_prefix_auth(buf: &'a [u8]) -> Result<(Packet<'a>, Option<AuthTag>)> {
        Self::parse_headers(buf, Tail::Ignored)
    }

    /// Parses BTH, headers and payload of `buf` (the UDP payload without its ICRC, or what `tail` says).
    #[inline(always)]
    fn parse_headers(buf: &'a [u8], tail: Tail) -> Result<(Packet<'a>, Option<AuthTag>)> {
        let mut r = Reader::new(buf);
        let b = r.take()?;
        let op = Bth::check(b)?;
        let bth = Bth::decode_checked(op, b);
        let ts = Bth::ts(b);
        let at = b[1] & AT != 0;
        // spec: WIRE-AUTH-1
        let take_tag = |r: &mut Reader<'a>, request: bool| -> Result<Option<AuthTag>> {
            if !at {
                return Ok(None);
            }
            let covered = buf.len() - r.rest().len();
            Ok(Some(AuthTag {
                covered,
                tag: *r.take()?,
                request,
            }))
        };
        if tail == Tail::Trimmed && !op.is_data() {
            return Err(Error::Malformed);
        }
        let body = match op.kind() {
            kind @ (OpKind::Write | OpKind::Send | OpKind::ReadRequest | OpKind::ReadResponse) => {
                let meth = Meth::decode(r.take()?);
                // spec: WIRE-BTH-2
                let ts = if ts {
                    Some(u32::from_be_bytes(*r.take::<TSETH_LEN>()?))
                } else {
                    None
                };
                let reth = Reth::decode(r.take()?);
                let imm = if op.has_imm() {
                    Some(u32::from_be_bytes(*r.take::<IMM_LEN>()?))
                } else {
                    None
                };
                let auth = take_tag(&mut r, kind != OpKind::ReadResponse)?;
                // spec: WIRE-PAY-1
                let payload = if tail == Tail::Whole { r.rest() } else { &[] };
                if op == Opcode::ReadRequest && !payload.is_empty() {
                    return Err(Error::Malformed);
                }
                return Ok((
                    Packet {
                        bth,
                        body: Body::Data(Data {
                            meth,
                            ts,
                            reth,
                            imm,
                            payload,
                        }),
                    },
                    auth,
                ));
            }
            OpKind::Sack => Body::Sack(Sack::decode(r.take()?)),
            OpKind::Nack => Body::Nack(Nack::decode(r.take()?)),
            OpKind::Probe => Body::Probe(Probe::decode(r.take()?)),
            OpKind::Ack => Body::Ack(Ack::decode(r.take()?)),
            OpKind::EpRequest => Body::EpRequest(EpRequest::read(&mut r, ts)?),
            OpKind::EpResponse => Body::EpResponse(EpResponse::decode(r.take()?)),
        };
        let auth = take_tag(&mut r, false)?;
        // Control packets are exactly their headers.
        if tail == Tail::Whole && !r.rest().is_empty() {
            return Err(Error::Malformed);
        }
        Ok((Packet { bth, body }, auth))
    }

    /// The payload of a data packet (empty for control packets).
    pub fn payload(&self) -> &'a [u8] {
        match self.body {
            Body::Data(d) => d.payload,
            _ => &[],
        }
    }

    /// Whether BTH.TS is set: the body carries a timestamp header.
    pub fn ts_flag(&self) -> bool {
        match self.body {
            Body::Data(d) => d.ts.is_some(),
            Body::EpRequest(q) => q.ts.is_some(),
            _ => false,
        }
    }

    /// Bytes of headers (BTH, extension headers, TSETH if any), without payload and ICRC.
    pub fn header_len(&self) -> usize {
        BTH_LEN
            + match &self.body {
                Body::Data(d) => {
                    METH_LEN
                        + if d.ts.is_some() { TSETH_LEN } else { 0 }
                        + RETH_LEN
                        + if self.bth.opcode.has_imm() {
                            IMM_LEN
                        } else {
                            0
                        }
                }
                Body::Sack(_) => SACK_LEN,
                Body::Nack(_) => NETH_LEN,
                Body::Probe(_) => PETH_LEN,
                Body::Ack(_) => AETH_LEN,
                Body::EpRequest(q) => q.wire_len(),
                Body::EpResponse(_) => EETH_LEN,
            }
    }

    /// Bytes of the whole UDP payload: headers, payload and ICRC.
    pub fn buffer_len(&self) -> usize {
        self.header_len() + self.payload().len() + ICRC_LEN
    }

    /// `Malformed` when the body is not the opcode's, immediate data disagrees with the opcode or a
    /// READ_REQUEST has a payload: such a packet has no wire form.
    fn check(&self) -> Result<()> {
        let op = self.bth.opcode;
        let ok = match &self.body {
            Body::Data(d) => {
                op.is_data()
                    && d.imm.is_some() == op.has_imm()
                    && (op != Opcode::ReadRequest || d.payload.is_empty())
            }
            Body::Sack(_) => op == Opcode::Sack,
            Body::Nack(_) => op == Opcode::Nack,
            Body::Probe(_) => op == Opcode::Probe,
            Body::Ack(_) => op == Opcode::Ack,
            Body::EpRequest(_) => op == Opcode::EpRequest,
            Body::EpResponse(_) => op == Opcode::EpResponse,
        };
        if ok { Ok(()) } else { Err(Error::Malformed) }
    }

    /// Writes the headers into `buf[..header_len()]` and returns `header_len()`. The caller writes the payload
    /// after them and then calls [`seal`](super::seal), so a payload can go straight from its source into the
    /// datagram. `Truncated` if `buf` is too short, `Malformed` if the packet has no wire form.
    pub fn emit_header(&self, buf: &mut [u8]) -> Result<usize> {
        self.check()?;
        if buf.len() < self.header_len() {
            return Err(Error::Truncated);
        }
        if let Body::Data(d) = &self.body {
            return DataHeader {
                bth: self.bth,
                meth: d.meth,
                ts: d.ts,
                reth: d.reth,
                imm: d.imm,
            }
            .emit(buf);
        }
        let mut w = Writer::new(buf);
        // spec: WIRE-BTH-2
        self.bth.encode(self.ts_flag(), w.take()?);
        match &self.body {
            // Written above.
            Body::Data(_) => {}
            Body::Sack(s) => s.encode(w.take()?),
            Body::Nack(n) => n.encode(w.take()?),
            Body::Probe(p) => p.encode(w.take()?),
            Body::Ack(a) => a.encode(w.take()?),
            Body::EpRequest(q) => q.write(&mut w)?,
            Body::EpResponse(e) => e.encode(w.take()?),
        }
        Ok(w.pos())
    }

    /// Writes the whole UDP payload (headers, payload, ICRC) and returns [`buffer_len`](Self::buffer_len).
    pub fn emit(&self, buf: &mut [u8]) -> Result<usize> {
        let payload = self.payload();
        let total = self.buffer_len();
        if buf.len() < total {
            return Err(Error::Truncated);
        }
        let h = self.emit_header(buf)?;
        let end = h + payload.len();
        buf.get_mut(h..end)
            .ok_or(Error::Truncated)?
            .copy_from_slice(payload);
        super::seal(buf, end)
    }

    /// [`emit`](Self::emit) with `tag`'s bytes as the AUTH tag after the headers (BTH.AT set) when given: a parsed
    /// tagged packet as it was (the tag is copied, not computed; [`AuthKey::seal_headers`](super::AuthKey) makes
    /// one). Returns the bytes written.
    pub fn emit_tagged(&self, tag: Option<&AuthTag>, buf: &mut [u8]) -> Result<usize> {
        let Some(t) = tag else {
            return self.emit(buf);
        };
        let payload = self.payload();
        let h = self.emit_header(buf)?;
        let end = h + AUTH_LEN + payload.len();
        if buf.len() < end + ICRC_LEN {
            return Err(Error::Truncated);
        }
        buf[1] |= AT;
        buf[h..h + AUTH_LEN].copy_from_slice(&t.tag);
        buf[h + AUTH_LEN..end].copy_from_slice(payload);
        super::seal(buf, end)
    }

    /// Every field as `(name, value)` text, for test vectors and trace dumps. Names are those of
    /// `spec/vectors/README.md`; numbers are hex at their wire width except counts and lengths, which are
    /// decimal.
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let b = &self.bth;
        let mut out = vec![
            ("opcode", b.opcode.name().to_string()),
            ("se", b.se.to_string()),
            ("rtx", b.rtx.to_string()),
            ("pkey", format!("{:#06x}", b.pkey)),
            ("dest_qp", hex24(b.dest_qp)),
            ("ack_req", b.ack_req.to_string()),
            ("psn", hex24(b.psn)),
        ];
        match &self.body {
            Body::Data(d) => out.extend([
                ("ev", hex32(d.meth.ev)),
                ("msn", format!("{:#06x}", d.meth.msn)),
                ("rqmsn", format!("{:#06x}", d.meth.rqmsn)),
                ("ts", opt32(d.ts)),
                ("va", format!("{:#018x}", d.reth.va)),
                ("rkey", hex32(d.reth.rkey)),
                ("dma_len", d.reth.dma_len.to_string()),
                ("imm", opt32(d.imm)),
                ("payload_len", d.payload.len().to_string()),
            ]),
            Body::Sack(s) => out.extend([
                ("mark", s.mark.to_string()),
                ("probe_reply", s.probe_reply.to_string()),
                ("mpr", s.mpr.to_string()),
                ("ev", hex32(s.ev)),
                ("cack_psn", hex24(s.cack_psn)),
                ("sack_base", hex24(s.sack_base)),
                ("bitmap", format!("{:#018x}", s.bitmap)),
                ("ts_echo", opt32(s.ts_echo)),
                ("cwnd_pen", s.cwnd_pen.to_string()),
                ("ooo_count", s.ooo_count.to_string()),
            ]),
            Body::Nack(n) => out.extend([
                ("reason", n.reason.to_string()),
                ("nack_psn", hex24(n.psn)),
                ("ev", hex32(n.ev)),
                ("ts_echo", hex32(n.ts_echo)),
                ("mpr", n.mpr.to_string()),
                ("cack_psn", hex24(n.cack_psn)),
            ]),
            Body::Probe(p) => out.extend([("ev", hex32(p.ev)), ("ts", hex32(p.ts))]),
            Body::Ack(a) => out.extend([
                ("cack_psn", hex24(a.cack_psn)),
                ("cmsn", format!("{:#06x}", a.cmsn)),
            ]),
            Body::EpRequest(q) => out.extend([
                ("op", q.op.to_string()),
                ("req_id", hex32(q.req_id)),
                ("port_mask", hex32(q.port_mask)),
                ("ev", hex32(q.ev)),
                ("ts", opt32(q.ts)),
            ]),
            Body::EpResponse(e) => out.extend([
                ("op", e.op.to_string()),
                ("rx_port", e.rx_port.to_string()),
                ("req_id", hex32(e.req_id)),
                ("ev", hex32(e.ev)),
                ("ts_echo", hex32(e.ts_echo)),
            ]),
        }
        out
    }
}

fn hex24(v: u32) -> String {
    format!("{v:#08x}")
}

fn hex32(v: u32) -> String {
    format!("{v:#010x}")
}

fn opt32(v: Option<u32>) -> String {
    v.map_or_else(|| "none".to_string(), hex32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::{
        DEFAULT_PKEY, EpOp, MAX_DATA_HEADER_LEN, NackReason, SackMark, TRIM_KEEP_LEN, seal,
    };

    const FULL: ParseOptions = ParseOptions {
        verify_icrc: true,
        trimmed: false,
    };
    const TRIM: ParseOptions = ParseOptions {
        verify_icrc: false,
        trimmed: true,
    };

    fn bth(opcode: Opcode) -> Bth {
        Bth {
            psn: 5,
            ..Bth::new(opcode, 0x21)
        }
    }

    fn data(payload: &[u8], ts: Option<u32>, imm: Option<u32>) -> Data<'_> {
        Data {
            meth: Meth {
                ev: 0x0A0B_0C0D,
                msn: 3,
                rqmsn: 1,
            },
            ts,
            reth: Reth {
                va: 0x1000,
                rkey: 0x77,
                dma_len: 4,
            },
            imm,
            payload,
        }
    }

    #[test]
    fn write_only_imm_with_ts_byte_by_byte() {
        let p = Packet {
            bth: bth(Opcode::WriteOnlyImm),
            body: Body::Data(data(
                &[0xDE, 0xAD, 0xBE, 0xEF],
                Some(0x1122_3344),
                Some(0x5566_7788),
            )),
        };
        assert_eq!(p.header_len(), MAX_DATA_HEADER_LEN);
        let mut buf = [0u8; 64];
        let n = p.emit(&mut buf).unwrap();
        assert_eq!(n, 44 + 4 + 4);
        #[rustfmt::skip]
        let want: [u8; 48] = [
            0xCB, 0x21, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x21, 0x00, 0x00, 0x00, 0x05, // BTH (TS, TVer 1)
            0x0A, 0x0B, 0x0C, 0x0D, 0x00, 0x03, 0x00, 0x01, // METH
            0x11, 0x22, 0x33, 0x44, // TSETH
            0, 0, 0, 0, 0, 0, 0x10, 0x00, 0, 0, 0, 0x77, 0, 0, 0, 4, // RETH
            0x55, 0x66, 0x77, 0x88, // ImmDt
            0xDE, 0xAD, 0xBE, 0xEF, // payload
        ];
        assert_eq!(&buf[..48], &want);
        assert_eq!(&buf[48..52], &icrc(&want).to_be_bytes());
        let back = Packet::parse(&buf[..n], FULL).unwrap();
        assert_eq!(back, p);
        // The payload is borrowed from the buffer, not copied.
        assert_eq!(back.payload().as_ptr(), buf[44..].as_ptr());
    }

    #[test]
    fn split_emit_matches_emit() {
        let payload = [9u8; 100];
        let p = Packet {
            bth: bth(Opcode::SendFirst),
            body: Body::Data(data(&payload, None, None)),
        };
        let mut a = [0u8; 200];
        let mut b = [0u8; 200];
        let n = p.emit(&mut a).unwrap();
        let h = p.emit_header(&mut b).unwrap();
        assert_eq!(h, BTH_LEN + METH_LEN + RETH_LEN);
        b[h..h + payload.len()].copy_from_slice(&payload);
        assert_eq!(seal(&mut b, h + payload.len()), Ok(n));
        assert_eq!(a, b);
        assert_eq!(p.emit(&mut a[..n - 1]), Err(Error::Truncated));
        assert_eq!(p.emit_header(&mut a[..h - 1]), Err(Error::Truncated));
    }

    #[test]
    fn inconsistent_reprs_are_not_emitted() {
        let mut buf = [0u8; 128];
        let cases = [
            Packet {
                bth: bth(Opcode::WriteOnly),
                body: Body::Data(data(&[], None, Some(1))),
            },
            Packet {
                bth: bth(Opcode::WriteOnlyImm),
                body: Body::Data(data(&[], None, None)),
            },
            Packet {
                bth: bth(Opcode::ReadRequest),
                body: Body::Data(data(&[1], None, None)),
            },
            Packet {
                bth: bth(Opcode::Sack),
                body: Body::Data(data(&[], None, None)),
            },
            Packet {
                bth: bth(Opcode::WriteOnly),
                body: Body::Probe(Probe { ev: 1, ts: 2 }),
            },
        ];
        for p in cases {
            assert_eq!(p.emit(&mut buf), Err(Error::Malformed), "{p:?}");
        }
    }

    /// One packet body of each control opcode, with its opcode.
    fn control_bodies() -> [(Opcode, Body<'static>); 6] {
        [
            (
                Opcode::Sack,
                Body::Sack(Sack {
                    mark: SackMark::SkipOnce,
                    probe_reply: false,
                    mpr: 8,
                    ev: 1,
                    cack_psn: 2,
                    sack_base: 4,
                    bitmap: 5,
                    ts_echo: None,
                    cwnd_pen: 0,
                    ooo_count: 1,
                }),
            ),
            (
                Opcode::Nack,
                Body::Nack(Nack {
                    reason: NackReason::Trimmed,
                    psn: 3,
                    ev: 1,
                    ts_echo: 9,
                    mpr: 8,
                    cack_psn: 2,
                }),
            ),
            (Opcode::Probe, Body::Probe(Probe { ev: 1, ts: 2 })),
            (
                Opcode::Ack,
                Body::Ack(Ack {
                    cack_psn: 2,
                    cmsn: 1,
                }),
            ),
            (
                Opcode::EpRequest,
                Body::EpRequest(EpRequest {
                    op: EpOp::EvProbe,
                    req_id: 1,
                    port_mask: 3,
                    ev: 4,
                    ts: Some(5),
                }),
            ),
            (
                Opcode::EpResponse,
                Body::EpResponse(EpResponse {
                    op: EpOp::PortStatus,
                    rx_port: 1,
                    req_id: 1,
                    ev: 4,
                    ts_echo: 5,
                }),
            ),
        ]
    }

    #[test]
    fn control_packets_have_exact_lengths() {
        for (op, body) in control_bodies() {
            let p = Packet {
                bth: Bth::new(op, 2),
                body,
            };
            let mut buf = [0u8; 64];
            let n = p.emit(&mut buf).unwrap();
            assert_eq!(Packet::parse(&buf[..n], FULL), Ok(p));
            // One byte more (resealed) is malformed; one byte less is truncated.
            let mut longer = [0u8; 65];
            longer[..n - 4].copy_from_slice(&buf[..n - 4]);
            let m = seal(&mut longer, n - 3).unwrap();
            assert_eq!(Packet::parse(&longer[..m], FULL), Err(Error::Malformed));
            let mut shorter = buf;
            let m = seal(&mut shorter, n - 5).unwrap();
            assert_eq!(Packet::parse(&shorter[..m], FULL), Err(Error::Truncated));
            // Control packets are never trimmed.
            assert_eq!(Packet::parse(&buf[..n], TRIM), Err(Error::Malformed));
        }
    }

    /// The parser says which tags are request tokens (spec WIRE-AUTH-1): only WRITE, SEND and READ request
    /// packets may carry the token, every other packet the MAC of its headers.
    #[test]
    fn parsed_tags_take_the_token_only_on_requests() {
        use crate::wire::{AuthKey, OpKind};
        let key = AuthKey::new(*b"0123456789abcdef");
        let token: [u8; AUTH_LEN] = key.tag(&[]);
        for op in Opcode::ALL {
            let body = match op.kind() {
                OpKind::ReadRequest => Body::Data(data(&[], None, None)),
                OpKind::Write | OpKind::Send | OpKind::ReadResponse => {
                    Body::Data(data(&[1, 2, 3, 4], None, op.has_imm().then_some(9)))
                }
                _ => match control_bodies().into_iter().find(|(o, _)| *o == op) {
                    Some((_, b)) => b,
                    None => panic!("{op:?} has no sample body"),
                },
            };
            let p = Packet { bth: bth(op), body };
            let request = matches!(
                op.kind(),
                OpKind::Write | OpKind::Send | OpKind::ReadRequest
            );
            // The tag the sender's key computes (token or MAC), then the token in its place.
            let mut buf = [0u8; 128];
            let stub = AuthTag {
                covered: 0,
                tag: [0; AUTH_LEN],
                request: false,
            };
            let n = p.emit_tagged(Some(&stub), &mut buf).unwrap();
            let h = p.header_len();
            key.seal_headers(&mut buf, h).unwrap();
            seal(&mut buf, n - ICRC_LEN).unwrap();
            let (back, tag) = Packet::parse_auth(&buf[..n], FULL).unwrap();
            assert_eq!(back, p, "{op:?}");
            assert!(tag.unwrap().proves(&key, &buf[..n]), "{op:?}: its own tag");
            buf[h..h + AUTH_LEN].copy_from_slice(&token);
            seal(&mut buf, n - ICRC_LEN).unwrap();
            let (_, tag) = Packet::parse_auth(&buf[..n], FULL).unwrap();
            assert_eq!(
                tag.unwrap().proves(&key, &buf[..n]),
                request,
                "{op:?} with the token"
            );
        }
    }

    #[test]
    fn icrc_is_checked_before_anything_else() {
        let p = Packet {
            bth: bth(Opcode::Probe),
            body: Body::Probe(Probe { ev: 1, ts: 2 }),
        };
        let mut buf = [0u8; 64];
        let n = p.emit(&mut buf).unwrap();
        buf[1] = 0x02; // TVer 2
        assert_eq!(Packet::parse(&buf[..n], FULL), Err(Error::BadIcrc));
        let no_check = ParseOptions::default();
        assert_eq!(
            Packet::parse(&buf[..n], no_check),
            Err(Error::BadVersion(2))
        );
        buf[1] = 0x01;
        buf[0] = 0x42;
        assert_eq!(
            Packet::parse(&buf[..n], no_check),
            Err(Error::UnknownOpcode(0x42))
        );
        assert_eq!(Packet::parse(&buf[..15], no_check), Err(Error::Truncated));
    }

    #[test]
    fn ts_flag_on_other_control_opcodes_is_ignored() {
        let p = Packet {
            bth: bth(Opcode::Ack),
            body: Body::Ack(Ack {
                cack_psn: 1,
                cmsn: 2,
            }),
        };
        let mut buf = [0u8; 64];
        let n = p.emit(&mut buf).unwrap();
        assert_eq!(buf[1], 0x01, "TS clear");
        buf[1] |= 0x20;
        let m = seal(&mut buf, n - ICRC_LEN).unwrap();
        assert_eq!(Packet::parse(&buf[..m], FULL), Ok(p));
    }

    #[test]
    fn read_request_with_payload_is_malformed() {
        let p = Packet {
            bth: bth(Opcode::ReadRequest),
            body: Body::Data(data(&[], None, None)),
        };
        let mut buf = [0u8; 64];
        let n = p.emit(&mut buf).unwrap();
        assert_eq!(Packet::parse(&buf[..n], FULL), Ok(p));
        let m = seal(&mut buf, n - 4 + 1).unwrap();
        assert_eq!(Packet::parse(&buf[..m], FULL), Err(Error::Malformed));
    }

    #[test]
    fn trimmed_keeps_headers_only() {
        let payload = [7u8; 200];
        let p = Packet {
            bth: Bth {
                rtx: true,
                ..bth(Opcode::WriteMiddle)
            },
            body: Body::Data(data(&payload, Some(42), None)),
        };
        let mut buf = [0u8; 300];
        let n = p.emit(&mut buf).unwrap();
        let want = Packet {
            body: Body::Data(data(&[], Some(42), None)),
            ..p
        };
        assert_eq!(Packet::parse(&buf[..TRIM_KEEP_LEN], TRIM), Ok(want));
        assert_eq!(Packet::parse(&buf[..n], TRIM), Ok(want));
        assert_eq!(
            Packet::parse(&buf[..p.header_len()], TRIM),
            Ok(want),
            "no ICRC needed"
        );
        assert_eq!(
            Packet::parse(&buf[..p.header_len() - 1], TRIM),
            Err(Error::Truncated)
        );
        assert_eq!(want.bth.pkey, DEFAULT_PKEY);
    }
}
