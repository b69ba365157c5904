//! Completion queues and completion channels.
//!
//! Each CQ has a real eventfd from the host layer, readable after a completion once `ibv_req_notify_cq` armed
//! it. A channel's `fd` is an epoll descriptor watching the eventfds of its CQs: a real fd that applications
//! can `poll()` or make non-blocking, readable while one of its CQs has an event, and `ibv_get_cq_event` takes
//! exactly one event per call.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

use crate::abi::*;
use crate::context::{Context, context};
use crate::device::limits;
use crate::ffi::{self, Error, FFI};
use crate::host::HostCq;
use crate::registry::{self, Kind, Object, Users};

/// A completion channel.
#[repr(C)]
pub(crate) struct Channel {
    raw: UnsafeCell<ibv_comp_channel>,
    ctx: *const Context,
    /// The epoll descriptor (`ibv_comp_channel.fd`).
    efd: OwnedFd,
    /// CQs attached to it.
    users: Users,
}

// SAFETY: the C struct is the first field.
unsafe impl Object for Channel {
    type Raw = ibv_comp_channel;
    const KIND: Kind = Kind::CompChannel;
}

impl Channel {
    fn ctx(&self) -> &Context {
        // SAFETY: a context with channels cannot be closed (`Users`), so it outlives the channel.
        unsafe { &*self.ctx }
    }

    /// Starts (`Some(cq)`) or stops watching a CQ's eventfd.
    fn watch(&self, fd: RawFd, cq: Option<*mut ibv_cq>) -> Result<(), Error> {
        let mut ev = libc::epoll_event {
            events: libc::EPOLLIN as u32,
            u64: cq.map_or(0, |p| p as u64),
        };
        let op = if cq.is_some() {
            libc::EPOLL_CTL_ADD
        } else {
            libc::EPOLL_CTL_DEL
        };
        // SAFETY: plain system call on descriptors we own, with a live event struct.
        if unsafe { libc::epoll_ctl(self.efd.as_raw_fd(), op, fd, &raw mut ev) } < 0 {
            let e = std::io::Error::last_os_error();
            return Err(Error::new(
                e.raw_os_error().unwrap_or(libc::EINVAL),
                format!("epoll_ctl on the channel: {e}"),
            ));
        }
        Ok(())
    }
}

/// A completion queue.
#[repr(C)]
pub(crate) struct Cq {
    raw: UnsafeCell<ibv_cq>,
    ctx: *const Context,
    channel: *const Channel,
    pub(crate) host: HostCq,
    /// QPs using it.
    pub(crate) users: Users,
}

// SAFETY: the C struct is the first field.
unsafe impl Object for Cq {
    type Raw = ibv_cq;
    const KIND: Kind = Kind::Cq;
}

impl Cq {
    pub(crate) fn ctx(&self) -> &Context {
        // SAFETY: a context with CQs cannot be closed (`Users`), so it outlives the CQ.
        unsafe { &*self.ctx }
    }

    fn channel(&self) -> Option<&Channel> {
        // SAFETY: a channel with CQs cannot be destroyed (`Users`), so it outlives the CQ.
        unsafe { self.channel.as_ref() }
    }

    /// The C view.
    pub(crate) fn raw(&self) -> *mut ibv_cq {
        self.raw.get()
    }
}

pub(crate) fn init_sync(m: *mut pthread_mutex_t, c: *mut pthread_cond_t) {
    // SAFETY: `m` and `c` point into a freshly boxed object that will not move.
    unsafe {
        libc::pthread_mutex_init(m, std::ptr::null());
        libc::pthread_cond_init(c, std::ptr::null());
    }
}

pub(crate) fn destroy_sync(m: *mut pthread_mutex_t, c: *mut pthread_cond_t) {
    // SAFETY: initialised by `init_sync`; nobody waits on an object being destroyed.
    unsafe {
        libc::pthread_mutex_destroy(m);
        libc::pthread_cond_destroy(c);
    }
}

/// The live channel behind `ch`.
pub(crate) fn channel<'a>(ch: *mut ibv_comp_channel, what: &str) -> Result<&'a Channel, Error> {
    // SAFETY: the registry check inside `get` makes sure `ch` is one of ours and live.
    unsafe { registry::get::<Channel>(ch, what) }
}

