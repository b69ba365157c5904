//! MRC over real UDP: mrc-perf server and client as separate processes, over loopback and across an 8-plane
//! SRv6 uSID fabric of network namespaces built by mrc-fabric, under faults applied while data moves. Every
//! transfer is verified, every message of it (the client reads each back from the server's memory as it
//! completes; the server also hashes its slots at the end).
//!
//! The fabric tests need root (namespaces, nft, tc); without it they say SKIPPED (`mrc::testing::skip`) and pass.

mod common;

use common::{Spoofer, in_ns, is_root};
use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

const PERF: &str = env!("CARGO_BIN_EXE_mrc-perf");
const FABRIC: &str = env!("CARGO_BIN_EXE_mrc-fabric");

/// One transfer at a time: they share two CPUs, and faults are timed against the transfer.
static SERIAL: Mutex<()> = Mutex::new(());

fn skip_unless_root(test: &str) -> bool {
    if is_root() {
        return false;
    }
    mrc::testing::skip(
        test,
        "needs root (network namespaces, nft, tc); run the suite as root",
    );
    true
}

/// An mrc-fabric fabric, torn down on drop.
struct Fabric {
    prefix: String,
}

impl Fabric {
    fn up(prefix: &str) -> Self {
        let _ = Command::new(FABRIC)
            .args(["--prefix", prefix, "down"])
            .output();
        let out = Command::new(FABRIC)
            .args([
                "--prefix", prefix, "up", "--planes", "8", "--t0s", "2", "--t1s", "1",
            ])
            .output()
            .expect("run mrc-fabric");
        assert!(
            out.status.success(),
            "mrc-fabric up: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        Self {
            prefix: prefix.to_string(),
        }
    }

    fn ns(&self, host: usize) -> String {
        format!("{}-h{host}", self.prefix)
    }

    fn node_file(&self, host: usize) -> String {
        format!("/run/mrc-fabric/{}/h{host}.toml", self.prefix)
    }

    /// Runs a fault command; panics if it fails.
    fn fault(&self, args: &[&str]) {
        let out = Command::new(FABRIC)
            .args(["--prefix", &self.prefix])
            .args(args)
            .output()
            .expect("run mrc-fabric");
        assert!(
            out.status.success(),
            "mrc-fabric {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }

    /// Starts a fault command in the background (flap); [`finish`] collects it.
    fn fault_bg(&self, args: &[&str]) -> Child {
        Command::new(FABRIC)
            .args(["--prefix", &self.prefix])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("run mrc-fabric")
    }

    /// The server on host 1.
    fn server(&self, port: u16) -> Child {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.ns(1),
            PERF,
            "--config",
            &self.node_file(1),
        ]);
        c.args(["--port", &port.to_string(), "--json"]);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        let child = c.spawn().expect("start server");
        std::thread::sleep(Duration::from_millis(300));
        child
    }

    /// The client on host 0, against the server's plane-0 address.
    fn client(&self, port: u16, extra: &[&str]) -> Child {
        let mut c = Command::new("ip");
        c.args([
            "netns",
            "exec",
            &self.ns(0),
            PERF,
            "fcbb:bb00:e001::",
            "--config",
            &self.node_file(0),
        ]);
        c.args(["--port", &port.to_string(), "--json", "--interval-ms", "0"]);
        c.args(extra);
        c.stdout(Stdio::piped()).stderr(Stdio::piped());
        c.spawn().expect("start client")
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = Command::new(FABRIC)
            .args(["--prefix", &self.prefix, "down"])
            .output();
    }
}

