//! Completion channels and CQs (work-completion CQs and the controller's EV-event CQs).
//!
//! A channel is a semaphore eventfd plus the queue of CQs that fired; an armed CQ that gets a completion (or
//! an EV event) queues itself on its channel once (`notify`, called by the transport). Polling the entries
//! needs the transport (`transport.rs`).

#![allow(
    non_camel_case_types,
    reason = "the object types carry their C names (mrc.h)"
)]

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Condvar, Mutex};

use mrc_ffi::verbs_abi::{ibv_comp_channel, ibv_cq};
use mrc_verbs_shim::api as verbs;

use crate::abi::*;
use crate::context::{context, mrc_context};
use crate::device::limits;
use crate::ffi::{Error, FFI, non_null};
use crate::registry::{self, Kind, Object, Users};
use crate::transport;

/// A completion channel.
pub struct mrc_comp_channel {
    ctx: *const mrc_context,
    fd: OwnedFd,
    /// CQs whose events the application has not read yet.
    fired: Mutex<VecDeque<usize>>,
    /// CQs attached to it.
    users: Users,
    /// The verbs channel whose events a thread relays here (none on a unit test's context).
    relay: Option<Relay>,
}

/// A thread that waits for the events of a verbs channel and signals the libmrc CQs they belong to.
struct Relay {
    vch: *mut ibv_comp_channel,
    /// Ends the thread.
    stop: OwnedFd,
    thread: std::thread::JoinHandle<()>,
}

impl Relay {
    fn start(vctx: *mut ibv_context) -> Result<Self, Error> {
        let stop = mrc_ffi::eventfd::new(libc::EFD_NONBLOCK)?;
        let vch = verbs::create_comp_channel(vctx)?;
        let (s, ch) = (stop.as_raw_fd(), vch as usize);
        let thread = std::thread::Builder::new()
            .name("libmrc-cq-events".into())
            .spawn(move || {
                // Until stopped (or the channel is gone, which `stop` comes before).
                while let Ok(Some(vcq)) = verbs::wait_cq_event(ch as *mut ibv_comp_channel, s) {
                    transport::cq_event(vcq);
                }
            })
            .map_err(|e| {
                let _ = verbs::destroy_comp_channel(vch);
                Error::new(libc::EAGAIN, format!("starting the channel's thread: {e}"))
            })?;
        Ok(Self { vch, stop, thread })
    }

    fn stop(self) {
        mrc_ffi::eventfd::signal(&self.stop);
        let _ = self.thread.join();
        let _ = verbs::destroy_comp_channel(self.vch);
    }
}

// SAFETY: only ever published from a Box by `mrc_create_comp_channel`.
unsafe impl Object for mrc_comp_channel {
    const KIND: Kind = Kind::CompChannel;
}
// SAFETY: `ctx` points at the live parent context (it cannot be destroyed while the channel exists).
unsafe impl Send for mrc_comp_channel {}
// SAFETY: as above; the rest is Sync.
unsafe impl Sync for mrc_comp_channel {}

/// What a CQ receives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum CqKind {
    /// Work completions (`mrc_poll_cq`).
    Work,
    /// EV events (`mrc_ctl_poll_ev_event`).
    EvEvents,
}

#[derive(Debug, Default)]
struct Events {
    /// `Some(solicited_only)` while armed.
    armed: Option<bool>,
    /// Events handed out by `mrc_get_cq_event`, and those acknowledged.
    got: u64,
    acked: u64,
}

/// A completion queue.
pub struct mrc_cq {
    ctx: *const mrc_context,
    pub(crate) kind: CqKind,
    cq_context: *mut c_void,
    channel: *const mrc_comp_channel,
    /// Entries asked for (the transport CQ was sized with it; an EV-event CQ holds at most this many).
    pub(crate) cqe: u32,
    /// The verbs `ibv_cq` behind a work CQ (NULL for EV-event CQs and on a unit test's context).
    pub(crate) vcq: *mut ibv_cq,
    events: Mutex<Events>,
    acked: Condvar,
    /// QPs using it.
    pub(crate) users: Users,
    /// An EV-event CQ's events (at most `cqe`).
    evq: Mutex<EvQueue>,
}

