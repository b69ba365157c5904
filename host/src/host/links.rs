//! Links: listeners, connections, a connected set of QPs and its graceful close.

use super::config::ProgressMode;
use super::cq::Cq;
use super::qp::{Qp, QpSpec};
use super::state::{
    ACCEPT_CACHE, ConnectReply, Core, CqShared, Host, Inner, LinkPeer, QpShared, RETRY_FIRST, lock,
    random_u64,
};
use std::net::SocketAddrV6;
use std::sync::Arc;
use std::time::{Duration as StdDuration, Instant as WallClock};

use mrc::{Access, Pd, PeerId, Transition};

use crate::bootstrap::{Blob, BlobKind, MAX_APP, MAX_LINK_QPS, Msg, QpHalf, random_key, seal};
use crate::error::HostError;
use crate::plane::{PlaneIo, UdpPlanes};
use mrc::wire::{AUTH_LEN, AuthKey};

impl<P: PlaneIo> Host<P> {
    /// Starts listening for [`connect`](Self::connect)s; the listener's [`blob`](Listener::blob) tells a peer
    /// how to reach it.
    pub fn listen(&self) -> Result<Listener<P>, HostError> {
        let i = self.inner();
        let key = random_key();
        let id = loop {
            let id = random_u64();
            let mut c = lock(&i.core);
            if id != 0 && !c.listeners.taken(id) {
                c.listeners.open(id, AuthKey::new(key));
                break id;
            }
        };
        let blob = i.blob(BlobKind::Listener { id }, key);
        Ok(Listener {
            host: Arc::clone(i),
            id,
            blob,
        })
    }

    /// Starts connecting `qps` QPs to the listener described by `blob`, sending `app` (at most 1 KiB) with the
    /// request; [`Connecting::poll`] finishes it. The request is repeated until the listener answers or
    /// [`HostConfig::bootstrap_timeout`](crate::HostConfig::bootstrap_timeout) passes.
    pub fn connect(&self, blob: &[u8], qps: usize, app: &[u8]) -> Result<Connecting<P>, HostError> {
        let i = self.inner();
        let b = Blob::decode(blob)?;
        let BlobKind::Listener { id } = b.kind else {
            return Err(HostError::Invalid(
                "the blob names a QP, not a listener".into(),
            ));
        };
        if qps == 0 || qps > MAX_LINK_QPS {
            return Err(HostError::Invalid(format!(
                "{qps} QPs per link; give 1..={MAX_LINK_QPS}"
            )));
        }
        if app.len() > MAX_APP {
            return Err(HostError::Invalid(format!(
                "{} bytes of app data; at most {MAX_APP}",
                app.len()
            )));
        }
        if usize::from(b.planes) != i.local.planes.len() {
            return Err(HostError::Invalid(format!(
                "the listener has {} planes and this host {}; both ends need the same planes",
                b.planes,
                i.local.planes.len()
            )));
        }
        let token = random_u64();
        let mut c = lock(&i.core);
        let mut half = i.link_half(&mut c, qps)?;
        if let Err(e) = i.build_link(&mut c, &mut half, None) {
            for q in &half.qps {
                let _ = c.destroy_qp(q.qpn);
            }
            return Err(e);
        }
        // spec: HOST-AUTH-1
        let msg = seal(
            &Msg::Connect {
                token,
                listener: id,
                planes: i.local_planes.clone(),
                qps: half.halves(),
                app: app.to_vec(),
                mac: [0; AUTH_LEN],
            },
            &AuthKey::new(b.key),
        );
        let dest = i.bootstrap_dest(&c, &b);
        c.connecting.insert(token, ConnectReply::Waiting);
        let _ = c.dp.send_host(0, dest, &msg);
        drop(c);
        i.kick();
        let now = WallClock::now();
        Ok(Connecting {
            host: Arc::clone(i),
            token,
            dest,
            msg,
            half: Some(half),
            deadline: now + i.bootstrap_timeout,
            next_send: now + RETRY_FIRST,
            interval: RETRY_FIRST,
        })
    }
}

