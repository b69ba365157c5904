//! The client and server of `mrc-perf`.

use std::io::{self, Write as _};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use mrc::{Access, Completion, SendOp, Sge, WcStatus};
use mrc_host::{
    Blob, Cq, Host, HostConfig, Mr, NodeConfig, ProgressMode, Qp, QpSpec, QpTransition, SendRequest,
};

use super::oob::{
    Answer, Bidir, Channel, Ctl, Hello, WireRegion, conn_from_hex, conn_to_hex, hash,
    planes_from_wire, planes_to_wire,
};
pub use super::report::{DatapathLine, PlaneLine, Report, TransportLine};
use super::report::{Latency, ReportHead, SizeResult, finish_report, live_line, print_result};
pub use super::server::server;
use super::verify::{READ_TAG, Verifier};
use super::{Mode, Options, Test};

/// Largest region one side registers; `--cycle-buffer` is cut down to fit.
const MAX_REGION: u64 = 1 << 30;
/// How long the tail of a test may take to drain before the run is declared stuck.
const DRAIN_LIMIT: Duration = Duration::from_secs(15);

/// A failed run: what to print and the exit code.
#[derive(Debug)]
pub struct Failure {
    /// Message for stderr.
    pub msg: String,
    /// 1: the test failed (error completion, bad data, peer gone); 2: bad usage or configuration.
    pub code: i32,
}

impl Failure {
    pub(super) fn test(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            code: 1,
        }
    }
    pub(super) fn usage(msg: impl Into<String>) -> Self {
        Self {
            msg: msg.into(),
            code: 2,
        }
    }
}

impl From<io::Error> for Failure {
    fn from(e: io::Error) -> Self {
        Failure::test(e.to_string())
    }
}

impl From<mrc_host::HostError> for Failure {
    fn from(e: mrc_host::HostError) -> Self {
        Failure::test(e.to_string())
    }
}

/// One side's resources, on the host layer (which owns the sockets, the engine and the progress loop).
pub(super) struct Side {
    pub(super) host: Host,
    pub(super) cq: Cq,
    pub(super) qps: Vec<Qp>,
    pub(super) qpns: Vec<u32>,
    pub(super) region: Mr,
    pub(super) slots: usize,
    pub(super) max_size: u64,
    /// Per QP, messages of the largest size posted (slot k took message k).
    pub(super) written: Vec<usize>,
    /// `--verify` (client): checks every message as it completes.
    pub(super) verifier: Option<Verifier>,
}

impl Side {
    pub(super) fn q_of(&self, qpn: u32) -> Option<usize> {
        self.qpns.iter().position(|&x| x == qpn)
    }

    /// Makes progress (poll mode: one round, sleeping up to `idle` when there was nothing to do); with a
    /// progress thread, only yields.
    pub(super) fn step(&self, idle: Duration) -> io::Result<()> {
        self.host.progress_wait(idle).map_err(io::Error::other)
    }
}

pub(super) fn node_config(o: &Options) -> Result<NodeConfig, Failure> {
    match &o.config {
        Some(p) => NodeConfig::load(p)
            .map_err(|e| Failure::usage(format!("--config {}: {e}", p.display()))),
        None => Ok(NodeConfig::loopback(o.planes)),
    }
}

fn default_mtu(o: &Options, node: &NodeConfig) -> u32 {
    match (o.mtu, o.link_mtu) {
        (Some(m), _) => m,
        (None, Some(link)) => mrc_host::pmtu::payload_for_link(link),
        (None, None) => mrc_host::pmtu::payload_mtu(node),
    }
}

