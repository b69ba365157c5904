//! The way into mrc-verbs-shim's objects: the application's `ibv_context` and `ibv_pd` come from the shim
//! (preloaded), which exports `mrc_shim_bridge_v1` (`shim/src/bridge.rs`). libmrc finds it with `dlsym` at
//! first use, so it never links the shim (whose `ibv_*` exports would then come along twice) and works with
//! whichever copy the process loaded. Without the shim there are no MRC devices: queries say "unsupported" and
//! creating a context fails with `ENODEV`.

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

use std::ffi::c_void;

use crate::abi::{ibv_context, ibv_pd, ibv_qp_attr, ibv_qp_cap, ibv_recv_wr, ibv_send_wr, ibv_wc};
use crate::ffi::Error;

/// Mirror of the shim's `MrcShimContextInfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContextInfo {
    pub(crate) device_index: u32,
    pub(crate) planes: u32,
    pub(crate) usid: u32,
    pub(crate) lid: u16,
    pub(crate) gid: [u8; 16],
    pub(crate) name: [c_char; 64],
}

/// Mirror of the shim's `MrcShimBridgeV1`.
#[repr(C)]
pub(crate) struct Table {
    size: usize,
    context_info: unsafe extern "C" fn(*mut ibv_context, *mut ContextInfo) -> c_int,
    context_hold: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    context_release: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    pd_hold: unsafe extern "C" fn(*mut ibv_pd, *mut *mut ibv_context) -> c_int,
    pd_release: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
    create_cq: unsafe extern "C" fn(*mut ibv_context, c_int, *mut *mut c_void) -> c_int,
    destroy_cq: unsafe extern "C" fn(*mut c_void) -> c_int,
    poll_cq: unsafe extern "C" fn(*mut c_void, c_int, *mut ibv_wc) -> c_int,
    create_qp: unsafe extern "C" fn(
        *mut ibv_pd,
        *mut c_void,
        *mut c_void,
        *mut ibv_qp_cap,
        c_int,
        *mut *mut c_void,
    ) -> c_int,
    modify_qp: unsafe extern "C" fn(*mut c_void, *mut ibv_qp_attr, c_int) -> c_int,
    destroy_qp: unsafe extern "C" fn(*mut c_void) -> c_int,
    post_send: unsafe extern "C" fn(*mut c_void, *mut ibv_send_wr, *mut *mut ibv_send_wr) -> c_int,
    post_recv: unsafe extern "C" fn(*mut c_void, *mut ibv_recv_wr, *mut *mut ibv_recv_wr) -> c_int,
    qp_configure:
        unsafe extern "C" fn(*mut c_void, *const u32, usize, u8, u16, *const Nscc) -> c_int,
    ev_set_denied: unsafe extern "C" fn(*mut c_void, u32, c_int) -> c_int,
    ev_sent: unsafe extern "C" fn(*mut c_void, u32, *mut u64) -> c_int,
    poll_ev_event: unsafe extern "C" fn(*mut ibv_context, *mut EvEvent, c_int) -> c_int,
    probe_evs: unsafe extern "C" fn(*mut c_void, *const u32, usize, u64, *mut u64) -> c_int,
    set_port: unsafe extern "C" fn(*mut ibv_context, u8, c_int) -> c_int,
    create_comp_channel: unsafe extern "C" fn(*mut ibv_context, *mut *mut c_void) -> c_int,
    destroy_comp_channel: unsafe extern "C" fn(*mut c_void) -> c_int,
    create_cq_on:
        unsafe extern "C" fn(*mut ibv_context, c_int, *mut c_void, *mut *mut c_void) -> c_int,
    req_notify_cq: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    take_cq_event: unsafe extern "C" fn(*mut c_void, c_int, *mut *mut c_void) -> c_int,
    async_fds: unsafe extern "C" fn(*mut ibv_context, *mut c_int, *mut c_int) -> c_int,
    poll_async_event: unsafe extern "C" fn(*mut ibv_context, *mut AsyncEvent, c_int) -> c_int,
    ev_event_fd: unsafe extern "C" fn(*mut ibv_context, *mut c_int) -> c_int,
    ev_events_dropped: unsafe extern "C" fn(*mut ibv_context, *mut u64) -> c_int,
    ev_replace: unsafe extern "C" fn(*mut c_void, u32, u32) -> c_int,
    port_status:
        unsafe extern "C" fn(*mut c_void, *const u32, *const u32, usize, u64, *mut u64) -> c_int,
}

