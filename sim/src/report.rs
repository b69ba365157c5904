//! Results: metrics, the JSON/CSV files, SVG plots and the text summary. Nothing here reads a clock, so
//! the same scenario and seed give the same files byte for byte.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use crate::ideal::Ideal;
use crate::scenario::{FailureCfg, FailureKind, Scenario, Threshold};
use crate::sim::{Counters, Outcome};
use crate::workload::Transfer;

/// Transfer completion time statistics in µs.
#[derive(Debug, Clone, Default, Serialize, PartialEq)]
pub struct FctStats {
    /// Completed transfers.
    pub count: usize,
    /// Median.
    pub p50_us: f64,
    /// 99th percentile.
    pub p99_us: f64,
    /// Largest.
    pub max_us: f64,
    /// Mean.
    pub mean_us: f64,
}

/// One run (failed, baseline or victim alone).
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct RunSummary {
    /// Every transfer completed.
    pub finished: bool,
    /// Job completion time, µs.
    pub jct_us: f64,
    /// Counters.
    pub counters: Counters,
    /// FCTs.
    pub fct: FctStats,
    /// Per plane: data packets sent, retransmits, trims, losses, plane retirements.
    pub plane_tx: Vec<[u64; 5]>,
    /// Payload bytes sent (first sends and retransmissions).
    pub tx_payload_bytes: u64,
    /// Payload bytes placed.
    pub placed_bytes: u64,
    /// EVs per QP (active + backup).
    pub evs_per_qp: usize,
    /// Timeline bin, µs.
    pub bin_us: f64,
    /// Per bin and plane: goodput, Gbit/s.
    pub goodput_gbps: Vec<Vec<f64>>,
    /// Per bin: largest queue per port kind (host_up, t0_down, t0_up, t1_down, t1_up, t2_down), bytes.
    pub queue_max_bytes: Vec<[u64; 6]>,
    /// Per transfer: (start, end) in µs; end is −1 when unfinished.
    #[serde(skip)]
    pub times_us: Vec<(f64, f64)>,
    /// Per transfer: its QP pair's counters (flows.csv).
    #[serde(skip)]
    pub flows: Vec<crate::drill::FlowCounters>,
}

fn pct(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = ((sorted.len() as f64 - 1.0) * q).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

impl RunSummary {
    /// Summarizes an outcome.
    pub fn new(o: &Outcome, xfers: &[Transfer], bin_ps: u64) -> Self {
        let times_us: Vec<(f64, f64)> = o
            .times
            .iter()
            .map(|&(s, e)| {
                (
                    if s == u64::MAX { -1.0 } else { s as f64 / 1e6 },
                    if e == u64::MAX { -1.0 } else { e as f64 / 1e6 },
                )
            })
            .collect();
        let mut f: Vec<f64> = times_us
            .iter()
            .filter(|t| t.1 >= 0.0 && t.0 >= 0.0)
            .map(|t| t.1 - t.0)
            .collect();
        f.sort_by(f64::total_cmp);
        let fct = FctStats {
            count: f.len(),
            p50_us: pct(&f, 0.5),
            p99_us: pct(&f, 0.99),
            max_us: f.last().copied().unwrap_or(0.0),
            mean_us: if f.is_empty() {
                0.0
            } else {
                f.iter().sum::<f64>() / f.len() as f64
            },
        };
        let first = xfers.iter().map(|t| t.start_ps).min().unwrap_or(0) as f64 / 1e6;
        let bin_us = bin_ps as f64 / 1e6;
        let to_gbps = 8.0 / (bin_ps as f64 / 1e3);
        Self {
            finished: o.finished,
            jct_us: o.end_ps as f64 / 1e6 - first,
            counters: o.c.clone(),
            fct,
            plane_tx: o.plane_tx.clone(),
            tx_payload_bytes: o.tx_payload_bytes,
            placed_bytes: o.placed_bytes,
            evs_per_qp: o.evs_per_qp,
            bin_us,
            goodput_gbps: o
                .goodput
                .iter()
                .map(|r| r.iter().map(|&b| b as f64 * to_gbps).collect())
                .collect(),
            queue_max_bytes: o.queues.clone(),
            times_us,
            flows: o.flows.clone(),
        }
    }

    /// |sent − delivered − dropped − trimmed − in flight|, bytes plus packets.
    pub fn conservation_error(&self) -> u64 {
        let c = &self.counters;
        let b = (c.delivered_bytes + c.dropped_bytes + c.trimmed_bytes + c.inflight_bytes)
            .abs_diff(c.injected_bytes);
        let dropped = c.dropped_failure_pkts + c.dropped_loss_pkts + c.dropped_overflow_pkts;
        let p = (c.delivered_pkts + dropped + c.inflight_pkts).abs_diff(c.injected_pkts);
        b + p
    }
}

/// A threshold's verdict.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Verdict {
    /// Metric.
    pub metric: String,
    /// Value.
    pub value: f64,
    /// Bounds.
    pub min: Option<f64>,
    /// Upper bound.
    pub max: Option<f64>,
    /// Within bounds.
    pub pass: bool,
    /// Why this bound.
    pub why: String,
}