/// The EV events an EV-event CQ holds. OCP's EV-event CQs never overrun: an event that finds the CQ full is
/// dropped and counted, and the next event that gets in carries the count (`drop_count`, exact:
/// `MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT`).
#[derive(Debug, Default)]
struct EvQueue {
    events: VecDeque<mrc_ctl_ev_event>,
    /// Dropped since the last event that got in.
    dropped: u32,
}

/// The EV-event CQs of the process: (device index, CQ address). The event threads deliver to them under this
/// lock, and `mrc_destroy_cq` takes them out under it before it frees one.
fn ev_cqs() -> std::sync::MutexGuard<'static, Vec<(u32, usize)>> {
    static EV_CQS: Mutex<Vec<(u32, usize)>> = Mutex::new(Vec::new());
    EV_CQS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Gives every EV-event CQ of `device` the events (after `lost` events the host dropped), and signals the
/// channels of those that are armed.
pub(crate) fn deliver_ev_events(device: u32, lost: u32, events: &[mrc_ctl_ev_event]) {
    if lost == 0 && events.is_empty() {
        return;
    }
    let list = ev_cqs();
    for &(_, p) in list.iter().filter(|(d, _)| *d == device) {
        // SAFETY: a CQ in the list is live: `mrc_destroy_cq` takes it out, under the lock held here, before it
        // frees it.
        let q = unsafe { &*(p as *const mrc_cq) };
        let mut e = q.evq.lock().unwrap_or_else(|p| p.into_inner());
        e.dropped = e.dropped.saturating_add(lost);
        let mut any = false;
        for ev in events {
            if e.events.len() >= q.cqe as usize {
                e.dropped = e.dropped.saturating_add(1);
                continue;
            }
            let drop_count = std::mem::take(&mut e.dropped);
            e.events.push_back(mrc_ctl_ev_event { drop_count, ..*ev });
            any = true;
        }
        drop(e);
        if any {
            q.notify(true);
        }
    }
}

/// Takes up to `n` EV events of an EV-event CQ.
pub(crate) fn take_ev_events(q: &mrc_cq, n: usize) -> Vec<mrc_ctl_ev_event> {
    let mut e = q.evq.lock().unwrap_or_else(|p| p.into_inner());
    let k = n.min(e.events.len());
    e.events.drain(..k).collect()
}

// SAFETY: only ever published from a Box by `create`.
unsafe impl Object for mrc_cq {
    const KIND: Kind = Kind::Cq;
}
// SAFETY: `ctx` and `channel` point at live parents (they cannot go while the CQ exists); `cq_context` is the
// application's opaque value, only handed back.
unsafe impl Send for mrc_cq {}
// SAFETY: as above; the rest is Sync.
unsafe impl Sync for mrc_cq {}

impl mrc_cq {
    /// The context it belongs to.
    pub(crate) fn ctx(&self) -> &mrc_context {
        // SAFETY: a context with CQs cannot be destroyed (`users`), so it outlives the CQ.
        unsafe { &*self.ctx }
    }

    /// Called when an entry arrives: an armed CQ signals its channel once and disarms.
    pub(crate) fn notify(&self, solicited: bool) {
        let mut e = self.events.lock().unwrap_or_else(|p| p.into_inner());
        let fire = matches!(e.armed, Some(only) if !only || solicited);
        if fire {
            e.armed = None;
            drop(e);
            // SAFETY: a channel with CQs cannot be destroyed, so it outlives the CQ.
            if let Some(ch) = unsafe { self.channel.as_ref() } {
                ch.fired
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push_back(self as *const Self as usize);
                mrc_ffi::eventfd::signal(&ch.fd);
            }
        }
    }
}

/// The live CQ behind `p`.
pub(crate) fn cq<'a>(p: *mut mrc_cq, what: &str) -> Result<&'a mrc_cq, Error> {
    // SAFETY: the registry check makes sure `p` is one of ours and live.
    unsafe { registry::get(p, what) }
}