impl Channel {
    /// The epoll descriptor (`ibv_comp_channel.fd`).
    pub(crate) fn fd(&self) -> RawFd {
        self.efd.as_raw_fd()
    }
}

/// The live CQ behind `cq`.
pub(crate) fn cq<'a>(p: *mut ibv_cq, what: &str) -> Result<&'a Cq, Error> {
    // SAFETY: the registry check inside `get` makes sure `p` is one of ours and live.
    unsafe { registry::get::<Cq>(p, what) }
}

// ---------------------------------------------------------------------------------------------------------
// Context ops (reached through the inline `ibv_poll_cq` / `ibv_req_notify_cq`)
// ---------------------------------------------------------------------------------------------------------

/// `ibv_poll_cq`: up to `n` completions into `wc`; a negative errno on failure.
pub(crate) unsafe extern "C" fn poll_cq_op(cq: *mut ibv_cq, n: c_int, wc: *mut ibv_wc) -> c_int {
    FFI.guard("ibv_poll_cq", || {
        // SAFETY: reached through the ops of the CQ's own context, so `cq` is one of ours.
        let q = unsafe { registry::get_unchecked::<Cq>(cq, "cq") }?;
        if n < 0 {
            return Err(Error::inval(format!("num_entries {n} is negative")));
        }
        if n == 0 {
            return Ok(0);
        }
        let wc = ffi::non_null(wc, "wc")?;
        // SAFETY: the caller passes an array of `n` completions.
        let out = unsafe { std::slice::from_raw_parts_mut(wc, n as usize) };
        Ok(q.host.poll(&q.ctx().host, out) as c_int)
    })
    .unwrap_or_else(|e| -e.errno)
}

/// `ibv_req_notify_cq`: the next completion (or the next solicited one) queues an event on the channel.
pub(crate) unsafe extern "C" fn req_notify_cq_op(cq: *mut ibv_cq, solicited_only: c_int) -> c_int {
    FFI.errno_value("ibv_req_notify_cq", || {
        // SAFETY: reached through the ops of the CQ's own context, so `cq` is one of ours.
        let q = unsafe { registry::get_unchecked::<Cq>(cq, "cq") }?;
        q.host.req_notify(solicited_only != 0);
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------
// Exported entry points
// ---------------------------------------------------------------------------------------------------------

/// Creates a completion channel with a real fd.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_comp_channel(ctx: *mut ibv_context) -> *mut ibv_comp_channel {
    FFI.ptr("ibv_create_comp_channel", || create_channel(ctx))
}

/// `ibv_create_comp_channel` (also libmrc's, `api.rs`).
pub(crate) fn create_channel(ctx: *mut ibv_context) -> Result<*mut ibv_comp_channel, Error> {
    let c = context(ctx)?;
    // SAFETY: plain system call; the result is checked.
    let fd = unsafe { libc::epoll_create1(libc::EPOLL_CLOEXEC) };
    if fd < 0 {
        let e = std::io::Error::last_os_error();
        return Err(Error::new(
            e.raw_os_error().unwrap_or(libc::EMFILE),
            format!("epoll_create1: {e}"),
        ));
    }
    // SAFETY: `fd` is a fresh descriptor we own.
    let efd = unsafe { OwnedFd::from_raw_fd(fd) };
    c.users.add();
    Ok(registry::publish(Box::new(Channel {
        raw: UnsafeCell::new(ibv_comp_channel {
            context: ctx,
            fd: efd.as_raw_fd(),
            refcnt: 0,
        }),
        ctx: c,
        efd,
        users: Users::default(),
    })))
}

/// Destroys a completion channel; `EBUSY` while CQs use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_comp_channel(ch: *mut ibv_comp_channel) -> c_int {
    FFI.errno_value("ibv_destroy_comp_channel", || destroy_channel(ch))
}

/// `ibv_destroy_comp_channel`.
pub(crate) fn destroy_channel(ch: *mut ibv_comp_channel) -> Result<(), Error> {
    // SAFETY: verbs callers do not use a channel while destroying it.
    let ch = unsafe {
        registry::destroy::<Channel>(ch, "channel", |c| c.users.idle("completion channel"))
    }?;
    ch.ctx().users.sub();
    Ok(())
}

/// Creates a CQ of at least `cqe` entries, optionally reporting to `channel`.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_create_cq(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> *mut ibv_cq {
    FFI.ptr("ibv_create_cq", || {
        create(ctx, cqe, cq_context, channel, comp_vector)
    })
}

