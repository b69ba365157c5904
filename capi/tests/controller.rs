//! The controller API over the transport, from C (`tests/c/controller.c`): EV probes answer with an RTT per
//! EV, a DENY in the middle of a stream of WRITEs (the stream completes, every byte arrives), EV events when a
//! port is disabled and enabled again; a completion channel that signals an armed CQ. Counters (no packet on a denied EV) are checked in mrc-host's
//! `control.rs` tests. Run under `flock /tmp/mrc-net.lock` (real sockets).

mod common;

#[test]
fn controller_from_c() {
    let exe = common::compile_c("controller.c", &[]);
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
        "controller.c failed:\n{out}\n{err}"
    );
    // The figures (sizes, probe RTTs), for `--nocapture`.
    println!("{out}");
    for check in [
        "ok probe_rtt_per_ev",
        "ok deny_mid_transfer",
        "ok bytes_after_deny",
        "ok events_port_down",
        "ok events_port_up",
        "ok cq_event_names_the_cq",
        "0 failures",
    ] {
        assert!(out.contains(check), "no {check:?} in:\n{out}");
    }
}
