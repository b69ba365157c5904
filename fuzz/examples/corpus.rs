//! Writes the committed seed corpora, `fuzz/corpus/<target>/`, from the spec's golden vectors, the simulator's
//! scenarios, node files like those `mrc-fabric` writes, and recorded transfers between two real endpoints.
//! Deterministic: rerunning it rewrites the same files. Run from the repository root:
//!
//! ```sh
//! cargo +nightly run --manifest-path fuzz/Cargo.toml --example corpus
//! ```

use std::fs;
use std::net::Ipv6Addr;
use std::path::Path;

use arbitrary::{Arbitrary, Unstructured};
use mrc::wire::{Frame, Packet, ParseOptions};
use mrc_fuzz::{Forged, From, Input, Op, Qpn, Setup, Wr};

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("fuzz/corpus").join(target);
    fs::create_dir_all(&dir).expect("create the corpus folder");
    fs::write(dir.join(name), bytes).expect("write a seed");
}

/// The golden vectors: (name, whether a whole frame, bytes).
fn vectors() -> Vec<(String, bool, Vec<u8>)> {
    let mut out = Vec::new();
    let mut files: Vec<_> = fs::read_dir("spec/vectors")
        .expect("run from the repository root")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "vec"))
        .collect();
    files.sort();
    for f in files {
        let text = fs::read_to_string(&f).expect("read a vector");
        let mut hex = String::new();
        let mut frame = false;
        for line in text.lines() {
            let line = line.split('#').next().unwrap_or("").trim();
            if let Some(h) = line.strip_prefix("hex = ") {
                hex.push_str(h);
                hex.push(' ');
            } else if line == "frame = true" {
                frame = true;
            }
        }
        let bytes: Vec<u8> = hex
            .split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).expect("hex"))
            .collect();
        let name = f.file_stem().unwrap().to_string_lossy().into_owned();
        out.push((name, frame, bytes));
    }
    out
}

/// A transfer of every operation kind between two endpoints, with a little loss and reordering.
fn transfer() -> Input {
    let setup = Setup {
        planes: 1,
        per_plane: 1,
        mtu: 200,
        icrc: true,
        mpr: false,
        caps: (3, 3, 1),
        ext: (true, true),
        timeout: (1, 3, 3),
        small_cq: None,
        psns: (0x00FF_FFF0, 0x1234),
        seeds: (0x5EED, 0xFEED),
        lend: (false, true),
    };
    let wr = |kind, len| Wr {
        kind,
        local: (if kind == 3 { 2 } else { 1 }, 0, len),
        second: None,
        remote: (0, 0),
        rkey: None,
        signaled: true,
        imm: 0xC0DE,
    };
    // The WRITE_WITH_IMM takes the first receive (no buffer needed), the SEND the second.
    let mut ops = vec![
        Op::PostRecv {
            node: true,
            sge: None,
        },
        Op::PostRecv {
            node: true,
            sge: Some((2, 0, 700)),
        },
    ];
    for kind in 0..4 {
        ops.push(Op::Post {
            node: false,
            wr: wr(kind, 600),
        });
    }
    for round in 0..12u16 {
        ops.push(Op::Pump { node: false, n: 8 });
        if round == 2 {
            ops.push(Op::Drop {
                from: false,
                pick: 1,
            });
        }
        ops.push(Op::Deliver {
            from: false,
            pick: round % 3,
            ce: round == 4,
        });
        ops.push(Op::DeliverAll { from: false });
        ops.push(Op::Pump { node: true, n: 8 });
        ops.push(Op::DeliverAll { from: true });
        ops.push(Op::Advance { ns: 30_000 });
        ops.push(Op::PollCq { node: false, n: 8 });
        ops.push(Op::PollCq { node: true, n: 8 });
    }
    // A few forged packets of each kind, so their answers are recorded too.
    ops.push(Op::Forge {
        to: false,
        qpn: Qpn::Endpoint,
        packet: Forged::EpRequest {
            op: 1,
            req_id: 9,
            port_mask: 1,
            ev: 0,
            ts: Some(5),
        },
        claim: From::Peer,
        port: 0,
    });
    ops.push(Op::EvProbe {
        node: true,
        ev: 0,
        plane: 0,
    });
    ops.push(Op::Pump { node: true, n: 4 });
    ops.push(Op::DeliverAll { from: true });
    ops.push(Op::Pump { node: false, n: 4 });
    ops.push(Op::DeliverAll { from: false });
    Input { setup, ops }
}

