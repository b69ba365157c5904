//! The bridge to libmrc's OCP C API (`capi/`, issue 15): how `libmrc.so` recognises the shim's verbs objects.
//!
//! The OCP API takes the application's `ibv_context` and `ibv_pd`, which come from this library (preloaded).
//! libmrc is a separate shared object, so it cannot share Rust types with the shim; it looks up
//! [`mrc_shim_bridge_v1`] with `dlsym` and calls the C functions of the table it returns. The table only grows
//! (new members at the end, `size` says how many there are), so an older libmrc keeps working with a newer
//! shim. Every function runs inside the shim's panic boundary and returns 0 or an errno value.
//!
//! Holding a context or PD counts as a user of it, so `ibv_close_device` and `ibv_dealloc_pd` refuse
//! (`EBUSY`) while an MRC context or QP still depends on it, as they do for the shim's own children.

use std::ffi::{c_char, c_int};
use std::sync::atomic::Ordering;
use std::time::Duration;

use crate::abi::{
    IBV_QPT_RC, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_cap,
    ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_wc,
};
use crate::context::context;
use crate::cq::Cq;
use crate::ffi::{Error, FFI};
use crate::pd::pd;
use crate::qp::Qp;
use crate::registry;

/// What libmrc learns about an open device.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MrcShimContextInfo {
    /// The device's index in `ibv_get_device_list` (stable for the process).
    pub device_index: u32,
    /// MRC planes (libmrc presents them as ports 1..=planes of the controller API).
    pub planes: u32,
    /// Non-zero when EVs are SRv6 uSIDs; zero when they are UDP source ports (plain mode).
    pub usid: u32,
    /// Port 1's LID (plane 0's UDP port).
    pub lid: u16,
    /// GID 0 (plane 0's address).
    pub gid: [u8; 16],
    /// The device name (`mrc0`, …), NUL-terminated.
    pub name: [c_char; 64],
}

