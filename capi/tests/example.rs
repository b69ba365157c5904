//! `examples/write_sweep.c`, the C example: two processes through libmrc and the verbs shim (preloaded), RDMA
//! WRITE and WRITE-with-immediate from 1 byte to 4 MiB (×4 steps), every byte checked by the target.
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

mod common;

#[test]
fn write_sweep_example_passes() {
    let exe = common::compile_c("examples/write_sweep.c", &[]);
    let o = common::run(&exe, &[], true, &[("MRC_SHIM_PLANES", "2")]);
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
}
