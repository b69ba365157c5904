//! MRC QPs: creation, the RESET → INIT → RTR → RTS state machine with its verbs and MRC attribute masks,
//! queries, and posting (through the transport).
//!
//! The attribute rules are those of an RC QP in verbs (`mrc_host::verbs::qp_state`, the shim's too), minus what
//! the OCP API takes over (port, timers, retries, RD atomics, alternate paths) and plus the MRC attributes of
//! each step. `Settings::modify` is pure
//! so the rules are unit-tested without a device.

#![allow(
    non_camel_case_types,
    reason = "the object types carry their C names (mrc.h)"
)]

use std::ffi::{c_int, c_uint, c_void};
use std::sync::{Arc, Mutex};

use crate::abi::*;
use crate::context::{context, mrc_context};
use crate::cq::{CqKind, cq, mrc_cq};
use crate::ctl::ProfileKind;
use crate::device::{Device, limits};
use crate::ffi::{Error, FFI, non_null};
use crate::hint::{hint, mrc_qp_hint};
use crate::registry::{self, Kind, Object};
use crate::{bridge, transport};
use mrc_host::verbs::qp_state::{self, State};

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
fn log_ignored(vmask: c_int, v: Option<&ibv_qp_attr>) {
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

const MRC_ALL: c_int = MRC_QP_MAX_WIMM
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

/// What a successful [`Settings::modify`] did besides changing the settings.
#[derive(Debug)]
pub(crate) struct Change {
    /// The state before.
    pub(crate) from: c_uint,
    /// Profile references taken.
    pub(crate) taken: Vec<(ProfileKind, u64)>,
    /// Profile references no longer needed.
    pub(crate) dropped: Vec<(ProfileKind, u64)>,
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

fn check_range<T: PartialOrd + std::fmt::Display + Copy>(
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
        if vmask != 0 && vattr.is_none() {
            return Err(Error::inval("vattr is NULL but vattr_mask is not 0"));
        }
        if mmask != 0 && mattr.is_none() {
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
            next.access = v.qp_access_flags;
        }
        if vmask & IBV_QP_PORT != 0 && v.port_num != 1 {
            return Err(Error::inval(format!(
                "port_num {} is not 1 (the device has one port)",
                v.port_num
            )));
        }
        if vmask & IBV_QP_PKEY_INDEX != 0 && v.pkey_index != 0 {
            return Err(Error::inval(format!(
                "pkey_index {} is not 0 (the port has one P_Key)",
                v.pkey_index
            )));
        }
        if vmask & IBV_QP_AV != 0 {
            let ah = v.ah_attr;
            if ah.is_global == 0 {
                return Err(Error::inval(
                    "ah_attr.is_global is 0: MRC peers are found by GID (grh.dgid = the peer's GID 0; dlid \
                     optional)",
                ));
            }
            if ah.grh.sgid_index != 0 {
                return Err(Error::inval(format!(
                    "ah_attr.grh.sgid_index {} is not 0 (the device has one GID)",
                    ah.grh.sgid_index
                )));
            }
            if ah.port_num > 1 {
                return Err(Error::inval(format!(
                    "ah_attr.port_num {} is not 1",
                    ah.port_num
                )));
            }
            next.ah = ah;
        }
        if vmask & IBV_QP_PATH_MTU != 0 {
            next.path_mtu = check_range("path_mtu", v.path_mtu, IBV_MTU_256, IBV_MTU_4096)?;
        }
        if vmask & IBV_QP_DEST_QPN != 0 {
            next.dest_qpn = check_range("dest_qp_num", v.dest_qp_num, 0, 0xff_ffff)?;
        }
        if vmask & IBV_QP_RQ_PSN != 0 {
            next.rq_psn = check_range("rq_psn", v.rq_psn, 0, 0xff_ffff)?;
        }
        if vmask & IBV_QP_SQ_PSN != 0 {
            next.sq_psn = check_range("sq_psn", v.sq_psn, 0, 0xff_ffff)?;
        }
        if mmask & MRC_QP_MAX_WIMM != 0 {
            next.mrc.wimm.max_wimm =
                check_range("wimm.max_wimm", m.wimm.max_wimm, 1, limits::MAX_WIMM)?;
        }
        if mmask & MRC_QP_MAX_WIMM_DEST != 0 {
            next.mrc.wimm.max_wimm_dest = check_range(
                "wimm.max_wimm_dest",
                m.wimm.max_wimm_dest,
                1,
                limits::MAX_WIMM,
            )?;
        }
        if mmask & MRC_QP_MPR != 0 {
            next.mrc.mpr.mpr = check_range("mpr.mpr", m.mpr.mpr, 1, limits::MAX_MPR)?;
        }
        if mmask & MRC_QP_MPR_DEST != 0 {
            next.mrc.mpr.mpr_dest =
                check_range("mpr.mpr_dest", m.mpr.mpr_dest, 1, limits::MAX_MPR)?;
        }
        if mmask & MRC_QP_TIMEOUT != 0 {
            next.mrc.timeout = check_range("timeout", m.timeout, 0, limits::MAX_TIMEOUT)?;
        }
        if mmask & MRC_QP_RETRY_CNT != 0 {
            next.mrc.retry.linear_cnt = check_range(
                "retry.linear_cnt",
                m.retry.linear_cnt,
                0,
                limits::MAX_LINEAR_RETRY,
            )?;
            next.mrc.retry.exp_cnt =
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
            next.mrc.cap = m.cap;
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
            next.mrc.qp_hint = m.qp_hint;
        }
        if mmask & MRC_QP_EV_PROFILE_ID != 0 {
            next.ev_profile = Some(m.profile.ev_profile_id);
            next.mrc.profile.ev_profile_id = m.profile.ev_profile_id;
        }
        if mmask & MRC_QP_CC_PROFILE_ID != 0 {
            next.cc_profile = Some(m.profile.cc_profile_id);
            next.mrc.profile.cc_profile_id = m.profile.cc_profile_id;
        }

        // Profile references: take the new ones first, so a refusal changes nothing.
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
        *self = next;
        Ok(Change {
            from,
            taken,
            dropped,
        })
    }
}

/// An MRC QP.
pub struct mrc_qp {
    ctx: *const mrc_context,
    pub(crate) dev: Arc<Device>,
    pub(crate) qpn: u32,
    qp_context: *mut c_void,
    send_cq: *mut mrc_cq,
    recv_cq: *mut mrc_cq,
    pd: *mut ibv_pd,
    cap: ibv_qp_cap,
    sq_sig_all: c_int,
    send_ops_flags: u64,
    protocol_version: mrc_protocol_version,
    pub(crate) settings: Mutex<Settings>,
}

// SAFETY: only ever published from a Box by `mrc_create_qp`.
unsafe impl Object for mrc_qp {
    const KIND: Kind = Kind::Qp;
}
// SAFETY: the raw pointers are live parents (which cannot go while the QP exists), the application's PD (held
// through the bridge) and its opaque `qp_context`; the rest is Sync.
unsafe impl Send for mrc_qp {}
// SAFETY: as above.
unsafe impl Sync for mrc_qp {}

impl mrc_qp {
    fn ctx(&self) -> &mrc_context {
        // SAFETY: a context with QPs cannot be destroyed (`users`), so it outlives the QP.
        unsafe { &*self.ctx }
    }
}

/// The live QP behind `p`.
fn qp<'a>(p: *mut mrc_qp) -> Result<&'a mrc_qp, Error> {
    // SAFETY: the registry check makes sure `p` is one of ours and live.
    unsafe { registry::get(p, "qp") }
}

/// The library's [`Env`]: the device's profiles, and the QP's context for hints.
struct DeviceEnv<'a>(&'a Device);

