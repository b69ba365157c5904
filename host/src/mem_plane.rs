//! An in-memory fabric: a [`PlaneIo`] with no sockets, for tests of the whole host (bootstrap, progress loop,
//! engine, placement) that must not depend on the kernel's network stack, its ports or its timing.
//!
//! Every node attached to a [`MemFabric`] gets, per plane, an address `[fd00::<node>]:<4791 + plane>` and a
//! receive queue. Sending on plane `p` to a node's plane-`p` address appends the datagram to that queue; plane
//! `p` never reaches another plane (as separate switches would not). Knobs, all deterministic:
//! - [`set_loss`](MemFabric::set_loss): drop datagrams at random at a given rate, from a seeded generator;
//! - [`set_plane_up`](MemFabric::set_plane_up): a plane's switch fails silently (a black hole) or recovers;
//! - [`set_carrier`](MemFabric::set_carrier): a plane's link goes down or up and every node is told, as a
//!   NIC's link state ([`PlaneIo::port_change`]);
//! - [`set_bounce`](MemFabric::set_bounce): what a down plane or an unknown destination drops comes back to
//!   the sender as a bounce, as ICMP unreachable would.
//!
//! Each node has one eventfd, readable while any of its queues holds something, so a progress thread sleeps on
//! it as on sockets.

use std::collections::{BTreeMap, VecDeque};
use std::io;
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::RawFd;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::plane::PlaneIo;
use crate::socket::{EventFd, RxBatch, SendError, TxBatch};

/// UDP port of plane 0 (plane `p` is at `PORT_BASE + p`).
pub(crate) const PORT_BASE: u16 = 4791;
/// Datagrams a node's plane queue holds; more are dropped (a full socket buffer).
const QUEUE_LIMIT: usize = 16384;
/// `errno` of a bounce: no route to the host.
const EHOSTUNREACH: i32 = 113;

/// Counters of a [`MemFabric`].
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct MemStats {
    /// Datagrams delivered to a queue, per plane.
    pub delivered: Vec<u64>,
    /// Dropped by the loss knob.
    pub dropped_loss: u64,
    /// Dropped because their plane was down (black hole or no carrier).
    pub dropped_down: u64,
    /// Dropped because no node has the destination on that plane.
    pub dropped_unknown: u64,
    /// Dropped because the receiver's queue was full.
    pub dropped_full: u64,
    /// Bounces returned to senders.
    pub bounced: u64,
}

struct Datagram {
    src: SocketAddrV6,
    tclass: u8,
    bytes: Vec<u8>,
}

struct Node {
    rx: Vec<VecDeque<Datagram>>,
    errors: Vec<VecDeque<SendError>>,
    fd: Arc<EventFd>,
}

impl Node {
    fn is_empty(&self) -> bool {
        self.rx.iter().all(VecDeque::is_empty) && self.errors.iter().all(VecDeque::is_empty)
    }
}

struct State {
    planes: usize,
    nodes: BTreeMap<u32, Node>,
    next_id: u32,
    /// `false`: the plane's switch drops everything.
    up: Vec<bool>,
    /// `false`: the plane's link is down and nodes are told.
    carrier: Vec<bool>,
    bounce: bool,
    loss_per_million: u32,
    rng: u64,
    stats: MemStats,
}

