//! The client and server of `mrc-perf`.

use std::io::{self, Write as _};
use std::net::{TcpListener, TcpStream, ToSocketAddrs};
use std::time::{Duration, Instant};

use mrc::{Access, Completion, EvState, SendOp, Sge, WcStatus};
use mrc_host::{
    Blob, Cq, Host, HostConfig, Mr, NodeConfig, ProgressMode, Qp, QpSpec, QpTransition,
    SendRequest, UdpEndpoint,
};
use serde::Serialize;

use super::oob::{
    Answer, Bidir, Channel, Ctl, Hello, WireRegion, conn_from_hex, conn_to_hex, hash,
    planes_from_wire, planes_to_wire,
};
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
    fn usage(msg: impl Into<String>) -> Self {
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
struct Side {
    host: Host,
    cq: Cq,
    qps: Vec<Qp>,
    qpns: Vec<u32>,
    region: Mr,
    slots: usize,
    max_size: u64,
    /// Per QP, messages of the largest size posted (slot k took message k).
    written: Vec<usize>,
    /// `--verify` (client): checks every message as it completes.
    verifier: Option<Verifier>,
}

impl Side {
    fn q_of(&self, qpn: u32) -> Option<usize> {
        self.qpns.iter().position(|&x| x == qpn)
    }

    /// Makes progress (poll mode: one round, sleeping up to `idle` when there was nothing to do); with a
    /// progress thread, only yields.
    fn step(&self, idle: Duration) -> io::Result<()> {
        self.host.progress_wait(idle).map_err(io::Error::other)
    }
}

fn node_config(o: &Options) -> Result<NodeConfig, Failure> {
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
fn setup(o: &Options, hello: &HelloParams) -> Result<Side, Failure> {
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

struct HelloParams {
    qps: usize,
    slots: usize,
    max_size: u64,
    mtu: u32,
    icrc: bool,
    evs: u16,
    seed: u8,
}

fn hello_of(side: &mut Side, o: &Options, p: &HelloParams, test: Test, mode: Mode) -> Hello {
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

fn connect(side: &mut Side, peer: &Hello) -> Result<(), Failure> {
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
fn post(
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
fn post_recv(
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

/// Per-size result.
#[derive(Debug, Clone, Serialize)]
pub struct SizeResult {
    /// Message size.
    pub size: u64,
    /// Messages completed.
    pub messages: u64,
    /// Payload bytes completed.
    pub bytes: u64,
    /// Seconds measured.
    pub seconds: f64,
    /// Goodput.
    pub gbps: f64,
    /// Messages per second, millions.
    pub mmsgs: f64,
    /// Latency (round trip / 2) percentiles in µs (latency mode).
    pub lat_us: Option<Latency>,
}

/// Latency percentiles, µs.
#[derive(Debug, Clone, Serialize)]
pub struct Latency {
    /// Samples.
    pub samples: usize,
    /// Minimum.
    pub min: f64,
    /// Median.
    pub p50: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 99.9th percentile.
    pub p999: f64,
    /// Maximum.
    pub max: f64,
    /// Mean.
    pub avg: f64,
}

/// Per-plane counters summed over the QPs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct PlaneLine {
    /// Plane.
    pub plane: usize,
    /// Data packets sent.
    pub packets: u64,
    /// Data bytes sent.
    pub bytes: u64,
    /// Retransmissions.
    pub retransmits: u64,
    /// Trim NACKs.
    pub trims: u64,
    /// Losses detected.
    pub losses: u64,
    /// Times the whole plane was retired.
    pub plane_retirements: u32,
    /// EVs GOOD / SKIP / ASSUMED_BAD / DENIED now.
    pub ev_good: usize,
    /// EVs in SKIP.
    pub ev_skip: usize,
    /// EVs ASSUMED_BAD.
    pub ev_bad: usize,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// "client" or "server".
    pub role: &'static str,
    /// The verb.
    pub test: Test,
    /// Bandwidth or latency.
    pub mode: Mode,
    /// Planes.
    pub planes: usize,
    /// QPs.
    pub qps: usize,
    /// MRC MTU.
    pub mtu: u32,
    /// Driven by a progress thread.
    pub progress_thread: bool,
    /// One entry per message size.
    pub results: Vec<SizeResult>,
    /// Per plane.
    pub per_plane: Vec<PlaneLine>,
    /// Socket-layer counters.
    pub datapath: DatapathLine,
    /// Transport counters summed over the QPs.
    pub transport: TransportLine,
    /// `Some(true)` when `--verify` matched: every message read back intact from the server as it completed,
    /// and the server's slots at the end.
    pub verified: Option<bool>,
    /// `--verify`: the messages read back and checked one by one.
    pub verified_messages: Option<u64>,
}

/// Transport counters for the report, summed over the QPs.
#[derive(Debug, Clone, Default, Serialize)]
pub struct TransportLine {
    /// Data packets sent (first transmissions and retransmissions).
    pub tx_data_packets: u64,
    /// Retransmissions.
    pub tx_retransmits: u64,
    /// Probes sent.
    pub tx_probes: u64,
    /// SACKs sent.
    pub tx_sacks: u64,
    /// Data packets received.
    pub rx_data_packets: u64,
    /// Duplicates received (a retransmission whose original arrived: a spurious loss).
    pub rx_duplicates: u64,
    /// Trim NACKs received.
    pub rx_trim_nacks: u64,
    /// Packets declared lost by time (a reorder window behind a later acknowledged one).
    pub losses_rack: u64,
    /// Packets declared lost by retransmission timeout.
    pub losses_rto: u64,
    /// Packets presumed lost because their plane was retired for silence.
    pub losses_plane: u64,
}

fn transport_line(ep: &UdpEndpoint, qps: &[u32]) -> TransportLine {
    let mut t = TransportLine::default();
    for s in qps.iter().filter_map(|&q| ep.endpoint_ref().qp_stats(q)) {
        t.tx_data_packets += s.tx_data_packets;
        t.tx_retransmits += s.tx_retransmits;
        t.tx_probes += s.tx_probes;
        t.tx_sacks += s.tx_sacks;
        t.rx_data_packets += s.rx_data_packets;
        t.rx_duplicates += s.rx_duplicates;
        t.rx_trim_nacks += s.rx_trim_nacks;
        t.losses_rack += s.losses_rack;
        t.losses_rto += s.losses_rto;
        t.losses_plane += s.losses_plane;
    }
    t
}

/// Socket-layer counters for the report.
#[derive(Debug, Clone, Serialize)]
pub struct DatapathLine {
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// Datagrams received.
    pub rx_datagrams: u64,
    /// Send errors.
    pub tx_errors: u64,
    /// Trimmed datagrams received.
    pub rx_trimmed: u64,
    /// Paths retired by ICMP or send errors.
    pub unreachable: u64,
    /// Datagrams dropped as malformed, oversized, spoofed, from a stranger's address or for no QP.
    pub rx_dropped: u64,
    /// Of those, the datagrams from an address that belongs to no peer (the engine never saw them).
    pub rx_unknown_source: u64,
    /// Of those, the datagrams from a peer's address that the engine parsed, counted and dropped.
    pub rx_engine_dropped: u64,
}

fn plane_lines(ep: &UdpEndpoint, qps: &[u32]) -> Vec<PlaneLine> {
    let planes = ep.node().plane_count();
    let mut out: Vec<PlaneLine> = (0..planes)
        .map(|plane| PlaneLine {
            plane,
            ..PlaneLine::default()
        })
        .collect();
    for &q in qps {
        for (p, line) in out.iter_mut().enumerate() {
            if let Some(s) = ep.endpoint_ref().plane_stats(q, p) {
                line.packets += s.tx_packets;
                line.bytes += s.tx_bytes;
                line.retransmits += s.retransmits;
                line.trims += s.trims;
                line.losses += s.losses;
                line.plane_retirements += s.plane_retirements;
            }
        }
        for e in ep.endpoint_ref().ev_infos(q) {
            if let Some(line) = out.get_mut(usize::from(e.plane)) {
                match e.state {
                    EvState::Good => line.ev_good += 1,
                    EvState::Skip => line.ev_skip += 1,
                    EvState::AssumedBad => line.ev_bad += 1,
                    // Denied, and states a later engine may add, count in none of the three.
                    _ => {}
                }
            }
        }
    }
    out
}

fn datapath_line(ep: &UdpEndpoint) -> DatapathLine {
    let s = ep.stats();
    let e = ep.endpoint_ref().stats();
    let engine_dropped = e.rx_truncated
        + e.rx_bad_version
        + e.rx_unknown_opcode
        + e.rx_bad_icrc
        + e.rx_unknown_qp
        + e.rx_bad_pkey
        + e.rx_wrong_peer
        + e.rx_bad_auth
        + e.rx_bad_port_status
        + e.rx_malformed;
    DatapathLine {
        tx_datagrams: s.tx_datagrams,
        rx_datagrams: s.rx_datagrams,
        tx_errors: s.tx_errors,
        rx_trimmed: s.rx_trimmed,
        unreachable: s.unreachable,
        rx_dropped: s.rx_unknown_source + s.rx_oversize + engine_dropped,
        rx_unknown_source: s.rx_unknown_source,
        rx_engine_dropped: engine_dropped,
    }
}

fn params(
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
fn hash_slots(side: &mut Side, slots_written: &[usize], len: u64) -> Vec<u64> {
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

fn bw(
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

fn live_line(ep: &UdpEndpoint, qps: &[u32]) -> String {
    let lines = plane_lines(ep, qps);
    let retx: u64 = lines.iter().map(|l| l.retransmits).sum();
    let trims: u64 = lines.iter().map(|l| l.trims).sum();
    let evs: Vec<String> = lines
        .iter()
        .map(|l| format!("{}/{}/{}", l.ev_good, l.ev_skip, l.ev_bad))
        .collect();
    format!(
        "retx {retx}  trims {trims}  EVs good/skip/bad per plane {}",
        evs.join(" ")
    )
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

/// What a report says about the run, beyond the counters.
struct ReportHead {
    role: &'static str,
    test: Test,
    mode: Mode,
    qps: usize,
    mtu: u32,
}

/// Gathers the counters into a report and prints it (JSON or text).
fn finish_report(
    side: &mut Side,
    h: ReportHead,
    o: &Options,
    results: Vec<SizeResult>,
    verified: Option<bool>,
) -> Result<Report, Failure> {
    let qps = side.qpns.clone();
    let report = side.host.inspect(|ep| Report {
        role: h.role,
        test: h.test,
        mode: h.mode,
        planes: ep.node().plane_count(),
        qps: h.qps,
        mtu: h.mtu,
        progress_thread: o.progress_thread,
        results,
        per_plane: plane_lines(ep, &qps),
        datapath: datapath_line(ep),
        transport: transport_line(ep, &qps),
        verified,
        verified_messages: side.verifier.as_ref().map(|v| v.checked),
    });
    if o.json {
        println!(
            "{}",
            serde_json::to_string_pretty(&report).map_err(io::Error::other)?
        );
    } else {
        print_planes(&report);
    }
    Ok(report)
}

fn print_result(o: &Options, r: &SizeResult) {
    match &r.lat_us {
        None => println!(
            "size {:>8} B  {:>10} msgs  {:8.3} Gbit/s  {:8.4} Mmsg/s  ({:?} bw, {} QPs)",
            r.size, r.messages, r.gbps, r.mmsgs, o.test, o.qps
        ),
        Some(l) => println!(
            "size {:>8} B  {:>8} samples  latency us: min {:.2}  p50 {:.2}  p99 {:.2}  p99.9 {:.2}  max {:.2}",
            r.size, l.samples, l.min, l.p50, l.p99, l.p999, l.max
        ),
    }
}

fn print_planes(r: &Report) {
    let t = &r.transport;
    if t.tx_data_packets == 0 {
        // The target of WRITEs sends no data: its sending table would be all zeros.
        println!(
            "planes: {} sent no data ({} data packets received); the per-plane table is the sender's",
            r.role, t.rx_data_packets
        );
    } else {
        print_plane_table(r);
    }
    print_totals(r);
}

fn print_plane_table(r: &Report) {
    println!("plane   packets        MiB   retx  trims  losses  retired  EVs good/skip/bad");
    for l in &r.per_plane {
        println!(
            "{:>5} {:>9} {:>10.1} {:>6} {:>6} {:>7} {:>8}  {}/{}/{}",
            l.plane,
            l.packets,
            l.bytes as f64 / 1048576.0,
            l.retransmits,
            l.trims,
            l.losses,
            l.plane_retirements,
            l.ev_good,
            l.ev_skip,
            l.ev_bad
        );
    }
}

fn print_totals(r: &Report) {
    let d = &r.datapath;
    println!(
        "datapath: {} datagrams out, {} in, {} send errors, {} trimmed in, {} paths retired by ICMP, {} dropped",
        d.tx_datagrams, d.rx_datagrams, d.tx_errors, d.rx_trimmed, d.unreachable, d.rx_dropped
    );
    let t = &r.transport;
    println!(
        "transport: {} data packets out ({} retransmitted), {} probes, {} SACKs; {} data packets in ({} duplicates), {} trim NACKs; \
         losses: {} by time, {} by timeout, {} with a retired plane",
        t.tx_data_packets,
        t.tx_retransmits,
        t.tx_probes,
        t.tx_sacks,
        t.rx_data_packets,
        t.rx_duplicates,
        t.rx_trim_nacks,
        t.losses_rack,
        t.losses_rto,
        t.losses_plane
    );
    if let Some(v) = r.verified {
        let each = r.verified_messages.map_or(String::new(), |n| {
            format!(" ({n} messages read back and checked)")
        });
        println!(
            "verify: {}{each}",
            if v { "data matches" } else { "MISMATCH" }
        );
    }
}

/// How long a client may take to send its hello before the server drops it and waits for another.
const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

/// Why the server stopped serving a client.
enum Refusal {
    /// The client asked for something invalid: it was told why, and the server waits for the next one.
    Refused(String),
    /// The test itself failed: the server reports it and exits.
    Failed(Failure),
}

impl From<Failure> for Refusal {
    fn from(f: Failure) -> Self {
        Refusal::Failed(f)
    }
}

impl From<io::Error> for Refusal {
    fn from(e: io::Error) -> Self {
        Refusal::Failed(e.into())
    }
}

/// Runs the server: waits for a client, serves its test, returns when the client is done. A client whose
/// hello or control messages are invalid is refused with the reason (it sees it, and so does the server's
/// stderr), and the server goes on waiting for the next one.
pub fn server(o: &Options) -> Result<Report, Failure> {
    o.validate().map_err(Failure::usage)?;
    let node = node_config(o)?;
    let listener = TcpListener::bind(("::", o.port))
        .map_err(|e| Failure::usage(format!("--port {}: {e}", o.port)))?;
    if !o.json {
        println!("mrc-perf server: waiting on TCP port {}", o.port);
    }
    loop {
        let (stream, from) = listener.accept()?;
        match serve(o, &node, stream, from) {
            Ok(report) => return Ok(report),
            Err(Refusal::Refused(reason)) => {
                eprintln!("mrc-perf server: refused client {from}: {reason}");
            }
            Err(Refusal::Failed(f)) => return Err(f),
        }
    }
}

/// Reads and checks a client's hello; a bad one is answered with the reason.
fn read_hello(ch: &mut Channel, planes: usize) -> Result<Hello, Refusal> {
    ch.stream().set_read_timeout(Some(HELLO_TIMEOUT))?;
    let hello = ch.recv::<Hello>().map_err(|e| match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("no hello within {} s", HELLO_TIMEOUT.as_secs())
        }
        _ => format!("bad hello: {e}"),
    });
    let hello = hello.and_then(|h| {
        h.check(planes)
            .map(|()| h)
            .map_err(|e| format!("hello: {e}"))
    });
    ch.stream().set_read_timeout(None)?;
    hello.map_err(|reason| {
        // The client may be gone already; the reason is in the server's log either way.
        let _ = ch.send(&Answer::Refused {
            refused: reason.clone(),
        });
        Refusal::Refused(reason)
    })
}

/// Refuses a control message during the test: tells the client and ends this test.
fn refuse_ctl(ch: &mut Channel, reason: String) -> Refusal {
    let _ = ch.send(&Ctl::Refused {
        reason: reason.clone(),
    });
    Refusal::Refused(reason)
}

fn serve(
    o: &Options,
    node: &NodeConfig,
    stream: TcpStream,
    from: std::net::SocketAddr,
) -> Result<Report, Refusal> {
    let mut ch = Channel::new(stream)?;
    let peer = read_hello(&mut ch, node.plane_count())?;
    let mut so = o.clone();
    so.test = peer.test;
    so.mode = peer.mode;
    so.mtu = Some(peer.mtu);
    so.no_icrc = !peer.icrc;
    let mut p = params(
        &so,
        node,
        peer.test,
        peer.mode,
        peer.qps,
        peer.max_size,
        peer.evs,
    );
    p.slots = peer.slots;
    p.seed = 0x5a;
    let mut side = setup(&so, &p)?;
    ch.send(&Answer::Hello(Box::new(hello_of(
        &mut side, &so, &p, peer.test, peer.mode,
    ))))?;
    connect(&mut side, &peer)?;
    if !o.json {
        println!(
            "client {from}: {:?} {:?}, {} QPs, MTU {}",
            peer.test, peer.mode, peer.qps, peer.mtu
        );
    }
    let region = (
        side.region.addr,
        side.region.lkey,
        side.slots,
        side.max_size,
    );
    let needs_recv = peer.test != Test::Write || peer.mode == Mode::Lat;
    let recv_test = if peer.test == Test::Write {
        Test::WriteImm
    } else {
        peer.test
    };
    // A multiple of the slot count, so the n-th SEND always lands in the slot the client sent it from.
    let stock = if peer.mode == Mode::Lat {
        1
    } else {
        side.slots * (1024 / side.slots).max(1)
    };
    if needs_recv {
        for (q, qp) in side.qps.iter().enumerate() {
            for k in 0..stock {
                post_recv(qp, region, q, k, recv_test)?;
            }
        }
    }
    let mut size = peer.max_size;
    let mut wc = vec![Completion::default(); 256];
    let mut results = Vec::new();
    let mut pongs = 0u64;
    let mut received = 0u64;
    let verify;
    loop {
        match ch.try_recv::<Ctl>() {
            Ok(Some(Ctl::Size { size: s })) => {
                if !(1..=peer.max_size).contains(&s) {
                    let why = format!("size {s}: use 1..={} (the hello's max_size)", peer.max_size);
                    return Err(refuse_ctl(&mut ch, why));
                }
                size = s;
                if let Some(b) = peer.bidir {
                    let back = Options {
                        depth: b.depth,
                        duration: b.duration,
                        bytes: b.bytes,
                        interval_ms: 0,
                        ..so.clone()
                    };
                    let r = bw(&back, &mut side, &peer.region, size, Instant::now(), None)?;
                    ch.send(&Ctl::Sent {
                        bytes: r.bytes,
                        seconds: r.seconds,
                    })?;
                }
            }
            Ok(Some(Ctl::Done {
                verify: v,
                slots,
                len,
            })) => {
                if slots.len() != side.qps.len()
                    || slots.iter().any(|&k| k > side.slots)
                    || len > side.max_size
                {
                    let why = format!(
                        "done: {} slot counts (each at most {}) and len {len} (at most {}) do not fit the test",
                        slots.len(),
                        side.slots,
                        side.max_size
                    );
                    return Err(refuse_ctl(&mut ch, why));
                }
                verify = v.then_some((slots, len));
                break;
            }
            Ok(Some(Ctl::Hash { .. } | Ctl::Sent { .. } | Ctl::Refused { .. })) | Ok(None) => {}
            Err(e) if e.kind() == io::ErrorKind::InvalidData => {
                return Err(refuse_ctl(&mut ch, format!("bad control message: {e}")));
            }
            Err(e) => {
                return Err(Failure::test(format!("client went away: {e}")).into());
            }
        }
        let n = side.cq.poll(&mut wc);
        for c in &wc[..n] {
            if c.status != WcStatus::Success {
                return Err(Failure::test(format!(
                    "error completion {:?} on QP {:#x}",
                    c.status, c.qpn
                ))
                .into());
            }
            if !matches!(
                c.opcode,
                mrc::WcOpcode::Recv | mrc::WcOpcode::RecvRdmaWithImm
            ) {
                continue;
            }
            received += 1;
            let Some(q) = side.q_of(c.qpn) else {
                continue;
            };
            let qp = &side.qps[q];
            post_recv(qp, region, q, c.wr_id as usize, recv_test)?;
            if peer.mode == Mode::Lat {
                post(qp, region, q, 0, recv_test, size, &peer.region, pongs)?;
                pongs += 1;
            }
        }
        side.step(Duration::from_millis(1))?;
    }
    if let Some((slots, len)) = verify {
        let hashes = hash_slots(&mut side, &slots, len);
        ch.send(&Ctl::Hash { hashes })?;
    }
    // Let the last acknowledgements leave before the sockets close.
    let end = Instant::now() + Duration::from_millis(50);
    while Instant::now() < end {
        side.step(Duration::from_millis(1))?;
    }
    results.push(SizeResult {
        size,
        messages: received,
        bytes: 0,
        seconds: 0.0,
        gbps: 0.0,
        mmsgs: 0.0,
        lat_us: None,
    });
    let head = ReportHead {
        role: "server",
        test: peer.test,
        mode: peer.mode,
        qps: peer.qps,
        mtu: peer.mtu,
    };
    Ok(finish_report(&mut side, head, o, results, None)?)
}
