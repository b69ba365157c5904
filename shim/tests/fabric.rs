//! `ib_write_bw` under the shim across the 8-plane SRv6 uSID kernel fabric of `mrc-fabric` (network
//! namespaces), with plane 3 cut silently while data moves and restored later: the run completes, and the
//! sender's per-interval counters (`MRC_SHIM_STATS_MS`) show plane 3 dropping out while the other planes carry
//! the traffic, and coming back.
//!
//! Needs root (namespaces, nft, tc) and the `mrc-fabric` binary of `mrc-tools` next to the test's target
//! folder (`cargo build -p mrc-tools`; `cargo test --workspace` builds it); without root it prints SKIPPED.
//! Run under `flock /tmp/mrc-net.lock`.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use common::{shim_lib, text, tool};

const PREFIX: &str = "shf";
const PORT: u16 = 18950;
/// IPv4 addresses of the control link for perftest's TCP exchange (host 0, host 1).
const CTL0: &str = "10.255.0.1";
const CTL1: &str = "10.255.0.2";
/// Seconds the bandwidth test runs (`-D`).
const SECS: u64 = 10;
/// When plane 3 goes down and comes back, seconds into the client's run.
const DOWN_AT: f64 = 3.0;
const UP_AT: f64 = 6.5;

fn fabric_bin() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let profile = exe
        .parent()
        .and_then(Path::parent)
        .expect("target/<profile>");
    let p = profile.join("mrc-fabric");
    assert!(
        p.exists(),
        "{} is missing: build it with `cargo build -p mrc-tools`",
        p.display()
    );
    p
}

fn fabric(args: &[&str]) -> Output {
    Command::new(fabric_bin())
        .args(["--prefix", PREFIX])
        .args(args)
        .output()
        .expect("run mrc-fabric")
}

/// The fabric, torn down on drop.
struct Fabric;

