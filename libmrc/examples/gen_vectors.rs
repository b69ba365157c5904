//! Writes the golden wire vectors in `spec/vectors/` (format: `spec/vectors/README.md`).
//!
//! Run with `cargo run -p mrc --example gen_vectors`. Each vector is built as a representation, emitted, parsed
//! back (the generator refuses to write a vector that does not round-trip) and written with every decoded field.
//! `libmrc/tests/wire_vectors.rs` checks the files against the code.

use std::fmt::Write as _;
use std::net::Ipv6Addr;
use std::path::Path;

use mrc::wire::*;

struct Vector {
    name: &'static str,
    about: &'static str,
    frame: bool,
    trimmed: bool,
    auth: Option<[u8; 16]>,
    bytes: Vec<u8>,
    fields: Vec<(&'static str, String)>,
}

const VERIFY: ParseOptions = ParseOptions {
    verify_icrc: true,
    trimmed: false,
};

fn pattern(n: usize) -> Vec<u8> {
    (0..n).map(|i| i as u8).collect()
}

fn bth(opcode: Opcode, psn: u32) -> Bth {
    Bth {
        psn,
        ..Bth::new(opcode, 0x21)
    }
}

fn data<'a>(
    ev: u32,
    msn: u16,
    rqmsn: u16,
    ts: Option<u32>,
    reth: Reth,
    imm: Option<u32>,
    payload: &'a [u8],
) -> Body<'a> {
    Body::Data(Data {
        meth: Meth { ev, msn, rqmsn },
        ts,
        reth,
        imm,
        payload,
    })
}

/// Emits `p`, checks that it parses back to itself, and describes the parsed packet.
fn packet_vector(name: &'static str, about: &'static str, p: Packet<'_>) -> Vector {
    let mut bytes = vec![0u8; p.buffer_len()];
    p.emit(&mut bytes).expect("emit");
    let back = Packet::parse(&bytes, VERIFY).expect("parse");
    assert_eq!(back, p, "{name} does not round-trip");
    Vector {
        name,
        about,
        frame: false,
        trimmed: false,
        auth: None,
        fields: back.describe(),
        bytes,
    }
}

/// The key of the AUTH-tagged vectors: bytes 00 01 .. 0f.
const AUTH_KEY: [u8; 16] = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];

/// `p` with an AUTH tag made with [`AUTH_KEY`] after its headers (spec WIRE-AUTH-1); checked to parse back
/// with a tag that proves the key.
fn auth_vector(name: &'static str, about: &'static str, p: Packet<'_>) -> Vector {
    let key = AuthKey::new(AUTH_KEY);
    let mut bytes = vec![0u8; p.buffer_len() + AUTH_LEN];
    let h = p.emit_header(&mut bytes).expect("emit");
    let h = key.seal_headers(&mut bytes, h).expect("tag");
    bytes[h..h + p.payload().len()].copy_from_slice(p.payload());
    let n = seal(&mut bytes, h + p.payload().len()).expect("icrc");
    bytes.truncate(n);
    let (back, tag) = Packet::parse_auth(&bytes, VERIFY).expect("parse");
    assert_eq!(back, p, "{name} does not round-trip");
    assert!(tag.expect("tagged").proves(&key, &bytes), "{name}: tag");
    Vector {
        name,
        about,
        frame: false,
        trimmed: false,
        auth: Some(AUTH_KEY),
        fields: back.describe(),
        bytes,
    }
}

/// The EV, buffer address and R_Key of most vectors.
const EV: u32 = 0x0003_0001;
const BASE: u64 = 0x0000_7f00_0000_1000;
const RKEY: u32 = 0x00ab_cdef;

fn reth(off: u64, dma_len: u32) -> Reth {
    Reth {
        va: BASE + off,
        rkey: RKEY,
        dma_len,
    }
}

