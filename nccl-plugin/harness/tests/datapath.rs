//! The data path: the built plugin moving verified bytes over mrc-host, for every exported table.
//!
//! - two threads of one process (NCCL's two proxy threads): NCCL's patterns in turn over one connection —
//!   8 outstanding requests, grouped receives with tags, receives larger than sends, empty messages, the whole
//!   32-request window, the optional-completion hint (v9+) — with the NULL-request retry, close and finalize;
//! - two processes meeting through the handle printed by `listen` (as two ranks on two nodes do);
//! - across the kernel fabric of `mrc-fabric` (8 planes of network namespaces), 1 GiB verified while a plane
//!   is cut mid-run. That test needs root and the `mrc-fabric` binary; without either it says SKIPPED
//!   (`mrc::testing::skip`) and passes.
//!
//! No announcement may lean on an RNR retry (spec: NCCL-CONN-3): each closed comm logs how many writes its QPs
//! refused for want of a posted receive, and every run here checks that all of them say `rnr 0`.
//! Run the suite under `flock /tmp/mrc-net.lock` (it uses UDP sockets and, as root, network namespaces).

use std::collections::BTreeMap;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Child, ChildStdout, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const HARNESS: &str = env!("CARGO_BIN_EXE_mrc-nccl-harness");
const VERSIONS: [u32; 5] = [8, 9, 10, 11, 12];

/// One `RESULT ok ...` line as key → value.
type Fields = BTreeMap<String, String>;

fn results(stdout: &str) -> Vec<Fields> {
    stdout
        .lines()
        .filter_map(|l| l.strip_prefix("RESULT ok "))
        .map(|l| {
            l.split_whitespace()
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        })
        .collect()
}

fn num(f: &Fields, k: &str) -> u64 {
    f.get(k)
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no numeric {k} in {f:?}"))
}

fn text(out: &Output) -> String {
    format!(
        "status {}\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// Waits for a child at most `limit` (a hang guard, not a timing check); kills it and fails after that.
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
                "{what} still running after {limit:?} (a hang)\n{}",
                text(&out)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Forwards a child's stdout lines to a channel (and keeps them for the final report).
fn lines(out: ChildStdout) -> Receiver<String> {
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for l in BufReader::new(out).lines().map_while(Result::ok) {
            if tx.send(l).is_err() {
                break;
            }
        }
    });
    rx
}

/// The next line starting with `prefix` (the rest of it), or a panic naming what was seen.
fn expect_line(
    rx: &Receiver<String>,
    prefix: &str,
    limit: Duration,
    seen: &mut Vec<String>,
) -> String {
    let start = Instant::now();
    while let Some(left) = limit.checked_sub(start.elapsed()) {
        match rx.recv_timeout(left) {
            Ok(l) => {
                seen.push(l.clone());
                if let Some(rest) = l.strip_prefix(prefix) {
                    return rest.to_string();
                }
            }
            Err(_) => break,
        }
    }
    panic!("no {prefix:?} line within {limit:?}; saw {seen:?}");
}

/// The plugin's `comm closed` lines in a run's log (stderr with `MRC_HARNESS_LOG=1`): how many, after checking
/// that none reports an RNR.
fn closed_without_rnr(stderr: &[u8], what: &str) -> usize {
    let log = String::from_utf8_lossy(stderr);
    let closed: Vec<&str> = log.lines().filter(|l| l.contains("comm closed:")).collect();
    for l in &closed {
        assert!(
            l.contains(" rnr 0 "),
            "{what}: a write found no receive posted: {l}"
        );
    }
    closed.len()
}

#[test]
fn nccl_patterns_in_two_threads_for_every_version() {
    for v in VERSIONS {
        // Stripe over 1, 2 or 4 QPs depending on the version, so each width is exercised.
        let qps = [1, 2, 4][v as usize % 3].to_string();
        let out = Command::new(HARNESS)
            .args(["--version", &v.to_string(), "suite"])
            .env("NCCL_MRC_QPS_PER_CONN", &qps)
            .env("MRC_HARNESS_LOG", "1")
            .output()
            .expect("run the harness");
        assert!(out.status.success(), "v{v}: {}", text(&out));
        assert_eq!(
            closed_without_rnr(&out.stderr, &format!("v{v}")),
            2,
            "v{v}: the send and the receive comm closed"
        );
        let rs = results(&String::from_utf8_lossy(&out.stdout));
        let runs = if v >= 9 { 6 } else { 5 };
        assert_eq!(
            rs.len(),
            2 * runs,
            "v{v}: a receiver and a sender line per run: {rs:?}"
        );
        let mut nulls = 0;
        for pair in rs.chunks(2) {
            let (r, s) = (&pair[0], &pair[1]);
            let run = &r["run"];
            assert_eq!(
                num(r, "bytes"),
                num(s, "bytes"),
                "v{v} {run}: every byte sent was received (and verified)"
            );
            let shrink = matches!(run.as_str(), "grouped" | "larger-receive" | "hint");
            assert_eq!(
                num(r, "short_receives") > 0,
                shrink,
                "v{v} {run}: receives larger than their sends report the sent size"
            );
            nulls += num(s, "null_retries") + num(r, "null_retries");
        }
        assert!(
            nulls > 0,
            "v{v}: a send before its receive was announced got a NULL request and was retried"
        );
        eprintln!(
            "v{v} ({qps} QP(s)): {} runs verified, {nulls} NULL retries",
            rs.len() / 2
        );
    }
}