/// Mirror of the shim's `MrcShimAsyncEvent`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct AsyncEvent {
    pub(crate) event_type: u32,
    pub(crate) port: u32,
    pub(crate) element: *mut c_void,
}

impl Default for AsyncEvent {
    fn default() -> Self {
        Self {
            event_type: 0,
            port: 0,
            element: std::ptr::null_mut(),
        }
    }
}

/// Mirror of the shim's `MrcShimNscc` (engine units).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Nscc {
    pub(crate) base_rtt_ns: u64,
    pub(crate) target_delay_ns: u64,
    pub(crate) max_cwnd: u64,
    pub(crate) eta: f64,
    pub(crate) fi: f64,
    pub(crate) gamma: f64,
    pub(crate) max_md_jump: f64,
    pub(crate) qa_enabled: u8,
}

/// Mirror of the shim's `MrcShimEvEvent` (states 0 GOOD, 1 SKIP, 2 ASSUMED_BAD, 3 DENIED).
#[repr(C)]
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct EvEvent {
    pub(crate) qpn: u32,
    pub(crate) ev: u32,
    pub(crate) plane: u8,
    pub(crate) from: u8,
    pub(crate) to: u8,
}

struct Found(Option<&'static Table>);
// SAFETY: the table is an immutable static of the shim; its functions are thread-safe.
unsafe impl Send for Found {}
// SAFETY: as above.
unsafe impl Sync for Found {}

static TABLE: OnceLock<Found> = OnceLock::new();

fn lookup() -> Found {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mrc_shim_bridge_v1".as_ptr()) };
    if sym.is_null() {
        return Found(None);
    }
    // SAFETY: the shim exports `mrc_shim_bridge_v1` as `extern "C" fn() -> *const MrcShimBridgeV1`.
    let f: extern "C" fn() -> *const Table = unsafe { std::mem::transmute(sym) };
    let t = f();
    // SAFETY: a non-NULL result points at the shim's static table, which lives as long as the process keeps
    // the shim loaded (a preload is never unloaded).
    match unsafe { t.as_ref() } {
        Some(t) if t.size >= size_of::<Table>() => Found(Some(t)),
        _ => Found(None),
    }
}

fn table() -> Option<&'static Table> {
    TABLE.get_or_init(lookup).0
}

fn no_shim() -> Error {
    Error::new(
        libc::ENODEV,
        "no MRC device: mrc-verbs-shim is not loaded (run with LD_PRELOAD=libmrc_verbs_shim.so)",
    )
}

fn result(rc: c_int, what: impl FnOnce() -> String) -> Result<(), Error> {
    match rc {
        0 => Ok(()),
        e => Err(Error::new(e, what())),
    }
}

/// The device behind a verbs context, or `None` if the context is not an MRC device's (or no shim).
pub(crate) fn context_info(ctx: *mut ibv_context) -> Option<ContextInfo> {
    let t = table()?;
    let mut info = std::mem::MaybeUninit::<ContextInfo>::uninit();
    // SAFETY: the shim checks `ctx` against its registry and writes a full `ContextInfo` on success.
    let rc = unsafe { (t.context_info)(ctx, info.as_mut_ptr()) };
    // SAFETY: rc == 0 means the shim wrote it.
    (rc == 0).then(|| unsafe { info.assume_init() })
}

/// Marks the verbs context as used by an MRC context (`ibv_close_device` then fails with `EBUSY`).
pub(crate) fn context_hold(ctx: *mut ibv_context) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `ctx`.
    result(unsafe { (t.context_hold)(ctx) }, || {
        "the verbs context is not an open mrc-verbs-shim device".into()
    })
}

