//! Queue pairs: creation with the caps a provider grants, the verbs state machine with the kernel's attribute
//! rules, and the translation of work requests for the host layer.
//!
//! `ibv_modify_qp` checks what the kernel's `ib_modify_qp_is_ok` checks for RC QPs (allowed transitions,
//! required and optional attributes: `mrc_host::verbs::qp_state`), so programs see the same `EINVAL`s they would
//! on hardware; the attribute values are checked here. The transport side of each transition (connecting to the
//! peer at RTR) is the host layer's.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::*;
use crate::context::{Context, context};
use crate::cq::{self, Cq, cq};
use crate::device::limits;
use crate::ffi::{self, Error, FFI};
use crate::host::{HostQp, SendOp, SendRequest, Transition};
use crate::pd::{Pd, pd};
use crate::registry::{self, Kind, Object};
use mrc_ffi::verbs_attr;
use mrc_host::verbs::qp_state;

/// A queue pair.
#[repr(C)]
pub(crate) struct Qp {
    raw: UnsafeCell<ibv_qp>,
    pd: *const Pd,
    send_cq: *const Cq,
    recv_cq: *const Cq,
    host: HostQp,
    /// What creation granted.
    cap: ibv_qp_cap,
    sq_sig_all: bool,
    /// The attributes set so far, for `ibv_query_qp`; the lock also serialises `ibv_modify_qp`.
    attrs: Mutex<ibv_qp_attr>,
}

// SAFETY: the C struct is the first field.
unsafe impl Object for Qp {
    type Raw = ibv_qp;
    const KIND: Kind = Kind::Qp;
}

impl Qp {
    fn pd(&self) -> &Pd {
        // SAFETY: a PD with QPs cannot be freed (`Users`), so it outlives the QP.
        unsafe { &*self.pd }
    }

    /// The engine's QP number (also `ibv_qp.qp_num`).
    pub(crate) fn qpn(&self) -> u32 {
        self.host.qpn
    }

    pub(crate) fn ctx(&self) -> &Context {
        self.pd().ctx()
    }

    fn cqs(&self) -> (&Cq, &Cq) {
        // SAFETY: CQs with QPs cannot be destroyed (`Users`), so they outlive the QP.
        unsafe { (&*self.send_cq, &*self.recv_cq) }
    }

    fn raw(&self) -> *mut ibv_qp {
        self.raw.get()
    }

    /// `ibv_qp.state`, which applications may read directly while another thread modifies the QP.
    fn state_cell(&self) -> &AtomicU32 {
        // SAFETY: `state` is an aligned u32 inside our allocation; every access from Rust goes through this
        // atomic view.
        unsafe { AtomicU32::from_ptr(&raw mut (*self.raw()).state) }
    }

    fn state(&self) -> c_uint {
        self.state_cell().load(Ordering::Acquire)
    }
}

const QP_ACCESS: c_int = IBV_ACCESS_LOCAL_WRITE
    | IBV_ACCESS_REMOTE_WRITE
    | IBV_ACCESS_REMOTE_READ
    | IBV_ACCESS_REMOTE_ATOMIC
    | IBV_ACCESS_MW_BIND;

fn check_range(what: &str, v: u32, max: u32) -> Result<(), Error> {
    if v > max {
        Err(Error::inval(format!("{what} {v} is above {max}")))
    } else {
        Ok(())
    }
}