impl<P: PlaneIo> Inner<P> {
    /// QPs (in INIT) and their two CQs for one side of a link.
    pub(super) fn link_half(&self, c: &mut Core<P>, n: usize) -> Result<LinkHalf, HostError> {
        let pd = self.default_pd;
        let depth = |wr: u32| (n as u32).saturating_mul(wr).saturating_add(64) as usize;
        let send = c.new_cq(depth(self.link_send_wr))?;
        let recv = c.new_cq(depth(self.link_recv_wr))?;
        Ok(LinkHalf {
            pd,
            send,
            recv,
            qps: Vec::with_capacity(n),
            n,
        })
    }
}

/// One side of a link under construction.
pub(super) struct LinkHalf {
    pd: Pd,
    send: Arc<CqShared>,
    recv: Arc<CqShared>,
    qps: Vec<Arc<QpShared>>,
    n: usize,
}

impl LinkHalf {
    pub(super) fn halves(&self) -> Vec<QpHalf> {
        self.qps
            .iter()
            .map(|q| QpHalf {
                qpn: q.qpn,
                psn: q.psn,
                caps: q.caps,
                key: q.key,
            })
            .collect()
    }
}

// ---- bootstrap: listeners, connections, links ---------------------------------------------------------------------

/// Waits for connection requests; [`blob`](Self::blob) tells connectors where.
pub struct Listener<P: PlaneIo = UdpPlanes> {
    host: Arc<Inner<P>>,
    id: u64,
    blob: Blob,
}

impl<P: PlaneIo> std::fmt::Debug for Listener<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Listener").field("id", &self.id).finish()
    }
}

impl<P: PlaneIo> Listener<P> {
    /// What a connector passes to [`Host::connect`] (≤ 128 bytes).
    pub fn blob(&self) -> Vec<u8> {
        self.blob.encode()
    }

    /// Accepts one waiting connection request, answering `reply` (at most 1 KiB): the link (QPs in RTS) and the
    /// connector's app data. `Ok(None)` when nobody is waiting.
    pub fn poll_accept(&mut self, reply: &[u8]) -> Result<Option<Accepted<P>>, HostError> {
        let i = &self.host;
        if reply.len() > MAX_APP {
            return Err(HostError::Invalid(format!(
                "{} bytes of reply; at most {MAX_APP}",
                reply.len()
            )));
        }
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        // A request this host cannot take is refused and the next one served (spec HOST-QUEUE-1).
        while let Some(p) = c.listeners.pop(self.id) {
            let refuse = |c: &mut Core<P>| {
                c.refused += 1;
                let m = Msg::Refuse {
                    token: p.token,
                    reason: 2,
                }
                .encode();
                let _ = c.dp.send_host(p.plane, p.src, &m);
            };
            if p.planes.len() != i.local_planes.len() {
                refuse(&mut c);
                continue;
            }
            let peer = match i.peer_for(&mut c, &p.planes) {
                Ok(peer) => peer,
                Err(_) => {
                    refuse(&mut c);
                    continue;
                }
            };
            let mut half = i.link_half(&mut c, p.qps.len())?;
            let link = match i.build_link(&mut c, &mut half, Some((peer, &p.qps))) {
                Ok(l) => l,
                Err(e) => {
                    for q in &half.qps {
                        let _ = c.destroy_qp(q.qpn);
                    }
                    refuse(&mut c);
                    return Err(e);
                }
            };
            let accept = Msg::Accept {
                token: p.token,
                planes: i.local_planes.clone(),
                qps: half.halves(),
                app: reply.to_vec(),
            }
            .encode();
            let _ = c.dp.send_host(p.plane, p.src, &accept);
            if c.accepted.len() >= ACCEPT_CACHE {
                c.accepted.pop_front();
            }
            c.accepted.push_back(((p.src, p.token), (p.plane, accept)));
            drop(c);
            i.kick();
            return Ok(Some((link, p.app)));
        }
        Ok(None)
    }
}

