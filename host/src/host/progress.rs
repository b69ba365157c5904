//! The progress loop: submissions into the engine, sockets and timers, completions and events out.

use super::affinity::Steer;
use super::info::AsyncEvent;
use super::state::{
    Core, DEEP_EVERY, DEEP_HOLD, DEEP_INFLIGHT, Inner, MAX_SLEEP, QpShared, SPIN_ROUNDS, ST_ERROR,
    SendItem, lock,
};
use std::sync::Arc;
use std::sync::atomic::{Ordering, fence};
use std::time::{Duration as StdDuration, Instant as WallClock};

use mrc::{
    Completion, EvState, Event, PostError, QpState, RecvWr, SendOp, SendWr, Sge, WcOpcode, WcStatus,
};

use crate::error::HostError;
use crate::plane::PlaneIo;
use crate::socket::wait;

/// The progress thread's loop; `steer` is the affinity of the thread that started the host (which this one
/// inherited), if there is more than one CPU in it.
pub(super) fn run<P: PlaneIo>(i: &Arc<Inner<P>>, busy_poll: bool, mut steer: Option<Steer>) {
    let mut idle = 0u32;
    let spin_for = lock(&i.core).busy_poll;
    let mut last_busy = WallClock::now();
    let mut rounds = 0u32;
    while !i.stop.load(Ordering::Acquire) {
        let busy = {
            // Never wait for the lock: its holder (an application thread's assist round) is making the progress
            // this round would, and a blocked thread needs a futex wake-up and a CPU before anyone can have the
            // lock again (on 2 cores ib_write_lat's p50 fell into a 35-44 µs mode with `lock` here, 13-16 µs
            // without).
            let mut c = match i.core.try_lock() {
                Ok(c) => c,
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => {
                    std::thread::yield_now();
                    continue;
                }
            };
            let busy = match i.round(&mut c) {
                Ok(b) => b,
                Err(_) => {
                    i.failed.store(true, Ordering::Release);
                    return;
                }
            };
            rounds = rounds.wrapping_add(1);
            if i.driven.load(Ordering::Relaxed) && (rounds.is_multiple_of(DEEP_EVERY) || !busy) {
                i.note_depth(&mut c);
            }
            busy
        };
        // After an idle round, or while the thread keeps off a CPU: a bandwidth-bound application naps between
        // polls, so the progress thread may share its CPU again (and needs to, where the peer's progress thread
        // has the other one).
        if let Some(s) = steer.as_mut()
            && (!busy || s.avoiding())
        {
            let now = i.epoch.elapsed();
            let app = i.app_cpu.recent(now).filter(|_| !i.deep_at(now));
            s.check(app, now);
        }
        if busy {
            idle = 0;
            last_busy = WallClock::now();
            continue;
        }
        if busy_poll {
            std::hint::spin_loop();
            continue;
        }
        idle += 1;
        // Spin (yielding) for the datapath's busy-poll time after the last busy round, as mrc-perf's poll mode
        // does: a reply due within it then needs no wake-up from ppoll.
        if idle < SPIN_ROUNDS || last_busy.elapsed() < spin_for {
            std::thread::yield_now();
            continue;
        }
        let (fds, blocked, sleep) = {
            let c = lock(&i.core);
            i.sleeping.store(true, Ordering::Relaxed);
            // Pairs with `kick`: a post after this fence sees `sleeping`; one before it is seen here.
            fence(Ordering::SeqCst);
            if c.qp_list
                .iter()
                .any(|q| !q.sq.is_empty() || !q.rq.is_empty())
            {
                i.sleeping.store(false, Ordering::Relaxed);
                continue;
            }
            let mut fds = c.dp.fds();
            fds.push(i.doorbell.fd());
            (
                fds,
                c.dp.blocked().to_vec(),
                c.dp.idle_timeout(mrc::time::Duration::from_nanos(MAX_SLEEP.as_nanos() as u64)),
            )
        };
        if sleep.as_nanos() > 0 {
            let _ = wait(
                &fds,
                &blocked,
                Some(StdDuration::from_nanos(sleep.as_nanos() as u64)),
            );
        }
        i.sleeping.store(false, Ordering::Relaxed);
        i.doorbell.drain();
        idle = 0;
    }
}

