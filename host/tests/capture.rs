//! Packet capture over loopback sockets: a link's bootstrap, a WRITE and a close land in each host's pcapng,
//! one interface per plane, as frames the engine's parser reads back; the size cap keeps the file valid and
//! counts what it left out; `MRC_CAPTURE` turns it on for a host that asked for nothing.
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

use std::path::{Path, PathBuf};
use std::time::Instant;

use mrc::wire::{Ipv6Header, Packet, ParseOptions, UdpHeader};
use mrc_host::capture::CaptureConfig;
use mrc_host::{Host, HostConfig, ProgressMode};
use pcap_file::pcapng::{Block, PcapNgReader};

mod common;

use common::{LIMIT, link, write_and_check};

/// What a capture file holds: per packet (interface, direction flags, frame).
struct Captured {
    interfaces: Vec<String>,
    packets: Vec<(u32, u32, Vec<u8>)>,
    dropped: u64,
}

fn read(path: &Path) -> Captured {
    let data = std::fs::read(path).unwrap();
    let mut r = PcapNgReader::new(&data[..]).expect("a pcapng file");
    let mut c = Captured {
        interfaces: Vec::new(),
        packets: Vec::new(),
        dropped: 0,
    };
    use pcap_file::pcapng::blocks::enhanced_packet::EnhancedPacketOption;
    use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
    use pcap_file::pcapng::blocks::interface_statistics::InterfaceStatisticsOption;
    while let Some(block) = r.next_block() {
        match block.expect("a whole block") {
            Block::InterfaceDescription(i) => {
                assert_eq!(i.linktype, pcap_file::DataLink::RAW);
                let name = i.options.iter().find_map(|o| match o {
                    InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
                    _ => None,
                });
                c.interfaces.push(name.expect("interface named"));
            }
            Block::EnhancedPacket(p) => {
                let flags = p
                    .options
                    .iter()
                    .find_map(|o| match o {
                        EnhancedPacketOption::Flags(f) => Some(*f),
                        _ => None,
                    })
                    .expect("direction flags");
                c.packets.push((p.interface_id, flags, p.data.into_owned()));
            }
            Block::InterfaceStatistics(s) => {
                for o in &s.options {
                    if let InterfaceStatisticsOption::IsbIfDrop(d) = o {
                        c.dropped += d;
                    }
                }
            }
            _ => {}
        }
    }
    c
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("mrc-capture-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn host(capture: Option<CaptureConfig>) -> Host {
    let mut cfg = HostConfig::loopback(2);
    cfg.progress = ProgressMode::Manual;
    cfg.profile.mtu = 4096;
    // Packet by packet over the planes, so a 16 KiB WRITE crosses both (trains would keep it on one EV).
    cfg.profile.ev_burst = 1;
    cfg.capture = capture;
    Host::start(cfg).expect("loopback sockets")
}

/// A link of two QPs, one 16 KiB WRITE on its second QP, and a graceful close, both hosts driven here.
fn write_and_close(a: &Host, b: &Host) {
    let (la, lb) = link(a, b, 2);
    write_and_check(a, b, &la.qps()[1], la.send_cq(), 16 << 10);
    let start = Instant::now();
    let mut closing = la.close();
    drop(lb);
    while !closing.poll().unwrap() {
        assert!(start.elapsed() < LIMIT, "close did not finish");
        a.progress().unwrap();
        b.progress().unwrap();
    }
}

/// UDP payloads of a capture: host datagrams and MRC packets, each frame an IPv6/UDP frame of its length.
fn payloads(c: &Captured) -> Vec<&[u8]> {
    c.packets
        .iter()
        .map(|(_, _, f)| {
            let ip = Ipv6Header::parse(f).expect("IPv6 header");
            let udp = UdpHeader::parse(&f[Ipv6Header::LEN..]).expect("UDP header");
            assert_eq!(usize::from(ip.payload_len), f.len() - Ipv6Header::LEN);
            assert_eq!(udp.length, ip.payload_len);
            &f[Ipv6Header::LEN + UdpHeader::LEN..]
        })
        .collect()
}

#[test]
fn a_link_and_a_write_land_in_both_captures() {
    let dir = scratch("link");
    let (pa, pb) = (dir.join("a.pcapng"), dir.join("b.pcapng"));
    let a = host(Some(CaptureConfig::new(&pa)));
    let b = host(None);
    b.start_capture(&CaptureConfig::new(&pb)).unwrap();
    write_and_close(&a, &b);
    let (sa, sb) = (a.stats(), b.stats());
    let ca = a.stop_capture().unwrap().expect("a capture was on");
    let cb = b.stop_capture().unwrap().expect("a capture was on");
    assert_eq!(a.stop_capture().unwrap(), None, "stopped once");
    let (fa, fb) = (read(&pa), read(&pb));
    for (name, s, c, f) in [("a", sa, ca, &fa), ("b", sb, cb, &fb)] {
        assert_eq!(
            f.interfaces,
            ["plane0", "plane1"],
            "{name}: one interface per plane"
        );
        assert_eq!((c.dropped, c.errors), (0, 0), "{name}");
        assert_eq!(c.packets, f.packets.len() as u64, "{name}");
        let out = f.packets.iter().filter(|p| p.1 == 2).count() as u64;
        let inb = f.packets.iter().filter(|p| p.1 == 1).count() as u64;
        // Everything the datapath counted is in the file, each way.
        assert_eq!(
            out,
            s.datapath.tx_datagrams + s.datapath.tx_host,
            "{name}: sent"
        );
        assert_eq!(inb, s.datapath.rx_datagrams, "{name}: received");
        assert!(f.packets.iter().any(|p| p.0 == 1), "{name}: plane 1 used");
    }
    let host_types = |c: &Captured| -> Vec<u8> {
        payloads(c)
            .into_iter()
            .filter(|p| p.starts_with(b"MRCH"))
            .map(|p| p[5])
            .collect()
    };
    // a connects and closes; b accepts and answers CLOSED (spec/host.md).
    let (ta, tb) = (host_types(&fa), host_types(&fb));
    for t in [3, 6] {
        assert!(
            ta.contains(&t) && tb.contains(&t),
            "type {t}: {ta:?} {tb:?}"
        );
    }
    for t in [4, 7] {
        assert!(
            ta.contains(&t) && tb.contains(&t),
            "type {t}: {ta:?} {tb:?}"
        );
    }
    let mut writes = 0;
    for p in payloads(&fa)
        .into_iter()
        .filter(|p| !p.starts_with(b"MRCH"))
    {
        let pkt = Packet::parse(p, ParseOptions::default()).expect("an MRC packet, ICRC intact");
        if pkt.bth.opcode.name().starts_with("WRITE") {
            writes += 1;
        }
    }
    assert!(
        writes >= 4,
        "16 KiB in 4 KiB packets: {writes} WRITE packets"
    );
    // spec/captures/host-link.pcapng is this capture (spec/captures/README.md).
    if std::env::var_os("MRC_UPDATE_FIXTURES").is_some() {
        let fixture =
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../spec/captures/host-link.pcapng");
        std::fs::copy(&pa, fixture).unwrap();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_size_cap_keeps_a_valid_file_and_counts_the_rest() {
    let dir = scratch("cap");
    let path = dir.join("a.pcapng");
    let cfg = CaptureConfig {
        max_bytes: 1024,
        snaplen: 128,
        ..CaptureConfig::new(&path)
    };
    let (a, b) = (host(Some(cfg)), host(None));
    write_and_close(&a, &b);
    let stats = a.stop_capture().unwrap().unwrap();
    let f = read(&path);
    assert!(stats.dropped > 0, "{stats:?}");
    assert_eq!(f.dropped, stats.dropped, "the drop count is in the file");
    assert_eq!(f.packets.len() as u64, stats.packets);
    assert!(f.packets.iter().all(|p| p.2.len() <= 128), "snaplen");
    assert!(
        std::fs::metadata(&path).unwrap().len() < 1024 + 1024,
        "stopped at the cap"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// `MRC_CAPTURE` reaches a host whose configuration says nothing: this test runs itself again with it set.
#[test]
fn the_environment_turns_capture_on() {
    if let Some(path) = std::env::var_os("MRC_CAPTURE_TEST_CHILD") {
        let (a, b) = (host(None), host(None));
        write_and_close(&a, &b);
        assert!(a.capture_stats().is_some() && b.capture_stats().is_some());
        drop((a, b));
        assert!(Path::new(&path).exists());
        return;
    }
    let dir = scratch("env");
    let path = dir.join("env.pcapng");
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_environment_turns_capture_on", "--nocapture"])
        .env("MRC_CAPTURE_TEST_CHILD", &path)
        .env("MRC_CAPTURE", &path)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The first host of the process writes the file named, the second `name.1.pcapng`.
    let (first, second) = (read(&path), read(&dir.join("env.1.pcapng")));
    assert!(!first.packets.is_empty() && !second.packets.is_empty());
    let _ = std::fs::remove_dir_all(&dir);
}