/// The bridge's function table (version 1).
#[repr(C)]
pub struct MrcShimBridgeV1 {
    /// `size_of::<MrcShimBridgeV1>()` of the shim that filled it in.
    pub size: usize,
    /// Fills `info` for a live context of this shim; `EINVAL` for anything else.
    pub context_info: unsafe extern "C" fn(*mut ibv_context, *mut MrcShimContextInfo) -> c_int,
    /// Counts one more user of a live context (`ibv_close_device` then says `EBUSY`).
    pub context_hold: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    /// Undoes one `context_hold`.
    pub context_release: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    /// Counts one more user of a live PD and writes its context to `*ctx`.
    pub pd_hold: unsafe extern "C" fn(*mut ibv_pd, *mut *mut ibv_context) -> c_int,
    /// Undoes one `pd_hold`.
    pub pd_release: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    // ---- data path (libmrc's QPs and CQs are the shim's) ----
    /// `ibv_create_cq(ctx, cqe, NULL, NULL, 0)` into `*out`.
    pub create_cq: unsafe extern "C" fn(*mut ibv_context, c_int, *mut *mut ibv_cq) -> c_int,
    /// `ibv_destroy_cq`.
    pub destroy_cq: unsafe extern "C" fn(*mut ibv_cq) -> c_int,
    /// `ibv_poll_cq`: a count, or a negative errno value.
    pub poll_cq: unsafe extern "C" fn(*mut ibv_cq, c_int, *mut ibv_wc) -> c_int,
    /// An RC QP on `pd` with these CQs and caps (granted caps written back) into `*out`.
    pub create_qp: unsafe extern "C" fn(
        *mut ibv_pd,
        *mut ibv_cq,
        *mut ibv_cq,
        *mut ibv_qp_cap,
        c_int,
        *mut *mut ibv_qp,
    ) -> c_int,
    /// `ibv_modify_qp`.
    pub modify_qp: unsafe extern "C" fn(*mut ibv_qp, *mut ibv_qp_attr, c_int) -> c_int,
    /// `ibv_destroy_qp`.
    pub destroy_qp: unsafe extern "C" fn(*mut ibv_qp) -> c_int,
    /// `ibv_post_send`.
    pub post_send:
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int,
    /// `ibv_post_recv`.
    pub post_recv:
        unsafe extern "C" fn(*mut ibv_qp, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    // ---- controller (mrc-host's control.rs) ----
    /// Gives a QP in RESET explicit EVs (`n` engine EVs, plane in the low `plane_bits` bits, `active` per
    /// plane) when `n > 0`, and NSCC when `cc` is not NULL.
    pub qp_configure:
        unsafe extern "C" fn(*mut ibv_qp, *const u32, usize, u8, u16, *const MrcShimNscc) -> c_int,
    /// Denies (`denied != 0`) or allows an engine EV of a QP.
    pub ev_set_denied: unsafe extern "C" fn(*mut ibv_qp, u32, c_int) -> c_int,
    /// Packets sent on an engine EV of a QP so far into `*sent`.
    pub ev_sent: unsafe extern "C" fn(*mut ibv_qp, u32, *mut u64) -> c_int,
    /// Up to `n` EV state changes of the context's host: a count, or a negative errno value.
    pub poll_ev_event: unsafe extern "C" fn(*mut ibv_context, *mut MrcShimEvEvent, c_int) -> c_int,
    /// Probes `n` engine EVs toward the QP's peer, waiting up to `timeout_ns`; `rtt_ns[i]` is 0 where no answer came.
    pub probe_evs: unsafe extern "C" fn(*mut ibv_qp, *const u32, usize, u64, *mut u64) -> c_int,
    /// Takes plane `plane` (0-based) of the context's host down (`up == 0`) or up.
    pub set_port: unsafe extern "C" fn(*mut ibv_context, u8, c_int) -> c_int,
    // ---- completion channels (libmrc relays their events to its own channels) ----
    /// A completion channel with a non-blocking fd into `*out`.
    pub create_comp_channel:
        unsafe extern "C" fn(*mut ibv_context, *mut *mut ibv_comp_channel) -> c_int,
    /// `ibv_destroy_comp_channel`.
    pub destroy_comp_channel: unsafe extern "C" fn(*mut ibv_comp_channel) -> c_int,
    /// `ibv_create_cq(ctx, cqe, NULL, channel, 0)` into `*out`.
    pub create_cq_on: unsafe extern "C" fn(
        *mut ibv_context,
        c_int,
        *mut ibv_comp_channel,
        *mut *mut ibv_cq,
    ) -> c_int,
    /// `ibv_req_notify_cq`.
    pub req_notify_cq: unsafe extern "C" fn(*mut ibv_cq, c_int) -> c_int,
    /// Waits up to `timeout_ms` for a CQ event, acknowledges it and writes its CQ to `*out`: 0, `EAGAIN` when
    /// none came, another errno value on failure.
    pub take_cq_event:
        unsafe extern "C" fn(*mut ibv_comp_channel, c_int, *mut *mut ibv_cq) -> c_int,
    // ---- asynchronous events (libmrc's QPs and CQs, ports) and the EV-event queue's descriptor ----
    /// Writes the descriptor that is readable once per queued libmrc event (non-blocking; poll it, then call
    /// `poll_async_event`) and the context's verbs `async_fd` (whose O_NONBLOCK flag libmrc follows).
    pub async_fds: unsafe extern "C" fn(*mut ibv_context, *mut c_int, *mut c_int) -> c_int,
    /// Up to `n` asynchronous events of the bridge's QPs and CQs and of the ports: a count, or a negative
    /// errno value.
    pub poll_async_event:
        unsafe extern "C" fn(*mut ibv_context, *mut MrcShimAsyncEvent, c_int) -> c_int,
    /// Writes a descriptor that is readable while EV events are queued (`poll_ev_event`).
    pub ev_event_fd: unsafe extern "C" fn(*mut ibv_context, *mut c_int) -> c_int,
    /// Writes how many EV events the host dropped so far because its queue was full.
    pub ev_events_dropped: unsafe extern "C" fn(*mut ibv_context, *mut u64) -> c_int,
    /// Puts engine EV `new` in the place of `old` in a live QP (`Host::replace_ev`).
    pub ev_replace: unsafe extern "C" fn(*mut ibv_qp, u32, u32) -> c_int,
    /// Sends the QP's peer `n` PORT_STATUS reports, report `i` on engine EV `evs[i]` saying `masks[i]` (bit p =
    /// plane p up), and waits up to `timeout_ns`; `rtt_ns[i]` is 0 where no answer came (`Host::send_port_status`).
    pub port_status:
        unsafe extern "C" fn(*mut ibv_qp, *const u32, *const u32, usize, u64, *mut u64) -> c_int,
}

/// An asynchronous event for libmrc: verbs' `enum ibv_event_type`, and the `ibv_qp` / `ibv_cq` it concerns
/// (QP and CQ events) or the port, 1-based (`IBV_EVENT_PORT_ACTIVE`, `IBV_EVENT_PORT_ERR`: a plane came up or
/// went down).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MrcShimAsyncEvent {
    /// `enum ibv_event_type`.
    pub event_type: u32,
    /// The port (port events).
    pub port: u32,
    /// The `ibv_qp` or `ibv_cq` (QP and CQ events), else NULL.
    pub element: *mut std::ffi::c_void,
}

