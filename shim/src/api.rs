//! What libmrc (`capi/`, the OCP C API) uses of the verbs objects. libmrc links this crate, so `libmrc.so`
//! carries the `ibv_*` entry points too: the application's `ibv_context` and `ibv_pd` are objects of the same
//! copy of this crate that these functions check them against. A context or PD of another copy (this crate's
//! own `libmrc_verbs_shim.so`, preloaded as well) is not live here and is refused like any foreign pointer.
//!
//! Holding a context or PD counts as a user of it, so `ibv_close_device` and `ibv_dealloc_pd` refuse (`EBUSY`)
//! while an MRC context or QP still depends on it. CQs and QPs made here are marked as libmrc's: their
//! asynchronous events, the ports' events and the host's EV state changes go to libmrc's handler
//! ([`set_event_handler`]), called on the device's event thread, not to verbs' queue. The controller's calls
//! go to the device's [`mrc_host::Host`] ([`context_host`], [`qp_host`]).

use std::ffi::c_int;
use std::os::fd::RawFd;
use std::sync::OnceLock;

pub use mrc_ffi::boundary::Error;

use crate::abi::{
    IBV_QPT_RC, ibv_comp_channel, ibv_context, ibv_cq, ibv_pd, ibv_qp, ibv_qp_attr, ibv_qp_cap,
    ibv_qp_init_attr, ibv_recv_wr, ibv_send_wr, ibv_wc,
};
use crate::context::context;
use crate::cq::{self, Cq};
use crate::pd::pd;
use crate::qp::{self, Qp};
use crate::registry;

/// An open device as libmrc sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's index in `ibv_get_device_list` (stable for the process).
    pub device_index: u32,
    /// MRC planes (libmrc presents them as ports 1..=planes).
    pub planes: u32,
    /// EVs are SRv6 uSIDs (else UDP source ports).
    pub usid: bool,
    /// Port 1's LID (plane 0's UDP port).
    pub lid: u16,
    /// GID 0 (plane 0's address).
    pub gid: [u8; 16],
}

/// An asynchronous event of libmrc's CQs and QPs or of a port: verbs' `enum ibv_event_type` and the `ibv_cq` /
/// `ibv_qp` it names (an address, possibly gone by now), or the port, 1-based (a plane came up or went down).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsyncEvent {
    /// `enum ibv_event_type`.
    pub event_type: u32,
    /// The port (port events).
    pub port: u32,
    /// The `ibv_cq` or `ibv_qp` (CQ and QP events), else 0.
    pub element: usize,
}

/// What the device's event thread hands to libmrc.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Event {
    /// An asynchronous event of a CQ or QP of libmrc's, or of a port.
    Async(AsyncEvent),
    /// EV state changes of the host's QPs, and how many the host has dropped so far (its queue was full).
    Ev {
        /// The changes, oldest first.
        events: Vec<mrc_host::EvEvent>,
        /// The host's count of dropped changes.
        dropped: u64,
    },
}

/// libmrc's handler: device index and event.
pub type EventHandler = fn(u32, Event);

static HANDLER: OnceLock<EventHandler> = OnceLock::new();

/// Installs libmrc's event handler (the first call wins: there is one libmrc in a library). It runs on the
/// device's event thread: it must not wait for anything a verbs or host call made while holding its locks
/// would wait for.
pub fn set_event_handler(f: EventHandler) {
    let _ = HANDLER.set(f);
}

/// Hands an event of device `device` to libmrc's handler, if there is one.
pub(crate) fn deliver(device: u32, e: Event) {
    if let Some(f) = HANDLER.get() {
        f(device, e);
    }
}

/// The device behind a verbs context, or `None` if it is not a live context of this library.
pub fn device_info(ctx: *mut ibv_context) -> Option<DeviceInfo> {
    let c = context(ctx).ok()?;
    Some(DeviceInfo {
        device_index: u32::try_from(c.dev.index).unwrap_or(u32::MAX),
        planes: u32::try_from(c.dev.cfg.node.planes.len()).unwrap_or(u32::MAX),
        usid: c.dev.cfg.node.usid_block.is_some(),
        lid: c.lid(),
        gid: c.gid().raw,
    })
}