/// The results file.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct Report {
    /// Scenario name.
    pub name: String,
    /// Seed.
    pub seed: u64,
    /// The scenario as run (replay it with `mrc-sim run`).
    pub scenario: Scenario,
    /// Hosts.
    pub hosts: u32,
    /// Planes.
    pub planes: u32,
    /// Unloaded RTT of the longest path (a full frame out, an ack back), µs.
    pub base_rtt_us: f64,
    /// Transfers.
    pub transfers: usize,
    /// The run with failures.
    pub run: RunSummary,
    /// The same without failures.
    pub baseline: Option<RunSummary>,
    /// The victim flow alone.
    pub victim_alone: Option<RunSummary>,
    /// The ideal FCTs (fair share of the tightest bottleneck plus one base RTT; see `ideal.rs`).
    pub ideal: Ideal,
    /// Metrics by name.
    pub metrics: BTreeMap<String, f64>,
    /// Threshold verdicts.
    pub checks: Vec<Verdict>,
    /// What the scenario asks that the run did not use: failures outside the traffic.
    pub warnings: Vec<String>,
    /// Per transfer: (src, dst, bytes).
    #[serde(skip)]
    pub flows: Vec<(u32, u32, u64)>,
    /// Files the scenario imports: (where they are, the name of their copy beside the echoed scenario).
    #[serde(skip)]
    pub imports: Vec<(std::path::PathBuf, String)>,
}

/// Failures that changed nothing because the traffic had not started or had ended: a planner who meant them
/// to hit the job learns it from the report instead of from a slowdown of 0.
fn failure_warnings(s: &Scenario, run: &RunSummary) -> Vec<String> {
    let first = run
        .times_us
        .iter()
        .map(|t| t.0)
        .filter(|&t| t >= 0.0)
        .fold(f64::INFINITY, f64::min);
    let mut v = Vec::new();
    for (i, f) in s.failures.iter().enumerate() {
        if matches!(f.kind, FailureKind::LinkUp | FailureKind::SwitchUp) {
            continue;
        }
        let what = crate::plots::describe(f);
        if run.finished && f.at_us >= run.jct_us {
            v.push(format!(
                "failures[{i}] ({what}) at {} µs: after the last transfer finished ({:.1} µs); it changed \
                 nothing (move at_us into the traffic, or raise the workload)",
                f.at_us, run.jct_us
            ));
        } else if f.until_us.is_some_and(|u| u <= first) {
            v.push(format!(
                "failures[{i}] ({what}) ends at {} µs, before the first transfer starts ({first:.1} µs); it \
                 changed nothing",
                f.until_us.unwrap_or(0.0)
            ));
        }
    }
    v
}

/// The planes a failure touches (`None`: every plane).
fn planes_touched(f: &FailureCfg) -> Option<u8> {
    match f.kind {
        FailureKind::SwitchDown | FailureKind::SwitchUp => {
            Some(f.switch.and_then(|s| s.plane).unwrap_or(0))
        }
        FailureKind::PlaneDown | FailureKind::NicPortDown => f.plane,
        _ => f.link.and_then(|l| l.plane),
    }
}

