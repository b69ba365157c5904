//! The exported `mrc_ctl_*` entry points: argument decoding over the device's [`State`].

use super::*;

/// A caller's array as a slice: `count` elements at `p` (NULL only with 0).
///
/// # Safety
/// `p` must point at `count` writable elements when not NULL (the header's contract).
unsafe fn array<'a, T>(p: *mut T, count: c_int, what: &str) -> Result<&'a mut [T], Error> {
    let n = usize::try_from(count)
        .map_err(|_| Error::inval(format!("{what} count {count} is negative")))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::inval(format!("{what} is NULL with a count of {n}")));
    }
    // SAFETY: forwarded contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

fn ctl_attr_for(d: &Device) -> mrc_ctl_device_attr {
    let used = d.ctl().ev_used();
    mrc_ctl_device_attr {
        mrc_ctl_protocol_version: MRC_CTL_PROTOCOL_VERSION_1,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: limits::EV_MAX_FMT_PROFILES,
            ev_max_profiles: limits::EV_MAX_PROFILES,
            ev_max_count: limits::EV_MAX_COUNT,
            ev_free_count: limits::EV_MAX_COUNT - used,
            ev_max_count_profile: limits::EV_MAX_COUNT_PROFILE,
            ev_count_align: 1,
            ev_max_width: d.ev_max_width(),
            ev_fmt_mode_mask: d.fmt_modes(),
            ev_mode_mask: MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP,
            ev_op_max_entries: 0,
        },
        cc: mrc_ctl_device_attr_cc {
            cc_max_profiles: limits::CC_MAX_PROFILES,
            algorithms: ALGORITHMS.0.as_ptr(),
        },
        phy_port_mask: d.port_mask(),
        opt_attr: MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE
            | MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE
            | transport::ctl_opt_caps(),
    }
}

/// The controller view of a device; fails for a verbs device that is not MRC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device(
    context: *mut ibv_context,
    ctl_attr: *mut mrc_ctl_device_attr,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_device", || {
        non_null(context, "context")?;
        non_null(ctl_attr, "ctl_attr")?;
        let d = device_of(context).ok_or_else(|| {
            Error::new(
                libc::EOPNOTSUPP,
                "context is not an MRC device (libmrc's verbs devices are)",
            )
        })?;
        // SAFETY: non-NULL writable struct (the header's contract).
        unsafe { ctl_attr.write(ctl_attr_for(&d)) };
        Ok(())
    })
}

/// The controller view of a device, with `*supported` saying whether it is MRC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device_ex(
    context: *mut ibv_context,
    mcontext: *mut mrc_context,
    ctl_attr: *mut mrc_ctl_device_attr,
    supported: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_device_ex", || {
        non_null(context, "context")?;
        non_null(ctl_attr, "ctl_attr")?;
        non_null(supported, "supported")?;
        if !mcontext.is_null() && crate::context::context(mcontext)?.vctx != context {
            return Err(Error::inval(
                "mcontext was created on another verbs context",
            ));
        }
        let d = device_of(context);
        // SAFETY: non-NULL writable outputs (the header's contract).
        unsafe {
            match d {
                Some(d) => {
                    ctl_attr.write(ctl_attr_for(&d));
                    supported.write(1);
                }
                None => {
                    ctl_attr.write(std::mem::zeroed());
                    supported.write(0);
                }
            }
        }
        Ok(())
    })
}

/// The controller API revisions implemented. NULL outputs are skipped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_version(
    current_version: *mut u32,
    last_supported_version: *mut u32,
    vendor_version: *mut u32,
    last_supported_vendor_version: *mut u32,
) {
    FFI.void("mrc_ctl_query_version", || {
        for (p, v) in [
            (current_version, MRC_CTL_API_CURRENT_VERSION),
            (last_supported_version, mrc_api_ver(1, 0, 0)),
            (vendor_version, MRC_CTL_VENDOR_API_CURRENT_VERSION),
            (
                last_supported_vendor_version,
                MRC_CTL_VENDOR_API_CURRENT_VERSION,
            ),
        ] {
            if !p.is_null() {
                // SAFETY: non-NULL writable u32 (the header's contract).
                unsafe { p.write(v) };
            }
        }
        Ok(())
    })
}

