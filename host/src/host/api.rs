//! The host's control API: starting, progress, counters, async events, ports, PDs, CQs and QPs.

use super::config::{HostConfig, ProgressMode};
use super::cq::Cq;
use super::gid::gid_of;
use super::info::{AsyncEvent, HostStats, LocalInfo};
use super::progress::run;
use super::qp::{Qp, QpSpec};
use super::state::{Core, EVENT_QUEUE, Handle, Host, Inner, lock};
use std::collections::{BTreeMap, VecDeque};
use std::net::Ipv6Addr;
use std::os::fd::RawFd;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration as StdDuration, Instant as WallClock};

use crossbeam_queue::ArrayQueue;

use crate::share::WindowShare;
use mrc::{Completion, EndpointConfig, Pd};

use crate::config::PeerPlane;
use crate::connect_queue::ConnectQueues;
use crate::driver::{Datapath, DatapathConfig};
use crate::error::HostError;
use crate::plane::{PlaneIo, UdpPlanes};
use crate::socket::{EventFd, wait};

impl Host {
    /// Binds the planes' sockets, starts the engine and (unless [`ProgressMode::Manual`]) the progress thread.
    pub fn start(cfg: HostConfig) -> Result<Host, HostError> {
        let offload = match cfg.offload {
            Some(o) => o,
            None => crate::offload::Offload::from_env()
                .map_err(HostError::Invalid)?
                .unwrap_or_default(),
        };
        let usid = cfg.node.usid_block.is_some();
        let on = offload.enabled(usid);
        // Without offload, uSID hops make UDP checksums wrong at the receiver: send none (spec WIRE-ICRC-1).
        let io = UdpPlanes::bind(&cfg.node, usid && !on, cfg.socket_buffer)?;
        let io = if on { io.with_offload()? } else { io };
        Host::start_with(cfg, io)
    }
}

impl<P: PlaneIo> Host<P> {
    /// Starts a host whose datagrams travel over `io` (which carries as many planes as `cfg.node` has; the
    /// node gives T0s and the uSID plan, `io` the addresses), the engine and (unless [`ProgressMode::Manual`])
    /// the progress thread. [`start`](Host::start) is this over the node's UDP sockets.
    pub fn start_with(mut cfg: HostConfig, io: P) -> Result<Self, HostError> {
        if cfg.profile.mtu == 0 {
            cfg.profile.mtu = io.payload_mtu();
        }
        if cfg.profile.ev_burst == 0 {
            cfg.profile.ev_burst = if io.offload() {
                crate::offload::ev_burst(
                    cfg.profile.mtu as usize + crate::pmtu::PACKET_OVERHEAD as usize,
                )
            } else {
                1
            };
        }
        let p = cfg.profile;
        let mut dp = Datapath::with_io(
            io,
            cfg.node.clone(),
            EndpointConfig::default(),
            DatapathConfig {
                socket_buffer: cfg.socket_buffer,
                // Room for the largest bootstrap datagram too (64 QPs, 16 planes, 1 KiB of app data).
                max_datagram: (p.mtu as usize + 128).max(4096),
                ..DatapathConfig::default()
            },
        )?;
        let default_pd = dp.endpoint().alloc_pd();
        let share = WindowShare::new(&p, cfg.node.plane_count(), dp.io().receive_buffer());
        let local_planes = dp.local_planes();
        let local = LocalInfo {
            planes: local_planes.iter().map(|p| p.addr).collect(),
            port: local_planes.first().map_or(0, |p| p.addr.port()),
            plane0: local_planes
                .first()
                .map_or(Ipv6Addr::UNSPECIFIED, |p| *p.addr.ip()),
            gid: local_planes
                .first()
                .map_or(Ipv6Addr::UNSPECIFIED, |p| gid_of(p.addr)),
        };
        let inner = Arc::new(Inner {
            core: Mutex::new(Core {
                dp,
                qps: BTreeMap::new(),
                qp_list: Vec::new(),
                stalled: BTreeMap::new(),
                inline: BTreeMap::new(),
                cqs: BTreeMap::new(),
                cq_list: Vec::new(),
                listeners: ConnectQueues::default(),
                accepted: VecDeque::new(),
                connecting: BTreeMap::new(),
                resolving: BTreeMap::new(),
                links: BTreeMap::new(),
                closing: BTreeMap::new(),
                peer_closes: Vec::new(),
                closed_links: VecDeque::new(),
                rejected: 0,
                refused: 0,
                mrs: 0,
                scratch: vec![Completion::default(); 64],
                last_busy: WallClock::now(),
                busy_poll: StdDuration::from_micros(200),
                share,
            }),
            mode: cfg.progress,
            profile: p,
            max_qps: cfg.max_qps,
            max_mrs: cfg.max_mrs,
            bootstrap_timeout: cfg.bootstrap_timeout,
            link_send_wr: cfg.link_send_wr.max(1),
            link_recv_wr: cfg.link_recv_wr.max(1),
            local,
            local_planes,
            default_pd,
            usid: cfg.node.usid_block.is_some(),
            doorbell: EventFd::new()?,
            sleeping: AtomicBool::new(false),
            deep_until: AtomicU64::new(0),
            driven: AtomicBool::new(false),
            app_cpu: Default::default(),
            epoch: WallClock::now(),
            stop: AtomicBool::new(false),
            failed: AtomicBool::new(false),
            events: ArrayQueue::new(EVENT_QUEUE),
            events_fd: EventFd::new()?,
            events_dropped: AtomicU64::new(0),
            ctl: Default::default(),
        });
        let thread = match cfg.progress {
            ProgressMode::Manual => None,
            mode => {
                let i = Arc::clone(&inner);
                let steer = super::affinity::Steer::new();
                Some(
                    std::thread::Builder::new()
                        .name("mrc-progress".into())
                        .spawn(move || run(&i, mode == ProgressMode::BusyPoll, steer))?,
                )
            }
        };
        let host = Host(Arc::new(Handle {
            inner,
            thread: Mutex::new(thread),
            counters: Mutex::new(None),
        }));
        let capture = match cfg.capture {
            Some(c) => Some(c),
            None => crate::capture::CaptureConfig::from_env().map_err(HostError::Invalid)?,
        };
        if let Some(c) = capture {
            host.start_capture(&c)?;
        }
        let metrics = match cfg.metrics {
            Some(a) => Some(a),
            None => crate::counters::metrics_from_env()?,
        };
        if let Some(addr) = metrics {
            let server = host.serve_counters_from(addr)?;
            *lock(&host.0.counters) = Some(server);
        }
        Ok(host)
    }

