//! Workloads as point-to-point transfers and triggers: a transfer starts at its start time, or when the
//! trigger it waits on fires (plus an optional compute delay). Triggers are htsim's: a oneshot fires its
//! targets on its first activation, a barrier on its N-th, a multishot starts its next target on each
//! activation; a transfer activates the triggers it names when it completes. Collectives are built from
//! barriers.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

pub use crate::scenario::MAX_TRANSFER;
use crate::scenario::{MAX_TIME_US, ScenarioError, WorkloadCfg, WorkloadKind};

/// One transfer (an RDMA WRITE of `bytes` from `src` to `dst`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Transfer {
    /// Sender.
    pub src: u32,
    /// Receiver.
    pub dst: u32,
    /// Bytes.
    pub bytes: u64,
    /// Earliest start, in ps.
    pub start_ps: u64,
    /// Whether it waits for a trigger (else it starts at `start_ps`).
    pub triggered: bool,
    /// Triggers (indices) it activates when it completes.
    pub fires: Vec<u32>,
    /// The incast victim.
    pub victim: bool,
}

/// How a trigger starts its targets.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TriggerKind {
    /// All targets on the first activation; later activations do nothing.
    Oneshot,
    /// One more target (in order) on each activation.
    Multishot,
    /// All targets on the N-th activation.
    Barrier(u32),
}

/// A trigger.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Trigger {
    /// Kind.
    pub kind: TriggerKind,
    /// Transfers it starts.
    pub targets: Vec<u32>,
    /// Delay between firing and the targets' start, in ps (compute time).
    pub delay_ps: u64,
}

/// Transfers and the triggers that chain them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workload {
    /// Transfers.
    pub transfers: Vec<Transfer>,
    /// Triggers.
    pub triggers: Vec<Trigger>,
}

fn xfer(src: u32, dst: u32, bytes: u64, start_ps: u64) -> Transfer {
    Transfer {
        src,
        dst,
        bytes,
        start_ps,
        triggered: false,
        fires: Vec::new(),
        victim: false,
    }
}

impl Workload {
    /// Makes `target` wait for a new barrier that `sources` activate.
    fn barrier(&mut self, sources: &[u32], target: u32, delay_ps: u64) {
        let id = self.triggers.len() as u32;
        self.triggers.push(Trigger {
            kind: TriggerKind::Barrier(sources.len() as u32),
            targets: vec![target],
            delay_ps,
        });
        self.transfers[target as usize].triggered = true;
        for &s in sources {
            self.transfers[s as usize].fires.push(id);
        }
    }
}

fn us_to_ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

/// Transfers and distinct (src, dst) pairs a workload makes on `n` hosts, without building it (`None` for
/// an htsim matrix, whose count the file gives).
pub fn counts(w: &WorkloadCfg, hosts: u32) -> Option<(u64, u64)> {
    let n = u64::from(w.hosts.unwrap_or(hosts));
    Some(match w.kind {
        WorkloadKind::Permutation => (n, n),
        WorkloadKind::AllToAll => (n * (n - 1), n * (n - 1)),
        WorkloadKind::Incast => {
            let s = w
                .sources
                .as_ref()
                .map_or(u64::from(w.senders), |s| s.len() as u64);
            let v = u64::from(w.victim.is_some());
            (s + v, s + v)
        }
        WorkloadKind::RingAllreduce => (2 * (n - 1) * n, n),
        WorkloadKind::TreeAllreduce => (2 * (n - 1), 2 * (n - 1)),
        WorkloadKind::Htsim => return None,
    })
}

