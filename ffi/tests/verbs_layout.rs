//! The hand-written verbs ABI types (`mrc_ffi::verbs_abi`) against the installed rdma-core headers: for every
//! struct defined there, its size and every field's offset (and size, where the C member has the same name) must
//! match what a C probe compiled against `<infiniband/verbs.h>` prints; so must the constants. The probe is
//! generated from the same table the Rust side is checked with, so no field can be left out of one side only.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::mem::{offset_of, size_of};
use std::process::Command;

use mrc_ffi::verbs_abi::*;

/// Size of the field a raw field pointer points at (no reference to uninitialised memory is made).
fn pointee_size<T>(_: *const T) -> usize {
    size_of::<T>()
}

struct Field {
    rust: &'static str,
    c: &'static str,
    offset: usize,
    size: usize,
}

struct Struct {
    c_type: &'static str,
    size: usize,
    fields: Vec<Field>,
}

/// `structs!(ibv_qp: context, …, rust_name => "c.member", …)`. A renamed field is compared by offset only
/// (it stands for an anonymous union or a member of a union).
macro_rules! structs {
    ($($c_type:literal $s:ident { $($f:ident $(=> $c:literal)?),* $(,)? })*) => {
        vec![$(Struct {
            c_type: $c_type,
            size: size_of::<$s>(),
            fields: vec![$({
                let u = std::mem::MaybeUninit::<$s>::uninit();
                // SAFETY: only the field's address is formed, never read.
                let size = pointee_size(unsafe { &raw const (*u.as_ptr()).$f });
                Field {
                    rust: stringify!($f),
                    c: structs!(@c $f $($c)?),
                    offset: offset_of!($s, $f),
                    size,
                }
            }),*],
        }),*]
    };
    (@c $f:ident) => { stringify!($f) };
    (@c $f:ident $c:literal) => { $c };
}

