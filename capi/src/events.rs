//! Asynchronous events and EV events on their way to the application.
//!
//! The verbs layer sorts its host's asynchronous events (shim/src/host.rs, `Router`): those of the QPs and CQs
//! libmrc created (`mrc_verbs_shim::api`), and port (plane) changes, wait in a queue of their own behind a
//! descriptor. EV
//! state changes wait in mrc-host's EV-event queue (host/src/control.rs), also behind a descriptor. Each MRC
//! context runs one thread (`libmrc-events`) that sleeps in `poll` on both and moves what arrives to where the
//! OCP API reads it:
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

use mrc_verbs_shim::api::{self as verbs, AsyncEvent};

use crate::abi::*;
use crate::device::Device;
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
            verbs::async_fds(vctx).map_or(-1, |(_, v)| v)
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

/// A context's event thread.
pub(crate) struct Pump {
    stop: OwnedFd,
    thread: std::thread::JoinHandle<()>,
}

impl Pump {
    /// Starts the thread for a context on `dev` over the verbs context `vctx`.
    pub(crate) fn start(dev: Arc<Device>, vctx: *mut ibv_context) -> Result<Self, Error> {
        let (bfd, _) = verbs::async_fds(vctx)?;
        let efd = verbs::context_host(vctx)?
            .ev_event_fd()
            .ok_or_else(|| Error::new(libc::EMFILE, "no eventfd for the EV-event queue"))?;
        let stop = mrc_ffi::eventfd::new(0)?;
        let sfd = stop.as_raw_fd();
        let v = vctx as usize;
        let thread = std::thread::Builder::new()
            .name("libmrc-events".into())
            .spawn(move || run(&dev, v as *mut ibv_context, [bfd, efd, sfd]))
            .map_err(|e| Error::new(libc::EAGAIN, format!("starting the event thread: {e}")))?;
        Ok(Self { stop, thread })
    }

    /// Stops the thread (before the context lets go of its verbs context).
    pub(crate) fn stop(self) {
        mrc_ffi::eventfd::signal(&self.stop);
        let _ = self.thread.join();
    }
}

/// The thread: sleeps until an event is queued or `stop` is signalled. The descriptors live as long as the
/// verbs context, which the MRC context holds until after this thread ended.
fn run(dev: &Device, vctx: *mut ibv_context, fds: [c_int; 3]) {
    loop {
        let mut p = fds.map(|fd| libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        });
        // SAFETY: polls three live descriptors.
        if unsafe { libc::poll(p.as_mut_ptr(), 3, -1) } < 0 {
            continue;
        }
        if p[2].revents != 0 {
            return;
        }
        // Inside the panic boundary: a panic is logged and the thread goes on (`EIO`); a refusal means the verbs
        // context is gone, and nothing more will come.
        match FFI.guard("libmrc-events", || drain(dev, vctx)) {
            Ok(()) => {}
            Err(e) if e.errno == libc::EIO => {}
            Err(_) => return,
        }
    }
}

fn drain(dev: &Device, vctx: *mut ibv_context) -> Result<(), Error> {
    let device = dev.info.device_index;
    while let Some(e) = verbs::next_async_event(vctx)? {
        route(device, &e);
    }
    let host = verbs::context_host(vctx)?;
    loop {
        let got: Vec<mrc_host::EvEvent> = std::iter::from_fn(|| host.poll_ev_event())
            .take(64)
            .collect();
        let n = got.len();
        let dropped = host.ev_events_dropped();
        let before = dev
            .host_ev_drops
            .fetch_max(dropped, std::sync::atomic::Ordering::AcqRel);
        let lost = u32::try_from(dropped.saturating_sub(before)).unwrap_or(u32::MAX);
        let events = crate::transport::ev_events(dev, &got);
        crate::cq::deliver_ev_events(device, lost, &events);
        if n < 64 {
            return Ok(());
        }
    }
}