/// Builds the transfers of a workload on `hosts` hosts; `matrix` is the text of an htsim connection matrix.
pub fn build(
    w: &WorkloadCfg,
    hosts: u32,
    seed: u64,
    matrix: Option<&str>,
) -> Result<Workload, ScenarioError> {
    let n = w.hosts.unwrap_or(hosts);
    if n < 2 || n > hosts {
        return Err(ScenarioError::new(
            "workload.hosts",
            format!("{n} hosts; use 2..={hosts} (the topology has {hosts})"),
        ));
    }
    let start = us_to_ps(w.start_us);
    let compute = us_to_ps(w.compute_us);
    let mut wl = Workload::default();
    let v = &mut wl.transfers;
    match w.kind {
        WorkloadKind::Permutation => {
            let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5045_524D);
            let mut perm: Vec<u32> = (0..n).collect();
            for i in (1..n as usize).rev() {
                let j = (rng.next_u64() % (i as u64 + 1)) as usize;
                perm.swap(i, j);
            }
            // Remove fixed points by swapping with the next position (keeps a permutation).
            for i in 0..n as usize {
                if perm[i] == i as u32 {
                    let j = (i + 1) % n as usize;
                    perm.swap(i, j);
                }
            }
            for (s, &d) in perm.iter().enumerate() {
                v.push(xfer(s as u32, d, w.bytes, start));
            }
        }
        WorkloadKind::AllToAll => {
            for s in 0..n {
                for k in 1..n {
                    v.push(xfer(s, (s + k) % n, w.bytes, start));
                }
            }
        }
        WorkloadKind::Incast => {
            let sources: Vec<u32> = match &w.sources {
                Some(s) => s.clone(),
                None => (1..=w.senders).map(|i| (w.target + i) % hosts).collect(),
            };
            for s in sources {
                v.push(xfer(s, w.target, w.bytes, start));
            }
            if let Some(vc) = w.victim {
                let mut t = xfer(vc.src, vc.dst, vc.bytes, start);
                t.victim = true;
                v.push(t);
            }
        }
        WorkloadKind::RingAllreduce => {
            // 2(N-1) steps; at step s rank r sends a chunk to r+1 once it has received step s-1 from r-1
            // and finished sending its own step s-1.
            let chunk = w.bytes.div_ceil(u64::from(n)).max(1);
            let steps = 2 * (n - 1);
            let id = |step: u32, r: u32| step * n + r;
            for _ in 0..steps {
                for r in 0..n {
                    v.push(xfer(r, (r + 1) % n, chunk, start));
                }
            }
            for step in 1..steps {
                for r in 0..n {
                    let deps = [id(step - 1, (r + n - 1) % n), id(step - 1, r)];
                    wl.barrier(&deps, id(step, r), compute);
                }
            }
        }
        WorkloadKind::TreeAllreduce => {
            // Reduce: child -> parent once the child has heard from its own children; then broadcast back.
            let parent = |r: u32| (r - 1) / 2;
            let children = |r: u32| [2 * r + 1, 2 * r + 2].into_iter().filter(move |&c| c < n);
            let mut up = vec![u32::MAX; n as usize];
            for r in 1..n {
                up[r as usize] = v.len() as u32;
                v.push(xfer(r, parent(r), w.bytes, start));
            }
            let mut down = vec![u32::MAX; n as usize];
            for r in 1..n {
                down[r as usize] = v.len() as u32;
                v.push(xfer(parent(r), r, w.bytes, start));
            }
            for r in 1..n {
                let deps: Vec<u32> = children(r).map(|c| up[c as usize]).collect();
                if !deps.is_empty() {
                    wl.barrier(&deps, up[r as usize], compute);
                }
                let deps: Vec<u32> = if parent(r) == 0 {
                    children(0).map(|c| up[c as usize]).collect()
                } else {
                    vec![down[parent(r) as usize]]
                };
                wl.barrier(&deps, down[r as usize], compute);
            }
        }
        WorkloadKind::Htsim => {
            wl = parse_htsim_cm(matrix.unwrap_or(""), hosts)?;
        }
    }
    Ok(wl)
}

