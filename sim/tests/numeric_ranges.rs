//! Issue 10 item 3: sizes that overflow, huge latencies and non-finite times are refused by name before any
//! work starts (they used to wrap, eat memory or give silently wrong results).

use mrc_sim::Scenario;

fn base(topology: &str, extra: &str) -> String {
    format!(
        r#"
name = "ranges"
[topology]
kind = "two_tier"
{topology}
[workload]
kind = "permutation"
bytes = 100000
[run]
limit_us = 1000
{extra}
"#
    )
}

/// The parse error for a scenario that must be refused; panics (the test fails) if it is accepted.
fn refused(text: &str) -> mrc_sim::ScenarioError {
    match Scenario::parse(text) {
        Ok(_) => panic!("accepted a scenario that must be refused:\n{text}"),
        Err(e) => e,
    }
}

#[test]
fn t1_that_wraps_the_switch_count_is_refused_by_name() {
    // t0 + t1 wrapped to 0 in u32: the size guard passed and building the ports ate all memory.
    let e = refused(&base("hosts_per_t0 = 2\nt0 = 1\nt1 = 4294967295", ""));
    assert_eq!(e.field, "topology.t1", "{e}");
    assert!(
        e.problem.contains("4294967295") && e.problem.contains("1..="),
        "{e}"
    );
}

#[test]
fn every_count_field_is_range_checked() {
    for f in ["hosts_per_t0", "t0", "t1"] {
        let topo = ["hosts_per_t0", "t0", "t1"]
            .iter()
            .map(|g| format!("{g} = {}", if *g == f { "100000000" } else { "2" }))
            .collect::<Vec<_>>()
            .join("\n");
        let e = refused(&base(&topo, ""));
        assert_eq!(e.field, format!("topology.{f}"), "{e}");
    }
}

#[test]
fn huge_latency_is_refused_by_name() {
    // latency_ns * 1000 wrapped in u64 and gave a silently wrong fabric.
    let e = refused(&base(
        "hosts_per_t0 = 2\nt0 = 2\nt1 = 2\nt0_t1_link = { gbps = 100, latency_ns = 18000000000000000 }",
        "",
    ));
    assert_eq!(e.field, "topology.t0_t1_link.latency_ns", "{e}");
    assert!(e.problem.contains("use 0..="), "{e}");
}

#[test]
fn infinite_and_nan_times_are_refused_by_name() {
    let topo = "hosts_per_t0 = 2\nt0 = 2\nt1 = 2";
    let cases = [
        (
            base(topo, "").replace("limit_us = 1000", "limit_us = inf"),
            "run.limit_us",
        ),
        (
            base(topo, "").replace("limit_us = 1000", "limit_us = 1000\nsettle_us = nan"),
            "run.settle_us",
        ),
        (
            base(
                topo,
                "[[failures]]\nkind = \"plane_down\"\nplane = 0\nat_us = inf\n",
            ),
            "failures[0].at_us",
        ),
        (
            base(
                topo,
                "[[failures]]\nkind = \"plane_down\"\nplane = 0\nat_us = 1\nuntil_us = inf\n",
            ),
            "failures[0].until_us",
        ),
        (
            base(topo, "").replace("bytes = 100000", "bytes = 100000\nstart_us = inf"),
            "workload.start_us",
        ),
        (
            base(topo, "[[validate]]\nmetric = \"jct_us\"\nmax = nan\n"),
            "validate[0].max",
        ),
    ];
    for (text, field) in cases {
        let e = refused(&text);
        assert_eq!(e.field, field, "{e}");
    }
}

#[test]
fn other_numeric_fields_are_range_checked() {
    let topo = "hosts_per_t0 = 2\nt0 = 2\nt1 = 2";
    let cases = [
        (
            base(topo, "[transport]\nframe_overhead = 4294967295\n"),
            "transport.frame_overhead",
        ),
        (
            base(topo, "[transport]\nbase_rtt_ns = 0\n"),
            "transport.base_rtt_ns",
        ),
        (
            base(topo, "[transport]\nreorder_ns = 18446744073709551615\n"),
            "transport.reorder_ns",
        ),
        (
            base(topo, "[transport]\nbackup_evs_per_plane = 65535\n"),
            "transport.backup_evs_per_plane",
        ),
        (
            base(topo, "").replace("bytes = 100000", "bytes = 18446744073709551615"),
            "workload.bytes",
        ),
        (
            base(
                &format!(
                    "{topo}\nhost_link = {{ gbps = 100, buffer_bytes = 18446744073709551615 }}"
                ),
                "",
            ),
            "topology.host_link.buffer_bytes",
        ),
    ];
    for (text, field) in cases {
        let e = refused(&text);
        assert_eq!(e.field, field, "{e}");
    }
}