fn main() {
    let mut vectors = data_vectors();
    vectors.extend(control_vectors());
    vectors.push(frame_vector());
    vectors.extend(auth_vectors());
    vectors.push(trimmed_vector());
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/vectors");
    std::fs::create_dir_all(&dir).expect("create spec/vectors");
    for v in &vectors {
        let path = dir.join(format!("{}.vec", v.name));
        std::fs::write(&path, render(v)).expect("write vector");
    }
    println!("wrote {} vectors to {}", vectors.len(), dir.display());
}

/// WRITE, SEND and READ packets.
fn data_vectors() -> Vec<Vector> {
    let ev = EV;
    let p32 = pattern(32);
    let p16 = pattern(16);
    let p8 = pattern(8);
    let p4 = pattern(4);

    let write_first = Packet {
        bth: bth(Opcode::WriteFirst, 0x000100),
        body: data(ev, 7, 2, Some(0x1234_5678), reth(0, 80), None, &p32),
    };
    vec![
        packet_vector(
            "write_first",
            "First packet of an 80-byte WRITE (payload MTU 32 for readability), with a TSETH: BTH.TS set.",
            write_first,
        ),
        packet_vector(
            "write_middle",
            "Middle packet, a retransmission (RTX) without a timestamp; VA advanced by one payload MTU.",
            Packet {
                bth: Bth {
                    rtx: true,
                    ..bth(Opcode::WriteMiddle, 0x000101)
                },
                body: data(ev + 4, 7, 2, None, reth(32, 80), None, &p32),
            },
        ),
        packet_vector(
            "write_last",
            "Last packet of the WRITE, asking for an immediate SACK (A bit).",
            Packet {
                bth: Bth {
                    ack_req: true,
                    ..bth(Opcode::WriteLast, 0x000102)
                },
                body: data(ev + 8, 7, 2, Some(0x1234_5700), reth(64, 80), None, &p16),
            },
        ),
        packet_vector(
            "write_last_imm",
            "Last packet of a WRITE_IMM: ImmDt after the RETH; WRITE_IMM consumes a receive (RQMSN 2).",
            Packet {
                bth: bth(Opcode::WriteLastImm, 0x000105),
                body: data(ev, 8, 2, None, reth(64, 80), Some(0xcafe_f00d), &p16),
            },
        ),
        packet_vector(
            "write_only",
            "One-packet WRITE with the solicited-event bit and a non-default P_Key.",
            Packet {
                bth: Bth {
                    se: true,
                    pkey: 0x8001,
                    ..bth(Opcode::WriteOnly, 0x000106)
                },
                body: data(ev, 9, 3, Some(0x0000_0001), reth(0, 8), None, &p8),
            },
        ),
        packet_vector(
            "write_only_imm",
            "One-packet WRITE_IMM with TSETH and ImmDt: the longest data header stack (44 bytes).",
            Packet {
                bth: bth(Opcode::WriteOnlyImm, 0x000005),
                body: data(
                    0x0a0b_0c0d,
                    3,
                    1,
                    Some(0x1122_3344),
                    Reth {
                        va: 0x1000,
                        rkey: 0x77,
                        dma_len: 4,
                    },
                    Some(0x5566_7788),
                    &p4,
                ),
            },
        ),
        packet_vector(
            "send_only",
            "One-packet SEND: VA is the offset in the message (0) and R_Key is zero.",
            Packet {
                bth: bth(Opcode::SendOnly, 0x000200),
                body: data(
                    ev,
                    10,
                    4,
                    None,
                    Reth {
                        va: 0,
                        rkey: 0,
                        dma_len: 16,
                    },
                    None,
                    &p16,
                ),
            },
        ),
        packet_vector(
            "send_last_imm",
            "Last packet of a 48-byte SEND_IMM: VA is the offset 32, ImmDt follows the RETH.",
            Packet {
                bth: bth(Opcode::SendLastImm, 0x000202),
                body: data(
                    ev,
                    11,
                    5,
                    Some(0x0bad_cafe),
                    Reth {
                        va: 32,
                        rkey: 0,
                        dma_len: 48,
                    },
                    Some(0x0000_002a),
                    &p16,
                ),
            },
        ),
        packet_vector(
            "read_request",
            "READ_REQUEST for 4096 bytes: VA, R_Key and DMA length name the remote source; no payload.",
            Packet {
                bth: bth(Opcode::ReadRequest, 0x000300),
                body: data(ev, 12, 6, Some(0x0000_0100), reth(0x2000, 4096), None, &[]),
            },
        ),
        packet_vector(
            "read_response_only",
            "One-packet READ response: VA is the offset in the read, R_Key the READ_REQUEST's MSN (12).",
            Packet {
                bth: bth(Opcode::ReadResponseOnly, 0x000010),
                body: data(
                    0x0001_0002,
                    4,
                    0,
                    None,
                    Reth {
                        va: 0,
                        rkey: 12,
                        dma_len: 16,
                    },
                    None,
                    &p16,
                ),
            },
        ),
    ]
}

