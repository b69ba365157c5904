//! Workloads as point-to-point transfers with dependencies: a transfer starts once every transfer it waits
//! for has completed (plus an optional compute delay), which is enough for collectives and htsim triggers.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::scenario::{ScenarioError, WorkloadCfg, WorkloadKind};

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
    /// Completions it waits for before starting (a count: triggers may have more signallers than needed).
    pub waits: u32,
    /// Transfers that wait for this one.
    pub signals: Vec<u32>,
    /// Delay between the last awaited completion and the start, in ps (compute time).
    pub delay_ps: u64,
    /// The incast victim.
    pub victim: bool,
}

fn xfer(src: u32, dst: u32, bytes: u64, start_ps: u64) -> Transfer {
    Transfer {
        src,
        dst,
        bytes,
        start_ps,
        waits: 0,
        signals: Vec::new(),
        delay_ps: 0,
        victim: false,
    }
}

fn us_to_ps(us: f64) -> u64 {
    (us * 1e6).round() as u64
}

pub use crate::scenario::MAX_TRANSFER;

/// Builds the transfers of a workload on `hosts` hosts.
pub fn build(w: &WorkloadCfg, hosts: u32, seed: u64) -> Result<Vec<Transfer>, ScenarioError> {
    let n = w.hosts.unwrap_or(hosts);
    if n < 2 || n > hosts {
        return Err(ScenarioError::new(
            "workload.hosts",
            format!("{n} hosts; use 2..={hosts} (the topology has {hosts})"),
        ));
    }
    if w.bytes > MAX_TRANSFER {
        return Err(ScenarioError::new(
            "workload.bytes",
            format!("{} bytes; one transfer is at most {MAX_TRANSFER}", w.bytes),
        ));
    }
    let start = us_to_ps(w.start_us);
    let compute = us_to_ps(w.compute_us);
    let mut v = Vec::new();
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
            for (i, &s) in sources.iter().enumerate() {
                if s >= hosts || s == w.target {
                    return Err(ScenarioError::new(
                        format!("workload.sources[{i}]"),
                        format!("host {s}; use 0..{hosts}, not the target {}", w.target),
                    ));
                }
                v.push(xfer(s, w.target, w.bytes, start));
            }
            if w.target >= hosts {
                return Err(ScenarioError::new(
                    "workload.target",
                    format!("host {}; use 0..{hosts}", w.target),
                ));
            }
            if let Some(vc) = w.victim {
                if vc.src >= hosts || vc.dst >= hosts || vc.src == vc.dst || vc.bytes == 0 {
                    return Err(ScenarioError::new(
                        "workload.victim",
                        format!("src and dst must be distinct hosts in 0..{hosts}, bytes positive"),
                    ));
                }
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
            let id = |step: u32, r: u32| (step * n + r) as usize;
            for step in 0..steps {
                for r in 0..n {
                    let mut t = xfer(r, (r + 1) % n, chunk, start);
                    if step > 0 {
                        t.waits = 2;
                        t.delay_ps = compute;
                    }
                    v.push(t);
                }
            }
            for step in 1..steps {
                for r in 0..n {
                    let me = id(step, r) as u32;
                    v[id(step - 1, (r + n - 1) % n)].signals.push(me);
                    v[id(step - 1, r)].signals.push(me);
                }
            }
        }
        WorkloadKind::TreeAllreduce => {
            // Reduce: child -> parent once the child has heard from its own children; then broadcast back.
            let parent = |r: u32| (r - 1) / 2;
            let children = |r: u32| [2 * r + 1, 2 * r + 2].into_iter().filter(|&c| c < n);
            let mut up = vec![u32::MAX; n as usize];
            for r in 1..n {
                let mut t = xfer(r, parent(r), w.bytes, start);
                t.delay_ps = compute;
                up[r as usize] = v.len() as u32;
                v.push(t);
            }
            for r in 1..n {
                let me = up[r as usize];
                for c in children(r) {
                    v[up[c as usize] as usize].signals.push(me);
                    v[me as usize].waits += 1;
                }
            }
            let mut down = vec![u32::MAX; n as usize];
            for r in 1..n {
                let mut t = xfer(parent(r), r, w.bytes, start);
                t.delay_ps = compute;
                down[r as usize] = v.len() as u32;
                v.push(t);
            }
            for r in 1..n {
                let me = down[r as usize];
                let p = parent(r);
                if p == 0 {
                    for c in children(0) {
                        v[up[c as usize] as usize].signals.push(me);
                        v[me as usize].waits += 1;
                    }
                } else {
                    v[down[p as usize] as usize].signals.push(me);
                    v[me as usize].waits += 1;
                }
            }
        }
        WorkloadKind::Htsim => {
            let path = w.file.as_deref().unwrap_or(std::path::Path::new(""));
            let text = std::fs::read_to_string(path).map_err(|e| {
                ScenarioError::new("workload.file", format!("{}: {e}", path.display()))
            })?;
            v = parse_htsim_cm(&text, hosts)?;
        }
    }
    Ok(v)
}