/// Writes values the way `arbitrary` 1.x reads them (little-endian integers, a byte per bool, a `u32` per enum
/// variant, a "more" flag before each element of the input's final `Vec`), for the subset of ops the seeds use.
/// Every encoded input is decoded again and compared, so a mismatch with `arbitrary` fails here, not silently.
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(u8::from(v))
    }
    /// Variant `i` of an enum of `count` variants.
    fn variant(&mut self, i: u64, count: u64) -> &mut Self {
        self.u32((i << 32).div_ceil(count) as u32)
    }
    fn opt_u8(&mut self, v: Option<u8>) -> &mut Self {
        self.bool(v.is_some());
        if let Some(x) = v {
            self.u8(x);
        }
        self
    }
    fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        self.bool(v.is_some());
        if let Some(x) = v {
            self.u32(x);
        }
        self
    }
    fn sge(&mut self, (b, off, len): (u8, u16, u16)) -> &mut Self {
        self.u8(b).u16(off).u16(len)
    }

    fn setup(&mut self, s: &Setup) {
        self.u8(s.planes)
            .u8(s.per_plane)
            .u8(s.mtu)
            .bool(s.icrc)
            .bool(s.mpr);
        self.u8(s.caps.0)
            .u8(s.caps.1)
            .u8(s.caps.2)
            .bool(s.ext.0)
            .bool(s.ext.1);
        self.u8(s.timeout.0)
            .u8(s.timeout.1)
            .u8(s.timeout.2)
            .opt_u8(s.small_cq);
        self.u32(s.psns.0)
            .u32(s.psns.1)
            .u64(s.seeds.0)
            .u64(s.seeds.1);
        self.bool(s.lend.0).bool(s.lend.1);
    }

    fn op(&mut self, op: &Op) {
        // Variant numbers in the order `Op` declares them.
        const OPS: u64 = 21;
        match *op {
            Op::Pump { node, n } => self.variant(0, OPS).bool(node).u8(n),
            Op::Deliver { from, pick, ce } => self.variant(1, OPS).bool(from).u16(pick).bool(ce),
            Op::DeliverAll { from } => self.variant(2, OPS).bool(from),
            Op::Drop { from, pick } => self.variant(3, OPS).bool(from).u16(pick),
            Op::Forge {
                to,
                qpn,
                ref packet,
                claim,
                port,
            } => {
                self.variant(6, OPS).bool(to);
                match qpn {
                    Qpn::Real => self.variant(0, 3),
                    Qpn::Endpoint => self.variant(1, 3),
                    Qpn::Raw(q) => self.variant(2, 3).u32(q),
                };
                match *packet {
                    Forged::Nack {
                        reason,
                        psn,
                        cack,
                        ev,
                        ts_echo,
                        mpr,
                    } => self
                        .variant(2, 7)
                        .u8(reason)
                        .u16(psn as u16)
                        .u16(cack as u16)
                        .u32(ev)
                        .opt_u32(ts_echo)
                        .u8(mpr),
                    Forged::EpRequest {
                        op,
                        req_id,
                        port_mask,
                        ev,
                        ts,
                    } => self
                        .variant(5, 7)
                        .u8(op)
                        .u32(req_id)
                        .u32(port_mask)
                        .u32(ev)
                        .opt_u32(ts),
                    _ => unimplemented!("not used by the seeds"),
                };
                let c = match claim {
                    From::Peer => 0,
                    From::Other => 1,
                    From::Unknown => 2,
                };
                self.variant(c, 3).u8(port)
            }
            Op::Post { node, ref wr } => {
                self.variant(8, OPS).bool(node).u8(wr.kind).sge(wr.local);
                self.bool(wr.second.is_some());
                if let Some(s) = wr.second {
                    self.sge(s);
                }
                self.u8(wr.remote.0)
                    .u16(wr.remote.1)
                    .opt_u32(wr.rkey)
                    .bool(wr.signaled)
                    .u32(wr.imm)
            }
            Op::PostRecv { node, sge } => {
                self.variant(9, OPS).bool(node).bool(sge.is_some());
                if let Some(s) = sge {
                    self.sge(s);
                }
                self
            }
            Op::Advance { ns } => self.variant(10, OPS).u32(ns),
            Op::NextTimer => self.variant(11, OPS),
            Op::PollCq { node, n } => self.variant(12, OPS).bool(node).u8(n),
            Op::EvProbe { node, ev, plane } => self.variant(18, OPS).bool(node).u32(ev).u8(plane),
            _ => unimplemented!("not used by the seeds"),
        };
    }

    /// The bytes of `input`, checked by decoding them again.
    fn input(input: &Input) -> Vec<u8> {
        let mut e = Enc::default();
        e.setup(&input.setup);
        for op in &input.ops {
            e.bool(true);
            e.op(op);
        }
        e.bool(false);
        let back = Input::arbitrary_take_rest(Unstructured::new(&e.0)).expect("decodes");
        assert_eq!(
            format!("{back:?}"),
            format!("{input:?}"),
            "the encoder and arbitrary disagree"
        );
        e.0
    }
}

