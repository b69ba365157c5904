//! A QP's state and attributes and the one pure function that changes them, [`Settings::modify`]: the verbs
//! state machine's rules (`mrc_host::verbs::qp_state`) with OCP's departures, the MRC attributes of each step,
//! and the profile references a change takes and drops.

use super::*;
use mrc_ffi::verbs_attr;

/// Verbs attributes libmrc takes at some transition.
const IBV_TAKEN: c_int = IBV_QP_STATE
    | IBV_QP_CUR_STATE
    | IBV_QP_ACCESS_FLAGS
    | IBV_QP_PKEY_INDEX
    | IBV_QP_AV
    | IBV_QP_PATH_MTU
    | IBV_QP_RQ_PSN
    | IBV_QP_SQ_PSN
    | IBV_QP_DEST_QPN
    | IBV_IGNORED_MASK;

/// Verbs attributes OCP's mrc.h lists as not supported, which its own examples (and verbs programs ported to the
/// API) pass anyway: accepted at the transitions verbs allows them, without effect, and named once in the log.
const IBV_IGNORED: [(c_int, &str, &str); 7] = [
    (
        IBV_QP_PORT,
        "IBV_QP_PORT",
        "an MRC QP uses every port (plane)",
    ),
    (
        IBV_QP_TIMEOUT,
        "IBV_QP_TIMEOUT",
        "MRC_QP_TIMEOUT sets the ACK timeout",
    ),
    (
        IBV_QP_RETRY_CNT,
        "IBV_QP_RETRY_CNT",
        "MRC_QP_RETRY_CNT sets the retries",
    ),
    (
        IBV_QP_RNR_RETRY,
        "IBV_QP_RNR_RETRY",
        "receiver-not-ready NACKs count against MRC_QP_RETRY_CNT",
    ),
    (
        IBV_QP_MIN_RNR_TIMER,
        "IBV_QP_MIN_RNR_TIMER",
        "the responder chooses its RNR delay",
    ),
    (
        IBV_QP_MAX_QP_RD_ATOMIC,
        "IBV_QP_MAX_QP_RD_ATOMIC",
        "the send queue bounds the READs in flight",
    ),
    (
        IBV_QP_MAX_DEST_RD_ATOMIC,
        "IBV_QP_MAX_DEST_RD_ATOMIC",
        "the responder takes every READ in the window",
    ),
];

const IBV_IGNORED_MASK: c_int = IBV_QP_PORT
    | IBV_QP_TIMEOUT
    | IBV_QP_RETRY_CNT
    | IBV_QP_RNR_RETRY
    | IBV_QP_MIN_RNR_TIMER
    | IBV_QP_MAX_QP_RD_ATOMIC
    | IBV_QP_MAX_DEST_RD_ATOMIC;

/// Verbs attributes the OCP API refuses, with the reason for the log line.
const IBV_REFUSED: [(c_int, &str); 6] = [
    (IBV_QP_ALT_PATH, "IBV_QP_ALT_PATH"),
    (IBV_QP_PATH_MIG_STATE, "IBV_QP_PATH_MIG_STATE"),
    (IBV_QP_QKEY, "IBV_QP_QKEY (not an RC attribute)"),
    (IBV_QP_EN_SQD_ASYNC_NOTIFY, "IBV_QP_EN_SQD_ASYNC_NOTIFY"),
    (IBV_QP_CAP, "IBV_QP_CAP (queues cannot be resized)"),
    (IBV_QP_RATE_LIMIT, "IBV_QP_RATE_LIMIT"),
];

/// Names once per process each ignored verbs attribute in `vmask` (after a modify that took it).
pub(super) fn log_ignored(vmask: c_int, v: Option<&ibv_qp_attr>) {
    let v = v.copied().unwrap_or_default();
    for (bit, name, why) in IBV_IGNORED {
        if vmask & bit == 0 {
            continue;
        }
        let value = match bit {
            IBV_QP_PORT => v.port_num,
            IBV_QP_TIMEOUT => v.timeout,
            IBV_QP_RETRY_CNT => v.retry_cnt,
            IBV_QP_RNR_RETRY => v.rnr_retry,
            IBV_QP_MIN_RNR_TIMER => v.min_rnr_timer,
            IBV_QP_MAX_QP_RD_ATOMIC => v.max_rd_atomic,
            _ => v.max_dest_rd_atomic,
        };
        crate::log::log_once!(
            name,
            Warn,
            "mrc_modify_qp: {name} ({value}) accepted and ignored: {why} (OCP mrc.h: not supported)"
        );
    }
}

pub(super) const MRC_ALL: c_int = MRC_QP_MAX_WIMM
    | MRC_QP_MAX_WIMM_DEST
    | MRC_QP_MPR
    | MRC_QP_MPR_DEST
    | MRC_QP_TIMEOUT
    | MRC_QP_EV_PROFILE_ID
    | MRC_QP_CC_PROFILE_ID
    | MRC_QP_HINT
    | MRC_QP_RETRY_CNT
    | MRC_QP_CAP
    | MRC_QP_VENDOR_CFG;

