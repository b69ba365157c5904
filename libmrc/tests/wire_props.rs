//! Property tests of the wire format: round trips, robustness against arbitrary bytes, ICRC coverage, trimming,
//! and the uSID and EV-expansion models.

use mrc::wire::*;
use proptest::prelude::*;
use proptest::sample::select;

/// A packet that owns its payload, so strategies can produce it.
#[derive(Debug, Clone)]
struct Owned {
    bth: Bth,
    body: OwnedBody,
}

#[derive(Debug, Clone)]
enum OwnedBody {
    Data {
        meth: Meth,
        ts: Option<u32>,
        reth: Reth,
        imm: Option<u32>,
        payload: Vec<u8>,
    },
    Control(Body<'static>),
}

impl Owned {
    fn packet(&self) -> Packet<'_> {
        let body = match &self.body {
            OwnedBody::Data {
                meth,
                ts,
                reth,
                imm,
                payload,
            } => Body::Data(Data {
                meth: *meth,
                ts: *ts,
                reth: *reth,
                imm: *imm,
                payload,
            }),
            OwnedBody::Control(b) => *b,
        };
        Packet {
            bth: self.bth,
            body,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let p = self.packet();
        let mut buf = vec![0u8; p.buffer_len()];
        assert_eq!(p.emit(&mut buf), Ok(buf.len()));
        buf
    }
}

const ALL_OPTIONS: [ParseOptions; 4] = [
    ParseOptions {
        verify_icrc: false,
        trimmed: false,
    },
    ParseOptions {
        verify_icrc: true,
        trimmed: false,
    },
    ParseOptions {
        verify_icrc: false,
        trimmed: true,
    },
    ParseOptions {
        verify_icrc: true,
        trimmed: true,
    },
];

const VERIFY: ParseOptions = ParseOptions {
    verify_icrc: true,
    trimmed: false,
};

fn u24() -> impl Strategy<Value = u32> {
    0..=PSN_MASK
}

fn bth(opcode: Opcode) -> impl Strategy<Value = Bth> {
    (
        any::<bool>(),
        any::<bool>(),
        any::<u16>(),
        u24(),
        any::<bool>(),
        u24(),
    )
        .prop_map(move |(se, rtx, pkey, dest_qp, ack_req, psn)| Bth {
            opcode,
            se,
            rtx,
            pkey,
            dest_qp,
            ack_req,
            psn,
        })
}

fn payload(opcode: Opcode) -> BoxedStrategy<Vec<u8>> {
    if opcode == Opcode::ReadRequest {
        Just(Vec::new()).boxed()
    } else {
        prop_oneof![
            3 => prop::collection::vec(any::<u8>(), 0..64),
            1 => prop::collection::vec(any::<u8>(), 0..9000),
        ]
        .boxed()
    }
}

fn nack_reason() -> impl Strategy<Value = NackReason> {
    // Unknown(v) only for values that are not named, as `from_u8` yields.
    any::<u8>().prop_map(NackReason::from_u8)
}

fn ep_op() -> impl Strategy<Value = EpOp> {
    any::<u8>().prop_map(EpOp::from_u8)
}

fn body(opcode: Opcode) -> BoxedStrategy<OwnedBody> {
    match opcode.kind() {
        OpKind::Write | OpKind::Send | OpKind::ReadRequest | OpKind::ReadResponse => (
            (any::<u32>(), any::<u16>(), any::<u16>()),
            any::<Option<u32>>(),
            (any::<u64>(), any::<u32>(), any::<u32>()),
            any::<u32>(),
            payload(opcode),
        )
            .prop_map(
                move |((ev, msn, rqmsn), ts, (va, rkey, dma_len), imm, payload)| OwnedBody::Data {
                    meth: Meth { ev, msn, rqmsn },
                    ts,
                    reth: Reth { va, rkey, dma_len },
                    imm: opcode.has_imm().then_some(imm),
                    payload,
                },
            )
            .boxed(),
        OpKind::Sack => (
            (
                select(vec![
                    SackMark::None,
                    SackMark::SkipOnce,
                    SackMark::AlwaysSkip,
                ]),
                any::<bool>(),
                any::<u8>(),
                any::<u32>(),
                u24(),
            ),
            (u24(), any::<u64>(), any::<Option<u32>>(), 0..=127u8, u24()),
        )
            .prop_map(
                |(
                    (mark, probe_reply, mpr, ev, cack_psn),
                    (sack_base, bitmap, ts_echo, cwnd_pen, ooo_count),
                )| {
                    OwnedBody::Control(Body::Sack(Sack {
                        mark,
                        probe_reply,
                        mpr,
                        ev,
                        cack_psn,
                        sack_base,
                        bitmap,
                        ts_echo,
                        cwnd_pen,
                        ooo_count,
                    }))
                },
            )
            .boxed(),
        OpKind::Nack => (
            nack_reason(),
            u24(),
            any::<u32>(),
            any::<u32>(),
            any::<u8>(),
            u24(),
        )
            .prop_map(|(reason, psn, ev, ts_echo, mpr, cack_psn)| {
                OwnedBody::Control(Body::Nack(Nack {
                    reason,
                    psn,
                    ev,
                    ts_echo,
                    mpr,
                    cack_psn,
                }))
            })
            .boxed(),
        OpKind::Probe => (any::<u32>(), any::<u32>())
            .prop_map(|(ev, ts)| OwnedBody::Control(Body::Probe(Probe { ev, ts })))
            .boxed(),
        OpKind::Ack => (u24(), any::<u16>())
            .prop_map(|(cack_psn, cmsn)| OwnedBody::Control(Body::Ack(Ack { cack_psn, cmsn })))
            .boxed(),
        OpKind::EpRequest => (
            ep_op(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<Option<u32>>(),
        )
            .prop_map(|(op, req_id, port_mask, ev, ts)| {
                OwnedBody::Control(Body::EpRequest(EpRequest {
                    op,
                    req_id,
                    port_mask,
                    ev,
                    ts,
                }))
            })
            .boxed(),
        OpKind::EpResponse => (
            ep_op(),
            any::<u8>(),
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
        )
            .prop_map(|(op, rx_port, req_id, ev, ts_echo)| {
                OwnedBody::Control(Body::EpResponse(EpResponse {
                    op,
                    rx_port,
                    req_id,
                    ev,
                    ts_echo,
                }))
            })
            .boxed(),
    }
}

fn packet_of(ops: Vec<Opcode>) -> impl Strategy<Value = Owned> {
    select(ops).prop_flat_map(|op| (bth(op), body(op)).prop_map(|(bth, body)| Owned { bth, body }))
}

fn any_packet() -> impl Strategy<Value = Owned> {
    packet_of(Opcode::ALL.to_vec())
}

fn data_packet() -> impl Strategy<Value = Owned> {
    packet_of(Opcode::ALL.into_iter().filter(|op| op.is_data()).collect())
}

/// Parses with every option combination; the point is that none of them panics.
fn parse_all_ways(buf: &[u8]) {
    for opts in ALL_OPTIONS {
        let _ = Packet::parse(buf, opts);
        let _ = Frame::parse(buf, opts);
    }
    let _ = Packet::parse_prefix(buf);
    let _ = peek_dest_qp(buf);
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn every_packet_round_trips(p in any_packet()) {
        let packet = p.packet();
        let buf = p.bytes();
        prop_assert_eq!(buf.len(), packet.buffer_len());
        prop_assert_eq!(Packet::parse(&buf, VERIFY), Ok(packet));
        prop_assert_eq!(peek_dest_qp(&buf), Some(packet.bth.dest_qp));

        // Headers first, payload by the caller, then seal: the same bytes.
        let mut split = vec![0u8; buf.len()];
        let h = packet.emit_header(&mut split).unwrap();
        prop_assert_eq!(h, packet.header_len());
        let end = h + packet.payload().len();
        split[h..end].copy_from_slice(packet.payload());
        prop_assert_eq!(seal(&mut split, end), Ok(buf.len()));
        prop_assert_eq!(&split, &buf);

        // Too small a buffer is an error, not a panic.
        prop_assert_eq!(packet.emit(&mut vec![0u8; buf.len() - 1]), Err(Error::Truncated));
    }

    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        parse_all_ways(&bytes);
    }

    #[test]
    fn arbitrary_bytes_behind_a_valid_bth_never_panic(
        op in select(Opcode::ALL.to_vec()),
        flags in any::<u8>(),
        rest in prop::collection::vec(any::<u8>(), 0..120),
    ) {
        // Random bytes rarely start with a known opcode and TVer 1; this reaches the header parsers.
        let mut buf = vec![op as u8, (flags & 0xF0) | TVER];
        buf.extend_from_slice(&rest);
        parse_all_ways(&buf);
        if buf.len() >= ICRC_LEN {
            let len = buf.len() - ICRC_LEN;
            seal(&mut buf, len).unwrap();
            parse_all_ways(&buf);
        }
    }

    #[test]
    fn mutated_packets_never_panic_and_reparse_canonically(
        p in any_packet(),
        flips in prop::collection::vec(any::<prop::sample::Index>(), 0..4),
        cut in any::<prop::sample::Index>(),
        truncate in any::<bool>(),
        reseal in any::<bool>(),
    ) {
        let mut buf = p.bytes();
        let bits = buf.len() * 8;
        for f in &flips {
            let bit = f.index(bits);
            buf[bit / 8] ^= 1 << (bit % 8);
        }
        if truncate {
            buf.truncate(cut.index(buf.len() + 1));
        }
        if reseal && buf.len() >= ICRC_LEN {
            let len = buf.len() - ICRC_LEN;
            seal(&mut buf, len).unwrap();
        }
        parse_all_ways(&buf);
        // Whatever parses re-emits to bytes that parse to the same packet.
        if let Ok(q) = Packet::parse(&buf, ParseOptions::default()) {
            let mut out = vec![0u8; q.buffer_len()];
            q.emit(&mut out).unwrap();
            prop_assert_eq!(Packet::parse(&out, VERIFY), Ok(q));
        }
    }

    #[test]
    fn any_flipped_bit_fails_the_icrc(p in any_packet(), at in any::<prop::sample::Index>()) {
        let mut buf = p.bytes();
        let bit = at.index(buf.len() * 8);
        buf[bit / 8] ^= 1 << (bit % 8);
        prop_assert_eq!(Packet::parse(&buf, VERIFY), Err(Error::BadIcrc));
    }

    #[test]
    fn trimmed_packets_keep_their_headers(p in data_packet(), at in any::<prop::sample::Index>()) {
        let packet = p.packet();
        let buf = p.bytes();
        let h = packet.header_len();
        let len = h + at.index(buf.len() - h + 1);
        let Body::Data(d) = packet.body else { unreachable!() };
        let want = Packet { bth: packet.bth, body: Body::Data(Data { payload: &[], ..d }) };
        for verify_icrc in [false, true] {
            let opts = ParseOptions { verify_icrc, trimmed: true };
            prop_assert_eq!(Packet::parse(&buf[..len], opts), Ok(want));
            prop_assert_eq!(Packet::parse(&buf[..h - 1], opts), Err(Error::Truncated));
        }
    }

    /// A bounced datagram's quote (spec PATH-BOUNCE-1): any packet cut anywhere after its headers parses to its
    /// headers; cut inside them, it is truncated.
    #[test]
    fn quotes_cut_after_the_headers_parse_to_the_headers(p in any_packet(), at in any::<prop::sample::Index>()) {
        let packet = p.packet();
        let buf = p.bytes();
        let h = packet.header_len();
        let len = h + at.index(buf.len() - h + 1);
        let want = match packet.body {
            Body::Data(d) => Packet { bth: packet.bth, body: Body::Data(Data { payload: &[], ..d }) },
            _ => packet,
        };
        prop_assert_eq!(Packet::parse_prefix(&buf[..len]), Ok(want));
        prop_assert_eq!(Packet::parse_prefix(&buf[..h - 1]), Err(Error::Truncated));
    }
}

// ---- uSID containers against a list model ----

fn slots(bits: u128) -> [u16; 6] {
    core::array::from_fn(|i| (bits >> (80 - 16 * i)) as u16)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn usid_shift_matches_list_model(block in any::<u32>(), usids in prop::collection::vec(1..=u16::MAX, 1..=6)) {
        let mut c = UsidContainer::new(block, &usids).unwrap();
        let mut model = usids.clone();
        for _ in 0..=usids.len() {
            prop_assert_eq!(c.block(), block);
            prop_assert_eq!(c.usids().collect::<Vec<_>>(), model.clone());
            prop_assert_eq!(c.active(), model.first().copied());
            prop_assert_eq!(UsidContainer::from_ipv6(c.to_ipv6()), c);
            c = c.shift();
            if !model.is_empty() {
                model.remove(0);
            }
        }
        prop_assert_eq!(c.bits(), u128::from(block) << 96);
    }

    #[test]
    fn usid_shift_of_any_bits(bits in any::<u128>()) {
        let c = UsidContainer::from_bits(bits);
        let s = slots(bits);
        let mut model = s.to_vec();
        model.remove(0);
        model.push(0);
        let shifted = c.shift();
        prop_assert_eq!(slots(shifted.bits()).to_vec(), model);
        prop_assert_eq!(shifted.block(), c.block());
        let listed: Vec<u16> = s.iter().copied().take_while(|&u| u != 0).collect();
        prop_assert_eq!(c.usids().collect::<Vec<_>>(), listed);
        prop_assert_eq!(c.active(), (s[0] != 0).then_some(s[0]));
    }

    #[test]
    fn usid_new_rejects_bad_lists(block in any::<u32>(), usids in prop::collection::vec(any::<u16>(), 0..10)) {
        let r = UsidContainer::new(block, &usids);
        let ok = (1..=6).contains(&usids.len()) && !usids.contains(&0);
        prop_assert_eq!(r.is_ok(), ok);
    }
}

// ---- EV expansion against a bit-by-bit model ----

/// The spec's description, one bit at a time: the path index is a right-aligned number of k bits (k = bits the
/// masks take), read MSB first; each field's mask positions from the highest, fields concatenated MSB first,
/// left-aligned. `None` if the index has bits set above k.
fn model_expand(fields: &[EvField], ev: u32) -> Option<u128> {
    let k: usize = fields.iter().map(|f| f.mask.count_ones() as usize).sum();
    if (k..32).any(|i| (ev >> i) & 1 == 1) {
        return None;
    }
    let ev_bits: Vec<bool> = (0..k).rev().map(|i| (ev >> i) & 1 == 1).collect();
    let mut next = 0;
    let mut out: Vec<bool> = Vec::new();
    for f in fields {
        for pos in (0..u32::from(f.width)).rev() {
            if (f.mask >> pos) & 1 == 1 {
                out.push(ev_bits[next]);
                next += 1;
            } else {
                out.push((f.init >> pos) & 1 == 1);
            }
        }
    }
    Some(
        out.iter()
            .enumerate()
            .fold(0u128, |acc, (i, &b)| acc | (u128::from(b) << (127 - i))),
    )
}

fn model_valid(fields: &[EvField]) -> bool {
    let fits = |v: u32, w: u8| w >= 32 || v >> w == 0;
    fields
        .iter()
        .all(|f| (1..=32).contains(&f.width) && fits(f.init, f.width) && fits(f.mask, f.width))
        && fields.iter().map(|f| u32::from(f.width)).sum::<u32>() <= 128
        && fields.iter().map(|f| f.mask.count_ones()).sum::<u32>() <= 32
}

fn low(width: u8) -> u32 {
    if width >= 32 {
        u32::MAX
    } else {
        (1 << width) - 1
    }
}

/// Valid templates: random fields, sparse masks, cut at the first field that would break a limit.
fn valid_fields() -> impl Strategy<Value = Vec<EvField>> {
    prop::collection::vec(
        (
            1..=32u8,
            any::<u32>(),
            any::<u32>(),
            any::<u32>(),
            any::<bool>(),
        ),
        0..8,
    )
    .prop_map(|raw| {
        let (mut width, mut taken) = (0u32, 0u32);
        let mut fields = Vec::new();
        for (w, init, m1, m2, dense) in raw {
            let mask = if dense { m1 } else { m1 & m2 } & low(w);
            let f = EvField {
                width: w,
                init: init & low(w),
                mask,
            };
            if width + u32::from(w) > 128 || taken + mask.count_ones() > 32 {
                break;
            }
            width += u32::from(w);
            taken += mask.count_ones();
            fields.push(f);
        }
        fields
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn ev_expansion_matches_bit_model(fields in valid_fields(), ev in any::<u32>()) {
        let t = EvTemplate::new(fields.clone()).unwrap();
        let taken: u32 = fields.iter().map(|f| f.mask.count_ones()).sum();
        prop_assert_eq!(t.ev_bits(), taken);
        // The same index with the bits above those taken cleared is valid.
        let valid_ev = ev & u32::MAX.checked_shr(32 - taken).unwrap_or(0);
        let got = t.expand(valid_ev).unwrap();
        prop_assert_eq!(Some(got), model_expand(&fields, valid_ev));
        prop_assert_eq!(t.expand_ipv6(valid_ev).unwrap(), std::net::Ipv6Addr::from(got));
        // The raw EV is valid exactly when the model says so.
        prop_assert_eq!(t.expand(ev).ok(), model_expand(&fields, ev));
    }

    #[test]
    fn ev_template_validation_matches_model(
        raw in prop::collection::vec((0..=40u8, any::<u32>(), any::<u32>(), any::<bool>()), 0..10),
    ) {
        let fields: Vec<EvField> = raw
            .into_iter()
            .map(|(width, init, mask, fit)| {
                let m = if fit { low(width) } else { u32::MAX };
                EvField { width, init: init & m, mask: mask & m & (mask >> 3) }
            })
            .collect();
        prop_assert_eq!(EvTemplate::new(fields.clone()).is_ok(), model_valid(&fields));
    }

    #[test]
    fn plane_is_the_low_bits(ev in any::<u32>(), bits in 0..=40u8) {
        let want = (0..u32::from(bits.min(32))).fold(0, |acc, i| acc | (ev & (1 << i)));
        prop_assert_eq!(plane_of(ev, bits), want);
    }
}
