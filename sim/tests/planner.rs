//! The traps a planner's first study met (issue 24), each shown gone: failure sets and the scenario's own
//! failures, what `sweep` says and writes, failures outside the traffic, the plots' labels and axis, the run
//! totals `compare` and `validate` print, one range notation, and the progress bar's measure.

mod common;

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use mrc_sim::sweep;
use mrc_sim::{Scenario, run_scenario, run_scenario_with};

fn mrc_sim(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
        .args(args)
        .output()
        .expect("run mrc-sim")
}

fn temp(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("planner-{name}"))
}

fn text(o: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// A small fabric (8 hosts, 2 planes) and a 256 kB permutation: runs in milliseconds.
const SMALL: &str = r#"
name = "small"
seed = 1
[topology]
kind = "two_tier"
planes = 2
hosts_per_t0 = 4
t0 = 2
t1 = 4
[workload]
kind = "permutation"
bytes = 256000
[run]
limit_us = 2000
bin_us = 1
baseline = true
"#;

fn write(dir: &Path, name: &str, body: &str) -> PathBuf {
    let p = dir.join(name);
    std::fs::write(&p, body).unwrap();
    p
}

/// The scenario's own failures apply in every run of a sweep, each set's are added to them; `run`, which runs
/// one set of failures, refuses a scenario with sets by name instead of quietly dropping them (before, `check`
/// said OK and `run` computed a NaN `jct_slowdown` from the scenario's empty `failures`).
#[test]
fn failure_sets_add_to_the_scenarios_failures_and_run_refuses_them() {
    let body = format!(
        "{SMALL}\n[[failures]]\nkind = \"link_down\"\nat_us = 3\nlink = {{ tier = \"t0_t1\", plane = 0, t0 = 0, t1 = 1 }}\n\
         [[sweep.failure_sets]]\nname = \"t1-down\"\n\
         failures = [{{ kind = \"switch_down\", at_us = 5, switch = {{ tier = 1, plane = 1, index = 2 }} }}]\n\
         [[sweep.failure_sets]]\nname = \"none-extra\"\n"
    );
    let s = Scenario::parse(&body).expect("valid");
    let items = sweep::items(&s, None).unwrap();
    assert_eq!(items.len(), 2);
    let a = items[0].scenario(&s);
    assert_eq!(a.failures.len(), 2, "the scenario's failure and the set's");
    assert!(
        a.sweep.failure_sets.is_empty(),
        "an item replays as one run"
    );
    assert_eq!(items[1].scenario(&s).failures.len(), 1);
    let tmp = temp("sets");
    let d = tmp.path();
    let p = write(d, "s.toml", &body);
    let o = mrc_sim(&[
        "run",
        p.to_str().unwrap(),
        "--out",
        d.join("o").to_str().unwrap(),
    ]);
    assert!(!o.status.success());
    let t = text(&o);
    assert!(
        t.contains("sweep.failure_sets") && t.contains("mrc-sim sweep"),
        "{t}"
    );
}

/// `sweep` writes its plan, a summary per failure set (CSV and SVG: slowdown by set, seeds as the spread),
/// prints the summary and says which run failed which check (before: "12 runs; wrote …/sweep.csv" and exit 1).
#[test]
fn sweep_says_which_runs_failed_and_summarises_each_set() {
    let body = format!(
        "{SMALL}\n[sweep]\nseeds = [1, 2]\n\
         [[sweep.failure_sets]]\nname = \"plane1-down\"\nfailures = [{{ kind = \"plane_down\", plane = 1, at_us = 2 }}]\n\
         [[sweep.failure_sets]]\nname = \"t1-down\"\n\
         failures = [{{ kind = \"switch_down\", at_us = 2, switch = {{ tier = 1, plane = 0, index = 1 }} }}]\n\
         [[validate]]\nmetric = \"jct_slowdown\"\nmax = 0.0\nwhy = \"no failure is free\"\n"
    );
    let tmp = temp("sweep");
    let d = tmp.path();
    let p = write(d, "s.toml", &body);
    let out = d.join("o");
    let o = mrc_sim(&[
        "sweep",
        p.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--jobs",
        "2",
    ]);
    let t = text(&o);
    assert_eq!(o.status.code(), Some(1), "{t}");
    assert!(t.contains("FAIL plane1-down_seed-1: jct_slowdown="), "{t}");
    assert!(t.contains("4 of 4 runs failed a check"), "{t}");
    assert!(
        t.contains("failure set") && t.contains("plane1-down") && t.contains("t1-down"),
        "{t}"
    );
    assert!(
        out.join(sweep::PLAN).is_file(),
        "the plan is written by a local sweep too"
    );
    let summary = std::fs::read_to_string(out.join("sweep-summary.csv")).unwrap();
    let rows: Vec<&str> = summary.lines().collect();
    assert_eq!(rows.len(), 3, "{summary}");
    assert!(rows[1].starts_with("plane1-down,2,0,"), "{summary}");
    let svg = std::fs::read_to_string(out.join("sweep-summary.svg")).unwrap();
    assert!(svg.contains("plane1-down") && svg.contains("slowdown"));
}

/// The summary is the median over the seeds and their range, per set, from `sweep.csv`'s rows.
#[test]
fn the_summary_is_median_and_range_over_seeds() {
    let csv = format!(
        "{}\n0,a_seed-1,x,1,a,true,10,0.1,1,0,0,true,\n1,a_seed-2,x,2,a,true,12,0.3,1,0,0,false,m=1>0\n\
         2,a_seed-3,x,3,a,true,11,0.2,1,0,0,true,\n3,b_seed-1,x,1,b,true,10,0.0,1,0,0,true,\n",
        sweep::HEADER
    );
    let s = sweep::summarize(&csv);
    assert_eq!(s.len(), 2);
    assert_eq!((s[0].set.as_str(), s[0].runs, s[0].passed), ("a", 3, 2));
    assert_eq!(s[0].jct_us, (10.0, 11.0, 12.0));
    assert_eq!(s[0].slowdown, Some((0.1, 0.2, 0.3)));
    assert_eq!(
        sweep::failed_runs(&csv),
        vec![("a_seed-2".into(), "m=1>0".into())]
    );
    let table = sweep::summary_table(&s);
    assert!(table.contains("+20.0% (+10.0% to +30.0%)"), "{table}");
}

/// A failure that starts after the last transfer finished changed nothing: the report says so.
#[test]
fn a_failure_after_the_traffic_is_warned_about() {
    let s = Scenario::parse(&format!(
        "{SMALL}\n[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 1500\n"
    ))
    .unwrap();
    let r = run_scenario(&s, false, &mut |_, _| true).unwrap();
    assert!(r.run.finished);
    assert_eq!(r.warnings.len(), 1, "{:?}", r.warnings);
    assert!(r.warnings[0].contains("after the last transfer finished"));
    assert!(
        r.summary()
            .contains("warning: failures[0] (plane 1 down) at 1500 µs")
    );
    let ok = Scenario::parse(&format!(
        "{SMALL}\n[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 3\n"
    ))
    .unwrap();
    assert!(
        run_scenario(&ok, false, &mut |_, _| true)
            .unwrap()
            .warnings
            .is_empty()
    );
}

/// Labels give the failure's own times, not the plotted range's; a flap is shaded where the link is down only;
/// the time axis starts where the traffic does.
#[test]
fn plots_label_real_times_shade_flaps_and_start_at_the_traffic() {
    let s = Scenario::parse(&format!(
        "{SMALL}\n[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 3\nuntil_us = 1900\n\
         [[failures]]\nkind = \"link_flap\"\nat_us = 2\nuntil_us = 10\nperiod_us = 4\nduty = 0.5\n\
         link = {{ tier = \"t0_t1\", plane = 0, t0 = 0, t1 = 0 }}\n"
    ))
    .unwrap();
    let r = run_scenario(&s, false, &mut |_, _| true).unwrap();
    let end = r.run.jct_us + 5.0;
    let w = mrc_sim::plots::windows(&r, end);
    assert_eq!(
        w[0].text(),
        "plane 1 down (3–1900 µs)",
        "not clipped to the plot"
    );
    let flap: Vec<_> = w.iter().skip(1).collect();
    assert_eq!(
        flap.len(),
        2,
        "two down times in 2–10 µs with a 4 µs period: {flap:?}"
    );
    assert_eq!((flap[0].from_us, flap[0].to_us), (2.0, 4.0));
    assert_eq!((flap[1].from_us, flap[1].to_us), (6.0, 8.0));
    assert!(flap[1].label.is_empty(), "one label per flap");
    let svg = mrc_sim::plots::goodput_svg(&r).unwrap();
    assert!(svg.contains("plane 1 down (3–1900 µs)"));
    // Traffic starting late: the axis starts there, not at 0.
    let late =
        Scenario::parse(&SMALL.replace("bytes = 256000", "bytes = 256000\nstart_us = 90")).unwrap();
    let r = run_scenario(&late, false, &mut |_, _| true).unwrap();
    let (from, to) = mrc_sim::plots::time_axis(&r);
    assert_eq!(from, 90.0, "the axis starts with the traffic");
    assert!(to > 90.0);
}

/// `compare` says which run each event total belongs to.
#[test]
fn compare_names_each_runs_events() {
    let tmp = temp("compare");
    let d = tmp.path();
    let p = write(
        d,
        "s.toml",
        &format!("{SMALL}\n[[failures]]\nkind = \"plane_down\"\nplane = 1\nat_us = 3\n"),
    );
    let o = mrc_sim(&["compare", p.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    assert!(
        t.contains("in the run,") && t.contains("in its healthy baseline"),
        "{t}"
    );
    assert!(
        t.contains("2 runs (the run and its healthy baseline)"),
        "{t}"
    );
}

/// `validate` over several scenarios says the peak memory after the first is the process's so far.
#[test]
fn validate_says_whose_peak_memory_it_prints() {
    let tmp = temp("validate");
    let d = tmp.path();
    let a = write(d, "a.toml", SMALL);
    let b = write(
        d,
        "b.toml",
        &SMALL.replace("name = \"small\"", "name = \"small-b\""),
    );
    let o = mrc_sim(&["validate", a.to_str().unwrap(), b.to_str().unwrap()]);
    let t = text(&o);
    assert!(o.status.success(), "{t}");
    let lines: Vec<&str> = t.lines().filter(|l| l.contains("M events/s")).collect();
    assert_eq!(lines.len(), 2, "{t}");
    assert!(
        lines[0].contains("peak RSS ") && !lines[0].contains("so far"),
        "{t}"
    );
    assert!(
        lines[1].contains("peak RSS of this process so far (earlier scenarios included)"),
        "{t}"
    );
}

/// Every range an error names is written one way, inclusive (`0..=7`), never `0..8`.
#[test]
fn range_messages_use_one_notation() {
    let cases = [
        "[[failures]]\nkind = \"plane_down\"\nplane = 5\nat_us = 3\n",
        "[[failures]]\nkind = \"nic_port_down\"\nhost = 99\nplane = 0\nat_us = 3\n",
        "[[failures]]\nkind = \"switch_down\"\nat_us = 3\nswitch = { tier = 1, plane = 0, index = 9 }\n",
        "[[failures]]\nkind = \"link_down\"\nat_us = 3\nlink = { tier = \"t0_t1\", plane = 0, t0 = 7 }\n",
    ];
    for c in cases {
        let e = Scenario::parse(&format!("{SMALL}\n{c}"))
            .and_then(|s| mrc_sim::Plan::new(&s).map(|_| s))
            .expect_err(c)
            .to_string();
        let exclusive = e
            .match_indices("..")
            .any(|(i, _)| !e[i + 2..].starts_with('='));
        assert!(!exclusive && e.contains("..="), "{c}: {e}");
    }
}

/// The progress a run reports is the payload placed: it reaches 1 when the run ends, whatever `limit_us` says
/// (the old bar counted simulated µs against the limit: "2537/20000 eta 9m" for a run that ended a minute later).
#[test]
fn progress_counts_the_payload_placed() {
    let s = Scenario::parse(
        &SMALL
            .replace("bytes = 256000", "bytes = 40000000")
            .replace("limit_us = 2000", "limit_us = 20000"),
    )
    .unwrap();
    let mut seen: Vec<f64> = Vec::new();
    let r = run_scenario_with(&s, false, None, &mut |_, p| {
        seen.push(p.done);
        true
    })
    .unwrap();
    assert!(r.run.finished);
    assert!(!seen.is_empty(), "progress was never reported");
    assert!(seen.windows(2).all(|w| w[0] <= w[1]), "{seen:?}");
    assert!(seen.iter().all(|&d| (0.0..=1.0).contains(&d)));
    let last = *seen.last().unwrap();
    let limit_share = r.run.jct_us / s.run.limit_us;
    assert!(
        last > limit_share * 2.0,
        "done {last} against {limit_share} of the limit"
    );
}