/// Counts one more user of a live context (`ibv_close_device` then says `EBUSY`).
pub fn hold_context(ctx: *mut ibv_context) -> Result<(), Error> {
    let c = context(ctx)?;
    c.users.add();
    c.holds.add();
    c.host.router().libmrc_user(true);
    Ok(())
}

/// Undoes [`hold_context`].
pub fn release_context(ctx: *mut ibv_context) -> Result<(), Error> {
    let c = context(ctx)?;
    c.holds.sub();
    c.users.sub();
    c.host.router().libmrc_user(false);
    Ok(())
}

/// Counts one more user of a live PD; returns its context.
pub fn hold_pd(p: *mut ibv_pd) -> Result<*mut ibv_context, Error> {
    let p = pd(p, "pd")?;
    p.users.add();
    // SAFETY: the PD is live, so reading its C struct's `context` member is sound.
    Ok(unsafe { (*p.raw()).context })
}

/// Undoes [`hold_pd`].
pub fn release_pd(p: *mut ibv_pd) -> Result<(), Error> {
    pd(p, "pd")?.users.sub();
    Ok(())
}

/// A CQ of `cqe` entries for libmrc, reporting to `channel` (NULL: none; else a channel of
/// [`create_comp_channel`]).
pub fn create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    channel: *mut ibv_comp_channel,
) -> Result<*mut ibv_cq, Error> {
    let q = cq::create(ctx, cqe, std::ptr::null_mut(), channel, 0)?;
    context(ctx)?.host.router().set_libmrc(q as usize, true);
    Ok(q)
}

/// `ibv_destroy_cq`.
pub fn destroy_cq(q: *mut ibv_cq) -> Result<(), Error> {
    cq::destroy(q)
}

