//! The throughput bench as NCCL runs the plugin: two ranks in two processes, `comms` connections per
//! direction (NCCL opens one per channel), every comm of a rank driven by one thread that posts and tests
//! each comm's requests in turn (NCCL's proxy progress thread), one way or both ways at once. Beside it, in
//! the same run, mrc-perf's equivalent: the same planes, sizes, depth and buffers, one QP per comm, its
//! default packet size (`--bidir` for both ways). The figure per size is the median of back-to-back
//! repetitions of the pair's ratio.
//!
//! A rank (`bench-rank`, started by `bench`) talks to its parent in lines: it prints `HANDLES <hex,...>`
//! (its listen handles), reads `PEER <hex,...>` (the other rank's), connects and accepts, registers its
//! buffers, prints `READY`, reads `GO`, runs every size, prints `SIZE <size> <bytes received> <seconds>`
//! per size and `DONE`.

use std::collections::VecDeque;
use std::ffi::c_int;
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use nccl_net_mrc::abi::NET_HANDLE_MAXSIZE;

use crate::plugin::{Plugin, Ptr};
use crate::proxy::{hex, unhex};

/// One rank's part of a bench run.
#[derive(Debug, Clone)]
pub struct RankOptions {
    /// 0 receives (and sends too when `both`), 1 sends (and receives too when `both`).
    pub rank: u32,
    /// Comms per direction.
    pub comms: usize,
    /// Both directions at once.
    pub both: bool,
    /// Message sizes, in order.
    pub sizes: Vec<usize>,
    /// Requests outstanding per comm (NCCL_STEPS is 8).
    pub depth: usize,
    /// Bytes per size per direction, over all comms.
    pub bytes: usize,
    /// Give up after this long.
    pub timeout: Duration,
    /// Fill every message with its own pattern and check every received byte (a test, not a measurement).
    pub verify: bool,
}

impl RankOptions {
    /// Messages each comm moves at `size`: its share of the budget, and at least four rounds of `depth`.
    pub fn messages(&self, size: usize) -> usize {
        (self.bytes / (size.max(1) * self.comms.max(1))).max(4 * self.depth)
    }

    fn receives(&self) -> bool {
        self.rank == 0 || self.both
    }
}

/// One comm's requests in flight, sends or receives.
struct Flow {
    /// Send comm `i` of one rank is receive comm `i` of the other (handles are used in order).
    index: usize,
    comm: Ptr,
    mh: Ptr,
    buf: Vec<u8>,
    send: bool,
    reqs: VecDeque<Ptr>,
    posted: usize,
    done: usize,
}

impl Flow {
    fn new(
        p: &Plugin,
        index: usize,
        comm: Ptr,
        send: bool,
        o: &RankOptions,
    ) -> Result<Self, String> {
        let max = o.sizes.iter().copied().max().unwrap_or(0);
        let mut buf = touched((max * o.depth).max(1));
        let mh = p
            .reg_mr(comm, buf.as_mut_ptr(), buf.len())
            .map_err(|c| format!("regMr: {c}"))?;
        Ok(Self {
            index,
            comm,
            mh,
            buf,
            send,
            reqs: VecDeque::new(),
            posted: 0,
            done: 0,
        })
    }

    /// Posts one request if the window allows and tests the oldest; whether anything moved.
    fn step(
        &mut self,
        p: &Plugin,
        size: usize,
        messages: usize,
        o: &RankOptions,
    ) -> Result<bool, String> {
        let mut moved = false;
        if self.posted < messages && self.posted - self.done < o.depth {
            let slot = (self.posted % o.depth) * size;
            if self.send && o.verify {
                let seed = self.seed(size, self.posted);
                fill(&mut self.buf[slot..slot + size], seed);
            }
            // SAFETY: slot `posted % depth` of `size` bytes lies inside `buf` (depth × the largest size).
            let at = unsafe { self.buf.as_mut_ptr().add(slot) };
            let r = if self.send {
                p.isend(self.comm, at, size, 0, self.mh)
            } else {
                p.irecv(self.comm, &[(at, size, 0 as c_int, self.mh)], false)
            }
            .map_err(|c| format!("{}: {c}", if self.send { "isend" } else { "irecv" }))?;
            if let Some(r) = r {
                self.reqs.push_back(r);
                self.posted += 1;
                moved = true;
            }
        }
        if let Some(&r) = self.reqs.front() {
            let mut sizes = [0 as c_int; 1];
            if p.test(r, &mut sizes).map_err(|c| format!("test: {c}"))? {
                if sizes[0] as usize != size {
                    return Err(format!(
                        "a request of {size} bytes completed with {}",
                        sizes[0]
                    ));
                }
                if !self.send && o.verify {
                    self.check(size, self.done % o.depth * size)?;
                }
                self.reqs.pop_front();
                self.done += 1;
                moved = true;
            }
        }
        Ok(moved)
    }