impl State {
    /// xorshift64*: deterministic for a seed.
    fn random(&mut self) -> u64 {
        let mut x = self.rng;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.rng = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn deliver(&mut self, from: u32, plane: usize, dest: SocketAddrV6, d: Datagram) {
        if !self.up[plane] || !self.carrier[plane] {
            self.stats.dropped_down += 1;
            self.bounce(from, plane, dest, d.bytes);
            return;
        }
        if self.loss_per_million > 0 && self.random() % 1_000_000 < u64::from(self.loss_per_million)
        {
            self.stats.dropped_loss += 1;
            return;
        }
        let target = node_of(&dest).filter(|&(_, p)| p == plane);
        let Some(node) = target.and_then(|(id, _)| self.nodes.get_mut(&id)) else {
            self.stats.dropped_unknown += 1;
            self.bounce(from, plane, dest, d.bytes);
            return;
        };
        let q = &mut node.rx[plane];
        if q.len() >= QUEUE_LIMIT {
            self.stats.dropped_full += 1;
            return;
        }
        q.push_back(d);
        node.fd.signal();
        self.stats.delivered[plane] += 1;
    }

    fn bounce(&mut self, from: u32, plane: usize, dest: SocketAddrV6, mut bytes: Vec<u8>) {
        if !self.bounce {
            return;
        }
        let Some(node) = self.nodes.get_mut(&from) else {
            return;
        };
        // As ICMP: the start of the datagram, enough for its headers.
        bytes.truncate(256);
        node.errors[plane].push_back(SendError {
            dest,
            errno: EHOSTUNREACH,
            offender: None,
            payload: bytes,
        });
        node.fd.signal();
        self.stats.bounced += 1;
    }
}

/// The address of `node`'s `plane`.
fn addr_of(node: u32, plane: usize) -> SocketAddrV6 {
    SocketAddrV6::new(
        Ipv6Addr::from(0xfd00u128 << 112 | u128::from(node)),
        PORT_BASE + plane as u16,
        0,
        0,
    )
}

/// The (node, plane) an address names, if it is a fabric address.
fn node_of(a: &SocketAddrV6) -> Option<(u32, usize)> {
    let ip = u128::from(*a.ip());
    if ip >> 112 != 0xfd00 || ip >> 32 & 0xffff_ffff_ffff_ffff_ffff != 0 {
        return None;
    }
    let plane = a.port().checked_sub(PORT_BASE)?;
    Some((ip as u32, usize::from(plane)))
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// An in-memory fabric of `planes` planes that nodes attach to. Cheap to clone (one shared fabric).
#[derive(Clone)]
pub struct MemFabric(Arc<Mutex<State>>);

impl std::fmt::Debug for MemFabric {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let s = lock(&self.0);
        f.debug_struct("MemFabric")
            .field("planes", &s.planes)
            .field("nodes", &s.nodes.len())
            .field("stats", &s.stats)
            .finish()
    }
}

impl MemFabric {
    /// A fabric of `planes` planes (1..=16), all up, lossless, no bounces.
    pub fn new(planes: usize) -> Self {
        let planes = planes.clamp(1, crate::config::MAX_PLANES);
        Self(Arc::new(Mutex::new(State {
            planes,
            nodes: BTreeMap::new(),
            next_id: 1,
            up: vec![true; planes],
            carrier: vec![true; planes],
            bounce: false,
            loss_per_million: 0,
            rng: 0x9E37_79B9_7F4A_7C15,
            stats: MemStats {
                delivered: vec![0; planes],
                ..MemStats::default()
            },
        })))
    }

    /// Attaches a new node: its plane I/O (hand it to [`Host::start_with`](crate::Host::start_with) or
    /// [`Datapath::with_io`](crate::Datapath::with_io)). Dropping it detaches the node: datagrams to it are then
    /// dropped (a vanished host).
    pub fn attach(&self) -> io::Result<MemPlanes> {
        let fd = Arc::new(EventFd::new()?);
        let mut s = lock(&self.0);
        let id = s.next_id;
        s.next_id += 1;
        let planes = s.planes;
        s.nodes.insert(
            id,
            Node {
                rx: (0..planes).map(|_| VecDeque::new()).collect(),
                errors: (0..planes).map(|_| VecDeque::new()).collect(),
                fd: Arc::clone(&fd),
            },
        );
        Ok(MemPlanes {
            fabric: Arc::clone(&self.0),
            id,
            planes,
            fd,
            carrier: s.carrier.clone(),
        })
    }

    /// Fails (`false`) or recovers plane `plane`'s switch: while failed it drops every datagram silently (the
    /// nodes are not told; the engine finds out by loss).
    pub fn set_plane_up(&self, plane: usize, up: bool) {
        if let Some(u) = lock(&self.0).up.get_mut(plane) {
            *u = up;
        }
    }