/// Checks a transition and its attribute values; returns what the host layer must do, if anything.
fn plan(
    cur: c_uint,
    attr: &ibv_qp_attr,
    mask: c_int,
) -> Result<(c_uint, Option<Transition>), Error> {
    let req = qp_state::Request {
        mask: mask as u32,
        qp_state: attr.qp_state,
        cur_qp_state: attr.cur_qp_state,
    };
    let to = qp_state::check(cur, req, 0)
        .map_err(|e| Error::refused(&e))?
        .to_verbs();
    if mask & IBV_QP_ALT_PATH != 0 {
        return Err(Error::unsupported(
            "alternate paths (IBV_QP_ALT_PATH, APM) are not supported",
        ));
    }
    verbs_attr::check_addressing(attr, mask, " (ibv_rc_pingpong: pass -g 0)")?;
    let access = attr.qp_access_flags as c_int;
    if mask & IBV_QP_ACCESS_FLAGS != 0 && access & !QP_ACCESS != 0 {
        return Err(Error::inval(format!(
            "qp_access_flags {access:#x} has unknown bits"
        )));
    }
    if mask & IBV_QP_MAX_DEST_RD_ATOMIC != 0 {
        check_range(
            "max_dest_rd_atomic",
            attr.max_dest_rd_atomic.into(),
            limits::MAX_RD_ATOM.into(),
        )?;
    }
    if mask & IBV_QP_MAX_QP_RD_ATOMIC != 0 {
        check_range(
            "max_rd_atomic",
            attr.max_rd_atomic.into(),
            limits::MAX_RD_ATOM.into(),
        )?;
    }
    if mask & IBV_QP_TIMEOUT != 0 {
        check_range("timeout", attr.timeout.into(), 31)?;
    }
    if mask & IBV_QP_RETRY_CNT != 0 {
        check_range("retry_cnt", attr.retry_cnt.into(), 7)?;
    }
    if mask & IBV_QP_RNR_RETRY != 0 {
        check_range("rnr_retry", attr.rnr_retry.into(), 7)?;
    }
    if mask & IBV_QP_MIN_RNR_TIMER != 0 {
        check_range("min_rnr_timer", attr.min_rnr_timer.into(), 31)?;
    }
    let t = match (cur, to) {
        (_, IBV_QPS_RESET) => Some(Transition::Reset),
        (_, IBV_QPS_ERR) => Some(Transition::Error),
        (IBV_QPS_RESET, IBV_QPS_INIT) | (IBV_QPS_INIT, IBV_QPS_INIT) => {
            (mask & IBV_QP_ACCESS_FLAGS != 0).then_some(Transition::Init { access })
        }
        (IBV_QPS_INIT, IBV_QPS_RTR) => Some(Transition::Rtr {
            gid: attr.ah_attr.grh.dgid.raw,
            lid: attr.ah_attr.dlid,
            dest_qpn: attr.dest_qp_num,
            rq_psn: attr.rq_psn & 0xff_ffff,
            mtu: 128 << attr.path_mtu,
        }),
        (IBV_QPS_RTR, IBV_QPS_RTS) => Some(Transition::Rts {
            sq_psn: attr.sq_psn & 0xff_ffff,
            timeout: attr.timeout,
            retry_cnt: attr.retry_cnt,
            rnr_retry: attr.rnr_retry,
        }),
        _ => None,
    };
    Ok((to, t))
}

/// Keeps the attributes `mask` set, for `ibv_query_qp`.
fn remember(stored: &mut ibv_qp_attr, attr: &ibv_qp_attr, mask: c_int) {
    macro_rules! keep {
        ($($bit:expr => $($f:ident),+;)*) => { $( if mask & $bit != 0 { $( stored.$f = attr.$f; )+ } )* };
    }
    keep! {
        IBV_QP_ACCESS_FLAGS => qp_access_flags;
        IBV_QP_PKEY_INDEX => pkey_index;
        IBV_QP_PORT => port_num;
        IBV_QP_AV => ah_attr;
        IBV_QP_PATH_MTU => path_mtu;
        IBV_QP_TIMEOUT => timeout;
        IBV_QP_RETRY_CNT => retry_cnt;
        IBV_QP_RNR_RETRY => rnr_retry;
        IBV_QP_RQ_PSN => rq_psn;
        IBV_QP_MAX_QP_RD_ATOMIC => max_rd_atomic;
        IBV_QP_MIN_RNR_TIMER => min_rnr_timer;
        IBV_QP_SQ_PSN => sq_psn;
        IBV_QP_MAX_DEST_RD_ATOMIC => max_dest_rd_atomic;
        IBV_QP_PATH_MIG_STATE => path_mig_state;
        IBV_QP_DEST_QPN => dest_qp_num;
    }
    if mask & IBV_QP_RQ_PSN != 0 {
        stored.rq_psn &= 0xff_ffff;
    }
    if mask & IBV_QP_SQ_PSN != 0 {
        stored.sq_psn &= 0xff_ffff;
    }
}