/// A port's administrative state.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_port(
    mctx: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_port", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        check_mask("attr_mask", attr_mask, MRC_CTL_PORT_ADMIN_STATE)?;
        let ctl = c.dev.ctl();
        let i = ctl.port_index(port_num)?;
        if attr_mask & MRC_CTL_PORT_ADMIN_STATE != 0 {
            // SAFETY: non-NULL writable struct (the header's contract).
            unsafe { (*attr).port_admin_state = ctl.ports[i] };
        }
        Ok(())
    })
}

/// Enables or disables a port (an MRC plane). Stage 1 records it; the transport applies it in stage 2.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_port(
    mctx: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_port", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        check_mask("attr_mask", attr_mask, MRC_CTL_PORT_ADMIN_STATE)?;
        // SAFETY: non-NULL readable struct (the header's contract).
        let a = unsafe { attr.read() };
        let mut ctl = c.dev.ctl();
        let i = ctl.port_index(port_num)?;
        if attr_mask & MRC_CTL_PORT_ADMIN_STATE != 0 {
            if a.port_admin_state > MRC_CTL_PORT_ADMIN_ENABLED {
                return Err(Error::inval(format!(
                    "port_admin_state {} is neither DISABLED nor ENABLED",
                    a.port_admin_state
                )));
            }
            ctl.ports[i] = a.port_admin_state;
            drop(ctl);
            transport::set_port(c.vctx, i, a.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED)?;
        }
        Ok(())
    })
}

/// Configures an EV format profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_fmt_profile(
    mctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_ev_fmt_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        with_fmt_fields(a, attr_mask, |a, fields, count| {
            c.dev
                .ctl()
                .modify_fmt(ev_fmt_profile_id, a, attr_mask, fields, count)
        })
    })
}

/// Reads an EV format profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_fmt_profile(
    mctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_ev_fmt_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        with_fmt_fields(a, attr_mask, |a, fields, count| {
            c.dev
                .ctl()
                .query_fmt(ev_fmt_profile_id, a, attr_mask, fields, count)
        })
    })
}

/// Runs `f` with the field array of `a`'s format operation decoded (empty unless the mask names the operation);
/// writes the field count back.
fn with_fmt_fields(
    a: &mut mrc_ctl_ev_fmt_profile_attr,
    mask: c_int,
    f: impl FnOnce(
        &mut mrc_ctl_ev_fmt_profile_attr,
        &mut [mrc_ctl_ev_fmt_field],
        &mut c_int,
    ) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut count = a.ev_fmt_op.fmt_field_count;
    let fields = if mask & MRC_CTL_EV_FMT_PROFILE_OP != 0 {
        // SAFETY: the caller's array of `fmt_field_count` fields.
        unsafe { array(a.ev_fmt_op.fmt_fields, count, "ev_fmt_op.fmt_fields") }?
    } else {
        &mut []
    };
    let r = f(a, fields, &mut count);
    a.ev_fmt_op.fmt_field_count = count;
    r
}

/// Runs `f` with the EV and field operations of `a` decoded; writes the counts back.
fn with_ev_ops(
    a: &mut mrc_ctl_ev_profile_attr,
    mask: c_int,
    f: impl FnOnce(
        &mrc_ctl_ev_profile_attr,
        Option<EvOp<'_>>,
        Option<FieldsOp<'_>>,
    ) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut entry_count = a.ev_op.entry_count;
    let mut field_count = a.ev_fields_op.field_count;
    let ev_op = if mask & MRC_CTL_EV_PROFILE_EV_OP != 0 {
        if limits_exceeded(entry_count) {
            return Err(Error::new(
                libc::E2BIG,
                format!("ev_op.entry_count {entry_count} is too large"),
            ));
        }
        Some(EvOp {
            op: a.ev_op.op,
            // SAFETY: the caller's array of `entry_count` entries.
            entries: unsafe { array(a.ev_op.entries, entry_count, "ev_op.entries") }?,
            count_out: &mut entry_count,
        })
    } else {
        None
    };
    let fields_op = if mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        Some(FieldsOp {
            op: a.ev_fields_op.op,
            // SAFETY: the caller's array of `field_count` fields.
            fields: unsafe { array(a.ev_fields_op.fields, field_count, "ev_fields_op.fields") }?,
            count_out: &mut field_count,
        })
    } else {
        None
    };
    let r = f(a, ev_op, fields_op);
    a.ev_op.entry_count = entry_count;
    a.ev_fields_op.field_count = field_count;
    r
}

