//! `mrc-sim validate` on every published-fact scenario: the thresholds live in the scenario files, and
//! validate also fails on any invariant violation (conservation, failed-link crossing, misplacement).

use std::process::Command;

fn scenario(name: &str) -> String {
    format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"))
}

/// `mrc-sim validate PATH`: (passed, its report).
fn run_validate(path: &str) -> (bool, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
        .args(["validate", path])
        .output()
        .expect("run mrc-sim");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    (
        out.status.success(),
        format!("{text}\n{}", String::from_utf8_lossy(&out.stderr)),
    )
}

fn validate(name: &str) {
    let (ok, text) = run_validate(&scenario(name));
    assert!(ok, "validate {name} failed:\n{text}");
    assert!(text.contains("PASS") && !text.contains("FAIL"), "{text}");
}

#[test]
fn nic_port_loss() {
    validate("nic-port-loss");
}

#[test]
fn t1_failure() {
    validate("t1-failure");
}

#[test]
fn t0_t1_flap() {
    validate("t0-t1-flap");
}

#[test]
fn incast_victim() {
    validate("incast-victim");
}

#[test]
fn loss_sack() {
    validate("loss-1pct-sack");
}

/// The SACK scenario's checks are no coin flip on the loss draw: with go-back-N recovery (its twin's) both the
/// waste and the precision check fail.
#[test]
fn loss_sack_checks_fail_for_go_back_n() {
    let text = std::fs::read_to_string(scenario("loss-1pct-sack")).expect("read the scenario");
    let gbn = text
        .replace("recovery = \"sack\"", "recovery = \"go_back_n\"")
        .replace("limit_us = 20000", "limit_us = 3000");
    assert_ne!(gbn, text);
    let file = tempfile::Builder::new()
        .prefix("mrc-sim-sack-as-gbn-")
        .suffix(".toml")
        .tempfile()
        .expect("a scratch file");
    std::fs::write(file.path(), gbn).expect("write the scenario");
    let (ok, report) = run_validate(&file.path().display().to_string());
    assert!(!ok, "{report}");
    for metric in ["waste_fraction", "needless_send_fraction"] {
        assert!(
            report
                .lines()
                .any(|l| l.contains("FAIL") && l.contains(metric)),
            "{metric} passed with go-back-N:\n{report}"
        );
    }
}

#[test]
fn loss_go_back_n() {
    validate("loss-1pct-gbn");
}

#[test]
fn plane_failure() {
    validate("plane-failure");
}

/// The fidelity scenarios (sim/README.md "Fidelity"): their bounds are set from htsim's figures on the same
/// workloads, and every healthy run also checks that no path was retired.
#[test]
fn fid_slow_spine_1024() {
    validate("fid-slow-spine-1024");
}

#[test]
fn fid_silent_t1_512() {
    validate("fid-silent-t1-512");
}

#[test]
fn fid_incast_128() {
    validate("fid-incast-128");
}

#[test]
fn fid_incast_128_spread() {
    validate("fid-incast-128-spread");
}
