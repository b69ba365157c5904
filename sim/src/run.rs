//! Running a scenario: build the topology and workload, expand failures into timed actions, run the
//! failed scenario and (optionally) its healthy baseline and the incast victim alone.

use crate::capture::{CaptureSpec, SimCapture};
use crate::plan::{Plan, frame_bytes};
use crate::report::{Report, RunSummary};
use crate::scenario::{
    Direction, FailureCfg, FailureKind, LinkRef, LinkTier, Scenario, ScenarioError,
};
use crate::sim::{Action, Outcome, Progress, RunSettings, Sim};
use crate::topo::Topology;
use crate::workload::{self, Transfer, Workload};

fn ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// Turns failures into timed actions, checking every reference against the topology.
pub fn expand_failures(
    t: &Topology,
    failures: &[FailureCfg],
    field: &str,
) -> Result<Vec<(u64, Action)>, ScenarioError> {
    let mut out = Vec::new();
    for (i, f) in failures.iter().enumerate() {
        let at = format!("{field}[{i}]");
        let links = |r: &Option<LinkRef>| -> Result<Vec<u32>, ScenarioError> {
            match r {
                Some(r) => t.select_links(r, &format!("{at}.link")),
                None => Err(ScenarioError::new(format!("{at}.link"), "missing")),
            }
        };
        let start = ps(f.at_us);
        let end = f.until_us.map(ps);
        match f.kind {
            FailureKind::LinkDown | FailureKind::LinkUp => {
                let down = f.kind == FailureKind::LinkDown;
                set_links(&mut out, start, end, links(&f.link)?, down);
            }
            FailureKind::LinkFlap => {
                let ports = links(&f.link)?;
                let period = ps(f.period_us.unwrap_or(1.0)).max(1);
                let up_for = (period as f64 * f.duty.unwrap_or(0.5)) as u64;
                flaps(
                    &mut out,
                    (start, end.unwrap_or(start)),
                    period,
                    up_for,
                    &ports,
                )
                .map_err(|()| {
                    ScenarioError::new(
                        format!("{at}.period_us"),
                        "more than a million flaps; use a longer period or a shorter span",
                    )
                })?;
            }
            FailureKind::SwitchDown | FailureKind::SwitchUp => {
                let Some(r) = f.switch else {
                    return Err(ScenarioError::new(format!("{at}.switch"), "missing"));
                };
                let node = t.switch_ref(&r, &format!("{at}.switch"))?;
                let ports: Vec<u32> = t
                    .switch_links(node)
                    .into_iter()
                    .map(|p| up_port(t, p))
                    .collect();
                let down = f.kind == FailureKind::SwitchDown;
                set_links(&mut out, start, end, ports, down);
            }
            FailureKind::PlaneDown => {
                let p = f.plane.unwrap_or(0);
                if u32::from(p) >= t.shape.planes {
                    return Err(ScenarioError::new(
                        format!("{at}.plane"),
                        format!("plane {p}; use 0..={}", t.shape.planes.saturating_sub(1)),
                    ));
                }
                set_links(&mut out, start, end, plane_ports(t, p), true);
            }
            FailureKind::NicPortDown => {
                let r = LinkRef {
                    tier: LinkTier::Host,
                    plane: f.plane,
                    host: f.host,
                    t0: None,
                    t1: None,
                    pod: None,
                    t2: None,
                    direction: None,
                };
                set_links(&mut out, start, end, t.select_links(&r, &at)?, true);
            }
            FailureKind::LinkLoss | FailureKind::LinkSlow => {
                let dir = f.link.and_then(|r| r.direction).unwrap_or(Direction::Both);
                let ports = t.directed(&links(&f.link)?, dir);
                let (a, b) = if f.kind == FailureKind::LinkLoss {
                    (
                        Action::Loss {
                            ports: ports.clone(),
                            rate: f.rate.unwrap_or(0.0),
                        },
                        Action::Loss { ports, rate: 0.0 },
                    )
                } else {
                    (
                        Action::Slow {
                            ports: ports.clone(),
                            fraction: f.fraction.unwrap_or(1.0),
                        },
                        Action::Slow {
                            ports,
                            fraction: 1.0,
                        },
                    )
                };
                out.push((start, a));
                if let Some(e) = end {
                    out.push((e, b));
                }
            }
        }
    }
    // Stable order by time keeps same-time actions in file order.
    out.sort_by_key(|a| a.0);
    Ok(out)
}

