//! The Wireshark dissector (`tools/wireshark/mrc.lua`) under tshark: every golden vector of `spec/vectors/`
//! decodes to the fields the vector lists, with the expert info a reader should see, and every packet of the
//! captures in `spec/captures/` (written by mrc-host and mrc-sim) decodes to what the engine's own parser reads
//! from it, with no malformed packet.
//!
//! Needs Debian's `tshark` (.ci/run installs it). Without it the tests print SKIPPED, except under CI
//! (`CI` set), where a missing tshark fails them.

use std::net::{Ipv6Addr, SocketAddrV6};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use mrc::testing::vectors::{Vector, read_dir};
use mrc::wire::{Packet, ParseOptions, TrafficClass, traffic_class};
use mrc_host::bootstrap::Msg;
use mrc_host::capture::{Datagram, Direction, PcapngFile};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn dissector() -> PathBuf {
    root().join("tools/wireshark/mrc.lua")
}

/// `Some(())` when tshark runs; `None` (after printing SKIPPED) when it is missing outside CI.
fn tshark_present(test: &str) -> Option<()> {
    let ok = Command::new("tshark")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        return Some(());
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "tshark is missing: apt-get install tshark"
    );
    mrc::testing::skip(test, "tshark is missing (apt-get install tshark)");
    None
}

/// One field of tshark's PDML output.
#[derive(Debug, Clone)]
struct Field {
    name: String,
    show: String,
    showname: String,
}

fn unescape(s: &str) -> String {
    s.replace("&quot;", "\"")
        .replace("&apos;", "'")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

fn attr(tag: &str, name: &str) -> String {
    let key = format!(" {name}=\"");
    tag.find(&key)
        .and_then(|i| {
            let rest = &tag[i + key.len()..];
            rest.find('"').map(|j| unescape(&rest[..j]))
        })
        .unwrap_or_default()
}

/// Runs tshark with the dissector on `pcap` and returns each packet's fields, in order.
fn dissect(pcap: &Path) -> Vec<Vec<Field>> {
    let out = Command::new("tshark")
        .arg("-X")
        .arg(format!("lua_script:{}", dissector().display()))
        .args(["-n", "-T", "pdml", "-r"])
        .arg(pcap)
        .output()
        .expect("run tshark");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "tshark failed: {stderr}");
    let lua_errors: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("Lua") || l.contains("lua"))
        .collect();
    assert!(
        lua_errors.is_empty(),
        "the dissector did not load: {lua_errors:?}"
    );
    let text = String::from_utf8(out.stdout).expect("utf-8 PDML");
    text.split("<packet>")
        .skip(1)
        .map(|p| {
            p.split("<field ")
                .skip(1)
                .map(|tag| {
                    let tag = format!(" {}", &tag[..tag.find('>').unwrap_or(tag.len())]);
                    let tag = tag.as_str();
                    Field {
                        name: attr(tag, "name"),
                        show: attr(tag, "show"),
                        showname: attr(tag, "showname"),
                    }
                })
                .collect()
        })
        .collect()
}

/// Counts what makes a packet unreadable: Wireshark's malformed marker, a Lua error, an error-severity expert
/// item of the MALFORMED group (ours or Wireshark's).
fn malformed(fields: &[Field]) -> Vec<String> {
    fields
        .iter()
        .filter(|f| {
            f.name == "_ws.malformed"
                || (f.name.starts_with("_ws.lua") && f.name != "_ws.lua.fake")
                || f.name == "mrc.expert.malformed"
                || f.name == "mrch.expert.malformed"
                || f.showname.contains("Lua Error")
                || (f.name == "_ws.expert.group" && f.show == "117440512")
        })
        .map(|f| format!("{}: {}", f.name, f.showname))
        .collect()
}

