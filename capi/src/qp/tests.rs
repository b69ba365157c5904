//! `Settings::modify` without a device: the OCP walk to RTS, the example masks, refusals that change nothing.

use super::*;
use std::collections::BTreeMap;

/// Profiles 1 and 2 are ONLINE; counts references.
#[derive(Default)]
struct Table(BTreeMap<(u8, u64), i32>);

impl Env for Table {
    fn hold(&mut self, kind: ProfileKind, id: u64) -> Result<(), Error> {
        if id == 0 || id > 2 {
            return Err(Error::inval(format!("profile {id} is not ONLINE")));
        }
        *self.0.entry((kind as u8, id)).or_default() += 1;
        Ok(())
    }
    fn release(&mut self, kind: ProfileKind, id: u64) {
        *self.0.entry((kind as u8, id)).or_default() -= 1;
    }
}

fn no_hints(_: *mut mrc_qp_hint) -> Result<(), Error> {
    Err(Error::inval("no hints here"))
}

fn to(
    s: &mut Settings,
    env: &mut Table,
    v: ibv_qp_attr,
    vm: c_int,
    m: mrc_qp_attr,
    mm: c_int,
) -> Result<c_uint, Error> {
    let c = s.modify(Some(&v), vm, Some(&m), mm, env, &no_hints)?;
    for (k, id) in c.dropped {
        env.release(k, id);
    }
    Ok(c.from)
}

fn state(st: c_uint) -> ibv_qp_attr {
    ibv_qp_attr {
        qp_state: st,
        ..Default::default()
    }
}

fn rtr() -> ibv_qp_attr {
    let mut a = state(IBV_QPS_RTR);
    a.ah_attr.is_global = 1;
    a.ah_attr.grh.dgid.raw[15] = 1;
    a.ah_attr.dlid = 4791;
    a.path_mtu = IBV_MTU_4096;
    a.dest_qp_num = 0x42;
    a.rq_psn = 7;
    a
}
const RTR_MASK: c_int =
    IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN;

#[test]
fn a_qp_walks_to_rts_with_the_attributes_of_each_step() {
    let mut s = Settings::default();
    let mut env = Table::default();
    let prof = mrc_qp_attr {
        profile: mrc_qp_attr_profile {
            ev_profile_id: 1,
            cc_profile_id: 2,
        },
        ..Default::default()
    };
    to(
        &mut s,
        &mut env,
        state(IBV_QPS_INIT),
        IBV_QP_STATE,
        prof,
        MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID,
    )
    .unwrap();
    assert_eq!((s.ev_profile, s.cc_profile), (Some(1), Some(2)));
    assert_eq!(env.0[&(ProfileKind::Ev as u8, 1)], 1);
    let dest = mrc_qp_attr {
        mpr: mrc_qp_attr_mpr {
            mpr: 8,
            mpr_dest: 16,
        },
        wimm: mrc_qp_attr_wimm {
            max_wimm: 128,
            max_wimm_dest: 256,
        },
        ..Default::default()
    };
    // The OCP example's RTR mask (requester values too) is taken.
    to(
        &mut s,
        &mut env,
        rtr(),
        RTR_MASK,
        dest,
        MRC_QP_MPR | MRC_QP_MPR_DEST | MRC_QP_MAX_WIMM | MRC_QP_MAX_WIMM_DEST,
    )
    .unwrap();
    assert_eq!(
        (s.mrc.mpr.mpr_dest, s.mrc.wimm.max_wimm_dest, s.dest_qpn),
        (16, 256, 0x42)
    );
    let timers = mrc_qp_attr {
        timeout: 8,
        retry: mrc_qp_attr_retry {
            linear_cnt: 7,
            exp_cnt: 25,
        },
        ..Default::default()
    };
    to(
        &mut s,
        &mut env,
        state(IBV_QPS_RTS),
        IBV_QP_STATE | IBV_QP_SQ_PSN,
        timers,
        MRC_QP_TIMEOUT | MRC_QP_RETRY_CNT,
    )
    .unwrap();
    assert_eq!(
        (s.state, s.mrc.timeout, s.mrc.retry.exp_cnt),
        (IBV_QPS_RTS, 8, 25)
    );
    // Back to RESET forgets everything and drops the profile references.
    to(
        &mut s,
        &mut env,
        state(IBV_QPS_RESET),
        IBV_QP_STATE,
        Default::default(),
        0,
    )
    .unwrap();
    assert_eq!(s, Settings::default());
    assert!(env.0.values().all(|&n| n == 0), "{:?}", env.0);
}

/// OCP's mrc_example: IBV_QP_PORT at INIT, the RTS mask with verbs' timeout, retry_cnt 14 and rnr_retry 14
/// (beyond verbs' 3-bit range). Taken; the verbs values change nothing (the MRC timers stay).
#[test]
fn the_ocp_example_masks_are_taken_and_their_verbs_timers_ignored() {
    let mut s = Settings::default();
    let mut env = Table::default();
    let none = mrc_qp_attr::default();
    let before = s.mrc;
    let init = ibv_qp_attr {
        port_num: 1,
        qp_access_flags: (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE) as c_uint,
        ..state(IBV_QPS_INIT)
    };
    let init_mask = IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
    to(&mut s, &mut env, init, init_mask, none, 0).unwrap();
    to(
        &mut s,
        &mut env,
        rtr(),
        IBV_QP_STATE | IBV_QP_AV | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_PATH_MTU,
        none,
        0,
    )
    .unwrap();
    let rts = ibv_qp_attr {
        timeout: 7,
        retry_cnt: 14,
        rnr_retry: 14,
        ..state(IBV_QPS_RTS)
    };
    let rts_mask =
        IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_TIMEOUT;
    to(&mut s, &mut env, rts, rts_mask, none, 0).unwrap();
    assert_eq!(s.state, IBV_QPS_RTS);
    assert_eq!(
        (s.mrc.timeout, s.mrc.retry.linear_cnt, s.mrc.retry.exp_cnt),
        (
            before.timeout,
            before.retry.linear_cnt,
            before.retry.exp_cnt
        )
    );
}