/// Seeds of the stateful target: the scripted transfer in a few settings, and one under blind NACKs.
fn endpoint_seeds() -> Vec<(&'static str, Vec<u8>)> {
    let base = transfer();
    let mut out = vec![("transfer", Enc::input(&base))];
    let mut two = base.clone();
    two.setup.planes = 1; // 2 planes
    two.setup.per_plane = 3;
    two.setup.icrc = false;
    two.setup.lend = (true, false);
    out.push(("transfer-2planes-noicrc", Enc::input(&two)));
    let mut small = base.clone();
    small.setup.small_cq = Some(1);
    out.push(("transfer-cq2", Enc::input(&small)));
    let mut attacked = base;
    let at = attacked.ops.len() / 2;
    for k in 0..8u16 {
        let psn = (k as i16).wrapping_mul(4099);
        attacked.ops.insert(
            at,
            Op::Forge {
                to: k % 2 == 0,
                qpn: Qpn::Real,
                packet: Forged::Nack {
                    reason: 0x10 + (k % 3) as u8,
                    psn,
                    cack: psn.wrapping_sub(1),
                    ev: 0,
                    ts_echo: Some(u32::from(k) * 0x0101_0101),
                    mpr: 8,
                },
                claim: From::Peer,
                port: 0,
            },
        );
    }
    out.push(("transfer-blind-nacks", Enc::input(&attacked)));
    for (name, bytes) in &out {
        let input = Input::arbitrary_take_rest(Unstructured::new(bytes)).expect("decodes");
        let o = mrc_fuzz::run(&input);
        println!(
            "endpoint seed {name}: {} completions, {} datagrams",
            o.successes, o.delivered
        );
    }
    out
}

/// A blob of each kind and every host datagram (spec/host.md), CONNECT and CLOSE tagged with a key.
fn bootstrap_seeds() -> Vec<(&'static str, Vec<u8>)> {
    use mrc_host::bootstrap::{Msg, QpHalf, seal};
    use mrc_host::{Blob, BlobKind, PeerPlane};
    let plane0 = std::net::SocketAddrV6::new(Ipv6Addr::LOCALHOST, 4791, 0, 0);
    let blob = |kind| Blob {
        planes: 2,
        usid: false,
        plane0,
        t0: 0,
        kind,
        rkey_hint: 0,
        addr_hint: 0,
        key: [9; 16],
    };
    let planes = vec![
        PeerPlane {
            addr: plane0,
            t0: 0
        };
        2
    ];
    let qps = vec![QpHalf {
        qpn: 0x12_3456,
        psn: 0x10,
        caps: mrc::Caps::ALL,
        key: [5; 16],
    }];
    let key = mrc::wire::AuthKey::new([9; 16]);
    vec![
        (
            "blob-listener",
            blob(BlobKind::Listener { id: 42 }).encode(),
        ),
        (
            "blob-qp",
            blob(BlobKind::Qp {
                qpn: 0x12_3456,
                psn: 1,
                caps: mrc::Caps::ALL,
                mtu: 4096,
            })
            .encode(),
        ),
        ("resolve", Msg::ResolveRequest { token: 1 }.encode()),
        (
            "resolve-reply",
            Msg::ResolveReply {
                token: 1,
                planes: planes.clone(),
            }
            .encode(),
        ),
        (
            "connect",
            seal(
                &Msg::Connect {
                    token: 2,
                    listener: 42,
                    planes: planes.clone(),
                    qps: qps.clone(),
                    app: b"app".to_vec(),
                    mac: [0; 8],
                },
                &key,
            ),
        ),
        (
            "accept",
            Msg::Accept {
                token: 2,
                planes,
                qps,
                app: Vec::new(),
            }
            .encode(),
        ),
        (
            "refuse",
            Msg::Refuse {
                token: 2,
                reason: 2,
            }
            .encode(),
        ),
        (
            "close",
            seal(
                &Msg::Close {
                    token: 3,
                    pairs: vec![(0x10, 0x20)],
                    mac: [0; 8],
                },
                &key,
            ),
        ),
        ("closed", Msg::Closed { token: 3 }.encode()),
    ]
}