/// Waits for a child at most `limit`; kills it and fails if it is still running.
fn finish(mut child: Child, limit: Duration, what: &str) -> Output {
    let start = Instant::now();
    loop {
        if child.try_wait().expect("wait").is_some() {
            return child.wait_with_output().expect("output");
        }
        if start.elapsed() > limit {
            let _ = child.kill();
            let out = child.wait_with_output().expect("output");
            panic!(
                "{what} still running after {limit:?} (a hang)\nstdout: {}\nstderr: {}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn json(out: &Output, what: &str) -> serde_json::Value {
    assert!(
        out.status.success(),
        "{what} failed ({}):\nstdout: {}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what}: not JSON ({e}): {}",
            String::from_utf8_lossy(&out.stdout)
        )
    })
}

/// A verified client/server transfer; returns (client report, server report).
fn transfer(
    f: &Fabric,
    port: u16,
    extra: &[&str],
    during: impl FnOnce(),
) -> (serde_json::Value, serde_json::Value) {
    let server = f.server(port);
    let client = f.client(port, extra);
    during();
    let c = finish(client, Duration::from_secs(60), "client");
    let s = finish(server, Duration::from_secs(10), "server");
    let (c, s) = (json(&c, "client"), json(&s, "server"));
    assert_verified(&c);
    (c, s)
}

/// The client verified its data, every message of it (read back from the server as it completed).
fn assert_verified(c: &serde_json::Value) {
    assert_eq!(
        c["verified"],
        serde_json::Value::Bool(true),
        "data verified: {c}"
    );
    let sent: u64 = c["results"]
        .as_array()
        .expect("results")
        .iter()
        .map(|r| r["messages"].as_u64().unwrap())
        .sum();
    assert!(
        sent > 0 && c["verified_messages"].as_u64() == Some(sent),
        "{sent} messages, {} checked one by one: {c}",
        c["verified_messages"]
    );
}

fn gbps(r: &serde_json::Value) -> f64 {
    r["results"][0]["gbps"].as_f64().unwrap_or(0.0)
}

fn plane_packets(r: &serde_json::Value, plane: usize) -> u64 {
    r["per_plane"][plane]["packets"].as_u64().unwrap_or(0)
}

/// A verifying client on loopback against the server at `port`.
fn loopback_client(port: u16, extra: &[&str]) -> Child {
    Command::new(PERF)
        .args(["::1", "--port", &port.to_string()])
        .args(extra)
        .args(["--verify", "--json", "--interval-ms", "0"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

const TIMED: [&str; 6] = ["--size", "1m", "--duration", "2", "--verify", "--depth=32"];

#[test]
fn loopback_write_imm_and_send_verified() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    for (port, test) in [(18601u16, "write"), (18602, "write-imm"), (18603, "send")] {
        let mut server = Command::new(PERF);
        server.args(["--port", &port.to_string(), "--json"]);
        let server = server
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        std::thread::sleep(Duration::from_millis(200));
        let client = loopback_client(port, &["--test", test, "--bytes", "64m", "--size", "256k"]);
        let c = json(&finish(client, Duration::from_secs(60), "client"), "client");
        json(&finish(server, Duration::from_secs(10), "server"), "server");
        assert_verified(&c);
        assert!(
            c["results"][0]["bytes"].as_u64().unwrap() >= 64 << 20,
            "{test}: {c}"
        );
        for p in 0..8 {
            assert!(plane_packets(&c, p) > 0, "{test}: plane {p} unused: {c}");
        }
        eprintln!("loopback {test}: {:.2} Gbit/s, verified", gbps(&c));
    }
}

#[test]
fn fabric_no_fault_sprays_every_plane() {
    if skip_unless_root("fabric_no_fault_sprays_every_plane") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpa");
    let (c, s) = transfer(&f, 18611, &TIMED, || {});
    let total: u64 = (0..8).map(|p| plane_packets(&c, p)).sum();
    for p in 0..8 {
        let share = plane_packets(&c, p) as f64 / total as f64;
        assert!(
            (0.08..0.17).contains(&share),
            "plane {p} carried {share:.3} of the packets: {c}"
        );
    }
    assert_eq!(s["datapath"]["rx_dropped"], 0, "{s}");
    eprintln!("fabric no fault: {:.2} Gbit/s", gbps(&c));
}

#[test]
fn fabric_one_percent_drop_on_one_plane() {
    if skip_unless_root("fabric_one_percent_drop_on_one_plane") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpb");
    f.fault(&[
        "drop",
        "--plane",
        "2",
        "--link",
        "t0-0:t1-0",
        "--percent",
        "1",
    ]);
    let (c, _) = transfer(&f, 18612, &TIMED, || {});
    assert!(
        c["transport"]["tx_retransmits"].as_u64().unwrap() > 0,
        "the drop must bite: {c}"
    );
    eprintln!(
        "fabric 1% drop on plane 2: {:.2} Gbit/s, {} retransmits",
        gbps(&c),
        c["transport"]["tx_retransmits"]
    );
}

#[test]
fn fabric_plane_down_mid_transfer() {
    if skip_unless_root("fabric_plane_down_mid_transfer") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpc");
    let (c, _) = transfer(&f, 18613, &TIMED, || {
        std::thread::sleep(Duration::from_millis(700));
        f.fault(&["plane-down", "3"]);
    });
    // Plane 3 stopped carrying data: its EVs are retired, and it carried clearly less than the others.
    let p3 = plane_packets(&c, 3);
    let others = (0..8)
        .filter(|&p| p != 3)
        .map(|p| plane_packets(&c, p))
        .min()
        .unwrap();
    assert!(
        p3 * 2 < others,
        "plane 3 sent {p3}, the least of the others {others}: {c}"
    );
    assert!(
        c["per_plane"][3]["ev_good"].as_u64().unwrap() == 0,
        "plane 3 EVs still GOOD: {c}"
    );
    eprintln!(
        "fabric plane 3 down at 0.7 s: {:.2} Gbit/s, plane 3 sent {p3}, others >= {others}",
        gbps(&c)
    );
}

/// A link of plane 5 cut and restored at 10 Hz while data moves: the flap ran (its exit status and report), it
/// bit (plane 5 retired, lost packets and carried far less than the others), plane 5 came back between cuts
/// (retired again and again), and the transfer completed verified. The flap starts with the client and lasts
/// 4 s, so it covers the whole 2 s transfer however long either takes to start (a CI run with a 2 s flap saw
/// plane 5 carry 0.90 of the others after only 6 retirements, as if the flap and the transfer had barely
/// overlapped).
#[test]
fn fabric_link_flapping_at_10hz() {
    if skip_unless_root("fabric_link_flapping_at_10hz") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpd");
    let mut flap = None;
    let (c, _) = transfer(&f, 18614, &TIMED, || {
        flap = Some(f.fault_bg(&[
            "flap",
            "--plane",
            "5",
            "--link",
            "t0-0:t1-0",
            "--hz",
            "10",
            "--for",
            "4",
        ]));
    });
    let flap = finish(flap.expect("flap started"), Duration::from_secs(20), "flap");
    let report = String::from_utf8_lossy(&flap.stdout);
    assert!(
        flap.status.success(),
        "the flap failed ({}): {report}{}",
        flap.status,
        String::from_utf8_lossy(&flap.stderr)
    );
    let cuts: u64 = report
        .split("flapped ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no \"flapped N times\" in the flap's report: {report}"));
    assert!(cuts >= 20, "only {cuts} cuts in 4 s at 10 Hz: {report}");
    // It bit and the transport kept up with it: plane 5 was retired at the cuts, came back in the up halves
    // (retired again and again), and carried clearly less than every other plane. Losses and retransmissions
    // alone prove nothing on a busy machine: an idle flap has shown some. The link is down half of the flapping
    // time, so plane 5 can carry about half of what the others do, no less: a busy machine that runs the transfer
    // slowly (0.7 Gbit/s) saw 0.59 of the others; an idle one sees 0.2 (each cut costs the losses that retire the
    // plane, and each up half the probes that bring it back). One retirement only, with plane 5 silent for the
    // rest of the flap (2 of 4 runs before mrc-fabric set permanent neighbours), was the fabric's neighbour
    // discovery, not the transport: an entry left unresolved by a cut retried once a second, ten flap periods,
    // so every retry met a cut and plane 5 stayed dead one way.
    let plane = |p: usize, k: &str| c["per_plane"][p][k].as_u64().unwrap();
    let (p5, retired) = (plane(5, "packets"), plane(5, "plane_retirements"));
    let others = (0..8)
        .filter(|&p| p != 5)
        .map(|p| plane(p, "packets"))
        .min()
        .unwrap();
    let (losses, retx) = (
        plane(5, "losses"),
        c["transport"]["tx_retransmits"].as_u64().unwrap(),
    );
    assert!(
        retired > 0 && losses > 0 && p5 * 4 < others * 3,
        "the flap had no effect: plane 5 retired {retired} times, lost {losses}, sent {p5} packets (others at least \
         {others}): {c}"
    );
    assert!(
        retired >= 4,
        "plane 5 was retired only {retired} times in about 20 cuts: it did not come back between them ({p5} packets, \
         others at least {others}): {c}"
    );
    eprintln!(
        "fabric link flapping at 10 Hz on plane 5 ({cuts} cuts): {:.2} Gbit/s, plane 5 retired {retired} times, \
         {losses} losses, {p5} packets (others >= {others}), {retx} retransmits",
        gbps(&c)
    );
}

#[test]
fn fabric_seven_of_eight_planes_down() {
    if skip_unless_root("fabric_seven_of_eight_planes_down") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpe");
    let (c, _) = transfer(&f, 18615, &TIMED, || {
        std::thread::sleep(Duration::from_millis(500));
        for p in 1..8 {
            f.fault(&["plane-down", &p.to_string()]);
        }
    });
    for p in 1..8 {
        assert_eq!(
            c["per_plane"][p]["ev_good"], 0,
            "plane {p} EVs still GOOD: {c}"
        );
    }
    assert!(c["per_plane"][0]["ev_good"].as_u64().unwrap() > 0, "{c}");
    eprintln!(
        "fabric 7 of 8 planes down at 0.5 s: {:.2} Gbit/s, verified",
        gbps(&c)
    );
}

#[test]
fn fabric_overloaded_trimming_port() {
    if skip_unless_root("fabric_overloaded_trimming_port") {
        return;
    }
    let have = |tool: &str| {
        Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .is_ok_and(|o| o.status.success())
    };
    if !have("clang") || !have("bpftool") {
        mrc::testing::skip(
            "fabric_overloaded_trimming_port",
            "needs clang and bpftool (apt-get install clang bpftool)",
        );
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpf");
    // Plane 0's last hop into the server runs at 20 Mbit/s while the other planes run at CPU speed: slow
    // enough that a debug build on a busy 2-core machine (about 1 Gbit/s over 8 planes, 125 Mbit/s a plane)
    // still overloads it.
    f.fault(&[
        "trim", "on", "--plane", "0", "--link", "h1:t0-1", "--end", "b", "--mbit", "20",
    ]);
    let (c, s) = transfer(&f, 18616, &TIMED, || {});
    let trimmed = s["datapath"]["rx_trimmed"].as_u64().unwrap();
    let nacks = c["transport"]["rx_trim_nacks"].as_u64().unwrap();
    assert!(
        trimmed > 0 && nacks > 0,
        "trimmed {trimmed}, trim NACKs {nacks}: {c} {s}"
    );
    eprintln!(
        "fabric trimming port: {:.2} Gbit/s, {trimmed} trimmed, {nacks} trim NACKs",
        gbps(&c)
    );
}

#[test]
fn fabric_peer_killed_gives_error_not_hang() {
    if skip_unless_root("fabric_peer_killed_gives_error_not_hang") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dpg");
    let mut server = f.server(18617);
    let client = f.client(18617, &["--size", "1m", "--duration", "30"]);
    std::thread::sleep(Duration::from_millis(700));
    server.kill().expect("kill server");
    let killed = Instant::now();
    let _ = server.wait();
    let out = finish(
        client,
        Duration::from_secs(20),
        "client after its peer was killed",
    );
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "client must fail: {err}");
    assert!(err.contains("error completion"), "{err}");
    eprintln!(
        "peer killed: client failed after {:?}: {}",
        killed.elapsed(),
        err.trim()
    );
}

/// Junk from the client's own addresses and ports (a raw socket in the client's namespace spoofs them), so the
/// server's datapath takes it for the peer's and hands it to the engine, which must count and drop every
/// datagram while the transfer completes verified. (Junk from any other address is dropped before the engine
/// sees it: `rx_unknown_source`.) The junk goes out in 20 bursts over about a second: sent in one go, all of it
/// can miss a server stalled for that moment (in one CI run its engine saw none of 20,000 and its READ
/// responses took 1,000 RTOs, as if the kernel had dropped the junk from a full socket buffer).
#[test]
fn fabric_hostile_datagrams_neither_crash_nor_corrupt() {
    if skip_unless_root("fabric_hostile_datagrams_neither_crash_nor_corrupt") {
        return;
    }
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let f = Fabric::up("dph");
    let ns = f.ns(0);
    let node = |h: usize| {
        mrc_host::NodeConfig::load(std::path::Path::new(&f.node_file(h))).expect("node file")
    };
    let (client, server) = (node(0), node(1));
    let planes: Vec<(std::net::SocketAddrV6, std::net::SocketAddrV6)> = client
        .planes
        .iter()
        .zip(&server.planes)
        .map(|(c, s)| (c.addr, s.addr))
        .collect();
    assert!(
        planes.iter().all(|(c, s)| c.port() != 0 && s.port() != 0),
        "the node files name no fixed ports: {planes:?}"
    );
    const JUNK: u32 = 20_000;
    let mut sent = 0;
    let (c, s) = transfer(&f, 18618, &TIMED, || {
        std::thread::sleep(Duration::from_millis(300));
        sent = in_ns(&ns, move || {
            let spoofers: Vec<Spoofer> = planes
                .iter()
                .map(|(c, _)| Spoofer::bound_to(*c.ip()).expect("raw socket"))
                .collect();
            let mut rng = 0x9E37_79B9_7F4A_7C15u64;
            let mut next = move || {
                rng ^= rng << 13;
                rng ^= rng >> 7;
                rng ^= rng << 17;
                rng
            };
            let mut sent = 0u32;
            for i in 0..JUNK {
                let len = 1 + (next() % 1200) as usize;
                let mut b: Vec<u8> = (0..len).map(|_| next() as u8).collect();
                if i % 2 == 0 && len >= 12 {
                    // Look like MRC: a data opcode and a QPN near the ones the server uses.
                    b[0] = 0xC6 + (next() % 6) as u8;
                    b[4] = 0;
                    b[5] = 1;
                    b[6] = 0;
                    b[7] = 0x10 + (next() % 4) as u8;
                }
                let p = i as usize % planes.len();
                let (from, to) = planes[p];
                if spoofers[p].send(from.port(), to, &b).is_ok() {
                    sent += 1;
                }
                if (i + 1) % (JUNK / 20) == 0 {
                    std::thread::sleep(Duration::from_millis(40));
                }
            }
            sent
        });
    });
    let engine = s["datapath"]["rx_engine_dropped"].as_u64().unwrap();
    let strangers = s["datapath"]["rx_unknown_source"].as_u64().unwrap();
    assert!(
        sent >= JUNK * 9 / 10,
        "only {sent} of {JUNK} junk datagrams left"
    );
    // Host datagrams (first byte 0x4D) go to the host layer, and a busy socket may drop a few: most, not all.
    assert!(
        engine >= u64::from(sent) / 2,
        "the engine saw and dropped only {engine} of {sent} spoofed datagrams ({strangers} from strangers): {s}"
    );
    eprintln!(
        "hostile datagrams: {sent} sent from the client's addresses, the server's engine dropped {engine} \
         ({strangers} from strangers), transfer verified at {:.2} Gbit/s",
        gbps(&c)
    );
}

/// A child process that a failing test does not leave behind.
struct KillOnDrop(Option<Child>);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        if let Some(c) = self.0.as_mut() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

/// Sends one line to the server at `port` and reads its one-line answer.
fn ask(port: u16, line: &[u8]) -> String {
    use std::io::{BufRead, BufReader, Write};
    let mut s = std::net::TcpStream::connect(("::1", port)).expect("connect to the server");
    s.set_read_timeout(Some(Duration::from_secs(15))).unwrap();
    // The server may refuse (and close) before it has read everything: a failed write is fine.
    let _ = s.write_all(line);
    let _ = s.write_all(b"\n");
    let mut answer = String::new();
    let _ = BufReader::new(s).read_line(&mut answer);
    answer
}

/// A hello as a client on 8 loopback planes would send it, as JSON to mutate.
fn good_hello() -> serde_json::Value {
    use mrc_tools::perf::oob::{Hello, WirePlane, WireRegion, conn_to_hex};
    let conn = mrc_host::Blob {
        planes: 8,
        usid: false,
        plane0: "[::1]:40000".parse().unwrap(),
        t0: 0,
        kind: mrc_host::BlobKind::Qp {
            qpn: 0x10,
            psn: 0x1234,
            caps: mrc::Caps::ALL,
            mtu: 60_000,
        },
        rkey_hint: 0,
        addr_hint: 0,
        key: [0x11; 16],
    };
    let h = Hello {
        test: mrc_tools::perf::Test::Write,
        mode: mrc_tools::perf::Mode::Bw,
        qps: 1,
        max_size: 65536,
        slots: 1,
        mtu: 60_000,
        icrc: true,
        evs: 4,
        planes: (0..8)
            .map(|p| WirePlane {
                addr: format!("[::1]:{}", 40_000 + p),
                t0: 0,
            })
            .collect(),
        conn: vec![conn_to_hex(&conn)],
        region: WireRegion {
            addr: 0x1000,
            rkey: 1,
            len: 65536,
        },
        bidir: None,
    };
    serde_json::to_value(&h).unwrap()
}

/// Hostile hellos (issue 10): every field is checked, the server answers each with the reason and stays up,
/// a client it refuses prints the reason, and the next good client is served as usual.
#[test]
fn server_refuses_bad_hellos_says_why_and_serves_the_next_client() {
    let _g = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let port = 18605u16;
    let mut server = KillOnDrop(Some(
        Command::new(PERF)
            .args(["--port", &port.to_string(), "--json"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    ));
    std::thread::sleep(Duration::from_millis(300));
    let mutate = |k: &str, v: serde_json::Value| {
        let mut h = good_hello();
        h[k] = v;
        serde_json::to_vec(&h).unwrap()
    };
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (mutate("qps", 0.into()), "qps 0"),
        (mutate("max_size", 0.into()), "max_size 0"),
        (mutate("qps", 2_000_000.into()), "qps 2000000"),
        (
            mutate("max_size", (1u64 << 40).into()),
            "max_size 1099511627776",
        ),
        (mutate("slots", 0.into()), "slots 0"),
        (
            {
                let mut h = good_hello();
                h["max_size"] = (1u64 << 30).into();
                h["slots"] = 8.into();
                serde_json::to_vec(&h).unwrap()
            },
            "GiB of memory",
        ),
        (mutate("mtu", 0.into()), "mtu 0"),
        (mutate("evs", 0.into()), "evs 0"),
        (mutate("planes", serde_json::json!([])), "0 planes"),
        (mutate("conn", serde_json::json!([])), "0 connection blobs"),
        (mutate("conn", serde_json::json!(["zz"])), "conn[0]"),
        (
            mutate(
                "region",
                serde_json::json!({"addr": u64::MAX, "rkey": 1, "len": 65536}),
            ),
            "region",
        ),
        (mutate("qps", (-1).into()), "bad hello"),
        (b"not json".to_vec(), "bad hello"),
        (vec![b'x'; 2 << 20], "longer than"),
    ];
    for (line, want) in &cases {
        let answer = ask(port, line);
        let v: serde_json::Value = serde_json::from_str(&answer)
            .unwrap_or_else(|e| panic!("answer to {want:?} is not JSON ({e}): {answer:?}"));
        let reason = v["refused"].as_str().unwrap_or_default();
        assert!(
            reason.contains(want),
            "refusal {reason:?} should mention {want:?}"
        );
    }
    // A real client the server must refuse (4 planes against its 8) sees the reason.
    let out = Command::new(PERF)
        .args([
            "::1",
            "--port",
            &port.to_string(),
            "--planes",
            "4",
            "--json",
        ])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("the server refused the test") && err.contains("4 planes"),
        "{err}"
    );
    // The server is still there and serves a good client.
    let client = loopback_client(port, &["--bytes", "4m", "--size", "64k"]);
    let c = json(&finish(client, Duration::from_secs(60), "client"), "client");
    assert_eq!(c["verified"], serde_json::Value::Bool(true), "{c}");
    let s = finish(server.0.take().unwrap(), Duration::from_secs(10), "server");
    json(&s, "server");
    let log = String::from_utf8_lossy(&s.stderr);
    assert_eq!(
        log.matches("refused client").count(),
        cases.len() + 1,
        "one line per refusal: {log}"
    );
}
