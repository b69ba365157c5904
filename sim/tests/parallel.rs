//! One scenario on several threads gives the outputs of one (src/sim/par.rs), and a run that takes each window
//! leaf by leaf those of one in time order (src/sim/window.rs), and so does one in phases of two lookaheads
//! (src/sim/phases.rs: every run on one thread without failure actions, baselines included): report.json and
//! flows.csv are byte-identical for 1, 2 and 4 threads and for 1 thread in time order on every shipped scenario. Large fabrics are shrunk
//! (at most 16 T0 of 16 hosts and 32 T1 per plane, every plane kept, explicit sources outside dropped, runs cut
//! at 400 µs) to keep CI short; a sweep scenario runs with its first failure set.

mod common;

use mrc_sim::plan::Plan;
use mrc_sim::{Scenario, run_scenario};
use std::path::{Path, PathBuf};

fn shrink(s: &mut Scenario) {
    let t = &mut s.topology;
    let hosts = u64::from(t.t0) * u64::from(t.hosts_per_t0) * u64::from(t.pods.max(1));
    if hosts > 256 {
        t.t0 = t.t0.min(16);
        t.hosts_per_t0 = t.hosts_per_t0.min(16);
        t.t1 = t.t1.min(32);
        s.run.limit_us = s.run.limit_us.min(400.0);
        let kept = t.t0 * t.hosts_per_t0 * t.pods.max(1);
        if let Some(src) = &mut s.workload.sources {
            src.retain(|&h| h < kept);
        }
    }
    if let Some(set) = s.sweep.failure_sets.first().cloned() {
        s.failures.extend(set.failures);
        s.sweep.failure_sets.clear();
    }
}

/// report.json and flows.csv of a run on `threads` threads, by position or in time order (baselines included).
fn outputs(s: &Scenario, threads: usize, time_order: bool, dir: &Path) -> (String, String) {
    let mut s = s.clone();
    s.run.threads = threads;
    s.run.time_order = time_order;
    let r = run_scenario(&s, true, &mut |_, _| true)
        .unwrap_or_else(|e| panic!("{} on {threads} threads: {e}", s.name));
    let d = dir.join(format!("{}-{threads}", s.name));
    r.write(&d).expect("write outputs");
    let read = |f: &str| std::fs::read_to_string(d.join(f)).expect("read output");
    let out = (read("report.json"), read("flows.csv"));
    let _ = std::fs::remove_dir_all(&d);
    out
}

fn scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("scenarios folder")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    v.sort();
    v
}

#[test]
fn every_shipped_scenario_is_the_same_on_1_2_and_4_threads_and_in_time_order() {
    let scratch = common::scratch("parallel");
    let tmp = scratch.path();
    let files = scenarios();
    assert!(files.len() >= 15, "found only {files:?}");
    for f in files {
        let mut s = Scenario::load(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        shrink(&mut s);
        let plan = Plan::new(&s).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
        let topo = mrc_sim::run::prepare(&s, &plan).expect("prepare").topo;
        // Every shipped fabric really splits (else this test would compare a run with itself).
        assert!(
            mrc_sim::sim::partitions(&topo, 4) >= 2,
            "{} does not split",
            s.name
        );
        let t = std::time::Instant::now();
        let one = outputs(&s, 1, false, tmp);
        for (n, time_order) in [(2, false), (4, false), (1, true)] {
            let other = outputs(&s, n, time_order, tmp);
            let how = if time_order {
                "in time order".to_string()
            } else {
                format!("on {n} threads")
            };
            assert!(
                one.0 == other.0,
                "{}: report.json differs between 1 thread and {how}",
                s.name
            );
            assert!(
                one.1 == other.1,
                "{}: flows.csv differs between 1 thread and {how}",
                s.name
            );
        }
        eprintln!(
            "{}: same on 1, 2, 4 threads and in time order ({:.1?})",
            s.name,
            t.elapsed()
        );
    }
}

/// With T2s the spines' side of a run by phases goes in time order (a T1 reaches a T2 inside a phase); no
/// shipped scenario has three tiers without failures, so the bench's workload runs here on three tiers (2
/// pods, 2 T2 per T1), with the same outputs on 1 and 2 threads and in time order.
#[test]
fn a_three_tier_fabric_by_phases_is_the_same_as_on_2_threads_and_in_time_order() {
    let scratch = common::scratch("parallel-3tier");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut s =
        Scenario::load(&dir.join("bench-leafspine-1024-perm.toml")).expect("bench scenario");
    let t = &mut s.topology;
    t.kind = mrc_sim::scenario::TopoKind::ThreeTier;
    t.pods = 2;
    t.t0 = 4;
    t.hosts_per_t0 = 8;
    t.t1 = 4;
    t.t2_per_t1 = 2;
    s.run.limit_us = s.run.limit_us.min(200.0);
    assert!(
        s.failures.is_empty(),
        "a run by phases has no failure action"
    );
    let one = outputs(&s, 1, false, scratch.path());
    for (n, time_order) in [(2, false), (1, true)] {
        let other = outputs(&s, n, time_order, scratch.path());
        assert!(
            one == other,
            "three tiers: outputs differ on {n} threads (time order: {time_order})"
        );
    }
}