/// Parses htsim's connection-matrix format (the subset `sim/README.md` documents). Header lines `Nodes N`,
/// `Connections C`, `Triggers T` (counts, checked when given); flows `SRC->DST` with `id N`, `start T_us`,
/// `size B`, `trigger ID`, `send_done_trigger ID`, `recv_done_trigger ID` (both fire when the transfer
/// completes at the sender: the simulator has one completion per transfer); triggers
/// `trigger id N oneshot | multishot | barrier count N`. Every other keyword (`prio`, `addon`, `failure`,
/// `Failures` and anything unknown) is refused by name, as is every number that is not whole.
pub fn parse_htsim_cm(text: &str, hosts: u32) -> Result<Workload, ScenarioError> {
    let mut flows: Vec<Flow> = Vec::new();
    let mut ids: Vec<u64> = Vec::new();
    // (id, kind, line)
    let mut triggers: Vec<(u64, TriggerKind, usize)> = Vec::new();
    let mut declared: [Option<u64>; 3] = [None; 3]; // nodes, connections, triggers
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let l = Line {
            ln: ln + 1,
            toks: line.split_whitespace().collect(),
        };
        let toks = &l.toks;
        let head = match toks[0] {
            "Nodes" => Some(0),
            "Connections" => Some(1),
            "Triggers" => Some(2),
            _ => None,
        };
        if let Some(k) = head {
            if toks.len() != 2 {
                return Err(l.err(format!(
                    "`{}` takes one number",
                    ["Nodes", "Connections", "Triggers"][k]
                )));
            }
            declared[k] = Some(l.whole(1)?);
            continue;
        }
        if toks[0] == "Failures" || toks[0] == "failure" {
            return Err(l.err(format!(
                "`{}`: htsim's static link failures are not imported; write them as [[failures]] in the \
                 scenario (they can start and end at any time)",
                toks[0]
            )));
        }
        if toks[0] == "trigger" {
            let (id, kind) = l.trigger()?;
            if triggers.iter().any(|t| t.0 == id) {
                return Err(l.err(format!("trigger {id} declared twice")));
            }
            triggers.push((id, kind, l.ln));
            continue;
        }
        flows.push(l.flow(hosts, &mut ids)?);
    }
    for (k, (name, n)) in [("Connections", flows.len()), ("Triggers", triggers.len())]
        .into_iter()
        .enumerate()
    {
        if let Some(d) = declared[k + 1]
            && d != n as u64
        {
            return Err(ScenarioError::new(
                format!("workload.file {name}"),
                format!("says {d} but the file has {n}; fix the count"),
            ));
        }
    }
    if let Some(d) = declared[0]
        && d > u64::from(hosts)
    {
        return Err(ScenarioError::new(
            "workload.file Nodes",
            format!("{d} nodes but the topology has {hosts} hosts"),
        ));
    }
    link_triggers(&flows, &triggers)
}

/// A flow of a connection matrix, before its triggers are resolved.
struct Flow {
    t: Transfer,
    line: usize,
    waits_on: Option<u64>,
    fires: Vec<u64>,
}

/// One line of a connection matrix, split into words.
struct Line<'a> {
    ln: usize,
    toks: Vec<&'a str>,
}