fn table() -> Vec<Struct> {
    structs! {
        "struct ibv_device" ibv_device { _ops, node_type, transport_type, name, dev_name, dev_path, ibdev_path }
        "struct ibv_context_ops" ibv_context_ops {
            _compat_query_device, _compat_query_port, _compat_alloc_pd, _compat_dealloc_pd, _compat_reg_mr,
            _compat_rereg_mr, _compat_dereg_mr, alloc_mw, bind_mw, dealloc_mw, _compat_create_cq, poll_cq,
            req_notify_cq, _compat_cq_event, _compat_resize_cq, _compat_destroy_cq, _compat_create_srq,
            _compat_modify_srq, _compat_query_srq, _compat_destroy_srq, post_srq_recv, _compat_create_qp,
            _compat_query_qp, _compat_modify_qp, _compat_destroy_qp, post_send, post_recv, _compat_create_ah,
            _compat_destroy_ah, _compat_attach_mcast, _compat_detach_mcast, _compat_async_event,
        }
        "struct ibv_context" ibv_context { device, ops, cmd_fd, async_fd, num_comp_vectors, mutex, abi_compat }
        "struct verbs_context" verbs_context {
            query_port, advise_mr, alloc_null_mr, read_counters, attach_counters_point_flow, create_counters,
            destroy_counters, reg_dm_mr, alloc_dm, free_dm, modify_flow_action_esp, destroy_flow_action,
            create_flow_action_esp, modify_qp_rate_limit, alloc_parent_domain, dealloc_td, alloc_td, modify_cq,
            post_srq_ops, destroy_rwq_ind_table, create_rwq_ind_table, destroy_wq, modify_wq, create_wq,
            query_rt_values, create_cq_ex, priv_ => "priv", query_device_ex, ibv_destroy_flow, ABI_placeholder2,
            ibv_create_flow, ABI_placeholder1, open_qp, create_qp_ex, get_srq_num, create_srq_ex, open_xrcd,
            close_xrcd, _ABI_placeholder3, sz, context,
        }
        "struct ibv_device_attr" ibv_device_attr {
            fw_ver, node_guid, sys_image_guid, max_mr_size, page_size_cap, vendor_id, vendor_part_id, hw_ver,
            max_qp, max_qp_wr, device_cap_flags, max_sge, max_sge_rd, max_cq, max_cqe, max_mr, max_pd,
            max_qp_rd_atom, max_ee_rd_atom, max_res_rd_atom, max_qp_init_rd_atom, max_ee_init_rd_atom,
            atomic_cap, max_ee, max_rdd, max_mw, max_raw_ipv6_qp, max_raw_ethy_qp, max_mcast_grp,
            max_mcast_qp_attach, max_total_mcast_qp_attach, max_ah, max_fmr, max_map_per_fmr, max_srq,
            max_srq_wr, max_srq_sge, max_pkeys, local_ca_ack_delay, phys_port_cnt,
        }
        "struct ibv_device_attr_ex" ibv_device_attr_ex { orig_attr, comp_mask, _rest => "odp_caps" }
        "struct ibv_port_attr" ibv_port_attr {
            state, max_mtu, active_mtu, gid_tbl_len, port_cap_flags, max_msg_sz, bad_pkey_cntr, qkey_viol_cntr,
            pkey_tbl_len, lid, sm_lid, lmc, max_vl_num, sm_sl, subnet_timeout, init_type_reply, active_width,
            active_speed, phys_state, link_layer, flags, port_cap_flags2,
        }
        "union ibv_gid" ibv_gid { raw }
        "struct ibv_gid_entry" ibv_gid_entry { gid, gid_index, port_num, gid_type, ndev_ifindex }
        "struct ibv_pd" ibv_pd { context, handle }
        "struct ibv_mr" ibv_mr { context, pd, addr, length, handle, lkey, rkey }
        "struct ibv_comp_channel" ibv_comp_channel { context, fd, refcnt }
        "struct ibv_cq" ibv_cq {
            context, channel, cq_context, handle, cqe, mutex, cond, comp_events_completed, async_events_completed,
        }
        "struct ibv_srq" ibv_srq { context, srq_context, pd, handle, mutex, cond, events_completed }
        "struct ibv_qp" ibv_qp {
            context, qp_context, pd, send_cq, recv_cq, srq, handle, qp_num, state, qp_type, mutex, cond,
            events_completed,
        }
        "struct ibv_ah" ibv_ah { context, pd, handle }
        "struct ibv_global_route" ibv_global_route { dgid, flow_label, sgid_index, hop_limit, traffic_class }
        "struct ibv_ah_attr" ibv_ah_attr { grh, dlid, sl, src_path_bits, static_rate, is_global, port_num }
        "struct ibv_qp_cap" ibv_qp_cap { max_send_wr, max_recv_wr, max_send_sge, max_recv_sge, max_inline_data }
        "struct ibv_qp_init_attr" ibv_qp_init_attr { qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all }
        "struct ibv_qp_init_attr_ex" ibv_qp_init_attr_ex {
            qp_context, send_cq, recv_cq, srq, cap, qp_type, sq_sig_all, comp_mask, pd, xrcd,
            _rest => "create_flags",
        }
        "struct ibv_qp_attr" ibv_qp_attr {
            qp_state, cur_qp_state, path_mtu, path_mig_state, qkey, rq_psn, sq_psn, dest_qp_num, qp_access_flags,
            cap, ah_attr, alt_ah_attr, pkey_index, alt_pkey_index, en_sqd_async_notify, sq_draining,
            max_rd_atomic, max_dest_rd_atomic, min_rnr_timer, port_num, timeout, retry_cnt, rnr_retry,
            alt_port_num, alt_timeout, rate_limit,
        }
        "struct ibv_sge" ibv_sge { addr, length, lkey }
        "struct ibv_send_wr" ibv_send_wr {
            wr_id, next, sg_list, num_sge, opcode, send_flags, imm_data, wr, qp_type,
            _bind_mw_tso => "bind_mw",
        }
        "struct ibv_recv_wr" ibv_recv_wr { wr_id, next, sg_list, num_sge }
        "struct ibv_wc" ibv_wc {
            wr_id, status, opcode, vendor_err, byte_len, imm_data, qp_num, src_qp, wc_flags, pkey_index, slid, sl,
            dlid_path_bits,
        }
        "struct ibv_srq_attr" ibv_srq_attr { max_wr, max_sge, srq_limit }
        "struct ibv_srq_init_attr" ibv_srq_init_attr { srq_context, attr }
        "struct ibv_async_event" ibv_async_event { element, event_type }
    }
}