pub(crate) fn create(pdp: *mut ibv_pd, init: *mut ibv_qp_init_attr) -> Result<*mut ibv_qp, Error> {
    let p = pd(pdp, "pd")?;
    let init = ffi::non_null(init, "qp_init_attr")?;
    // SAFETY: the caller passes a readable and writable init attr (caps are written back).
    let init = unsafe { &mut *init };
    if init.qp_type != IBV_QPT_RC {
        return Err(Error::unsupported(format!(
            "qp_type {} is not supported: only reliable connected QPs (IBV_QPT_RC = 2)",
            init.qp_type
        )));
    }
    if !init.srq.is_null() {
        return Err(Error::inval(
            "srq is set, but shared receive queues are not supported",
        ));
    }
    let scq = cq(init.send_cq, "send_cq")?;
    let rcq = cq(init.recv_cq, "recv_cq")?;
    if !std::ptr::eq(scq.ctx(), p.ctx()) || !std::ptr::eq(rcq.ctx(), p.ctx()) {
        return Err(Error::inval(
            "the CQs and the PD belong to different contexts",
        ));
    }
    let c = init.cap;
    check_range("max_send_wr", c.max_send_wr, limits::MAX_QP_WR)?;
    check_range("max_recv_wr", c.max_recv_wr, limits::MAX_QP_WR)?;
    check_range("max_send_sge", c.max_send_sge, limits::MAX_SGE)?;
    check_range("max_recv_sge", c.max_recv_sge, limits::MAX_SGE)?;
    check_range("max_inline_data", c.max_inline_data, limits::MAX_INLINE)?;
    // What a provider grants: at least what was asked, the full inline size, one SGE at least.
    let cap = ibv_qp_cap {
        max_send_wr: c.max_send_wr,
        max_recv_wr: c.max_recv_wr,
        max_send_sge: c.max_send_sge.max(1),
        max_recv_sge: c.max_recv_sge.max(1),
        max_inline_data: limits::MAX_INLINE,
    };
    let sq_sig_all = init.sq_sig_all != 0;
    let host = p
        .ctx()
        .host
        .create_qp(p.host, &scq.host, &rcq.host, &cap, sq_sig_all)?;
    init.cap = cap;
    p.users.add();
    scq.users.add();
    rcq.users.add();
    let q = Box::new(Qp {
        raw: UnsafeCell::new(ibv_qp {
            context: p.ctx().raw(),
            qp_context: init.qp_context,
            pd: pdp,
            send_cq: init.send_cq,
            recv_cq: init.recv_cq,
            srq: std::ptr::null_mut(),
            handle: host.qpn,
            qp_num: host.qpn,
            state: IBV_QPS_RESET,
            qp_type: IBV_QPT_RC,
            // SAFETY: all-zero is a valid pthread mutex/cond bit pattern on glibc; both are initialised below.
            mutex: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            cond: unsafe { std::mem::zeroed() },
            events_completed: 0,
        }),
        pd: p,
        send_cq: scq,
        recv_cq: rcq,
        host,
        cap,
        sq_sig_all,
        attrs: Mutex::new(ibv_qp_attr {
            port_num: 1,
            ..ibv_qp_attr::default()
        }),
    });
    let raw = q.raw();
    // SAFETY: `raw` points into the box, which does not move when published.
    cq::init_sync(unsafe { &raw mut (*raw).mutex }, unsafe {
        &raw mut (*raw).cond
    });
    q.ctx().host.name_qp(q.host.qpn, Some(raw as usize));
    Ok(registry::publish(q))
}