/// Builds the endpoint, QPs and memory. `peer` is the other side's hello when known (server).
pub(super) fn setup(o: &Options, hello: &HelloParams) -> Result<Side, Failure> {
    let node = node_config(o)?;
    let mut cfg = HostConfig::loopback(1);
    cfg.node = node;
    cfg.progress = if o.progress_thread {
        ProgressMode::Thread
    } else {
        ProgressMode::Manual
    };
    cfg.profile.mtu = hello.mtu;
    cfg.profile.evs_per_plane = hello.evs;
    cfg.profile.window_packets = o.window;
    cfg.profile.rate_bps = o.rate_gbps.map(|g| g * 1_000_000_000);
    cfg.profile.icrc = hello.icrc;
    let host = Host::start(cfg).map_err(|e| Failure::usage(e.to_string()))?;
    let pd = host.alloc_pd()?;
    // Room for every completion that can be outstanding: sends in flight (`--depth`), receives posted (up to
    // 1024 or one per slot) and a margin; an overrun would fail the queue and its QPs, as in verbs.
    let per_qp = o.depth.max(hello.slots) + hello.slots.max(1024) + 64;
    let cq = host.create_cq((hello.qps * per_qp + 64) as u32)?;
    let mut qps = Vec::new();
    for _ in 0..hello.qps {
        let mut spec = QpSpec::new(pd, &cq);
        spec.max_send_wr = 4096;
        spec.max_recv_wr = 4096;
        let qp = host
            .create_qp(spec)
            .map_err(|e| Failure::usage(e.to_string()))?;
        // REMOTE_READ: a verifying client reads every message back from the server's memory.
        qp.modify(QpTransition::Init {
            access: Access::REMOTE_WRITE | Access::REMOTE_READ,
        })?;
        qps.push(qp);
    }
    let len = hello.qps as u64 * hello.slots as u64 * hello.max_size;
    let region = host
        .alloc_buffer(
            pd,
            len as usize,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE | Access::REMOTE_READ,
        )
        .map_err(|e| Failure::usage(e.to_string()))?;
    // A pattern that differs per byte and per side, so misplaced data cannot hash right by accident.
    let pattern: Vec<u8> = (0..len as usize)
        .map(|i| (i as u32).wrapping_mul(2_654_435_761).rotate_right(13) as u8 ^ hello.seed)
        .collect();
    host.write_buffer(&region, 0, &pattern)?;
    let verifier = if o.verify {
        let check = host
            .alloc_buffer(pd, len as usize, Access::LOCAL_WRITE)
            .map_err(|e| Failure::usage(e.to_string()))?;
        Some(Verifier::new(check, hello.qps, hello.slots, hello.max_size))
    } else {
        None
    };
    Ok(Side {
        host,
        cq,
        qpns: qps.iter().map(Qp::qpn).collect(),
        qps,
        region,
        slots: hello.slots,
        max_size: hello.max_size,
        written: vec![0; hello.qps],
        verifier,
    })
}

pub(super) struct HelloParams {
    pub(super) qps: usize,
    pub(super) slots: usize,
    pub(super) max_size: u64,
    pub(super) mtu: u32,
    pub(super) icrc: bool,
    pub(super) evs: u16,
    pub(super) seed: u8,
}

pub(super) fn hello_of(
    side: &mut Side,
    o: &Options,
    p: &HelloParams,
    test: Test,
    mode: Mode,
) -> Hello {
    let planes = planes_to_wire(&side.host.local_planes());
    Hello {
        test,
        mode,
        qps: p.qps,
        max_size: p.max_size,
        slots: p.slots,
        mtu: p.mtu,
        icrc: p.icrc,
        evs: o.evs,
        planes,
        conn: side.qps.iter().map(|q| conn_to_hex(&q.blob())).collect(),
        region: WireRegion {
            addr: side.region.addr,
            rkey: side.region.rkey,
            len: p.qps as u64 * p.slots as u64 * p.max_size,
        },
        bidir: o.bidir.then_some(Bidir {
            depth: o.depth,
            duration: o.duration,
            bytes: o.bytes,
        }),
    }
}