impl Env for DeviceEnv<'_> {
    fn hold(&mut self, kind: ProfileKind, id: u64) -> Result<(), Error> {
        self.0.ctl().hold(kind, id)
    }
    fn release(&mut self, kind: ProfileKind, id: u64) {
        self.0.ctl().release(kind, id);
    }
    fn dynamic_mpr(&self) -> bool {
        self.0.attr().cap & MRC_DEVICE_CAP_DYNAMIC_MPR != 0
    }
}

fn hint_users(p: *mut mrc_qp_hint, add: bool) {
    if let Ok(h) = hint(p, "qp_hint") {
        if add { h.users.add() } else { h.users.sub() }
    }
}

fn work_cq<'a>(p: *mut mrc_cq, what: &str, c: &mrc_context) -> Result<&'a mrc_cq, Error> {
    let q = cq(p, what)?;
    if q.kind != CqKind::Work {
        return Err(Error::inval(format!("{what} is an EV event CQ")));
    }
    if !std::ptr::eq(q.ctx(), c) {
        return Err(Error::inval(format!(
            "{what} belongs to another MRC context"
        )));
    }
    Ok(q)
}

/// Creates a QP in RESET.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_qp(
    mrc_ctx: *mut mrc_context,
    mrc_qp_attr: *mut mrc_qp_init_attr,
) -> *mut mrc_qp {
    FFI.ptr("mrc_create_qp", || {
        let c = context(mrc_ctx)?;
        non_null(mrc_qp_attr, "mrc_qp_attr")?;
        // SAFETY: non-NULL; the header makes it a readable and writable `mrc_qp_init_attr`.
        let a = unsafe { &mut *mrc_qp_attr };
        let scq = work_cq(a.send_cq, "send_cq", c)?;
        let rcq = work_cq(a.recv_cq, "recv_cq", c)?;
        let cap = a.cap;
        check_range("cap.max_send_wr", cap.max_send_wr, 1, limits::MAX_QP_WR)?;
        check_range("cap.max_recv_wr", cap.max_recv_wr, 0, limits::MAX_QP_WR)?;
        check_range("cap.max_send_sge", cap.max_send_sge, 0, limits::MAX_SGE)?;
        check_range("cap.max_recv_sge", cap.max_recv_sge, 0, limits::MAX_SGE)?;
        check_range(
            "cap.max_inline_data",
            cap.max_inline_data,
            0,
            limits::MAX_INLINE,
        )?;
        let ops = if a.send_ops_flags == 0 {
            IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM
        } else {
            a.send_ops_flags
        };
        if ops & !(IBV_QP_EX_WITH_RDMA_WRITE | IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM) != 0 {
            return Err(Error::inval(format!(
                "send_ops_flags {ops:#x}: MRC QPs send with RDMA WRITE and WRITE with immediate only"
            )));
        }
        if !matches!(
            a.protocol_version,
            MRC_PROTOCOL_VERSION_0 | MRC_PROTOCOL_VERSION_1
        ) {
            return Err(Error::inval(format!(
                "protocol_version {} is not 0 or MRC_PROTOCOL_VERSION_1",
                a.protocol_version
            )));
        }
        non_null(a.pd, "pd")?;
        let pd_ctx = bridge::pd_hold(a.pd)?;
        if pd_ctx != c.vctx {
            bridge::pd_release(a.pd);
            return Err(Error::inval(
                "pd belongs to another verbs context than the MRC context's",
            ));
        }
        // At least one SGE per send; the transport may grant more than asked.
        let mut granted = ibv_qp_cap {
            max_send_sge: cap.max_send_sge.max(1),
            ..cap
        };
        let qpn = match transport::create_qp(
            &c.dev,
            c.sink.clone(),
            a.pd,
            scq,
            rcq,
            &mut granted,
            a.sq_sig_all,
        ) {
            Ok(n) => n,
            Err(e) => {
                bridge::pd_release(a.pd);
                return Err(e);
            }
        };
        a.cap = granted;
        // A QP counts once on each CQ it uses (once if both queues share one).
        scq.users.add();
        if !std::ptr::eq(scq, rcq) {
            rcq.users.add();
        }
        c.users.add();
        let p = registry::publish(Box::new(mrc_qp {
            ctx: c,
            dev: c.dev.clone(),
            qpn,
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            pd: a.pd,
            cap: granted,
            sq_sig_all: a.sq_sig_all,
            send_ops_flags: ops,
            protocol_version: if a.protocol_version == 0 {
                MRC_PROTOCOL_VERSION_1
            } else {
                a.protocol_version
            },
            settings: Mutex::new(Settings::default()),
        }));
        transport::qp_published(qpn, p);
        Ok(p)
    })
}

