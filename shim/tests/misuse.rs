//! Misuse from C (NULL pointers, foreign objects, zero-length and unmapped MRs, posting on a QP in RESET or
//! INIT, invalid transitions, unsupported verbs, wrong teardown order) returns the errno a provider returns,
//! with a log line naming the call, and never crashes. The checks themselves are in `tests/c/misuse.c`.

mod common;

use std::process::Command;

#[test]
fn misuse_from_c_returns_errors_without_crashing() {
    let exe = common::compile_c("misuse.c", &["-libverbs"]);
    let o = common::preload(&mut Command::new(&exe), &[("MRC_SHIM_PLANES", "2")]);
    let (out, err) = common::text(&o);
    assert!(
        o.status.code() == Some(0),
        "misuse.c exited with {:?} (a signal means a crash):\n{out}\n{err}",
        o.status
    );
    assert!(
        out.contains("ok post_send_in_reset") && out.contains("0 failures"),
        "{out}"
    );
    // One log line per refused call, naming it and the reason.
    for line in [
        "ibv_reg_mr: length is 0",
        "ibv_post_send: the QP is in RESET",
        "ibv_create_srq: shared receive queues are not supported (max_srq is 0) (EOPNOTSUPP)",
        "ibv_create_cq_ex: not supported by mrc-verbs-shim (EOPNOTSUPP)",
        "ibv_modify_qp: RESET -> RTR is not a valid transition (EINVAL)",
        "ah_attr.grh.dgid is :: (unset): give the peer's GID 0",
        "ibv_dealloc_pd: the protection domain is still used by",
    ] {
        assert!(err.contains(line), "no log line {line:?} in:\n{err}");
    }
}
