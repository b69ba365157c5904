//! Asynchronous events and EV events from C (`tests/c/events.c`): a CQ overrun raises `IBV_EVENT_CQ_ERR`
//! naming the CQ and `IBV_EVENT_QP_FATAL` naming the QP, `mrc_get_async_event` blocks or says `EAGAIN` as the
//! verbs context's `async_fd` is set, port changes name the port; an armed EV-event CQ signals its channel when
//! a plane dies, and an EV-event CQ too small for the events drops the rest and says how many in the next
//! event's `drop_count`; PORT_STATUS_UPDATE reports are answered with an RTT; REPLACE_EV on the profile of live QPs reaches them. Run under `flock /tmp/mrc-net.lock` (real sockets).

mod common;

#[test]
fn events_from_c() {
    let exe = common::compile_c("events.c", &[]);
    let o = common::run(
        &exe,
        &[],
        common::Preload::Libmrc,
        &[("MRC_SHIM_PLANES", "2")],
    );
    let (out, err) = common::text(&o);
    assert_eq!(o.status.code(), Some(0), "events.c failed:\n{out}\n{err}");
    println!("{out}");
    for check in [
        "ok async_nonblocking_empty",
        "ok cq_err_names_the_overrun_cq",
        "ok qp_fatal_names_the_qp",
        "ok no_other_events",
        "ok qp_fatal_when_the_peer_failed",
        "ok failed_write_completes_in_error",
        "ok no_fatal_for_a_requested_err",
        "ok port_err_names_port_2",
        "ok port_active_names_port_2",
        "ok async_drained",
        "ok other_context_gets_port_events_only",
        "ok precise_drop_count_advertised",
        "ok channel_quiet_before",
        "ok ev_channel_readable",
        "ok ev_cq_event_names_the_cq",
        "ok ev_events_plane_down",
        "ok channel_quiet_after",
        "ok small_cq_holds_two",
        "ok small_cq_dropped_the_rest",
        "ok drop_count_counts_dropped_events",
        "ok port_status_answers",
        "ok writes_while_port_2_reported_down",
        "ok port_status_answer_port_2",
        "ok writes_after_port_status_restored",
        "ok replace_ev_on_live_qps",
        "ok writes_after_replace",
        "ok live_qps_use_the_replaced_ev",
        "0 failures",
    ] {
        assert!(out.contains(check), "no {check:?} in:\n{out}");
    }
}