/// NSCC parameters in the engine's units.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MrcShimNscc {
    /// Unloaded round-trip time.
    pub base_rtt_ns: u64,
    /// Queuing delay steered to.
    pub target_delay_ns: u64,
    /// Largest window in bytes; 0: the engine's default.
    pub max_cwnd: u64,
    /// Proportional increase gain.
    pub eta: f64,
    /// Fair increase (MTUs per RTT).
    pub fi: f64,
    /// Multiplicative decrease gain.
    pub gamma: f64,
    /// Cap on one decrease (0..=1].
    pub max_md_jump: f64,
    /// Quick adapt on (non-zero) or off.
    pub qa_enabled: u8,
}

/// An EV state change (engine EV; states 0 GOOD, 1 SKIP, 2 ASSUMED_BAD, 3 DENIED).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub struct MrcShimEvEvent {
    /// The QP.
    pub qpn: u32,
    /// The engine EV.
    pub ev: u32,
    /// Its plane (0-based).
    pub plane: u8,
    /// State before.
    pub from: u8,
    /// State after.
    pub to: u8,
}

fn errno_of(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno,
    }
}

unsafe extern "C" fn context_info(ctx: *mut ibv_context, info: *mut MrcShimContextInfo) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.context_info", || {
        // "Is this an MRC device?" is a normal question for libmrc to ask: no log line for "no".
        let c = context(ctx).map_err(|e| Error::quiet(e.errno))?;
        if info.is_null() {
            return Err(Error::inval("info is NULL"));
        }
        let mut name = [0 as c_char; 64];
        for (d, s) in name.iter_mut().zip(c.dev.cfg.name.bytes().take(63)) {
            *d = s as c_char;
        }
        let out = MrcShimContextInfo {
            device_index: u32::try_from(c.dev.index).unwrap_or(u32::MAX),
            planes: u32::try_from(c.dev.cfg.node.planes.len()).unwrap_or(u32::MAX),
            usid: u32::from(c.dev.cfg.node.usid_block.is_some()),
            lid: c.lid(),
            gid: c.gid().raw,
            name,
        };
        // SAFETY: `info` is non-NULL and, by the bridge's contract, points at a writable `MrcShimContextInfo`.
        unsafe { info.write(out) };
        Ok(())
    }))
}