/// Creates a completion channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_comp_channel(
    mrc_ctx: *mut mrc_context,
    channel: *mut *mut mrc_comp_channel,
) -> c_int {
    FFI.minus_one("mrc_create_comp_channel", || {
        let c = context(mrc_ctx)?;
        non_null(channel, "channel")?;
        let fd = mrc_ffi::eventfd::new(0)?;
        let relay = if !c.vctx.is_null() {
            Some(Relay::start(c.vctx)?)
        } else {
            None
        };
        c.users.add();
        let ch = registry::publish(Box::new(mrc_comp_channel {
            ctx: c,
            fd,
            fired: Mutex::new(VecDeque::new()),
            users: Users::default(),
            relay,
        }));
        // SAFETY: non-NULL, and the header makes it a writable pointer slot.
        unsafe { channel.write(ch) };
        Ok(())
    })
}

/// The channel's file descriptor.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_comp_channel_fd(
    channel: *mut mrc_comp_channel,
    fd: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_get_comp_channel_fd", || {
        // SAFETY: checked against the registry.
        let ch = unsafe { registry::get(channel, "channel") }?;
        non_null(fd, "fd")?;
        // SAFETY: non-NULL, and the header makes it a writable int.
        unsafe { fd.write(ch.fd.as_raw_fd()) };
        Ok(())
    })
}

/// Destroys a channel; `EBUSY` while CQs use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_comp_channel(channel: *mut mrc_comp_channel) -> c_int {
    FFI.errno_value("mrc_destroy_comp_channel", || {
        // SAFETY: the caller does not use the channel while destroying it.
        let ch = unsafe {
            registry::destroy(channel, "channel", |ch: &mrc_comp_channel| {
                ch.users.idle("completion channel")
            })
        }?;
        // SAFETY: the parent context cannot go while the channel exists.
        unsafe { &*ch.ctx }.users.sub();
        if let Some(r) = ch.relay {
            r.stop();
        }
        Ok(())
    })
}

fn create(
    mrc_ctx: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
    kind: CqKind,
) -> Result<*mut mrc_cq, Error> {
    let c = context(mrc_ctx)?;
    let cqe = u32::try_from(cqe)
        .ok()
        .filter(|n| (1..=limits::MAX_CQE).contains(n))
        .ok_or_else(|| {
            Error::inval(format!(
                "cqe {cqe} is outside 1..={} (the device's max_cqe)",
                limits::MAX_CQE
            ))
        })?;
    if comp_vector != 0 {
        return Err(Error::inval(format!(
            "comp_vector {comp_vector} is not below num_comp_vectors (1)"
        )));
    }
    let ch = if channel.is_null() {
        None
    } else {
        // SAFETY: checked against the registry.
        let ch = unsafe { registry::get(channel, "channel") }?;
        if !std::ptr::eq(ch.ctx, c) {
            return Err(Error::inval("channel belongs to another MRC context"));
        }
        Some(ch)
    };
    let vch = ch
        .and_then(|c| c.relay.as_ref())
        .map_or(std::ptr::null_mut(), |r| r.vch);
    let vcq = if kind == CqKind::Work && !c.vctx.is_null() {
        transport::create_cq(c.vctx, cqe, vch)?
    } else {
        std::ptr::null_mut()
    };
    if let Some(ch) = ch {
        ch.users.add();
    }
    c.users.add();
    let p = registry::publish(Box::new(mrc_cq {
        ctx: c,
        kind,
        cq_context,
        channel: ch.map_or(std::ptr::null(), |c| c as *const _),
        cqe,
        vcq,
        events: Mutex::new(Events::default()),
        acked: Condvar::new(),
        users: Users::default(),
        evq: Mutex::new(EvQueue::default()),
    }));
    transport::cq_created(vcq, p, c.sink.clone());
    if kind == CqKind::EvEvents {
        ev_cqs().push((c.dev.info.device_index, p as usize));
    }
    Ok(p)
}