/// `verbs_context.create_qp_ex`: reached for any `comp_mask` other than plain `IBV_QP_INIT_ATTR_PD` (that one
/// the inline wrapper sends to `ibv_create_qp`).
pub(crate) unsafe extern "C" fn create_qp_ex_op(
    ctx: *mut ibv_context,
    attr: *mut ibv_qp_init_attr_ex,
) -> *mut ibv_qp {
    FFI.ptr("ibv_create_qp_ex", || {
        context(ctx)?;
        let attr = ffi::non_null(attr, "qp_init_attr_ex")?;
        // SAFETY: the caller passes a readable and writable `ibv_qp_init_attr_ex`.
        let a = unsafe { &mut *attr };
        if a.comp_mask & !IBV_QP_INIT_ATTR_PD != 0 {
            return Err(Error::unsupported(format!(
                "comp_mask {:#x} asks for extended QP features (send ops flags for the ibv_wr_* API, …); \
                 only IBV_QP_INIT_ATTR_PD is supported",
                a.comp_mask
            )));
        }
        let mut init = ibv_qp_init_attr {
            qp_context: a.qp_context,
            send_cq: a.send_cq,
            recv_cq: a.recv_cq,
            srq: a.srq,
            cap: a.cap,
            qp_type: a.qp_type,
            sq_sig_all: a.sq_sig_all,
        };
        let q = create(a.pd, &mut init)?;
        a.cap = init.cap;
        Ok(q)
    })
}

fn translate_send<'a>(q: &Qp, wr: &'a ibv_send_wr) -> Result<SendRequest<'a>, Error> {
    const KNOWN: c_uint = IBV_SEND_FENCE | IBV_SEND_SIGNALED | IBV_SEND_SOLICITED | IBV_SEND_INLINE;
    if wr.send_flags & !KNOWN != 0 {
        return Err(Error::inval(format!(
            "send_flags {:#x} are not supported",
            wr.send_flags & !KNOWN
        )));
    }
    let sges = sge_list(wr.sg_list, wr.num_sge, q.cap.max_send_sge, "max_send_sge")?;
    let rdma = wr.wr.rdma;
    let op = match wr.opcode {
        IBV_WR_RDMA_WRITE => SendOp::Write {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
        },
        IBV_WR_RDMA_WRITE_WITH_IMM => SendOp::WriteImm {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
            imm: u32::from_be(wr.imm_data),
        },
        IBV_WR_SEND => SendOp::Send { imm: None },
        IBV_WR_SEND_WITH_IMM => SendOp::Send {
            imm: Some(u32::from_be(wr.imm_data)),
        },
        IBV_WR_RDMA_READ => SendOp::Read {
            remote_addr: rdma.remote_addr,
            rkey: rdma.rkey,
        },
        5 | 6 => {
            return Err(Error::inval(
                "atomic operations are not supported (atomic_cap is NONE)",
            ));
        }
        op => {
            return Err(Error::inval(format!(
                "opcode {op} is not supported (WRITE, WRITE_WITH_IMM, SEND, SEND_WITH_IMM, READ are)"
            )));
        }
    };
    let inline = wr.send_flags & IBV_SEND_INLINE != 0;
    if inline {
        if matches!(op, SendOp::Read { .. }) {
            return Err(Error::inval("IBV_SEND_INLINE with an RDMA READ"));
        }
        let len: u64 = sges.iter().map(|s| u64::from(s.length)).sum();
        if len > u64::from(q.cap.max_inline_data) {
            return Err(Error::inval(format!(
                "{len} inline bytes exceed max_inline_data {}",
                q.cap.max_inline_data
            )));
        }
    }
    Ok(SendRequest {
        wr_id: wr.wr_id,
        op,
        sges,
        inline,
        signaled: q.sq_sig_all || wr.send_flags & IBV_SEND_SIGNALED != 0,
        solicited: wr.send_flags & IBV_SEND_SOLICITED != 0,
        fence: wr.send_flags & IBV_SEND_FENCE != 0,
    })
}