    /// Each message's pattern: its comm, size and number.
    fn seed(&self, size: usize, message: usize) -> u64 {
        (self.index as u64) << 48 ^ (size as u64) << 20 ^ message as u64
    }

    fn check(&self, size: usize, slot: usize) -> Result<(), String> {
        let mut want = vec![0u8; size];
        fill(&mut want, self.seed(size, self.done));
        match self.buf[slot..slot + size]
            .iter()
            .zip(&want)
            .position(|(a, b)| a != b)
        {
            None => Ok(()),
            Some(at) => Err(format!(
                "comm {} message {} of {size} B: byte {at} differs from what was sent",
                self.index, self.done
            )),
        }
    }
}

/// Message bytes from a 64-bit generator seeded per message, so a lost, repeated or misplaced message shows.
fn fill(buf: &mut [u8], seed: u64) {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    for chunk in buf.chunks_mut(8) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        chunk.copy_from_slice(&x.to_le_bytes()[..chunk.len()]);
    }
}

/// A zeroed buffer with every page mapped, so first-touch faults stay out of the measured time.
fn touched(len: usize) -> Vec<u8> {
    let mut v = vec![0u8; len];
    for page in v.chunks_mut(4096) {
        // SAFETY: `page[0]` is a valid, exclusively borrowed byte; volatile so the store is kept.
        unsafe { std::ptr::write_volatile(&mut page[0], 1) };
    }
    v
}

fn read_line(input: &mut impl BufRead, want: &str) -> Result<String, String> {
    let mut l = String::new();
    input
        .read_line(&mut l)
        .map_err(|e| format!("reading {want}: {e}"))?;
    l.trim()
        .strip_prefix(want)
        .map(|r| r.trim().to_string())
        .ok_or_else(|| format!("expected {want}, got {:?}", l.trim()))
}

fn handles(s: &str) -> Result<Vec<[u8; NET_HANDLE_MAXSIZE]>, String> {
    s.split(',').filter(|h| !h.is_empty()).map(unhex).collect()
}

