//! The OCP API from C (`tests/c/misuse.c`, built against the installed headers and libmrc): NULL, foreign and
//! stale objects, bad values and out-of-order steps fail with the documented convention and errno and a log
//! line naming the call, never a crash; the stage 1 objects (contexts, channels, CQs, hints, the QP state
//! machine, controller profiles with DENY, posting, polling and an EV probe to itself) work.

mod common;

#[test]
fn misuse_from_c_fails_cleanly_and_the_objects_work() {
    let exe = common::compile_c("misuse.c", &[]);
    let o = common::run(
        &exe,
        &[],
        common::Preload::Libmrc,
        &[("MRC_SHIM_PLANES", "2")],
    );
    let (out, err) = common::text(&o);
    assert!(
        o.status.code() == Some(0),
        "misuse.c exited with {:?} (a signal means a crash):\n{out}\n{err}",
        o.status
    );
    assert!(
        out.contains("ok modify_to_rts")
            && out.contains("ok deny_ev")
            && out.contains("ok get_async_event_nonblocking_empty")
            && out.contains("ok port_status_calls_its_port_down")
            && out.contains("ok port_status_answer")
            && out.contains("0 failures"),
        "{out}"
    );
    let checks = out.lines().filter(|l| l.starts_with("ok ")).count();
    println!("{checks} checks passed");
    assert!(checks > 120, "only {checks} checks ran:\n{out}");
    // One log line per refused call, naming it and the reason.
    for line in [
        "libmrc: mrc_create_context: vcontext is not an open MRC device",
        "libmrc: mrc_modify_qp: RESET -> RTR is not a valid transition (EINVAL)",
        "libmrc: mrc_modify_qp: port_num 0 is not 1 (the device has one port) (EINVAL)",
        "libmrc: mrc_modify_qp: IBV_QP_ALT_PATH is not taken by mrc_modify_qp (EINVAL)",
        "libmrc: mrc_destroy_cq: the CQ is still used by 1 object(s)",
        "libmrc: mrc_ctl_modify_ev_profile: 1 QP(s) use EV profile 1 (EBUSY)",
        "libmrc: mrc_ctl_ep_batch_send_wait: req[0].dgid: no connected QP of this device reaches that peer",
    ] {
        assert!(err.contains(line), "no log line {line:?} in:\n{err}");
    }
}

#[test]
fn a_foreign_verbs_context_is_no_mrc_device() {
    let exe = common::compile_c("misuse.c", &[]);
    let o = common::run(&exe, &["foreign"], common::Preload::Libmrc, &[]);
    let (out, err) = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("ok foreign_create_context") && out.contains("0 failures"),
        "{out}"
    );
    assert!(err.contains("not an open MRC device"), "{err}");
}

/// The shim's own library preloaded in front of libmrc.so answers the program's verbs calls: its context
/// belongs to another copy of the verbs objects, which libmrc refuses by name instead of using.
#[test]
fn a_context_of_the_shim_library_beside_libmrc_is_refused_cleanly() {
    let exe = common::compile_c("misuse.c", &[]);
    let o = common::run(
        &exe,
        &["twocopies"],
        common::Preload::ShimThenLibmrc,
        &[("MRC_SHIM_PLANES", "2")],
    );
    let (out, err) = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(
        out.contains("ok foreign_create_context")
            && out.contains("ok two_copies_close_device")
            && out.contains("0 failures"),
        "{out}"
    );
    assert!(
        err.contains("preload only libmrc.so, not libmrc_verbs_shim.so as well"),
        "{err}"
    );
}

#[test]
fn log_lines_can_be_silenced() {
    let exe = common::compile_c("misuse.c", &[]);
    let o = common::run(
        &exe,
        &["foreign"],
        common::Preload::Libmrc,
        &[("MRC_CAPI_LOG", "off")],
    );
    let (out, err) = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "{out}\n{err}");
    assert!(!err.contains("libmrc:"), "{err}");
}