/// SACK, NACK, PROBE, ACK and endpoint packets.
fn control_vectors() -> Vec<Vector> {
    let ev = EV;
    vec![
        packet_vector(
            "sack",
            "SACK advising SKIP_ONCE for the echoed EV: PSNs up to 0x000101 received, and 0x000104, 0x000105 \
             (bits 0 and 1 of the bitmap at SACK_BASE 0x000104); TS echo valid.",
            Packet {
                bth: Bth::new(Opcode::Sack, 0x33),
                body: Body::Sack(Sack {
                    mark: SackMark::SkipOnce,
                    probe_reply: false,
                    mpr: 16,
                    ev,
                    cack_psn: 0x000101,
                    sack_base: 0x000104,
                    bitmap: 0b11,
                    ts_echo: Some(0x1234_5678),
                    cwnd_pen: 3,
                    ooo_count: 2,
                }),
            },
        ),
        packet_vector(
            "sack_probe_reply",
            "SACK answering a PROBE (PR set): EV echo and TS echo are the probe's; empty bitmap.",
            Packet {
                bth: Bth::new(Opcode::Sack, 0x33),
                body: Body::Sack(Sack {
                    mark: SackMark::None,
                    probe_reply: true,
                    mpr: 255,
                    ev: 0x0005_0003,
                    cack_psn: 0x000fff,
                    sack_base: 0x001000,
                    bitmap: 0,
                    ts_echo: Some(0x0765_4321),
                    cwnd_pen: 0,
                    ooo_count: 0,
                }),
            },
        ),
        packet_vector(
            "nack_trimmed",
            "NACK TRIMMED for PSN 0x000101, echoing the trimmed packet's EV and TSETH.",
            Packet {
                bth: Bth::new(Opcode::Nack, 0x33),
                body: Body::Nack(Nack {
                    reason: NackReason::Trimmed,
                    psn: 0x000101,
                    ev: ev + 4,
                    ts_echo: 0x1234_5680,
                    mpr: 16,
                    cack_psn: 0x000100,
                }),
            },
        ),
        packet_vector(
            "nack_remote_access",
            "Fatal NACK REMOTE_ACCESS (project extension 0x10), NACKed packet without a TSETH (echo 0).",
            Packet {
                bth: Bth::new(Opcode::Nack, 0x33),
                body: Body::Nack(Nack {
                    reason: NackReason::RemoteAccess,
                    psn: 0x000106,
                    ev,
                    ts_echo: 0,
                    mpr: 16,
                    cack_psn: 0x000105,
                }),
            },
        ),
        packet_vector(
            "probe",
            "Reliability probe on EV 0x00050003; consumes no PSN.",
            Packet {
                bth: Bth::new(Opcode::Probe, 0x21),
                body: Body::Probe(Probe {
                    ev: 0x0005_0003,
                    ts: 0x0765_4321,
                }),
            },
        ),
        packet_vector(
            "ack",
            "Transport ACK: CACK_PSN and CMSN (receive-side processing complete up to MSN 9).",
            Packet {
                bth: Bth::new(Opcode::Ack, 0x33),
                body: Body::Ack(Ack {
                    cack_psn: 0x000106,
                    cmsn: 9,
                }),
            },
        ),
        packet_vector(
            "ep_request_port_status",
            "PORT_STATUS endpoint request to QPN 2: ports 0, 1 and 3 up; with a TSETH after the ERTH.",
            Packet {
                bth: Bth::new(Opcode::EpRequest, EP_QPN),
                body: Body::EpRequest(EpRequest {
                    op: EpOp::PortStatus,
                    req_id: 0x0000_0007,
                    port_mask: 0b1011,
                    ev: 0x0000_0102,
                    ts: Some(0x0abc_def0),
                }),
            },
        ),
        packet_vector(
            "ep_request_ev_probe",
            "EV_PROBE endpoint request without a timestamp: BTH.TS clear, no TSETH.",
            Packet {
                bth: Bth::new(Opcode::EpRequest, EP_QPN),
                body: Body::EpRequest(EpRequest {
                    op: EpOp::EvProbe,
                    req_id: 0x0000_0008,
                    port_mask: 0,
                    ev: 0x0000_0203,
                    ts: None,
                }),
            },
        ),
        packet_vector(
            "ep_response",
            "Answer to the PORT_STATUS request: arrived on port 1, echoes op, id, EV and TSETH.",
            Packet {
                bth: Bth::new(Opcode::EpResponse, EP_QPN),
                body: Body::EpResponse(EpResponse {
                    op: EpOp::PortStatus,
                    rx_port: 1,
                    req_id: 0x0000_0007,
                    ev: 0x0000_0102,
                    ts_echo: 0x0abc_def0,
                }),
            },
        ),
    ]
}

