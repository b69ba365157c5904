//! The controller rules without a device: profile life cycles, EV operations, NSCC parameters, ports.

use super::*;

fn udp_device() -> State {
    State::new(4, MRC_CTL_EV_FMT_MODE_UDP, 16)
}

fn stev(v: u32, port: u8) -> mrc_ctl_ev {
    let mut ev = mrc_ctl_ev {
        port,
        ..Default::default()
    };
    ev.val[..4].copy_from_slice(&v.to_ne_bytes());
    ev
}

fn fmt_online(s: &mut State, id: u64, widths: &[u8]) {
    let mut f: Vec<mrc_ctl_ev_fmt_field> = widths
        .iter()
        .map(|&width| mrc_ctl_ev_fmt_field { width })
        .collect();
    let mut n = f.len() as c_int;
    let a = mrc_ctl_ev_fmt_profile_attr {
        profile_state: MRC_CTL_PROFILE_OFFLINE,
        ev_fmt_mode: MRC_CTL_EV_FMT_MODE_UDP,
        ..Default::default()
    };
    let mut a = a;
    a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
    s.modify_fmt(
        id,
        &a,
        MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP,
        &mut f,
        &mut n,
    )
    .unwrap();
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    s.modify_fmt(id, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
        .unwrap();
}

fn ev_attr(state: u32) -> mrc_ctl_ev_profile_attr {
    mrc_ctl_ev_profile_attr {
        profile_state: state,
        ..Default::default()
    }
}

/// Runs one EV operation through `modify_ev` (or `query_ev`) and returns the entries and the count.
fn op(
    s: &mut State,
    id: u64,
    op: u32,
    mut entries: Vec<mrc_ctl_ev_op_entry>,
    query: bool,
) -> (Result<(), Error>, Vec<mrc_ctl_ev_op_entry>, c_int) {
    let mut count = entries.len() as c_int;
    let o = EvOp {
        op,
        entries: &mut entries,
        count_out: &mut count,
    };
    let r = if query {
        s.query_ev(id, &mut ev_attr(0), MRC_CTL_EV_PROFILE_EV_OP, Some(o), None)
    } else {
        s.modify_ev(id, &ev_attr(0), MRC_CTL_EV_PROFILE_EV_OP, Some(o), None)
    };
    (r, entries, count)
}

fn entry(ev: mrc_ctl_ev, ev_new: mrc_ctl_ev, state: u32) -> mrc_ctl_ev_op_entry {
    mrc_ctl_ev_op_entry {
        ev,
        ev_new,
        state,
        flags: 0,
    }
}

#[test]
fn format_profiles_follow_the_life_cycle_and_the_device_limits() {
    let mut s = udp_device();
    let mut n = 0;
    let mut a = mrc_ctl_ev_fmt_profile_attr {
        profile_state: MRC_CTL_PROFILE_OFFLINE,
        ev_fmt_mode: MRC_CTL_EV_FMT_MODE_STEV,
        ..Default::default()
    };
    let both = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE;
    let e = s.modify_fmt(13, &a, both, &mut [], &mut n).unwrap_err();
    assert!(
        e.why().contains("not one mode the device carries"),
        "{}",
        e.why()
    );
    a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
    a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
    let mut wide = [
        mrc_ctl_ev_fmt_field { width: 12 },
        mrc_ctl_ev_fmt_field { width: 8 },
    ];
    let e = s
        .modify_fmt(13, &a, both | MRC_CTL_EV_FMT_PROFILE_OP, &mut wide, &mut n)
        .unwrap_err();
    assert_eq!(e.errno, libc::E2BIG, "20 bits do not fit a UDP source port");
    assert!(!s.fmt.contains_key(&13), "a refused call changes nothing");
    // OFFLINE without fields cannot go ONLINE.
    s.modify_fmt(13, &a, both, &mut [], &mut n).unwrap();
    a.profile_state = MRC_CTL_PROFILE_ONLINE;
    assert!(
        s.modify_fmt(13, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
            .unwrap_err()
            .why()
            .contains("needs the format fields")
    );
    fmt_online(&mut s, 14, &[8, 8]);
    let mut q = mrc_ctl_ev_fmt_profile_attr::default();
    let mut one = [mrc_ctl_ev_fmt_field::default()];
    q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
    let e = s
        .query_fmt(14, &mut q, MRC_CTL_EV_FMT_PROFILE_OP, &mut one, &mut n)
        .unwrap_err();
    assert_eq!(
        (e.errno, n),
        (libc::E2BIG, 2),
        "E2BIG reports the size needed"
    );
    let mut two = [mrc_ctl_ev_fmt_field::default(); 2];
    s.query_fmt(
        14,
        &mut q,
        MRC_CTL_EV_FMT_PROFILE_OP | MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE,
        &mut two,
        &mut n,
    )
    .unwrap();
    assert_eq!(
        (q.profile_state, q.ev_fmt_mode, two[0].width, two[1].width),
        (MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_MODE_UDP, 8, 8)
    );
    // ONLINE -> INIT skips OFFLINE.
    a.profile_state = MRC_CTL_PROFILE_INIT;
    assert!(
        s.modify_fmt(14, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
            .unwrap_err()
            .why()
            .contains("not a valid transition")
    );
}

#[test]
fn explicit_ev_profile_is_filled_put_online_and_evs_are_denied() {
    let mut s = udp_device();
    fmt_online(&mut s, 13, &[8, 8]);
    let mut a = ev_attr(MRC_CTL_PROFILE_OFFLINE);
    a.ev_mode = MRC_CTL_EV_MODE_EXP;
    a.ev_fmt_profile_id = 13;
    a.ev_count = 4;
    a.ev_min_active = 1;
    a.ev_event_mask = (MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) as c_int;
    let cfg = MRC_CTL_EV_PROFILE_STATE
        | MRC_CTL_EV_PROFILE_MODE
        | MRC_CTL_EV_PROFILE_FMT_ID
        | MRC_CTL_EV_PROFILE_COUNT
        | MRC_CTL_EV_PROFILE_MIN_ACTIVE
        | MRC_CTL_EV_PROFILE_EVENT_MASK;
    s.modify_ev(1, &a, cfg, None, None).unwrap();
    // Unpopulated slots keep it from going ONLINE.
    let online = ev_attr(MRC_CTL_PROFILE_ONLINE);
    let e = s
        .modify_ev(1, &online, MRC_CTL_EV_PROFILE_STATE, None, None)
        .unwrap_err();
    assert!(
        e.why().contains("slot 0 is still MRC_CTL_EV_UNPOPULATED"),
        "{}",
        e.why()
    );
    // A port that is no plane, and a value wider than the 16-bit format, are refused.
    let unpop = mrc_ctl_ev::default();
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_REPLACE_EV,
        vec![entry(unpop, stev(1, 5), 0)],
        false,
    );
    assert!(r.unwrap_err().why().contains("port 5"));
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_REPLACE_EV,
        vec![entry(unpop, stev(1 << 16, 1), 0)],
        false,
    );
    assert!(
        r.unwrap_err()
            .why()
            .contains("wider than the 16-bit format")
    );
    let evs: Vec<mrc_ctl_ev> = (0..4u32).map(|i| stev((i << 8) | i, i as u8 + 1)).collect();
    let fill = evs.iter().map(|&e| entry(unpop, e, 0)).collect();
    let (r, ..) = op(&mut s, 1, MRC_CTL_EV_OP_REPLACE_EV, fill, false);
    r.unwrap();
    s.modify_ev(1, &online, MRC_CTL_EV_PROFILE_STATE, None, None)
        .unwrap();
    // The format is in use now.
    let mut n = 0;
    let off = mrc_ctl_ev_fmt_profile_attr {
        profile_state: MRC_CTL_PROFILE_OFFLINE,
        ..Default::default()
    };
    assert_eq!(
        s.modify_fmt(13, &off, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
            .unwrap_err()
            .errno,
        libc::EBUSY
    );

    // DENY one EV: its state changes, the others stay GOOD.
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_MODIFY_EV_STATE,
        vec![entry(evs[2], unpop, MRC_CTL_EV_DENIED)],
        false,
    );
    r.unwrap();
    let (r, got, _) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_QUERY_EV_STATE,
        vec![entry(evs[2], unpop, 0), entry(evs[1], unpop, 0)],
        true,
    );
    r.unwrap();
    assert_eq!(
        (got[0].state, got[1].state),
        (MRC_CTL_EV_DENIED, MRC_CTL_EV_GOOD)
    );
    // The controller cannot declare ASSUMED_BAD (the transport's verdict).
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_MODIFY_EV_STATE,
        vec![entry(evs[0], unpop, MRC_CTL_EV_ASSUMED_BAD)],
        false,
    );
    assert!(
        r.unwrap_err()
            .why()
            .contains("ASSUMED_BAD is the transport's verdict")
    );
    // Entries apply in order up to the first failure.
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_MODIFY_EV_STATE,
        vec![
            entry(evs[0], unpop, MRC_CTL_EV_DENIED),
            entry(stev(99, 1), unpop, MRC_CTL_EV_DENIED),
        ],
        false,
    );
    assert_eq!(r.unwrap_err().errno, libc::ENOENT);
    // The array: too short reports the size; then every EV and its state.
    let (r, _, cnt) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_QUERY_EV_ARRAY,
        vec![Default::default(); 2],
        true,
    );
    assert_eq!((r.unwrap_err().errno, cnt), (libc::E2BIG, 4));
    let (r, all, cnt) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_QUERY_EV_ARRAY,
        vec![Default::default(); 4],
        true,
    );
    r.unwrap();
    assert_eq!(cnt, 4);
    assert_eq!(all.iter().map(|e| e.ev).collect::<Vec<_>>(), evs);
    assert_eq!(
        all.iter().map(|e| e.state).collect::<Vec<_>>(),
        [
            MRC_CTL_EV_DENIED,
            MRC_CTL_EV_GOOD,
            MRC_CTL_EV_DENIED,
            MRC_CTL_EV_GOOD
        ]
    );
    // A query cannot modify.
    let (r, ..) = op(
        &mut s,
        1,
        MRC_CTL_EV_OP_MODIFY_EV_STATE,
        vec![entry(evs[1], unpop, MRC_CTL_EV_DENIED)],
        true,
    );
    assert_eq!(r.unwrap_err().errno, libc::EINVAL);

    // QPs pin the profile ONLINE.
    s.hold(ProfileKind::Ev, 1).unwrap();
    let offline = ev_attr(MRC_CTL_PROFILE_OFFLINE);
    assert_eq!(
        s.modify_ev(1, &offline, MRC_CTL_EV_PROFILE_STATE, None, None)
            .unwrap_err()
            .errno,
        libc::EBUSY
    );
    s.release(ProfileKind::Ev, 1);
    s.modify_ev(1, &offline, MRC_CTL_EV_PROFILE_STATE, None, None)
        .unwrap();
    assert!(
        s.hold(ProfileKind::Ev, 1)
            .unwrap_err()
            .why()
            .contains("OFFLINE, not ONLINE")
    );
    s.modify_ev(
        1,
        &ev_attr(MRC_CTL_PROFILE_INIT),
        MRC_CTL_EV_PROFILE_STATE,
        None,
        None,
    )
    .unwrap();
    assert!(
        s.ev.is_empty() && s.ev_used() == 0,
        "INIT forgets the profile and frees its EVs"
    );
    s.modify_fmt(13, &off, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
        .unwrap();
}