/// Time bins inside a failure window, while payload was still being placed (between the run's first and last
/// placement), in which a plane no failure touches placed nothing: one plane's failure stalling the others.
fn stalled_plane_bins(s: &Scenario, run: &RunSummary, planes: u32) -> u64 {
    let mut touched = vec![false; planes as usize];
    for f in &s.failures {
        match planes_touched(f) {
            Some(p) => {
                if let Some(t) = touched.get_mut(usize::from(p)) {
                    *t = true;
                }
            }
            None => return 0,
        }
    }
    let busy = |row: &Vec<f64>| row.iter().any(|&g| g > 0.0);
    let (Some(first), Some(last)) = (
        run.goodput_gbps.iter().position(busy),
        run.goodput_gbps.iter().rposition(busy),
    ) else {
        return 0;
    };
    let mut stalled = std::collections::BTreeSet::new();
    for f in &s.failures {
        let from = ((f.at_us / run.bin_us).ceil() as usize).max(first);
        let to = f
            .until_us
            .map_or(usize::MAX, |u| (u / run.bin_us).floor() as usize)
            .min(last);
        for b in from..to {
            let row = &run.goodput_gbps[b];
            for p in (0..planes as usize).filter(|&p| !touched[p]) {
                if row.get(p).copied().unwrap_or(0.0) == 0.0 {
                    stalled.insert((b, p));
                }
            }
        }
    }
    stalled.len() as u64
}