impl Fabric {
    fn up() -> Self {
        let _ = fabric(&["down"]);
        let o = fabric(&["up", "--planes", "8", "--t0s", "2", "--t1s", "1"]);
        assert!(
            o.status.success(),
            "mrc-fabric up: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        // perftest exchanges QP numbers over TCP/IPv4 (its client resolves the server's name as IPv4 only),
        // and the fabric is IPv6: a veth pair between the two hosts carries that exchange, never MRC.
        for cmd in [
            format!(
                "link add {PREFIX}ctl0 netns {h0} type veth peer name {PREFIX}ctl1 netns {h1}",
                h0 = ns(0),
                h1 = ns(1)
            ),
            format!("-n {} addr add {CTL0}/30 dev {PREFIX}ctl0", ns(0)),
            format!("-n {} addr add {CTL1}/30 dev {PREFIX}ctl1", ns(1)),
            format!("-n {} link set {PREFIX}ctl0 up", ns(0)),
            format!("-n {} link set {PREFIX}ctl1 up", ns(1)),
        ] {
            let o = Command::new("ip")
                .args(cmd.split_whitespace())
                .output()
                .expect("run ip");
            assert!(
                o.status.success(),
                "ip {cmd}: {}",
                String::from_utf8_lossy(&o.stderr)
            );
        }
        Fabric
    }

    fn fault(&self, args: &[&str]) {
        let o = fabric(args);
        assert!(
            o.status.success(),
            "mrc-fabric {args:?}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = fabric(&["down"]);
    }
}

fn ns(host: usize) -> String {
    format!("{PREFIX}-h{host}")
}

/// `ib_write_bw` in host `host`'s namespace under the shim, on the host's node file.
fn write_bw(host: usize, server: Option<&str>) -> Child {
    let mut c = Command::new("ip");
    c.args(["netns", "exec", &ns(host), "timeout", "120"])
        .arg(tool("ib_write_bw", "perftest"))
        .args(["-d", "mrc0", "-p", &PORT.to_string(), "--report_gbits"])
        .args(["-D", &SECS.to_string()])
        .args(server)
        .env("LD_PRELOAD", shim_lib())
        .env(
            "MRC_SHIM_NODE",
            format!("/run/mrc-fabric/{PREFIX}/h{host}.toml"),
        )
        .env("MRC_SHIM_STATS_MS", "500")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    c.spawn().expect("start ib_write_bw")
}

/// Whether the server in host 1's namespace listens on `PORT` (read from that namespace's /proc).
fn server_listening() -> bool {
    let o = Command::new("ip")
        .args([
            "netns",
            "exec",
            &ns(1),
            "cat",
            "/proc/net/tcp",
            "/proc/net/tcp6",
        ])
        .output();
    let want = format!(":{PORT:04X}");
    o.is_ok_and(|o| {
        String::from_utf8_lossy(&o.stdout).lines().any(|l| {
            let c: Vec<&str> = l.split_whitespace().collect();
            c.len() > 3 && c[1].ends_with(&want) && c[3] == "0A"
        })
    })
}

/// One `mrc-verbs-shim: stats` line: (seconds, total MB/s, per-plane MB/s).
fn stats_lines(err: &str) -> Vec<(f64, f64, Vec<f64>)> {
    err.lines()
        .filter(|l| l.contains("mrc-verbs-shim: stats"))
        .filter_map(|l| {
            let t = l.split("t=").nth(1)?.split('s').next()?.parse().ok()?;
            let total = l
                .split(" tx ")
                .nth(1)?
                .split_whitespace()
                .next()?
                .parse()
                .ok()?;
            let planes = l
                .split("per plane MB/s")
                .nth(1)?
                .split('|')
                .next()?
                .split_whitespace()
                .filter_map(|w| w.parse().ok())
                .collect();
            Some((t, total, planes))
        })
        .collect()
}

#[test]
fn write_bw_across_the_fabric_survives_a_plane_going_down() {
    if !nix_root() {
        mrc::testing::skip(
            "write_bw_across_the_fabric_survives_a_plane_going_down",
            "needs root (network namespaces, nft, tc)",
        );
        return;
    }
    let f = Fabric::up();
    let server = write_bw(1, None);
    let t0 = Instant::now();
    while !server_listening() {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "server never listened"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let client = write_bw(0, Some(CTL1));
    let start = Instant::now();
    std::thread::sleep(Duration::from_secs_f64(DOWN_AT));
    f.fault(&["plane-down", "3"]);
    let down = start.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_secs_f64(UP_AT - DOWN_AT));
    f.fault(&["plane-up", "3"]);
    let up = start.elapsed().as_secs_f64();
    let c = client.wait_with_output().expect("client");
    let s = server.wait_with_output().expect("server");
    let (cout, cerr) = text(&c);
    let (sout, serr) = text(&s);
    assert!(c.status.success(), "client: {:?}\n{cout}\n{cerr}", c.status);
    assert!(s.status.success(), "server: {:?}\n{sout}\n{serr}", s.status);
    let report: Vec<&str> = cout
        .lines()
        .skip_while(|l| !l.contains("#bytes"))
        .take(2)
        .collect();
    println!(
        "ib_write_bw across 8 planes, plane 3 down at {down:.1} s and up at {up:.1} s:\n{}",
        report.join("\n")
    );
    let lines = stats_lines(&cerr);
    for (t, total, planes) in &lines {
        println!("  t={t:5.1}s {total:8.1} MB/s  per plane {planes:?}");
    }
    assert!(
        report.len() == 2
            && report[1]
                .split_whitespace()
                .nth(3)
                .is_some_and(|bw| bw.parse::<f64>().is_ok_and(|v| v > 0.0)),
        "no bandwidth in the report:\n{cout}"
    );
    // A line's `t` is seconds since the client's device opened (within milliseconds of our start), stamped at
    // the end of its 0.5 s interval.
    let busy: Vec<_> = lines.iter().filter(|l| l.1 > 1.0).collect();
    assert!(busy.len() >= 8, "too few busy intervals:\n{cerr}");
    let phase = |a: f64, b: f64| -> Vec<&(f64, f64, Vec<f64>)> {
        busy.iter()
            .filter(|l| l.0 - 0.5 >= a && l.0 <= b)
            .copied()
            .collect()
    };
    let share3 = |ls: &[&(f64, f64, Vec<f64>)]| -> f64 {
        let p3: f64 = ls.iter().map(|l| l.2.get(3).copied().unwrap_or(0.0)).sum();
        let all: f64 = ls.iter().map(|l| l.1).sum();
        if all > 0.0 { p3 / all } else { 0.0 }
    };
    let before = phase(0.0, DOWN_AT - 0.1);
    let during = phase(DOWN_AT + 1.0, UP_AT - 0.1);
    let after = phase(UP_AT + 1.5, 1e9);
    assert!(
        share3(&before) > 0.05,
        "plane 3 carried no traffic before the fault"
    );
    assert!(
        share3(&during) < 0.02,
        "plane 3 still carried {:.1}% of the traffic while down",
        100.0 * share3(&during)
    );
    // Every interval while plane 3 was down, not only the busy ones `during` keeps, moved data.
    let stalled: Vec<_> = lines
        .iter()
        .filter(|l| l.0 - 0.5 >= DOWN_AT + 1.0 && l.0 <= UP_AT - 0.1 && l.1 <= 1.0)
        .collect();
    assert!(
        stalled.is_empty() && !during.is_empty(),
        "the other planes stopped while plane 3 was down: {stalled:?}\n{cerr}"
    );
    assert!(
        share3(&after) > 0.05,
        "plane 3 carried no traffic after it came back (recovery)"
    );
    let mean =
        |ls: &[&(f64, f64, Vec<f64>)]| ls.iter().map(|l| l.1).sum::<f64>() / ls.len().max(1) as f64;
    println!(
        "mean MB/s: before {:.1}, while plane 3 down {:.1}, after {:.1}; plane 3 share {:.1}% / {:.1}% / {:.1}%",
        mean(&before),
        mean(&during),
        mean(&after),
        100.0 * share3(&before),
        100.0 * share3(&during),
        100.0 * share3(&after)
    );
}

fn nix_root() -> bool {
    // SAFETY: plain system call without arguments.
    unsafe { libc::geteuid() == 0 }
}