pub(super) fn connect(side: &mut Side, peer: &Hello) -> Result<(), Failure> {
    if peer.conn.len() != side.qps.len() {
        return Err(Failure::test("the peer created a different number of QPs"));
    }
    let planes = planes_from_wire(&peer.planes)?;
    let remote: Vec<Blob> = peer
        .conn
        .iter()
        .map(|c| conn_from_hex(c))
        .collect::<Result<_, _>>()?;
    // The hello carried the peer's planes: no in-band resolution needed.
    side.host
        .learn_peer(&planes)
        .map_err(|e| Failure::usage(e.to_string()))?;
    for (q, r) in side.qps.iter().zip(&remote) {
        q.connect(r)
            .map_err(|e| Failure::test(format!("connecting QP {:#x}: {e}", q.qpn())))?;
    }
    Ok(())
}

/// Posts one message of `size` on QP `q` from slot `k` to the peer's slot `k`.
#[allow(
    clippy::too_many_arguments,
    reason = "one call site per role; a struct would only rename them"
)]
pub(super) fn post(
    qp: &Qp,
    side_region: (u64, u32, usize, u64),
    q: usize,
    k: usize,
    test: Test,
    size: u64,
    remote: &WireRegion,
    wr_id: u64,
) -> Result<(), Failure> {
    let (region, lkey, slots, max_size) = side_region;
    let off = ((q * slots + k % slots) as u64) * max_size;
    let sge = [Sge {
        addr: region + off,
        len: size as u32,
        lkey,
    }];
    let op = match test {
        Test::Write => SendOp::Write {
            remote_addr: remote.addr + off,
            rkey: remote.rkey,
        },
        Test::WriteImm => SendOp::WriteImm {
            remote_addr: remote.addr + off,
            rkey: remote.rkey,
            imm: wr_id as u32,
        },
        Test::Send => SendOp::Send { imm: None },
    };
    let wr = SendRequest {
        wr_id,
        op,
        sges: &sge,
        inline: None,
        signaled: true,
        solicited: false,
        fence: false,
    };
    qp.post_send(&wr)
        .map_err(|e| Failure::test(format!("post_send: {e}")))
}

/// Posts a receive on QP `q` into slot `k` (SEND needs a buffer; WRITE_WITH_IMM only the work request).
pub(super) fn post_recv(
    qp: &Qp,
    side: (u64, u32, usize, u64),
    q: usize,
    k: usize,
    test: Test,
) -> Result<(), Failure> {
    let (region, lkey, slots, max_size) = side;
    let sge = [Sge {
        addr: region + ((q * slots + k % slots) as u64) * max_size,
        len: max_size as u32,
        lkey,
    }];
    qp.post_recv(k as u64, if test == Test::Send { &sge } else { &[] })
        .map_err(|e| Failure::test(format!("post_recv: {e}")))
}

pub(super) fn params(
    o: &Options,
    node: &NodeConfig,
    test: Test,
    mode: Mode,
    qps: usize,
    max_size: u64,
    evs: u16,
) -> HelloParams {
    // A verifying client checks each message before its slot is reused: a slot per message in flight.
    let per_qp = if o.verify {
        o.depth as u64 * max_size
    } else {
        o.cycle_buffer
    };
    let slots = if mode == Mode::Lat {
        1
    } else {
        (per_qp / max_size)
            .min(MAX_REGION / (qps as u64 * max_size))
            .clamp(1, o.depth as u64) as usize
    };
    let _ = test;
    HelloParams {
        qps,
        slots,
        max_size,
        mtu: default_mtu(o, node),
        icrc: !o.no_icrc,
        evs,
        seed: 0,
    }
}