unsafe extern "C" fn context_hold(ctx: *mut ibv_context) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.context_hold", || {
        let c = context(ctx)?;
        c.users.add();
        c.holds.add();
        c.host.router().bridge_users.fetch_add(1, Ordering::AcqRel);
        Ok(())
    }))
}

unsafe extern "C" fn context_release(ctx: *mut ibv_context) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.context_release", || {
        let c = context(ctx)?;
        c.holds.sub();
        c.users.sub();
        c.host.router().bridge_users.fetch_sub(1, Ordering::AcqRel);
        Ok(())
    }))
}

unsafe extern "C" fn pd_hold(p: *mut ibv_pd, ctx: *mut *mut ibv_context) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.pd_hold", || {
        let p = pd(p, "pd")?;
        if ctx.is_null() {
            return Err(Error::inval("ctx is NULL"));
        }
        p.users.add();
        // SAFETY: `ctx` is non-NULL and points at a writable pointer (the bridge's contract); the PD's C
        // struct is live, so reading its `context` member is sound.
        unsafe { ctx.write((*p.raw()).context) };
        Ok(())
    }))
}

unsafe extern "C" fn pd_release(p: *mut ibv_pd) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.pd_release", || {
        pd(p, "pd")?.users.sub();
        Ok(())
    }))
}

fn count_of(r: Result<c_int, Error>) -> c_int {
    r.unwrap_or_else(|e| -e.errno)
}

fn out_ptr<T>(p: *mut T, what: &str) -> Result<(), Error> {
    if p.is_null() {
        return Err(Error::inval(format!("{what} is NULL")));
    }
    Ok(())
}

unsafe extern "C" fn create_cq(ctx: *mut ibv_context, cqe: c_int, out: *mut *mut ibv_cq) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.create_cq", || {
        out_ptr(out, "out")?;
        context(ctx)?;
        // SAFETY: a live context of ours; no channel.
        let cq = unsafe {
            crate::cq::ibv_create_cq(ctx, cqe, std::ptr::null_mut(), std::ptr::null_mut(), 0)
        };
        if cq.is_null() {
            return Err(Error::quiet(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            ));
        }
        context(ctx)?.host.router().set_bridged(cq as usize, true);
        // SAFETY: `out` is non-NULL and writable (the bridge's contract).
        unsafe { out.write(cq) };
        Ok(())
    }))
}

unsafe extern "C" fn destroy_cq(cq: *mut ibv_cq) -> c_int {
    // SAFETY: the shim validates `cq`.
    unsafe { crate::cq::ibv_destroy_cq(cq) }
}

unsafe extern "C" fn poll_cq(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    // SAFETY: the registry check makes sure `cq` is a live CQ of ours.
    if let Err(e) = unsafe { registry::get::<Cq>(cq, "cq") } {
        return -e.errno;
    }
    // SAFETY: checked above; `wc` holds `n` entries (the bridge's contract).
    unsafe { crate::cq::poll_cq_op(cq, n, wc) }
}

unsafe extern "C" fn create_qp(
    pd: *mut ibv_pd,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    cap: *mut ibv_qp_cap,
    sq_sig_all: c_int,
    out: *mut *mut ibv_qp,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.create_qp", || {
        out_ptr(out, "out")?;
        out_ptr(cap, "cap")?;
        // SAFETY: non-NULL, readable and writable (the bridge's contract).
        let c = unsafe { &mut *cap };
        let mut init = ibv_qp_init_attr {
            qp_context: std::ptr::null_mut(),
            send_cq,
            recv_cq,
            srq: std::ptr::null_mut(),
            cap: *c,
            qp_type: IBV_QPT_RC,
            sq_sig_all,
        };
        // SAFETY: the shim validates the PD and CQs.
        let qp = unsafe { crate::qp::ibv_create_qp(pd, &mut init) };
        if qp.is_null() {
            return Err(Error::quiet(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            ));
        }
        *c = init.cap;
        // SAFETY: a live QP of ours: its context is the PD's, live.
        context(unsafe { (*qp).context })?
            .host
            .router()
            .set_bridged(qp as usize, true);
        // SAFETY: as above.
        unsafe { out.write(qp) };
        Ok(())
    }))
}