/// Walks a C list of work requests (`next` links), posting each with `post`; on the first failure `*bad`
/// names the failing request and its errno is returned. `ready` checks the QP's state first.
fn post_list<W>(
    call: &'static str,
    qp: *mut ibv_qp,
    list: *mut W,
    bad: *mut *mut W,
    next: impl Fn(&W) -> *mut W,
    ready: impl FnOnce(&Qp) -> Result<(), Error>,
    mut post: impl FnMut(&Qp, &W) -> Result<(), Error>,
) -> c_int {
    let mut cur = list;
    let r = FFI.errno_value(call, || {
        // SAFETY: reached through the ops of the QP's own context, so `qp` is one of ours.
        let q = unsafe { registry::get_unchecked::<Qp>(qp, "qp") }?;
        ready(q)?;
        while !cur.is_null() {
            // SAFETY: the caller's list of work requests is valid for the duration of the call.
            let w = unsafe { &*cur };
            post(q, w)?;
            cur = next(w);
        }
        Ok(())
    });
    if r != 0 && !bad.is_null() {
        // SAFETY: the caller passes a writable pointer for the failing request.
        unsafe { *bad = cur };
    }
    r
}

/// The caller's scatter/gather list, checked against the QP's limit.
fn sge_list<'a>(
    sg_list: *mut ibv_sge,
    num_sge: c_int,
    max: u32,
    which: &str,
) -> Result<&'a [ibv_sge], Error> {
    if num_sge < 0 || num_sge as u32 > max {
        return Err(Error::inval(format!(
            "num_sge {num_sge} is outside 0..={max} ({which})"
        )));
    }
    if num_sge == 0 {
        return Ok(&[]);
    }
    let list = ffi::non_null(sg_list, "sg_list")?;
    // SAFETY: the caller's sg_list holds num_sge entries, valid for the duration of the post.
    Ok(unsafe { std::slice::from_raw_parts(list, num_sge as usize) })
}

/// `ibv_post_send`: sends are posted in RTS (and in ERR, where they are flushed).
pub(crate) unsafe extern "C" fn post_send_op(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad_wr: *mut *mut ibv_send_wr,
) -> c_int {
    post_list(
        "ibv_post_send",
        qp,
        wr,
        bad_wr,
        |w| w.next,
        |q| match q.state() {
            s if s < IBV_QPS_RTS => Err(Error::inval(format!(
                "the QP is in {}; sends are posted in RTS",
                qp_state::state_name(s)
            ))),
            _ => Ok(()),
        },
        |q, w| {
            let req = translate_send(q, w)?;
            q.ctx().host.post_send(&q.host, &req)
        },
    )
}

/// `ibv_post_recv`: receives may be posted from INIT on (ibv_rc_pingpong posts 500 before RTR).
pub(crate) unsafe extern "C" fn post_recv_op(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad_wr: *mut *mut ibv_recv_wr,
) -> c_int {
    post_list(
        "ibv_post_recv",
        qp,
        wr,
        bad_wr,
        |w| w.next,
        |q| match q.state() {
            IBV_QPS_RESET => Err(Error::inval(
                "the QP is in RESET; receives are posted from INIT on",
            )),
            _ => Ok(()),
        },
        |q, w| {
            let sges = sge_list(w.sg_list, w.num_sge, q.cap.max_recv_sge, "max_recv_sge")?;
            q.ctx().host.post_recv(&q.host, w.wr_id, sges)
        },
    )
}

/// The live QP behind `qp`.
pub(crate) fn qp<'a>(qp: *mut ibv_qp, what: &str) -> Result<&'a Qp, Error> {
    // SAFETY: the registry check inside `get` makes sure `qp` is one of ours and live.
    unsafe { registry::get::<Qp>(qp, what) }
}

/// Counts an acknowledged asynchronous event of a QP.
pub(crate) fn ack_event(qp: *mut ibv_qp) -> Result<(), Error> {
    // SAFETY: the registry check inside `get` makes sure `qp` is one of ours and live.
    let q = unsafe { registry::get::<Qp>(qp, "event element") }?;
    let raw = q.raw();
    // SAFETY: the QP's mutex and cond were initialised at creation; the counter is guarded by the mutex.
    unsafe {
        libc::pthread_mutex_lock(&raw mut (*raw).mutex);
        (*raw).events_completed = (*raw).events_completed.wrapping_add(1);
        libc::pthread_cond_signal(&raw mut (*raw).cond);
        libc::pthread_mutex_unlock(&raw mut (*raw).mutex);
    }
    Ok(())
}

