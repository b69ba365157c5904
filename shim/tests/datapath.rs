//! Unmodified ibverbs programs moving data over MRC on loopback, two processes each: `ibv_rc_pingpong -g 0 -c`
//! (polling, with `-e` completion events, and 10,000 iterations; the received buffer checked) and perftest's
//! `ib_{write,send,read}_{bw,lat}` with defaults and with `-a` (all sizes), the latency tests with `-e`, and
//! `ib_write_bw -q 16`. Each test checks both sides' exit status and parses their report lines, which it
//! prints (`cargo test -p mrc-verbs-shim --test datapath -- --nocapture` shows them).
//!
//! Run under `flock /tmp/mrc-net.lock` with the other socket tests; the tests of this file take turns (a
//! process pair per test), since on a small machine two pairs at once starve each other's progress threads.

mod common;

use std::process::{Child, Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use common::{shim_lib, text, tool};

/// One process pair at a time.
static TURN: Mutex<()> = Mutex::new(());

fn spawn(name: &str, pkg: &str, args: &[&str], planes: &str) -> Child {
    Command::new("timeout")
        .arg("300")
        .arg(tool(name, pkg))
        .args(args)
        .env("LD_PRELOAD", shim_lib())
        .env("MRC_SHIM_PLANES", planes)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start the program")
}

/// Whether something listens on TCP `port` (IPv4 or IPv6), read from /proc so that no probe connection
/// takes the server's one accept.
fn listening(port: u16) -> bool {
    let want = format!(":{port:04X} ");
    ["/proc/net/tcp", "/proc/net/tcp6"].iter().any(|f| {
        std::fs::read_to_string(f).is_ok_and(|t| {
            t.lines().skip(1).any(|l| {
                let cols: Vec<&str> = l.split_whitespace().collect();
                cols.len() > 3 && format!("{} ", cols[1]).contains(&want) && cols[3] == "0A"
            })
        })
    })
}

/// Runs `name` as server (`server_args`) and client (`client_args` + `localhost`) on TCP `port`.
fn pair(
    name: &str,
    pkg: &str,
    port: u16,
    server_args: &[&str],
    client_args: &[&str],
) -> (Output, Output) {
    let _turn = TURN.lock().unwrap_or_else(|p| p.into_inner());
    let p = port.to_string();
    let mut sargs = server_args.to_vec();
    sargs.extend(["-p", &p]);
    let server = spawn(name, pkg, &sargs, "8");
    let t0 = Instant::now();
    while !listening(port) {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "{name} server never listened on {port}"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let mut cargs = client_args.to_vec();
    cargs.extend(["-p", &p, "localhost"]);
    let client = spawn(name, pkg, &cargs, "8")
        .wait_with_output()
        .expect("client");
    let server = server.wait_with_output().expect("server");
    (server, client)
}

/// Both sides exited 0; returns their stdout.
fn both_ok(name: &str, (server, client): &(Output, Output)) -> (String, String) {
    let (sout, serr) = text(server);
    let (cout, cerr) = text(client);
    // The client first: when it fails, the server only says that the client went away.
    for (side, o, out, err) in [
        ("client", client, &cout, &cerr),
        ("server", server, &sout, &serr),
    ] {
        assert!(
            o.status.success(),
            "{name} {side} exited with {:?}:\n{out}\n{err}",
            o.status
        );
    }
    (sout, cout)
}

/// perftest's result rows: the lines after the `#bytes` header that start with a number.
fn report_rows(out: &str) -> Vec<Vec<f64>> {
    let mut rows = Vec::new();
    let mut in_table = false;
    for l in out.lines() {
        if l.trim_start().starts_with("#bytes") {
            in_table = true;
            continue;
        }
        if !in_table {
            continue;
        }
        let nums: Vec<f64> = l
            .split_whitespace()
            .map_while(|w| w.parse::<f64>().ok())
            .collect();
        if nums.len() >= 3 {
            rows.push(nums);
        } else if l.starts_with("---") && !rows.is_empty() {
            in_table = false;
        }
    }
    rows
}

/// Sizes perftest's `-a` runs: 2 B to 8 MiB.
fn all_sizes() -> Vec<f64> {
    (1..=23).map(|i| f64::from(1u32 << i)).collect()
}

/// Checks a perftest run's report on the side that prints it (the client; bandwidth servers print it too).
fn perftest(name: &str, port: u16, extra: &[&str], sizes: &[f64], iterations: f64) {
    let mut args = vec!["-d", "mrc0"];
    args.extend_from_slice(extra);
    let mut r = pair(name, "perftest", port, &args, &args);
    // A bandwidth test whose clock calibration failed prints no report and exits 1: that measures perftest's
    // clock on a loaded machine, not the transfer, so it runs again (at most twice), saying so.
    for again in 1..=2 {
        if !report_refused(&r) {
            break;
        }
        println!("  {name}: perftest's clock calibration failed, no report: run {again} more time");
        r = pair(name, "perftest", port, &args, &args);
    }
    let (_, cout) = both_ok(name, &r);
    let rows = report_rows(&cout);
    println!("{name} {}:", extra.join(" "));
    for l in cout.lines().filter(|l| {
        l.trim_start().starts_with("#bytes")
            || l.split_whitespace()
                .next()
                .is_some_and(|w| w.parse::<u64>().is_ok())
    }) {
        println!("  {l}");
    }
    let got: Vec<f64> = rows.iter().map(|r| r[0]).collect();
    assert_eq!(got, sizes, "{name}: report rows\n{cout}");
    let (_, cerr) = text(&r.1);
    let uncalibrated = clock_failures(&cerr);
    let mut unmeasured = 0;
    for r in &rows {
        assert_eq!(r[1], iterations, "{name}: iterations in {r:?}\n{cout}");
        // Bandwidth rows: peak, average, rate; latency rows: min, max, typical, avg, … — all positive, or all
        // divided by the zero clock rate of a failed calibration.
        let figures = &r[2..];
        if figures.iter().all(|&v| v > 0.0 && v.is_finite()) {
            continue;
        }
        assert!(
            figures.iter().all(|&v| v == 0.0 || !v.is_finite()),
            "{name}: a zero figure in {r:?}\n{cout}\n{cerr}"
        );
        unmeasured += 1;
    }
    assert!(
        unmeasured <= uncalibrated,
        "{name}: {unmeasured} rows without figures, {uncalibrated} failed clock calibrations\n{cout}\n{cerr}"
    );
    if unmeasured > 0 {
        println!(
            "  ({unmeasured} rows without figures: perftest's clock calibration failed on a loaded machine)"
        );
    }
}

/// Times perftest could not measure its clock rate. It fits cycles against `gettimeofday` over 200 busy
/// waits of 0.1–2 ms before each report; when the machine preempts it between the two readings the fit's r² falls
/// below 0.9, it says so on stderr and takes the rate as 0, so that report row reads 0 (bandwidth) or inf
/// (latency) however the transfer went.
fn clock_failures(stderr: &str) -> usize {
    stderr
        .lines()
        .filter(|l| l.contains("Correlation coefficient r^2"))
        .count()
}

/// Whether either side refused to report because its clock calibration failed (see [`clock_failures`]).
fn report_refused((server, client): &(Output, Output)) -> bool {
    [server, client].iter().any(|o| {
        let (out, err) = text(o);
        !o.status.success()
            && clock_failures(&format!("{out}\n{err}")) > 0
            && format!("{out}{err}").contains("Can't produce a report")
    })
}

/// The refusal as perftest printed it in a CI run on a loaded machine, and what is not one.
#[test]
fn a_refused_report_is_told_from_a_failed_transfer() {
    use std::os::unix::process::ExitStatusExt;
    let out = |code: i32, stdout: &str, stderr: &str| Output {
        status: std::process::ExitStatus::from_raw(code << 8),
        stdout: stdout.into(),
        stderr: stderr.into(),
    };
    let ok = out(0, "", "");
    let refused = out(
        1,
        " #bytes  #iterations\n\nCorrelation coefficient r^2: 0.894739 < 0.9\nCan't produce a report\n",
        "",
    );
    assert!(report_refused(&(ok.clone(), refused.clone())));
    assert!(report_refused(&(refused, ok.clone())));
    // A failed transfer, or a calibration warning in a run that still reported, runs no second time.
    let failed = out(1, "", "Completion with error at client\n");
    assert!(!report_refused(&(ok.clone(), failed)));
    let warned = out(0, "", "Correlation coefficient r^2: 0.8 < 0.9\n");
    assert!(!report_refused(&(ok, warned)));
}

/// `-c`: the client writes a known byte at the start of every page and the server checks each message it
/// receives there (it prints "invalid data in page N" and still exits 0, so the output is checked).
#[test]
fn rc_pingpong_exchanges_1000_messages() {
    rc_pingpong(18801, &[], 1000);
    rc_pingpong(18802, &["-e"], 1000);
}

/// Ten thousand 64 KiB round trips: a long run of SENDs each finding its receive, 500 posted ahead.
#[test]
fn rc_pingpong_exchanges_10000_messages() {
    rc_pingpong(18803, &["-n", "10000"], 10_000);
}

/// `ibv_rc_pingpong -g 0 -c -s 65536` with `extra`, `iters` round trips: both sides report them all and the
/// received buffers hold what the client wrote.
fn rc_pingpong(port: u16, extra: &[&str], iters: u64) {
    let mut args = vec!["-g", "0", "-c", "-s", "65536"];
    args.extend_from_slice(extra);
    let r = pair("ibv_rc_pingpong", "ibverbs-utils", port, &args, &args);
    let (sout, cout) = both_ok("ibv_rc_pingpong", &r);
    let summary = (
        format!("{} bytes in", 2 * 65536 * iters),
        format!("{iters} iters in"),
    );
    for (side, out) in [("server", &sout), ("client", &cout)] {
        println!("ibv_rc_pingpong {} ({side}):\n{out}", extra.join(" "));
        assert!(
            out.contains(&summary.0) && out.contains(&summary.1),
            "{side} {extra:?}: no summary {summary:?} in\n{out}"
        );
        assert!(
            !out.contains("invalid data"),
            "{side} {extra:?}: the received buffer is wrong:\n{out}"
        );
        // GID 0 of a loopback node: the port folded into an IPv4-mapped address (shim/README.md "Addressing").
        assert!(
            out.contains("GID ::ffff:127.0."),
            "{side}: addresses not shown\n{out}"
        );
    }
}

#[test]
fn write_bw_and_lat() {
    perftest("ib_write_bw", 18811, &[], &[65536.0], 5000.0);
    perftest("ib_write_lat", 18812, &[], &[2.0], 1000.0);
}

#[test]
fn send_bw_and_lat() {
    perftest("ib_send_bw", 18813, &[], &[65536.0], 1000.0);
    perftest("ib_send_lat", 18814, &[], &[2.0], 1000.0);
}

#[test]
fn read_bw_and_lat() {
    perftest("ib_read_bw", 18815, &[], &[65536.0], 1000.0);
    perftest("ib_read_lat", 18816, &[], &[2.0], 1000.0);
}

/// `-e`: the latency tests sleep on a completion channel (`ibv_req_notify_cq`, `ibv_get_cq_event`, ack, re-arm,
/// then poll), with the send and receive CQs on one channel: an event for a completion already in a CQ when it
/// was armed would wake them on the wrong CQ.
#[test]
fn latency_with_completion_events() {
    perftest("ib_send_lat", 18817, &["-e"], &[2.0], 1000.0);
    perftest("ib_read_lat", 18818, &["-e"], &[2.0], 1000.0);
}

/// `-q 16`: sixteen QPs between the two processes, each with its own stream of WRITEs.
#[test]
fn write_bw_on_16_qps() {
    // perftest reports the iterations of all QPs together.
    perftest(
        "ib_write_bw",
        18819,
        &["-q", "16"],
        &[65536.0],
        16.0 * 5000.0,
    );
}

/// `-a`: every size from 2 B to 8 MiB (`-n 100` iterations per size keeps the 8 MiB rows to seconds).
#[test]
fn all_sizes_with_a() {
    let all = all_sizes();
    let n = ["-a", "-n", "100"];
    for (i, name) in [
        "ib_write_bw",
        "ib_write_lat",
        "ib_send_bw",
        "ib_send_lat",
        "ib_read_bw",
        "ib_read_lat",
    ]
    .iter()
    .enumerate()
    {
        perftest(name, 18820 + i as u16, &n, &all, 100.0);
    }
}