/// One rank: sets up its comms as the module's description says, runs every size, closes.
pub fn rank(p: &Plugin, o: &RankOptions) -> Result<(), String> {
    let ctx = p
        .init(u64::from(o.rank) + 1)
        .map_err(|c| format!("init: {c}"))?;
    let mut out = std::io::stdout();
    let mut input = std::io::stdin().lock();
    let mut listens = Vec::new();
    let mut mine = Vec::new();
    for _ in 0..if o.receives() { o.comms } else { 0 } {
        let mut h = [0u8; NET_HANDLE_MAXSIZE];
        listens.push(
            p.listen(ctx, 0, &mut h)
                .map_err(|c| format!("listen: {c}"))?,
        );
        mine.push(hex(&h));
    }
    writeln!(out, "HANDLES {}", mine.join(",")).map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    let mut peer = handles(&read_line(&mut input, "PEER")?)?;
    let (sends, recvs) = connect_all(p, ctx, &listens, &mut peer, o.timeout)?;
    let mut flows = Vec::new();
    for (comms, send) in [(&recvs, false), (&sends, true)] {
        for (i, &c) in comms.iter().enumerate() {
            flows.push(Flow::new(p, i, c, send, o)?);
        }
    }
    writeln!(out, "READY").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    read_line(&mut input, "GO")?;
    for &size in &o.sizes {
        let (bytes, secs) = run_size(p, &mut flows, size, o)?;
        writeln!(out, "SIZE {size} {bytes} {secs:.6}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    for f in flows {
        p.dereg_mr(f.comm, f.mh)
            .map_err(|c| format!("deregMr: {c}"))?;
    }
    for c in sends {
        p.close_send(c).map_err(|e| format!("closeSend: {e}"))?;
    }
    for c in recvs {
        p.close_recv(c).map_err(|e| format!("closeRecv: {e}"))?;
    }
    for l in listens {
        p.close_listen(l).map_err(|e| format!("closeListen: {e}"))?;
    }
    p.finalize(ctx).map_err(|e| format!("finalize: {e}"))?;
    writeln!(out, "DONE").map_err(|e| e.to_string())?;
    Ok(())
}

/// Connects to every peer handle and accepts on every listen, never blocking on one (NCCL's pattern).
fn connect_all(
    p: &Plugin,
    ctx: Ptr,
    listens: &[Ptr],
    peer: &mut [[u8; NET_HANDLE_MAXSIZE]],
    timeout: Duration,
) -> Result<(Vec<Ptr>, Vec<Ptr>), String> {
    let mut sends: Vec<Option<Ptr>> = vec![None; peer.len()];
    let mut recvs: Vec<Option<Ptr>> = vec![None; listens.len()];
    let start = Instant::now();
    while sends.iter().chain(&recvs).any(Option::is_none) {
        if start.elapsed() > timeout {
            return Err(format!("connections not up within {timeout:?}"));
        }
        for (s, h) in sends.iter_mut().zip(peer.iter_mut()) {
            if s.is_none() {
                *s = p.connect(ctx, 0, h).map_err(|c| format!("connect: {c}"))?;
            }
        }
        for (r, &l) in recvs.iter_mut().zip(listens) {
            if r.is_none() {
                *r = p.accept(l).map_err(|c| format!("accept: {c}"))?;
            }
        }
        std::thread::sleep(Duration::from_micros(50));
    }
    Ok((
        sends.into_iter().flatten().collect(),
        recvs.into_iter().flatten().collect(),
    ))
}

/// Every flow moves its messages of `size`; returns the bytes received and the seconds from the first post to
/// the last receive completion (0 bytes on a rank that only sends).
fn run_size(
    p: &Plugin,
    flows: &mut [Flow],
    size: usize,
    o: &RankOptions,
) -> Result<(u64, f64), String> {
    let messages = o.messages(size);
    for f in flows.iter_mut() {
        f.posted = 0;
        f.done = 0;
    }
    let start = Instant::now();
    let mut last_recv = start;
    while flows.iter().any(|f| f.done < messages) {
        if start.elapsed() > o.timeout {
            return Err(format!("size {size}: not done within {:?}", o.timeout));
        }
        let mut moved = false;
        for f in flows.iter_mut() {
            let before = f.done;
            moved |= f.step(p, size, messages, o)?;
            if !f.send && f.done > before {
                last_recv = Instant::now();
            }
        }
        if !moved {
            // NCCL's proxy yields when a pass over its ops found nothing to do.
            std::thread::yield_now();
        }
    }
    let received = flows.iter().filter(|f| !f.send).count() * messages * size;
    Ok((received as u64, (last_recv - start).as_secs_f64()))
}

/// What `bench` compares.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Comm counts per direction to run.
    pub comms: Vec<usize>,
    /// One way, both ways, or both in turn.
    pub ways: Vec<bool>,
    /// Message sizes.
    pub sizes: Vec<usize>,
    /// Requests outstanding per comm.
    pub depth: usize,
    /// Bytes per size and direction.
    pub bytes: usize,
    /// Back-to-back repetitions.
    pub reps: usize,
    /// Loopback planes (`NCCL_MRC_PLANES`, mrc-perf `--planes`).
    pub planes: usize,
    /// The `mrc-perf` binary, or `None` to run the plugin alone.
    pub perf: Option<PathBuf>,
    /// Harness version flag to pass to the ranks.
    pub version: u32,
    /// The plugin library.
    pub lib: PathBuf,
    /// The ranks check every byte.
    pub verify: bool,
}