/// Destroys a QP.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_qp(p: *mut mrc_qp) -> c_int {
    FFI.errno_value("mrc_destroy_qp", || {
        // SAFETY: the caller does not use the QP while destroying it.
        let q = unsafe { registry::destroy(p, "qp", |_| Ok(())) }?;
        let s = q.settings.into_inner().unwrap_or_else(|p| p.into_inner());
        let mut ctl = q.dev.ctl();
        if let Some(id) = s.ev_profile {
            ctl.release(ProfileKind::Ev, id);
        }
        if let Some(id) = s.cc_profile {
            ctl.release(ProfileKind::Cc, id);
        }
        drop(ctl);
        if !s.mrc.qp_hint.is_null() {
            hint_users(s.mrc.qp_hint, false);
        }
        transport::destroy_qp(q.qpn);
        let cqs = if q.send_cq == q.recv_cq {
            &[q.send_cq][..]
        } else {
            &[q.send_cq, q.recv_cq][..]
        };
        for &c in cqs {
            if let Ok(c) = cq(c, "cq") {
                c.users.sub();
            }
        }
        bridge::pd_release(q.pd);
        // SAFETY: the context cannot go while the QP exists.
        unsafe { &*q.ctx }.users.sub();
        Ok(())
    })
}

/// A QP the transport failed (`IBV_EVENT_QP_FATAL`) is in ERR, as a verbs QP is after its fatal event.
fn follow_transport(s: &mut Settings, qpn: u32) {
    if s.state != IBV_QPS_RESET && transport::failed(qpn) {
        s.state = IBV_QPS_ERR;
    }
}