impl<P: PlaneIo> Drop for Listener<P> {
    fn drop(&mut self) {
        lock(&self.host.core).listeners.close(self.id);
    }
}

impl<P: PlaneIo> Inner<P> {
    /// Creates the half's QPs (if not yet) and, with `remote`, connects them; returns the link.
    fn build_link(
        self: &Arc<Self>,
        c: &mut Core<P>,
        half: &mut LinkHalf,
        remote: Option<(PeerId, &[QpHalf])>,
    ) -> Result<Link<P>, HostError> {
        let send_cq = Cq {
            sh: Arc::clone(&half.send),
        };
        let recv_cq = Cq {
            sh: Arc::clone(&half.recv),
        };
        let n = remote.map_or(half.n, |(_, r)| r.len());
        while half.qps.len() < n {
            let spec = QpSpec {
                pd: half.pd,
                send_cq: &send_cq,
                recv_cq: &recv_cq,
                max_send_wr: self.link_send_wr,
                max_recv_wr: self.link_recv_wr,
                max_sge: 4,
                max_inline: 0,
                sq_sig_all: false,
            };
            let q = self.create_qp_locked(c, &spec)?;
            self.modify_locked(
                c,
                &q.sh,
                Transition::Init {
                    access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                },
            )?;
            half.qps.push(q.sh);
        }
        if let Some((peer, r)) = remote {
            // spec: HOST-DGRAM-5
            for (q, r) in half.qps.iter().zip(r) {
                self.connect_locked(c, q, peer, r)?;
                c.links.insert(
                    q.qpn,
                    LinkPeer {
                        peer,
                        remote_qpn: r.qpn,
                        remote_key: r.key,
                    },
                );
            }
        }
        Ok(Link {
            qps: half
                .qps
                .iter()
                .map(|q| Qp {
                    host: Arc::clone(self),
                    sh: Arc::clone(q),
                })
                .collect(),
            send_cq,
            recv_cq,
            pd: half.pd,
        })
    }
}

/// A connection being set up by [`Host::connect`].
pub struct Connecting<P: PlaneIo = UdpPlanes> {
    host: Arc<Inner<P>>,
    token: u64,
    dest: SocketAddrV6,
    msg: Vec<u8>,
    half: Option<LinkHalf>,
    deadline: WallClock,
    next_send: WallClock,
    interval: StdDuration,
}

impl<P: PlaneIo> std::fmt::Debug for Connecting<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connecting")
            .field("dest", &self.dest)
            .finish_non_exhaustive()
    }
}

impl<P: PlaneIo> Connecting<P> {
    /// The link (QPs in RTS) and the listener's reply once it answered; `Ok(None)` while waiting. A listener
    /// closed lately → `ECONNREFUSED`; no answer within the bootstrap timeout → `ETIMEDOUT` (a listener that
    /// never existed answers nothing: spec HOST-AUTH-1).
    pub fn poll(&mut self) -> Result<Option<Accepted<P>>, HostError> {
        let i = Arc::clone(&self.host);
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        let Some(half) = self.half.as_mut() else {
            return Err(HostError::Invalid(
                "this connection already finished".into(),
            ));
        };
        match c.connecting.get_mut(&self.token) {
            Some(ConnectReply::Accepted(..)) => {
                let Some(ConnectReply::Accepted(planes, remote, app)) =
                    c.connecting.remove(&self.token)
                else {
                    unreachable!("matched above");
                };
                if remote.len() != half.qps.len() {
                    return Err(HostError::Invalid(format!(
                        "the listener answered with {} QPs for {}",
                        remote.len(),
                        half.qps.len()
                    )));
                }
                let peer = i.peer_for(&mut c, &planes)?;
                let Some(mut half) = self.half.take() else {
                    return Err(HostError::Invalid(
                        "this connection already finished".into(),
                    ));
                };
                let link = i.build_link(&mut c, &mut half, Some((peer, &remote)))?;
                drop(c);
                i.kick();
                Ok(Some((link, app)))
            }
            Some(ConnectReply::Refused) => {
                c.connecting.remove(&self.token);
                Err(HostError::Refused)
            }
            Some(ConnectReply::Waiting) => {
                let now = WallClock::now();
                if now >= self.deadline {
                    c.connecting.remove(&self.token);
                    return Err(HostError::Timeout(
                        "connect (no ACCEPT from the listener)".into(),
                    ));
                }
                if now >= self.next_send {
                    let _ = c.dp.send_host(0, self.dest, &self.msg);
                    self.interval = (self.interval * 2).min(StdDuration::from_secs(1));
                    self.next_send = now + self.interval;
                }
                Ok(None)
            }
            None => Err(HostError::Invalid(
                "this connection already finished".into(),
            )),
        }
    }
}

