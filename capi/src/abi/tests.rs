//! Every mirror against the table measured from the OCP headers (`tests/layout/ocp-1.0.1*.txt`).

use super::*;
use std::collections::BTreeMap;
use std::mem::{align_of, offset_of, size_of};

fn table(name: &str) -> BTreeMap<String, String> {
    let path = format!("{}/tests/layout/{name}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            // "field struct x.y 4 2" -> ("field struct x.y", "4 2"); "size struct x 20" -> ("size struct x", "20")
            let words: Vec<&str> = l.split(' ').collect();
            let n = if words[0] == "field" { 2 } else { 1 };
            let (k, v) = words.split_at(words.len() - n);
            (k.join(" "), v.join(" "))
        })
        .collect()
}

fn size_of_field<T, F>(_: fn(&T) -> &F) -> usize {
    size_of::<F>()
}

/// `(key, value)` lines as the C probe prints them, from the Rust mirrors.
macro_rules! s {
    ($out:ident, $c:literal, $t:ty) => {
        $out.push((format!("size {}", $c), size_of::<$t>().to_string()));
        $out.push((format!("align {}", $c), align_of::<$t>().to_string()));
    };
}
macro_rules! f {
    ($out:ident, $c:literal, $t:ty, $($f:ident).+) => {
        $out.push((
            format!("field {}.{}", $c, stringify!($($f).+).replace(' ', "")),
            format!("{} {}", offset_of!($t, $($f).+), size_of_field(|s: &$t| &s.$($f).+)),
        ));
    };
}
macro_rules! c {
    ($out:ident, $name:ident) => {
        $out.push((
            format!("const {}", stringify!($name)),
            (($name as i64) as u32).to_string(),
        ));
    };
}

fn rust_lines() -> Vec<(String, String)> {
    let mut o = Vec::new();
    mrc_h_lines(&mut o);
    ctl_device_lines(&mut o);
    ctl_ev_profile_lines(&mut o);
    ctl_cc_and_event_lines(&mut o);
    constant_lines(&mut o);
    o
}

/// The structures of `mrc.h`.
fn mrc_h_lines(o: &mut Vec<(String, String)>) {
    s!(o, "struct mrc_device_attr", mrc_device_attr);
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        mrc_protocol_version
    );
    f!(o, "struct mrc_device_attr", mrc_device_attr, wimm_attr);
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        wimm_attr.max_wimm
    );
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        wimm_attr.max_wimm_dest
    );
    f!(o, "struct mrc_device_attr", mrc_device_attr, mpr_attr);
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        mpr_attr.max_mpr
    );
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        mpr_attr.mpr_resolution
    );
    f!(o, "struct mrc_device_attr", mrc_device_attr, qp_attr);
    f!(
        o,
        "struct mrc_device_attr",
        mrc_device_attr,
        qp_attr.max_qp_hint
    );
    f!(o, "struct mrc_device_attr", mrc_device_attr, cap);
    s!(o, "struct mrc_context_attr", mrc_context_attr);
    f!(
        o,
        "struct mrc_context_attr",
        mrc_context_attr,
        mrc_api_version_used
    );
    f!(
        o,
        "struct mrc_context_attr",
        mrc_context_attr,
        mrc_vendor_api_version_used
    );
    s!(o, "struct mrc_qp_hint_attr", mrc_qp_hint_attr);
    f!(
        o,
        "struct mrc_qp_hint_attr",
        mrc_qp_hint_attr,
        num_qps_per_peer
    );
    f!(
        o,
        "struct mrc_qp_hint_attr",
        mrc_qp_hint_attr,
        num_send_peers
    );
    f!(
        o,
        "struct mrc_qp_hint_attr",
        mrc_qp_hint_attr,
        num_remote_recv_peers
    );
    f!(o, "struct mrc_qp_hint_attr", mrc_qp_hint_attr, vendor_cfg);
    s!(o, "struct mrc_qp_hint_init_attr", mrc_qp_hint_init_attr);
    f!(
        o,
        "struct mrc_qp_hint_init_attr",
        mrc_qp_hint_init_attr,
        attr
    );
    s!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, qp_context);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, send_cq);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, recv_cq);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, cap);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, sq_sig_all);
    f!(o, "struct mrc_qp_init_attr", mrc_qp_init_attr, pd);
    f!(
        o,
        "struct mrc_qp_init_attr",
        mrc_qp_init_attr,
        send_ops_flags
    );
    f!(
        o,
        "struct mrc_qp_init_attr",
        mrc_qp_init_attr,
        protocol_version
    );
    s!(o, "struct mrc_qp_attr", mrc_qp_attr);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, mpr);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, mpr.mpr);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, mpr.mpr_dest);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, wimm);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, wimm.max_wimm);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, wimm.max_wimm_dest);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, timeout);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, profile);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, profile.ev_profile_id);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, profile.cc_profile_id);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, retry);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, retry.linear_cnt);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, retry.exp_cnt);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, qp_hint);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, cap);
    f!(o, "struct mrc_qp_attr", mrc_qp_attr, vendor_cfg);
    s!(o, "struct mrc_async_event", mrc_async_event);
    f!(o, "struct mrc_async_event", mrc_async_event, element);
    f!(o, "struct mrc_async_event", mrc_async_event, event_type);
}