/// Undoes [`context_hold`].
pub(crate) fn context_release(ctx: *mut ibv_context) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `ctx`; a held context cannot have been closed.
        unsafe { (t.context_release)(ctx) };
    }
}

/// Marks the PD as used by a QP and returns its verbs context.
pub(crate) fn pd_hold(pd: *mut ibv_pd) -> Result<*mut ibv_context, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: the shim validates `pd` and writes `ctx` on success.
    result(unsafe { (t.pd_hold)(pd, &mut ctx) }, || {
        "pd is not a live protection domain of mrc-verbs-shim".into()
    })?;
    Ok(ctx)
}

/// Undoes [`pd_hold`].
pub(crate) fn pd_release(pd: *mut ibv_pd) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `pd`; a held PD cannot have been freed.
        unsafe { (t.pd_release)(pd) };
    }
}

// ---- the data path and the controller (stage 2): shim objects by opaque pointer ----------------------------

fn errno(rc: c_int, what: &str) -> Result<(), Error> {
    result(rc, || format!("{what} failed in mrc-verbs-shim"))
}

/// A verbs CQ of the shim for an MRC CQ.
pub(crate) fn create_cq(ctx: *mut ibv_context, cqe: c_int) -> Result<*mut c_void, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut out = std::ptr::null_mut();
    // SAFETY: the shim validates `ctx`; `out` is a writable pointer.
    let rc = unsafe { (t.create_cq)(ctx, cqe, &mut out) };
    errno(rc, "creating the CQ")?;
    Ok(out)
}

/// Destroys a CQ of [`create_cq`].
pub(crate) fn destroy_cq(cq: *mut c_void) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `cq`.
        unsafe { (t.destroy_cq)(cq) };
    }
}

/// Polls a CQ of [`create_cq`] into `wc` (`n` entries).
pub(crate) fn poll_cq(cq: *mut c_void, n: c_int, wc: *mut ibv_wc) -> Result<c_int, Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `cq`; `wc` holds `n` entries (mrc_poll_cq's contract).
    let r = unsafe { (t.poll_cq)(cq, n, wc) };
    if r < 0 {
        return Err(Error::new(-r, "polling the CQ failed in mrc-verbs-shim"));
    }
    Ok(r)
}

/// A verbs RC QP of the shim; `cap` is updated to what was granted.
pub(crate) fn create_qp(
    pd: *mut ibv_pd,
    send_cq: *mut c_void,
    recv_cq: *mut c_void,
    cap: &mut ibv_qp_cap,
    sq_sig_all: c_int,
) -> Result<*mut c_void, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut out = std::ptr::null_mut();
    // SAFETY: the shim validates the objects; `cap` and `out` are writable.
    let rc = unsafe { (t.create_qp)(pd, send_cq, recv_cq, cap, sq_sig_all, &mut out) };
    errno(rc, "creating the QP")?;
    Ok(out)
}

/// `ibv_modify_qp` on a QP of [`create_qp`].
pub(crate) fn modify_qp(qp: *mut c_void, attr: &mut ibv_qp_attr, mask: c_int) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `qp`; `attr` is readable.
    errno(unsafe { (t.modify_qp)(qp, attr, mask) }, "modifying the QP")
}

/// Destroys a QP of [`create_qp`].
pub(crate) fn destroy_qp(qp: *mut c_void) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `qp`.
        unsafe { (t.destroy_qp)(qp) };
    }
}

