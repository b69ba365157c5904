//! `NCCL_MRC_*` variables are read at the first init; a bad value fails init with NCCL's invalid-argument
//! code and a warning naming the variable (each case in its own process: settings are read once).

use std::process::Command;

const HARNESS: &str = env!("CARGO_BIN_EXE_mrc-nccl-harness");

fn init_with(vars: &[(&str, &str)]) -> (bool, String, String) {
    let out = Command::new(HARNESS)
        .args(["--version", "11", "init"])
        .env("MRC_HARNESS_LOG", "1")
        .envs(vars.iter().copied())
        .output()
        .expect("run the harness");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn good_settings_pass_and_bad_ones_fail_init_naming_the_variable() {
    let (ok, out, err) = init_with(&[("NCCL_MRC_QPS_PER_CONN", "4"), ("NCCL_MRC_CC", "nscc")]);
    assert!(ok && out.contains("INIT ok"), "{out}{err}");
    assert!(
        err.contains("4 QP(s) per connection"),
        "the settings are logged at init: {err}"
    );
    for (var, val, hint) in [
        ("NCCL_MRC_QPS_PER_CONN", "99", "from 1 to 8"),
        ("NCCL_MRC_MAX_RECVS", "0", "from 1 to 8"),
        ("NCCL_MRC_CC", "reno", "\"fixed\" or \"nscc\""),
        (
            "NCCL_MRC_NODE_CONFIG",
            "/nonexistent/h0.toml",
            "no such file",
        ),
    ] {
        let (ok, out, err) = init_with(&[(var, val)]);
        assert!(!ok, "{var}={val} must fail init");
        assert!(out.contains("INIT 4"), "ncclInvalidArgument: {out}");
        assert!(err.contains(var) && err.contains(hint), "{var}: {err}");
    }
}
