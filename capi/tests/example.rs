//! `examples/write_sweep.c`, the C example: two processes through libmrc and the verbs shim (preloaded), RDMA
//! WRITE and WRITE-with-immediate from 1 byte to 4 MiB (×4 steps), every byte checked by the target. It uses
//! the API as OCP's mrc_example does: `MRC_PROTOCOL_VERSION_1` as the API version, `IBV_QP_PORT` at INIT, the
//! peer by GID with `dlid` 0, RTS with verbs' timeout, retry_cnt and rnr_retry (14: beyond verbs' range).
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

mod common;

#[test]
fn write_sweep_example_passes() {
    let exe = common::compile_c("examples/write_sweep.c", &[]);
    let o = common::run(
        &exe,
        &[],
        common::Preload::Libmrc,
        &[("MRC_SHIM_PLANES", "2")],
    );
    let (out, err) = common::text(&o);
    assert_eq!(
        o.status.code(),
        Some(0),
        "write_sweep failed:\n{out}\n{err}"
    );
    // The figures (sizes, probe RTTs), for `--nocapture`.
    println!("{out}");
    let mut size = 1usize;
    while size <= 4 << 20 {
        assert!(
            out.contains(&format!("size {size}: WRITE + WRITE_WITH_IMM ok")),
            "size {size} missing:\n{out}"
        );
        size *= 4;
    }
    assert!(out.contains("PASS"), "{out}");
    // What libmrc accepted and ignored is said once per process (writer and target).
    for line in [
        "mrc_create_context: mrc_api_version_used 1 is MRC_PROTOCOL_VERSION_1",
        "mrc_modify_qp: IBV_QP_PORT (1) accepted and ignored",
        "mrc_modify_qp: IBV_QP_TIMEOUT (7) accepted and ignored",
        "mrc_modify_qp: IBV_QP_RETRY_CNT (14) accepted and ignored",
        "mrc_modify_qp: IBV_QP_RNR_RETRY (14) accepted and ignored",
    ] {
        assert_eq!(
            err.matches(line).count(),
            2,
            "{line:?} once per process in:\n{err}"
        );
    }
}