/// A whole frame to a uSID destination expanded from the EV by a template that takes all 32 EV bits, so that
/// flow label and source port carry some of them.
fn frame_vector() -> Vector {
    let p8 = pattern(8);
    let template = EvTemplate::usid(
        0xfcbb_bb00,
        &[
            EvField {
                width: 16,
                init: 0x1000,
                mask: 0x0FFF,
            },
            EvField {
                width: 16,
                init: 0x2000,
                mask: 0x00FF,
            },
            EvField {
                width: 16,
                init: 0xe000,
                mask: 0x0FFF,
            },
        ],
    )
    .expect("template");
    let frame_ev = 0xabcd_ef01;
    let dst = template.expand_ipv6(frame_ev).expect("expand");
    assert_eq!(
        dst,
        "fcbb:bb00:1abc:20de:ef01::".parse::<Ipv6Addr>().unwrap()
    );
    let frame = Frame::new(
        "fd00:0:0:1::2".parse().unwrap(),
        dst,
        traffic_class(TrafficClass::Data.default_dscp(), ECN_ECT0),
        frame_ev,
        Packet {
            bth: bth(Opcode::WriteOnly, 0x000042),
            body: data(frame_ev, 1, 0, Some(0x0000_1000), reth(0, 8), None, &p8),
        },
    );
    let mut bytes = vec![0u8; frame.buffer_len()];
    frame.emit(&mut bytes).expect("emit frame");
    let back = Frame::parse(&bytes, VERIFY).expect("parse frame");
    assert_eq!(back, frame);
    Vector {
        name: "frame_usid_write_only",
        about: "Whole IPv6/UDP frame: destination fcbb:bb00:1abc:20de:ef01:: is EV 0xabcdef01 expanded by \
                the uSID template block fcbb:bb00, {16, 0x1000, 0x0FFF}, {16, 0x2000, 0x00FF}, \
                {16, 0xe000, 0x0FFF} (12 + 8 + 12 EV bits, most significant first); DSCP DATA (10) with ECT(0); \
                flow label = EV bits 19..0 = 0xdef01; UDP source port 0xC000 | (EV & 0x3FFF) = 0xef01; UDP \
                checksum 0.",
        frame: true,
        trimmed: false,
        auth: None,
        fields: back.describe(),
        bytes,
    }
}