/// `ibv_poll_cq`: up to `n` completions into `wc`.
///
/// # Safety
/// `wc` holds `n` writable entries.
pub unsafe fn poll_cq(q: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> Result<c_int, Error> {
    // SAFETY: the registry check makes sure `q` is a live CQ of ours.
    unsafe { registry::get::<Cq>(q, "cq") }?;
    // SAFETY: checked above; `wc` is the caller's.
    match unsafe { cq::poll_cq_op(q, n, wc) } {
        r if r < 0 => Err(Error::new(-r, "polling the CQ failed")),
        r => Ok(r),
    }
}

/// `ibv_req_notify_cq`.
pub fn req_notify_cq(q: *mut ibv_cq, solicited_only: bool) -> Result<(), Error> {
    cq::cq(q, "cq")?.host.req_notify(solicited_only);
    Ok(())
}

/// A completion channel whose fd is non-blocking (libmrc relays its events to its own channel).
pub fn create_comp_channel(ctx: *mut ibv_context) -> Result<*mut ibv_comp_channel, Error> {
    let ch = cq::create_channel(ctx)?;
    // SAFETY: a live channel: its fd is ours to make non-blocking.
    unsafe {
        let fd = (*ch).fd;
        libc::fcntl(
            fd,
            libc::F_SETFL,
            libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
        );
    }
    Ok(ch)
}

/// `ibv_destroy_comp_channel`.
pub fn destroy_comp_channel(ch: *mut ibv_comp_channel) -> Result<(), Error> {
    cq::destroy_channel(ch)
}

/// Waits for the next CQ event of a channel of [`create_comp_channel`], or until `wake` is readable: the
/// event's CQ, acknowledged (libmrc keeps its own count), or `None` when woken.
pub fn wait_cq_event(ch: *mut ibv_comp_channel, wake: RawFd) -> Result<Option<*mut ibv_cq>, Error> {
    let fd = cq::channel(ch, "channel")?.fd();
    loop {
        let mut p = [fd, wake].map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: polls two live descriptors (the caller keeps the channel and `wake` open meanwhile).
        if unsafe { libc::poll(p.as_mut_ptr(), 2, -1) } < 0 {
            continue;
        }
        if p[1].revents != 0 {
            return Ok(None);
        }
        // The channel's fd is non-blocking: an event another reader took first reads as EAGAIN.
        match cq::get_event(ch) {
            Ok(q) => {
                cq::ack_events(q, 1)?;
                return Ok(Some(q));
            }
            Err(e) if e.errno == libc::EAGAIN => {}
            Err(e) => return Err(e),
        }
    }
}

/// An RC QP on `pd` with these CQs; `cap` becomes what was granted. Returns the QP and its QPN (the engine's).
pub fn create_qp(
    pd: *mut ibv_pd,
    send_cq: *mut ibv_cq,
    recv_cq: *mut ibv_cq,
    cap: &mut ibv_qp_cap,
    sq_sig_all: bool,
) -> Result<(*mut ibv_qp, u32), Error> {
    let mut init = ibv_qp_init_attr {
        qp_context: std::ptr::null_mut(),
        send_cq,
        recv_cq,
        srq: std::ptr::null_mut(),
        cap: *cap,
        qp_type: IBV_QPT_RC,
        sq_sig_all: c_int::from(sq_sig_all),
    };
    let q = qp::create(pd, &mut init)?;
    *cap = init.cap;
    // SAFETY: a live QP of ours.
    let (ctx, qpn) = unsafe { ((*q).context, (*q).qp_num) };
    context(ctx)?.host.router().set_libmrc(q as usize, true);
    Ok((q, qpn))
}

/// `ibv_modify_qp`.
pub fn modify_qp(q: *mut ibv_qp, attr: &ibv_qp_attr, mask: c_int) -> Result<(), Error> {
    qp::modify(q, attr, mask)
}

/// `ibv_destroy_qp`.
pub fn destroy_qp(q: *mut ibv_qp) -> Result<(), Error> {
    qp::destroy(q)
}

/// `ibv_post_send`: 0 or a verbs errno value; `*bad` names the first request not posted.
///
/// # Safety
/// `wr` is a valid list of work requests, `bad` NULL or writable.
pub unsafe fn post_send(q: *mut ibv_qp, wr: *mut ibv_send_wr, bad: *mut *mut ibv_send_wr) -> c_int {
    // SAFETY: the registry check makes sure `q` is a live QP of ours.
    if let Err(e) = unsafe { registry::get::<Qp>(q, "qp") } {
        return e.errno;
    }
    // SAFETY: checked above; the list is the caller's.
    unsafe { qp::post_send_op(q, wr, bad) }
}

/// `ibv_post_recv`, as [`post_send`].
///
/// # Safety
/// As [`post_send`].
pub unsafe fn post_recv(q: *mut ibv_qp, wr: *mut ibv_recv_wr, bad: *mut *mut ibv_recv_wr) -> c_int {
    // SAFETY: the registry check makes sure `q` is a live QP of ours.
    if let Err(e) = unsafe { registry::get::<Qp>(q, "qp") } {
        return e.errno;
    }
    // SAFETY: checked above; the list is the caller's.
    unsafe { qp::post_recv_op(q, wr, bad) }
}

/// The host of a live context, for the controller's calls.
pub fn context_host(ctx: *mut ibv_context) -> Result<mrc_host::Host, Error> {
    Ok(context(ctx)?.host.host().clone())
}

/// The host and the engine QPN of a live QP.
pub fn qp_host(q: *mut ibv_qp) -> Result<(mrc_host::Host, u32), Error> {
    let q = qp::qp(q, "qp")?;
    Ok((q.ctx().host.host().clone(), q.qpn()))
}

/// The context's verbs `async_fd` (libmrc's `mrc_get_async_event` follows its O_NONBLOCK flag).
pub fn async_fd(ctx: *mut ibv_context) -> Result<RawFd, Error> {
    Ok(context(ctx)?.host.event_fd())
}