impl<P: PlaneIo> Drop for Connecting<P> {
    fn drop(&mut self) {
        let mut c = lock(&self.host.core);
        c.connecting.remove(&self.token);
        if let Some(h) = self.half.take() {
            for q in h.qps {
                let _ = c.destroy_qp(q.qpn);
            }
        }
    }
}

/// A link that came up, with the application bytes the other side sent with it.
pub type Accepted<P = UdpPlanes> = (Link<P>, Vec<u8>);

/// A connected set of QPs toward one peer (all in RTS), with their own send and receive CQs.
#[derive(Debug)]
pub struct Link<P: PlaneIo = UdpPlanes> {
    qps: Vec<Qp<P>>,
    send_cq: Cq,
    recv_cq: Cq,
    pd: Pd,
}

impl<P: PlaneIo> Link<P> {
    /// The QPs, in the order both sides agree on.
    pub fn qps(&self) -> &[Qp<P>] {
        &self.qps
    }

    /// Where the link's send completions go.
    pub fn send_cq(&self) -> &Cq {
        &self.send_cq
    }

    /// Where the link's receive completions go.
    pub fn recv_cq(&self) -> &Cq {
        &self.recv_cq
    }

    /// The protection domain memory for this link must be registered in.
    pub fn pd(&self) -> Pd {
        self.pd
    }

    /// The index in [`qps`](Self::qps) of QP `qpn` (to map a completion back to its QP).
    pub fn qp_index(&self, qpn: u32) -> Option<usize> {
        self.qps.iter().position(|q| q.qpn() == qpn)
    }

    /// Closes the link gracefully; poll the returned [`Closing`] until it says done. This side's QPs drain first
    /// (everything posted is sent and acknowledged), then a CLOSE tells the peer, whose QPs drain in turn and are
    /// destroyed ([`AsyncEvent::LinkClosed`](crate::AsyncEvent::LinkClosed) there), and its CLOSED lets this side
    /// destroy its QPs and the link's CQs. The peer sees a clean close, never a retry timeout. Everything must be
    /// done within the host's bootstrap timeout; after it the QPs are destroyed anyway and `poll` says `ETIMEDOUT`.
    pub fn close(self) -> Closing<P> {
        let host = self.qps.first().map(|q| Arc::clone(&q.host));
        let deadline = WallClock::now()
            + host
                .as_ref()
                .map_or(StdDuration::ZERO, |h| h.bootstrap_timeout);
        Closing {
            host,
            qpns: self.qps.iter().map(Qp::qpn).collect(),
            cqs: [Arc::clone(&self.send_cq.sh), Arc::clone(&self.recv_cq.sh)],
            token: random_u64(),
            deadline,
            waiting: None,
            done: false,
        }
    }
}

/// A link being closed ([`Link::close`]).
pub struct Closing<P: PlaneIo = UdpPlanes> {
    host: Option<Arc<Inner<P>>>,
    qpns: Vec<u32>,
    cqs: [Arc<CqShared>; 2],
    token: u64,
    deadline: WallClock,
    /// Once CLOSE is out: (destination, datagram, next resend, interval).
    waiting: Option<(SocketAddrV6, Vec<u8>, WallClock, StdDuration)>,
    done: bool,
}

