//! The libibverbs ABI (rdma-core `infiniband/verbs.h`, x86_64), hand-written as `#[repr(C)]` types: the one
//! copy both verbs front ends use (the shim produces and reads these structures; libmrc's OCP API embeds
//! `ibv_qp_attr`, `ibv_ah_attr`, `ibv_qp_cap` and passes the rest by pointer).
//!
//! Only the structures a front end produces or reads are here, with the C names so the layout test
//! (`tests/verbs_layout.rs`) can compare every field's offset and every size with a probe compiled against the
//! installed headers. Unions no front end reads are opaque byte arrays of the right size and alignment.
//! Layout facts and the `verbs_context` rules: `shared/design/verbs-nccl-abi.md` §1.
#![allow(
    non_camel_case_types,
    non_snake_case,
    missing_docs,
    reason = "C names, documented in verbs.h"
)]

use std::ffi::{c_char, c_int, c_uint, c_void};

use mrc_host::verbs::qp_state::{State, attr};

/// `pthread_mutex_t` on x86_64 glibc (40 bytes); initialised with `pthread_mutex_init`.
pub type pthread_mutex_t = libc::pthread_mutex_t;
/// `pthread_cond_t` on x86_64 glibc (48 bytes).
pub type pthread_cond_t = libc::pthread_cond_t;

/// An untyped function pointer slot: the shim casts its typed functions into these.
pub type Slot = Option<unsafe extern "C" fn()>;

pub const IBV_SYSFS_NAME_MAX: usize = 64;
pub const IBV_SYSFS_PATH_MAX: usize = 256;

#[repr(C)]
pub struct ibv_device {
    pub _ops: [*mut c_void; 2],
    pub node_type: c_int,
    pub transport_type: c_int,
    pub name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_name: [c_char; IBV_SYSFS_NAME_MAX],
    pub dev_path: [c_char; IBV_SYSFS_PATH_MAX],
    pub ibdev_path: [c_char; IBV_SYSFS_PATH_MAX],
}

/// `struct ibv_context_ops`: 32 slots. The inline verbs call the named ones; the rest are `_compat_*` padding.
#[repr(C)]
pub struct ibv_context_ops {
    pub _compat_query_device: Slot,
    pub _compat_query_port: Slot,
    pub _compat_alloc_pd: Slot,
    pub _compat_dealloc_pd: Slot,
    pub _compat_reg_mr: Slot,
    pub _compat_rereg_mr: Slot,
    pub _compat_dereg_mr: Slot,
    pub alloc_mw: Slot,
    pub bind_mw: Slot,
    pub dealloc_mw: Slot,
    pub _compat_create_cq: Slot,
    pub poll_cq: Slot,
    pub req_notify_cq: Slot,
    pub _compat_cq_event: Slot,
    pub _compat_resize_cq: Slot,
    pub _compat_destroy_cq: Slot,
    pub _compat_create_srq: Slot,
    pub _compat_modify_srq: Slot,
    pub _compat_query_srq: Slot,
    pub _compat_destroy_srq: Slot,
    pub post_srq_recv: Slot,
    pub _compat_create_qp: Slot,
    pub _compat_query_qp: Slot,
    pub _compat_modify_qp: Slot,
    pub _compat_destroy_qp: Slot,
    pub post_send: Slot,
    pub post_recv: Slot,
    pub _compat_create_ah: Slot,
    pub _compat_destroy_ah: Slot,
    pub _compat_attach_mcast: Slot,
    pub _compat_detach_mcast: Slot,
    pub _compat_async_event: Slot,
}

#[repr(C)]
pub struct ibv_context {
    pub device: *mut ibv_device,
    pub ops: ibv_context_ops,
    pub cmd_fd: c_int,
    pub async_fd: c_int,
    pub num_comp_vectors: c_int,
    pub mutex: pthread_mutex_t,
    pub abi_compat: *mut c_void,
}

/// `abi_compat` value that makes `verbs_get_ctx` find the [`verbs_context`] before the context.
pub const VERBS_ABI_IS_EXTENDED: *mut c_void = usize::MAX as *mut c_void;