    /// Takes plane `plane`'s link down or up: datagrams on it are dropped and every node sees the change
    /// ([`PlaneIo::port_change`]), as a NIC's link state.
    pub fn set_carrier(&self, plane: usize, up: bool) {
        let mut s = lock(&self.0);
        if let Some(c) = s.carrier.get_mut(plane) {
            *c = up;
            for n in s.nodes.values() {
                n.fd.signal();
            }
        }
    }

    /// Drops `per_million` of the datagrams at random, the generator seeded with `seed` (same seed, same
    /// drops for the same sequence of sends).
    pub fn set_loss(&self, per_million: u32, seed: u64) {
        let mut s = lock(&self.0);
        s.loss_per_million = per_million.min(1_000_000);
        s.rng = seed | 1;
    }

    /// Whether datagrams dropped for a down plane or an unknown destination come back to the sender as bounces.
    pub fn set_bounce(&self, on: bool) {
        lock(&self.0).bounce = on;
    }

    /// Counters.
    pub fn stats(&self) -> MemStats {
        lock(&self.0).stats.clone()
    }

    /// Puts `bytes` straight into the receive queue of plane `plane` at the node `dest` names, as if `src` had
    /// sent them (spoofed, past a failed switch): an off-path attacker next to the victim, for tests and fuzzing.
    /// `false` when `dest` is no attached node's plane `plane`.
    pub fn inject(
        &self,
        plane: usize,
        src: SocketAddrV6,
        dest: SocketAddrV6,
        bytes: &[u8],
    ) -> bool {
        let mut s = lock(&self.0);
        let Some((id, p)) = node_of(&dest).filter(|&(_, p)| p == plane) else {
            return false;
        };
        let Some(node) = s.nodes.get_mut(&id) else {
            return false;
        };
        let Some(q) = node.rx.get_mut(p) else {
            return false;
        };
        q.push_back(Datagram {
            src,
            tclass: 0,
            bytes: bytes.to_vec(),
        });
        node.fd.signal();
        true
    }
}

/// One node's planes on a [`MemFabric`].
pub struct MemPlanes {
    fabric: Arc<Mutex<State>>,
    id: u32,
    planes: usize,
    fd: Arc<EventFd>,
    /// Carrier states as last reported by `port_change`.
    carrier: Vec<bool>,
}

impl std::fmt::Debug for MemPlanes {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MemPlanes")
            .field("node", &self.id)
            .field("planes", &self.planes)
            .finish()
    }
}

impl Drop for MemPlanes {
    fn drop(&mut self) {
        lock(&self.fabric).nodes.remove(&self.id);
    }
}

impl MemPlanes {
    fn check(&self, plane: usize) -> io::Result<()> {
        if plane < self.planes {
            Ok(())
        } else {
            Err(io::Error::new(io::ErrorKind::InvalidInput, "no such plane"))
        }
    }

    /// After taking from the queues: clear the eventfd if nothing is left (under the fabric lock, so a datagram
    /// queued later signals it again).
    fn settle(&self, s: &State) {
        if s.nodes.get(&self.id).is_none_or(Node::is_empty) {
            self.fd.drain();
        }
    }
}

impl PlaneIo for MemPlanes {
    fn planes(&self) -> usize {
        self.planes
    }

    /// Packets of 8 KiB: a transfer is many packets, so a fault lands while some are in flight.
    fn payload_mtu(&self) -> u32 {
        8192
    }

    fn local_addr(&self, plane: usize) -> SocketAddrV6 {
        addr_of(self.id, plane)
    }

    fn send(&mut self, plane: usize, batch: &mut TxBatch) -> io::Result<usize> {
        self.check(plane)?;
        let src = addr_of(self.id, plane);
        let mut s = lock(&self.fabric);
        for i in 0..batch.len() {
            let mut bytes = Vec::new();
            batch.gather(i, &mut bytes);
            let d = Datagram {
                src,
                tclass: batch.tclass(i),
                bytes,
            };
            s.deliver(self.id, plane, batch.dest(i), d);
        }
        Ok(batch.len())
    }