unsafe extern "C" fn modify_qp(qp: *mut ibv_qp, attr: *mut ibv_qp_attr, mask: c_int) -> c_int {
    // SAFETY: the shim validates its arguments.
    unsafe { crate::qp::ibv_modify_qp(qp, attr, mask) }
}

unsafe extern "C" fn destroy_qp(qp: *mut ibv_qp) -> c_int {
    // SAFETY: the shim validates `qp`.
    unsafe { crate::qp::ibv_destroy_qp(qp) }
}

unsafe extern "C" fn post_send(
    qp: *mut ibv_qp,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    // SAFETY: the registry check makes sure `qp` is a live QP of ours.
    if let Err(e) = unsafe { registry::get::<Qp>(qp, "qp") } {
        return e.errno;
    }
    // SAFETY: checked above; the work requests are the caller's (the bridge's contract).
    unsafe { crate::qp::post_send_op(qp, wr, bad) }
}

unsafe extern "C" fn post_recv(
    qp: *mut ibv_qp,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    // SAFETY: as in `post_send`.
    if let Err(e) = unsafe { registry::get::<Qp>(qp, "qp") } {
        return e.errno;
    }
    // SAFETY: as in `post_send`.
    unsafe { crate::qp::post_recv_op(qp, wr, bad) }
}

/// The host and the engine QPN of a live QP of ours.
fn qp_host<'a>(qp: *mut ibv_qp) -> Result<(&'a mrc_host::Host, u32), Error> {
    // SAFETY: the registry check makes sure `qp` is a live QP of ours.
    unsafe { registry::get::<Qp>(qp, "qp") }?;
    // SAFETY: checked live above, so its C struct can be read.
    let (ctx, qpn) = unsafe { ((*qp).context, (*qp).qp_num) };
    Ok((context(ctx)?.host.host(), qpn))
}

fn host_err(what: &str, e: mrc_host::HostError) -> Error {
    Error::new(e.errno(), format!("{what}: {e}"))
}

unsafe extern "C" fn qp_configure(
    qp: *mut ibv_qp,
    evs: *const u32,
    n: usize,
    plane_bits: u8,
    active: u16,
    cc: *const MrcShimNscc,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.qp_configure", || {
        let (h, qpn) = qp_host(qp)?;
        let explicit = if n > 0 {
            out_ptr(evs.cast_mut(), "evs")?;
            // SAFETY: `evs` holds `n` values (the bridge's contract).
            let v = unsafe { std::slice::from_raw_parts(evs, n) }.to_vec();
            Some(mrc_host::ExplicitEvs {
                evs: v,
                plane_bits,
                active_per_plane: active,
            })
        } else {
            None
        };
        // SAFETY: NULL or a readable `MrcShimNscc` (the bridge's contract).
        let cc = unsafe { cc.as_ref() }.map(|c| {
            let n = mrc::cc::NsccConfig {
                base_rtt: Duration::from_nanos(c.base_rtt_ns),
                target_delay: Duration::from_nanos(c.target_delay_ns),
                max_cwnd: (c.max_cwnd > 0).then_some(c.max_cwnd),
                eta: c.eta,
                fi: c.fi,
                gamma: c.gamma,
                max_md_jump: c.max_md_jump,
                qa_enabled: c.qa_enabled != 0,
                ..Default::default()
            };
            mrc::cc::CcConfig::Nscc(n)
        });
        h.configure_qp(qpn, explicit.as_ref(), cc)
            .map_err(|e| host_err("configuring the QP", e))
    }))
}

unsafe extern "C" fn ev_set_denied(qp: *mut ibv_qp, ev: u32, denied: c_int) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.ev_set_denied", || {
        let (h, qpn) = qp_host(qp)?;
        h.set_ev_denied(qpn, ev, denied != 0)
            .map_err(|e| host_err("denying an EV", e))
    }))
}