impl Report {
    /// Computes metrics and verdicts.
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site; the parts of a finished run"
    )]
    pub fn new(
        s: &Scenario,
        hosts: u32,
        planes: u32,
        base_rtt_us: f64,
        xfers: &[Transfer],
        run: RunSummary,
        baseline: Option<RunSummary>,
        victim_alone: Option<RunSummary>,
        ideal: Ideal,
    ) -> Self {
        let mut m = BTreeMap::new();
        fct_metrics(&mut m, &run, baseline.as_ref(), &ideal, xfers.len());
        failure_metrics(&mut m, s, &run, baseline.as_ref(), xfers, planes);
        transport_metrics(
            &mut m,
            s,
            &run,
            baseline.as_ref(),
            victim_alone.as_ref(),
            xfers,
        );
        let checks = verdicts(s, &m);
        let (scenario, imports) = echo(s);
        let warnings = failure_warnings(s, &run);
        Self {
            name: s.name.clone(),
            seed: s.seed,
            scenario,
            hosts,
            planes,
            base_rtt_us,
            transfers: xfers.len(),
            run,
            baseline,
            victim_alone,
            ideal,
            metrics: m,
            checks,
            warnings,
            flows: xfers.iter().map(|t| (t.src, t.dst, t.bytes)).collect(),
            imports,
        }
    }

    /// The invariants every run must keep: conservation, no crossing of failed links, exact placement.
    pub fn invariant_violations(&self) -> Vec<String> {
        let mut v = Vec::new();
        for k in [
            "conservation_error",
            "failed_link_crossings",
            "placement_errors",
        ] {
            let x = self.metrics.get(k).copied().unwrap_or(0.0);
            if x != 0.0 {
                v.push(format!("{k} = {x}"));
            }
        }
        v
    }

    /// All thresholds pass.
    pub fn passed(&self) -> bool {
        self.checks.iter().all(|c| c.pass)
    }

    /// The results file as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// FCTs against the ideal and the healthy run, and what the transport spent (`mrc-sim compare`).
    pub fn comparison(&self) -> String {
        let mut o = String::new();
        let r = &self.run;
        let c = &r.counters;
        let _ = writeln!(
            o,
            "{} (seed {}): {} hosts x {} planes, {} transfers, base RTT {:.2} us",
            self.name, self.seed, self.hosts, self.planes, self.transfers, self.base_rtt_us
        );
        let have_ideal = self.metrics.contains_key("fct_p50_over_ideal");
        let _ = writeln!(
            o,
            "{:<8} {:>12} {:>12} {:>10} {:>12} {:>10}",
            "FCT", "measured us", "ideal us", "vs ideal", "healthy us", "vs healthy"
        );
        let rows = [
            (
                "p50",
                r.fct.p50_us,
                self.ideal.p50_us,
                self.baseline.as_ref().map(|b| b.fct.p50_us),
            ),
            (
                "p99",
                r.fct.p99_us,
                self.ideal.p99_us,
                self.baseline.as_ref().map(|b| b.fct.p99_us),
            ),
            (
                "max",
                r.fct.max_us,
                self.ideal.max_us,
                self.baseline.as_ref().map(|b| b.fct.max_us),
            ),
        ];
        for (name, m, i, b) in rows {
            let vs = |x: f64| format!("{:+.2}%", (m / x - 1.0) * 100.0);
            let _ = writeln!(
                o,
                "{:<8} {:>12.1} {:>12} {:>10} {:>12} {:>10}",
                name,
                m,
                if have_ideal {
                    format!("{i:.1}")
                } else {
                    "-".into()
                },
                if have_ideal { vs(i) } else { "-".into() },
                b.map_or("-".into(), |b| format!("{b:.1}")),
                b.map_or("-".into(), vs),
            );
        }
        if !have_ideal {
            let _ = writeln!(
                o,
                "(no ideal: some transfers wait for triggers; the ideal covers transfers that start together)"
            );
        }
        let sent: u64 = r.plane_tx.iter().map(|x| x[0]).sum();
        let retx: u64 = r.plane_tx.iter().map(|x| x[1]).sum();
        let _ = writeln!(
            o,
            "data packets {sent}, retransmitted {retx}: {} after trims, {} lost by time, {} by RTO, {} in flight on a \
             retired EV, {} in flight on a retired plane",
            r.plane_tx.iter().map(|x| x[2]).sum::<u64>(),
            c.losses_rack,
            c.losses_rto,
            c.losses_path,
            c.losses_plane
        );
        let _ = writeln!(
            o,
            "spurious retransmissions (received twice): {} = {:.3}% of data packets; EVs retired {}",
            c.rx_duplicates,
            c.rx_duplicates as f64 * 100.0 / sent.max(1) as f64,
            c.ev_retirements
        );
        let sent_b = r.tx_payload_bytes;
        let _ = writeln!(
            o,
            "payload sent {sent_b} B, placed {} B: {:.2}% wasted ({} packets trimmed, {} wire bytes cut off \
             before the congested queue; {} B of trimmed headers crossed it)",
            r.placed_bytes,
            (1.0 - r.placed_bytes as f64 / sent_b.max(1) as f64) * 100.0,
            c.trimmed_pkts,
            c.trimmed_bytes,
            c.trimmed_pkts * u64::from(self.scenario.topology.queue.trimmed_bytes)
        );
        let _ = writeln!(
            o,
            "events: {} in the run{}",
            c.events,
            self.baseline.as_ref().map_or(String::new(), |b| format!(
                ", {} in its healthy baseline",
                b.counters.events
            ))
        );
        o
    }

    /// The short text summary.
    pub fn summary(&self) -> String {
        let mut o = String::new();
        let r = &self.run;
        let c = &r.counters;
        let _ = writeln!(o, "scenario {} (seed {})", self.name, self.seed);
        for w in &self.warnings {
            let _ = writeln!(o, "warning: {w}");
        }
        if !self.scenario.description.is_empty() {
            let _ = writeln!(o, "  {}", self.scenario.description.trim());
        }
        let _ = writeln!(
            o,
            "fabric: {} hosts x {} planes; {} transfers; {} failure entries",
            self.hosts,
            self.planes,
            self.transfers,
            self.scenario.failures.len()
        );
        let _ = writeln!(
            o,
            "job: {} in {:.1} us{}",
            if r.finished {
                "finished"
            } else {
                "NOT finished"
            },
            r.jct_us,
            match &self.baseline {
                Some(b) => format!(
                    " (without failures {:.1} us: slowdown {:+.2}%)",
                    b.jct_us,
                    (r.jct_us / b.jct_us - 1.0) * 100.0
                ),
                None => String::new(),
            }
        );
        let _ = writeln!(
            o,
            "FCT: p50 {:.1} us, p99 {:.1} us, max {:.1} us ({} transfers)",
            r.fct.p50_us, r.fct.p99_us, r.fct.max_us, r.fct.count
        );
        if let Some(x) = self.metrics.get("fct_p50_over_ideal") {
            let get = |k: &str| self.metrics.get(k).copied().unwrap_or(f64::NAN) * 100.0;
            let _ = writeln!(
                o,
                "ideal FCT: p50 {:.1} us, p99 {:.1} us, max {:.1} us (measured over ideal: {:+.2}% / {:+.2}% / {:+.2}%)",
                self.ideal.p50_us,
                self.ideal.p99_us,
                self.ideal.max_us,
                x * 100.0,
                get("fct_p99_over_ideal"),
                get("fct_max_over_ideal")
            );
        }
        let _ = writeln!(
            o,
            "packets: {} injected, {} trimmed, {} ECN-marked, drops {} failure / {} loss / {} overflow",
            c.injected_pkts,
            c.trimmed_pkts,
            c.ecn_marked,
            c.dropped_failure_pkts,
            c.dropped_loss_pkts,
            c.dropped_overflow_pkts
        );
        let retx: u64 = r.plane_tx.iter().map(|x| x[1]).sum();
        let _ = writeln!(
            o,
            "transport: {} retransmits, waste {:.3}%, EVs retired {} / restored {}, QP errors {}",
            retx,
            self.metrics.get("waste_fraction").copied().unwrap_or(0.0) * 100.0,
            c.ev_retirements,
            c.ev_recoveries,
            c.qp_errors
        );
        let _ = writeln!(
            o,
            "losses: {} by time, {} by RTO, {} presumed with a retired EV and {} with a retired plane (in flight on \
             it, resent at once); {} spurious retransmissions (duplicates received, {:.3}% of data packets)",
            c.losses_rack,
            c.losses_rto,
            c.losses_path,
            c.losses_plane,
            c.rx_duplicates,
            self.metrics
                .get("spurious_retransmit_fraction")
                .copied()
                .unwrap_or(0.0)
                * 100.0
        );
        let _ = writeln!(
            o,
            "waste: {} payload bytes sent, {} placed; {} wire bytes cut off by trimming",
            r.tx_payload_bytes, r.placed_bytes, c.trimmed_bytes
        );
        let _ = writeln!(
            o,
            "per plane (data pkts / retx / trims / losses / plane retirements):"
        );
        for (p, x) in r.plane_tx.iter().enumerate() {
            let _ = writeln!(
                o,
                "  plane {p}: {} / {} / {} / {} / {}",
                x[0], x[1], x[2], x[3], x[4]
            );
        }
        let inv = self.invariant_violations();
        let _ = writeln!(
            o,
            "invariants: {}",
            if inv.is_empty() {
                "conservation, no failed-link crossing, exact placement: OK".to_string()
            } else {
                format!("VIOLATED: {}", inv.join(", "))
            }
        );
        for v in &self.checks {
            let _ = writeln!(
                o,
                "check {:<30} {:>12.4} in [{}, {}]  {}{}",
                v.metric,
                v.value,
                v.min.map_or("-inf".into(), |x| x.to_string()),
                v.max.map_or("inf".into(), |x| x.to_string()),
                if v.pass { "PASS" } else { "FAIL" },
                if v.why.is_empty() {
                    String::new()
                } else {
                    format!("  ({})", v.why)
                }
            );
        }
        o
    }
}

