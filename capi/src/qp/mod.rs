//! MRC QPs: creation, the RESET → INIT → RTR → RTS state machine with its verbs and MRC attribute masks,
//! queries, and posting (through the transport).
//!
//! The attribute rules are those of an RC QP in verbs (`mrc_host::verbs::qp_state`, the shim's too), minus what
//! the OCP API takes over (port, timers, retries, RD atomics, alternate paths) and plus the MRC attributes of
//! each step (`settings.rs`: `Settings::modify` is pure, so the rules are unit-tested without a device).

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
use crate::transport;
use mrc_host::verbs::qp_state::{self, State};
use mrc_verbs_shim::api as verbs;

mod settings;
#[cfg(test)]
mod tests;

pub(crate) use settings::{Env, Settings};
use settings::{MRC_ALL, check_range, log_ignored};

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
// with `verbs::hold_pd`) and its opaque `qp_context`; the rest is Sync.
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
        let pd_ctx = verbs::hold_pd(a.pd)?;
        if pd_ctx != c.vctx {
            let _ = verbs::release_pd(a.pd);
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
                let _ = verbs::release_pd(a.pd);
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
        let _ = verbs::release_pd(q.pd);
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
