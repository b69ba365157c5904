//! What `mrc-perf` reports: per-size results, per-plane and transport counters, and how they are printed.

use std::io;

use mrc::EvState;
use mrc_host::UdpEndpoint;
use serde::Serialize;

use super::run::{Failure, Side};
use super::{Mode, Options, Test};

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

pub(super) fn transport_line(ep: &UdpEndpoint, qps: &[u32]) -> TransportLine {
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

pub(super) fn plane_lines(ep: &UdpEndpoint, qps: &[u32]) -> Vec<PlaneLine> {
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

pub(super) fn datapath_line(ep: &UdpEndpoint) -> DatapathLine {
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

pub(super) fn live_line(ep: &UdpEndpoint, qps: &[u32]) -> String {
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

/// What a report says about the run, beyond the counters.
pub(super) struct ReportHead {
    pub(super) role: &'static str,
    pub(super) test: Test,
    pub(super) mode: Mode,
    pub(super) qps: usize,
    pub(super) mtu: u32,
}

/// Gathers the counters into a report and prints it (JSON or text).
pub(super) fn finish_report(
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

pub(super) fn print_result(o: &Options, r: &SizeResult) {
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

pub(super) fn print_planes(r: &Report) {
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

pub(super) fn print_plane_table(r: &Report) {
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

pub(super) fn print_totals(r: &Report) {
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
