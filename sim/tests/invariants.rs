//! Determinism, conservation and failure semantics on small runs.

use mrc_sim::{Scenario, run_scenario};

fn scenario(extra: &str) -> Scenario {
    let text = format!(
        r#"
name = "inv"
seed = 3
[topology]
kind = "two_tier"
planes = 2
hosts_per_t0 = 4
t0 = 2
t1 = 4
[workload]
kind = "permutation"
bytes = 2000000
[run]
limit_us = 20000
bin_us = 5
{extra}
"#
    );
    Scenario::parse(&text).expect("valid scenario")
}

fn run(s: &Scenario) -> mrc_sim::Report {
    let r = run_scenario(s, true, &mut |_, _| true).expect("runs");
    assert!(
        r.invariant_violations().is_empty(),
        "{:?}",
        r.invariant_violations()
    );
    r
}

const FAILURES: &str = r#"
[[failures]]
kind = "link_flap"
at_us = 10
until_us = 150
period_us = 20
duty = 0.5
link = { tier = "t0_t1", plane = 0, t0 = 1 }
[[failures]]
kind = "switch_down"
at_us = 30
until_us = 90
switch = { tier = 1, plane = 1, index = 2 }
[[failures]]
kind = "link_loss"
at_us = 0
rate = 0.002
link = { tier = "host" }
[[failures]]
kind = "link_slow"
at_us = 20
fraction = 0.5
link = { tier = "t0_t1", plane = 1, t0 = 0, t1 = 0 }
[[failures]]
kind = "nic_port_down"
at_us = 40
until_us = 120
host = 2
plane = 0
"#;

/// Same seed and configuration give the same results file byte for byte; another seed gives another.
#[test]
fn same_seed_same_results_file() {
    let s = scenario(FAILURES);
    let a = run(&s).to_json();
    let b = run(&s).to_json();
    assert!(a == b, "two runs of the same seed differ");
    let mut s2 = s.clone();
    s2.seed = 4;
    assert_ne!(a, run(&s2).to_json());
}

/// Every kind of loss happens, and still bytes sent = delivered + dropped + trimmed away + in flight, and no
/// packet crosses a link after it failed (the simulator counts any that would; `run` asserts zero).
#[test]
fn conservation_under_every_failure_kind() {
    let incast = |s: &mut Scenario| {
        s.workload.kind = mrc_sim::scenario::WorkloadKind::Incast;
        s.workload.sources = Some(vec![1, 3, 4, 5, 6, 7]);
        s.workload.target = 0;
        s.topology.queue.buffer_bdp = 0.3;
    };
    let mut s = scenario(FAILURES);
    s.topology.queue.trimming = false;
    incast(&mut s);
    let r = run(&s);
    let c = &r.run.counters;
    assert!(c.dropped_overflow_pkts > 0, "{c:?}");
    assert!(c.dropped_failure_pkts > 0, "{c:?}");
    assert!(c.dropped_loss_pkts > 0, "{c:?}");
    assert_eq!(r.run.conservation_error(), 0);
    assert_eq!(c.failed_link_crossings, 0);
    assert!(r.run.finished, "the transport recovers from all of it");
    // With trimming the same run trims instead of overflowing.
    let mut t = scenario(FAILURES);
    incast(&mut t);
    let r = run(&t);
    assert!(r.run.counters.trimmed_pkts > 0);
    assert_eq!(r.run.counters.dropped_overflow_pkts, 0);
    assert_eq!(r.run.conservation_error(), 0);
}

/// Runs stopped by the time limit still balance: what is not delivered or dropped is in flight.
#[test]
fn conservation_with_packets_in_flight() {
    let mut s = scenario("");
    s.run.limit_us = 20.0;
    let r = run(&s);
    assert!(!r.run.finished);
    assert!(r.run.counters.inflight_pkts > 0);
    assert_eq!(r.run.conservation_error(), 0);
}

/// A bad field names itself and what is allowed.
#[test]
fn bad_fields_are_named() {
    let e = Scenario::parse(&scenario("").to_toml().replace("two_tier", "four_tier")).unwrap_err();
    assert!(e.to_string().contains("two_tier"), "{e}");
    let e = Scenario::parse(&format!("{}\nbogus = 1\n", scenario("").to_toml())).unwrap_err();
    assert!(e.to_string().contains("bogus"), "{e}");
    let e =
        Scenario::parse(&scenario("").to_toml().replace("planes = 2", "planes = 40")).unwrap_err();
    assert_eq!(e.field, "topology.planes");
    let mut s = scenario(
        "[[failures]]\nkind = \"switch_down\"\nat_us = 1\nswitch = { tier = 1, plane = 0, index = 9 }\n",
    );
    s.seed = 1;
    let e = run_scenario(&s, false, &mut |_, _| true).expect_err("bad index");
    assert_eq!(e.field, "failures[0].switch");
    assert!(e.problem.contains("index 0..=3"), "{e}");
}