/// `struct verbs_context` as of rdma-core 44: members only ever get prepended, so each op's distance from
/// `context` is fixed; `sz` tells newer applications which ops we know.
#[repr(C)]
pub struct verbs_context {
    pub query_port: Slot,
    pub advise_mr: Slot,
    pub alloc_null_mr: Slot,
    pub read_counters: Slot,
    pub attach_counters_point_flow: Slot,
    pub create_counters: Slot,
    pub destroy_counters: Slot,
    pub reg_dm_mr: Slot,
    pub alloc_dm: Slot,
    pub free_dm: Slot,
    pub modify_flow_action_esp: Slot,
    pub destroy_flow_action: Slot,
    pub create_flow_action_esp: Slot,
    pub modify_qp_rate_limit: Slot,
    pub alloc_parent_domain: Slot,
    pub dealloc_td: Slot,
    pub alloc_td: Slot,
    pub modify_cq: Slot,
    pub post_srq_ops: Slot,
    pub destroy_rwq_ind_table: Slot,
    pub create_rwq_ind_table: Slot,
    pub destroy_wq: Slot,
    pub modify_wq: Slot,
    pub create_wq: Slot,
    pub query_rt_values: Slot,
    pub create_cq_ex: Slot,
    pub priv_: *mut c_void,
    pub query_device_ex: Slot,
    pub ibv_destroy_flow: Slot,
    pub ABI_placeholder2: Slot,
    pub ibv_create_flow: Slot,
    pub ABI_placeholder1: Slot,
    pub open_qp: Slot,
    pub create_qp_ex: Slot,
    pub get_srq_num: Slot,
    pub create_srq_ex: Slot,
    pub open_xrcd: Slot,
    pub close_xrcd: Slot,
    pub _ABI_placeholder3: u64,
    pub sz: usize,
    pub context: ibv_context,
}

#[repr(C)]
pub struct ibv_device_attr {
    pub fw_ver: [c_char; 64],
    pub node_guid: u64,
    pub sys_image_guid: u64,
    pub max_mr_size: u64,
    pub page_size_cap: u64,
    pub vendor_id: u32,
    pub vendor_part_id: u32,
    pub hw_ver: u32,
    pub max_qp: c_int,
    pub max_qp_wr: c_int,
    pub device_cap_flags: c_uint,
    pub max_sge: c_int,
    pub max_sge_rd: c_int,
    pub max_cq: c_int,
    pub max_cqe: c_int,
    pub max_mr: c_int,
    pub max_pd: c_int,
    pub max_qp_rd_atom: c_int,
    pub max_ee_rd_atom: c_int,
    pub max_res_rd_atom: c_int,
    pub max_qp_init_rd_atom: c_int,
    pub max_ee_init_rd_atom: c_int,
    pub atomic_cap: c_uint,
    pub max_ee: c_int,
    pub max_rdd: c_int,
    pub max_mw: c_int,
    pub max_raw_ipv6_qp: c_int,
    pub max_raw_ethy_qp: c_int,
    pub max_mcast_grp: c_int,
    pub max_mcast_qp_attach: c_int,
    pub max_total_mcast_qp_attach: c_int,
    pub max_ah: c_int,
    pub max_fmr: c_int,
    pub max_map_per_fmr: c_int,
    pub max_srq: c_int,
    pub max_srq_wr: c_int,
    pub max_srq_sge: c_int,
    pub max_pkeys: u16,
    pub local_ca_ack_delay: u8,
    pub phys_port_cnt: u8,
}

/// `struct ibv_device_attr_ex`: the shim fills `orig_attr` and zeroes the rest (no extended capabilities).
#[repr(C)]
pub struct ibv_device_attr_ex {
    pub orig_attr: ibv_device_attr,
    pub comp_mask: u32,
    pub _rest: [u64; 20],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_port_attr {
    pub state: c_uint,
    pub max_mtu: c_uint,
    pub active_mtu: c_uint,
    pub gid_tbl_len: c_int,
    pub port_cap_flags: u32,
    pub max_msg_sz: u32,
    pub bad_pkey_cntr: u32,
    pub qkey_viol_cntr: u32,
    pub pkey_tbl_len: u16,
    pub lid: u16,
    pub sm_lid: u16,
    pub lmc: u8,
    pub max_vl_num: u8,
    pub sm_sl: u8,
    pub subnet_timeout: u8,
    pub init_type_reply: u8,
    pub active_width: u8,
    pub active_speed: u8,
    pub phys_state: u8,
    pub link_layer: u8,
    pub flags: u8,
    pub port_cap_flags2: u16,
}

/// `union ibv_gid`: 16 raw bytes (network order), 8-aligned like its `global` member (two `__be64`).
#[repr(C, align(8))]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_gid {
    pub raw: [u8; 16],
}