/// More entries than any profile holds twice over: surely a garbage count.
fn limits_exceeded(n: c_int) -> bool {
    i64::from(n) > 2 * i64::from(limits::EV_MAX_COUNT)
}

/// Configures an EV profile, or runs an EV operation on it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_profile(
    mctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_ev_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let r = with_ev_ops(a, attr_mask, |a, op, f| {
            c.dev.ctl().modify_ev(ev_profile_id, a, attr_mask, op, f)
        });
        // EV states (DENY) reach the live QPs that use the profile, also those an operation that stopped at a
        // bad entry changed before it.
        let synced = transport::ev_profile_changed(&c.dev, ev_profile_id);
        r.and(synced)
    })
}

/// Reads an EV profile, its EV array or EV states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_profile(
    mctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_ev_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let mut out = *a;
        let r = with_ev_ops(a, attr_mask, |_, op, f| {
            c.dev
                .ctl()
                .query_ev(ev_profile_id, &mut out, attr_mask, op, f)
        });
        // Keep the counts `with_ev_ops` wrote back; take the queried scalars.
        out.ev_op = a.ev_op;
        out.ev_fields_op = a.ev_fields_op;
        *a = out;
        r
    })
}

/// Configures a CC profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_cc_profile(
    mctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_cc_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL readable struct (the header's contract).
        let a = unsafe { attr.read() };
        let algorithm = if attr_mask & MRC_CTL_CC_PROFILE_ALGORITHM != 0 && !a.algorithm.is_null() {
            // SAFETY: a non-NULL algorithm is a NUL-terminated string (the header's contract).
            Some(unsafe { CStr::from_ptr(a.algorithm) })
        } else {
            None
        };
        let config = if attr_mask & MRC_CTL_CC_PROFILE_CONFIG != 0 && !a.cc_config.is_null() {
            // SAFETY: with NSCC, cc_config points at a `struct mrc_ctl_cc_nscc_cfg` (the header's contract);
            // read unaligned since it is the caller's memory.
            Some(unsafe { a.cc_config.cast::<mrc_ctl_cc_nscc_cfg>().read_unaligned() })
        } else {
            None
        };
        c.dev
            .ctl()
            .modify_cc(cc_profile_id, &a, attr_mask, algorithm, config)
    })
}

/// Reads a CC profile; with CONFIG, `cc_config` must point at a `struct mrc_ctl_cc_nscc_cfg` to fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_cc_profile(
    mctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_cc_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        if attr_mask & MRC_CTL_CC_PROFILE_CONFIG != 0 {
            non_null(a.cc_config, "cc_config")?;
        }
        let mut out = *a;
        let config = c.dev.ctl().query_cc(cc_profile_id, &mut out, attr_mask)?;
        if let Some(cfg) = config {
            // SAFETY: non-NULL (checked above) and, by this call's contract, a writable NSCC config.
            unsafe {
                a.cc_config
                    .cast::<mrc_ctl_cc_nscc_cfg>()
                    .cast_mut()
                    .write_unaligned(cfg)
            };
        }
        out.cc_config = a.cc_config;
        *a = out;
        Ok(())
    })
}

