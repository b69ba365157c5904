//! Verbs with no meaning on an MRC RC-only device: each fails with the errno a provider without the feature
//! returns (`EOPNOTSUPP`, or `EINVAL` for objects we can never have handed out) and one log line naming the call.
//!
//! The `verbs_context` extension ops and the memory-window/SRQ context ops point at stubs here too, so a verb
//! the application's inline code dispatches (`ibv_create_cq_ex`, `ibv_alloc_td`, …) still leaves a log line.
//! The stubs take no parameters: on x86_64 SysV the caller owns its argument registers and stack, so a callee
//! that ignores them is sound whatever the op's C signature.

use std::ffi::{c_int, c_void};

use crate::abi::*;
use crate::ffi::{Error, FFI};

/// Defines stubs returning `EOPNOTSUPP` (int ops) or NULL with `errno = EOPNOTSUPP` (pointer ops).
macro_rules! stubs {
    (int: $($iname:ident => $icall:literal),* ; ptr: $($pname:ident => $pcall:literal),* $(,)?) => {
        $(
            unsafe extern "C" fn $iname() -> c_int {
                FFI.errno_value($icall, || Err(Error::unsupported("not supported by mrc-verbs-shim")))
            }
        )*
        $(
            unsafe extern "C" fn $pname() -> *mut c_void {
                FFI.ptr($pcall, || Err(Error::unsupported("not supported by mrc-verbs-shim")))
            }
        )*
    };
}

stubs! {
    int:
        advise_mr => "ibv_advise_mr",
        read_counters => "ibv_read_counters",
        attach_counters_point_flow => "ibv_attach_counters_point_flow",
        destroy_counters => "ibv_destroy_counters",
        free_dm => "ibv_free_dm",
        modify_flow_action_esp => "ibv_modify_flow_action_esp",
        destroy_flow_action => "ibv_destroy_flow_action",
        modify_qp_rate_limit => "ibv_modify_qp_rate_limit",
        dealloc_td => "ibv_dealloc_td",
        modify_cq => "ibv_modify_cq",
        post_srq_ops => "ibv_post_srq_ops",
        destroy_rwq_ind_table => "ibv_destroy_rwq_ind_table",
        destroy_wq => "ibv_destroy_wq",
        modify_wq => "ibv_modify_wq",
        query_rt_values => "ibv_query_rt_values_ex",
        destroy_flow => "ibv_destroy_flow",
        get_srq_num => "ibv_get_srq_num",
        close_xrcd => "ibv_close_xrcd",
        bind_mw => "ibv_bind_mw",
        dealloc_mw => "ibv_dealloc_mw",
        post_srq_recv => "ibv_post_srq_recv";
    ptr:
        alloc_null_mr => "ibv_alloc_null_mr",
        create_counters => "ibv_create_counters",
        reg_dm_mr => "ibv_reg_dm_mr",
        alloc_dm => "ibv_alloc_dm",
        create_flow_action_esp => "ibv_create_flow_action_esp",
        alloc_parent_domain => "ibv_alloc_parent_domain",
        alloc_td => "ibv_alloc_td",
        create_rwq_ind_table => "ibv_create_rwq_ind_table",
        create_wq => "ibv_create_wq",
        create_cq_ex => "ibv_create_cq_ex",
        create_flow => "ibv_create_flow",
        open_qp => "ibv_open_qp",
        create_srq_ex => "ibv_create_srq_ex",
        open_xrcd => "ibv_open_xrcd",
        alloc_mw => "ibv_alloc_mw",
}

macro_rules! int_slot {
    ($f:expr) => {
        crate::abi::slot!($f, unsafe extern "C" fn() -> c_int)
    };
}
macro_rules! ptr_slot {
    ($f:expr) => {
        crate::abi::slot!($f, unsafe extern "C" fn() -> *mut c_void)
    };
}

/// Points every extension op the shim does not implement at its stub.
pub(crate) fn fill_verbs_context(v: &mut verbs_context) {
    v.advise_mr = int_slot!(advise_mr);
    v.alloc_null_mr = ptr_slot!(alloc_null_mr);
    v.read_counters = int_slot!(read_counters);
    v.attach_counters_point_flow = int_slot!(attach_counters_point_flow);
    v.create_counters = ptr_slot!(create_counters);
    v.destroy_counters = int_slot!(destroy_counters);
    v.reg_dm_mr = ptr_slot!(reg_dm_mr);
    v.alloc_dm = ptr_slot!(alloc_dm);
    v.free_dm = int_slot!(free_dm);
    v.modify_flow_action_esp = int_slot!(modify_flow_action_esp);
    v.destroy_flow_action = int_slot!(destroy_flow_action);
    v.create_flow_action_esp = ptr_slot!(create_flow_action_esp);
    v.modify_qp_rate_limit = int_slot!(modify_qp_rate_limit);
    v.alloc_parent_domain = ptr_slot!(alloc_parent_domain);
    v.dealloc_td = int_slot!(dealloc_td);
    v.alloc_td = ptr_slot!(alloc_td);
    v.modify_cq = int_slot!(modify_cq);
    v.post_srq_ops = int_slot!(post_srq_ops);
    v.destroy_rwq_ind_table = int_slot!(destroy_rwq_ind_table);
    v.create_rwq_ind_table = ptr_slot!(create_rwq_ind_table);
    v.destroy_wq = int_slot!(destroy_wq);
    v.modify_wq = int_slot!(modify_wq);
    v.create_wq = ptr_slot!(create_wq);
    v.query_rt_values = int_slot!(query_rt_values);
    v.create_cq_ex = ptr_slot!(create_cq_ex);
    v.ibv_destroy_flow = int_slot!(destroy_flow);
    v.ibv_create_flow = ptr_slot!(create_flow);
    v.open_qp = ptr_slot!(open_qp);
    v.get_srq_num = int_slot!(get_srq_num);
    v.create_srq_ex = ptr_slot!(create_srq_ex);
    v.open_xrcd = ptr_slot!(open_xrcd);
    v.close_xrcd = int_slot!(close_xrcd);
}