/// Creates a work-completion CQ.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_cq(
    mrc_ctx: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    FFI.ptr("mrc_create_cq", || {
        create(mrc_ctx, cqe, cq_context, channel, comp_vector, CqKind::Work)
    })
}

/// Creates a CQ for EV events.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_create_ev_event_cq(
    mrc_ctx: *mut mrc_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut mrc_comp_channel,
    comp_vector: c_int,
) -> *mut mrc_cq {
    FFI.ptr("mrc_ctl_create_ev_event_cq", || {
        create(
            mrc_ctx,
            cqe,
            cq_context,
            channel,
            comp_vector,
            CqKind::EvEvents,
        )
    })
}

/// Polls work completions (through the transport).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_poll_cq(
    cq: *mut mrc_cq,
    num_entries: c_int,
    wc: *mut ibv_wc,
) -> c_int {
    FFI.count("mrc_poll_cq", || {
        let q = crate::cq::cq(cq, "cq")?;
        if q.kind != CqKind::Work {
            return Err(Error::inval(
                "cq is an EV event CQ; poll it with mrc_ctl_poll_ev_event",
            ));
        }
        if num_entries < 0 {
            return Err(Error::inval(format!(
                "num_entries {num_entries} is negative"
            )));
        }
        if num_entries > 0 {
            non_null(wc, "wc")?;
        }
        transport::poll_cq(q, num_entries, wc)
    })
}

/// Destroys a CQ; `EBUSY` while QPs use it; waits until its events are acknowledged.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_cq(cq: *mut mrc_cq) -> c_int {
    FFI.errno_value("mrc_destroy_cq", || {
        // Wait for acknowledgements first (outside the registry lock), as verbs does.
        {
            let q = crate::cq::cq(cq, "cq")?;
            q.users.idle("CQ")?;
            let mut e = q.events.lock().unwrap_or_else(|p| p.into_inner());
            while e.acked < e.got {
                e = q.acked.wait(e).unwrap_or_else(|p| p.into_inner());
            }
        }
        // No event thread may reach it from here on (`deliver_ev_events`); put back if it stays.
        let was_ev = {
            let mut l = ev_cqs();
            let n = l.len();
            l.retain(|&(_, p)| p != cq as usize);
            l.len() < n
        };
        // SAFETY: the caller does not use the CQ while destroying it.
        let q = match unsafe { registry::destroy(cq, "cq", |q: &mrc_cq| q.users.idle("CQ")) } {
            Ok(q) => q,
            Err(e) => {
                if was_ev && let Ok(q) = crate::cq::cq(cq, "cq") {
                    ev_cqs().push((q.ctx().dev.info.device_index, cq as usize));
                }
                return Err(e);
            }
        };
        // SAFETY: a channel with CQs cannot be destroyed, so it is live.
        if let Some(ch) = unsafe { q.channel.as_ref() } {
            ch.users.sub();
        }
        transport::destroy_cq(q.vcq);
        q.ctx().users.sub();
        Ok(())
    })
}

/// Arms a CQ for one event on its channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_req_notify_cq(cq: *mut mrc_cq, solicited_only: c_int) -> c_int {
    FFI.errno_value("mrc_req_notify_cq", || {
        let q = crate::cq::cq(cq, "cq")?;
        q.events.lock().unwrap_or_else(|p| p.into_inner()).armed = Some(solicited_only != 0);
        if !q.vcq.is_null() {
            // The verbs CQ fires once on its next completion; the channel's thread relays it here.
            verbs::req_notify_cq(q.vcq, solicited_only != 0)?;
        }
        Ok(())
    })
}