/// Offsets inside `ibv_send_wr.wr`, which the Rust side models as `wr.rdma` plus padding.
fn send_wr_members() -> Vec<(&'static str, usize)> {
    vec![
        (
            "wr.rdma.remote_addr",
            offset_of!(ibv_send_wr, wr.rdma.remote_addr),
        ),
        ("wr.rdma.rkey", offset_of!(ibv_send_wr, wr.rdma.rkey)),
        ("qp_type.xrc.remote_srqn", offset_of!(ibv_send_wr, qp_type)),
    ]
}

macro_rules! consts {
    ($($name:ident),* $(,)?) => { vec![$((stringify!($name), $name as i64)),*] };
}

fn constants() -> Vec<(&'static str, i64)> {
    consts![
        IBV_NODE_CA,
        IBV_TRANSPORT_IB,
        IBV_LINK_LAYER_ETHERNET,
        IBV_PORT_ACTIVE,
        IBV_PORT_CM_SUP,
        IBV_PORT_IP_BASED_GIDS,
        IBV_ATOMIC_NONE,
        IBV_MTU_256,
        IBV_MTU_1024,
        IBV_MTU_4096,
        IBV_GID_TYPE_ROCE_V2,
        IBV_QPT_RC,
        IBV_QPS_RESET,
        IBV_QPS_INIT,
        IBV_QPS_RTR,
        IBV_QPS_RTS,
        IBV_QPS_SQD,
        IBV_QPS_SQE,
        IBV_QPS_ERR,
        IBV_QP_STATE,
        IBV_QP_CUR_STATE,
        IBV_QP_EN_SQD_ASYNC_NOTIFY,
        IBV_QP_ACCESS_FLAGS,
        IBV_QP_PKEY_INDEX,
        IBV_QP_PORT,
        IBV_QP_QKEY,
        IBV_QP_AV,
        IBV_QP_PATH_MTU,
        IBV_QP_TIMEOUT,
        IBV_QP_RETRY_CNT,
        IBV_QP_RNR_RETRY,
        IBV_QP_RQ_PSN,
        IBV_QP_MAX_QP_RD_ATOMIC,
        IBV_QP_ALT_PATH,
        IBV_QP_MIN_RNR_TIMER,
        IBV_QP_SQ_PSN,
        IBV_QP_MAX_DEST_RD_ATOMIC,
        IBV_QP_PATH_MIG_STATE,
        IBV_QP_CAP,
        IBV_QP_DEST_QPN,
        IBV_QP_RATE_LIMIT,
        IBV_QP_INIT_ATTR_PD,
        IBV_ACCESS_LOCAL_WRITE,
        IBV_ACCESS_REMOTE_WRITE,
        IBV_ACCESS_REMOTE_READ,
        IBV_ACCESS_REMOTE_ATOMIC,
        IBV_ACCESS_MW_BIND,
        IBV_ACCESS_ZERO_BASED,
        IBV_ACCESS_ON_DEMAND,
        IBV_ACCESS_HUGETLB,
        IBV_ACCESS_OPTIONAL_RANGE,
        IBV_QP_EX_WITH_RDMA_WRITE,
        IBV_QP_EX_WITH_RDMA_WRITE_WITH_IMM,
        IBV_SEND_FENCE,
        IBV_SEND_SIGNALED,
        IBV_SEND_SOLICITED,
        IBV_SEND_INLINE,
        IBV_WR_RDMA_WRITE,
        IBV_WR_RDMA_WRITE_WITH_IMM,
        IBV_WR_SEND,
        IBV_WR_SEND_WITH_IMM,
        IBV_WR_RDMA_READ,
        IBV_WC_SEND,
        IBV_WC_RDMA_WRITE,
        IBV_WC_RDMA_READ,
        IBV_WC_RECV,
        IBV_WC_RECV_RDMA_WITH_IMM,
        IBV_WC_WITH_IMM,
        IBV_EVENT_QP_FATAL,
        IBV_EVENT_CQ_ERR,
    ]
}

