//! Peers and host datagrams: blobs, peer resolution, CONNECT/ACCEPT/CLOSE handling.

use super::config::ProgressMode;
use super::info::AsyncEvent;
use super::state::{
    CLOSED_LINKS, ConnectReply, Core, Inner, PeerClose, RETRY_FIRST, lock, random_u64,
};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::time::{Duration as StdDuration, Instant as WallClock};

use mrc::PeerId;

use crate::bootstrap::{Blob, BlobKind, KEY_LEN, Msg, proves};
use crate::config::PeerPlane;
use crate::connect_queue::{Known, PendingConnect};
use crate::driver::HostDatagram;
use crate::error::HostError;
use crate::plane::PlaneIo;
use mrc::wire::AuthKey;

impl<P: PlaneIo> Inner<P> {
    pub(super) fn blob(&self, kind: BlobKind, key: [u8; KEY_LEN]) -> Blob {
        let p0 = self.local_planes.first().copied().unwrap_or(PeerPlane {
            addr: SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0),
            t0: 0,
        });
        Blob {
            planes: self.local_planes.len() as u8,
            usid: self.usid,
            plane0: p0.addr,
            t0: p0.t0,
            kind,
            rkey_hint: 0,
            addr_hint: 0,
            key,
        }
    }

    /// Where bootstrap datagrams for the node of `b` go: plane 0's address, through the uSID plan if any.
    pub(super) fn bootstrap_dest(&self, c: &Core<P>, b: &Blob) -> SocketAddrV6 {
        if self.usid {
            c.dp.node().destination(
                0,
                &PeerPlane {
                    addr: b.plane0,
                    t0: b.t0,
                },
                0,
            )
        } else {
            b.plane0
        }
    }

    /// The peer at `planes`, added to the table if new. A live peer is never rebound: planes that are partly
    /// another peer's are refused (spec HOST-PEER-1).
    // spec: HOST-PEER-1
    pub(super) fn peer_for(
        &self,
        c: &mut Core<P>,
        planes: &[PeerPlane],
    ) -> Result<PeerId, HostError> {
        let first = planes
            .first()
            .ok_or_else(|| HostError::Invalid("a peer with no planes".into()))?;
        if let Some(id) = c.dp.peer_at(&first.addr) {
            let same = c.dp.peer_planes(id).is_some_and(|known| {
                known.len() == planes.len()
                    && known.iter().zip(planes).all(|(k, p)| k.addr == p.addr)
            });
            if !same {
                return Err(HostError::Invalid(
                    "the peer's plane addresses differ from those of the live peer at its plane 0"
                        .into(),
                ));
            }
            return Ok(id);
        }
        Ok(c.dp.add_peer(planes.to_vec())?)
    }

    pub(super) fn host_datagrams(&self, c: &mut Core<P>) -> bool {
        let ds = c.dp.take_host_datagrams();
        let any = !ds.is_empty();
        for d in ds {
            let Ok(msg) = Msg::decode(&d.bytes) else {
                continue;
            };
            match msg {
                Msg::ResolveRequest { token } => {
                    let reply = Msg::ResolveReply {
                        token,
                        planes: self.local_planes.clone(),
                    }
                    .encode();
                    let _ = c.dp.send_host(d.plane, d.src, &reply);
                }
                Msg::ResolveReply { token, planes } => {
                    // spec: HOST-DGRAM-3
                    if c.resolving.remove(&token).is_some() {
                        let _ = self.peer_for(c, &planes);
                    }
                }
                Msg::Connect {
                    token,
                    listener,
                    planes,
                    qps,
                    app,
                    ..
                } => {
                    // Nothing is answered, queued or looked up further before the request proves the key of
                    // the listener it names (spec HOST-AUTH-1).
                    // spec: HOST-AUTH-1
                    let open = match c.listeners.lookup(listener) {
                        Some(Known::Open(k)) if proves(&d.bytes, &k) => true,
                        Some(Known::Closed(k)) if proves(&d.bytes, &k) => false,
                        _ => {
                            c.rejected += 1;
                            continue;
                        }
                    };
                    if !open {
                        let refuse = Msg::Refuse { token, reason: 1 }.encode();
                        let _ = c.dp.send_host(d.plane, d.src, &refuse);
                        continue;
                    }
                    let key = (d.src, token);
                    // spec: HOST-DGRAM-4
                    if let Some((_, (plane, bytes))) = c.accepted.iter().find(|(k, _)| *k == key) {
                        let (plane, bytes) = (*plane, bytes.clone());
                        let _ = c.dp.send_host(plane, d.src, &bytes);
                        continue;
                    }
                    let p = PendingConnect::new(d.src, d.plane, token, (planes, qps, app));
                    c.listeners.push(listener, p);
                }
                Msg::Accept {
                    token,
                    planes,
                    qps,
                    app,
                } => {
                    if let Some(r @ ConnectReply::Waiting) = c.connecting.get_mut(&token) {
                        *r = ConnectReply::Accepted(planes, qps, app);
                    }
                }
                Msg::Refuse { token, .. } => {
                    if let Some(r @ ConnectReply::Waiting) = c.connecting.get_mut(&token) {
                        *r = ConnectReply::Refused;
                    }
                }
                Msg::Close { token, pairs, .. } => {
                    self.peer_close(c, &d, token, &pairs);
                }
                Msg::Closed { token } => {
                    if let Some(done) = c.closing.get_mut(&token) {
                        *done = true;
                    }
                }
            }
        }
        any
    }

    /// A peer's CLOSE: only for QPs of a link to that peer, named with their remote QPNs, and only when it proves
    /// the receive key of the first QP it names here; otherwise it is dropped unanswered (spec HOST-DGRAM-6,
    /// HOST-AUTH-2).
    // spec: HOST-DGRAM-6
    // spec: HOST-AUTH-2
    pub(super) fn peer_close(
        &self,
        c: &mut Core<P>,
        d: &HostDatagram,
        token: u64,
        pairs: &[(u32, u32)],
    ) {
        let (src, plane) = (d.src, d.plane);
        let sender = c.dp.peer_at(&src);
        let ours = |c: &Core<P>, theirs: u32, ours: u32| {
            c.links
                .get(&ours)
                .is_some_and(|l| Some(l.peer) == sender && l.remote_qpn == theirs)
        };
        let key = pairs
            .first()
            .filter(|&&(t, o)| ours(c, t, o))
            .and_then(|&(_, o)| c.qps.get(&o))
            .map(|q| AuthKey::new(q.key));
        let Some(key) = key.filter(|k| proves(&d.bytes, k)) else {
            // An earlier CLOSED may have been lost: a repeat of a CLOSE done here proves the key it had.
            let done = c
                .closed_links
                .iter()
                .any(|(s, t, k)| *s == src && *t == token && proves(&d.bytes, k));
            if done {
                let _ = c.dp.send_host(plane, src, &Msg::Closed { token }.encode());
            } else {
                c.rejected += 1;
            }
            return;
        };
        let mine: Vec<u32> = pairs
            .iter()
            .filter(|&&(t, o)| ours(c, t, o))
            .map(|&(_, o)| o)
            .collect();
        if !c
            .peer_closes
            .iter()
            .any(|p| p.token == token && p.src == src)
        {
            c.peer_closes.push(PeerClose {
                src,
                plane,
                token,
                qpns: mine,
                key,
                deadline: WallClock::now() + self.bootstrap_timeout,
            });
        }
    }

    /// Peers' CLOSEs whose QPs have drained here (or ran out of time): destroy the QPs, tell the application,
    /// answer CLOSED.
    pub(super) fn peer_closes(&self, c: &mut Core<P>) -> bool {
        if c.peer_closes.is_empty() {
            return false;
        }
        let now = WallClock::now();
        let mut any = false;
        let mut k = 0;
        while k < c.peer_closes.len() {
            let p = &c.peer_closes[k];
            if now < p.deadline && !p.qpns.iter().all(|&q| c.quiet(q)) {
                k += 1;
                continue;
            }
            let p = c.peer_closes.swap_remove(k);
            for &qpn in &p.qpns {
                if c.destroy_qp(qpn).is_ok() {
                    self.event(AsyncEvent::LinkClosed { qpn });
                }
            }
            let _ =
                c.dp.send_host(p.plane, p.src, &Msg::Closed { token: p.token }.encode());
            if c.closed_links.len() >= CLOSED_LINKS {
                c.closed_links.pop_front();
            }
            c.closed_links.push_back((p.src, p.token, p.key));
            any = true;
        }
        any
    }
}