/// FCT and JCT metrics, against the baseline and the ideal where there are those.
fn fct_metrics(
    m: &mut BTreeMap<String, f64>,
    run: &RunSummary,
    baseline: Option<&RunSummary>,
    ideal: &Ideal,
    transfers: usize,
) {
    m.insert("jct_us".into(), run.jct_us);
    if let Some(b) = baseline {
        m.insert("jct_slowdown".into(), run.jct_us / b.jct_us - 1.0);
        m.insert(
            "fct_p50_slowdown".into(),
            run.fct.p50_us / b.fct.p50_us - 1.0,
        );
        m.insert(
            "fct_p99_slowdown".into(),
            run.fct.p99_us / b.fct.p99_us - 1.0,
        );
        m.insert(
            "fct_max_slowdown".into(),
            run.fct.max_us / b.fct.max_us - 1.0,
        );
    }
    m.insert(
        "fct_max_over_p50".into(),
        run.fct.max_us / run.fct.p50_us.max(1e-9) - 1.0,
    );
    if ideal.count > 0 && ideal.count == transfers {
        m.insert(
            "fct_p50_over_ideal".into(),
            run.fct.p50_us / ideal.p50_us - 1.0,
        );
        m.insert(
            "fct_p99_over_ideal".into(),
            run.fct.p99_us / ideal.p99_us - 1.0,
        );
        m.insert(
            "fct_max_over_ideal".into(),
            run.fct.max_us / ideal.max_us - 1.0,
        );
    }
    m.insert("fct_p50_us".into(), run.fct.p50_us);
    m.insert("fct_p99_us".into(), run.fct.p99_us);
    m.insert("fct_max_us".into(), run.fct.max_us);
    m.insert(
        "goodput_gbps".into(),
        run.placed_bytes as f64 * 8.0 / (run.jct_us * 1e3).max(1e-9),
    );
}