unsafe extern "C" fn ev_sent(qp: *mut ibv_qp, ev: u32, sent: *mut u64) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.ev_sent", || {
        out_ptr(sent, "sent")?;
        let (h, qpn) = qp_host(qp)?;
        let n = h
            .ev_infos(qpn)
            .iter()
            .find(|i| i.ev == ev)
            .map(|i| i.stats.sent)
            .ok_or_else(|| Error::inval(format!("EV {ev:#x} is not the QP's")))?;
        // SAFETY: non-NULL and writable (the bridge's contract).
        unsafe { sent.write(n) };
        Ok(())
    }))
}

fn state_code(s: mrc::EvState) -> u8 {
    match s {
        mrc::EvState::Good => 0,
        mrc::EvState::Skip => 1,
        mrc::EvState::AssumedBad => 2,
        mrc::EvState::Denied => 3,
        // A state a newer engine adds reads as not usable.
        _ => 2,
    }
}

unsafe extern "C" fn poll_ev_event(
    ctx: *mut ibv_context,
    out: *mut MrcShimEvEvent,
    n: c_int,
) -> c_int {
    count_of(FFI.guard("mrc_shim_bridge.poll_ev_event", || {
        let h = context(ctx)?.host.host();
        let n = usize::try_from(n).map_err(|_| Error::inval("n is negative"))?;
        if n > 0 {
            out_ptr(out, "out")?;
        }
        let mut got = 0;
        while got < n {
            let Some(e) = h.poll_ev_event() else { break };
            // SAFETY: `out` holds `n` entries (the bridge's contract).
            unsafe {
                out.add(got).write(MrcShimEvEvent {
                    qpn: e.qpn,
                    ev: e.ev,
                    plane: e.plane,
                    from: state_code(e.from),
                    to: state_code(e.to),
                })
            };
            got += 1;
        }
        Ok(got as c_int)
    }))
}

unsafe extern "C" fn probe_evs(
    qp: *mut ibv_qp,
    evs: *const u32,
    n: usize,
    timeout_ns: u64,
    rtt_ns: *mut u64,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.probe_evs", || {
        let (h, qpn) = qp_host(qp)?;
        if n == 0 {
            return Ok(());
        }
        out_ptr(evs.cast_mut(), "evs")?;
        out_ptr(rtt_ns, "rtt_ns")?;
        // SAFETY: `evs` holds `n` values (the bridge's contract).
        let v = unsafe { std::slice::from_raw_parts(evs, n) };
        let r = h
            .probe_evs(qpn, v, Duration::from_nanos(timeout_ns))
            .map_err(|e| host_err("probing EVs", e))?;
        for (i, d) in r.iter().enumerate() {
            let ns = d.map_or(0, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
            });
            // SAFETY: `rtt_ns` holds `n` entries (the bridge's contract).
            unsafe { rtt_ns.add(i).write(ns) };
        }
        Ok(())
    }))
}

unsafe extern "C" fn set_port(ctx: *mut ibv_context, plane: u8, up: c_int) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.set_port", || {
        context(ctx)?
            .host
            .host()
            .set_port(plane, up != 0)
            .map_err(|e| host_err("setting a port", e))
    }))
}

unsafe extern "C" fn create_comp_channel(
    ctx: *mut ibv_context,
    out: *mut *mut ibv_comp_channel,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.create_comp_channel", || {
        out_ptr(out, "out")?;
        context(ctx)?;
        // SAFETY: a live context of ours.
        let ch = unsafe { crate::cq::ibv_create_comp_channel(ctx) };
        if ch.is_null() {
            return Err(Error::quiet(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            ));
        }
        // SAFETY: a live channel: its fd is ours to make non-blocking; `out` is writable.
        unsafe {
            let fd = (*ch).fd;
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
            out.write(ch);
        }
        Ok(())
    }))
}