/// Parses htsim's connection-matrix format: header lines (`Nodes`, `Connections`, `Triggers`, `Failures`),
/// flows `SRC->DST [id N] [start T_us] [size B] [trigger T] [send_done_trigger T] [recv_done_trigger T]`,
/// and triggers `trigger id T oneshot | barrier N | multishot`.
pub fn parse_htsim_cm(text: &str, hosts: u32) -> Result<Vec<Transfer>, ScenarioError> {
    struct Flow {
        t: Transfer,
        waits_on: Option<u64>,
        fires: Vec<u64>,
    }
    let mut flows: Vec<Flow> = Vec::new();
    let mut triggers: Vec<(u64, u32)> = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let err = |what: &str| {
            ScenarioError::new(
                format!("workload.file line {}", ln + 1),
                format!("{what} in `{line}`"),
            )
        };
        let toks: Vec<&str> = line.split_whitespace().collect();
        let first = toks[0].to_ascii_lowercase();
        if ["nodes", "connections", "triggers", "failures"].contains(&first.as_str()) {
            continue;
        }
        let num = |s: Option<&&str>| -> Result<f64, ScenarioError> {
            s.and_then(|x| x.parse::<f64>().ok())
                .ok_or_else(|| err("expected a number"))
        };
        if first == "trigger" {
            let id = num(toks.get(2))? as u64;
            let kind = toks.get(3).copied().unwrap_or("oneshot");
            let need = match kind {
                "oneshot" | "multishot" => 1,
                "barrier" => num(toks.get(4))? as u32,
                _ => return Err(err("trigger kind must be oneshot, multishot or barrier N")),
            };
            triggers.push((id, need));
            continue;
        }
        let Some((s, d)) = toks[0].split_once("->") else {
            return Err(err("expected `SRC->DST ...` or a header/trigger line"));
        };
        let (Ok(s), Ok(d)) = (s.parse::<u32>(), d.parse::<u32>()) else {
            return Err(err("SRC and DST must be host numbers"));
        };
        if s >= hosts || d >= hosts || s == d {
            return Err(err(&format!("hosts must be distinct and in 0..{hosts}")));
        }
        let mut f = Flow {
            t: xfer(s, d, 0, 0),
            waits_on: None,
            fires: Vec::new(),
        };
        let mut i = 1;
        while i < toks.len() {
            let v = num(toks.get(i + 1))?;
            match toks[i] {
                "id" => {}
                "start" => f.t.start_ps = us_to_ps(v),
                "size" => f.t.bytes = v as u64,
                "trigger" => f.waits_on = Some(v as u64),
                "send_done_trigger" | "recv_done_trigger" => f.fires.push(v as u64),
                "priority" => {}
                k => {
                    return Err(err(&format!(
                        "unknown key `{k}`; use id, start, size, trigger, send_done_trigger, recv_done_trigger"
                    )));
                }
            }
            i += 2;
        }
        if f.t.bytes == 0 || f.t.bytes > MAX_TRANSFER {
            return Err(err(&format!("size must be in 1..={MAX_TRANSFER}")));
        }
        flows.push(f);
    }
    let mut v: Vec<Transfer> = Vec::with_capacity(flows.len());
    for f in &flows {
        let mut t = f.t.clone();
        if let Some(tr) = f.waits_on {
            let Some(&(_, need)) = triggers.iter().find(|x| x.0 == tr) else {
                return Err(ScenarioError::new(
                    "workload.file",
                    format!("trigger {tr} is used but never declared (`trigger id {tr} oneshot`)"),
                ));
            };
            t.waits = need;
        }
        v.push(t);
    }
    for (i, f) in flows.iter().enumerate() {
        for &tr in &f.fires {
            for (j, g) in flows.iter().enumerate() {
                if g.waits_on == Some(tr) {
                    v[i].signals.push(j as u32);
                }
            }
        }
    }
    Ok(v)
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

    #[test]
    fn permutation_is_a_derangement_and_seeded() {
        let a = build(&wl(WorkloadKind::Permutation), 64, 1).unwrap();
        let mut dsts: Vec<u32> = a.iter().map(|t| t.dst).collect();
        assert!(a.iter().all(|t| t.src != t.dst));
        dsts.sort_unstable();
        assert_eq!(dsts, (0..64).collect::<Vec<_>>());
        assert_eq!(a, build(&wl(WorkloadKind::Permutation), 64, 1).unwrap());
        assert_ne!(a, build(&wl(WorkloadKind::Permutation), 64, 2).unwrap());
    }

    #[test]
    fn collectives_have_consistent_dependencies() {
        for kind in [WorkloadKind::RingAllreduce, WorkloadKind::TreeAllreduce] {
            let v = build(&wl(kind), 7, 1).unwrap();
            let mut got = vec![0u32; v.len()];
            for t in &v {
                for &s in &t.signals {
                    got[s as usize] += 1;
                }
            }
            for (t, g) in v.iter().zip(&got) {
                assert_eq!(t.waits, *g, "{kind:?}");
            }
            assert!(v.iter().any(|t| t.waits == 0));
        }
    }

    #[test]
    fn htsim_matrix_parses_triggers() {
        let cm = "Nodes 4\nConnections 2\nTriggers 1\n0->1 id 1 start 0 size 1000 send_done_trigger 1\n\
                  2->3 id 2 size 500 trigger 1\ntrigger id 1 oneshot\n";
        let v = parse_htsim_cm(cm, 4).unwrap();
        assert_eq!(v.len(), 2);
        assert_eq!(v[0].signals, vec![1]);
        assert_eq!(v[1].waits, 1);
        let e = parse_htsim_cm("0->9 size 5\n", 4).unwrap_err();
        assert!(e.problem.contains("0..4"), "{e}");
    }
}
