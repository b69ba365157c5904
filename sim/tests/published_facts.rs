//! `mrc-sim validate` on every published-fact scenario: the thresholds live in the scenario files, and
//! validate also fails on any invariant violation (conservation, failed-link crossing, misplacement).

use std::process::Command;

fn validate(name: &str) {
    let path = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let out = Command::new(env!("CARGO_BIN_EXE_mrc-sim"))
        .args(["validate", &path])
        .output()
        .expect("run mrc-sim");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "validate {name} failed:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
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

#[test]
fn loss_go_back_n() {
    validate("loss-1pct-gbn");
}

#[test]
fn plane_failure() {
    validate("plane-failure");
}