/// `ports` down (or up) at `start`; ports taken down come back up at `end`, if given.
fn set_links(
    out: &mut Vec<(u64, Action)>,
    start: u64,
    end: Option<u64>,
    ports: Vec<u32>,
    down: bool,
) {
    match end {
        Some(e) if down => {
            out.push((
                start,
                Action::Links {
                    ports: ports.clone(),
                    down,
                },
            ));
            out.push((e, Action::Links { ports, down: false }));
        }
        _ => out.push((start, Action::Links { ports, down })),
    }
}

/// A flapping link over `span`: down at the start of every `period`, up for its last `up_for`; refused
/// past a million flaps.
fn flaps(
    out: &mut Vec<(u64, Action)>,
    span: (u64, u64),
    period: u64,
    up_for: u64,
    ports: &[u32],
) -> Result<(), ()> {
    let (mut t0, end) = span;
    let mut n = 0;
    while t0 < end {
        out.push((
            t0,
            Action::Links {
                ports: ports.to_vec(),
                down: true,
            },
        ));
        let up = (t0 + period - up_for).min(end);
        out.push((
            up,
            Action::Links {
                ports: ports.to_vec(),
                down: false,
            },
        ));
        t0 += period;
        n += 1;
        if n > 1_000_000 {
            return Err(());
        }
    }
    Ok(())
}

/// The up ports of every switch of plane `p`, once each, in order.
fn plane_ports(t: &Topology, p: u8) -> Vec<u32> {
    let mut ports = Vec::new();
    let per = t.shape.switches_per_plane();
    for k in 0..per {
        let node = t.hosts + u32::from(p) * per + k;
        for q in t.switch_links(node) {
            ports.push(up_port(t, q));
        }
    }
    ports.sort_unstable();
    ports.dedup();
    ports
}

/// The port of a link that points towards the spine (host ports and T0/T1 up ports).
fn up_port(t: &Topology, p: u32) -> u32 {
    use crate::topo::PortKind::*;
    match t.ports[p as usize].kind {
        HostUp | T0Up | T1Up => p,
        T0Down | T1Down | T2Down => t.ports[p as usize].rev,
    }
}

/// Everything needed to run one variant.
pub struct Prepared {
    /// Topology.
    pub topo: Topology,
    /// Transfers and triggers.
    pub workload: Workload,
    /// Failure actions.
    pub actions: Vec<(u64, Action)>,
    /// Settings.
    pub rs: RunSettings,
}

/// Builds topology, workload and actions from a checked plan.
pub fn prepare(s: &Scenario, plan: &Plan) -> Result<Prepared, ScenarioError> {
    let topo = Topology::build(plan.shape, &plan.links, &s.topology.queue, frame_bytes(s))?;
    let workload = match &plan.matrix {
        Some(w) => w.clone(),
        None => workload::build(&s.workload, topo.hosts, s.seed, None)?,
    };
    let actions = expand_failures(&topo, &s.failures, "failures")?;
    let q = s.topology.queue;
    let rs = RunSettings {
        transport: s.transport.clone(),
        ecn: q.ecn,
        trimming: q.trimming,
        kmin: q.ecn_kmin,
        kmax: q.ecn_kmax,
        ecn_dequeue: q.ecn_mark == crate::scenario::EcnMark::Dequeue,
        ecn_last_hop: q.ecn_last_hop,
        trim_tail: q.trim_victim == crate::scenario::TrimVictim::ArrivalOrTail,
        trimmed_bytes: q.trimmed_bytes,
        header_buffer: q.header_buffer_bytes,
        scale_slowed_buffer: q.slowed_buffer == crate::scenario::SlowedBuffer::Scale,
        seed: s.seed,
        bin_ps: ps(s.run.bin_us),
        settle_ps: ps(s.run.settle_us),
        threads: s.run.threads,
        time_order: s.run.time_order,
    };
    Ok(Prepared {
        topo,
        workload,
        actions,
        rs,
    })
}