impl<P: PlaneIo> Inner<P> {
    /// Whether a QP had many bytes in flight at the last look (within [`DEEP_HOLD`]) before `now` (since the
    /// host's epoch).
    pub(super) fn deep_at(&self, now: StdDuration) -> bool {
        (now.as_nanos() as u64) < self.deep_until.load(Ordering::Relaxed)
    }

    /// [`Host::bandwidth_bound`](super::Host::bandwidth_bound) at `now`: a progress thread runs and saw a
    /// deep QP.
    pub(super) fn bandwidth_bound_at(&self, now: StdDuration) -> bool {
        self.mode != super::config::ProgressMode::Manual && self.deep_at(now)
    }

    /// Notes a QP with many bytes in flight: [`Host::drive`](super::Host::drive)'s callers then leave the
    /// rounds to the progress thread for a while.
    pub(super) fn note_depth(&self, c: &mut Core<P>) {
        let ep = c.dp.endpoint();
        let deep = c
            .qp_list
            .iter()
            .any(|q| ep.qp_transport(q.qpn).is_some_and(|t| t.2 >= DEEP_INFLIGHT));
        if deep {
            let until = self.epoch.elapsed() + DEEP_HOLD;
            self.deep_until
                .store(until.as_nanos() as u64, Ordering::Relaxed);
        }
    }

    /// One round: submissions into the engine, sockets and timers, bootstrap datagrams, completions out to the
    /// rings, engine events out to the event queue.
    pub(super) fn round(&self, c: &mut Core<P>) -> Result<bool, HostError> {
        let mut busy = self.drain_submissions(c);
        busy |= c.dp.progress()?;
        for (plane, up) in c.dp.take_port_changes() {
            self.port_changed(c, plane, up);
        }
        busy |= self.host_datagrams(c);
        busy |= self.peer_closes(c);
        busy |= deliver_completions(c);
        busy |= self.engine_events(c);
        // Requests posted while this round read the sockets (an application answering data the round just
        // landed, or a completion it delivered) go out now rather than a round later.
        if self.drain_submissions(c) {
            c.dp.transmit()?;
            busy = true;
        }
        Ok(busy)
    }

    pub(super) fn drain_submissions(&self, c: &mut Core<P>) -> bool {
        let list = std::mem::take(&mut c.qp_list);
        let mut any = false;
        for q in &list {
            // Receives first: a WRITE_WITH_IMM in this round's datagrams may need one.
            while let Some(r) = q.rq.pop() {
                any = true;
                let wr = RecvWr {
                    wr_id: r.wr_id,
                    sges: &r.sges,
                };
                if let Err(e) = c.dp.endpoint().post_recv(q.qpn, &wr) {
                    let c2 = failed_completion(q, r.wr_id, WcOpcode::Recv, e);
                    if !q.recv_cq.push(c2) {
                        self.event(AsyncEvent::CqError {
                            cq: q.recv_cq.id.id(),
                        });
                    }
                    q.recv_cq.notify();
                }
            }
            let mut next = c.stalled.remove(&q.qpn);
            loop {
                let item = match next.take() {
                    Some(it) => it,
                    None => match q.sq.pop() {
                        Some(it) => it,
                        None => break,
                    },
                };
                any = true;
                if let Some(back) = self.post_one(c, q, item) {
                    c.stalled.insert(q.qpn, back);
                    break;
                }
            }
        }
        c.qp_list = list;
        any
    }

    /// Hands one request to the engine; gives it back when the engine's queue is full (retry next round).
    pub(super) fn post_one(
        &self,
        c: &mut Core<P>,
        q: &QpShared,
        item: SendItem,
    ) -> Option<SendItem> {
        let mut inline_sge = [Sge {
            addr: 0,
            len: 0,
            lkey: 0,
        }];
        let sges: &[Sge] = match &item.inline {
            // Without an arena the QP allows no inline bytes, so `bytes` is empty (checked at posting).
            Some(bytes) => match c.inline.get_mut(&q.qpn) {
                Some(a) if !bytes.is_empty() => {
                    let off = a.next * a.slot;
                    a.next = (a.next + 1) % a.slots;
                    let (base, lkey) = (a.addr, a.lkey);
                    if let Some(buf) = c.dp.mem.bytes_mut(base) {
                        buf[off..off + bytes.len()].copy_from_slice(bytes);
                    }
                    inline_sge[0] = Sge {
                        addr: base + off as u64,
                        len: bytes.len() as u32,
                        lkey,
                    };
                    &inline_sge
                }
                _ => &[],
            },
            None => &item.sges,
        };
        let wr = SendWr {
            wr_id: item.wr_id,
            op: item.op,
            sges,
            signaled: item.signaled,
            solicited: item.solicited,
        };
        let now = c.dp.now();
        match c.dp.endpoint().post_send(q.qpn, &wr, now) {
            Ok(()) => None,
            Err(PostError::QueueFull | PostError::WimmCap) => Some(item),
            Err(e) => {
                let comp = failed_completion(q, item.wr_id, opcode_of(&item.op), e);
                if !q.send_cq.push(comp) {
                    self.event(AsyncEvent::CqError {
                        cq: q.send_cq.id.id(),
                    });
                }
                q.send_cq.notify();
                None
            }
        }
    }
}

