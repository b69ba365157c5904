//! Finding 8 of issue 22: the files a scenario names (`topology.file`, `workload.file`) were read whole before
//! any check (`/dev/zero` ate 23 GB) and any readable file's first line was quoted in the error. Now only a
//! regular file of at most 64 MiB is read, checked before the first byte, and no byte of it is quoted (spec
//! SEC-FILE-1). Each test fails on the code before the fix (commit 7220f85).

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use mrc_sim::{Plan, Scenario, ScenarioError};

fn temp(name: &str) -> tempfile::TempDir {
    common::scratch(&format!("files-{name}"))
}

/// Loads a scenario in `dir` whose htsim topology (`topo`) or workload (`cm`) is the given path, and plans it.
fn plan(dir: &Path, topo: &str, cm: &str) -> Result<(), ScenarioError> {
    let scen = dir.join("s.toml");
    std::fs::write(
        &scen,
        format!(
            "name = \"f\"\n[topology]\nkind = \"htsim\"\nplanes = 2\nfile = \"{topo}\"\n\
             [workload]\nkind = \"htsim\"\nfile = \"{cm}\"\n[run]\nlimit_us = 100\n"
        ),
    )
    .unwrap();
    let s = Scenario::load(&scen)?;
    Plan::new(&s).map(|_| ())
}

const TOPO: &str = "Nodes 8\nTiers 2\nPodsize 8\nTier 0\nDownlink_speed_Gbps 100\nRadix_Down 4\nRadix_Up 4\n\
                    Downlink_Latency_ns 1000\nQueue_Up 60000\nOversubscribed 1\nTier 1\nDownlink_speed_Gbps \
                    100\nRadix_Down 2\nDownlink_Latency_ns 1000\n";

#[test]
fn a_device_is_refused_before_a_byte_is_read() {
    let tmp = temp("dev");
    let dir = tmp.path();
    let start = Instant::now();
    let e = plan(dir, "/dev/zero", "/dev/zero").unwrap_err();
    assert!(
        start.elapsed() < Duration::from_secs(5),
        "read before refusing"
    );
    assert_eq!(e.field, "topology.file", "{e}");
    assert!(e.problem.contains("not a regular file"), "{e}");
}

#[test]
fn a_file_over_the_cap_is_refused_before_it_is_read() {
    let tmp = temp("big");
    let dir = tmp.path();
    std::fs::write(dir.join("fabric.topo"), TOPO).unwrap();
    let big = std::fs::File::create(dir.join("jobs.cm")).unwrap();
    big.set_len((64 << 20) + 1).unwrap();
    let e = plan(dir, "fabric.topo", "jobs.cm").unwrap_err();
    assert_eq!(e.field, "workload.file", "{e}");
    assert!(e.problem.contains("at most"), "{e}");
}

#[test]
fn no_byte_of_a_file_is_quoted_in_an_error() {
    let tmp = temp("quote");
    let dir = tmp.path();
    let secret = "s3cr3t-root:$6$hash:19000:0:99999:7:::";
    std::fs::write(dir.join("fabric.topo"), TOPO).unwrap();
    std::fs::write(dir.join("passwd"), format!("{secret}\nroot 1\n")).unwrap();
    for (topo, cm) in [("passwd", "passwd"), ("fabric.topo", "passwd")] {
        let e = plan(dir, topo, cm).unwrap_err();
        let shown = e.to_string();
        assert!(
            !shown.contains("s3cr3t") && !shown.contains("$6$"),
            "{shown}"
        );
        assert!(shown.contains("line 1"), "the line is named: {shown}");
    }
    // Numbers where a key wants one are not echoed either.
    std::fs::write(dir.join("t2"), TOPO.replace("Nodes 8", "Nodes s3cr3t")).unwrap();
    let shown = plan(dir, "t2", "passwd").unwrap_err().to_string();
    assert!(!shown.contains("s3cr3t"), "{shown}");
}