#[test]
fn ev_profile_attribute_rules() {
    let mut s = udp_device();
    let mut a = ev_attr(MRC_CTL_PROFILE_OFFLINE);
    a.ev_mode = MRC_CTL_EV_MODE_GEN;
    let m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE;
    assert!(
        s.modify_ev(2, &a, m, None, None)
            .unwrap_err()
            .why()
            .contains("MRC_CTL_EV_MODE_GEN")
    );
    a.ev_mode = MRC_CTL_EV_MODE_EXP;
    assert!(
        s.modify_ev(2, &a, m, None, None)
            .unwrap_err()
            .why()
            .contains("needs FMT_ID and COUNT")
    );
    a.ev_mode = MRC_CTL_EV_MODE_AUTO;
    s.modify_ev(2, &a, m, None, None).unwrap();
    let (r, ..) = op(&mut s, 2, MRC_CTL_EV_OP_QUERY_EV_ARRAY, vec![], true);
    assert!(r.unwrap_err().why().contains("explicit"));
    a.ev_count = limits::EV_MAX_COUNT_PROFILE + 1;
    assert_eq!(
        s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_COUNT, None, None)
            .unwrap_err()
            .errno,
        libc::E2BIG
    );
    a.ev_event_mask = MRC_CTL_EV_DENIED as c_int;
    assert!(
        s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_EVENT_MASK, None, None)
            .unwrap_err()
            .why()
            .contains("only MRC_CTL_EV_GOOD")
    );
    let both = MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
    assert!(
        s.modify_ev(2, &a, both, None, None)
            .unwrap_err()
            .why()
            .contains("exclude each other")
    );
    a.cur_profile_state = MRC_CTL_PROFILE_ONLINE;
    assert!(
        s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_CUR_STATE, None, None)
            .unwrap_err()
            .why()
            .contains("cur_profile_state says ONLINE")
    );
    // An AUTO profile goes ONLINE without EVs.
    s.modify_ev(
        2,
        &ev_attr(MRC_CTL_PROFILE_ONLINE),
        MRC_CTL_EV_PROFILE_STATE,
        None,
        None,
    )
    .unwrap();
    let mut q = ev_attr(0);
    s.query_ev(
        2,
        &mut q,
        MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE,
        None,
        None,
    )
    .unwrap();
    assert_eq!(
        (q.profile_state, q.cur_profile_state, q.ev_mode),
        (
            MRC_CTL_PROFILE_ONLINE,
            MRC_CTL_PROFILE_ONLINE,
            MRC_CTL_EV_MODE_AUTO
        )
    );
}

