//! `ibv_open_device` and what a context dispatches by object: its ops tables (the `verbs_context` extension
//! ops, the classic `ibv_context_ops`) and the acknowledgement of asynchronous events.
//!
//! The context the application gets is `&verbs_context.context` inside a `Context`, with
//! `abi_compat = VERBS_ABI_IS_EXTENDED` and `sz = sizeof(verbs_context)`, so the inline `verbs_get_ctx_op`
//! finds our extension ops and newer applications see the ops we do not know as absent
//! (`verbs-nccl-abi.md` §1.3). Extension ops with no MRC meaning point at stubs that log the op and fail with
//! `EOPNOTSUPP`, so even inline-only verbs leave a log line.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::context::{self, Context};
use crate::device;
use crate::ffi::{self, FFI};
use crate::{cq, qp, unsupported};

/// Points every op of a new context at its implementation.
fn fill(v: &mut verbs_context) {
    v.query_port = slot!(
        context::query_port_op,
        unsafe extern "C" fn(*mut ibv_context, u8, *mut ibv_port_attr, usize) -> c_int
    );
    v.query_device_ex = slot!(
        context::query_device_ex_op,
        unsafe extern "C" fn(
            *mut ibv_context,
            *const c_void,
            *mut ibv_device_attr_ex,
            usize,
        ) -> c_int
    );
    v.create_qp_ex = slot!(
        qp::create_qp_ex_op,
        unsafe extern "C" fn(*mut ibv_context, *mut ibv_qp_init_attr_ex) -> *mut ibv_qp
    );
    unsupported::fill_verbs_context(v);
    v.context.ops.poll_cq = slot!(
        cq::poll_cq_op,
        unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int
    );
    v.context.ops.req_notify_cq = slot!(
        cq::req_notify_cq_op,
        unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int
    );
    v.context.ops.post_send = slot!(
        qp::post_send_op,
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int
    );
    v.context.ops.post_recv = slot!(
        qp::post_recv_op,
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int
    );
    unsupported::fill_context_ops(&mut v.context.ops);
}

/// Opens a device of this library.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_open_device(dev: *mut ibv_device) -> *mut ibv_context {
    FFI.ptr("ibv_open_device", || {
        Context::open(device::find(dev)?, fill)
    })
}

/// Acknowledges an asynchronous event (QP events count towards `ibv_qp.events_completed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_async_event(event: *mut ibv_async_event) {
    FFI.void("ibv_ack_async_event", || {
        let event = ffi::non_null(event, "event")?;
        // SAFETY: the caller passes an event from `ibv_get_async_event`.
        let e = unsafe { &*event };
        match e.event_type {
            IBV_EVENT_QP_FATAL => qp::ack_event(e.element.cast())?,
            IBV_EVENT_CQ_ERR => cq::ack_async_event(e.element.cast())?,
            _ => {}
        }
        Ok(())
    })
}