/// `ibv_create_cq`.
pub(crate) fn create(
    ctx: *mut ibv_context,
    cqe: c_int,
    cq_context: *mut c_void,
    channel: *mut ibv_comp_channel,
    comp_vector: c_int,
) -> Result<*mut ibv_cq, Error> {
    let c = context(ctx)?;
    if cqe < 1 || cqe as u32 > limits::MAX_CQE {
        return Err(Error::inval(format!(
            "cqe {cqe} is outside 1..={}",
            limits::MAX_CQE
        )));
    }
    if comp_vector != 0 {
        return Err(Error::inval(format!(
            "comp_vector {comp_vector} does not exist (num_comp_vectors is 1)"
        )));
    }
    let ch: *const Channel = if channel.is_null() {
        std::ptr::null()
    } else {
        // SAFETY: the registry check inside `get` makes sure `channel` is one of ours and live.
        let ch = unsafe { registry::get::<Channel>(channel, "channel") }?;
        if !std::ptr::eq(ch.ctx, c) {
            return Err(Error::inval("the channel belongs to another context"));
        }
        ch
    };
    let host = c.host.create_cq(cqe as u32)?;
    c.users.add();
    // SAFETY: `ch` is NULL or the live channel checked above.
    if let Some(ch) = unsafe { ch.as_ref() } {
        ch.users.add();
    }
    let q = Box::new(Cq {
        raw: UnsafeCell::new(ibv_cq {
            context: ctx,
            channel,
            cq_context,
            handle: host.id(),
            cqe,
            // SAFETY: all-zero is a valid pthread mutex/cond bit pattern on glibc; both are initialised below.
            mutex: unsafe { std::mem::zeroed() },
            // SAFETY: as above.
            cond: unsafe { std::mem::zeroed() },
            comp_events_completed: 0,
            async_events_completed: 0,
        }),
        ctx: c,
        channel: ch,
        host,
        users: Users::default(),
    });
    let raw = q.raw();
    if let Some(ch) = q.channel()
        && let Err(e) = ch.watch(q.host.fd(), Some(raw))
    {
        ch.users.sub();
        c.users.sub();
        return Err(e);
    }
    c.host.name_cq(q.host.id(), Some(raw as usize));
    // SAFETY: `raw` points into the box, which does not move when published.
    init_sync(unsafe { &raw mut (*raw).mutex }, unsafe {
        &raw mut (*raw).cond
    });
    Ok(registry::publish(q))
}

/// Destroys a CQ; `EBUSY` while QPs use it. Events still queued for it on its channel are dropped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_destroy_cq(cq: *mut ibv_cq) -> c_int {
    FFI.errno_value("ibv_destroy_cq", || destroy(cq))
}

/// `ibv_destroy_cq`.
pub(crate) fn destroy(cq: *mut ibv_cq) -> Result<(), Error> {
    // SAFETY: verbs callers do not use a CQ while destroying it.
    let q = unsafe { registry::destroy::<Cq>(cq, "cq", |q| q.users.idle("completion queue")) }?;
    if let Some(ch) = q.channel() {
        let _ = ch.watch(q.host.fd(), None);
        ch.users.sub();
    }
    q.ctx().host.name_cq(q.host.id(), None);
    q.ctx().host.destroy_cq(&q.host);
    q.ctx().users.sub();
    let raw = q.raw();
    // SAFETY: fields of the CQ we own again.
    destroy_sync(unsafe { &raw mut (*raw).mutex }, unsafe {
        &raw mut (*raw).cond
    });
    Ok(())
}