/// `ibv_post_send` (a verbs errno value on failure; `bad` names the first request not posted).
pub(crate) fn post_send(
    qp: *mut c_void,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> c_int {
    match table() {
        // SAFETY: the shim validates `qp` and reads the caller's list.
        Some(t) => unsafe { (t.post_send)(qp, wr, bad) },
        None => libc::ENODEV,
    }
}

/// `ibv_post_recv`.
pub(crate) fn post_recv(
    qp: *mut c_void,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> c_int {
    match table() {
        // SAFETY: as in `post_send`.
        Some(t) => unsafe { (t.post_recv)(qp, wr, bad) },
        None => libc::ENODEV,
    }
}

/// Gives a QP in RESET explicit engine EVs and/or NSCC.
pub(crate) fn qp_configure(
    qp: *mut c_void,
    evs: &[u32],
    plane_bits: u8,
    active: u16,
    cc: Option<&Nscc>,
) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    let cc = cc.map_or(std::ptr::null(), |c| c as *const Nscc);
    // SAFETY: the shim validates `qp`; `evs` holds `evs.len()` values.
    let rc = unsafe { (t.qp_configure)(qp, evs.as_ptr(), evs.len(), plane_bits, active, cc) };
    errno(rc, "configuring the QP's EVs and congestion control")
}

/// Denies or allows an engine EV of a QP.
pub(crate) fn ev_set_denied(qp: *mut c_void, ev: u32, denied: bool) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `qp`.
    let rc = unsafe { (t.ev_set_denied)(qp, ev, c_int::from(denied)) };
    errno(rc, "denying or allowing the EV")
}

/// Up to `max` EV state changes of the device's host.
pub(crate) fn poll_ev_events(ctx: *mut ibv_context, max: usize) -> Result<Vec<EvEvent>, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut v = vec![EvEvent::default(); max];
    let n = c_int::try_from(max).unwrap_or(c_int::MAX);
    // SAFETY: the shim validates `ctx`; `v` holds `n` entries.
    let r = unsafe { (t.poll_ev_event)(ctx, v.as_mut_ptr(), n) };
    if r < 0 {
        return Err(Error::new(-r, "polling EV events failed in mrc-verbs-shim"));
    }
    v.truncate(r as usize);
    Ok(v)
}

/// Probes engine EVs toward a QP's peer: an RTT in ns per EV, 0 where none came back in `timeout_ns`.
pub(crate) fn probe_evs(qp: *mut c_void, evs: &[u32], timeout_ns: u64) -> Result<Vec<u64>, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut out = vec![0u64; evs.len()];
    // SAFETY: the shim validates `qp`; both slices hold `evs.len()` entries.
    let rc = unsafe { (t.probe_evs)(qp, evs.as_ptr(), evs.len(), timeout_ns, out.as_mut_ptr()) };
    errno(rc, "probing EVs")?;
    Ok(out)
}

/// Takes a plane (0-based) of the device's host down or up.
pub(crate) fn set_port(ctx: *mut ibv_context, plane: u8, up: bool) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `ctx`.
    let rc = unsafe { (t.set_port)(ctx, plane, c_int::from(up)) };
    errno(rc, "setting the port state")
}

/// Whether mrc-verbs-shim is loaded (with the data path).
pub(crate) fn available() -> bool {
    table().is_some()
}

/// A shim completion channel (non-blocking fd) whose events libmrc relays to its own channel.
pub(crate) fn create_comp_channel(ctx: *mut ibv_context) -> Result<*mut c_void, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut out = std::ptr::null_mut();
    // SAFETY: the shim validates `ctx`; `out` is writable.
    let rc = unsafe { (t.create_comp_channel)(ctx, &mut out) };
    errno(rc, "creating the completion channel")?;
    Ok(out)
}

/// Destroys a channel of [`create_comp_channel`].
pub(crate) fn destroy_comp_channel(ch: *mut c_void) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `ch`.
        unsafe { (t.destroy_comp_channel)(ch) };
    }
}

/// A shim CQ that reports to the shim channel `ch`.
pub(crate) fn create_cq_on(
    ctx: *mut ibv_context,
    cqe: c_int,
    ch: *mut c_void,
) -> Result<*mut c_void, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut out = std::ptr::null_mut();
    // SAFETY: the shim validates `ctx` and `ch`; `out` is writable.
    let rc = unsafe { (t.create_cq_on)(ctx, cqe, ch, &mut out) };
    errno(rc, "creating the CQ")?;
    Ok(out)
}

/// Arms a shim CQ.
pub(crate) fn req_notify_cq(cq: *mut c_void, solicited_only: bool) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `cq`.
    let rc = unsafe { (t.req_notify_cq)(cq, c_int::from(solicited_only)) };
    errno(rc, "arming the CQ")
}