impl Line<'_> {
    fn err(&self, what: String) -> ScenarioError {
        ScenarioError::new(format!("workload.file line {}", self.ln), what)
    }

    /// Word `i` as a whole number. The file's own words are never quoted back (it may be any file).
    fn whole(&self, i: usize) -> Result<u64, ScenarioError> {
        let t = self.toks.get(i).copied().unwrap_or("");
        t.parse::<u64>()
            .map_err(|_| self.err(format!("word {} needs a whole number", i + 1)))
    }

    /// `trigger id N oneshot | multishot | barrier count N`.
    fn trigger(&self) -> Result<(u64, TriggerKind), ScenarioError> {
        let mut id = None;
        let mut kind = None;
        let mut count = None;
        let mut i = 1;
        while i < self.toks.len() {
            match self.toks[i] {
                "id" => {
                    id = Some(self.whole(i + 1)?);
                    i += 2;
                }
                "count" => {
                    count = Some(self.whole(i + 1)?);
                    i += 2;
                }
                k @ ("oneshot" | "multishot" | "barrier") => {
                    if kind.replace(k).is_some() {
                        return Err(self.err("a trigger has one kind".into()));
                    }
                    i += 1;
                }
                _ => {
                    return Err(self.err(
                            "an unknown trigger keyword; use id N, oneshot, multishot, or barrier count N".into(),
                        ));
                }
            }
        }
        let Some(id) = id.filter(|&x| x != 0) else {
            return Err(self.err("a trigger needs id N (N > 0)".into()));
        };
        let kind = match (kind, count) {
            (Some("oneshot"), None) => TriggerKind::Oneshot,
            (Some("multishot"), None) => TriggerKind::Multishot,
            (Some("barrier"), Some(c)) if (1..=u64::from(u32::MAX)).contains(&c) => {
                TriggerKind::Barrier(c as u32)
            }
            (Some("barrier"), _) => {
                return Err(self.err("a barrier needs count N (N >= 1)".into()));
            }
            (Some(_), Some(_)) => {
                return Err(self.err("count belongs to barrier triggers only".into()));
            }
            (None, _) => {
                return Err(self
                    .err("a trigger needs a kind: oneshot, multishot or barrier count N".into()));
            }
            (Some(_), None) => TriggerKind::Oneshot,
        };
        Ok((id, kind))
    }

    /// `SRC->DST` with its keywords.
    fn flow(&self, hosts: u32, ids: &mut Vec<u64>) -> Result<Flow, ScenarioError> {
        let Some((s, d)) = self.toks[0].split_once("->") else {
            return Err(self.err(
                "an unknown line; expected `SRC->DST ...`, `trigger ...` or a header (Nodes, Connections, \
                 Triggers)"
                    .into(),
            ));
        };
        let (Ok(s), Ok(d)) = (s.parse::<u32>(), d.parse::<u32>()) else {
            return Err(self.err("SRC and DST must be host numbers".into()));
        };
        if s >= hosts || d >= hosts || s == d {
            return Err(self.err(format!(
                "hosts must be distinct and in 0..={} (the topology has {hosts})",
                hosts.saturating_sub(1)
            )));
        }
        let mut f = Flow {
            t: xfer(s, d, 0, 0),
            line: self.ln,
            waits_on: None,
            fires: Vec::new(),
        };
        let mut started = false;
        let mut i = 1;
        while i < self.toks.len() {
            let key = self.toks[i];
            match key {
                "id" => {
                    let id = self.whole(i + 1)?;
                    if id == 0 || ids.contains(&id) {
                        return Err(self.err(format!("flow id {id}: ids are nonzero and unique")));
                    }
                    ids.push(id);
                }
                "start" => {
                    let t = self.toks.get(i + 1).copied().unwrap_or("");
                    let us = t
                        .parse::<f64>()
                        .ok()
                        .filter(|v| v.is_finite() && (0.0..=MAX_TIME_US).contains(v))
                        .ok_or_else(|| {
                            self.err(format!("start needs a time in us, 0..={MAX_TIME_US:e}"))
                        })?;
                    f.t.start_ps = us_to_ps(us);
                    started = true;
                }
                "size" => f.t.bytes = self.whole(i + 1)?,
                "trigger" => f.waits_on = Some(self.whole(i + 1)?),
                "send_done_trigger" | "recv_done_trigger" => f.fires.push(self.whole(i + 1)?),
                "prio" => {
                    return Err(self.err(
                        "`prio`: flow priorities are not modelled (every QP is served alike); remove it".into(),
                    ));
                }
                _ => {
                    return Err(self.err(
                        "an unknown flow keyword; use id, start, size, trigger, send_done_trigger, \
                         recv_done_trigger"
                            .into(),
                    ));
                }
            }
            i += 2;
        }
        if !(1..=MAX_TRANSFER).contains(&f.t.bytes) {
            return Err(self.err(format!("size must be in 1..={MAX_TRANSFER}")));
        }
        match (started, f.waits_on) {
            (false, None) => return Err(self.err("a flow needs start T or trigger ID".into())),
            (true, Some(_)) => {
                return Err(self.err(
                    "start and trigger both given: a triggered flow starts when it fires".into(),
                ));
            }
            _ => {}
        }
        Ok(f)
    }
}