const QP_CAPS: u32 = MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED
    | MRC_QP_CAP_DYNAMIC_MPR
    | MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED;

const ACCESS_TAKEN: c_uint =
    (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ) as c_uint;

/// Verbs attributes the OCP API does not require where verbs does: the ones it takes over (port, timers, RD
/// atomics) and the INIT ones its examples leave out (`IBV_QP_STATE` alone). Still taken where verbs takes them.
const IBV_NOT_REQUIRED: u32 = (IBV_IGNORED_MASK | IBV_QP_PKEY_INDEX | IBV_QP_ACCESS_FLAGS) as u32;

/// The MRC attributes a (valid verbs) transition takes.
fn mrc_allowed(from: State, to: State) -> c_int {
    match (from, to) {
        (State::Reset | State::Init, State::Init) => {
            MRC_QP_HINT
                | MRC_QP_EV_PROFILE_ID
                | MRC_QP_CC_PROFILE_ID
                | MRC_QP_CAP
                | MRC_QP_VENDOR_CFG
        }
        // The OCP examples also pass the requester's MPR and WIMM here; they are kept until RTS.
        (State::Init, State::Rtr) => {
            MRC_QP_MAX_WIMM_DEST
                | MRC_QP_MPR_DEST
                | MRC_QP_MAX_WIMM
                | MRC_QP_MPR
                | MRC_QP_CAP
                | MRC_QP_VENDOR_CFG
        }
        (State::Rtr, State::Rts) => {
            MRC_QP_MAX_WIMM
                | MRC_QP_MPR
                | MRC_QP_RETRY_CNT
                | MRC_QP_TIMEOUT
                | MRC_QP_CAP
                | MRC_QP_VENDOR_CFG
        }
        (State::Rts, State::Rts) => {
            MRC_QP_MAX_WIMM | MRC_QP_MPR | MRC_QP_RETRY_CNT | MRC_QP_TIMEOUT
        }
        _ => 0,
    }
}

/// Profile and hint lookups a modify needs; the device's controller state in the library, a table in tests.
pub(crate) trait Env {
    /// Takes a QP reference on an ONLINE profile (`EINVAL` otherwise).
    fn hold(&mut self, kind: ProfileKind, id: u64) -> Result<(), Error>;
    /// Drops a reference taken with `hold`.
    fn release(&mut self, kind: ProfileKind, id: u64);
    /// Whether the device can resize MPR at run time.
    fn dynamic_mpr(&self) -> bool {
        false
    }
}

/// Profile references, by kind and ID.
type Refs = Vec<(ProfileKind, u64)>;

/// What a successful [`Settings::modify`] did besides changing the settings.
#[derive(Debug)]
pub(crate) struct Change {
    /// The state before.
    pub(crate) from: c_uint,
    /// Profile references taken.
    pub(crate) taken: Refs,
    /// Profile references no longer needed.
    pub(crate) dropped: Refs,
}

/// Everything a QP's state and attributes are.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    pub(crate) state: c_uint,
    pub(crate) access: c_uint,
    pub(crate) path_mtu: c_uint,
    pub(crate) dest_qpn: u32,
    pub(crate) rq_psn: u32,
    pub(crate) sq_psn: u32,
    /// The peer as the application named it: GID and LID (its UDP port).
    pub(crate) ah: ibv_ah_attr,
    pub(crate) mrc: mrc_qp_attr,
    /// Which profile IDs are set (an ID may be any value, 0 included).
    pub(crate) ev_profile: Option<u64>,
    pub(crate) cc_profile: Option<u64>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            state: IBV_QPS_RESET,
            access: 0,
            path_mtu: IBV_MTU_4096,
            dest_qpn: 0,
            rq_psn: 0,
            sq_psn: 0,
            ah: ibv_ah_attr::default(),
            mrc: mrc_qp_attr {
                mpr: mrc_qp_attr_mpr {
                    mpr: 8,
                    mpr_dest: 8,
                },
                wimm: mrc_qp_attr_wimm {
                    max_wimm: 128,
                    max_wimm_dest: 128,
                },
                timeout: 14,
                retry: mrc_qp_attr_retry {
                    linear_cnt: 7,
                    exp_cnt: limits::MAX_EXP_RETRY,
                },
                ..Default::default()
            },
            ev_profile: None,
            cc_profile: None,
        }
    }
}

pub(super) fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
    name: &str,
    v: T,
    lo: T,
    hi: T,
) -> Result<T, Error> {
    if v < lo || v > hi {
        return Err(Error::inval(format!("{name} {v} is outside {lo}..={hi}")));
    }
    Ok(v)
}