fn main() {
    if Path::new("fuzz/corpus").exists() {
        fs::remove_dir_all("fuzz/corpus").expect("clear the old corpus");
    }
    let vectors = vectors();
    let recorded = mrc_fuzz::record(&transfer());
    // Packet parsers: every golden packet and the first recorded datagram of each opcode.
    for (name, frame, bytes) in &vectors {
        write(
            if *frame { "frame" } else { "wire" },
            &format!("vec-{name}"),
            bytes,
        );
    }
    let mut seen = std::collections::BTreeSet::new();
    for d in &recorded {
        let Some(&op) = d.first() else { continue };
        if seen.insert(op) {
            write("wire", &format!("rec-{op:02x}"), d);
            // The same packet in an IPv6/UDP frame, as a capture shows it.
            if let Ok(p) = Packet::parse(d, ParseOptions::default()) {
                let src: Ipv6Addr = "fcbb:bb00:e000::".parse().unwrap();
                let dst: Ipv6Addr = "fcbb:bb00:1000:2000:1001:e001::".parse().unwrap();
                let f = Frame::new(src, dst, 0x68, 0x0003_0001, p);
                let mut buf = vec![0u8; f.buffer_len()];
                let n = f.emit(&mut buf).expect("frame");
                write("frame", &format!("rec-{op:02x}"), &buf[..n]);
            }
        }
    }
    // Structured targets take any bytes; give them some with structure in them.
    for (name, _, bytes) in vectors.iter().take(4) {
        write("usid_ev", &format!("vec-{name}"), bytes);
    }
    write(
        "usid_ev",
        "usid-path",
        &[
            0xfc, 0xbb, 0xbb, 0x00, 0x10, 0x00, 0x20, 0x00, 0x10, 0x01, 0xe0, 0x01, 0, 0, 0, 0, 4,
            0, 0, 0, 16, 0xff, 0xff, 0, 0, 0xff, 0x0f, 0, 0, 3, 1, 2, 3, 4, 5, 6, 7, 8,
        ],
    );
    // Node files: plain, and uSID as mrc-fabric writes them.
    write(
        "node_config",
        "plain",
        b"[[plane]]\naddr = \"::1\"\nport = 0\n\n[[plane]]\naddr = \"::1\"\n",
    );
    write(
        "node_config",
        "usid-2planes",
        b"[usid]\nblock = \"fcbb:bb00::/32\"\n\n[[plane]]\naddr = \"fcbb:bb00:e000::\"\nport = 4791\nt0 = \"1000\"\nt1 = [\"2000\", \"2001\"]\n\n[[plane]]\naddr = \"fcbb:bb00:e100::\"\nt0 = \"1100\"\nt1 = [\"2100\"]\n",
    );
    write(
        "node_config",
        "bad-block",
        b"[usid]\nblock = \"fcbb:bb00::/48\"\n[[plane]]\naddr = \"::1\"\n",
    );
    // Scenarios: the project's own.
    let mut scenarios: Vec<_> = fs::read_dir("sim/scenarios")
        .expect("sim/scenarios")
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "toml"))
        .collect();
    scenarios.sort();
    for s in scenarios {
        let name = s.file_stem().unwrap().to_string_lossy().into_owned();
        write("scenario", &name, &fs::read(&s).expect("read a scenario"));
    }
    for (name, seed) in endpoint_seeds() {
        write("endpoint", name, &seed);
    }
    for (name, seed) in bootstrap_seeds() {
        write("bootstrap", name, &seed);
    }
    // The whole-host target decodes any bytes into an attack; seeds of a few lengths and patterns.
    for (name, len, mul) in [
        ("short", 16usize, 7u8),
        ("medium", 256, 13),
        ("long", 2048, 29),
    ] {
        let seed: Vec<u8> = (0..len).map(|i| (i as u8).wrapping_mul(mul)).collect();
        write("host", name, &seed);
    }
    for t in [
        "wire",
        "frame",
        "usid_ev",
        "node_config",
        "scenario",
        "endpoint",
        "bootstrap",
        "host",
    ] {
        let n = fs::read_dir(Path::new("fuzz/corpus").join(t)).map_or(0, |d| d.count());
        println!("{t}: {n} seeds");
    }
}