/// Runs the client: connects, tests every size, prints the report. Returns the report.
pub fn client(o: &Options, server: &str) -> Result<Report, Failure> {
    o.validate().map_err(Failure::usage)?;
    let node = node_config(o)?;
    let sizes = o.sizes();
    let max_size = *sizes.iter().max().unwrap_or(&o.size);
    let p = params(o, &node, o.test, o.mode, o.qps, max_size, o.evs);
    let addr = (server, o.port)
        .to_socket_addrs()
        .map_err(|e| Failure::usage(format!("server {server:?}: {e}")))?
        .next()
        .ok_or_else(|| Failure::usage(format!("server {server:?}: no address")))?;
    let stream = TcpStream::connect_timeout(&addr, Duration::from_secs(10))
        .map_err(|e| Failure::test(format!("connecting to {addr}: {e}")))?;
    let mut ch = Channel::new(stream)?;
    let mut side = setup(o, &p)?;
    ch.send(&hello_of(&mut side, o, &p, o.test, o.mode))?;
    let peer = match ch.recv::<Answer>()? {
        Answer::Refused { refused } => {
            return Err(Failure::usage(format!(
                "the server refused the test: {refused}"
            )));
        }
        Answer::Hello(h) => *h,
    };
    let planes = side.host.local().planes.len();
    peer.check(planes)
        .map_err(|e| Failure::test(format!("the server's hello: {e}")))?;
    if (peer.qps, peer.slots, peer.max_size) != (p.qps, p.slots, p.max_size) {
        return Err(Failure::test(format!(
            "the server answered for {} QPs × {} slots × {} B, not the {} × {} × {} asked for",
            peer.qps, peer.slots, peer.max_size, p.qps, p.slots, p.max_size
        )));
    }
    connect(&mut side, &peer)?;
    let mut timeline = match &o.timeline {
        Some(path) => Some(
            std::fs::File::create(path).map_err(|e| Failure::usage(format!("--timeline: {e}")))?,
        ),
        None => None,
    };
    if let Some(f) = timeline.as_mut() {
        writeln!(f, "t_ms,gbps,unix_ms")?;
    }
    let mut results = Vec::new();
    let t0 = Instant::now();
    for &size in &sizes {
        ch.send(&Ctl::Size { size })?;
        let mut r = match o.mode {
            Mode::Bw => bw(o, &mut side, &peer.region, size, t0, timeline.as_mut())?,
            Mode::Lat => lat(o, &mut side, &peer.region, size)?,
        };
        if o.bidir {
            add_server_half(&mut ch, &mut r)?;
        }
        if !o.json {
            print_result(o, &r);
        }
        results.push(r);
    }
    // The server's region must now hold, in every slot the largest size wrote, exactly our source bytes.
    let slots: Vec<usize> = side.written.iter().map(|&n| n.min(side.slots)).collect();
    ch.send(&Ctl::Done {
        verify: o.verify,
        slots: slots.clone(),
        len: max_size,
    })?;
    let verified = if o.verify {
        let hashes = match ch.recv()? {
            Ctl::Hash { hashes } => hashes,
            Ctl::Refused { reason } => {
                return Err(Failure::test(format!("the server refused: {reason}")));
            }
            _ => return Err(Failure::test("expected the server's hashes")),
        };
        Some(hash_slots(&mut side, &slots, max_size) == hashes)
    } else {
        None
    };
    let head = ReportHead {
        role: "client",
        test: o.test,
        mode: o.mode,
        qps: o.qps,
        mtu: p.mtu,
    };
    let report = finish_report(&mut side, head, o, results, verified)?;
    if verified == Some(false) {
        return Err(Failure::test(
            "verification FAILED: the server's memory differs from what was sent",
        ));
    }
    Ok(report)
}

/// `--bidir`: adds what the server sent during the same size; the rate is over the longer of the two halves.
fn add_server_half(ch: &mut Channel, r: &mut SizeResult) -> Result<(), Failure> {
    let (bytes, seconds) = match ch.recv()? {
        Ctl::Sent { bytes, seconds } => (bytes, seconds),
        Ctl::Refused { reason } => {
            return Err(Failure::test(format!("the server refused: {reason}")));
        }
        _ => return Err(Failure::test("expected what the server sent")),
    };
    r.messages += bytes / r.size.max(1);
    r.bytes += bytes;
    r.seconds = r.seconds.max(seconds).max(1e-9);
    r.gbps = r.bytes as f64 * 8.0 / r.seconds / 1e9;
    r.mmsgs = r.messages as f64 / r.seconds / 1e6;
    Ok(())
}

