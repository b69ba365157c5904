//! End-to-end test of `mrc-fabric` on real network namespaces (needs root; skipped otherwise).
//!
//! Builds a 2-plane fabric (2 T0 + 2 T1 per plane, one host per T0) and checks, with sockets opened inside the
//! host namespaces, that datagrams addressed by `NodeConfig::destination` arrive on every plane through every T1
//! (counted by the T1s' uN route counters), that `cut`/`uncut` and `link-down`/`link-up` work, and that `down`
//! removes exactly the namespaces it created.

mod common;

use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::OwnedFd;
use std::process::Command;
use std::time::{Duration, Instant};

use common::{in_ns, is_root};
use mrc_host::{NodeConfig, PeerPlane};
use mrc_tools::blast::{self, RecvBufs};
use mrc_tools::fabric::plan::Topology;
use mrc_tools::fabric::show::usid_counters;

const BIN: &str = env!("CARGO_BIN_EXE_mrc-fabric");

fn fabric(prefix: &str, args: &[&str]) -> (bool, String) {
    let out = Command::new(BIN)
        .arg("--prefix")
        .arg(prefix)
        .args(args)
        .output()
        .expect("run mrc-fabric");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

fn namespaces() -> Vec<String> {
    std::fs::read_dir("/run/netns")
        .map(|d| {
            d.filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// Tears the fabric down even if an assertion fails.
struct Guard(String);

impl Drop for Guard {
    fn drop(&mut self) {
        let _ = fabric(&self.0, &["down"]);
    }
}

struct Hosts {
    a: NodeConfig,
    b: NodeConfig,
    senders: Vec<OwnedFd>,
    sink: OwnedFd,
    bufs: RecvBufs,
}

impl Hosts {
    /// Sends `n` datagrams h0 -> h1 on `plane`, path index `path`; send errors (no route) count as not sent.
    fn send(&self, plane: usize, path: u32, n: usize) {
        let peer = PeerPlane {
            addr: self.b.planes[plane].addr,
            t0: self.b.planes[plane].t0,
        };
        let d = blast::sockaddr(&self.a.destination(plane, &peer, path));
        let _ = blast::send_batch(&self.senders[plane], &vec![d; n], &[7u8; 200], None);
    }

    /// Datagrams that arrive within `wait`, per plane (by destination host uSID).
    fn received(&mut self, want: usize, wait: Duration) -> Vec<usize> {
        let mut per = vec![0usize; self.b.plane_count()];
        let end = Instant::now() + wait;
        let mut lens = Vec::new();
        while Instant::now() < end {
            self.bufs.recv(&self.sink, &mut lens).expect("recv");
            for (_, dst) in &lens {
                let u = NodeConfig::host_usid(&dst.expect("pktinfo"));
                let p = self
                    .b
                    .planes
                    .iter()
                    .position(|pl| NodeConfig::host_usid(pl.addr.ip()) == u);
                per[p.expect("plane of destination")] += 1;
            }
            if lens.is_empty() {
                if per.iter().sum::<usize>() >= want && want > 0 {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
        per
    }

    fn expect(&mut self, plane: usize, path: u32, n: usize, want: usize, what: &str) {
        self.send(plane, path, n);
        let got = self.received(
            want,
            Duration::from_millis(if want == 0 { 150 } else { 1000 }),
        );
        let mut exp = vec![0; got.len()];
        exp[plane] = want;
        assert_eq!(got, exp, "{what}: plane {plane} path {path}");
    }
}

#[test]
fn fabric_end_to_end() {
    if !is_root() {
        mrc::testing::skip(
            "fabric_end_to_end",
            "needs root (network namespaces); run `sudo -E cargo test -p mrc-tools`",
        );
        return;
    }
    let prefix = format!("ft{}", std::process::id() % 1_000_000);
    let before = namespaces();
    let guard = Guard(prefix.clone());
    let (ok, out) = fabric(
        &prefix,
        &[
            "up", "--planes", "2", "--t0s", "2", "--t1s", "2", "--mtu", "1500",
        ],
    );
    assert!(ok, "up: {out}");
    // A second up on the same prefix is refused.
    let (ok, out) = fabric(&prefix, &["up", "--planes", "2"]);
    assert!(!ok && out.contains("already exists"), "second up: {out}");
    // A bad argument names itself and the allowed values.
    let (ok, out) = fabric(&prefix, &["cut", "--plane", "5", "--link", "t0-0:t1-0"]);
    assert!(
        !ok && out.contains("--plane") && out.contains("allowed"),
        "bad plane: {out}"
    );

    let dir = format!("/run/mrc-fabric/{prefix}");
    let a = NodeConfig::load(format!("{dir}/h0.toml").as_ref()).expect("h0 node file");
    let b = NodeConfig::load(format!("{dir}/h1.toml").as_ref()).expect("h1 node file");
    let binds: Vec<SocketAddrV6> = a
        .planes
        .iter()
        .map(|p| SocketAddrV6::new(*p.addr.ip(), 0, 0, 0))
        .collect();
    let senders = in_ns(&Topology::host_ns(&prefix, 0), move || {
        binds
            .iter()
            .map(|s| blast::udp_socket(s).expect("sender socket"))
            .collect::<Vec<_>>()
    });
    let port = b.planes[0].addr.port();
    let sink = in_ns(&Topology::host_ns(&prefix, 1), move || {
        blast::udp_socket_opts(
            &SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0),
            true,
            false,
        )
        .expect("sink")
    });
    let mut h = Hosts {
        a,
        b,
        senders,
        sink,
        bufs: RecvBufs::new(64),
    };

    // Every plane, every T1: path index j crosses T1 j.
    for p in 0..2 {
        for j in 0..2 {
            let t1 = Topology::t1_ns(&prefix, p, j);
            let before = usid_counters(&t1, Topology::t1_usid(p, j))
                .expect("counters")
                .0;
            h.expect(p, j as u32, 20, 20, "healthy");
            let after = usid_counters(&t1, Topology::t1_usid(p, j))
                .expect("counters")
                .0;
            assert_eq!(after - before, 20, "T1 {t1} uN counter");
        }
    }

    // Silent cut of plane 0's t0-0:t1-0: path 0 (T1 0) dies, path 1 (T1 1) lives; uncut restores.
    let link = ["--plane", "0", "--link", "t0-0:t1-0"];
    assert!(fabric(&prefix, &[&["cut"][..], &link].concat()).0);
    let (_, show) = fabric(&prefix, &["show"]);
    assert!(
        show.contains("cut") && show.contains("t0-0:t1-0"),
        "show lists the cut: {show}"
    );
    h.expect(0, 0, 20, 0, "cut");
    h.expect(0, 1, 20, 20, "other T1 while cut");
    h.expect(1, 0, 20, 20, "other plane while cut");
    assert!(fabric(&prefix, &[&["uncut"][..], &link].concat()).0);
    h.expect(0, 0, 20, 20, "uncut");

    // Admin-down h0's plane-1 NIC: the kernel deletes its routes; link-up restores them.
    let nic = ["--plane", "1", "--link", "h0:t0-0"];
    assert!(fabric(&prefix, &[&["link-down"][..], &nic].concat()).0);
    h.expect(1, 0, 20, 0, "link-down");
    h.expect(0, 0, 20, 20, "other plane while link down");
    let (ok, out) = fabric(&prefix, &[&["link-up"][..], &nic].concat());
    assert!(ok, "link-up: {out}");
    let routes = Command::new("ip")
        .args([
            "-n",
            &Topology::host_ns(&prefix, 0),
            "-6",
            "route",
            "show",
            "dev",
            "p1",
        ])
        .output()
        .expect("ip route");
    let routes = String::from_utf8_lossy(&routes.stdout);
    for r in ["fcbb:bb00:1100::/48", "fcbb:bb00:e100::/40"] {
        assert!(routes.contains(r), "route {r} restored: {routes}");
    }
    h.expect(1, 0, 20, 20, "link-up");
    h.expect(1, 1, 20, 20, "link-up, T1 1");

    scheduled_cut_lands_on_its_second(&prefix, &h);

    drop(h);
    let (ok, out) = fabric(&prefix, &["down"]);
    assert!(ok, "down: {out}");
    let after = namespaces();
    let ours = format!("{prefix}-");
    assert!(
        after.iter().all(|n| !n.starts_with(&ours)),
        "left behind: {after:?}"
    );
    for n in before.iter().filter(|n| !n.starts_with(&ours)) {
        assert!(
            after.contains(n),
            "down removed a namespace that was not ours: {n}"
        );
    }
    assert!(!std::path::Path::new(&dir).exists(), "state dir removed");
    let (ok, _) = fabric(&prefix, &["down"]);
    assert!(ok, "down is idempotent");
    std::mem::forget(guard);
}

/// Unix time in nanoseconds.
fn unix_ns() -> u128 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos())
}

/// `plane-down --at-second` cuts plane 1 at the whole second it prints, to within a millisecond: datagrams that
/// carry their send time flow on plane 1 before, during and after; every one sent more than a millisecond
/// before that second arrives, none sent after it does.
fn scheduled_cut_lands_on_its_second(prefix: &str, h: &Hosts) {
    let port = 40_001;
    let sink: std::net::UdpSocket = in_ns(&Topology::host_ns(prefix, 1), move || {
        blast::udp_socket_opts(
            &SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, port, 0, 0),
            false,
            false,
        )
        .expect("sink")
    })
    .into();
    sink.set_read_timeout(Some(Duration::from_millis(200)))
        .expect("timeout");
    let peer = PeerPlane {
        addr: SocketAddrV6::new(*h.b.planes[1].addr.ip(), port, 0, 0),
        t0: h.b.planes[1].t0,
    };
    let dest = blast::sockaddr(&h.a.destination(1, &peer, 0));
    let send = || {
        let _ = blast::send_batch(&h.senders[1], &[dest], &unix_ns().to_le_bytes(), None);
    };
    let (ok, out) = fabric(prefix, &["plane-down", "1", "--at-second"]);
    assert!(ok, "plane-down --at-second: {out}");
    let at: u128 = out
        .split("between unix ms ")
        .nth(1)
        .and_then(|r| r.split_whitespace().next())
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no cut time in {out:?}"));
    assert_eq!(at % 1000, 0, "a whole second: {out}");
    let at_ns = at * 1_000_000;
    assert!(
        unix_ns() < at_ns,
        "the command returns before the cut: {out}"
    );
    // Send every 200 µs until 100 ms after the cut.
    let mut sent_after = 0;
    while unix_ns() < at_ns + 100_000_000 {
        send();
        sent_after += usize::from(unix_ns() > at_ns);
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut last = 0u128;
    let mut buf = [0u8; 64];
    while let Ok(n) = sink.recv(&mut buf) {
        if n == 16 {
            last = last.max(u128::from_le_bytes(buf[..16].try_into().expect("16 bytes")));
        }
    }
    assert!(sent_after > 0, "datagrams were sent after the cut");
    assert!(
        last <= at_ns,
        "a datagram sent {} µs after the cut got through",
        (last - at_ns) / 1000
    );
    eprintln!(
        "scheduled cut: the last datagram through was sent {} µs before the cut's second",
        (at_ns - last) / 1000
    );
    assert!(
        at_ns - last < 50_000_000,
        "datagrams flowed until the cut: the last through was sent {} ms before it",
        (at_ns - last) / 1_000_000
    );
    assert!(fabric(prefix, &["plane-up", "1"]).0);
}