/// `mrc_ctl.h`: device, port, EV format profile, EV and EV operation entry.
fn ctl_device_lines(o: &mut Vec<(String, String)>) {
    s!(o, "struct mrc_ctl_device_attr", mrc_ctl_device_attr);
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        mrc_ctl_protocol_version
    );
    f!(o, "struct mrc_ctl_device_attr", mrc_ctl_device_attr, ev);
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_max_fmt_profiles
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_max_profiles
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_max_count
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_free_count
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_max_count_profile
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_count_align
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_max_width
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_fmt_mode_mask
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_mode_mask
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        ev.ev_op_max_entries
    );
    f!(o, "struct mrc_ctl_device_attr", mrc_ctl_device_attr, cc);
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        cc.cc_max_profiles
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        cc.algorithms
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        phy_port_mask
    );
    f!(
        o,
        "struct mrc_ctl_device_attr",
        mrc_ctl_device_attr,
        opt_attr
    );
    s!(o, "struct mrc_ctl_port_attr", mrc_ctl_port_attr);
    f!(
        o,
        "struct mrc_ctl_port_attr",
        mrc_ctl_port_attr,
        port_admin_state
    );
    s!(o, "struct mrc_ctl_ev_fmt_field", mrc_ctl_ev_fmt_field);
    f!(
        o,
        "struct mrc_ctl_ev_fmt_field",
        mrc_ctl_ev_fmt_field,
        width
    );
    s!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        profile_state
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        cur_profile_state
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        ev_fmt_mode
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        ev_fmt_op
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        ev_fmt_op.op
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        ev_fmt_op.fmt_fields
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        ev_fmt_op.fmt_field_count
    );
    f!(
        o,
        "struct mrc_ctl_ev_fmt_profile_attr",
        mrc_ctl_ev_fmt_profile_attr,
        vendor_cfg
    );
    s!(o, "mrc_ctl_ev_t", mrc_ctl_ev_t);
    s!(o, "struct mrc_ctl_ev", mrc_ctl_ev);
    f!(o, "struct mrc_ctl_ev", mrc_ctl_ev, val);
    f!(o, "struct mrc_ctl_ev", mrc_ctl_ev, port);
    s!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field);
    f!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field, width);
    f!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field, init_val);
    f!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field, min_val);
    f!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field, max_val);
    f!(o, "struct mrc_ctl_ev_field", mrc_ctl_ev_field, mask);
    s!(o, "struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry);
    f!(o, "struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry, ev);
    f!(o, "struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry, ev_new);
    f!(o, "struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry, state);
    f!(o, "struct mrc_ctl_ev_op_entry", mrc_ctl_ev_op_entry, flags);
}

/// `mrc_ctl.h`: the EV profile.
fn ctl_ev_profile_lines(o: &mut Vec<(String, String)>) {
    s!(o, "struct mrc_ctl_ev_profile_attr", mrc_ctl_ev_profile_attr);
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        profile_state
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        cur_profile_state
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_mode
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_fmt_profile_id
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_count
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_min_active
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_event_mask
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_op
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_op.op
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_op.entries
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_op.entry_count
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_fields_op
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_fields_op.op
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_fields_op.fields
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        ev_fields_op.field_count
    );
    f!(
        o,
        "struct mrc_ctl_ev_profile_attr",
        mrc_ctl_ev_profile_attr,
        vendor_cfg
    );
}

/// `mrc_ctl.h`: CC profiles, NSCC parameters, EV events, endpoint requests.
fn ctl_cc_and_event_lines(o: &mut Vec<(String, String)>) {
    s!(o, "struct mrc_ctl_cc_profile_attr", mrc_ctl_cc_profile_attr);
    f!(
        o,
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        profile_state
    );
    f!(
        o,
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        cur_profile_state
    );
    f!(
        o,
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        algorithm
    );
    f!(
        o,
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        cc_config
    );
    f!(
        o,
        "struct mrc_ctl_cc_profile_attr",
        mrc_ctl_cc_profile_attr,
        vendor_cfg
    );
    s!(o, "struct mrc_ctl_cc_nscc_cfg", mrc_ctl_cc_nscc_cfg);
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        disable_qa
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        adjust_bytes_threshold
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        adjust_period_threshold
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        base_rtt
    );
    f!(o, "struct mrc_ctl_cc_nscc_cfg", mrc_ctl_cc_nscc_cfg, eta);
    f!(o, "struct mrc_ctl_cc_nscc_cfg", mrc_ctl_cc_nscc_cfg, fi);
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        fi_scale
    );
    f!(o, "struct mrc_ctl_cc_nscc_cfg", mrc_ctl_cc_nscc_cfg, gamma);
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        max_md_jump
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        max_cwnd
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        qa_gate
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        qa_threshold
    );
    f!(
        o,
        "struct mrc_ctl_cc_nscc_cfg",
        mrc_ctl_cc_nscc_cfg,
        target_delay
    );
    s!(o, "struct mrc_ctl_ev_event", mrc_ctl_ev_event);
    f!(o, "struct mrc_ctl_ev_event", mrc_ctl_ev_event, profile_id);
    f!(o, "struct mrc_ctl_ev_event", mrc_ctl_ev_event, ev);
    f!(o, "struct mrc_ctl_ev_event", mrc_ctl_ev_event, drop_count);
    f!(o, "struct mrc_ctl_ev_event", mrc_ctl_ev_event, state);
    s!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, req_id);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, sgid);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, dgid);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, ev_fmt_mode);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, req_ev);
    f!(o, "struct mrc_ctl_ep_req", mrc_ctl_ep_req, op);
    s!(o, "struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp);
    f!(o, "struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp, req_id);
    f!(o, "struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp, port);
    f!(o, "struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp, rtt);
    f!(o, "struct mrc_ctl_ep_rsp", mrc_ctl_ep_rsp, adj_svc_time);
}

/// Every constant of both headers.
fn constant_lines(o: &mut Vec<(String, String)>) {
    c!(o, MRC_MAX_VENDOR_CFG_SIZE);
    c!(o, MRC_API_CURRENT_VERSION);
    c!(o, MRC_VENDOR_API_CURRENT_VERSION);
    c!(o, MRC_PROTOCOL_VERSION_0);
    c!(o, MRC_PROTOCOL_VERSION_1);
    c!(o, MRC_DEVICE_CAP_TRIM_NACK);
    c!(o, MRC_DEVICE_CAP_DYNAMIC_MPR);
    c!(o, MRC_DEVICE_CAP_SVC_TIME);
    c!(o, MRC_QP_HINT_NUM_QPS_PER_PEER);
    c!(o, MRC_QP_HINT_NUM_SEND_PEERS);
    c!(o, MRC_QP_HINT_NUM_REMOTE_RECV_PEERS);
    c!(o, MRC_QP_HINT_VENDOR_CFG);
    c!(o, MRC_QP_MAX_WIMM);
    c!(o, MRC_QP_MAX_WIMM_DEST);
    c!(o, MRC_QP_MPR);
    c!(o, MRC_QP_MPR_DEST);
    c!(o, MRC_QP_TIMEOUT);
    c!(o, MRC_QP_EV_PROFILE_ID);
    c!(o, MRC_QP_CC_PROFILE_ID);
    c!(o, MRC_QP_HINT);
    c!(o, MRC_QP_RETRY_CNT);
    c!(o, MRC_QP_CAP);
    c!(o, MRC_QP_VENDOR_CFG);
    c!(o, MRC_QP_CAP_TRIM_NACK_DEST_UNSUPPORTED);
    c!(o, MRC_QP_CAP_DYNAMIC_MPR);
    c!(o, MRC_QP_CAP_SVC_TIME_DEST_UNSUPPORTED);
    c!(o, MRC_CTL_MAX_VENDOR_CFG_SIZE);
    c!(o, MRC_CTL_EV_MAX_BYTES);
    c!(o, MRC_CTL_API_CURRENT_VERSION);
    c!(o, MRC_CTL_VENDOR_API_CURRENT_VERSION);
    c!(o, MRC_CTL_PROTOCOL_VERSION_0);
    c!(o, MRC_CTL_PROTOCOL_VERSION_1);
    c!(o, MRC_CTL_PROFILE_INIT);
    c!(o, MRC_CTL_PROFILE_OFFLINE);
    c!(o, MRC_CTL_PROFILE_ONLINE);
    c!(o, MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE);
    c!(o, MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE);
    c!(o, MRC_CTL_OPT_CAP_EV_EVENT);
    c!(o, MRC_CTL_OPT_CAP_EV_EXPLICIT_RANGE);
    c!(o, MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT);
    c!(o, MRC_CTL_OPT_CAP_EP_OP_EV_PROBE);
    c!(o, MRC_CTL_PORT_ADMIN_DISABLED);
    c!(o, MRC_CTL_PORT_ADMIN_ENABLED);
    c!(o, MRC_CTL_PORT_ADMIN_STATE);
    c!(o, MRC_CTL_EV_FMT_MODE_STEV);
    c!(o, MRC_CTL_EV_FMT_MODE_SRV6);
    c!(o, MRC_CTL_EV_FMT_MODE_UDP);
    c!(o, MRC_CTL_EV_FMT_OP_MODIFY_FIELDS);
    c!(o, MRC_CTL_EV_FMT_OP_QUERY_FIELDS);
    c!(o, MRC_CTL_EV_FMT_PROFILE_STATE);
    c!(o, MRC_CTL_EV_FMT_PROFILE_CUR_STATE);
    c!(o, MRC_CTL_EV_FMT_PROFILE_MODE);
    c!(o, MRC_CTL_EV_FMT_PROFILE_OP);
    c!(o, MRC_CTL_EV_FMT_VENDOR_CFG);
    c!(o, MRC_CTL_EV_GOOD);
    c!(o, MRC_CTL_EV_ASSUMED_BAD);
    c!(o, MRC_CTL_EV_DENIED);
    c!(o, MRC_CTL_EV_UNKNOWN);
    c!(o, MRC_CTL_EV_MODE_AUTO);
    c!(o, MRC_CTL_EV_MODE_EXP);
    c!(o, MRC_CTL_EV_MODE_GEN);
    c!(o, MRC_CTL_EV_OP_REPLACE_EV);
    c!(o, MRC_CTL_EV_OP_MODIFY_EV_STATE);
    c!(o, MRC_CTL_EV_OP_QUERY_EV_STATE);
    c!(o, MRC_CTL_EV_OP_QUERY_EV_ARRAY);
    c!(o, MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS);
    c!(o, MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS);
    c!(o, MRC_CTL_EV_PROFILE_STATE);
    c!(o, MRC_CTL_EV_PROFILE_CUR_STATE);
    c!(o, MRC_CTL_EV_PROFILE_MODE);
    c!(o, MRC_CTL_EV_PROFILE_FMT_ID);
    c!(o, MRC_CTL_EV_PROFILE_COUNT);
    c!(o, MRC_CTL_EV_PROFILE_MIN_ACTIVE);
    c!(o, MRC_CTL_EV_PROFILE_EVENT_MASK);
    c!(o, MRC_CTL_EV_PROFILE_EV_OP);
    c!(o, MRC_CTL_EV_PROFILE_EV_FIELDS_OP);
    c!(o, MRC_CTL_EV_PROFILE_VENDOR_CFG);
    c!(o, MRC_CTL_EV_OP_F_ALL_COPIES);
    c!(o, MRC_CTL_CC_PROFILE_STATE);
    c!(o, MRC_CTL_CC_PROFILE_CUR_STATE);
    c!(o, MRC_CTL_CC_PROFILE_ALGORITHM);
    c!(o, MRC_CTL_CC_PROFILE_CONFIG);
    c!(o, MRC_CTL_CC_PROFILE_VENDOR_CFG);
    c!(o, MRC_CTL_EP_OP_EV_PROBE);
    c!(o, MRC_CTL_EP_OP_PORT_STATUS_UPDATE);
}

#[test]
fn rust_mirrors_match_the_ocp_table() {
    let t = table("ocp-1.0.1.txt");
    let mine = rust_lines();
    let mut bad = Vec::new();
    for (k, v) in &mine {
        match t.get(k) {
            Some(tv) if tv == v => {}
            Some(tv) => bad.push(format!("{k}: Rust {v}, OCP {tv}")),
            None => bad.push(format!("{k}: not in the OCP table")),
        }
    }
    assert!(bad.is_empty(), "layout differences:\n{}", bad.join("\n"));
    // Every OCP structure has a mirror here (enums are plain integers in Rust).
    let have: std::collections::BTreeSet<&str> = mine.iter().map(|(k, _)| k.as_str()).collect();
    let missing: Vec<&String> = t
        .keys()
        .filter(|k| k.starts_with("size struct") && !have.contains(k.as_str()))
        .collect();
    assert!(missing.is_empty(), "no Rust mirror for {missing:?}");
    assert!(mine.len() > 250, "{} lines checked", mine.len());
}

#[test]
fn the_1_0_0_event_matches_the_table_built_for_it() {
    let t = table("ocp-1.0.1-ctl-1.0.0.txt");
    assert_eq!(
        t["size struct mrc_ctl_ev_event"],
        size_of::<mrc_ctl_ev_event_1_0_0>().to_string()
    );
    assert_eq!(
        t["field struct mrc_ctl_ev_event.drop_count"],
        format!("{} 4", offset_of!(mrc_ctl_ev_event_1_0_0, drop_count))
    );
}