/// What the failures cost: the throughput of the hosts with a failed NIC port, goodput after the first
/// failure settled, planes stalled by another plane's failure.
fn failure_metrics(
    m: &mut BTreeMap<String, f64>,
    s: &Scenario,
    run: &RunSummary,
    baseline: Option<&RunSummary>,
    xfers: &[Transfer],
    planes: u32,
) {
    // Hosts with a failed NIC port, and when.
    let affected: Vec<(u32, f64)> = s
        .failures
        .iter()
        .filter_map(|f| f.failed_nic_host().map(|h| (h, f.at_us)))
        .collect();
    if let (Some(b), false) = (baseline, affected.is_empty()) {
        let (mut tb, mut tf) = (0.0, 0.0);
        for (i, t) in xfers.iter().enumerate() {
            let (s0, e0) = run.times_us[i];
            let (bs, be) = b.times_us[i];
            let hit = affected
                .iter()
                .any(|&(h, at)| (t.src == h || t.dst == h) && (e0 < 0.0 || e0 > at));
            if hit && e0 >= 0.0 && be >= 0.0 {
                tf += e0 - s0;
                tb += be - bs;
            }
        }
        if tf > 0.0 {
            m.insert("affected_throughput_fraction".into(), tb / tf);
        }
    }
    if let (Some(b), Some(first)) = (
        baseline,
        s.failures.iter().map(|f| f.at_us).min_by(f64::total_cmp),
    ) {
        let from = first + s.run.settle_us;
        let to = 0.9 * run.jct_us.min(b.jct_us);
        let mean = |r: &RunSummary| {
            let (mut sum, mut n) = (0.0, 0);
            for (i, row) in r.goodput_gbps.iter().enumerate() {
                let t = i as f64 * r.bin_us;
                if t >= from && t + r.bin_us <= to {
                    sum += row.iter().sum::<f64>();
                    n += 1;
                }
            }
            (n > 0).then(|| sum / f64::from(n))
        };
        if let (Some(x), Some(y)) = (mean(run), mean(b)) {
            m.insert("late_goodput_fraction".into(), x / y);
        }
    }
    if !s.failures.is_empty() {
        m.insert(
            "stalled_plane_bins".into(),
            stalled_plane_bins(s, run, planes) as f64,
        );
    }
}