// ---------------------------------------------------------------------------------------------------------
// Exported entry points
// ---------------------------------------------------------------------------------------------------------

/// Creates an RC QP; the granted caps are written back into `init.cap`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_qp(
    pd: *mut ibv_pd,
    init: *mut ibv_qp_init_attr,
) -> *mut ibv_qp {
    FFI.ptr("ibv_create_qp", || create(pd, init))
}

/// Moves a QP through its states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_modify_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    mask: c_int,
) -> c_int {
    FFI.errno_value("ibv_modify_qp", || modify(qp, attr, mask))
}

/// `ibv_modify_qp` (also libmrc's, `api.rs`); `attr` is NULL or readable.
pub(crate) fn modify(qp: *mut ibv_qp, attr: *const ibv_qp_attr, mask: c_int) -> Result<(), Error> {
    // SAFETY: the registry check inside `get` makes sure `qp` is one of ours and live.
    let q = unsafe { registry::get::<Qp>(qp, "qp") }?;
    let attr = ffi::non_null(attr, "attr")?;
    // SAFETY: NULL was refused; the caller passes a readable `ibv_qp_attr`.
    let attr = unsafe { &*attr };
    let mut stored = q.attrs.lock().unwrap_or_else(|p| p.into_inner());
    let (to, t) = plan(q.state(), attr, mask)?;
    if let Some(t) = t {
        q.ctx().host.modify_qp(&q.host, t)?;
    }
    if to == IBV_QPS_RESET {
        *stored = ibv_qp_attr {
            port_num: 1,
            ..ibv_qp_attr::default()
        };
    } else {
        remember(&mut stored, attr, mask);
    }
    q.state_cell().store(to, Ordering::Release);
    Ok(())
}

/// The QP's attributes (all of them, whatever `mask` asks) and its creation attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_qp(
    qp: *mut ibv_qp,
    attr: *mut ibv_qp_attr,
    _mask: c_int,
    init: *mut ibv_qp_init_attr,
) -> c_int {
    FFI.errno_value("ibv_query_qp", || {
        // SAFETY: the registry check inside `get` makes sure `qp` is one of ours and live.
        let q = unsafe { registry::get::<Qp>(qp, "qp") }?;
        let attr = ffi::non_null(attr, "attr")?;
        let init = ffi::non_null(init, "init_attr")?;
        let mut a = *q.attrs.lock().unwrap_or_else(|p| p.into_inner());
        a.qp_state = if q.host.failed() {
            IBV_QPS_ERR
        } else {
            q.state()
        };
        a.cur_qp_state = a.qp_state;
        a.cap = q.cap;
        // SAFETY: the QP's C fields are ours; the out-structs are the caller's.
        unsafe {
            let raw = &*q.raw();
            attr.write(a);
            init.write(ibv_qp_init_attr {
                qp_context: raw.qp_context,
                send_cq: raw.send_cq,
                recv_cq: raw.recv_cq,
                srq: std::ptr::null_mut(),
                cap: q.cap,
                qp_type: IBV_QPT_RC,
                sq_sig_all: c_int::from(q.sq_sig_all),
            });
        }
        Ok(())
    })
}

/// Destroys a QP (outstanding work is dropped by the host layer).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_qp(qp: *mut ibv_qp) -> c_int {
    FFI.errno_value("ibv_destroy_qp", || destroy(qp))
}

/// `ibv_destroy_qp`.
pub(crate) fn destroy(qp: *mut ibv_qp) -> Result<(), Error> {
    // SAFETY: verbs callers do not use a QP while destroying it.
    let q = unsafe { registry::destroy::<Qp>(qp, "qp", |_| Ok(())) }?;
    q.ctx().host.name_qp(q.host.qpn, None);
    q.ctx().host.destroy_qp(&q.host);
    let (s, r) = q.cqs();
    s.users.sub();
    r.users.sub();
    q.pd().users.sub();
    let raw = q.raw();
    // SAFETY: fields of the QP we own again.
    cq::destroy_sync(unsafe { &raw mut (*raw).mutex }, unsafe {
        &raw mut (*raw).cond
    });
    Ok(())
}

