//! The C types and constants of `include/mrc.h` and `include/mrc_ctl.h`, and the few verbs types they embed.
//!
//! Hand-written `#[repr(C)]` mirrors; the unit tests at the bottom compare every size, alignment, field offset
//! and constant with the table measured from the OCP 1.0.1 headers (`tests/layout/ocp-1.0.1.txt`), and
//! `tests/layout.rs` does the same for the C header. C's anonymous nested structs get names here
//! (`<parent>_<member>`). The verbs types are `mrc_ffi::verbs_abi`'s (the shim's too).
#![allow(
    non_camel_case_types,
    missing_docs,
    reason = "the names are C's, documented in the header"
)]

use std::ffi::{c_char, c_int, c_uint, c_void};

// ---- verbs: one copy for every verbs front end, checked against rdma-core's headers in mrc-ffi ----------------

pub use mrc_ffi::verbs_abi::{
    IBV_ACCESS_LOCAL_WRITE, IBV_ACCESS_REMOTE_ATOMIC, IBV_ACCESS_REMOTE_READ,
    IBV_ACCESS_REMOTE_WRITE, IBV_MTU_256, IBV_MTU_4096, IBV_QP_ACCESS_FLAGS, IBV_QP_ALT_PATH,
    IBV_QP_AV, IBV_QP_CAP, IBV_QP_CUR_STATE, IBV_QP_DEST_QPN, IBV_QP_EN_SQD_ASYNC_NOTIFY,
    IBV_QP_EX_WITH_RDMA_WRITE, IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM, IBV_QP_MAX_DEST_RD_ATOMIC,
    IBV_QP_MAX_QP_RD_ATOMIC, IBV_QP_MIN_RNR_TIMER, IBV_QP_PATH_MIG_STATE, IBV_QP_PATH_MTU,
    IBV_QP_PKEY_INDEX, IBV_QP_PORT, IBV_QP_QKEY, IBV_QP_RATE_LIMIT, IBV_QP_RETRY_CNT,
    IBV_QP_RNR_RETRY, IBV_QP_RQ_PSN, IBV_QP_SQ_PSN, IBV_QP_STATE, IBV_QP_TIMEOUT, IBV_QPS_ERR,
    IBV_QPS_INIT, IBV_QPS_RESET, IBV_QPS_RTR, IBV_QPS_RTS, IBV_QPS_SQD, IBV_QPS_SQE, ibv_ah_attr,
    ibv_context, ibv_gid, ibv_global_route, ibv_pd, ibv_qp_attr, ibv_qp_cap, ibv_recv_wr,
    ibv_send_wr, ibv_wc,
};

// ---- mrc.h ---------------------------------------------------------------------------------------------

pub const MRC_MAX_VENDOR_CFG_SIZE: usize = 128;

/// `MRC_API_VER(major, minor, subminor)`.
pub const fn mrc_api_ver(major: u32, minor: u32, sub: u32) -> u32 {
    (major << 24) | (minor << 16) | sub
}
pub const MRC_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 1);
pub const MRC_VENDOR_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 0);

pub type mrc_protocol_version = c_uint;
pub const MRC_PROTOCOL_VERSION_0: c_uint = 0;
pub const MRC_PROTOCOL_VERSION_1: c_uint = 1;