/// One configuration's figures: per size, the plugin's and mrc-perf's Gbit/s per repetition.
#[derive(Debug, Clone, Default)]
pub struct Figures {
    /// Per size, per repetition.
    pub plugin: Vec<Vec<f64>>,
    /// Per size, per repetition (empty without mrc-perf).
    pub perf: Vec<Vec<f64>>,
}

/// Runs every configuration `reps` times, the plugin and mrc-perf back to back, and prints the table.
pub fn bench(o: &BenchOptions) -> Result<(), String> {
    println!(
        "{:>5} {:>4} {:>10} {:>14} {:>14} {:>7}  per-repetition ratios",
        "comms", "ways", "size", "plugin Gbit/s", "mrc-perf", "ratio"
    );
    for &comms in &o.comms {
        for &both in &o.ways {
            let mut f = Figures {
                plugin: vec![Vec::new(); o.sizes.len()],
                perf: vec![Vec::new(); o.sizes.len()],
            };
            for _ in 0..o.reps {
                for (i, g) in plugin_pair(o, comms, both)?.into_iter().enumerate() {
                    f.plugin[i].push(g);
                }
                if let Some(perf) = &o.perf {
                    for (i, &size) in o.sizes.iter().enumerate() {
                        f.perf[i].push(perf_pair(perf, o, comms, both, size)?);
                    }
                }
            }
            print_rows(o, comms, both, &f);
        }
    }
    Ok(())
}

fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(f64::total_cmp);
    match s.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => s[n / 2],
        n => (s[n / 2 - 1] + s[n / 2]) / 2.0,
    }
}

fn print_rows(o: &BenchOptions, comms: usize, both: bool, f: &Figures) {
    for (i, &size) in o.sizes.iter().enumerate() {
        let ratios: Vec<f64> = f.plugin[i]
            .iter()
            .zip(&f.perf[i])
            .map(|(a, b)| a / b)
            .collect();
        let list: Vec<String> = ratios.iter().map(|r| format!("{r:.2}")).collect();
        println!(
            "{comms:>5} {:>4} {size:>10} {:>14.2} {:>14.2} {:>7.2}  {}",
            if both { "both" } else { "one" },
            median(&f.plugin[i]),
            median(&f.perf[i]),
            median(&ratios),
            list.join(" ")
        );
    }
}

struct RankProc {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    /// Relays the rank's stderr; joined at drop, so its last lines are out before the run's results.
    relay: Option<std::thread::JoinHandle<()>>,
}

impl RankProc {
    fn start(o: &BenchOptions, rank: u32, comms: usize, both: bool) -> Result<Self, String> {
        let exe = std::env::current_exe().map_err(|e| e.to_string())?;
        let sizes: Vec<String> = o.sizes.iter().map(usize::to_string).collect();
        let mut child = Command::new(exe)
            .args([
                "--lib",
                &o.lib.to_string_lossy(),
                "--version",
                &o.version.to_string(),
            ])
            .args([
                "bench-rank",
                "--rank",
                &rank.to_string(),
                "--comms",
                &comms.to_string(),
            ])
            .args(["--sizes", &sizes.join(","), "--depth", &o.depth.to_string()])
            .args(["--bytes", &o.bytes.to_string()])
            .args(if both { &["--both"][..] } else { &[][..] })
            .args(if o.verify { &["--verify"][..] } else { &[][..] })
            .env("NCCL_MRC_PLANES", o.planes.to_string())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("starting rank {rank}: {e}"))?;
        // The ranks' logs reach our stderr a whole line at a time, so two ranks' lines never interleave.
        let err = BufReader::new(child.stderr.take().ok_or("no stderr")?);
        let relay = std::thread::spawn(move || {
            for l in err.lines().map_while(Result::ok) {
                eprintln!("rank {rank}: {l}");
            }
        });
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(Self {
            child,
            stdin,
            stdout,
            relay: Some(relay),
        })
    }

    fn expect(&mut self, want: &str) -> Result<String, String> {
        read_line(&mut self.stdout, want)
    }

    fn say(&mut self, line: &str) -> Result<(), String> {
        writeln!(self.stdin, "{line}")
            .and_then(|()| self.stdin.flush())
            .map_err(|e| format!("telling a rank {line:?}: {e}"))
    }
}