    fn recv(&mut self, plane: usize, batch: &mut RxBatch) -> io::Result<usize> {
        self.check(plane)?;
        batch.clear();
        let mut s = lock(&self.fabric);
        if let Some(n) = s.nodes.get_mut(&self.id) {
            while batch.len() < batch.capacity() {
                let Some(d) = n.rx[plane].pop_front() else {
                    break;
                };
                batch.push(&d.bytes, d.src, d.tclass);
            }
        }
        self.settle(&s);
        Ok(batch.len())
    }

    fn recv_error(&mut self, plane: usize) -> io::Result<Option<SendError>> {
        self.check(plane)?;
        let mut s = lock(&self.fabric);
        let e = s
            .nodes
            .get_mut(&self.id)
            .and_then(|n| n.errors[plane].pop_front());
        self.settle(&s);
        Ok(e)
    }

    fn fd(&self, _plane: usize) -> RawFd {
        self.fd.fd()
    }

    fn port_change(&mut self) -> Option<(usize, bool)> {
        let s = lock(&self.fabric);
        let p = (0..self.planes).find(|&p| s.carrier[p] != self.carrier[p])?;
        self.carrier[p] = s.carrier[p];
        Some((p, self.carrier[p]))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(io: &mut MemPlanes, plane: usize) -> Vec<(Vec<u8>, SocketAddrV6, u8)> {
        let mut rx = RxBatch::new(8, 64);
        let n = io.recv(plane, &mut rx).unwrap();
        (0..n)
            .map(|i| {
                let (p, src, tc, _) = rx.get(i);
                (p.to_vec(), src, tc)
            })
            .collect()
    }

    #[test]
    fn planes_stay_apart_and_knobs_drop_bounce_and_tell() {
        let f = MemFabric::new(2);
        let mut a = f.attach().unwrap();
        let mut b = f.attach().unwrap();
        let mut tx = TxBatch::new(4, 64);
        let mut buf = vec![7u8; 64];
        // To b's plane 1 address, on plane 1: delivered with its traffic class. On plane 0: another switch.
        assert!(tx.push(&mut buf, 3, b.local_addr(1), 0x1c));
        assert_eq!(a.send(1, &mut tx).unwrap(), 1);
        assert_eq!(a.send(0, &mut tx).unwrap(), 1);
        assert_eq!(one(&mut b, 1), vec![(vec![7, 7, 7], a.local_addr(1), 0x1c)]);
        assert!(one(&mut b, 0).is_empty());
        assert_eq!(f.stats().dropped_unknown, 1);
        // A black hole drops silently; with bounces on, the sender gets the datagram back.
        f.set_plane_up(1, false);
        a.send(1, &mut tx).unwrap();
        assert!(a.recv_error(1).unwrap().is_none());
        f.set_bounce(true);
        a.send(1, &mut tx).unwrap();
        let e = a.recv_error(1).unwrap().unwrap();
        assert_eq!(
            (e.dest, e.payload.as_slice()),
            (b.local_addr(1), &[7u8, 7, 7][..])
        );
        f.set_plane_up(1, true);
        // Carrier changes are reported once to every node.
        f.set_carrier(0, false);
        assert_eq!(b.port_change(), Some((0, false)));
        assert_eq!(b.port_change(), None);
        f.set_carrier(0, true);
        assert_eq!(a.port_change(), None);
        assert_eq!(b.port_change(), Some((0, true)));
        // The loss knob is deterministic for a seed.
        let mut lost = Vec::new();
        for _ in 0..2 {
            f.set_loss(500_000, 42);
            let before = f.stats().dropped_loss;
            for _ in 0..64 {
                a.send(1, &mut tx).unwrap();
            }
            lost.push(f.stats().dropped_loss - before);
        }
        assert_eq!(lost[0], lost[1]);
        assert!(
            lost[0] > 10 && lost[0] < 54,
            "{} of 64 lost at 50%",
            lost[0]
        );
        // A detached node is unknown.
        drop(b);
        f.set_loss(0, 1);
        let unknown = f.stats().dropped_unknown;
        a.send(1, &mut tx).unwrap();
        assert_eq!(f.stats().dropped_unknown, unknown + 1);
    }
}