/// Takes the next CQ event from a channel (blocking unless its fd was made non-blocking).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_cq_event(
    channel: *mut ibv_comp_channel,
    cq_out: *mut *mut ibv_cq,
    cq_context: *mut *mut c_void,
) -> c_int {
    FFI.count("ibv_get_cq_event", || {
        // SAFETY: the registry check inside `get` makes sure `channel` is one of ours and live.
        unsafe { registry::get::<Channel>(channel, "channel") }?;
        let cq_out = ffi::non_null(cq_out, "cq")?;
        let cq_context = ffi::non_null(cq_context, "cq_context")?;
        let p = get_event(channel)?;
        // SAFETY: the out-pointers are the caller's; `p` is a live CQ of ours.
        unsafe {
            *cq_out = p;
            *cq_context = (*p).cq_context;
        }
        Ok(0)
    })
}

/// `ibv_get_cq_event`: the CQ of the channel's next event.
pub(crate) fn get_event(channel: *mut ibv_comp_channel) -> Result<*mut ibv_cq, Error> {
    // SAFETY: the registry check inside `get` makes sure `channel` is one of ours and live.
    let ch = unsafe { registry::get::<Channel>(channel, "channel") }?;
    let fd = ch.efd.as_raw_fd();
    // SAFETY: plain system call on our descriptor.
    let nonblocking = unsafe { libc::fcntl(fd, libc::F_GETFL) } & libc::O_NONBLOCK != 0;
    loop {
        let mut ev = libc::epoll_event { events: 0, u64: 0 };
        // SAFETY: waits on our epoll descriptor for one event into a live struct.
        let n = unsafe { libc::epoll_wait(fd, &raw mut ev, 1, if nonblocking { 0 } else { -1 }) };
        if n < 0 {
            let e = std::io::Error::last_os_error();
            if e.raw_os_error() == Some(libc::EINTR) {
                continue;
            }
            return Err(Error::new(
                e.raw_os_error().unwrap_or(libc::EIO),
                format!("waiting on the channel: {e}"),
            ));
        }
        if n == 0 {
            return Err(Error::quiet(libc::EAGAIN));
        }
        let p = ev.u64 as *mut ibv_cq;
        // SAFETY: the registry check inside `get` makes sure the CQ is still one of ours and live.
        let Ok(q) = (unsafe { registry::get::<Cq>(p, "cq") }) else {
            continue;
        };
        // Another thread may have taken this event first: then wait for the next one.
        if q.host.take_event() {
            return Ok(p);
        }
    }
}

/// Counts an acknowledged asynchronous event of a CQ (`ibv_cq.async_events_completed`).
pub(crate) fn ack_async_event(p: *mut ibv_cq) -> Result<(), Error> {
    let q = cq(p, "event element")?;
    let raw = q.raw();
    // SAFETY: the CQ's mutex and cond were initialised at creation; the counter is guarded by the mutex.
    unsafe {
        libc::pthread_mutex_lock(&raw mut (*raw).mutex);
        (*raw).async_events_completed = (*raw).async_events_completed.wrapping_add(1);
        libc::pthread_cond_signal(&raw mut (*raw).cond);
        libc::pthread_mutex_unlock(&raw mut (*raw).mutex);
    }
    Ok(())
}

/// Acknowledges `nevents` events of `cq` (`ibv_cq.comp_events_completed`).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_ack_cq_events(cq: *mut ibv_cq, nevents: c_uint) {
    FFI.void("ibv_ack_cq_events", || ack_events(cq, nevents))
}

/// `ibv_ack_cq_events`.
pub(crate) fn ack_events(cq: *mut ibv_cq, nevents: c_uint) -> Result<(), Error> {
    let q = self::cq(cq, "cq")?;
    let raw = q.raw();
    // SAFETY: the CQ's mutex and cond were initialised at creation; the counter is guarded by the mutex.
    unsafe {
        libc::pthread_mutex_lock(&raw mut (*raw).mutex);
        (*raw).comp_events_completed = (*raw).comp_events_completed.wrapping_add(nevents);
        libc::pthread_cond_signal(&raw mut (*raw).cond);
        libc::pthread_mutex_unlock(&raw mut (*raw).mutex);
    }
    Ok(())
}