/// The AUTH-tagged vectors (spec WIRE-AUTH-1).
fn auth_vectors() -> Vec<Vector> {
    let ev = EV;
    let (base, rkey) = (BASE, RKEY);
    let mut vectors = Vec::new();
    let payload = pattern(16);
    vectors.push(auth_vector(
        "auth_write_only",
        "A WRITE_ONLY of a keyed connection: BTH.AT set, the 8-byte AUTH tag (a request's: the request token, \
         SipHash-1-3 of the empty message under auth_key) between the RETH and the payload, then the ICRC over \
         everything.",
        Packet {
            bth: bth(Opcode::WriteOnly, 0x10),
            body: data(
                ev,
                3,
                0,
                Some(0x1234_5678),
                Reth {
                    va: base,
                    rkey,
                    dma_len: 16,
                },
                None,
                &payload,
            ),
        },
    ));
    vectors.push(auth_vector(
        "auth_sack",
        "A SACK of a keyed connection: BTH.AT set, the AUTH tag of the 44 header bytes (BTH, SETH, CCETH) after \
         them, then the ICRC.",
        Packet {
            bth: bth(Opcode::Sack, 0),
            body: Body::Sack(Sack {
                mark: SackMark::None,
                probe_reply: false,
                mpr: 8,
                ev,
                cack_psn: 0x10,
                sack_base: 0x12,
                bitmap: 0b101,
                ts_echo: Some(0x1234_5678),
                cwnd_pen: 0,
                ooo_count: 2,
            }),
        },
    ));
    vectors
}

/// A trimmed WRITE_FIRST: a switch kept the first 64 bytes of a 200-byte-payload packet.
fn trimmed_vector() -> Vector {
    let ev = EV;
    let big = pattern(200);
    let long = Packet {
        bth: bth(Opcode::WriteFirst, 0x000100),
        body: data(ev, 7, 2, Some(0x1234_5678), reth(0, 400), None, &big),
    };
    let mut full = vec![0u8; long.buffer_len()];
    long.emit(&mut full).expect("emit");
    full.truncate(TRIM_KEEP_LEN);
    let trimmed = Packet::parse(
        &full,
        ParseOptions {
            verify_icrc: true,
            trimmed: true,
        },
    )
    .expect("trimmed parse");
    Vector {
        name: "trimmed_write_first",
        about: "A WRITE_FIRST trimmed by a switch to the first 64 bytes of its UDP payload: the headers \
                (40 bytes) survive, the payload is cut and the ICRC is gone. Parsed as trimmed, the payload is \
                empty.",
        frame: false,
        trimmed: true,
        auth: None,
        fields: trimmed.describe(),
        bytes: full,
    }
}

fn render(v: &Vector) -> String {
    let mut s = String::new();
    for line in wrap(v.about, 100) {
        writeln!(s, "# {line}").unwrap();
    }
    writeln!(s, "name = {}", v.name).unwrap();
    writeln!(s, "frame = {}", v.frame).unwrap();
    writeln!(s, "trimmed = {}", v.trimmed).unwrap();
    if let Some(k) = v.auth {
        let hex: Vec<String> = k.iter().map(|b| format!("{b:02x}")).collect();
        writeln!(s, "auth_key = {}", hex.join(" ")).unwrap();
    }
    for chunk in v.bytes.chunks(16) {
        let hex: Vec<String> = chunk.iter().map(|b| format!("{b:02x}")).collect();
        writeln!(s, "hex = {}", hex.join(" ")).unwrap();
    }
    for (k, val) in &v.fields {
        writeln!(s, "field {k} = {val}").unwrap();
    }
    s
}

fn wrap(text: &str, width: usize) -> Vec<String> {
    let mut lines = vec![String::new()];
    for word in text.split_whitespace() {
        let line = lines.last_mut().unwrap();
        if !line.is_empty() && line.len() + 1 + word.len() > width {
            lines.push(word.to_string());
        } else {
            if !line.is_empty() {
                line.push(' ');
            }
            line.push_str(word);
        }
    }
    lines
}