/// A receiving (rank 1) and a sending (rank 0) process meeting through the handle; `wrap(rank)` gives the
/// command that runs the harness for a rank (with its environment); `during` runs while data moves. Returns
/// both outputs and the receiver's stdout lines.
/// NCCL's channels: two rank processes, four comms each way driven by one thread per rank, spread over three
/// progress threads (host instances) per rank; every byte of every message checked at each size.
#[test]
fn comms_spread_over_progress_threads_both_ways_verified() {
    let child = Command::new(HARNESS)
        .args(["bench", "--perf", "none", "--reps", "1", "--comms", "4"])
        .args([
            "--ways", "both", "--sizes", "4k,1m", "--bytes", "16m", "--verify",
        ])
        .env("NCCL_MRC_PROGRESS_THREADS", "3")
        .env("MRC_HARNESS_LOG", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run the harness");
    let out = finish(child, Duration::from_secs(120), "bench --verify");
    assert!(out.status.success(), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let rows: Vec<&str> = stdout.lines().filter(|l| l.contains(" both ")).collect();
    assert_eq!(rows.len(), 2, "one row per size: {}", text(&out));
    let log = String::from_utf8_lossy(&out.stderr);
    // The ranks' lines may interleave: count the phrase, not lines.
    let hosts = log.matches("MRC host up").count();
    assert_eq!(hosts, 6, "three host instances per rank: {}", text(&out));
    assert_eq!(
        closed_without_rnr(&out.stderr, "bench"),
        16,
        "four send and four receive comms per rank closed"
    );
}

fn two_processes(
    v: u32,
    run: &[&str],
    wrap: impl Fn(usize) -> Command,
    during: impl FnOnce(&Receiver<String>, &mut Vec<String>),
) -> (Output, Output, Vec<String>) {
    let spawn = |rank: usize, args: &[&str]| {
        let mut c = wrap(rank);
        c.args(["--version", &v.to_string()])
            .args(args)
            .args(run)
            .env("MRC_HARNESS_LOG", "1")
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        c.spawn().expect("start the harness")
    };
    let mut listener = spawn(1, &["listen"]);
    let rx = lines(listener.stdout.take().expect("piped"));
    let mut seen = Vec::new();
    let handle = expect_line(&rx, "HANDLE ", Duration::from_secs(60), &mut seen);
    let connector = spawn(0, &["connect", "--handle", &handle]);
    during(&rx, &mut seen);
    let c = finish(connector, Duration::from_secs(300), "connect rank");
    let l = finish(listener, Duration::from_secs(60), "listen rank");
    // The reader thread may still be passing on the last lines after the process exited (seen under load: the
    // listener's result line missing): read until it has forwarded everything, i.e. the channel closes.
    let start = Instant::now();
    while let Some(left) = Duration::from_secs(60).checked_sub(start.elapsed()) {
        match rx.recv_timeout(left) {
            Ok(line) => seen.push(line),
            Err(_) => break,
        }
    }
    (l, c, seen)
}

#[test]
fn two_processes_meet_through_the_handle_for_every_version() {
    for v in VERSIONS {
        let run = [
            "--size",
            "256k",
            "--messages",
            "48",
            "--group",
            "2",
            "--shrink",
        ];
        let (l, c, seen) = two_processes(v, &run, |_| Command::new(HARNESS), |_, _| {});
        assert!(c.status.success(), "v{v} connect rank: {}", text(&c));
        assert!(
            l.status.success(),
            "v{v} listen rank: {}\n{seen:?}",
            text(&l)
        );
        let r = results(&seen.join("\n"));
        let s = results(&String::from_utf8_lossy(&c.stdout));
        assert_eq!(r.len(), 1, "v{v}: {seen:?}");
        assert_eq!(s.len(), 1, "v{v}: {}", text(&c));
        assert_eq!(num(&r[0], "requests"), 48);
        assert_eq!(num(&s[0], "requests"), 96, "two sends per grouped receive");
        assert_eq!(num(&r[0], "bytes"), num(&s[0], "bytes"));
        assert_eq!(closed_without_rnr(&l.stderr, "listen rank"), 1);
        assert_eq!(closed_without_rnr(&c.stderr, "connect rank"), 1);
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").is_ok_and(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("Uid:"))
            .and_then(|u| u.split_whitespace().nth(1).map(|e| e == "0"))
            .unwrap_or(false)
    })
}

/// `mrc-fabric`, built next to this test by `cargo test --workspace` or `cargo build -p mrc-tools`.
fn fabric_bin() -> Option<PathBuf> {
    let exe = std::env::current_exe().ok()?;
    let deps = exe.parent()?;
    let profile = if deps.ends_with("deps") {
        deps.parent()?
    } else {
        deps
    };
    let p = profile.join("mrc-fabric");
    p.is_file().then_some(p)
}

/// An mrc-fabric fabric, torn down on drop.
struct Fabric {
    bin: PathBuf,
    prefix: &'static str,
}

impl Fabric {
    fn run(&self, args: &[&str]) -> Output {
        Command::new(&self.bin)
            .args(["--prefix", self.prefix])
            .args(args)
            .output()
            .expect("run mrc-fabric")
    }

    fn up(bin: PathBuf, prefix: &'static str) -> Self {
        let f = Self { bin, prefix };
        let _ = f.run(&["down"]);
        let out = f.run(&["up", "--planes", "8", "--t0s", "2", "--t1s", "1"]);
        assert!(out.status.success(), "mrc-fabric up: {}", text(&out));
        f
    }
}

impl Drop for Fabric {
    fn drop(&mut self) {
        let _ = self.run(&["down"]);
    }
}

#[test]
fn one_gib_verified_across_the_kernel_fabric_with_a_plane_cut_mid_run() {
    let test = "one_gib_verified_across_the_kernel_fabric_with_a_plane_cut_mid_run";
    if !is_root() {
        mrc::testing::skip(
            test,
            "needs root (network namespaces, nft); run the suite as root",
        );
        return;
    }
    let Some(bin) = fabric_bin() else {
        mrc::testing::skip(
            test,
            "needs mrc-fabric next to this test: `cargo build -p mrc-tools` (or run `cargo test --workspace`) \
             first",
        );
        return;
    };
    let f = Fabric::up(bin, "nccl");
    let node = |h: usize| format!("/run/mrc-fabric/{}/h{h}.toml", f.prefix);
    // 256 receives of 4 MiB: 1 GiB, every byte checked by the receiving rank.
    let run = [
        "--size",
        "4m",
        "--messages",
        "256",
        "--progress",
        "16",
        "--timeout",
        "240",
    ];
    let wrap = |rank: usize| {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &format!("{}-h{rank}", f.prefix), HARNESS])
            .env("NCCL_MRC_NODE_CONFIG", node(rank))
            .env("NCCL_MRC_QPS_PER_CONN", "2");
        c
    };
    let (l, c, seen) = two_processes(11, &run, wrap, |rx, seen| {
        // Cut plane 3 once a quarter of the data has landed: the rest must move over the other 7 planes.
        expect_line(rx, "PROGRESS 64 ", Duration::from_secs(240), seen);
        let out = f.run(&["plane-down", "3"]);
        assert!(out.status.success(), "plane-down: {}", text(&out));
        eprintln!("plane 3 cut after 64 of 256 receives");
    });
    assert!(c.status.success(), "connect rank: {}", text(&c));
    assert!(l.status.success(), "listen rank: {}\n{seen:?}", text(&l));
    let r = results(&seen.join("\n"));
    let s = results(&String::from_utf8_lossy(&c.stdout));
    assert_eq!(
        num(&r[0], "bytes"),
        1 << 30,
        "1 GiB received and verified: {r:?}"
    );
    assert_eq!(num(&s[0], "bytes"), 1 << 30, "{s:?}");
    assert_eq!(closed_without_rnr(&l.stderr, "listen rank"), 1);
    assert_eq!(closed_without_rnr(&c.stderr, "connect rank"), 1);
    eprintln!(
        "fabric, plane 3 cut mid-run: 1 GiB verified at {} Gbit/s",
        r[0]["gbps"]
    );
}