#[test]
fn wrong_steps_masks_and_values_change_nothing() {
    let mut s = Settings::default();
    let mut env = Table::default();
    let none = mrc_qp_attr::default();
    let cases: Vec<(ibv_qp_attr, c_int, mrc_qp_attr, c_int, &str)> = vec![
        (
            rtr(),
            RTR_MASK,
            none,
            0,
            "RESET -> RTR is not a valid transition",
        ),
        (state(9), IBV_QP_STATE, none, 0, "not a valid transition"),
        (
            ibv_qp_attr {
                port_num: 2,
                ..state(IBV_QPS_INIT)
            },
            IBV_QP_STATE | IBV_QP_PORT,
            none,
            0,
            "port_num 2 is not 1",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE | IBV_QP_TIMEOUT,
            none,
            0,
            "RESET -> INIT does not take IBV_QP_TIMEOUT",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE | IBV_QP_ALT_PATH,
            none,
            0,
            "IBV_QP_ALT_PATH is not taken",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE | (1 << 30),
            none,
            0,
            "name no attribute",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE,
            none,
            MRC_QP_TIMEOUT,
            "cannot be set on RESET -> INIT",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE,
            none,
            1 << 12,
            "name no attribute",
        ),
        (
            ibv_qp_attr {
                qp_access_flags: IBV_ACCESS_REMOTE_ATOMIC as c_uint,
                ..state(IBV_QPS_INIT)
            },
            IBV_QP_STATE | IBV_QP_ACCESS_FLAGS,
            none,
            0,
            "no atomics",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE,
            mrc_qp_attr {
                profile: mrc_qp_attr_profile {
                    ev_profile_id: 1,
                    cc_profile_id: 9,
                },
                ..none
            },
            MRC_QP_EV_PROFILE_ID | MRC_QP_CC_PROFILE_ID,
            "profile 9 is not ONLINE",
        ),
        (
            state(IBV_QPS_INIT),
            IBV_QP_STATE,
            mrc_qp_attr {
                cap: MRC_QP_CAP_DYNAMIC_MPR,
                ..none
            },
            MRC_QP_CAP,
            "DYNAMIC_MPR",
        ),
        (
            ibv_qp_attr {
                cur_qp_state: IBV_QPS_RTS,
                ..state(IBV_QPS_INIT)
            },
            IBV_QP_STATE | IBV_QP_CUR_STATE,
            none,
            0,
            "cur_qp_state says RTS",
        ),
    ];
    for (v, vm, m, mm, why) in cases {
        let e = to(&mut s, &mut env, v, vm, m, mm).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.why().contains(why), "{why:?} not in {:?}", e.why());
        assert_eq!(s, Settings::default());
    }
    // The drain states are not supported (the verbs shim says the same).
    let e = to(&mut s, &mut env, state(IBV_QPS_SQD), IBV_QP_STATE, none, 0).unwrap_err();
    assert_eq!(e.errno, libc::EOPNOTSUPP, "{}", e.why());
    assert!(
        env.0.values().all(|&n| n == 0),
        "a refused profile pair leaked a reference: {:?}",
        env.0
    );
    to(&mut s, &mut env, state(IBV_QPS_INIT), IBV_QP_STATE, none, 0).unwrap();
    // RTR needs the peer; out-of-range values are named.
    let e = to(&mut s, &mut env, state(IBV_QPS_RTR), IBV_QP_STATE, none, 0).unwrap_err();
    assert!(
        e.why().starts_with(
            "INIT -> RTR needs IBV_QP_AV|IBV_QP_PATH_MTU|IBV_QP_RQ_PSN|IBV_QP_DEST_QPN"
        ),
        "{}",
        e.why()
    );
    let mut bad = rtr();
    bad.ah_attr.is_global = 0;
    assert!(
        to(&mut s, &mut env, bad, RTR_MASK, none, 0)
            .unwrap_err()
            .why()
            .contains("is_global")
    );
    let big = mrc_qp_attr {
        mpr: mrc_qp_attr_mpr {
            mpr: 0,
            mpr_dest: 65,
        },
        ..none
    };
    let e = to(&mut s, &mut env, rtr(), RTR_MASK, big, MRC_QP_MPR_DEST).unwrap_err();
    assert!(
        e.why().contains("mpr.mpr_dest 65 is outside 1..=64"),
        "{}",
        e.why()
    );
    assert_eq!(s.state, IBV_QPS_INIT);
    let mut r = rtr();
    r.dest_qp_num = 1 << 24;
    assert!(
        to(&mut s, &mut env, r, RTR_MASK, none, 0)
            .unwrap_err()
            .why()
            .contains("dest_qp_num")
    );
    to(&mut s, &mut env, rtr(), RTR_MASK, none, 0).unwrap();
    let t = mrc_qp_attr {
        timeout: 25,
        ..none
    };
    assert!(
        to(
            &mut s,
            &mut env,
            state(IBV_QPS_RTS),
            IBV_QP_STATE | IBV_QP_SQ_PSN,
            t,
            MRC_QP_TIMEOUT
        )
        .unwrap_err()
        .why()
        .contains("timeout 25")
    );
    // Any state may go to ERR.
    to(&mut s, &mut env, state(IBV_QPS_ERR), IBV_QP_STATE, none, 0).unwrap();
    assert_eq!(s.state, IBV_QPS_ERR);
}