fn nscc() -> mrc_ctl_cc_nscc_cfg {
    mrc_ctl_cc_nscc_cfg {
        base_rtt: 10_000,
        target_delay: 7_500,
        eta: 0.15,
        fi: 1.0,
        fi_scale: 1.0,
        gamma: 1.0,
        max_md_jump: 0.5,
        max_cwnd: 1 << 20,
        ..Default::default()
    }
}

#[test]
fn cc_profiles_take_nscc_parameters() {
    let mut s = udp_device();
    let a = mrc_ctl_cc_profile_attr {
        profile_state: MRC_CTL_PROFILE_OFFLINE,
        ..Default::default()
    };
    let sa = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM;
    let e = s.modify_cc(3, &a, sa, Some(c"dctcp"), None).unwrap_err();
    assert!(
        e.why().contains("\"dctcp\" is not one of the device's"),
        "{}",
        e.why()
    );
    s.modify_cc(3, &a, sa, Some(NSCC), None).unwrap();
    let online = mrc_ctl_cc_profile_attr {
        profile_state: MRC_CTL_PROFILE_ONLINE,
        ..Default::default()
    };
    assert!(
        s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_STATE, None, None)
            .unwrap_err()
            .why()
            .contains("needs the configuration")
    );
    let bad = mrc_ctl_cc_nscc_cfg {
        max_md_jump: 2.0,
        ..nscc()
    };
    assert!(
        s.modify_cc(3, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(bad))
            .unwrap_err()
            .why()
            .contains("max_md_jump")
    );
    let nan = mrc_ctl_cc_nscc_cfg {
        eta: f32::NAN,
        ..nscc()
    };
    assert!(
        s.modify_cc(3, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(nan))
            .unwrap_err()
            .why()
            .contains("eta")
    );
    s.modify_cc(
        3,
        &online,
        MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG,
        None,
        Some(nscc()),
    )
    .unwrap();
    // ONLINE: the configuration may change (MODIFY_ONLINE), the algorithm may not.
    let tuned = mrc_ctl_cc_nscc_cfg {
        gamma: 0.8,
        ..nscc()
    };
    s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_CONFIG, None, Some(tuned))
        .unwrap();
    assert!(
        s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_ALGORITHM, Some(NSCC), None)
            .is_err()
    );
    let mut q = mrc_ctl_cc_profile_attr::default();
    let cfg = s
        .query_cc(
            3,
            &mut q,
            MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG,
        )
        .unwrap();
    assert_eq!(cfg, Some(tuned));
    assert_eq!(q.profile_state, MRC_CTL_PROFILE_ONLINE);
    // SAFETY: the algorithm is one of the static names.
    assert_eq!(unsafe { CStr::from_ptr(q.algorithm) }, NSCC);
    // A profile without congestion control takes no configuration and goes ONLINE as it is.
    s.modify_cc(4, &a, sa, None, None).unwrap();
    assert!(
        s.modify_cc(4, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(nscc()))
            .is_err()
    );
    s.modify_cc(4, &online, MRC_CTL_CC_PROFILE_STATE, None, None)
        .unwrap();
    s.hold(ProfileKind::Cc, 4).unwrap();
    let off = mrc_ctl_cc_profile_attr {
        profile_state: MRC_CTL_PROFILE_OFFLINE,
        ..Default::default()
    };
    assert_eq!(
        s.modify_cc(4, &off, MRC_CTL_CC_PROFILE_STATE, None, None)
            .unwrap_err()
            .errno,
        libc::EBUSY
    );
}

#[test]
fn ports_are_the_planes() {
    let s = udp_device();
    assert_eq!(s.port_index(1).unwrap(), 0);
    assert_eq!(s.port_index(4).unwrap(), 3);
    assert_eq!(s.port_index(0).unwrap_err().errno, libc::EINVAL);
    assert!(s.port_index(5).unwrap_err().why().contains("1..=4"));
}