impl<P: PlaneIo> Inner<P> {
    pub(super) fn engine_events(&self, c: &mut Core<P>) -> bool {
        let mut any = false;
        while let Some(e) = c.dp.endpoint().poll_event() {
            any = true;
            match e {
                Event::QpError { qpn } => {
                    if let Some(q) = c.qps.get(&qpn) {
                        q.state.store(ST_ERROR, Ordering::Release);
                    }
                    self.event(AsyncEvent::QpFatal { qpn });
                }
                Event::CqError { cq } => self.event(AsyncEvent::CqError { cq: cq.id() }),
                Event::EvChanged { qpn, change } => {
                    self.ctl.ev_changed(qpn, change);
                    let retired = matches!(change.to, EvState::AssumedBad | EvState::Denied);
                    let was = matches!(change.from, EvState::AssumedBad | EvState::Denied);
                    if retired && !was {
                        self.event(AsyncEvent::PathRetired {
                            qpn,
                            plane: change.plane,
                            ev: change.ev,
                        });
                    } else if was && !retired {
                        self.event(AsyncEvent::PathRestored {
                            qpn,
                            plane: change.plane,
                            ev: change.ev,
                        });
                    }
                }
                Event::EvProbeReply { peer, ev, rtt, .. } => self.ctl.probe_answer(peer, ev, rtt),
                Event::PortStatusReply { peer, ev, rtt, .. } => {
                    self.ctl.port_status_answer(peer, ev, rtt);
                }
                _ => {}
            }
        }
        any
    }
}

/// Moves the engine's completions into the CQs' rings (as much as each ring has room for: the rest waits in the
/// engine's queue, whose depth then bounds it as verbs does).
pub(super) fn deliver_completions<P: PlaneIo>(c: &mut Core<P>) -> bool {
    let mut any = false;
    for q in &c.cq_list {
        let mut delivered = 0;
        loop {
            let room = q.ring.capacity() - q.ring.len();
            if room == 0 {
                break;
            }
            let want = room.min(c.scratch.len());
            let n = c.dp.endpoint().poll_cq(q.id, &mut c.scratch[..want]);
            for comp in &c.scratch[..n] {
                q.push(*comp);
            }
            delivered += n;
            if n < want {
                break;
            }
        }
        if delivered > 0 {
            any = true;
            q.notify();
        }
    }
    any
}

pub(super) fn opcode_of(op: &SendOp) -> WcOpcode {
    match op {
        SendOp::Write { .. } | SendOp::WriteImm { .. } => WcOpcode::RdmaWrite,
        SendOp::Read { .. } => WcOpcode::RdmaRead,
        _ => WcOpcode::Send,
    }
}

/// The completion of a request the engine refused after it left the ring (what a NIC reports for a bad SGE).
pub(super) fn failed_completion(
    q: &QpShared,
    wr_id: u64,
    opcode: WcOpcode,
    e: PostError,
) -> Completion {
    let status = match e {
        PostError::LocalAccess(_) => WcStatus::LocProtErr,
        PostError::TooManySge | PostError::TooLong => WcStatus::LocLenErr,
        PostError::BadState(QpState::Error) => WcStatus::WrFlushErr,
        _ => WcStatus::LocQpOpErr,
    };
    Completion {
        wr_id,
        status,
        opcode,
        byte_len: 0,
        imm: None,
        qpn: q.qpn,
    }
}
