//! Asynchronous events and EV events on their way to the application.
//!
//! The verbs layer runs one thread per device (shim/src/host.rs, `Router`, `mrc-shim-events`) that waits for
//! the host's asynchronous events and, while an MRC context is open on the device, for its EV state changes
//! (mrc-host's EV-event queue, host/src/control.rs). Events of the QPs and CQs libmrc created
//! (`mrc_verbs_shim::api`), port (plane) changes and EV changes come to [`handle`] on that thread, which moves
//! them to where the OCP API reads them:
//!
//! - a QP or CQ event to the [`Sink`] of the context that owns the object (`mrc_get_async_event`), naming the
//!   libmrc object; a port event to every context on the device;
//! - an EV event to every EV-event CQ of the device ([`crate::cq::deliver_ev_events`]), which signals its
//!   completion channel when it is armed.
//!
//! A thread rather than work done inside the calls, because a completion channel must become readable while
//! the application sleeps in `poll` on it, and nobody else would move the event then.

use std::collections::VecDeque;
use std::ffi::{c_int, c_uint};
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::{Arc, Mutex, Weak};

use mrc_verbs_shim::api::{self as verbs, AsyncEvent, Event};

use crate::abi::*;
use crate::ffi::{Error, FFI};

/// `enum ibv_event_type` values libmrc reports (rdma-core's numbering).
pub(crate) const IBV_EVENT_CQ_ERR: c_uint = 0;
pub(crate) const IBV_EVENT_QP_FATAL: c_uint = 1;
pub(crate) const IBV_EVENT_PORT_ACTIVE: c_uint = 9;
pub(crate) const IBV_EVENT_PORT_ERR: c_uint = 10;

/// Events kept per context; more are dropped (an application that never reads them loses the oldest news
/// last: the newest are dropped).
const SINK_DEPTH: usize = 4096;

/// One context's asynchronous events.
pub(crate) struct Sink {
    device: u32,
    queue: Mutex<VecDeque<mrc_async_event>>,
    /// Readable once per queued event (semaphore, non-blocking; `get` blocks in `poll` when it should).
    fd: OwnedFd,
    /// The verbs context's `async_fd`: `mrc_get_async_event` blocks unless it is non-blocking, as
    /// `ibv_get_async_event` on that context would (-1 on a unit test's context: blocking).
    verbs_fd: c_int,
}

// SAFETY: the events hold plain addresses of libmrc objects, handed back to the application, never
// dereferenced here; the rest is Sync.
unsafe impl Send for Sink {}
// SAFETY: as above.
unsafe impl Sync for Sink {}

fn sinks() -> std::sync::MutexGuard<'static, Vec<Weak<Sink>>> {
    static SINKS: Mutex<Vec<Weak<Sink>>> = Mutex::new(Vec::new());
    SINKS.lock().unwrap_or_else(|p| p.into_inner())
}

/// Waits until `fd` is readable (`timeout_ms` < 0: for ever); `false` on a timeout.
fn wait_readable(fd: c_int, timeout_ms: c_int) -> bool {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: polls one live descriptor.
    unsafe { libc::poll(&mut p, 1, timeout_ms) > 0 }
}

impl Sink {
    /// A sink for a context on `device` whose verbs context is `vctx`, known to every event source.
    pub(crate) fn new(device: u32, vctx: *mut ibv_context) -> Result<Arc<Self>, Error> {
        let verbs_fd = if vctx.is_null() {
            -1
        } else {
            verbs::async_fd(vctx).unwrap_or(-1)
        };
        // Non-blocking, so that `take` never sleeps.
        let fd = mrc_ffi::eventfd::new(libc::EFD_NONBLOCK)?;
        let s = Arc::new(Self {
            device,
            queue: Mutex::new(VecDeque::new()),
            fd,
            verbs_fd,
        });
        let mut all = sinks();
        all.retain(|w| w.strong_count() > 0);
        all.push(Arc::downgrade(&s));
        Ok(s)
    }