impl Settings {
    /// Applies one `mrc_modify_qp` (all or nothing); `hint_ok` checks a hint pointer. The new profile
    /// references are taken; the old ones are returned in [`Change::dropped`] for the caller to release once the
    /// change is committed (or [`Change::taken`] to release if the transport refuses it).
    pub(crate) fn modify(
        &mut self,
        vattr: Option<&ibv_qp_attr>,
        vmask: c_int,
        mattr: Option<&mrc_qp_attr>,
        mmask: c_int,
        env: &mut dyn Env,
        hint_ok: &dyn Fn(*mut mrc_qp_hint) -> Result<(), Error>,
    ) -> Result<Change, Error> {
        check_masks(vattr.is_some(), vmask, mattr.is_some(), mmask)?;
        let v = vattr.copied().unwrap_or_default();
        let m = mattr.copied().unwrap_or_default();
        let from = self.state;
        let req = qp_state::Request {
            mask: vmask as u32,
            qp_state: v.qp_state,
            cur_qp_state: v.cur_qp_state,
        };
        let to_state =
            qp_state::check(from, req, IBV_NOT_REQUIRED).map_err(|e| Error::refused(&e))?;
        let to = to_state.to_verbs();
        let mrc_allowed = mrc_allowed(State::from_verbs(from).unwrap_or(State::Err), to_state);
        if mmask & !mrc_allowed != 0 {
            return Err(Error::inval(format!(
                "mrc_attr_mask bits {:#x} cannot be set on {} -> {} (INIT: HINT, EV and CC profiles; RTR: \
                 responder MPR, WIMM and CAP; RTS: requester MPR, WIMM, TIMEOUT, RETRY_CNT)",
                mmask & !mrc_allowed,
                qp_state::state_name(from),
                to_state.name()
            )));
        }

        // Check every value before changing anything.
        let mut next = if to == IBV_QPS_RESET {
            Settings::default()
        } else {
            self.clone()
        };
        next.state = to;
        next.take_verbs(&v, vmask)?;
        next.take_mrc(&m, mmask, env, hint_ok)?;
        let (taken, dropped) = self.swap_profiles(&next, env)?;
        *self = next;
        Ok(Change {
            from,
            taken,
            dropped,
        })
    }

    /// Takes the verbs attributes `vmask` names, each checked.
    fn take_verbs(&mut self, v: &ibv_qp_attr, vmask: c_int) -> Result<(), Error> {
        if vmask & IBV_QP_ACCESS_FLAGS != 0 {
            if v.qp_access_flags & IBV_ACCESS_REMOTE_ATOMIC as c_uint != 0 {
                return Err(Error::inval(
                    "IBV_ACCESS_REMOTE_ATOMIC: MRC QPs have no atomics",
                ));
            }
            if v.qp_access_flags & !ACCESS_TAKEN != 0 {
                return Err(Error::inval(format!(
                    "qp_access_flags {:#x} has bits a QP does not take",
                    v.qp_access_flags
                )));
            }
            self.access = v.qp_access_flags;
        }
        verbs_attr::check_addressing(v, vmask, "")?;
        if vmask & IBV_QP_AV != 0 {
            self.ah = v.ah_attr;
        }
        if vmask & IBV_QP_PATH_MTU != 0 {
            self.path_mtu = v.path_mtu;
        }
        if vmask & IBV_QP_DEST_QPN != 0 {
            self.dest_qpn = v.dest_qp_num;
        }
        if vmask & IBV_QP_RQ_PSN != 0 {
            self.rq_psn = check_range("rq_psn", v.rq_psn, 0, 0xff_ffff)?;
        }
        if vmask & IBV_QP_SQ_PSN != 0 {
            self.sq_psn = check_range("sq_psn", v.sq_psn, 0, 0xff_ffff)?;
        }
        Ok(())
    }