/// Waits for the next CQ event on a channel.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_cq_event(
    channel: *mut mrc_comp_channel,
    cq: *mut *mut mrc_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    FFI.minus_one("mrc_get_cq_event", || {
        // SAFETY: checked against the registry.
        let ch = unsafe { registry::get(channel, "channel") }?;
        non_null(cq, "cq")?;
        non_null(cq_context, "cq_context")?;
        loop {
            mrc_ffi::eventfd::wait(ch.fd.as_raw_fd(), "the channel's fd")?;
            let Some(p) = ch
                .fired
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .pop_front()
            else {
                continue;
            };
            // A CQ destroyed after it fired is skipped.
            let Ok(q) = crate::cq::cq(p as *mut mrc_cq, "cq") else {
                continue;
            };
            q.events.lock().unwrap_or_else(|p| p.into_inner()).got += 1;
            // SAFETY: both are non-NULL writable slots (the header's contract).
            unsafe {
                cq.write(p as *mut mrc_cq);
                cq_context.write(q.cq_context);
            }
            return Ok(());
        }
    })
}

/// Acknowledges events taken with `mrc_get_cq_event`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ack_cq_events(cq: *mut mrc_cq, nevents: c_uint) {
    FFI.void("mrc_ack_cq_events", || {
        let q = crate::cq::cq(cq, "cq")?;
        let mut e = q.events.lock().unwrap_or_else(|p| p.into_inner());
        let n = u64::from(nevents);
        if e.acked + n > e.got {
            return Err(Error::inval(format!(
                "acknowledging {n} events, but only {} are unacknowledged",
                e.got - e.acked
            )));
        }
        e.acked += n;
        q.acked.notify_all();
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::context::{mrc_destroy_context, test_context};

    fn errno() -> c_int {
        // SAFETY: reads the calling thread's errno slot.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn an_armed_cq_signals_its_channel_once_and_destroy_waits_for_the_ack() {
        let m = test_context(1000, 2);
        let mut ch = std::ptr::null_mut();
        let mut tag = 5u8;
        // SAFETY: `m` is a live context and the out-pointers are live locals, as the header requires.
        unsafe {
            assert_eq!(mrc_create_comp_channel(m, &mut ch), 0);
            let mut fd = -1;
            assert_eq!(mrc_get_comp_channel_fd(ch, &mut fd), 0);
            libc::fcntl(
                fd,
                libc::F_SETFL,
                libc::fcntl(fd, libc::F_GETFL) | libc::O_NONBLOCK,
            );
            let cq = mrc_create_cq(m, 16, (&raw mut tag).cast(), ch, 0);
            assert!(!cq.is_null());
            let q = crate::cq::cq(cq, "cq").unwrap();
            let (mut got, mut got_ctx) = (std::ptr::null_mut(), std::ptr::null_mut());
            // Not armed: a completion does not signal.
            q.notify(false);
            assert_eq!(mrc_get_cq_event(ch, &mut got, &mut got_ctx), -1);
            assert_eq!(errno(), libc::EAGAIN);
            // Armed for solicited completions only: an unsolicited one does not signal either.
            assert_eq!(mrc_req_notify_cq(cq, 1), 0);
            q.notify(false);
            assert_eq!(mrc_get_cq_event(ch, &mut got, &mut got_ctx), -1);
            // A solicited one does, once.
            q.notify(true);
            q.notify(true);
            assert_eq!(mrc_get_cq_event(ch, &mut got, &mut got_ctx), 0);
            assert_eq!((got, got_ctx), (cq, (&raw mut tag).cast()));
            assert_eq!(
                mrc_get_cq_event(ch, &mut got, &mut got_ctx),
                -1,
                "disarmed after one event"
            );
            // Destroying the channel under its CQ, or the context under both, is refused.
            assert_eq!(mrc_destroy_comp_channel(ch), libc::EBUSY);
            assert_eq!(mrc_destroy_context(m), -1);
            assert_eq!(errno(), libc::EBUSY);
            // The event is acknowledged, so the CQ goes without waiting.
            mrc_ack_cq_events(cq, 1);
            assert_eq!(mrc_destroy_cq(cq), 0);
            assert_eq!(mrc_destroy_cq(cq), libc::EINVAL);
            assert_eq!(mrc_destroy_comp_channel(ch), 0);
            assert_eq!(mrc_destroy_context(m), 0);
        }
    }
}