/// The tshark field that carries vector field `key`.
fn tshark_name(key: &str) -> String {
    match key {
        "ip.src" => "ipv6.src".into(),
        "ip.dst" => "ipv6.dst".into(),
        "ip.dscp" => "ipv6.tclass.dscp".into(),
        "ip.ecn" => "ipv6.tclass.ecn".into(),
        "ip.flow_label" => "ipv6.flow".into(),
        "ip.payload_len" => "ipv6.plen".into(),
        "ip.next_header" => "ipv6.nxt".into(),
        "ip.hop_limit" => "ipv6.hlim".into(),
        "udp.src_port" => "udp.srcport".into(),
        "udp.dst_port" => "udp.dstport".into(),
        "udp.length" => "udp.length".into(),
        "udp.checksum" => "udp.checksum".into(),
        k => format!("mrc.{k}"),
    }
}

fn number(s: &str) -> Option<u64> {
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Whether a tshark field shows the value a vector (or the engine's `describe`) gives.
fn matches(f: &Field, want: &str) -> bool {
    match want {
        "true" => matches!(f.show.as_str(), "1" | "True" | "true"),
        "false" => matches!(f.show.as_str(), "0" | "False" | "false"),
        _ => {
            if let (Ok(a), Ok(b)) = (want.parse::<Ipv6Addr>(), f.show.parse::<Ipv6Addr>()) {
                return a == b;
            }
            if let (Some(a), Some(b)) = (number(want), number(&f.show)) {
                return a == b;
            }
            // A name (opcode, mark, reason, op): the label shows it before the raw value.
            f.showname.contains(&format!(": {want} ("))
        }
    }
}

/// Checks `fields` (vector or engine names and values) against one dissected packet; returns the mismatches.
fn compare(what: &str, want: &[(String, String)], got: &[Field]) -> Vec<String> {
    let mut bad = Vec::new();
    for (key, value) in want {
        let name = tshark_name(key);
        let found: Vec<&Field> = got.iter().filter(|f| f.name == name).collect();
        if value == "none" {
            if !found.is_empty() {
                bad.push(format!(
                    "{what}: {key} should be absent, shows {:?}",
                    found[0].show
                ));
            }
            continue;
        }
        if !found.iter().any(|f| matches(f, value)) {
            let shown: Vec<&str> = found.iter().map(|f| f.showname.as_str()).collect();
            bad.push(format!(
                "{what}: {key} = {value}, dissector shows {shown:?}"
            ));
        }
    }
    bad
}

fn experts(fields: &[Field]) -> Vec<String> {
    fields
        .iter()
        .filter(|f| f.name.starts_with("mrc.expert.") || f.name.starts_with("mrch.expert."))
        .map(|f| f.name.clone())
        .collect()
}

/// The vectors as one capture: a frame vector as it is, a UDP payload inside IPv6/UDP to port 4791 (DSCP
/// TRIMMED for a trimmed vector, so the dissector knows, as a receiver does, that the tail was cut).
fn vectors_capture(dir: &Path, vectors: &[Vector]) -> PathBuf {
    vectors_capture_snapped(dir, vectors, 0)
}

/// [`vectors_capture`] keeping `snaplen` bytes of each frame (0: all).
fn vectors_capture_snapped(dir: &Path, vectors: &[Vector], snaplen: usize) -> PathBuf {
    let path = dir.join(format!("vectors-{snaplen}.pcapng"));
    let ifaces = [("vectors".to_string(), "spec/vectors".to_string())];
    let mut w = PcapngFile::create(&path, &ifaces, snaplen, 0).expect("create capture");
    for (i, v) in vectors.iter().enumerate() {
        let ts = Duration::from_micros(i as u64);
        if v.frame {
            w.write_frame(0, ts, Direction::Out, &v.bytes, v.bytes.len())
                .expect("write frame");
            continue;
        }
        let dscp = if v.trimmed {
            TrafficClass::Trimmed.default_dscp()
        } else {
            TrafficClass::Data.default_dscp()
        };
        let d = Datagram {
            src: SocketAddrV6::new("fd00::1".parse().unwrap(), 0xC001, 0, 0),
            dst: SocketAddrV6::new("fd00::2".parse().unwrap(), mrc::wire::UDP_PORT, 0, 0),
            tclass: traffic_class(dscp, 0),
            flow_label: 0,
            payload: &v.bytes,
            checksum: false,
        };
        w.write(0, ts, Direction::Out, &d).expect("write");
    }
    w.finish(Duration::ZERO).expect("finish");
    path
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mrc-wireshark-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// What a reader must be told about each vector (expert items that must be present).
const EXPECTED_EXPERTS: &[(&str, &[&str])] = &[
    ("write_middle", &["mrc.expert.retransmission"]),
    ("nack_trimmed", &["mrc.expert.nack"]),
    ("nack_remote_access", &["mrc.expert.nack_fatal"]),
    ("sack", &["mrc.expert.sack_holes", "mrc.expert.path_mark"]),
    ("sack_probe_reply", &["mrc.expert.probe_reply"]),
    ("probe", &["mrc.expert.probe"]),
    ("trimmed_write_first", &["mrc.expert.trimmed"]),
    ("ep_request_port_status", &["mrc.expert.endpoint"]),
    ("ep_response", &["mrc.expert.endpoint"]),
];

#[test]
fn every_vector_dissects_to_its_fields() {
    if tshark_present("every_vector_dissects_to_its_fields").is_none() {
        return;
    }
    let vectors = read_dir(&root().join("spec/vectors"));
    assert!(vectors.len() >= 20, "only {} vectors", vectors.len());
    let dir = scratch("vectors");
    let packets = dissect(&vectors_capture(&dir, &vectors));
    assert_eq!(
        packets.len(),
        vectors.len(),
        "tshark read a packet per vector"
    );
    let mut bad = Vec::new();
    for (v, fields) in vectors.iter().zip(&packets) {
        bad.extend(
            malformed(fields)
                .into_iter()
                .map(|m| format!("{}: {m}", v.name)),
        );
        bad.extend(compare(&v.name, &v.fields, fields));
        let status: Vec<&Field> = fields
            .iter()
            .filter(|f| f.name == "mrc.icrc.status")
            .collect();
        let want = if v.trimmed { "2" } else { "0" };
        if status.len() != 1 || status[0].show != want {
            bad.push(format!("{}: ICRC status {status:?}, want {want}", v.name));
        }
        let got = experts(fields);
        for (name, want) in EXPECTED_EXPERTS {
            if *name == v.name {
                for w in *want {
                    if !got.iter().any(|g| g == w) {
                        bad.push(format!("{}: no {w} (experts: {got:?})", v.name));
                    }
                }
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} mismatches (capture kept in {}):\n{}",
        bad.len(),
        dir.display(),
        bad.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// SACK holes are the PSNs between CACK_PSN + 1 and SACK_BASE plus the clear bitmap bits below the highest
/// set one: the `sack` vector misses 0x000102 and 0x000103.
#[test]
fn sack_holes_name_the_missing_psns() {
    if tshark_present("sack_holes_name_the_missing_psns").is_none() {
        return;
    }
    let vectors: Vec<Vector> = read_dir(&root().join("spec/vectors"))
        .into_iter()
        .filter(|v| v.name == "sack")
        .collect();
    let dir = scratch("holes");
    let packets = dissect(&vectors_capture(&dir, &vectors));
    let _ = std::fs::remove_dir_all(&dir);
    let f = &packets[0];
    let holes: Vec<&str> = f
        .iter()
        .filter(|x| x.name == "mrc.analysis.sack_hole")
        .map(|x| x.show.as_str())
        .collect();
    assert_eq!(holes, ["0x000102-0x000103"]);
    let count = f
        .iter()
        .find(|x| x.name == "mrc.analysis.sack_holes")
        .unwrap();
    assert_eq!(count.show, "2");
}

/// Every capture in spec/captures: no malformed packet, and every MRC packet shows exactly the fields the
/// engine's parser reads from the same bytes.
#[test]
fn fixture_captures_dissect_as_the_engine_parses_them() {
    if tshark_present("fixture_captures_dissect_as_the_engine_parses_them").is_none() {
        return;
    }
    let dir = root().join("spec/captures");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "pcapng"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no capture in {}", dir.display());
    for file in files {
        check_capture(&file);
    }
}

/// Each packet's captured bytes and whether the capture kept all of it.
fn read_frames(path: &Path) -> Vec<(Vec<u8>, bool)> {
    let data = std::fs::read(path).unwrap();
    let mut r = pcap_file::pcapng::PcapNgReader::new(&data[..]).expect("pcapng");
    let mut out = Vec::new();
    while let Some(block) = r.next_block() {
        if let pcap_file::pcapng::Block::EnhancedPacket(p) = block.expect("block") {
            let whole = p.data.len() == p.original_len as usize;
            out.push((p.data.into_owned(), whole));
        }
    }
    out
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// What mrc-host's own decoder reads from a host datagram, as (tshark field, values in order).
fn host_fields(msg: &Msg) -> Vec<(&'static str, Vec<String>)> {
    let qps = |qps: &[mrc_host::bootstrap::QpHalf]| {
        vec![
            ("mrch.qpn", qps.iter().map(|q| q.qpn.to_string()).collect()),
            ("mrch.psn", qps.iter().map(|q| q.psn.to_string()).collect()),
            ("mrch.key", qps.iter().map(|q| hex(&q.key)).collect()),
        ]
    };
    let planes = |p: &[mrc_host::PeerPlane]| {
        vec![
            (
                "mrch.plane.addr",
                p.iter().map(|x| x.addr.ip().to_string()).collect(),
            ),
            (
                "mrch.plane.port",
                p.iter().map(|x| x.addr.port().to_string()).collect(),
            ),
            (
                "mrch.plane.t0",
                p.iter().map(|x| x.t0.to_string()).collect(),
            ),
        ]
    };
    let (ty, token, mut rest): (u8, u64, Vec<(&'static str, Vec<String>)>) = match msg {
        Msg::ResolveRequest { token } => (1, *token, vec![]),
        Msg::ResolveReply { token, planes: p } => (2, *token, planes(p)),
        Msg::Connect {
            token,
            listener,
            planes: p,
            qps: q,
            app,
            mac,
        } => {
            let mut v = vec![
                ("mrch.listener", vec![listener.to_string()]),
                ("mrch.app_len", vec![app.len().to_string()]),
                ("mrch.tag", vec![hex(mac)]),
            ];
            v.extend(planes(p));
            v.extend(qps(q));
            (3, *token, v)
        }
        Msg::Accept {
            token,
            planes: p,
            qps: q,
            app,
        } => {
            let mut v = vec![("mrch.app_len", vec![app.len().to_string()])];
            v.extend(planes(p));
            v.extend(qps(q));
            (4, *token, v)
        }
        Msg::Refuse { token, reason } => (
            5,
            *token,
            vec![("mrch.refuse_reason", vec![reason.to_string()])],
        ),
        Msg::Close { token, pairs, mac } => (
            6,
            *token,
            vec![
                ("mrch.qpn", pairs.iter().map(|p| p.0.to_string()).collect()),
                (
                    "mrch.peer_qpn",
                    pairs.iter().map(|p| p.1.to_string()).collect(),
                ),
                ("mrch.tag", vec![hex(mac)]),
            ],
        ),
        Msg::Closed { token } => (7, *token, vec![]),
    };
    rest.push(("mrch.type", vec![ty.to_string()]));
    rest.push(("mrch.token", vec![token.to_string()]));
    rest
}

/// Checks a host datagram's dissection against mrc-host's decoder: every field, every repetition, in order.
fn compare_host(what: &str, payload: &[u8], got: &[Field]) -> Vec<String> {
    let msg = match Msg::decode(payload) {
        Ok(m) => m,
        Err(e) => return vec![format!("{what}: mrc-host cannot decode it: {e:?}")],
    };
    let mut bad = Vec::new();
    for (name, want) in host_fields(&msg) {
        let shown: Vec<String> = got
            .iter()
            .filter(|f| f.name == name)
            .map(|f| match name {
                // Byte fields show as "99:44:41:...".
                "mrch.key" | "mrch.tag" => f.show.replace(':', ""),
                _ => f.show.clone(),
            })
            .collect();
        let same = shown.len() == want.len()
            && shown.iter().zip(&want).all(|(s, w)| {
                s == w
                    || number(s).is_some_and(|a| Some(a) == number(w))
                    || s.parse::<Ipv6Addr>().is_ok_and(|a| w.parse() == Ok(a))
            });
        if !same {
            bad.push(format!(
                "{what}: {name} = {want:?}, dissector shows {shown:?}"
            ));
        }
    }
    bad
}

fn check_capture(path: &Path) {
    let what = path.file_name().unwrap().to_string_lossy().into_owned();
    let frames = read_frames(path);
    let packets = dissect(path);
    assert_eq!(packets.len(), frames.len(), "{what}: packets");
    let mut bad = Vec::new();
    let (mut mrc_packets, mut host_packets) = (0, 0);
    for (n, ((frame, whole), fields)) in frames.iter().zip(&packets).enumerate() {
        let what = format!("{what} frame {}", n + 1);
        bad.extend(
            malformed(fields)
                .into_iter()
                .map(|m| format!("{what}: {m}")),
        );
        if fields.iter().any(|f| f.name == "mrch.type") {
            host_packets += 1;
            if *whole {
                bad.extend(compare_host(&what, &frame[48..], fields));
            }
            continue;
        }
        let tclass = (frame[0] & 0x0F) << 4 | frame[1] >> 4;
        let trimmed = TrafficClass::from_dscp(tclass >> 2).is_some_and(TrafficClass::is_trimmed);
        // A frame the capture cut is read as a trimmed one is: headers only.
        let opts = ParseOptions {
            verify_icrc: !trimmed && *whole,
            trimmed: trimmed || !*whole,
        };
        // The engine's reading of the same bytes; the capture's frames carry whatever UDP ports the host used.
        let Some(payload) = frame.get(48..) else {
            bad.push(format!("{what}: shorter than IPv6 + UDP"));
            continue;
        };
        match Packet::parse(payload, opts) {
            Ok(p) => {
                mrc_packets += 1;
                let want: Vec<(String, String)> = p
                    .describe()
                    .into_iter()
                    .filter(|(k, _)| *whole || *k != "payload_len")
                    .map(|(k, v)| (k.to_string(), v))
                    .collect();
                bad.extend(compare(&what, &want, fields));
            }
            Err(e) => bad.push(format!("{what}: the engine cannot parse it: {e:?}")),
        }
    }
    assert!(
        bad.is_empty(),
        "{} problems:\n{}",
        bad.len(),
        bad.join("\n")
    );
    assert!(mrc_packets > 0, "{what}: no MRC packet");
    eprintln!(
        "{what}: {mrc_packets} MRC packets and {host_packets} host datagrams match the engine's parse"
    );
}

/// `install.sh` puts the dissector where tshark loads it without `-X`, and turns off Wireshark's complaint
/// about zero IPv6 UDP checksums (spec WIRE-ENC-3).
#[test]
fn install_script_makes_tshark_load_the_dissector() {
    if tshark_present("install_script_makes_tshark_load_the_dissector").is_none() {
        return;
    }
    let home = scratch("home");
    let st = Command::new(root().join("tools/wireshark/install.sh"))
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .output()
        .unwrap();
    assert!(
        st.status.success(),
        "{}",
        String::from_utf8_lossy(&st.stderr)
    );
    // The vectors travel with zero UDP checksums.
    let pcap = vectors_capture(&home, &read_dir(&root().join("spec/vectors")));
    let out = Command::new("tshark")
        .env("HOME", &home)
        .env_remove("XDG_CONFIG_HOME")
        .args(["-q", "-z", "expert", "-r"])
        .arg(&pcap)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    let _ = std::fs::remove_dir_all(&home);
    assert!(out.status.success());
    assert!(
        text.contains("Retransmission of PSN 0x000101"),
        "the installed dissector ran: {text}"
    );
    assert!(!text.contains("Illegal checksum"), "{text}");
}

/// Every vector cut short at every length: the dissector flags it (malformed, or a bad ICRC where only the
/// payload was cut) and never fails itself.
#[test]
fn cut_packets_are_flagged_never_a_dissector_error() {
    if tshark_present("cut_packets_are_flagged_never_a_dissector_error").is_none() {
        return;
    }
    let cut: Vec<Vector> = read_dir(&root().join("spec/vectors"))
        .into_iter()
        .filter(|v| !v.frame && !v.trimmed)
        .flat_map(|v| {
            // Headers and ICRC: what must be there for a packet not to be malformed.
            let payload = v
                .field("payload_len")
                .map_or(0, |p| p.parse::<usize>().unwrap());
            let whole = v.bytes.len() - payload;
            (1..v.bytes.len()).map(move |k| {
                let what = if k < whole { "malformed" } else { "payload" };
                Vector {
                    name: format!("{} cut to {k} bytes ({what})", v.name),
                    bytes: v.bytes[..k].to_vec(),
                    ..v.clone()
                }
            })
        })
        .collect();
    let dir = scratch("cut");
    let packets = dissect(&vectors_capture(&dir, &cut));
    assert_eq!(packets.len(), cut.len());
    let mut bad = Vec::new();
    for (v, fields) in cut.iter().zip(&packets) {
        let errors: Vec<&Field> = fields
            .iter()
            .filter(|f| {
                (f.name.starts_with("_ws.lua") && f.name != "_ws.lua.fake")
                    || f.showname.contains("Lua Error")
                    || f.name == "_ws.malformed"
            })
            .collect();
        if !errors.is_empty() {
            bad.push(format!("{}: {errors:?}", v.name));
        }
        let malformed = fields.iter().any(|f| f.name == "mrc.expert.malformed");
        let flagged = if v.name.ends_with("(malformed)") {
            malformed
        } else {
            malformed || fields.iter().any(|f| f.name == "mrc.expert.bad_icrc")
        };
        if !flagged {
            bad.push(format!("{}: not flagged", v.name));
        }
    }
    assert!(
        bad.is_empty(),
        "{} problems (capture in {}):\n{}",
        bad.len(),
        dir.display(),
        bad.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// A capture that kept only part of each frame (a snap length, as mrc-sim writes by default): every cut is
/// noted, nothing is malformed, the dissector never fails, and what was kept still decodes.
#[test]
fn snapped_frames_are_noted_never_malformed() {
    if tshark_present("snapped_frames_are_noted_never_malformed").is_none() {
        return;
    }
    let vectors = read_dir(&root().join("spec/vectors"));
    let dir = scratch("snapped");
    let mut bad = Vec::new();
    // IPv6 + UDP is 48 bytes: cut inside the BTH, inside the headers, inside the payload.
    for snaplen in [54, 60, 72, 80, 96] {
        let packets = dissect(&vectors_capture_snapped(&dir, &vectors, snaplen));
        for (v, fields) in vectors.iter().zip(&packets) {
            let what = format!("{} snapped at {snaplen}", v.name);
            bad.extend(
                malformed(fields)
                    .into_iter()
                    .map(|m| format!("{what}: {m}")),
            );
            if fields.iter().any(|f| f.name == "mrc.expert.bad_icrc") {
                bad.push(format!("{what}: an ICRC it could not see was called bad"));
            }
            if snaplen >= 60 && !fields.iter().any(|f| f.name == "mrc.dest_qp") {
                bad.push(format!("{what}: the BTH was kept but not shown"));
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} problems (captures in {}):\n{}",
        bad.len(),
        dir.display(),
        bad.join("\n")
    );
    let _ = std::fs::remove_dir_all(&dir);
}
