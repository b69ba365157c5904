//! The verbs RTS `timeout` and `retry_cnt` reach the QP: `ibv_query_qp` returns them, and a QP whose peer
//! vanishes completes with `IBV_WC_RETRY_EXC_ERR` and goes to ERR after the retries they allow. The checks
//! themselves are in `tests/c/retry.c`. Run under `flock /tmp/mrc-net.lock` (loopback sockets).

mod common;

use std::process::Command;

#[test]
fn rts_timeout_and_retry_cnt_fail_a_qp_whose_peer_vanished() {
    let exe = common::compile_c("retry.c", &["-libverbs"]);
    let o = common::preload(&mut Command::new(&exe), &[("MRC_SHIM_PLANES", "2")]);
    let (out, err) = common::text(&o);
    assert!(
        o.status.code() == Some(0),
        "retry.c exited with {:?}:\n{out}\n{err}",
        o.status
    );
    for check in [
        "ok query_qp_returns_timeout_and_retry_cnt",
        "ok retry_exceeded_completion",
        "ok not_before_the_retries",
        "ok qp_in_err",
    ] {
        assert!(out.contains(check), "no {check:?} in:\n{out}");
    }
}
