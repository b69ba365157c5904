//! Our headers against the OCP 1.0.1 headers: `layout/probe.c` prints every structure size and alignment,
//! field offset and size, enum size and constant; compiled against `include/` its output must equal the table
//! measured from the OCP headers (`layout/ocp-1.0.1*.txt`, written by `layout/measure-ocp.sh`; the commit is
//! in their first line). The function prototypes, as gcc normalises them (`-aux-info`), must equal OCP's too.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;

fn here(p: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join(p)
}

fn table(name: &str) -> Vec<String> {
    let path = here(&format!("tests/layout/{name}"));
    std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
        .lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(str::to_string)
        .collect()
}

fn cc(args: &[&str]) -> std::process::Output {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        panic!(
            "/usr/include/infiniband/verbs.h is missing: install libibverbs-dev (.ci/run does, as root)"
        );
    }
    Command::new("cc")
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc ({e}): install gcc"))
}

/// Probe output for our headers, sorted like the table.
fn probe(defines: &[&str], out_name: &str) -> Vec<String> {
    let exe = Path::new(env!("CARGO_TARGET_TMPDIR")).join(out_name);
    let include = format!("-I{}", here("include").display());
    let src = here("tests/layout/probe.c");
    let mut args = vec!["-std=gnu11", "-Wall", "-Werror", "-Wno-cpp", &include];
    args.extend_from_slice(defines);
    let exe_s = exe.to_string_lossy().into_owned();
    let src_s = src.to_string_lossy().into_owned();
    args.extend_from_slice(&["-o", &exe_s, &src_s]);
    let o = cc(&args);
    assert!(
        o.status.success(),
        "compiling probe.c:\n{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let run = Command::new(&exe).output().expect("run the probe");
    assert!(run.status.success());
    let mut lines: Vec<String> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}

fn compare(ours: &[String], theirs: &[String]) {
    let missing: Vec<&String> = theirs.iter().filter(|l| !ours.contains(l)).collect();
    let extra: Vec<&String> = ours.iter().filter(|l| !theirs.contains(l)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "our headers differ from OCP 1.0.1:\n  OCP has: {missing:#?}\n  we have: {extra:#?}"
    );
}

#[test]
fn every_size_offset_and_constant_matches_ocp() {
    let ocp = table("ocp-1.0.1.txt");
    assert!(ocp.len() > 300, "the table has {} lines", ocp.len());
    compare(&probe(&[], "probe-default"), &ocp);
}

#[test]
fn the_controller_1_0_0_layout_matches_ocp_too() {
    // With MRC_CTL_API_VER_USED 1.0.0, struct mrc_ctl_ev_event loses `state` (48 instead of 56 bytes).
    let ocp = table("ocp-1.0.1-ctl-1.0.0.txt");
    assert!(ocp.contains(&"size struct mrc_ctl_ev_event 48".to_string()));
    compare(
        &probe(
            &["-DMRC_CTL_API_VER_USED=MRC_CTL_API_VER(1,0,0)"],
            "probe-ctl100",
        ),
        &ocp,
    );
}

#[test]
fn every_function_has_the_ocp_prototype() {
    let ocp = table("ocp-1.0.1-functions.txt");
    assert_eq!(ocp.len(), 41, "OCP 1.0.1 declares 41 functions");
    compare(&common::our_prototypes(), &ocp);
}