/// The workload of `flows`, each trigger pointing at the flows it starts; a trigger used but never
/// declared, or declared but starting no flow, is refused with its line.
fn link_triggers(
    flows: &[Flow],
    triggers: &[(u64, TriggerKind, usize)],
) -> Result<Workload, ScenarioError> {
    let index = |id: u64| triggers.iter().position(|t| t.0 == id).map(|i| i as u32);
    let mut wl = Workload {
        transfers: Vec::with_capacity(flows.len()),
        triggers: triggers
            .iter()
            .map(|&(_, kind, _)| Trigger {
                kind,
                targets: Vec::new(),
                delay_ps: 0,
            })
            .collect(),
    };
    for (i, f) in flows.iter().enumerate() {
        let mut t = f.t.clone();
        let unknown = |id: u64| {
            ScenarioError::new(
                format!("workload.file line {}", f.line),
                format!("trigger {id} is used but never declared (`trigger id {id} oneshot`)"),
            )
        };
        if let Some(id) = f.waits_on {
            let k = index(id).ok_or_else(|| unknown(id))?;
            t.triggered = true;
            wl.triggers[k as usize].targets.push(i as u32);
        }
        for &id in &f.fires {
            t.fires.push(index(id).ok_or_else(|| unknown(id))?);
        }
        wl.transfers.push(t);
    }
    for (k, tr) in wl.triggers.iter().enumerate() {
        if tr.targets.is_empty() {
            return Err(ScenarioError::new(
                format!("workload.file line {}", triggers[k].2),
                format!("trigger {} starts no flow", triggers[k].0),
            ));
        }
    }
    Ok(wl)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wl(kind: WorkloadKind) -> WorkloadCfg {
        WorkloadCfg {
            kind,
            bytes: 1000,
            hosts: None,
            start_us: 0.0,
            senders: 3,
            sources: None,
            target: 0,
            victim: None,
            compute_us: 0.0,
            file: None,
        }
    }

    fn transfers(kind: WorkloadKind, hosts: u32, seed: u64) -> Vec<Transfer> {
        build(&wl(kind), hosts, seed, None).unwrap().transfers
    }

    #[test]
    fn permutation_is_a_derangement_and_seeded() {
        let a = transfers(WorkloadKind::Permutation, 64, 1);
        let mut dsts: Vec<u32> = a.iter().map(|t| t.dst).collect();
        assert!(a.iter().all(|t| t.src != t.dst));
        dsts.sort_unstable();
        assert_eq!(dsts, (0..64).collect::<Vec<_>>());
        assert_eq!(a, transfers(WorkloadKind::Permutation, 64, 1));
        assert_ne!(a, transfers(WorkloadKind::Permutation, 64, 2));
    }

    #[test]
    fn collectives_have_consistent_dependencies() {
        for kind in [WorkloadKind::RingAllreduce, WorkloadKind::TreeAllreduce] {
            let w = build(&wl(kind), 7, 1, None).unwrap();
            let mut activations = vec![0u32; w.triggers.len()];
            for t in &w.transfers {
                for &f in &t.fires {
                    activations[f as usize] += 1;
                }
            }
            for (tr, n) in w.triggers.iter().zip(&activations) {
                assert_eq!(tr.kind, TriggerKind::Barrier(*n), "{kind:?}");
                assert!(
                    tr.targets
                        .iter()
                        .all(|&x| w.transfers[x as usize].triggered)
                );
            }
            assert!(w.transfers.iter().any(|t| !t.triggered));
            let (n, _) = counts(&wl(kind), 7).unwrap();
            assert_eq!(n, w.transfers.len() as u64);
        }
    }

    #[test]
    fn htsim_matrix_parses_triggers() {
        let cm = "Nodes 4\nConnections 4\nTriggers 2\n0->1 id 1 start 0 size 1000 send_done_trigger 1\n\
                  2->3 id 2 size 500 trigger 1\n1->2 id 3 start 2.5 size 10 recv_done_trigger 2\n\
                  3->0 id 4 trigger 2 size 7\ntrigger id 1 oneshot\ntrigger id 2 barrier count 1\n";
        let w = parse_htsim_cm(cm, 4).unwrap();
        let v = &w.transfers;
        assert_eq!(v.len(), 4);
        assert_eq!(v[0].fires, vec![0]);
        assert!(v[1].triggered && v[3].triggered);
        assert_eq!(v[2].start_ps, 2_500_000);
        assert_eq!(w.triggers[0].targets, vec![1]);
        assert_eq!(w.triggers[1].kind, TriggerKind::Barrier(1));
        let e = parse_htsim_cm("0->9 start 0 size 5\n", 4).unwrap_err();
        assert!(e.problem.contains("0..=3"), "{e}");
    }

    /// htsim keywords the simulator does not model are refused by name, never skipped.
    #[test]
    fn htsim_matrix_refuses_what_it_does_not_model() {
        let ok = "0->1 id 1 start 0 size 1000\n";
        assert!(parse_htsim_cm(ok, 4).is_ok());
        for (bad, want) in [
            ("0->1 id 1 start 0 size 1000 prio 1\n", "`prio`"),
            (
                "0->1 id 1 start 0 size 1000 addon 1\n",
                "unknown flow keyword",
            ),
            ("Failures 1\n", "`Failures`"),
            (
                "failure switch_type AGG switch_id 0 link_id 0\n",
                "`failure`",
            ),
            ("0->1 id 1 start 0 size 1.5e3\n", "whole number"),
            ("0->1 id 1 start 0 size 10 trigger 1\n", "both given"),
            ("0->1 id 1 size 10\n", "start T or trigger"),
            ("Connections 2\n0->1 id 1 start 0 size 10\n", "says 2"),
            ("0->1 id 1 trigger 7 size 10\n", "never declared"),
            ("trigger id 3 barrier\n", "count N"),
            ("trigger id 3 sometimes\n", "unknown trigger keyword"),
            ("bogus 1\n", "an unknown line"),
        ] {
            let e = parse_htsim_cm(bad, 4).unwrap_err();
            assert!(e.to_string().contains(want), "{bad:?}: {e}");
        }
    }
}