pub const MRC_DEVICE_CAP_TRIM_NACK: u32 = 1 << 0;
pub const MRC_DEVICE_CAP_DYNAMIC_MPR: u32 = 1 << 1;
pub const MRC_DEVICE_CAP_SVC_TIME: u32 = 1 << 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_device_attr_wimm_attr {
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_device_attr_mpr_attr {
    pub max_mpr: u8,
    pub mpr_resolution: u8,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_device_attr_qp_attr {
    pub max_qp_hint: u32,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_device_attr {
    pub mrc_protocol_version: u32,
    pub wimm_attr: mrc_device_attr_wimm_attr,
    pub mpr_attr: mrc_device_attr_mpr_attr,
    pub qp_attr: mrc_device_attr_qp_attr,
    pub cap: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_context_attr {
    pub mrc_api_version_used: u32,
    pub mrc_vendor_api_version_used: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_qp_hint_attr {
    pub num_qps_per_peer: c_int,
    pub num_send_peers: c_int,
    pub num_remote_recv_peers: c_int,
    pub vendor_cfg: [u8; MRC_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_qp_hint_attr {
    fn default() -> Self {
        Self {
            num_qps_per_peer: 0,
            num_send_peers: 0,
            num_remote_recv_peers: 0,
            vendor_cfg: [0; MRC_MAX_VENDOR_CFG_SIZE],
        }
    }
}

pub const MRC_QP_HINT_NUM_QPS_PER_PEER: c_int = 1 << 0;
pub const MRC_QP_HINT_NUM_SEND_PEERS: c_int = 1 << 1;
pub const MRC_QP_HINT_NUM_REMOTE_RECV_PEERS: c_int = 1 << 2;
pub const MRC_QP_HINT_VENDOR_CFG: c_int = 1 << 31;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_qp_hint_init_attr {
    pub attr: mrc_qp_hint_attr,
}

/// The C API's objects, opaque to C.
pub use crate::context::mrc_context;
pub use crate::cq::{mrc_comp_channel, mrc_cq};
pub use crate::hint::mrc_qp_hint;
pub use crate::qp::mrc_qp;

#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct mrc_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut mrc_cq,
    pub recv_cq: *mut mrc_cq,
    pub cap: ibv_qp_cap,
    pub sq_sig_all: c_int,
    pub pd: *mut ibv_pd,
    pub send_ops_flags: u64,
    pub protocol_version: mrc_protocol_version,
}

pub const MRC_QP_MAX_WIMM: c_int = 1 << 0;
pub const MRC_QP_MAX_WIMM_DEST: c_int = 1 << 1;
pub const MRC_QP_MPR: c_int = 1 << 2;
pub const MRC_QP_MPR_DEST: c_int = 1 << 3;
pub const MRC_QP_TIMEOUT: c_int = 1 << 4;
pub const MRC_QP_EV_PROFILE_ID: c_int = 1 << 5;
pub const MRC_QP_CC_PROFILE_ID: c_int = 1 << 6;
pub const MRC_QP_HINT: c_int = 1 << 7;
pub const MRC_QP_RETRY_CNT: c_int = 1 << 8;
pub const MRC_QP_CAP: c_int = 1 << 9;
pub const MRC_QP_VENDOR_CFG: c_int = 1 << 31;

pub const MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED: u32 = 1 << 0;
pub const MRC_QP_CAP_DYNAMIC_MPR: u32 = 1 << 1;
pub const MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED: u32 = 1 << 2;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_mpr {
    pub mpr: u8,
    pub mpr_dest: u8,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_wimm {
    pub max_wimm: u16,
    pub max_wimm_dest: u16,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_profile {
    pub ev_profile_id: u64,
    pub cc_profile_id: u64,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_qp_attr_retry {
    pub linear_cnt: u8,
    pub exp_cnt: u8,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_qp_attr {
    pub mpr: mrc_qp_attr_mpr,
    pub wimm: mrc_qp_attr_wimm,
    pub timeout: u8,
    pub profile: mrc_qp_attr_profile,
    pub retry: mrc_qp_attr_retry,
    pub qp_hint: *mut mrc_qp_hint,
    pub cap: u32,
    pub vendor_cfg: [u8; MRC_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_qp_attr {
    fn default() -> Self {
        Self {
            mpr: Default::default(),
            wimm: Default::default(),
            timeout: 0,
            profile: Default::default(),
            retry: Default::default(),
            qp_hint: std::ptr::null_mut(),
            cap: 0,
            vendor_cfg: [0; MRC_MAX_VENDOR_CFG_SIZE],
        }
    }
}

#[repr(C)]
#[derive(Clone, Copy)]
pub union mrc_async_event_element {
    pub cq: *mut mrc_cq,
    pub qp: *mut mrc_qp,
    pub port_num: c_int,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mrc_async_event {
    pub element: mrc_async_event_element,
    pub event_type: c_uint,
}

// ---- mrc_ctl.h -----------------------------------------------------------------------------------------

pub const MRC_CTL_MAX_VENDOR_CFG_SIZE: usize = 128;
pub const MRC_CTL_EV_MAX_BYTES: usize = 32;
pub const MRC_CTL_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 1);
pub const MRC_CTL_VENDOR_API_CURRENT_VERSION: u32 = mrc_api_ver(1, 0, 0);

pub const MRC_CTL_PROTOCOL_VERSION_0: u32 = 0;
pub const MRC_CTL_PROTOCOL_VERSION_1: u32 = 1;

pub type mrc_ctl_profile_state = c_uint;
pub const MRC_CTL_PROFILE_INIT: c_uint = 0;
pub const MRC_CTL_PROFILE_OFFLINE: c_uint = 1;
pub const MRC_CTL_PROFILE_ONLINE: c_uint = 2;

pub const MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE: u32 = 1 << 0;
pub const MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE: u32 = 1 << 1;
pub const MRC_CTL_OPT_CAP_EV_EVENT: u32 = 1 << 2;
pub const MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE: u32 = 1 << 3;
pub const MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT: u32 = 1 << 4;
pub const MRC_CTL_OPT_CAP_EP_OP_EV_PROBE: u32 = 1 << 5;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_device_attr_ev {
    pub ev_max_fmt_profiles: u32,
    pub ev_max_profiles: u32,
    pub ev_max_count: u32,
    pub ev_free_count: u32,
    pub ev_max_count_profile: u32,
    pub ev_count_align: u32,
    pub ev_max_width: u32,
    pub ev_fmt_mode_mask: u32,
    pub ev_mode_mask: u32,
    pub ev_op_max_entries: u32,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_device_attr_cc {
    pub cc_max_profiles: u32,
    pub algorithms: *const *const c_char,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_device_attr {
    pub mrc_ctl_protocol_version: u32,
    pub ev: mrc_ctl_device_attr_ev,
    pub cc: mrc_ctl_device_attr_cc,
    pub phy_port_mask: u32,
    pub opt_attr: u32,
}

pub type mrc_ctl_port_admin_state = c_uint;
pub const MRC_CTL_PORT_ADMIN_DISABLED: c_uint = 0;
pub const MRC_CTL_PORT_ADMIN_ENABLED: c_uint = 1;
pub const MRC_CTL_PORT_ADMIN_STATE: c_int = 1 << 0;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_port_attr {
    pub port_admin_state: mrc_ctl_port_admin_state,
}

pub type mrc_ctl_ev_fmt_mode = c_uint;
pub const MRC_CTL_EV_FMT_MODE_STEV: c_uint = 1 << 0;
pub const MRC_CTL_EV_FMT_MODE_SRV6: c_uint = 1 << 1;
pub const MRC_CTL_EV_FMT_MODE_UDP: c_uint = 1 << 2;

pub type mrc_ctl_ev_fmt_op = c_uint;
pub const MRC_CTL_EV_FMT_OP_MODIFY_FIELDS: c_uint = 0;
pub const MRC_CTL_EV_FMT_OP_QUERY_FIELDS: c_uint = 1;

pub const MRC_CTL_EV_FMT_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_EV_FMT_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_EV_FMT_PROFILE_MODE: c_int = 1 << 2;
pub const MRC_CTL_EV_FMT_PROFILE_OP: c_int = 1 << 3;
pub const MRC_CTL_EV_FMT_VENDOR_CFG: c_int = 1 << 31;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_fmt_field {
    pub width: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_ev_fmt_profile_attr_ev_fmt_op {
    pub op: mrc_ctl_ev_fmt_op,
    pub fmt_fields: *mut mrc_ctl_ev_fmt_field,
    pub fmt_field_count: c_int,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_ev_fmt_profile_attr {
    pub profile_state: mrc_ctl_profile_state,
    pub cur_profile_state: mrc_ctl_profile_state,
    pub ev_fmt_mode: mrc_ctl_ev_fmt_mode,
    pub ev_fmt_op: mrc_ctl_ev_fmt_profile_attr_ev_fmt_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_ctl_ev_fmt_profile_attr {
    fn default() -> Self {
        Self {
            profile_state: 0,
            cur_profile_state: 0,
            ev_fmt_mode: 0,
            ev_fmt_op: mrc_ctl_ev_fmt_profile_attr_ev_fmt_op {
                op: 0,
                fmt_fields: std::ptr::null_mut(),
                fmt_field_count: 0,
            },
            vendor_cfg: [0; MRC_CTL_MAX_VENDOR_CFG_SIZE],
        }
    }
}

pub type mrc_ctl_ev_t = [u8; MRC_CTL_EV_MAX_BYTES];

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct mrc_ctl_ev {
    pub val: mrc_ctl_ev_t,
    pub port: u8,
}

pub type mrc_ctl_ev_state = c_uint;
pub const MRC_CTL_EV_GOOD: c_uint = 1 << 0;
pub const MRC_CTL_EV_ASSUMED_BAD: c_uint = 1 << 1;
pub const MRC_CTL_EV_DENIED: c_uint = 1 << 2;
pub const MRC_CTL_EV_UNKNOWN: c_uint = 1 << 31;

pub type mrc_ctl_ev_mode = c_uint;
pub const MRC_CTL_EV_MODE_AUTO: c_uint = 1 << 0;
pub const MRC_CTL_EV_MODE_EXP: c_uint = 1 << 1;
pub const MRC_CTL_EV_MODE_GEN: c_uint = 1 << 2;

pub type mrc_ctl_ev_op = c_uint;
pub const MRC_CTL_EV_OP_REPLACE_EV: c_uint = 0;
pub const MRC_CTL_EV_OP_MODIFY_EV_STATE: c_uint = 1;
pub const MRC_CTL_EV_OP_QUERY_EV_STATE: c_uint = 2;
pub const MRC_CTL_EV_OP_QUERY_EV_ARRAY: c_uint = 3;

pub type mrc_ctl_ev_fields_op = c_uint;
pub const MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS: c_uint = 0;
pub const MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS: c_uint = 1;

pub const MRC_CTL_EV_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_EV_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_EV_PROFILE_MODE: c_int = 1 << 2;
pub const MRC_CTL_EV_PROFILE_FMT_ID: c_int = 1 << 3;
pub const MRC_CTL_EV_PROFILE_COUNT: c_int = 1 << 4;
pub const MRC_CTL_EV_PROFILE_MIN_ACTIVE: c_int = 1 << 5;
pub const MRC_CTL_EV_PROFILE_EVENT_MASK: c_int = 1 << 6;
pub const MRC_CTL_EV_PROFILE_EV_OP: c_int = 1 << 7;
pub const MRC_CTL_EV_PROFILE_EV_FIELDS_OP: c_int = 1 << 8;
pub const MRC_CTL_EV_PROFILE_VENDOR_CFG: c_int = 1 << 31;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_field {
    pub width: u32,
    pub init_val: u32,
    pub min_val: u32,
    pub max_val: u32,
    pub mask: u32,
}

pub const MRC_CTL_EV_OP_F_ALL_COPIES: u32 = 1 << 0;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_op_entry {
    pub ev: mrc_ctl_ev,
    pub ev_new: mrc_ctl_ev,
    pub state: mrc_ctl_ev_state,
    pub flags: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_ev_profile_attr_ev_op {
    pub op: mrc_ctl_ev_op,
    pub entries: *mut mrc_ctl_ev_op_entry,
    pub entry_count: c_int,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_ev_profile_attr_ev_fields_op {
    pub op: mrc_ctl_ev_fields_op,
    pub fields: *mut mrc_ctl_ev_field,
    pub field_count: c_int,
}
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_ev_profile_attr {
    pub profile_state: mrc_ctl_profile_state,
    pub cur_profile_state: mrc_ctl_profile_state,
    pub ev_mode: mrc_ctl_ev_mode,
    pub ev_fmt_profile_id: u64,
    pub ev_count: u32,
    pub ev_min_active: u32,
    pub ev_event_mask: c_int,
    pub ev_op: mrc_ctl_ev_profile_attr_ev_op,
    pub ev_fields_op: mrc_ctl_ev_profile_attr_ev_fields_op,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_ctl_ev_profile_attr {
    fn default() -> Self {
        Self {
            profile_state: 0,
            cur_profile_state: 0,
            ev_mode: 0,
            ev_fmt_profile_id: 0,
            ev_count: 0,
            ev_min_active: 0,
            ev_event_mask: 0,
            ev_op: mrc_ctl_ev_profile_attr_ev_op {
                op: 0,
                entries: std::ptr::null_mut(),
                entry_count: 0,
            },
            ev_fields_op: mrc_ctl_ev_profile_attr_ev_fields_op {
                op: 0,
                fields: std::ptr::null_mut(),
                field_count: 0,
            },
            vendor_cfg: [0; MRC_CTL_MAX_VENDOR_CFG_SIZE],
        }
    }
}

pub const MRC_CTL_CC_PROFILE_STATE: c_int = 1 << 0;
pub const MRC_CTL_CC_PROFILE_CUR_STATE: c_int = 1 << 1;
pub const MRC_CTL_CC_PROFILE_ALGORITHM: c_int = 1 << 2;
pub const MRC_CTL_CC_PROFILE_CONFIG: c_int = 1 << 3;
pub const MRC_CTL_CC_PROFILE_VENDOR_CFG: c_int = 1 << 31;

#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct mrc_ctl_cc_profile_attr {
    pub profile_state: mrc_ctl_profile_state,
    pub cur_profile_state: mrc_ctl_profile_state,
    pub algorithm: *const c_char,
    pub cc_config: *const c_void,
    pub vendor_cfg: [u8; MRC_CTL_MAX_VENDOR_CFG_SIZE],
}

impl Default for mrc_ctl_cc_profile_attr {
    fn default() -> Self {
        Self {
            profile_state: 0,
            cur_profile_state: 0,
            algorithm: std::ptr::null(),
            cc_config: std::ptr::null(),
            vendor_cfg: [0; MRC_CTL_MAX_VENDOR_CFG_SIZE],
        }
    }
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct mrc_ctl_cc_nscc_cfg {
    pub disable_qa: u8,
    pub adjust_bytes_threshold: u32,
    pub adjust_period_threshold: u32,
    pub base_rtt: u32,
    pub eta: f32,
    pub fi: f32,
    pub fi_scale: f32,
    pub gamma: f32,
    pub max_md_jump: f32,
    pub max_cwnd: u32,
    pub qa_gate: u8,
    pub qa_threshold: u32,
    pub target_delay: u32,
}

/// `struct mrc_ctl_ev_event` as programs built for controller API 1.0.1 (the default) see it.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_event {
    pub profile_id: u64,
    pub ev: mrc_ctl_ev,
    pub drop_count: u32,
    pub state: mrc_ctl_ev_state,
}

/// `struct mrc_ctl_ev_event` for programs built with `MRC_CTL_API_VER_USED` 1.0.0 (no `state`).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ev_event_1_0_0 {
    pub profile_id: u64,
    pub ev: mrc_ctl_ev,
    pub drop_count: u32,
}

pub type mrc_ctl_ep_op_type = c_uint;
pub const MRC_CTL_EP_OP_EV_PROBE: c_uint = 0;
pub const MRC_CTL_EP_OP_PORT_STATUS_UPDATE: c_uint = 1;

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_req_op_port_status_update {
    pub port_status: u32,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub union mrc_ctl_ep_req_op {
    pub port_status_update: mrc_ctl_ep_req_op_port_status_update,
}
#[repr(C)]
#[derive(Clone, Copy)]
pub struct mrc_ctl_ep_req {
    pub req_id: u16,
    pub sgid: ibv_gid,
    pub dgid: ibv_gid,
    pub ev_fmt_mode: mrc_ctl_ev_fmt_mode,
    pub req_ev: mrc_ctl_ev,
    pub op: mrc_ctl_ep_req_op,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct mrc_ctl_ep_rsp {
    pub req_id: u16,
    pub port: u8,
    pub rtt: c_uint,
    pub adj_svc_time: u8,
}

#[cfg(test)]
mod tests;