fn probe_source(structs: &[Struct], consts: &[(&str, i64)]) -> String {
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include <infiniband/verbs.h>\nint main(void) {\n",
    );
    for s in structs {
        let _ = writeln!(
            c,
            "printf(\"S {} %zu\\n\", sizeof({}));",
            s.c_type, s.c_type
        );
        for f in &s.fields {
            let _ = writeln!(
                c,
                "printf(\"F {}.{} %zu %zu\\n\", offsetof({}, {}), sizeof((({}*)0)->{}));",
                s.c_type, f.c, s.c_type, f.c, s.c_type, f.c
            );
        }
    }
    for (m, _) in send_wr_members() {
        let _ = writeln!(
            c,
            "printf(\"F struct ibv_send_wr.{m} %zu 0\\n\", offsetof(struct ibv_send_wr, {m}));"
        );
    }
    for (n, _) in consts {
        let _ = writeln!(c, "printf(\"C {n} %lld\\n\", (long long){n});");
    }
    c.push_str("return 0;\n}\n");
    c
}

#[test]
fn abi_types_match_the_installed_headers() {
    let structs = table();
    let consts = constants();
    let src = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("layout_probe.c");
    std::fs::write(&src, probe_source(&structs, &consts)).unwrap();
    if !std::path::Path::new("/usr/include/infiniband/verbs.h").exists() {
        panic!(
            "/usr/include/infiniband/verbs.h is missing: install the Debian package libibverbs-dev (.ci/run does, \
             as root)"
        );
    }
    let exe = src.with_extension("");
    let o = Command::new("cc")
        .arg("-o")
        .arg(&exe)
        .arg(&src)
        .output()
        .expect("run cc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let o = Command::new(&exe).output().expect("run the probe");
    let out = String::from_utf8(o.stdout).unwrap();

    let mut c_sizes = BTreeMap::new();
    let mut c_fields = BTreeMap::new();
    let mut c_consts = BTreeMap::new();
    for line in out.lines() {
        let (kind, rest) = line.split_at(2);
        let mut parts = rest.rsplitn(3, ' ');
        match kind {
            "S " => {
                let (name, size) = rest.rsplit_once(' ').unwrap();
                c_sizes.insert(name.to_string(), size.parse::<usize>().unwrap());
            }
            "F " => {
                let size: usize = parts.next().unwrap().parse().unwrap();
                let off: usize = parts.next().unwrap().parse().unwrap();
                c_fields.insert(parts.next().unwrap().to_string(), (off, size));
            }
            "C " => {
                let v: i64 = parts.next().unwrap().parse().unwrap();
                c_consts.insert(parts.next().unwrap().to_string(), v);
            }
            _ => panic!("probe line {line:?}"),
        }
    }

    let mut wrong = Vec::new();
    let mut checked = 0;
    for s in &structs {
        if c_sizes[s.c_type] != s.size {
            wrong.push(format!(
                "sizeof({}) C {} Rust {}",
                s.c_type, c_sizes[s.c_type], s.size
            ));
        }
        for f in &s.fields {
            let (off, size) = c_fields[&format!("{}.{}", s.c_type, f.c)];
            checked += 1;
            if off != f.offset || (f.rust == f.c && size != f.size) {
                wrong.push(format!(
                    "{}.{}: C offset {off} size {size}, Rust offset {} size {}",
                    s.c_type, f.c, f.offset, f.size
                ));
            }
        }
    }
    for (m, off) in send_wr_members() {
        let (c_off, _) = c_fields[&format!("struct ibv_send_wr.{m}")];
        if c_off != off {
            wrong.push(format!("ibv_send_wr.{m}: C offset {c_off}, Rust {off}"));
        }
    }
    for (n, v) in &consts {
        if c_consts[*n] != *v {
            wrong.push(format!("{n}: C {} Rust {v}", c_consts[*n]));
        }
    }
    assert!(wrong.is_empty(), "ABI mismatches:\n{}", wrong.join("\n"));
    assert!(checked > 250, "only {checked} fields compared");
    // The facts the shim's design rests on (verbs-nccl-abi.md §1.3).
    assert_eq!(offset_of!(verbs_context, context), 320);
    assert_eq!(size_of::<verbs_context>(), 648);
    assert_eq!(
        offset_of!(ibv_context, ops) + offset_of!(ibv_context_ops, post_send),
        208
    );
}