#[repr(C)]
pub struct ibv_gid_entry {
    pub gid: ibv_gid,
    pub gid_index: u32,
    pub port_num: u32,
    pub gid_type: u32,
    pub ndev_ifindex: u32,
}

#[repr(C)]
pub struct ibv_pd {
    pub context: *mut ibv_context,
    pub handle: u32,
}

#[repr(C)]
pub struct ibv_mr {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub addr: *mut c_void,
    pub length: usize,
    pub handle: u32,
    pub lkey: u32,
    pub rkey: u32,
}

#[repr(C)]
pub struct ibv_comp_channel {
    pub context: *mut ibv_context,
    pub fd: c_int,
    pub refcnt: c_int,
}

#[repr(C)]
pub struct ibv_cq {
    pub context: *mut ibv_context,
    pub channel: *mut ibv_comp_channel,
    pub cq_context: *mut c_void,
    pub handle: u32,
    pub cqe: c_int,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub comp_events_completed: u32,
    pub async_events_completed: u32,
}

#[repr(C)]
pub struct ibv_srq {
    pub context: *mut ibv_context,
    pub srq_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub handle: u32,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_qp {
    pub context: *mut ibv_context,
    pub qp_context: *mut c_void,
    pub pd: *mut ibv_pd,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub handle: u32,
    pub qp_num: u32,
    pub state: c_uint,
    pub qp_type: c_uint,
    pub mutex: pthread_mutex_t,
    pub cond: pthread_cond_t,
    pub events_completed: u32,
}

#[repr(C)]
pub struct ibv_ah {
    pub context: *mut ibv_context,
    pub pd: *mut ibv_pd,
    pub handle: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_global_route {
    pub dgid: ibv_gid,
    pub flow_label: u32,
    pub sgid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_ah_attr {
    pub grh: ibv_global_route,
    pub dlid: u16,
    pub sl: u8,
    pub src_path_bits: u8,
    pub static_rate: u8,
    pub is_global: u8,
    pub port_num: u8,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_qp_cap {
    pub max_send_wr: u32,
    pub max_recv_wr: u32,
    pub max_send_sge: u32,
    pub max_recv_sge: u32,
    pub max_inline_data: u32,
}

#[repr(C)]
pub struct ibv_qp_init_attr {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
}

/// `struct ibv_qp_init_attr_ex`: the shim reads the classic prefix and `comp_mask`.
#[repr(C)]
pub struct ibv_qp_init_attr_ex {
    pub qp_context: *mut c_void,
    pub send_cq: *mut ibv_cq,
    pub recv_cq: *mut ibv_cq,
    pub srq: *mut ibv_srq,
    pub cap: ibv_qp_cap,
    pub qp_type: c_uint,
    pub sq_sig_all: c_int,
    pub comp_mask: u32,
    pub pd: *mut ibv_pd,
    pub xrcd: *mut c_void,
    /// `create_flags` … `send_ops_flags`, which the shim never reads.
    pub _rest: [u64; 7],
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_qp_attr {
    pub qp_state: c_uint,
    pub cur_qp_state: c_uint,
    pub path_mtu: c_uint,
    pub path_mig_state: c_uint,
    pub qkey: u32,
    pub rq_psn: u32,
    pub sq_psn: u32,
    pub dest_qp_num: u32,
    pub qp_access_flags: c_uint,
    pub cap: ibv_qp_cap,
    pub ah_attr: ibv_ah_attr,
    pub alt_ah_attr: ibv_ah_attr,
    pub pkey_index: u16,
    pub alt_pkey_index: u16,
    pub en_sqd_async_notify: u8,
    pub sq_draining: u8,
    pub max_rd_atomic: u8,
    pub max_dest_rd_atomic: u8,
    pub min_rnr_timer: u8,
    pub port_num: u8,
    pub timeout: u8,
    pub retry_cnt: u8,
    pub rnr_retry: u8,
    pub alt_port_num: u8,
    pub alt_timeout: u8,
    pub rate_limit: u32,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_sge {
    pub addr: u64,
    pub length: u32,
    pub lkey: u32,
}

/// `wr.rdma` of `ibv_send_wr` (the first member of the `wr` union; `wr.atomic` is larger).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_rdma_wr {
    pub remote_addr: u64,
    pub rkey: u32,
}

/// The `wr` union of `ibv_send_wr`: `rdma` at its start, sized by `atomic` (32 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_send_wr_wr {
    pub rdma: ibv_rdma_wr,
    pub _atomic_tail: [u64; 2],
}

#[repr(C)]
pub struct ibv_send_wr {
    pub wr_id: u64,
    pub next: *mut ibv_send_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
    pub opcode: c_uint,
    pub send_flags: c_uint,
    /// `imm_data` (network order) or `invalidate_rkey`.
    pub imm_data: u32,
    pub wr: ibv_send_wr_wr,
    /// The `qp_type` union (`xrc.remote_srqn`).
    pub qp_type: u32,
    /// The `bind_mw`/`tso` union.
    pub _bind_mw_tso: [u64; 6],
}

#[repr(C)]
pub struct ibv_recv_wr {
    pub wr_id: u64,
    pub next: *mut ibv_recv_wr,
    pub sg_list: *mut ibv_sge,
    pub num_sge: c_int,
}

#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ibv_wc {
    pub wr_id: u64,
    pub status: c_uint,
    pub opcode: c_uint,
    pub vendor_err: u32,
    pub byte_len: u32,
    /// `imm_data` (network order) or `invalidated_rkey`.
    pub imm_data: u32,
    pub qp_num: u32,
    pub src_qp: u32,
    pub wc_flags: c_uint,
    pub pkey_index: u16,
    pub slid: u16,
    pub sl: u8,
    pub dlid_path_bits: u8,
}

#[repr(C)]
pub struct ibv_srq_attr {
    pub max_wr: u32,
    pub max_sge: u32,
    pub srq_limit: u32,
}

#[repr(C)]
pub struct ibv_srq_init_attr {
    pub srq_context: *mut c_void,
    pub attr: ibv_srq_attr,
}

/// `struct ibv_async_event`: the element union is one pointer-sized word.
#[repr(C)]
pub struct ibv_async_event {
    pub element: *mut c_void,
    pub event_type: c_uint,
}

// Node, transport and link.
pub const IBV_NODE_CA: c_int = 1;
pub const IBV_TRANSPORT_IB: c_int = 0;
pub const IBV_LINK_LAYER_ETHERNET: u8 = 2;
pub const IBV_PORT_ACTIVE: c_uint = 4;
/// `phys_state` LinkUp.
pub const IBV_PORT_PHYS_STATE_LINK_UP: u8 = 5;
pub const IBV_PORT_CM_SUP: u32 = 1 << 16;
pub const IBV_PORT_IP_BASED_GIDS: u32 = 1 << 26;
pub const IBV_ATOMIC_NONE: c_uint = 0;

// `enum ibv_mtu`.
pub const IBV_MTU_256: c_uint = 1;
pub const IBV_MTU_1024: c_uint = 3;
pub const IBV_MTU_4096: c_uint = 5;

// GID types: `ibv_query_gid_type` (sysfs numbering) and `ibv_gid_entry.gid_type`.
pub const IBV_GID_TYPE_SYSFS_ROCE_V2: c_int = 1;
pub const IBV_GID_TYPE_ROCE_V2: u32 = 2;

// QP types and states; the states and attribute bits are the state machine's (`mrc_host::verbs::qp_state`).
pub const IBV_QPT_RC: c_uint = 2;
pub const IBV_QPS_RESET: c_uint = State::Reset.to_verbs();
pub const IBV_QPS_INIT: c_uint = State::Init.to_verbs();
pub const IBV_QPS_RTR: c_uint = State::Rtr.to_verbs();
pub const IBV_QPS_RTS: c_uint = State::Rts.to_verbs();
pub const IBV_QPS_SQD: c_uint = State::Sqd.to_verbs();
pub const IBV_QPS_SQE: c_uint = State::Sqe.to_verbs();
pub const IBV_QPS_ERR: c_uint = State::Err.to_verbs();

// `enum ibv_qp_attr_mask`.
pub const IBV_QP_STATE: c_int = attr::STATE as c_int;
pub const IBV_QP_CUR_STATE: c_int = attr::CUR_STATE as c_int;
pub const IBV_QP_EN_SQD_ASYNC_NOTIFY: c_int = attr::EN_SQD_ASYNC_NOTIFY as c_int;
pub const IBV_QP_ACCESS_FLAGS: c_int = attr::ACCESS_FLAGS as c_int;
pub const IBV_QP_PKEY_INDEX: c_int = attr::PKEY_INDEX as c_int;
pub const IBV_QP_PORT: c_int = attr::PORT as c_int;
pub const IBV_QP_QKEY: c_int = attr::QKEY as c_int;
pub const IBV_QP_AV: c_int = attr::AV as c_int;
pub const IBV_QP_PATH_MTU: c_int = attr::PATH_MTU as c_int;
pub const IBV_QP_TIMEOUT: c_int = attr::TIMEOUT as c_int;
pub const IBV_QP_RETRY_CNT: c_int = attr::RETRY_CNT as c_int;
pub const IBV_QP_RNR_RETRY: c_int = attr::RNR_RETRY as c_int;
pub const IBV_QP_RQ_PSN: c_int = attr::RQ_PSN as c_int;
pub const IBV_QP_MAX_QP_RD_ATOMIC: c_int = attr::MAX_QP_RD_ATOMIC as c_int;
pub const IBV_QP_ALT_PATH: c_int = attr::ALT_PATH as c_int;
pub const IBV_QP_MIN_RNR_TIMER: c_int = attr::MIN_RNR_TIMER as c_int;
pub const IBV_QP_SQ_PSN: c_int = attr::SQ_PSN as c_int;
pub const IBV_QP_MAX_DEST_RD_ATOMIC: c_int = attr::MAX_DEST_RD_ATOMIC as c_int;
pub const IBV_QP_PATH_MIG_STATE: c_int = attr::PATH_MIG_STATE as c_int;
pub const IBV_QP_CAP: c_int = attr::CAP as c_int;
pub const IBV_QP_DEST_QPN: c_int = attr::DEST_QPN as c_int;
pub const IBV_QP_RATE_LIMIT: c_int = attr::RATE_LIMIT as c_int;

/// `IBV_QP_INIT_ATTR_PD`: the only `ibv_qp_init_attr_ex.comp_mask` bit the shim accepts.
pub const IBV_QP_INIT_ATTR_PD: u32 = 1 << 0;

// `enum ibv_access_flags`.
pub const IBV_ACCESS_LOCAL_WRITE: c_int = 1;
pub const IBV_ACCESS_REMOTE_WRITE: c_int = 1 << 1;
pub const IBV_ACCESS_REMOTE_READ: c_int = 1 << 2;
pub const IBV_ACCESS_REMOTE_ATOMIC: c_int = 1 << 3;
pub const IBV_ACCESS_MW_BIND: c_int = 1 << 4;
pub const IBV_ACCESS_ZERO_BASED: c_int = 1 << 5;
pub const IBV_ACCESS_ON_DEMAND: c_int = 1 << 6;
pub const IBV_ACCESS_HUGETLB: c_int = 1 << 7;
/// Hints a provider may ignore (`IBV_ACCESS_RELAXED_ORDERING` and friends).
pub const IBV_ACCESS_OPTIONAL_RANGE: c_int = 0x3ff0_0000;

// `enum ibv_qp_create_send_ops_flags` (`ibv_qp_init_attr_ex.send_ops_flags`; OCP's `mrc_qp_init_attr` too).
pub const IBV_QP_EX_WITH_RDMA_WRITE: u64 = 1 << 0;
pub const IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM: u64 = 1 << 1;

// Send flags and work request opcodes.
pub const IBV_SEND_FENCE: c_uint = 1;
pub const IBV_SEND_SIGNALED: c_uint = 1 << 1;
pub const IBV_SEND_SOLICITED: c_uint = 1 << 2;
pub const IBV_SEND_INLINE: c_uint = 1 << 3;
pub const IBV_WR_RDMA_WRITE: c_uint = 0;
pub const IBV_WR_RDMA_WRITE_WITH_IMM: c_uint = 1;
pub const IBV_WR_SEND: c_uint = 2;
pub const IBV_WR_SEND_WITH_IMM: c_uint = 3;
pub const IBV_WR_RDMA_READ: c_uint = 4;

// Completion opcodes and flags.
pub const IBV_WC_SEND: c_uint = 0;
pub const IBV_WC_RDMA_WRITE: c_uint = 1;
pub const IBV_WC_RDMA_READ: c_uint = 2;
pub const IBV_WC_RECV: c_uint = 128;
pub const IBV_WC_RECV_RDMA_WITH_IMM: c_uint = 129;
pub const IBV_WC_WITH_IMM: c_uint = 1 << 1;

// Async events.
pub const IBV_EVENT_QP_FATAL: c_uint = 1;
/// `IBV_EVENT_CQ_ERR`: a CQ overran.
pub const IBV_EVENT_CQ_ERR: c_uint = 0;