    /// Queues an event.
    pub(crate) fn push(&self, event_type: c_uint, element: mrc_async_event_element) {
        let mut q = self.queue.lock().unwrap_or_else(|p| p.into_inner());
        if q.len() >= SINK_DEPTH {
            return;
        }
        q.push_back(mrc_async_event {
            element,
            event_type,
        });
        drop(q);
        mrc_ffi::eventfd::signal(&self.fd);
    }

    fn nonblocking(&self) -> bool {
        if self.verbs_fd < 0 {
            return false;
        }
        // SAFETY: F_GETFL on the verbs context's descriptor, which lives while the MRC context holds its context.
        let fl = unsafe { libc::fcntl(self.verbs_fd, libc::F_GETFL) };
        fl >= 0 && fl & libc::O_NONBLOCK != 0
    }

    /// The next event: waits for one unless the verbs context's `async_fd` is non-blocking (then `EAGAIN`, not
    /// logged, when none is queued).
    pub(crate) fn get(&self) -> Result<mrc_async_event, Error> {
        loop {
            if mrc_ffi::eventfd::take(self.fd.as_raw_fd()) {
                if let Some(e) = self
                    .queue
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .pop_front()
                {
                    return Ok(e);
                }
                continue;
            }
            if self.nonblocking() {
                return Err(Error::quiet(libc::EAGAIN));
            }
            wait_readable(self.fd.as_raw_fd(), -1);
        }
    }
}

/// Queues a port event for every context on `device`.
fn port_event(device: u32, event_type: c_uint, port: u32) {
    let all: Vec<Arc<Sink>> = sinks().iter().filter_map(Weak::upgrade).collect();
    for s in all.iter().filter(|s| s.device == device) {
        s.push(
            event_type,
            mrc_async_event_element {
                port_num: c_int::try_from(port).unwrap_or(0),
            },
        );
    }
}

/// Moves one event of the verbs layer to the context it concerns.
fn route(device: u32, e: &AsyncEvent) {
    match e.event_type {
        IBV_EVENT_PORT_ACTIVE | IBV_EVENT_PORT_ERR => port_event(device, e.event_type, e.port),
        IBV_EVENT_CQ_ERR => {
            if let Some((cq, sink)) = crate::transport::cq_of(e.element) {
                sink.push(
                    e.event_type,
                    mrc_async_event_element {
                        cq: cq as *mut mrc_cq,
                    },
                );
            }
        }
        // Every other verbs event names a QP.
        _ => {
            if let Some((qp, sink)) =
                crate::transport::qp_of(e.element, e.event_type == IBV_EVENT_QP_FATAL)
            {
                sink.push(
                    e.event_type,
                    mrc_async_event_element {
                        qp: qp as *mut mrc_qp,
                    },
                );
            }
        }
    }
}

/// libmrc's handler of the verbs layer's events (installed by [`install`]), on the device's event thread.
fn handle(device: u32, e: Event) {
    // Inside the panic boundary: a panic is logged, and the device's thread goes on.
    let _ = FFI.guard("libmrc event handler", || {
        match e {
            Event::Async(a) => route(device, &a),
            Event::Ev { events, dropped } => ev_events(device, &events, dropped),
        }
        Ok(())
    });
}

/// EV changes of the device's host to its EV-event CQs; what the host dropped since it was last seen is lost
/// to every one of them.
fn ev_events(device: u32, got: &[mrc_host::EvEvent], dropped: u64) {
    let Some(dev) = crate::device::find(device) else {
        return;
    };
    let before = dev
        .host_ev_drops
        .fetch_max(dropped, std::sync::atomic::Ordering::AcqRel);
    let lost = u32::try_from(dropped.saturating_sub(before)).unwrap_or(u32::MAX);
    let events = crate::transport::ev_events(&dev, got);
    crate::cq::deliver_ev_events(device, lost, &events);
}

/// Makes [`handle`] the verbs layer's handler of libmrc's events (before an MRC context holds a verbs
/// context; once is enough).
pub(crate) fn install() {
    verbs::set_event_handler(handle);
}