    /// One round of progress (receive, timers, transmit, completions); `true` when it did work. Meant for
    /// [`ProgressMode::Manual`]; with a progress thread it runs a round only if the thread is not in one.
    pub fn progress(&self) -> Result<bool, HostError> {
        let i = self.inner();
        if i.failed.load(Ordering::Acquire) {
            return Err(HostError::Stopped);
        }
        match i.mode {
            ProgressMode::Manual => i.round(&mut lock(&i.core)),
            // While applications run rounds, the progress thread seldom gets the lock to notice a deep QP: they
            // look too.
            _ => match i.core.try_lock() {
                Ok(mut c) => {
                    let busy = i.round(&mut c)?;
                    i.note_depth(&mut c);
                    Ok(busy)
                }
                Err(_) => Ok(false),
            },
        }
    }

    /// A round from an application thread that spins anyway (polling an empty CQ, posting a lone request), as
    /// [`Host::progress`], unless the progress thread saw a QP with many bytes in flight in the last
    /// 2 ms: then the caller is bandwidth-bound and its rounds (even its tries for the lock) only
    /// contend with the thread for the lock and, on few cores, the CPU (measured on 2 cores: ib_write_bw
    /// 0.6-0.8x with every empty poll running a round, 1.0-1.4x of mrc-perf without). A latency-bound caller
    /// (a small message in flight) still runs the round itself and sees its completion without waiting for the
    /// thread to wake.
    pub fn drive(&self) -> Result<bool, HostError> {
        let i = self.inner();
        if !i.driven.load(Ordering::Relaxed) {
            i.driven.store(true, Ordering::Relaxed);
        }
        // One clock read for both uses: this is the latency-bound caller's hot path.
        let now = i.epoch.elapsed();
        if i.bandwidth_bound_at(now) {
            return Ok(false);
        }
        // A latency-bound caller spins: the progress thread keeps off its CPU (`affinity.rs`).
        i.app_cpu.note(now);
        self.progress()
    }

    /// Whether the progress thread saw a QP with many bytes in flight in the last 2 ms (then
    /// [`Host::drive`] leaves rounds to it): a caller that spins on an empty CQ may as well sleep briefly.
    pub fn bandwidth_bound(&self) -> bool {
        let i = self.inner();
        i.bandwidth_bound_at(i.epoch.elapsed())
    }

    /// Manual mode's application loop: one round, and when nothing has happened for a while (the datapath's
    /// busy-poll time), a sleep on the sockets and the next timer of at most `max_wait`.
    pub fn progress_wait(&self, max_wait: StdDuration) -> Result<(), HostError> {
        let i = self.inner();
        if i.mode != ProgressMode::Manual {
            std::thread::yield_now();
            return Ok(());
        }
        let mut c = lock(&i.core);
        let busy = i.round(&mut c)?;
        if busy {
            c.last_busy = WallClock::now();
            return Ok(());
        }
        if c.last_busy.elapsed() < c.busy_poll {
            return Ok(());
        }
        let sleep = c.dp.idle_timeout(mrc::time::Duration::from_nanos(
            max_wait.as_nanos().min(u128::from(u64::MAX)) as u64,
        ));
        let (fds, blocked) = (c.dp.fds(), c.dp.blocked().to_vec());
        drop(c);
        if sleep.as_nanos() > 0 {
            wait(
                &fds,
                &blocked,
                Some(StdDuration::from_nanos(sleep.as_nanos() as u64)),
            )?;
        }
        Ok(())
    }

