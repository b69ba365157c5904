//! The plane-I/O seam: what the one progress loop ([`Datapath`](crate::Datapath), [`Host`](crate::Host)) needs
//! from whatever carries its datagrams, one plane at a time.
//!
//! The loop is generic over [`PlaneIo`] and monomorphized for each implementation, so the UDP sockets
//! ([`UdpPlanes`], the default everywhere) pay no indirection: the same `sendmmsg`/`recvmmsg` calls on the same
//! batches as before the seam existed. Other carriers (an in-memory fabric for tests,
//! [`MemFabric`](crate::mem_plane::MemFabric); later AF_XDP or a NIC's queues) implement the same six calls.
//!
//! The currency is the socket layer's batches: [`TxBatch`] (datagrams with their destination and traffic
//! class, a payload possibly still in registered memory) and [`RxBatch`] (datagrams with their source and
//! traffic class). An implementation without system calls reads a `TxBatch` with
//! [`TxBatch::gather`] and fills an `RxBatch` with [`RxBatch::push`].

use std::io;
use std::net::SocketAddrV6;
use std::os::fd::{AsRawFd, RawFd};

use crate::config::NodeConfig;
use crate::socket::{PlaneSocket, RxBatch, SendError, TxBatch};

/// How datagrams leave and arrive on a node's planes.
///
/// Contract (what the progress loop relies on):
/// - **send** takes datagrams from the front of a plane's batch, in order, and says how many went; the loop
///   drops those from the batch. `WouldBlock` with none sent means "full, try later" (the loop keeps the batch,
///   leaves the plane out of the engine's ready mask and waits for [`fd`](Self::fd) to be writable). Any other
///   error concerns the first datagram only: the loop drops it and hands it to the engine as a bounce.
/// - **recv** never waits: `Ok(0)` when nothing is there.
/// - **recv_error** reports datagrams the network bounced (ICMP unreachable, a dead link), with at least the
///   start of the datagram: the engine reads its headers to retire the path (spec PATH-BOUNCE-1).
/// - **fd** is readable while `plane` has a datagram or a bounce waiting (and writable once it can take
///   datagrams again after a `WouldBlock`): the loop sleeps in `ppoll` on it with its doorbell. Planes may share
///   one descriptor.
/// - **port_change** reports the plane's carrier going down or up, if the carrier knows (a real NIC's link
///   state); the loop tells the engine as [`Host::set_port`](crate::Host::set_port) does.
pub trait PlaneIo: Send + 'static {
    /// How many planes.
    fn planes(&self) -> usize;
    /// The address peers send to on `plane` (with the real port).
    fn local_addr(&self, plane: usize) -> SocketAddrV6;
    /// Sends datagrams from the front of `batch` on `plane`; returns how many went.
    fn send(&mut self, plane: usize, batch: &mut TxBatch) -> io::Result<usize>;
    /// Receives up to `batch`'s capacity from `plane` without waiting; returns how many.
    fn recv(&mut self, plane: usize, batch: &mut RxBatch) -> io::Result<usize>;
    /// One bounced datagram of `plane`, if any.
    fn recv_error(&mut self, plane: usize) -> io::Result<Option<SendError>>;
    /// The descriptor to sleep on for `plane`.
    fn fd(&self, plane: usize) -> RawFd;
    /// A change of a plane's carrier since the last call: (plane, up). `None`: no change (or no carrier to ask).
    fn port_change(&mut self) -> Option<(usize, bool)> {
        None
    }
    /// Payload bytes per packet every plane carries: a QP profile's MTU of 0 means this.
    fn payload_mtu(&self) -> u32 {
        crate::pmtu::payload_for_link(crate::pmtu::FALLBACK_LINK_MTU)
    }
    /// Whether the carrier takes segmented trains and hands over coalesced receives ([`crate::offload`]).
    fn offload(&self) -> bool {
        false
    }
    /// Bytes the smallest plane's receive queue holds, when bounded: the host keeps its QPs' fixed windows
    /// within what its peer, configured alike, can queue.
    fn receive_buffer(&self) -> Option<usize> {
        None
    }
}

/// The default plane I/O: one non-blocking IPv6 UDP socket per plane (`sendmmsg`/`recvmmsg`, traffic class
/// both ways, the ICMP error queue).
#[derive(Debug)]
pub struct UdpPlanes {
    socks: Vec<PlaneSocket>,
    payload_mtu: u32,
    offload: bool,
}

impl UdpPlanes {
    /// Binds one socket per plane of `node`. `zero_checksum` turns off UDP checksums both ways (SRv6 uSID
    /// paths rewrite the destination inside the checksum; MRC's ICRC protects the packet instead).
    pub fn bind(node: &NodeConfig, zero_checksum: bool, buffer_bytes: usize) -> io::Result<Self> {
        let socks = node
            .planes
            .iter()
            .map(|p| PlaneSocket::bind(p.addr, zero_checksum, buffer_bytes))
            .collect::<io::Result<Vec<_>>>()?;
        Ok(Self {
            socks,
            payload_mtu: crate::pmtu::payload_mtu(node),
            offload: false,
        })
    }

    /// Sends segmented trains and takes coalesced receives ([`crate::offload`]); the sockets must send with UDP
    /// checksums (`bind` without `zero_checksum`).
    pub fn with_offload(mut self) -> io::Result<Self> {
        for s in &self.socks {
            s.receive_trains()?;
        }
        self.offload = true;
        Ok(self)
    }

    fn sock(&self, plane: usize) -> io::Result<&PlaneSocket> {
        self.socks
            .get(plane)
            .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "no such plane"))
    }
}

impl PlaneIo for UdpPlanes {
    fn planes(&self) -> usize {
        self.socks.len()
    }

    fn payload_mtu(&self) -> u32 {
        self.payload_mtu
    }

    fn offload(&self) -> bool {
        self.offload
    }

    fn receive_buffer(&self) -> Option<usize> {
        // SO_RCVBUF counts the kernel's per-datagram overhead too: half of it holds data.
        self.socks
            .iter()
            .filter_map(|s| s.receive_buffer().ok())
            .min()
            .map(|b| b / 2)
    }

    fn local_addr(&self, plane: usize) -> SocketAddrV6 {
        self.socks.get(plane).map_or(
            SocketAddrV6::new(std::net::Ipv6Addr::UNSPECIFIED, 0, 0, 0),
            PlaneSocket::local_addr,
        )
    }

    #[inline]
    fn send(&mut self, plane: usize, batch: &mut TxBatch) -> io::Result<usize> {
        self.sock(plane)?.send(batch, 0)
    }

    #[inline]
    fn recv(&mut self, plane: usize, batch: &mut RxBatch) -> io::Result<usize> {
        self.sock(plane)?.recv(batch)
    }

    fn recv_error(&mut self, plane: usize) -> io::Result<Option<SendError>> {
        self.sock(plane)?.recv_error()
    }

    fn fd(&self, plane: usize) -> RawFd {
        self.socks.get(plane).map_or(-1, AsRawFd::as_raw_fd)
    }
}