impl<P: PlaneIo> std::fmt::Debug for Closing<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Closing")
            .field("qpns", &self.qpns)
            .field("sent", &self.waiting.is_some())
            .field("done", &self.done)
            .finish()
    }
}

impl<P: PlaneIo> Closing<P> {
    /// One step: `Ok(true)` once both sides destroyed their QPs (or the peer's were gone already), `Ok(false)`
    /// while draining or waiting for the peer; `ETIMEDOUT` when the bootstrap timeout passed first (this side's
    /// QPs are destroyed then too). In [`ProgressMode::Manual`] it runs a progress round.
    pub fn poll(&mut self) -> Result<bool, HostError> {
        if self.done {
            return Ok(true);
        }
        let Some(i) = self.host.clone() else {
            self.done = true;
            return Ok(true);
        };
        if i.mode == ProgressMode::Manual {
            i.round(&mut lock(&i.core))?;
        }
        let mut c = lock(&i.core);
        let now = WallClock::now();
        match &mut self.waiting {
            None => {
                // Closed by the peer already, or nobody to tell: just free what is left.
                let peer = self
                    .qpns
                    .iter()
                    .find_map(|q| c.links.get(q).map(|l| l.peer));
                let dest = peer
                    .and_then(|p| c.dp.peer_planes(p).and_then(|pl| pl.first().copied()))
                    .map(|p0| c.dp.node().destination(0, &p0, 0));
                let Some(dest) = dest else {
                    self.finish(&mut c);
                    return Ok(true);
                };
                if !self.qpns.iter().all(|&q| c.quiet(q)) {
                    if now >= self.deadline {
                        self.finish(&mut c);
                        return Err(HostError::Timeout(
                            "close (the link's QPs did not drain)".into(),
                        ));
                    }
                    return Ok(false);
                }
                let pairs: Vec<(u32, u32)> = self
                    .qpns
                    .iter()
                    .filter_map(|&q| c.links.get(&q).map(|l| (q, l.remote_qpn)))
                    .collect();
                // Tagged with the receive key of the peer's first QP named (spec HOST-AUTH-2).
                let Some(key) = pairs
                    .first()
                    .and_then(|(q, _)| c.links.get(q))
                    .map(|l| AuthKey::new(l.remote_key))
                else {
                    self.finish(&mut c);
                    return Ok(true);
                };
                let msg = seal(
                    &Msg::Close {
                        token: self.token,
                        pairs,
                        mac: [0; AUTH_LEN],
                    },
                    &key,
                );
                c.closing.insert(self.token, false);
                let _ = c.dp.send_host(0, dest, &msg);
                self.waiting = Some((dest, msg, now + RETRY_FIRST, RETRY_FIRST));
                Ok(false)
            }
            Some((dest, msg, next, interval)) => {
                if c.closing.get(&self.token) == Some(&true) {
                    self.finish(&mut c);
                    return Ok(true);
                }
                if now >= self.deadline {
                    self.finish(&mut c);
                    return Err(HostError::Timeout("close (no CLOSED from the peer)".into()));
                }
                if now >= *next {
                    let _ = c.dp.send_host(0, *dest, msg);
                    *interval = (*interval * 2).min(StdDuration::from_secs(1));
                    *next = now + *interval;
                }
                Ok(false)
            }
        }
    }

    /// Destroys this side's QPs and the link's CQs.
    fn finish(&mut self, c: &mut Core<P>) {
        for &q in &self.qpns {
            let _ = c.destroy_qp(q);
        }
        for cq in &self.cqs {
            let _ = c.destroy_cq(cq);
        }
        c.closing.remove(&self.token);
        self.done = true;
    }
}

impl<P: PlaneIo> Drop for Closing<P> {
    fn drop(&mut self) {
        if let Some(i) = &self.host {
            lock(&i.core).closing.remove(&self.token);
        }
    }
}