    /// Adds a peer whose planes the application learned out of band (e.g. a perftest-style TCP exchange), so
    /// connecting to it needs no in-band resolution. A peer already known at `planes[0]` is returned as is.
    pub fn learn_peer(&self, planes: &[PeerPlane]) -> Result<(), HostError> {
        let i = self.inner();
        let mut c = lock(&i.core);
        i.peer_for(&mut c, planes).map(|_| ())
    }

    /// Read-only access to the datapath and engine under the lock, for diagnostics (per-QP and per-plane
    /// counters, EV states): tools only, never on a data path.
    pub fn inspect<R>(&self, f: impl FnOnce(&Datapath<P>) -> R) -> R {
        f(&lock(&self.inner().core).dp)
    }

    /// What a peer needs to reach this host's planes (addresses and T0s), for [`learn_peer`](Self::learn_peer)
    /// at the other end.
    pub fn local_planes(&self) -> Vec<PeerPlane> {
        self.inner().local_planes.clone()
    }

    /// Plane addresses and port.
    pub fn local(&self) -> LocalInfo {
        self.inner().local.clone()
    }

    /// Counters.
    pub fn stats(&self) -> HostStats {
        let i = self.inner();
        let c = lock(&i.core);
        HostStats {
            datapath: c.dp.stats(),
            engine: c.dp.endpoint_ref().stats(),
            events_dropped: i.events_dropped.load(Ordering::Relaxed),
            cq_overruns: c
                .cq_list
                .iter()
                .map(|q| q.overruns.load(Ordering::Relaxed))
                .sum(),
            bootstrap_rejected: c.rejected,
            connects_dropped: c.listeners.dropped,
            connects_refused: c.refused,
        }
    }

    /// The next async event, if any.
    pub fn poll_event(&self) -> Option<AsyncEvent> {
        let i = self.inner();
        let e = i.events.pop();
        if i.events.is_empty() {
            i.events_fd.drain();
            // An event pushed between the pop and the drain must keep the fd readable.
            if !i.events.is_empty() {
                i.events_fd.signal();
            }
        }
        e
    }

    /// Readable while async events are queued.
    pub fn event_fd(&self) -> RawFd {
        self.inner().events_fd.fd()
    }

    /// Takes plane `plane` down or up (link state from outside, or a test): QPs move their traffic off a down
    /// plane at once. Raises [`AsyncEvent::PortDown`] / [`AsyncEvent::PortUp`].
    pub fn set_port(&self, plane: u8, up: bool) -> Result<(), HostError> {
        let i = self.inner();
        if usize::from(plane) >= i.local.planes.len() {
            return Err(HostError::Invalid(format!("plane {plane}: no such plane")));
        }
        {
            let mut c = lock(&i.core);
            let now = c.dp.now();
            c.dp.endpoint().set_port_state(now, plane, up);
            i.port_changed(&c, plane, up);
        }
        i.kick();
        Ok(())
    }

    /// The protection domain every [`Link`](crate::Link)'s QPs belong to: register memory a link uses in it.
    pub fn default_pd(&self) -> Pd {
        self.inner().default_pd
    }

    /// A protection domain.
    pub fn alloc_pd(&self) -> Result<Pd, HostError> {
        Ok(lock(&self.inner().core).dp.endpoint().alloc_pd())
    }

    /// Frees a protection domain.
    pub fn dealloc_pd(&self, pd: Pd) -> Result<(), HostError> {
        lock(&self.inner().core)
            .dp
            .endpoint()
            .dealloc_pd(pd)
            .map_err(|_| HostError::NoSuchObject("protection domain"))
    }

    /// A completion queue of `depth` entries: a lock-free ring the progress loop fills, and an eventfd.
    pub fn create_cq(&self, depth: u32) -> Result<Cq, HostError> {
        let i = self.inner();
        let sh = lock(&i.core).new_cq(depth.max(1) as usize)?;
        Ok(Cq { sh })
    }

    /// Destroys a CQ (no QP may still complete into it).
    pub fn destroy_cq(&self, cq: &Cq) -> Result<(), HostError> {
        lock(&self.inner().core).destroy_cq(&cq.sh)
    }

    /// A QP in RESET.
    pub fn create_qp(&self, spec: QpSpec<'_>) -> Result<Qp<P>, HostError> {
        let i = self.inner();
        let mut c = lock(&i.core);
        i.create_qp_locked(&mut c, &spec)
    }

    /// Destroys a QP: its outstanding work is dropped without completions, as in verbs.
    pub fn destroy_qp(&self, qp: &Qp<P>) -> Result<(), HostError> {
        let mut c = lock(&self.inner().core);
        c.destroy_qp(qp.sh.qpn)
    }
}