/// The CQ of the next event on a shim channel within `timeout_ms` (acknowledged), or `None`.
pub(crate) fn take_cq_event(ch: *mut c_void, timeout_ms: c_int) -> Option<*mut c_void> {
    let t = table()?;
    let mut out = std::ptr::null_mut();
    // SAFETY: the shim validates `ch`; `out` is writable.
    let rc = unsafe { (t.take_cq_event)(ch, timeout_ms, &mut out) };
    (rc == 0).then_some(out)
}

/// The shim's descriptor for libmrc's asynchronous events (readable once per queued event) and the verbs
/// context's `async_fd`.
pub(crate) fn async_fds(ctx: *mut ibv_context) -> Result<(c_int, c_int), Error> {
    let t = table().ok_or_else(no_shim)?;
    let (mut b, mut v) = (-1, -1);
    // SAFETY: the shim validates `ctx`; both outputs are writable locals.
    let rc = unsafe { (t.async_fds)(ctx, &mut b, &mut v) };
    errno(rc, "finding the asynchronous events' descriptors")?;
    Ok((b, v))
}

/// Up to `max` asynchronous events of libmrc's QPs and CQs and of the ports.
pub(crate) fn poll_async_events(
    ctx: *mut ibv_context,
    max: usize,
) -> Result<Vec<AsyncEvent>, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut v = vec![AsyncEvent::default(); max];
    let n = c_int::try_from(max).unwrap_or(c_int::MAX);
    // SAFETY: the shim validates `ctx`; `v` holds `n` entries.
    let r = unsafe { (t.poll_async_event)(ctx, v.as_mut_ptr(), n) };
    if r < 0 {
        return Err(Error::new(
            -r,
            "polling asynchronous events failed in mrc-verbs-shim",
        ));
    }
    v.truncate(r as usize);
    Ok(v)
}

/// A descriptor readable while the device's host has EV events queued.
pub(crate) fn ev_event_fd(ctx: *mut ibv_context) -> Result<c_int, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut fd = -1;
    // SAFETY: the shim validates `ctx`; `fd` is a writable local.
    let rc = unsafe { (t.ev_event_fd)(ctx, &mut fd) };
    errno(rc, "finding the EV events' descriptor")?;
    Ok(fd)
}

/// EV events the device's host dropped so far (its queue was full).
pub(crate) fn ev_events_dropped(ctx: *mut ibv_context) -> Result<u64, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut n = 0;
    // SAFETY: the shim validates `ctx`; `n` is a writable local.
    let rc = unsafe { (t.ev_events_dropped)(ctx, &mut n) };
    errno(rc, "reading the dropped EV events")?;
    Ok(n)
}

/// Puts engine EV `new` in the place of `old` in a live QP.
pub(crate) fn ev_replace(qp: *mut c_void, old: u32, new: u32) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `qp`.
    let rc = unsafe { (t.ev_replace)(qp, old, new) };
    errno(rc, "replacing the EV")
}

/// Sends a QP's peer PORT_STATUS reports (`(engine EV, plane mask)` each): an RTT in ns per report, 0 where
/// none came back in `timeout_ns`.
pub(crate) fn port_status(
    qp: *mut c_void,
    reports: &[(u32, u32)],
    timeout_ns: u64,
) -> Result<Vec<u64>, Error> {
    let t = table().ok_or_else(no_shim)?;
    let evs: Vec<u32> = reports.iter().map(|r| r.0).collect();
    let masks: Vec<u32> = reports.iter().map(|r| r.1).collect();
    let mut out = vec![0u64; reports.len()];
    // SAFETY: the shim validates `qp`; the three slices hold `reports.len()` entries.
    let rc = unsafe {
        (t.port_status)(
            qp,
            evs.as_ptr(),
            masks.as_ptr(),
            reports.len(),
            timeout_ns,
            out.as_mut_ptr(),
        )
    };
    errno(rc, "sending port status")?;
    Ok(out)
}