/// Hashes, per QP, the first `len` bytes of its first `slots[q]` slots.
pub(super) fn hash_slots(side: &mut Side, slots_written: &[usize], len: u64) -> Vec<u64> {
    let (slots, max_size) = (side.slots, side.max_size as usize);
    let total = side.region.len;
    let mut buf = vec![0u8; len as usize];
    slots_written
        .iter()
        .enumerate()
        .map(|(q, &used)| {
            let mut h = Vec::new();
            for k in 0..used.min(slots) {
                let off = ((q * slots + k) * max_size).min(total);
                let end = (off + len as usize).min(total);
                let b = &mut buf[..end - off];
                if side.host.read_buffer(&side.region, off, b).is_err() {
                    b.fill(0);
                }
                h.push(hash(b));
            }
            hash(&h.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<_>>())
        })
        .collect()
}

pub(super) fn bw(
    o: &Options,
    side: &mut Side,
    remote: &WireRegion,
    size: u64,
    t0: Instant,
    mut timeline: Option<&mut std::fs::File>,
) -> Result<SizeResult, Failure> {
    let nq = side.qps.len();
    let mut in_flight = vec![0usize; nq];
    let mut next = vec![0usize; nq];
    let mut done_msgs = 0u64;
    let mut done_bytes = 0u64;
    let start = Instant::now();
    let mut last_done = start;
    let interval = Duration::from_millis(o.interval_ms.max(1));
    let mut next_line = start + interval;
    let mut bin_bytes = 0u64;
    let mut stopping = false;
    let mut wc = vec![Completion::default(); 256];
    let region = (
        side.region.addr,
        side.region.lkey,
        side.slots,
        side.max_size,
    );
    let mut posted_bytes = 0u64;
    loop {
        let now = Instant::now();
        if !stopping
            && (now.duration_since(start).as_secs_f64() >= o.duration
                || o.bytes.is_some_and(|b| posted_bytes >= b))
        {
            stopping = true;
        }
        if !stopping {
            for q in 0..nq {
                while in_flight[q] < o.depth && o.bytes.is_none_or(|b| posted_bytes < b) {
                    let k = next[q];
                    if let Some(v) = side.verifier.as_mut() {
                        if !v.slot_free(q, k as u64) {
                            break;
                        }
                        v.prepare(&side.host, &side.region, q, k as u64, size)?;
                    }
                    post(&side.qps[q], region, q, k, o.test, size, remote, k as u64)?;
                    next[q] += 1;
                    in_flight[q] += 1;
                    posted_bytes += size;
                }
            }
        }
        let n = side.cq.poll(&mut wc);
        for c in &wc[..n] {
            if c.status != WcStatus::Success {
                return Err(Failure::test(format!(
                    "error completion {:?} on QP {:#x} (wr {}): the peer is gone or refused the access",
                    c.status, c.qpn, c.wr_id
                )));
            }
            let q = side.q_of(c.qpn);
            if let (Some(v), Some(q)) = (side.verifier.as_mut(), q) {
                if c.wr_id & READ_TAG != 0 {
                    v.read_back(&side.host, q, c.wr_id, size)?;
                    continue;
                }
                v.sent(&side.qps[q], remote, q, c.wr_id, size)?;
            }
            if let Some(q) = q {
                in_flight[q] = in_flight[q].saturating_sub(1);
            }
            done_msgs += 1;
            done_bytes += size;
            bin_bytes += size;
            last_done = Instant::now();
        }
        if stopping
            && in_flight.iter().all(|&x| x == 0)
            && side.verifier.as_ref().is_none_or(Verifier::idle)
        {
            break;
        }
        if stopping
            && now.duration_since(start).as_secs_f64() > o.duration + DRAIN_LIMIT.as_secs_f64()
        {
            return Err(Failure::test(format!(
                "stuck: {} messages still in flight {} s after the end",
                in_flight.iter().sum::<usize>(),
                DRAIN_LIMIT.as_secs()
            )));
        }
        if now >= next_line {
            let secs = interval.as_secs_f64();
            let gbps = bin_bytes as f64 * 8.0 / secs / 1e9;
            if let Some(f) = timeline.as_mut() {
                // Wall-clock time too, so a script can line the bins up with faults it applied.
                let unix_ms = std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64() * 1e3);
                writeln!(
                    f,
                    "{:.3},{gbps:.3},{unix_ms:.3}",
                    (now - t0).as_secs_f64() * 1e3
                )?;
            }
            if o.interval_ms > 0 && !o.json {
                let line = side.host.inspect(|ep| live_line(ep, &side.qpns));
                println!(
                    "[{:7.2}s] size {size:>8}  {gbps:8.2} Gbit/s  {line}",
                    (now - start).as_secs_f64()
                );
            }
            bin_bytes = 0;
            next_line += interval;
        }
        side.step(Duration::from_millis(1))?;
    }
    if size == side.max_size {
        side.written = next;
    }
    let seconds = last_done.duration_since(start).as_secs_f64().max(1e-9);
    Ok(SizeResult {
        size,
        messages: done_msgs,
        bytes: done_bytes,
        seconds,
        gbps: done_bytes as f64 * 8.0 / seconds / 1e9,
        mmsgs: done_msgs as f64 / seconds / 1e6,
        lat_us: None,
    })
}