/// `ibv_qp_to_qp_ex` (IBVERBS_1.6): the `ibv_wr_*` API is not supported, so no QP is extended.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_qp_to_qp_ex(qp: *mut ibv_qp) -> *mut c_void {
    FFI.ptr("ibv_qp_to_qp_ex", || {
        // SAFETY: the registry check inside `get` makes sure `qp` is one of ours and live.
        unsafe { registry::get::<Qp>(qp, "qp") }?;
        Err(Error::unsupported(
            "the ibv_wr_* work-request API is not supported; use ibv_post_send",
        ))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rtr_attr() -> ibv_qp_attr {
        let mut a = ibv_qp_attr {
            qp_state: IBV_QPS_RTR,
            path_mtu: IBV_MTU_1024,
            dest_qp_num: 0x123,
            rq_psn: 0x1_000_001,
            max_dest_rd_atomic: 1,
            min_rnr_timer: 12,
            ..Default::default()
        };
        a.ah_attr.is_global = 1;
        a.ah_attr.port_num = 1;
        a.ah_attr.dlid = 4791;
        a.ah_attr.grh.dgid.raw[15] = 1;
        a
    }

    const RTR_MASK: c_int = IBV_QP_STATE
        | IBV_QP_AV
        | IBV_QP_PATH_MTU
        | IBV_QP_DEST_QPN
        | IBV_QP_RQ_PSN
        | IBV_QP_MAX_DEST_RD_ATOMIC
        | IBV_QP_MIN_RNR_TIMER;

    #[test]
    fn rtr_translates_the_peer_and_masks_the_psn() {
        let (to, t) = plan(IBV_QPS_INIT, &rtr_attr(), RTR_MASK).unwrap();
        assert_eq!(to, IBV_QPS_RTR);
        let Some(Transition::Rtr {
            lid,
            dest_qpn,
            rq_psn,
            mtu,
            gid,
        }) = t
        else {
            panic!("{t:?}")
        };
        assert_eq!(
            (lid, dest_qpn, rq_psn, mtu, gid[15]),
            (4791, 0x123, 1, 1024, 1)
        );
    }

    #[test]
    fn the_kernel_attribute_rules_hold() {
        // Missing attributes are named.
        let e = plan(IBV_QPS_INIT, &rtr_attr(), RTR_MASK & !IBV_QP_DEST_QPN).unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.why().contains("IBV_QP_DEST_QPN"), "{}", e.why());
        // Attributes a transition does not take are refused.
        let e = plan(IBV_QPS_INIT, &rtr_attr(), RTR_MASK | IBV_QP_SQ_PSN).unwrap_err();
        assert!(e.why().contains("IBV_QP_SQ_PSN"), "{}", e.why());
        // No skipping states, no RESET -> ERR.
        let a = ibv_qp_attr {
            qp_state: IBV_QPS_RTS,
            ..Default::default()
        };
        assert_eq!(
            plan(IBV_QPS_RESET, &a, IBV_QP_STATE).unwrap_err().errno,
            libc::EINVAL
        );
        let a = ibv_qp_attr {
            qp_state: IBV_QPS_ERR,
            ..Default::default()
        };
        assert!(plan(IBV_QPS_RESET, &a, IBV_QP_STATE).is_err());
        assert_eq!(
            plan(IBV_QPS_RTS, &a, IBV_QP_STATE).unwrap().1,
            Some(Transition::Error)
        );
        // A GID-less address vector explains what to pass.
        let mut a = rtr_attr();
        a.ah_attr.is_global = 0;
        assert!(
            plan(IBV_QPS_INIT, &a, RTR_MASK)
                .unwrap_err()
                .why()
                .contains("-g 0")
        );
        // SQD is refused as unsupported.
        let a = ibv_qp_attr {
            qp_state: IBV_QPS_SQD,
            ..Default::default()
        };
        assert_eq!(
            plan(IBV_QPS_RTS, &a, IBV_QP_STATE).unwrap_err().errno,
            libc::EOPNOTSUPP
        );
    }
}