/// Polls EV events (through the transport); returns the count or a negative errno value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_poll_ev_event(
    ev_cq: *mut mrc_cq,
    num_entries: c_int,
    ev_event: *mut mrc_ctl_ev_event,
) -> c_int {
    FFI.neg_errno("mrc_ctl_poll_ev_event", || {
        let q = cq(ev_cq, "ev_cq")?;
        if q.kind != CqKind::EvEvents {
            return Err(Error::inval(
                "ev_cq is a work-completion CQ; create it with mrc_ctl_create_ev_event_cq",
            ));
        }
        if num_entries < 0 {
            return Err(Error::inval(format!(
                "num_entries {num_entries} is negative"
            )));
        }
        if num_entries > 0 {
            non_null(ev_event, "ev_event")?;
        }
        let events = crate::cq::take_ev_events(q, num_entries as usize);
        // The 1.0.1 layout: stage 2 picks the 1.0.0 one for programs built against it.
        for (i, e) in events.iter().enumerate() {
            // SAFETY: the caller's array holds `num_entries` events.
            unsafe { ev_event.add(i).write(*e) };
        }
        Ok(c_int::try_from(events.len().min(num_entries as usize)).unwrap_or(0))
    })
}

/// Sends endpoint requests (EV probes) and waits for the answers (through the transport).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_ep_batch_send_wait(
    mctx: *mut mrc_context,
    req_tc: u8,
    op_type: mrc_ctl_ep_op_type,
    req: *mut mrc_ctl_ep_req,
    num_req: c_int,
    rsp_timeout: u32,
    rsp: *mut mrc_ctl_ep_rsp,
    num_rsp: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_ep_batch_send_wait", || {
        let c = context(mctx)?;
        non_null(num_rsp, "num_rsp")?;
        // SAFETY: non-NULL writable int (the header's contract).
        unsafe { num_rsp.write(0) };
        if !matches!(
            op_type,
            MRC_CTL_EP_OP_EV_PROBE | MRC_CTL_EP_OP_PORT_STATUS_UPDATE
        ) {
            return Err(Error::inval(format!(
                "op_type {op_type} is not an endpoint operation"
            )));
        }
        if num_req < 1 {
            return Err(Error::inval(format!("num_req {num_req} is below 1")));
        }
        non_null(rsp, "rsp")?;
        if req_tc > 63 {
            return Err(Error::inval(format!(
                "req_tc {req_tc} is not a DSCP value (0..=63)"
            )));
        }
        // SAFETY: the caller's array of `num_req` requests.
        let reqs: &[mrc_ctl_ep_req] = unsafe { array(req, num_req, "req") }?;
        for (i, r) in reqs.iter().enumerate() {
            if r.ev_fmt_mode & c.dev.fmt_modes() == 0 || r.ev_fmt_mode.count_ones() != 1 {
                return Err(Error::inval(format!(
                    "req[{i}].ev_fmt_mode {:#x} is not a mode the device carries",
                    r.ev_fmt_mode
                )));
            }
            if !c.dev.has_port(u32::from(r.req_ev.port)) {
                return Err(Error::inval(format!(
                    "req[{i}].req_ev.port {} is not a port of the device",
                    r.req_ev.port
                )));
            }
            if op_type == MRC_CTL_EP_OP_PORT_STATUS_UPDATE {
                // SAFETY: the union's only member, plain data.
                let st = unsafe { r.op.port_status_update.port_status };
                if st == 0 || st & !c.dev.port_mask() != 0 {
                    return Err(Error::inval(format!(
                        "req[{i}].op.port_status_update.port_status {st:#x}: name the device's ports that \
                         are up (bits {:#x}), at least one",
                        c.dev.port_mask()
                    )));
                }
                if st >> r.req_ev.port & 1 == 0 {
                    return Err(Error::inval(format!(
                        "req[{i}]: the report travels on port {} but calls it down (the peer drops such a \
                         report as forged)",
                        r.req_ev.port
                    )));
                }
            }
        }
        let answers = transport::ep_batch(&c.dev, req_tc, op_type, reqs, rsp_timeout)?;
        let n = answers.len().min(reqs.len());
        for (i, a) in answers.iter().take(n).enumerate() {
            // SAFETY: `rsp` is sized for `num_req` responses (the header's contract).
            unsafe { rsp.add(i).write(*a) };
        }
        // SAFETY: as above.
        unsafe { num_rsp.write(c_int::try_from(n).unwrap_or(0)) };
        if n < reqs.len() {
            return Err(Error::new(
                libc::ETIMEDOUT,
                format!("{n} of {} answers arrived", reqs.len()),
            ));
        }
        Ok(())
    })
}