/// Points the memory-window and SRQ context ops at their stubs.
pub(crate) fn fill_context_ops(ops: &mut ibv_context_ops) {
    ops.alloc_mw = ptr_slot!(alloc_mw);
    ops.bind_mw = int_slot!(bind_mw);
    ops.dealloc_mw = int_slot!(dealloc_mw);
    ops.post_srq_recv = int_slot!(post_srq_recv);
}

fn no_srq() -> Error {
    Error::unsupported("shared receive queues are not supported (max_srq is 0)")
}

fn no_ah() -> Error {
    Error::unsupported("address handles (UD QPs) are not supported: only RC QPs")
}

fn no_mcast() -> Error {
    Error::unsupported("multicast (UD QPs) is not supported")
}

/// Exported verbs that always fail the same way.
macro_rules! refuse {
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> ptr, $why:expr) => {
        $(#[$m])*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> *mut c_void {
            $(let _ = $a;)*
            FFI.ptr(stringify!($name), || Err($why))
        }
    };
    ($(#[$m:meta])* fn $name:ident($($a:ident: $t:ty),*) -> int, $why:expr) => {
        $(#[$m])*
        #[unsafe(no_mangle)]
        pub unsafe extern "C" fn $name($($a: $t),*) -> c_int {
            $(let _ = $a;)*
            FFI.errno_value(stringify!($name), || Err($why))
        }
    };
}

refuse!(fn ibv_create_srq(pd: *mut ibv_pd, attr: *mut ibv_srq_init_attr) -> ptr, no_srq());
refuse!(fn ibv_modify_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr, mask: c_int) -> int, no_srq());
refuse!(fn ibv_query_srq(srq: *mut ibv_srq, attr: *mut ibv_srq_attr) -> int, no_srq());
refuse!(
    /// No SRQ is ever created, so none can be destroyed.
    fn ibv_destroy_srq(srq: *mut ibv_srq) -> int,
    Error::inval("not an SRQ of mrc-verbs-shim (it creates none)")
);
refuse!(fn ibv_create_ah(pd: *mut ibv_pd, attr: *mut ibv_ah_attr) -> ptr, no_ah());
refuse!(fn ibv_create_ah_from_wc(pd: *mut ibv_pd, wc: *mut ibv_wc, grh: *mut c_void, port: u8) -> ptr, no_ah());
refuse!(
    fn ibv_init_ah_from_wc(ctx: *mut ibv_context, port: u8, wc: *mut ibv_wc, grh: *mut c_void, ah: *mut ibv_ah_attr) -> int,
    no_ah()
);
refuse!(
    /// No AH is ever created, so none can be destroyed.
    fn ibv_destroy_ah(ah: *mut ibv_ah) -> int,
    Error::inval("not an address handle of mrc-verbs-shim (it creates none)")
);
refuse!(fn ibv_attach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> int, no_mcast());
refuse!(fn ibv_detach_mcast(qp: *mut ibv_qp, gid: *const ibv_gid, lid: u16) -> int, no_mcast());
refuse!(
    fn ibv_resize_cq(cq: *mut ibv_cq, cqe: c_int) -> int,
    Error::unsupported("resizing a CQ is not supported; create it with the size needed")
);
refuse!(
    fn ibv_reg_dmabuf_mr(pd: *mut ibv_pd, offset: u64, length: usize, iova: u64, fd: c_int, access: c_int) -> ptr,
    Error::unsupported("dma-buf memory regions (device memory) are not supported")
);
refuse!(
    fn ibv_query_ece(qp: *mut ibv_qp, ece: *mut c_void) -> int,
    Error::unsupported("enhanced connection establishment (ECE) is not supported")
);
refuse!(
    fn ibv_set_ece(qp: *mut ibv_qp, ece: *mut c_void) -> int,
    Error::unsupported("enhanced connection establishment (ECE) is not supported")
);
refuse!(
    fn ibv_import_device(cmd_fd: c_int) -> ptr,
    Error::unsupported("importing a device from another process is not supported")
);
refuse!(
    fn ibv_import_pd(ctx: *mut ibv_context, handle: u32) -> ptr,
    Error::unsupported("importing a PD from another process is not supported")
);
refuse!(
    fn ibv_import_mr(pd: *mut ibv_pd, handle: u32) -> ptr,
    Error::unsupported("importing an MR from another process is not supported")
);

/// `ibv_rereg_mr` reports failure as `IBV_REREG_MR_ERR_INPUT` (-1) with `errno` set.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_rereg_mr(
    mr: *mut ibv_mr,
    flags: c_int,
    pd: *mut ibv_pd,
    addr: *mut c_void,
    length: usize,
    access: c_int,
) -> c_int {
    let _ = (mr, flags, pd, addr, length, access);
    match FFI.errno_value("ibv_rereg_mr", || {
        Err(Error::unsupported(
            "re-registering an MR is not supported; deregister and register again",
        ))
    }) {
        0 => 0,
        _ => -1,
    }
}