    /// Takes the MRC attributes `mmask` names, each checked.
    fn take_mrc(
        &mut self,
        m: &mrc_qp_attr,
        mmask: c_int,
        env: &mut dyn Env,
        hint_ok: &dyn Fn(*mut mrc_qp_hint) -> Result<(), Error>,
    ) -> Result<(), Error> {
        if mmask & MRC_QP_MAX_WIMM != 0 {
            self.mrc.wimm.max_wimm =
                check_range("wimm.max_wimm", m.wimm.max_wimm, 1, limits::MAX_WIMM)?;
        }
        if mmask & MRC_QP_MAX_WIMM_DEST != 0 {
            self.mrc.wimm.max_wimm_dest = check_range(
                "wimm.max_wimm_dest",
                m.wimm.max_wimm_dest,
                1,
                limits::MAX_WIMM,
            )?;
        }
        if mmask & MRC_QP_MPR != 0 {
            self.mrc.mpr.mpr = check_range("mpr.mpr", m.mpr.mpr, 1, limits::MAX_MPR)?;
        }
        if mmask & MRC_QP_MPR_DEST != 0 {
            self.mrc.mpr.mpr_dest =
                check_range("mpr.mpr_dest", m.mpr.mpr_dest, 1, limits::MAX_MPR)?;
        }
        if mmask & MRC_QP_TIMEOUT != 0 {
            self.mrc.timeout = check_range("timeout", m.timeout, 0, limits::MAX_TIMEOUT)?;
        }
        if mmask & MRC_QP_RETRY_CNT != 0 {
            self.mrc.retry.linear_cnt = check_range(
                "retry.linear_cnt",
                m.retry.linear_cnt,
                0,
                limits::MAX_LINEAR_RETRY,
            )?;
            self.mrc.retry.exp_cnt =
                check_range("retry.exp_cnt", m.retry.exp_cnt, 0, limits::MAX_EXP_RETRY)?;
        }
        if mmask & MRC_QP_CAP != 0 {
            if m.cap & !QP_CAPS != 0 {
                return Err(Error::inval(format!(
                    "cap {:#x} has bits that name no MRC QP capability",
                    m.cap
                )));
            }
            if m.cap & MRC_QP_CAP_DYNAMIC_MPR != 0 && !env.dynamic_mpr() {
                return Err(Error::inval(
                    "MRC_QP_CAP_DYNAMIC_MPR: the device does not offer MRC_DEVICE_CAP_DYNAMIC_MPR",
                ));
            }
            self.mrc.cap = m.cap;
        }
        if mmask & MRC_QP_VENDOR_CFG != 0 && m.vendor_cfg.iter().any(|&b| b != 0) {
            return Err(Error::inval(
                "vendor_cfg is not all zero: libmrc defines no vendor configuration",
            ));
        }
        if mmask & MRC_QP_HINT != 0 {
            if !m.qp_hint.is_null() {
                hint_ok(m.qp_hint)?;
            }
            self.mrc.qp_hint = m.qp_hint;
        }
        if mmask & MRC_QP_EV_PROFILE_ID != 0 {
            self.ev_profile = Some(m.profile.ev_profile_id);
            self.mrc.profile.ev_profile_id = m.profile.ev_profile_id;
        }
        if mmask & MRC_QP_CC_PROFILE_ID != 0 {
            self.cc_profile = Some(m.profile.cc_profile_id);
            self.mrc.profile.cc_profile_id = m.profile.cc_profile_id;
        }

        Ok(())
    }

    /// Holds the profiles `next` names that this QP does not yet hold, releasing all of them if one is
    /// refused; returns those taken and those `next` no longer names.
    fn swap_profiles(&self, next: &Settings, env: &mut dyn Env) -> Result<(Refs, Refs), Error> {
        let mut taken = Vec::new();
        for (kind, old, new) in [
            (ProfileKind::Ev, self.ev_profile, next.ev_profile),
            (ProfileKind::Cc, self.cc_profile, next.cc_profile),
        ] {
            if new != old
                && let Some(id) = new
            {
                if let Err(e) = env.hold(kind, id) {
                    for (k, i) in taken {
                        env.release(k, i);
                    }
                    return Err(e);
                }
                taken.push((kind, id));
            }
        }
        let mut dropped = Vec::new();
        for (kind, old, new) in [
            (ProfileKind::Ev, self.ev_profile, next.ev_profile),
            (ProfileKind::Cc, self.cc_profile, next.cc_profile),
        ] {
            if new != old
                && let Some(id) = old
            {
                dropped.push((kind, id));
            }
        }
        Ok((taken, dropped))
    }
}

/// Refuses a NULL attribute with a mask, refused and unknown mask bits.
fn check_masks(vattr: bool, vmask: c_int, mattr: bool, mmask: c_int) -> Result<(), Error> {
    if vmask != 0 && !vattr {
        return Err(Error::inval("vattr is NULL but vattr_mask is not 0"));
    }
    if mmask != 0 && !mattr {
        return Err(Error::inval("mrc_attr is NULL but mrc_attr_mask is not 0"));
    }
    for (bit, name) in IBV_REFUSED {
        if vmask & bit != 0 {
            return Err(Error::inval(format!(
                "{name} is not taken by mrc_modify_qp"
            )));
        }
    }
    if vmask & !IBV_TAKEN != 0 {
        return Err(Error::inval(format!(
            "vattr_mask {vmask:#x} has bits that name no attribute ({:#x})",
            vmask & !IBV_TAKEN
        )));
    }
    if mmask & !MRC_ALL != 0 {
        return Err(Error::inval(format!(
            "mrc_attr_mask {mmask:#x} has bits that name no attribute ({:#x})",
            mmask & !MRC_ALL
        )));
    }
    Ok(())
}