impl Drop for RankProc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        // The pipe closed with the child: the relay ends once it has passed on what was left in it.
        if let Some(r) = self.relay.take() {
            let _ = r.join();
        }
    }
}

/// One run of the two ranks: Gbit/s per size, both directions summed (bytes over the longer rank's time).
fn plugin_pair(o: &BenchOptions, comms: usize, both: bool) -> Result<Vec<f64>, String> {
    let mut r = [
        RankProc::start(o, 0, comms, both)?,
        RankProc::start(o, 1, comms, both)?,
    ];
    let h0 = r[0].expect("HANDLES")?;
    let h1 = r[1].expect("HANDLES")?;
    r[0].say(&format!("PEER {h1}"))?;
    r[1].say(&format!("PEER {h0}"))?;
    for x in r.iter_mut() {
        x.expect("READY")?;
    }
    for x in r.iter_mut() {
        x.say("GO")?;
    }
    let mut out = Vec::new();
    for &size in &o.sizes {
        let (mut bytes, mut secs) = (0f64, 0f64);
        for x in r.iter_mut() {
            let line = x.expect("SIZE")?;
            let f: Vec<&str> = line.split_whitespace().collect();
            if f.len() != 3 || f[0] != size.to_string() {
                return Err(format!("a rank reported {line:?} for size {size}"));
            }
            bytes += f[1].parse::<f64>().map_err(|e| e.to_string())?;
            secs = secs.max(f[2].parse::<f64>().map_err(|e| e.to_string())?);
        }
        out.push(bytes * 8.0 / secs.max(1e-9) / 1e9);
    }
    for x in r.iter_mut() {
        x.expect("DONE")?;
    }
    Ok(out)
}

/// A free TCP port for mrc-perf's out-of-band exchange.
fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("[::1]:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("finding a free port: {e}"))
}

/// mrc-perf's equivalent of one configuration at one size: server and client with a progress thread each, one
/// QP per comm, `depth` in flight per QP over `depth` buffers, the same bytes. Returns the client's Gbit/s.
fn perf_pair(
    perf: &Path,
    o: &BenchOptions,
    comms: usize,
    both: bool,
    size: usize,
) -> Result<f64, String> {
    let port = free_port()?.to_string();
    let planes = o.planes.to_string();
    let mut server = Command::new(perf)
        .args([
            "--port",
            &port,
            "--planes",
            &planes,
            "--progress-thread",
            "--interval-ms",
            "0",
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .map_err(|e| format!("starting {}: {e}", perf.display()))?;
    let mut sout = BufReader::new(server.stdout.take().ok_or("no stdout")?);
    let mut l = String::new();
    sout.read_line(&mut l).map_err(|e| e.to_string())?;
    let out = Command::new(perf)
        .args([
            "::1",
            "--port",
            &port,
            "--planes",
            &planes,
            "--progress-thread",
            "--json",
        ])
        .args(["--qps", &comms.to_string(), "--size", &size.to_string()])
        .args(["--depth", &o.depth.to_string()])
        .args(["--cycle-buffer", &(size * o.depth).to_string()])
        .args(["--bytes", &o.bytes.to_string(), "--duration", "60"])
        .args(if both { &["--bidir"][..] } else { &[][..] })
        .output()
        .map_err(|e| format!("running {}: {e}", perf.display()))?;
    let _ = server.kill();
    let _ = server.wait();
    if !out.status.success() {
        return Err(format!(
            "mrc-perf failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).map_err(|e| format!("mrc-perf's report: {e}"))?;
    report["results"][0]["gbps"]
        .as_f64()
        .ok_or_else(|| format!("no results[0].gbps in mrc-perf's report: {report}"))
}