/// Runs one variant; `progress` hears where it stands now and then and may stop the run by returning false.
pub fn run_one(
    topo: Topology,
    workload: Workload,
    actions: Vec<(u64, Action)>,
    rs: &RunSettings,
    limit_ps: u64,
    progress: &mut dyn FnMut(&Progress) -> bool,
) -> Result<Outcome, ScenarioError> {
    let sim = Sim::new(topo, workload, actions, rs)?;
    Ok(sim.run(limit_ps, progress))
}

/// Runs a scenario: the failed run, and unless turned off the healthy baseline and the victim alone.
/// `progress(phase, ps)` is called now and then; returning false stops the run where it is (the report then
/// says the transfers did not finish).
pub fn run_scenario(
    s: &Scenario,
    baseline: bool,
    progress: &mut dyn FnMut(&str, u64) -> bool,
) -> Result<Report, ScenarioError> {
    run_scenario_captured(s, baseline, None, progress)
}

/// [`run_scenario`], capturing packets of the failed run as `capture` says (capture.rs); the report's
/// `capture` line says what was written.
pub fn run_scenario_captured(
    s: &Scenario,
    baseline: bool,
    capture: Option<&CaptureSpec>,
    progress: &mut dyn FnMut(&str, u64) -> bool,
) -> Result<Report, ScenarioError> {
    run_scenario_with(s, baseline, capture, &mut |phase, p| {
        progress(phase, p.now_ps)
    })
}

/// [`run_scenario_captured`] with the whole [`Progress`] of each phase (`baseline`, `victim alone`, `run`):
/// what a progress bar with an honest ETA needs (the payload placed, not the simulated time, whose end only the
/// run finds out).
pub fn run_scenario_with(
    s: &Scenario,
    baseline: bool,
    capture: Option<&CaptureSpec>,
    progress: &mut dyn FnMut(&str, &Progress) -> bool,
) -> Result<Report, ScenarioError> {
    let plan = Plan::new(s)?;
    let p = prepare(s, &plan)?;
    let limit = ps(s.run.limit_us);
    let bin = ps(s.run.bin_us);
    let xfers: Vec<Transfer> = p.workload.transfers.clone();
    let victim = Workload {
        transfers: xfers
            .iter()
            .filter(|t| t.victim)
            .map(|t| Transfer {
                triggered: false,
                fires: Vec::new(),
                ..t.clone()
            })
            .collect(),
        triggers: Vec::new(),
    };
    let has_failures = !p.actions.is_empty();
    let base = if baseline && has_failures {
        let o = run_one(
            p.topo.clone(),
            p.workload.clone(),
            Vec::new(),
            &p.rs,
            limit,
            &mut |t: &Progress| progress("baseline", t),
        )?;
        Some(RunSummary::new(&o, &xfers, bin))
    } else {
        None
    };
    let alone = if baseline && !victim.transfers.is_empty() {
        let o = run_one(
            p.topo.clone(),
            victim.clone(),
            Vec::new(),
            &p.rs,
            limit,
            &mut |t: &Progress| progress("victim alone", t),
        )?;
        Some(RunSummary::new(&o, &victim.transfers, bin))
    } else {
        None
    };
    let hosts = p.topo.hosts;
    let planes = p.topo.shape.planes;
    let rtt_us = p.topo.base_rtt_ps as f64 / 1e6;
    let ideal = crate::ideal::ideal(
        &p.topo,
        &xfers,
        &p.actions,
        frame_bytes(s),
        u64::from(s.transport.mtu),
    );
    let mut sim = Sim::new(p.topo, p.workload, p.actions, &p.rs)?;
    if let Some(c) = capture {
        let c = SimCapture::new(c, sim.topo())?;
        sim.set_capture(c);
    }
    let main = sim.run(limit, &mut |t: &Progress| progress("run", t));
    if let Some(Err(e)) = &main.capture {
        return Err(ScenarioError::new("capture", e.clone()));
    }
    let main = RunSummary::new(&main, &xfers, bin);
    Ok(Report::new(
        s, hosts, planes, rtt_us, &xfers, main, base, alone, ideal,
    ))
}