/// Moves a QP through its states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_modify_qp(
    p: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vattr_mask: c_int,
    mrc_attr: *mut mrc_qp_attr,
    mrc_attr_mask: c_int,
) -> c_int {
    FFI.errno_value("mrc_modify_qp", || {
        let q = qp(p)?;
        // SAFETY: NULL or readable structs (the header's contract).
        let (v, m) = unsafe { (vattr.as_ref(), mrc_attr.as_ref()) };
        let ctx = q.ctx();
        let hint_ok = |h: *mut mrc_qp_hint| -> Result<(), Error> {
            let h = hint(h, "mrc_attr.qp_hint")?;
            if !std::ptr::eq(h.ctx(), ctx) {
                return Err(Error::inval(
                    "mrc_attr.qp_hint belongs to another MRC context",
                ));
            }
            Ok(())
        };
        let mut s = q.settings.lock().unwrap_or_else(|p| p.into_inner());
        follow_transport(&mut s, q.qpn);
        let mut next = s.clone();
        let change = next.modify(
            v,
            vattr_mask,
            m,
            mrc_attr_mask,
            &mut DeviceEnv(&q.dev),
            &hint_ok,
        )?;
        let (release, result) =
            match transport::modify_qp(&q.dev, q.qpn, change.from, next.state, &next) {
                Ok(()) => (change.dropped, Ok(())),
                Err(e) => (change.taken, Err(e)),
            };
        let mut env = DeviceEnv(&q.dev);
        for (kind, id) in release {
            env.release(kind, id);
        }
        result?;
        if next.mrc.qp_hint != s.mrc.qp_hint {
            hint_users(next.mrc.qp_hint, true);
            hint_users(s.mrc.qp_hint, false);
        }
        *s = next;
        log_ignored(vattr_mask, v);
        Ok(())
    })
}