unsafe extern "C" fn destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    // SAFETY: the shim validates `ch`.
    unsafe { crate::cq::ibv_destroy_comp_channel(ch) }
}

unsafe extern "C" fn create_cq_on(
    ctx: *mut ibv_context,
    cqe: c_int,
    ch: *mut ibv_comp_channel,
    out: *mut *mut ibv_cq,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.create_cq_on", || {
        out_ptr(out, "out")?;
        context(ctx)?;
        // SAFETY: the shim validates the context and channel.
        let cq = unsafe { crate::cq::ibv_create_cq(ctx, cqe, std::ptr::null_mut(), ch, 0) };
        if cq.is_null() {
            return Err(Error::quiet(
                std::io::Error::last_os_error()
                    .raw_os_error()
                    .unwrap_or(libc::EIO),
            ));
        }
        context(ctx)?.host.router().set_bridged(cq as usize, true);
        // SAFETY: `out` is writable (the bridge's contract).
        unsafe { out.write(cq) };
        Ok(())
    }))
}

unsafe extern "C" fn req_notify_cq(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    // SAFETY: the registry check makes sure `cq` is a live CQ of ours.
    if let Err(e) = unsafe { registry::get::<Cq>(cq, "cq") } {
        return e.errno;
    }
    // SAFETY: checked above.
    unsafe { crate::cq::req_notify_cq_op(cq, solicited_only) }
}

unsafe extern "C" fn take_cq_event(
    ch: *mut ibv_comp_channel,
    timeout_ms: c_int,
    out: *mut *mut ibv_cq,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.take_cq_event", || {
        out_ptr(out, "out")?;
        // SAFETY: the registry check makes sure `ch` is a live channel of ours.
        unsafe { registry::get::<crate::cq::Channel>(ch, "channel") }?;
        // SAFETY: checked live above.
        let fd = unsafe { (*ch).fd };
        let mut p = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: polls one live descriptor.
        if unsafe { libc::poll(&mut p, 1, timeout_ms) } <= 0 {
            return Err(Error::quiet(libc::EAGAIN));
        }
        let (mut cq, mut cq_ctx) = (std::ptr::null_mut(), std::ptr::null_mut());
        // SAFETY: a live channel and writable locals; its fd is non-blocking (create_comp_channel).
        if unsafe { crate::cq::ibv_get_cq_event(ch, &mut cq, &mut cq_ctx) } != 0 {
            return Err(Error::quiet(libc::EAGAIN));
        }
        // SAFETY: the CQ the event named; acknowledged at once, since libmrc keeps its own count.
        unsafe {
            crate::cq::ibv_ack_cq_events(cq, 1);
            out.write(cq);
        }
        Ok(())
    }))
}

unsafe extern "C" fn async_fds(
    ctx: *mut ibv_context,
    bridge_fd: *mut c_int,
    verbs_fd: *mut c_int,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.async_fds", || {
        out_ptr(bridge_fd, "bridge_fd")?;
        out_ptr(verbs_fd, "verbs_fd")?;
        let c = context(ctx)?;
        // SAFETY: both are non-NULL and writable (the bridge's contract).
        unsafe {
            bridge_fd.write(c.host.router().bridge_fd());
            verbs_fd.write(c.host.event_fd());
        }
        Ok(())
    }))
}

unsafe extern "C" fn poll_async_event(
    ctx: *mut ibv_context,
    out: *mut MrcShimAsyncEvent,
    n: c_int,
) -> c_int {
    count_of(FFI.guard("mrc_shim_bridge.poll_async_event", || {
        let c = context(ctx)?;
        let n = usize::try_from(n).map_err(|_| Error::inval("n is negative"))?;
        if n > 0 {
            out_ptr(out, "out")?;
        }
        let mut got = 0;
        while got < n {
            let Some(e) = c.host.router().next_bridge_event() else {
                break;
            };
            // SAFETY: `out` holds `n` entries (the bridge's contract).
            unsafe {
                out.add(got).write(MrcShimAsyncEvent {
                    event_type: e.event_type,
                    port: u32::from(e.port),
                    element: e.element as *mut std::ffi::c_void,
                })
            };
            got += 1;
        }
        Ok(got as c_int)
    }))
}