/// Waste, retransmissions, losses, retirements, the victim's slowdown and the invariants' counters.
fn transport_metrics(
    m: &mut BTreeMap<String, f64>,
    s: &Scenario,
    run: &RunSummary,
    baseline: Option<&RunSummary>,
    victim_alone: Option<&RunSummary>,
    xfers: &[Transfer],
) {
    let c = &run.counters;
    let data_sent: u64 = run.plane_tx.iter().map(|r| r[0]).sum();
    m.insert(
        "spurious_retransmit_fraction".into(),
        c.rx_duplicates as f64 / data_sent.max(1) as f64,
    );
    m.insert(
        "needless_send_fraction".into(),
        (c.rx_duplicates + c.gbn_discards) as f64 / data_sent.max(1) as f64,
    );
    m.insert(
        "waste_fraction".into(),
        if run.tx_payload_bytes == 0 {
            0.0
        } else {
            1.0 - run.placed_bytes as f64 / run.tx_payload_bytes as f64
        },
    );
    let sent: u64 = run.plane_tx.iter().map(|r| r[0]).sum();
    let retx: u64 = run.plane_tx.iter().map(|r| r[1]).sum();
    m.insert(
        "retransmit_fraction".into(),
        if sent == 0 {
            0.0
        } else {
            retx as f64 / sent as f64
        },
    );
    if let Some(a) = victim_alone
        && let Some(i) = xfers.iter().position(|t| t.victim)
    {
        let (s0, e0) = run.times_us[i];
        let alone = a.fct.max_us;
        let fct = if e0 >= 0.0 { e0 - s0 } else { f64::INFINITY };
        m.insert("victim_slowdown".into(), fct / alone - 1.0);
    }
    m.insert("lasting_data_drops".into(), c.lasting_data_drops as f64);
    m.insert("ev_retirements".into(), c.ev_retirements as f64);
    let healthy = match baseline {
        Some(b) => Some(b),
        None => s.failures.is_empty().then_some(run),
    };
    if let Some(h) = healthy {
        let planes: u64 = h.plane_tx.iter().map(|r| r[4]).sum();
        m.insert(
            "healthy_retirements".into(),
            (h.counters.ev_retirements + planes) as f64,
        );
    }
    let by_time = c.losses_rack + c.losses_path;
    if by_time + c.losses_rto > 0 {
        m.insert(
            "losses_by_time_fraction".into(),
            by_time as f64 / (by_time + c.losses_rto) as f64,
        );
    }
    m.insert("ev_recoveries".into(), c.ev_recoveries as f64);
    m.insert("trimmed_pkts".into(), c.trimmed_pkts as f64);
    m.insert("overflow_drops".into(), c.dropped_overflow_pkts as f64);
    m.insert("losses_by_rto".into(), c.losses_rto as f64);
    m.insert(
        "unfinished_transfers".into(),
        run.times_us.iter().filter(|t| t.1 < 0.0).count() as f64,
    );
    m.insert("failed_transfers".into(), c.failed_transfers as f64);
    m.insert("qp_errors".into(), c.qp_errors as f64);
    m.insert("placement_errors".into(), c.placement_errors as f64);
    m.insert(
        "failed_link_crossings".into(),
        c.failed_link_crossings as f64,
    );
    let cons = run.conservation_error()
        + baseline.map_or(0, RunSummary::conservation_error)
        + victim_alone.map_or(0, RunSummary::conservation_error);
    m.insert("conservation_error".into(), cons as f64);
}

/// The scenario's thresholds (and the healthy-retirement check every report makes) against the metrics.
fn verdicts(s: &Scenario, m: &BTreeMap<String, f64>) -> Vec<Verdict> {
    // Every report checks that the run without failures retired no path (issue 24), unless the scenario
    // already names the metric.
    let auto = m.contains_key("healthy_retirements")
        && !s.validate.iter().any(|v| v.metric == "healthy_retirements");
    let auto = auto.then(|| Threshold {
        metric: "healthy_retirements".into(),
        min: None,
        max: Some(0.0),
        why: "a healthy fabric retires no path (checked in every report)".into(),
    });
    s.validate
        .iter()
        .chain(auto.as_ref())
        .map(|th| {
            let value = m.get(&th.metric).copied().unwrap_or(f64::NAN);
            let pass = !value.is_nan()
                && th.min.is_none_or(|x| value >= x)
                && th.max.is_none_or(|x| value <= x);
            Verdict {
                metric: th.metric.clone(),
                value,
                min: th.min,
                max: th.max,
                pass,
                why: th.why.clone(),
            }
        })
        .collect()
}

/// The scenario as run, for report.json: imported files named by the copies written beside it, so it replays
/// from its folder; and those imports (where they are, the name of their copy).
fn echo(s: &Scenario) -> (Scenario, Vec<(std::path::PathBuf, String)>) {
    let mut scenario = s.clone();
    let mut imports = Vec::new();
    for (kind, file) in [
        ("topology", &mut scenario.topology.file),
        ("workload", &mut scenario.workload.file),
    ] {
        if let Some(f) = file {
            let base = f
                .file_name()
                .map_or_else(|| kind.to_string(), |n| n.to_string_lossy().into_owned());
            let name = if imports.iter().any(|(_, n): &(_, String)| *n == base) {
                format!("{kind}-{base}")
            } else {
                base
            };
            imports.push((s.resolve(f), name.clone()));
            *f = name.into();
        }
    }
    scenario.base_dir = None;
    (scenario, imports)
}