fn lat(
    o: &Options,
    side: &mut Side,
    remote: &WireRegion,
    size: u64,
) -> Result<SizeResult, Failure> {
    let test = if o.test == Test::Write {
        // MRC places packets out of order, so the last byte of a WRITE arriving says nothing about the rest:
        // latency uses the immediate's receive completion as the arrival signal.
        Test::WriteImm
    } else {
        o.test
    };
    let region = (
        side.region.addr,
        side.region.lkey,
        side.slots,
        side.max_size,
    );
    let qp = side.qps[0].clone();
    let mut samples = Vec::new();
    let start = Instant::now();
    let mut wc = vec![Completion::default(); 16];
    let mut iter = 0u64;
    while start.elapsed().as_secs_f64() < o.duration && samples.len() < 1_000_000 {
        let t = Instant::now();
        post_recv(&qp, region, 0, 0, test)?;
        post(&qp, region, 0, 0, test, size, remote, iter)?;
        iter += 1;
        let mut got = false;
        while !got {
            let n = side.cq.poll(&mut wc);
            for c in &wc[..n] {
                if c.status != WcStatus::Success {
                    return Err(Failure::test(format!("error completion {:?}", c.status)));
                }
                if matches!(
                    c.opcode,
                    mrc::WcOpcode::Recv | mrc::WcOpcode::RecvRdmaWithImm
                ) {
                    got = true;
                }
            }
            if t.elapsed() > DRAIN_LIMIT {
                return Err(Failure::test("no answer from the server"));
            }
            if !got {
                side.step(Duration::ZERO)?;
            }
        }
        samples.push(t.elapsed().as_nanos() as f64 / 2000.0);
    }
    let seconds = start.elapsed().as_secs_f64();
    let mut s = samples.clone();
    s.sort_by(f64::total_cmp);
    let pct = |p: f64| {
        s.get(((s.len() as f64 - 1.0) * p).round() as usize)
            .copied()
            .unwrap_or(0.0)
    };
    Ok(SizeResult {
        size,
        messages: samples.len() as u64,
        bytes: samples.len() as u64 * size,
        seconds,
        gbps: samples.len() as f64 * size as f64 * 8.0 / seconds / 1e9,
        mmsgs: samples.len() as f64 / seconds / 1e6,
        lat_us: Some(Latency {
            samples: s.len(),
            min: pct(0.0),
            p50: pct(0.5),
            p99: pct(0.99),
            p999: pct(0.999),
            max: pct(1.0),
            avg: s.iter().sum::<f64>() / s.len().max(1) as f64,
        }),
    })
}