unsafe extern "C" fn ev_event_fd(ctx: *mut ibv_context, fd: *mut c_int) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.ev_event_fd", || {
        out_ptr(fd, "fd")?;
        let f = context(ctx)?
            .host
            .host()
            .ev_event_fd()
            .ok_or_else(|| Error::new(libc::EMFILE, "no eventfd for the EV-event queue"))?;
        // SAFETY: non-NULL and writable (the bridge's contract).
        unsafe { fd.write(f) };
        Ok(())
    }))
}

unsafe extern "C" fn ev_events_dropped(ctx: *mut ibv_context, n: *mut u64) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.ev_events_dropped", || {
        out_ptr(n, "n")?;
        let d = context(ctx)?.host.host().ev_events_dropped();
        // SAFETY: non-NULL and writable (the bridge's contract).
        unsafe { n.write(d) };
        Ok(())
    }))
}

unsafe extern "C" fn ev_replace(qp: *mut ibv_qp, old: u32, new: u32) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.ev_replace", || {
        let (h, qpn) = qp_host(qp)?;
        h.replace_ev(qpn, old, new)
            .map_err(|e| host_err("replacing an EV", e))
    }))
}

unsafe extern "C" fn port_status(
    qp: *mut ibv_qp,
    evs: *const u32,
    masks: *const u32,
    n: usize,
    timeout_ns: u64,
    rtt_ns: *mut u64,
) -> c_int {
    errno_of(FFI.guard("mrc_shim_bridge.port_status", || {
        let (h, qpn) = qp_host(qp)?;
        if n == 0 {
            return Ok(());
        }
        out_ptr(evs.cast_mut(), "evs")?;
        out_ptr(masks.cast_mut(), "masks")?;
        out_ptr(rtt_ns, "rtt_ns")?;
        // SAFETY: `evs` and `masks` hold `n` values each (the bridge's contract).
        let (e, m) = unsafe {
            (
                std::slice::from_raw_parts(evs, n),
                std::slice::from_raw_parts(masks, n),
            )
        };
        let reports: Vec<(u32, u32)> = e.iter().copied().zip(m.iter().copied()).collect();
        let r = h
            .send_port_status(qpn, &reports, Duration::from_nanos(timeout_ns))
            .map_err(|e| host_err("sending port status", e))?;
        for (i, d) in r.iter().enumerate() {
            let ns = d.map_or(0, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
            });
            // SAFETY: `rtt_ns` holds `n` entries (the bridge's contract).
            unsafe { rtt_ns.add(i).write(ns) };
        }
        Ok(())
    }))
}

static BRIDGE: MrcShimBridgeV1 = MrcShimBridgeV1 {
    size: size_of::<MrcShimBridgeV1>(),
    context_info,
    context_hold,
    context_release,
    pd_hold,
    pd_release,
    create_cq,
    destroy_cq,
    poll_cq,
    create_qp,
    modify_qp,
    destroy_qp,
    post_send,
    post_recv,
    qp_configure,
    ev_set_denied,
    ev_sent,
    poll_ev_event,
    probe_evs,
    set_port,
    create_comp_channel,
    destroy_comp_channel,
    create_cq_on,
    req_notify_cq,
    take_cq_event,
    async_fds,
    poll_async_event,
    ev_event_fd,
    ev_events_dropped,
    ev_replace,
    port_status,
};

/// The bridge table; libmrc finds this function with `dlsym(RTLD_DEFAULT, "mrc_shim_bridge_v1")`.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_shim_bridge_v1() -> *const MrcShimBridgeV1 {
    &BRIDGE
}