/// Reads a QP's attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_qp(
    p: *mut mrc_qp,
    vattr: *mut ibv_qp_attr,
    vattr_mask: c_int,
    mrc_attr: *mut mrc_qp_attr,
    mrc_attr_mask: c_int,
    init_attr: *mut mrc_qp_init_attr,
) -> c_int {
    FFI.errno_value("mrc_query_qp", || {
        let q = qp(p)?;
        if vattr_mask != 0 {
            non_null(vattr, "vattr")?;
        }
        if mrc_attr_mask != 0 {
            non_null(mrc_attr, "mrc_attr")?;
        }
        if mrc_attr_mask & !MRC_ALL != 0 {
            return Err(Error::inval(format!(
                "mrc_attr_mask {mrc_attr_mask:#x} has bits that name no attribute"
            )));
        }
        let s = {
            let mut s = q.settings.lock().unwrap_or_else(|p| p.into_inner());
            follow_transport(&mut s, q.qpn);
            s.clone()
        };
        // SAFETY: NULL or writable structs (the header's contract).
        if let Some(v) = unsafe { vattr.as_mut() } {
            *v = ibv_qp_attr {
                qp_state: s.state,
                cur_qp_state: s.state,
                path_mtu: s.path_mtu,
                qp_access_flags: s.access,
                rq_psn: s.rq_psn,
                sq_psn: s.sq_psn,
                dest_qp_num: s.dest_qpn,
                cap: q.cap,
                ah_attr: s.ah,
                port_num: 1,
                timeout: s.mrc.timeout,
                retry_cnt: s.mrc.retry.linear_cnt,
                ..Default::default()
            };
        }
        // SAFETY: as above.
        if let Some(m) = unsafe { mrc_attr.as_mut() } {
            let w = mrc_attr_mask;
            let src = &s.mrc;
            if w & MRC_QP_MAX_WIMM != 0 {
                m.wimm.max_wimm = src.wimm.max_wimm;
            }
            if w & MRC_QP_MAX_WIMM_DEST != 0 {
                m.wimm.max_wimm_dest = src.wimm.max_wimm_dest;
            }
            if w & MRC_QP_MPR != 0 {
                m.mpr.mpr = src.mpr.mpr;
            }
            if w & MRC_QP_MPR_DEST != 0 {
                m.mpr.mpr_dest = src.mpr.mpr_dest;
            }
            if w & MRC_QP_TIMEOUT != 0 {
                m.timeout = src.timeout;
            }
            if w & MRC_QP_EV_PROFILE_ID != 0 {
                m.profile.ev_profile_id = src.profile.ev_profile_id;
            }
            if w & MRC_QP_CC_PROFILE_ID != 0 {
                m.profile.cc_profile_id = src.profile.cc_profile_id;
            }
            if w & MRC_QP_HINT != 0 {
                m.qp_hint = src.qp_hint;
            }
            if w & MRC_QP_RETRY_CNT != 0 {
                m.retry = src.retry;
            }
            if w & MRC_QP_CAP != 0 {
                m.cap = src.cap;
            }
            if w & MRC_QP_VENDOR_CFG != 0 {
                m.vendor_cfg = src.vendor_cfg;
            }
        }
        // SAFETY: as above.
        if let Some(i) = unsafe { init_attr.as_mut() } {
            *i = mrc_qp_init_attr {
                qp_context: q.qp_context,
                send_cq: q.send_cq,
                recv_cq: q.recv_cq,
                cap: q.cap,
                sq_sig_all: q.sq_sig_all,
                pd: q.pd,
                send_ops_flags: q.send_ops_flags,
                protocol_version: q.protocol_version,
            };
        }
        Ok(())
    })
}

/// The QP number the peer names at RTR.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_qpn(p: *mut mrc_qp, qpn: *mut u32) -> c_int {
    FFI.minus_one("mrc_get_qpn", || {
        let q = qp(p)?;
        non_null(qpn, "qpn")?;
        // SAFETY: non-NULL writable u32 (the header's contract).
        unsafe { qpn.write(q.qpn) };
        Ok(())
    })
}

/// Posts receives (through the transport).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_recv(
    p: *mut mrc_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    FFI.minus_one("mrc_post_recv", || {
        let q = qp(p)?;
        non_null(bad_wr, "bad_wr")?;
        // SAFETY: non-NULL writable slot; set first so every failure names the first WR not posted.
        unsafe { bad_wr.write(wr) };
        non_null(wr, "wr")?;
        let st = q.settings.lock().unwrap_or_else(|p| p.into_inner()).state;
        if st == IBV_QPS_RESET {
            return Err(Error::inval(
                "the QP is in RESET; receives may be posted from INIT on",
            ));
        }
        transport::post_recv(q.qpn, wr, bad_wr)?;
        // SAFETY: as above.
        unsafe { bad_wr.write(std::ptr::null_mut()) };
        Ok(())
    })
}

/// Posts RDMA WRITEs (through the transport).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_post_send(
    p: *mut mrc_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    FFI.errno_value("mrc_post_send", || {
        let q = qp(p)?;
        non_null(bad_wr, "bad_wr")?;
        // SAFETY: non-NULL writable slot; set first so every failure names the first WR not posted.
        unsafe { bad_wr.write(wr) };
        non_null(wr, "wr")?;
        let st = q.settings.lock().unwrap_or_else(|p| p.into_inner()).state;
        if st != IBV_QPS_RTS {
            return Err(Error::inval(format!(
                "the QP is in {}; sends may be posted in RTS",
                qp_state::state_name(st)
            )));
        }
        transport::post_send(q.qpn, wr, bad_wr)?;
        // SAFETY: as above.
        unsafe { bad_wr.write(std::ptr::null_mut()) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
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
}