impl<P: PlaneIo> Inner<P> {
    /// The peer whose plane 0 is `plane0`, asking it for its planes if unknown (verbs RTR).
    pub(super) fn resolve(&self, plane0: SocketAddrV6, t0: u16) -> Result<PeerId, HostError> {
        let dest = if self.usid {
            let c = lock(&self.core);
            c.dp.node()
                .destination(0, &PeerPlane { addr: plane0, t0 }, 0)
        } else {
            plane0
        };
        self.resolve_at(plane0, dest)
    }

    pub(super) fn resolve_at(
        &self,
        plane0: SocketAddrV6,
        dest: SocketAddrV6,
    ) -> Result<PeerId, HostError> {
        let token = random_u64();
        let start = WallClock::now();
        let mut next = start;
        let mut interval = RETRY_FIRST;
        loop {
            {
                let mut c = lock(&self.core);
                if let Some(id) = c.dp.peer_at(&plane0) {
                    c.resolving.remove(&token);
                    return Ok(id);
                }
                let now = WallClock::now();
                if now.duration_since(start) > self.bootstrap_timeout {
                    c.resolving.remove(&token);
                    let via = if dest == plane0 {
                        String::new()
                    } else {
                        format!(" (plane 0 {plane0} through the uSID plan)")
                    };
                    return Err(HostError::Timeout(format!(
                        "peer resolution: no MRC host answered at {dest}{via} within {:?}; check the peer's \
                         address (verbs: the GID and LID it sent)",
                        self.bootstrap_timeout
                    )));
                }
                if now >= next {
                    c.resolving.insert(token, plane0);
                    let _ =
                        c.dp.send_host(0, dest, &Msg::ResolveRequest { token }.encode());
                    next = now + interval;
                    interval = (interval * 2).min(StdDuration::from_secs(1));
                }
                if self.mode == ProgressMode::Manual {
                    self.round(&mut c)?;
                    continue;
                }
            }
            self.kick();
            std::thread::sleep(StdDuration::from_micros(200));
        }
    }
}
