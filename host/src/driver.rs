//! [`Datapath`]: an [`Endpoint`] driven over a [`PlaneIo`] — by default ([`UdpEndpoint`]) one UDP socket per
//! plane.
//!
//! One call to [`Datapath::poll`] is one round of progress: drain every plane (placing payload straight into
//! registered memory), read the ICMP error queues (a dead path is retired at once instead of after a timeout),
//! run due timers, then send everything the engine has, batched per plane with `sendmmsg`. A plane whose
//! socket buffer is full is left out of the ready mask, so the engine moves that plane's share of traffic to
//! the others instead of queueing behind it. Drive it from the application (poll mode) or hand it to a
//! progress thread of [`Host`](crate::Host).

use std::collections::BTreeMap;
use std::io;
use std::net::SocketAddrV6;
use std::os::fd::RawFd;

use crate::capture::{Capture, CaptureStats};
use crate::config::{NodeConfig, PeerPlane};
use crate::memory::HostMemory;
use crate::plane::{PlaneIo, UdpPlanes};
use crate::socket::{RxBatch, SendError, TxBatch, wait};
use mrc::EvConfig;
use mrc::cc::{CcConfig, NsccConfig};
use mrc::config::{ConfigError, EndpointConfig, QpConfig};
use mrc::endpoint::{Endpoint, RecvMeta, TrimMark};
use mrc::mem::{Access, MrKeys, Pd};
use mrc::qp::{ConnInfo, ModifyError, PeerId, QpInit};
use mrc::time::Duration;
use mrc::time::Instant;
use mrc::wire::{PSN_MASK, TrafficClass, UsidContainer, traffic_class};

/// Datagrams per `sendmmsg`.
const BATCH: usize = 32;
/// Datagrams per `recvmmsg` and plane. Small, because the receiver reads the planes' sockets in turn: a socket's
/// batch spans the time the sender took to spray `RX_BATCH × planes` packets, and packets of the other planes
/// from that span are read (and acknowledged) only after it. Large batches would make the planes look
/// reordered by milliseconds and set off time-based loss detection at the sender.
const RX_BATCH: usize = 8;
/// Rounds of receive batches (one per plane each) per poll before the transmit side gets a turn.
const RX_ROUNDS: usize = 4;
/// Rounds between reads of the planes' error queues when no receive reported an error.
const ERROR_QUEUE_EVERY: u32 = 16;

/// Tuning of the socket layer.
#[derive(Debug, Clone)]
pub struct DatapathConfig {
    /// Socket send and receive buffer size.
    pub socket_buffer: usize,
    /// Largest datagram: the QPs' MTU plus headers.
    pub max_datagram: usize,
    /// How long [`UdpEndpoint::poll`] keeps spinning with nothing to do before it sleeps in `ppoll`. A sleeping
    /// receiver must be woken for every datagram, and on veth that wake-up is paid by the *sender's* CPU (the
    /// whole forwarding chain runs in its softirq), so spinning a little keeps the wake-ups off the data path.
    /// RDMA applications poll their CQs the same way.
    pub busy_poll: Duration,
}

impl Default for DatapathConfig {
    fn default() -> Self {
        Self {
            socket_buffer: 8 << 20,
            max_datagram: 9000,
            busy_poll: Duration::from_micros(200),
        }
    }
}

/// Counters of the socket layer (the engine keeps its own).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct DatapathStats {
    /// Datagrams sent.
    pub tx_datagrams: u64,
    /// `sendmmsg` calls.
    pub tx_batches: u64,
    /// Datagrams dropped because sending failed (no route, ...).
    pub tx_errors: u64,
    /// Times a plane's socket buffer was full.
    pub tx_blocked: u64,
    /// Trains the kernel refused (the plane then sends datagram by datagram).
    pub tx_offload_refused: u64,
    /// Datagrams received.
    pub rx_datagrams: u64,
    /// Received datagrams longer than `max_datagram` (dropped).
    pub rx_oversize: u64,
    /// Received datagrams with a trim mark in the traffic class.
    pub rx_trimmed: u64,
    /// Received datagrams from an address that belongs to no peer (dropped).
    pub rx_unknown_source: u64,
    /// ICMP errors and local send errors that retired a path.
    pub unreachable: u64,
    /// Host-level datagrams (bootstrap, peer resolution) received; the engine never sees them.
    pub rx_host: u64,
    /// Host-level datagrams dropped because too many were waiting.
    pub rx_host_dropped: u64,
    /// Host-level datagrams sent.
    pub tx_host: u64,
}

/// A host-level datagram (bootstrap or peer resolution, see [`crate::bootstrap`]) as it arrived.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HostDatagram {
    /// The plane whose socket received it.
    pub plane: usize,
    /// Its source.
    pub src: SocketAddrV6,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Host-level datagrams kept between two reads by the host; more are dropped (a sender retries).
const HOST_RX_QUEUE: usize = 256;

/// What this node tells a peer so the peer can reach it: one entry per plane.
pub(crate) type LocalPlanes = Vec<PeerPlane>;

/// An MRC endpoint over real UDP sockets, one per plane: the datapath every front end uses.
pub type UdpEndpoint = Datapath<UdpPlanes>;

/// An MRC endpoint driven over a plane I/O `P` (UDP sockets unless said otherwise): the engine, the peer table,
/// registered memory and one round of progress at a time. Generic rather than boxed so that the UDP datapath
/// is compiled for its sockets, with no indirection per batch.
pub struct Datapath<P: PlaneIo = UdpPlanes> {
    ep: Endpoint,
    node: NodeConfig,
    io: P,
    /// `io.planes()`, cached.
    planes: usize,
    peers: Vec<Vec<PeerPlane>>,
    /// (source address, port) → peer, to tell the engine who sent a datagram.
    by_source: BTreeMap<(u128, u16), PeerId>,
    /// Registered memory: the placement target.
    pub(crate) mem: HostMemory,
    epoch: std::time::Instant,
    tx: Vec<TxBatch>,
    scratch: Vec<u8>,
    rx: RxBatch,
    stats: DatapathStats,
    blocked: Vec<bool>,
    zero_checksum: bool,
    plane_bits: u8,
    max_datagram: usize,
    busy_poll: Duration,
    /// When the last busy round ended (poll mode spins until `busy_poll` after it).
    last_busy: std::time::Instant,
    /// Host-level datagrams received and not yet taken.
    host_rx: Vec<HostDatagram>,
    /// Carrier changes the plane I/O reported (already applied to the engine), for the host to announce.
    port_changes: Vec<(u8, bool)>,
    /// The pcapng capture, when one is on: tested once per batch.
    capture: Option<Box<Capture>>,
    /// A receive failed with an error an ICMP message queued: read the error queues this round.
    errors_due: bool,
    /// Rounds since the error queues were last read (they are read every [`ERROR_QUEUE_EVERY`] rounds anyway).
    errors_age: u32,
}

impl<P: PlaneIo> std::fmt::Debug for Datapath<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Datapath")
            .field("planes", &self.planes)
            .field("peers", &self.peers.len())
            .field("stats", &self.stats)
            .finish()
    }
}

/// Why a [`UdpEndpoint`] could not start.
#[derive(Debug)]
pub enum StartError {
    /// The configuration is wrong.
    Config(ConfigError),
    /// A socket could not be set up.
    Io(io::Error),
}

impl std::fmt::Display for StartError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            StartError::Config(e) => write!(f, "configuration: {e}"),
            StartError::Io(e) => write!(f, "socket: {e}"),
        }
    }
}

impl std::error::Error for StartError {}

impl From<ConfigError> for StartError {
    fn from(e: ConfigError) -> Self {
        StartError::Config(e)
    }
}

impl From<io::Error> for StartError {
    fn from(e: io::Error) -> Self {
        StartError::Io(e)
    }
}

impl Datapath<UdpPlanes> {
    /// Binds one socket per plane of `node` and starts an endpoint with one port per plane.
    pub fn new(
        node: NodeConfig,
        cfg: EndpointConfig,
        dp: DatapathConfig,
    ) -> Result<Self, StartError> {
        // SRv6 hops rewrite the destination inside UDP's pseudo-header, so the UDP checksum cannot survive
        // them: turn it off and rely on MRC's ICRC (spec WIRE-ICRC-1).
        let io = UdpPlanes::bind(&node, node.usid_block.is_some(), dp.socket_buffer)?;
        Self::with_io(io, node, cfg, dp)
    }
}

impl<P: PlaneIo> Datapath<P> {
    /// Starts an endpoint with one port per plane of `io`, which must carry as many planes as `node` has
    /// (`node` gives the T0s and the uSID plan; `io` the addresses).
    pub fn with_io(
        io: P,
        node: NodeConfig,
        mut cfg: EndpointConfig,
        dp: DatapathConfig,
    ) -> Result<Self, StartError> {
        if io.planes() != node.plane_count() || io.planes() == 0 {
            return Err(StartError::Config(ConfigError::new(
                "planes",
                format!(
                    "the plane I/O carries {} planes and the node has {}",
                    io.planes(),
                    node.plane_count()
                ),
            )));
        }
        cfg.ports = node.plane_count() as u8;
        if cfg.qpn_seed == 0 {
            // spec: SEC-QPN-1
            cfg.qpn_seed = os_random_u64();
        }
        let ep = Endpoint::new(cfg)?;
        let zero_checksum = node.usid_block.is_some();
        let max_datagram = dp.max_datagram.max(256);
        let planes = node.plane_count();
        let offload = io.offload();
        // A coalesced receive holds up to 64 KiB of datagrams.
        let rx_slot = if offload { 1 << 16 } else { max_datagram };
        Ok(Self {
            ep,
            plane_bits: EvConfig::with_planes(planes as u8, 1).plane_bits,
            node,
            tx: (0..planes)
                .map(|_| TxBatch::new(BATCH, max_datagram).with_segmentation(offload))
                .collect(),
            scratch: vec![0; max_datagram],
            rx: RxBatch::new(RX_BATCH, rx_slot),
            io,
            planes,
            peers: Vec::new(),
            by_source: BTreeMap::new(),
            mem: HostMemory::default(),
            epoch: std::time::Instant::now(),
            stats: DatapathStats::default(),
            blocked: vec![false; planes],
            zero_checksum,
            max_datagram,
            busy_poll: dp.busy_poll,
            last_busy: std::time::Instant::now(),
            errors_due: false,
            errors_age: 0,
            host_rx: Vec::new(),
            port_changes: Vec::new(),
            capture: None,
        })
    }

    /// The engine, for QPs, CQs, posting and counters.
    pub fn endpoint(&mut self) -> &mut Endpoint {
        &mut self.ep
    }

    /// The engine, read-only.
    pub fn endpoint_ref(&self) -> &Endpoint {
        &self.ep
    }

    /// The node's configuration.
    pub fn node(&self) -> &NodeConfig {
        &self.node
    }

    /// The EV configuration QPs on this datapath use: one plane per socket.
    pub fn ev_config(&self, per_plane: u16) -> EvConfig {
        EvConfig::with_planes(self.node.plane_count() as u8, per_plane)
    }

    /// Transport settings for a host that moves packets in software: RTTs of tens of µs to a few ms with
    /// scheduling jitter, and batches of datagrams per system call. `cc` is usually [`software_cc`].
    pub fn software_qp_config(&self, mtu: u32, evs_per_plane: u16, cc: CcConfig) -> QpConfig {
        let base_rtt = Duration::from_micros(500);
        let mut ev = self.ev_config(evs_per_plane);
        // A retired path is probed every 2 ms or more, not every 100 µs: a software host has no spare packet
        // rate, and a probe storm delays acknowledgements, which retires more paths. For the same reason one
        // clean answer brings a path back, not three: under 1% random loss every loss retires a path, and three
        // probe round trips each cost 2.7% of the packets (the kernel fabric forwards per packet, whatever
        // its size) for 3% less goodput. A path that is really grey is retired again at its next loss.
        ev.probe_min = Duration::from_millis(2);
        ev.probe_max = Duration::from_millis(100);
        ev.probe_clean = 1;
        QpConfig {
            mtu,
            base_rtt,
            ev,
            cc,
            // A receiver may not run for a while: RTT samples jitter by milliseconds, so loss by time waits at
            // least 1 ms (plus 4 RTT deviations) and the RTO 4 ms. Each ms of that wait is a ms in which a lost
            // packet holds its message's completion (and with it every later one) and a slot of the fixed
            // window: on the 8-plane fabric, 2 ms took 2-3 ms of goodput after a plane cut and 5-15% of it at 1%
            // random drop; 1 ms halved the first and brought the second to 2-8%, with as few spurious losses
            // (tools/tests, host/tests/loaded_host.rs).
            reorder_min: Some(Duration::from_millis(1)),
            rto_min: Some(Duration::from_millis(4)),
            sack_every_packets: 8,
            sack_every_bytes: 256 * 1024,
            sack_delay: Duration::from_micros(20),
            ..QpConfig::default()
        }
    }

    /// Whether UDP checksums are off (uSID mode).
    pub fn zero_checksum(&self) -> bool {
        self.zero_checksum
    }

    /// The engine's clock: nanoseconds since this endpoint started.
    pub fn now(&self) -> Instant {
        Instant::from_nanos(self.epoch.elapsed().as_nanos() as u64)
    }

    /// What peers need to reach this node: the bound address of every plane and the plane's T0.
    pub fn local_planes(&self) -> LocalPlanes {
        self.node
            .planes
            .iter()
            .enumerate()
            .map(|(i, p)| PeerPlane {
                addr: self.io.local_addr(i),
                t0: p.t0,
            })
            .collect()
    }

    /// Adds a peer reachable at `planes` (one entry per plane, from its [`local_planes`](Self::local_planes)).
    pub fn add_peer(&mut self, planes: LocalPlanes) -> Result<PeerId, ConfigError> {
        if planes.len() != self.planes {
            return Err(ConfigError::new(
                "peer.planes",
                format!(
                    "the peer has {} planes and this node {}; both ends need the same planes",
                    planes.len(),
                    self.planes
                ),
            ));
        }
        // A live peer's addresses are never rebound to another (spec HOST-PEER-1): its datagrams would be
        // taken for the newcomer's.
        // spec: HOST-PEER-1
        if let Some(p) = planes.iter().find(|p| {
            self.by_source
                .contains_key(&(u128::from(*p.addr.ip()), p.addr.port()))
        }) {
            return Err(ConfigError::new(
                "peer.planes",
                format!("{} is already a plane of another peer", p.addr),
            ));
        }
        let id = PeerId(self.peers.len() as u32);
        for p in &planes {
            self.by_source
                .insert((u128::from(*p.addr.ip()), p.addr.port()), id);
        }
        self.peers.push(planes);
        Ok(id)
    }

    /// Allocates `len` zeroed bytes of datapath-owned memory and registers them with `access`.
    pub fn alloc_mr(
        &mut self,
        pd: Pd,
        len: usize,
        access: Access,
    ) -> Result<(u64, MrKeys), ConfigError> {
        let addr = self.mem.alloc(len);
        match self.ep.reg_mr(pd, addr, len as u64, access) {
            Ok(k) => Ok((addr, k)),
            Err(e) => {
                self.mem.forget(addr);
                Err(ConfigError::new(
                    "mr",
                    format!("registration failed: {e:?}"),
                ))
            }
        }
    }

    /// The bytes of a region [`alloc_mr`](Self::alloc_mr) returned (its address), to fill or read it.
    pub fn buffer(&mut self, addr: u64) -> Option<&mut [u8]> {
        self.mem.bytes_mut(addr)
    }

    /// Accesses the memory layer refused: outside every region it holds (a bug upstream if ever non-zero).
    pub fn refused_accesses(&self) -> u64 {
        self.mem.refused
    }

    /// Creates a QP and brings it to INIT granting `access`; returns its number and the blob the peer needs
    /// (exchange it out of band, with [`local_planes`](Self::local_planes)).
    pub fn create_qp(
        &mut self,
        init: QpInit,
        access: Access,
    ) -> Result<(u32, ConnInfo), ConfigError> {
        let now = self.now();
        let qpn = self.ep.open_qp(init, access, now)?;
        let Some(mut info) = self.ep.conn_info(qpn, initial_psn()) else {
            return Err(ConfigError::new("qp", "the QP vanished as it was opened"));
        };
        info.addr = u128::from(*self.io.local_addr(0).ip());
        Ok((qpn, info))
    }

    /// Connects QP `local.qpn` to the peer's QP described by `remote` (INIT → RTR → RTS).
    pub fn connect_qp(
        &mut self,
        local: &ConnInfo,
        peer: PeerId,
        remote: &ConnInfo,
    ) -> Result<(), ModifyError> {
        let now = self.now();
        self.ep.connect_qp(local.qpn, peer, remote, local.psn, now)
    }

    /// Counters of the socket layer.
    pub fn stats(&self) -> DatapathStats {
        self.stats
    }

    /// Starts writing what this endpoint sends and receives to `capture` (replacing a capture already on, which
    /// is returned unfinished), or stops with `None`.
    pub fn set_capture(&mut self, capture: Option<Capture>) -> Option<Capture> {
        std::mem::replace(&mut self.capture, capture.map(Box::new)).map(|b| *b)
    }

    /// What the capture wrote so far, if one is on.
    pub fn capture_stats(&self) -> Option<CaptureStats> {
        self.capture.as_ref().map(|c| c.stats())
    }

    /// Descriptors to wait on (one per plane).
    pub fn fds(&self) -> Vec<RawFd> {
        (0..self.planes).map(|p| self.io.fd(p)).collect()
    }

    /// The plane I/O, read-only (an in-memory fabric's counters, a socket's address).
    pub fn io(&self) -> &P {
        &self.io
    }

    /// Carrier changes the plane I/O reported since the last call (the engine already knows them).
    pub fn take_port_changes(&mut self) -> Vec<(u8, bool)> {
        std::mem::take(&mut self.port_changes)
    }

    /// Planes whose socket buffer was full at the last attempt (wait for them to become writable).
    pub fn blocked(&self) -> &[bool] {
        &self.blocked
    }

    /// One round of progress without waiting; returns whether anything happened (a datagram in or out, or a
    /// timer), so a caller can spin while busy and sleep when idle.
    pub fn progress(&mut self) -> io::Result<bool> {
        let mut busy = false;
        // spec: HOST-IO-3
        while let Some((plane, up)) = self.io.port_change() {
            let Ok(plane) = u8::try_from(plane) else {
                continue;
            };
            let now = self.now();
            self.ep.set_port_state(now, plane, up);
            self.port_changes.push((plane, up));
            busy = true;
        }
        busy |= self.receive()?;
        busy |= self.read_errors()?;
        let now = self.now();
        if self.ep.poll_timeout().is_some_and(|t| t <= now) {
            self.ep.handle_timeout(now);
            busy = true;
        }
        busy |= self.transmit()?;
        Ok(busy)
    }

    /// How long the engine can wait before its next timer, capped at `max`.
    pub fn idle_timeout(&self, max: Duration) -> Duration {
        match self.ep.poll_timeout() {
            None => max,
            Some(t) => {
                let now = self.now();
                Duration::from_nanos(t.as_nanos().saturating_sub(now.as_nanos())).min(max)
            }
        }
    }

    /// Application-driven poll mode: one round of progress, then, if it found nothing to do for longer than
    /// [`DatapathConfig::busy_poll`], waits for a datagram, a writable blocked plane or the next timer, at most
    /// `max_wait`.
    pub fn poll(&mut self, max_wait: Duration) -> io::Result<()> {
        if self.progress()? {
            self.last_busy = std::time::Instant::now();
            return Ok(());
        }
        if self.last_busy.elapsed() < self.busy_poll {
            return Ok(());
        }
        let wait_for = self.idle_timeout(max_wait);
        if !wait_for.is_zero() {
            wait(&self.fds(), &self.blocked, Some(wait_for))?;
        }
        Ok(())
    }

    fn receive(&mut self) -> io::Result<bool> {
        let mut any = false;
        // One batch per plane per round, so the planes interleave about as they would on one NIC queue.
        for _ in 0..RX_ROUNDS {
            let mut got = false;
            for plane in 0..self.planes {
                got |= self.receive_batch(plane)? > 0;
            }
            any |= got;
            if !got {
                break;
            }
        }
        Ok(any)
    }

    fn receive_batch(&mut self, plane: usize) -> io::Result<usize> {
        // spec: HOST-IO-2
        let n = match self.io.recv(plane, &mut self.rx) {
            Ok(n) => n,
            // A queued ICMP error makes recvmmsg fail once; read_errors takes it.
            Err(e) if e.raw_os_error().is_some() => {
                self.errors_due = true;
                0
            }
            Err(e) => return Err(e),
        };
        if let Some(c) = &mut self.capture {
            c.received(plane, &self.rx, n);
        }
        let now = self.now();
        for i in 0..n {
            let (payload, src, tc, cut) = self.rx.get(i);
            self.stats.rx_datagrams += 1;
            if cut || payload.len() > self.max_datagram {
                self.stats.rx_oversize += 1;
                continue;
            }
            // Host-level datagrams (bootstrap) come from strangers too: they go to the host, never the engine.
            if crate::bootstrap::is_host_datagram(payload) {
                self.stats.rx_host += 1;
                if self.host_rx.len() < HOST_RX_QUEUE {
                    self.host_rx.push(HostDatagram {
                        plane,
                        src,
                        bytes: payload.to_vec(),
                    });
                } else {
                    self.stats.rx_host_dropped += 1;
                }
                continue;
            }
            let Some(&peer) = self.by_source.get(&(u128::from(*src.ip()), src.port())) else {
                // Only peers talk to this endpoint: a stranger's datagram never reaches the engine.
                // spec: SEC-PEER-1
                self.stats.rx_unknown_source += 1;
                continue;
            };
            // spec: WIRE-DSCP-1
            let trim = match TrafficClass::from_dscp(tc >> 2) {
                Some(TrafficClass::Trimmed) => Some(TrimMark::Fabric),
                Some(TrafficClass::TrimmedLastHop) => Some(TrimMark::LastHop),
                _ => None,
            };
            if trim.is_some() {
                self.stats.rx_trimmed += 1;
            }
            let meta = RecvMeta {
                peer: Some(peer),
                port: plane as u8,
                ecn_ce: tc & 3 == 3,
                trim,
            };
            self.ep.handle_datagram(now, meta, payload, &mut self.mem);
        }
        Ok(n)
    }

    fn read_errors(&mut self) -> io::Result<bool> {
        // An empty error queue costs a system call per plane per round, as much as the receive itself: read
        // the queues when a receive reported an error, else every few rounds (a bounce waits a few rounds).
        self.errors_age += 1;
        if !self.errors_due && self.errors_age < ERROR_QUEUE_EVERY {
            return Ok(false);
        }
        self.errors_due = false;
        self.errors_age = 0;
        let mut any = false;
        for plane in 0..self.planes {
            while let Some(e) = self.io.recv_error(plane)? {
                any = true;
                self.unreachable(plane, &e);
            }
        }
        Ok(any)
    }

    /// A path failed (ICMP unreachable, or a local send error): retire its EV at once.
    fn unreachable(&mut self, plane: usize, e: &SendError) {
        let Some(peer) = self.peer_of_destination(plane, &e.dest) else {
            return;
        };
        let now = self.now();
        // The engine reads the bounced datagram's headers itself (spec PATH-BOUNCE-1).
        if self.ep.handle_bounce(now, peer, &e.payload).is_some() {
            self.stats.unreachable += 1;
        }
    }

    /// The peer a (possibly already partly consumed) destination address leads to.
    fn peer_of_destination(&self, plane: usize, dest: &SocketAddrV6) -> Option<PeerId> {
        let host = if self.node.usid_block.is_some() {
            // The uSID list ends with the peer's host uSID, however many hops consumed.
            UsidContainer::from_ipv6(*dest.ip()).usids().last()
        } else {
            None
        };
        self.peers
            .iter()
            .position(|planes| {
                planes.get(plane).is_some_and(|p| match host {
                    Some(h) => {
                        NodeConfig::host_usid(p.addr.ip()) == h && p.addr.port() == dest.port()
                    }
                    None => p.addr == *dest,
                })
            })
            .map(|i| PeerId(i as u32))
    }

    #[allow(
        unsafe_code,
        reason = "zero-copy send queues pointers into registered memory"
    )]
    fn transmit_batches(&mut self) -> io::Result<bool> {
        let mut any = false;
        // First whatever a full socket left behind.
        for plane in 0..self.planes {
            if !self.tx[plane].is_empty() {
                self.flush(plane)?;
            }
        }
        let mut queued = 0usize;
        loop {
            let mut ready = 0u32;
            for (p, b) in self.blocked.iter().enumerate() {
                if !*b && !self.tx[p].is_full() {
                    ready |= 1 << p;
                }
            }
            if ready == 0 {
                break;
            }
            // Fresh time per packet: a flush below may have spent hundreds of µs forwarding.
            let now = self.now();
            let Some(t) = self
                .ep
                .poll_transmit_on(now, ready, &mut self.scratch, &mut self.mem)
            else {
                break;
            };
            any = true;
            let plane = usize::from(t.plane).min(self.planes - 1);
            let Some(peer) = self.peers.get(t.peer.0 as usize).and_then(|p| p.get(plane)) else {
                self.stats.tx_errors += 1;
                continue;
            };
            let dest = self.node.destination(plane, peer, t.ev >> self.plane_bits);
            let tc = traffic_class(t.class.default_dscp(), 0);
            // Control packets ignore the ready mask: their plane's batch may be full.
            if self.tx[plane].is_full() {
                self.flush(plane)?;
            }
            let pushed = match t.payload {
                None => self.tx[plane].push(&mut self.scratch, t.len, dest, tc),
                // SAFETY: the engine checked the payload against a registered region of `self.mem`, which
                // stays mapped and unchanged while `transmit` holds `&mut self`; every batch is sent or
                // materialized before `transmit` returns.
                Some(p) => unsafe {
                    self.tx[plane].push_lent(
                        &mut self.scratch,
                        t.len,
                        dest,
                        tc,
                        (p.at, p.addr as *const u8, p.len),
                    )
                },
            };
            if !pushed {
                self.stats.tx_errors += 1;
                continue;
            }
            queued += 1;
            if self.tx[plane].is_full() || queued >= BATCH {
                // Flush every plane together: a packet's timestamp is taken when it is built, and if one plane's
                // batch waited for 32 packets while the others went out, the planes would leave milliseconds
                // apart (veth forwards inside sendmmsg) and the receiver would see them badly reordered.
                for p in 0..self.planes {
                    if !self.tx[p].is_empty() {
                        self.flush(p)?;
                    }
                }
                queued = 0;
            }
        }
        for plane in 0..self.planes {
            if !self.tx[plane].is_empty() {
                self.flush(plane)?;
            }
        }
        Ok(any)
    }

    /// Sends what the engine has ready (the end of [`Datapath::progress`]), for requests posted after it.
    pub fn transmit(&mut self) -> io::Result<bool> {
        let r = self.transmit_batches();
        // What a full socket left behind waits beyond this call, when the application may change or free its
        // memory: it must no longer point there.
        for b in &mut self.tx {
            b.materialize();
        }
        r
    }

    /// Sends a plane's batch; keeps what a full socket refused and marks the plane blocked.
    fn flush(&mut self, plane: usize) -> io::Result<()> {
        self.blocked[plane] = false;
        while !self.tx[plane].is_empty() {
            // spec: HOST-IO-1
            match self.io.send(plane, &mut self.tx[plane]) {
                Ok(n) => {
                    if let Some(c) = &mut self.capture {
                        c.sent(plane, &self.tx[plane], n);
                    }
                    self.stats.tx_datagrams += n as u64;
                    self.stats.tx_batches += 1;
                    self.tx[plane].consume(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    self.stats.tx_blocked += 1;
                    self.blocked[plane] = true;
                    return Ok(());
                }
                Err(e)
                    if self.tx[plane].message_len(0) > 1
                        && matches!(e.raw_os_error(), Some(libc::EINVAL | libc::EIO)) =>
                {
                    // The kernel refused a train (no segmentation where it goes): send datagrams one by one.
                    self.stats.tx_offload_refused += 1;
                    self.tx[plane].stop_segmentation();
                }
                Err(e) => {
                    // The first message cannot go (e.g. no route after a link went down): drop it (one datagram,
                    // or a train on one path), retire its path, go on with the rest.
                    self.stats.tx_errors += 1;
                    let se = SendError {
                        dest: self.tx[plane].dest(0),
                        errno: e.raw_os_error().unwrap_or(0),
                        offender: None,
                        payload: self.tx[plane].payload(0).to_vec(),
                    };
                    let n = self.tx[plane].message_len(0);
                    self.tx[plane].consume(n);
                    self.unreachable(plane, &se);
                }
            }
        }
        Ok(())
    }

    /// Host-level datagrams received since the last call.
    pub fn take_host_datagrams(&mut self) -> Vec<HostDatagram> {
        std::mem::take(&mut self.host_rx)
    }

    /// Sends one host-level datagram from `plane`'s socket to `dest` now (bootstrap traffic is rare: no batch).
    pub fn send_host(&mut self, plane: usize, dest: SocketAddrV6, bytes: &[u8]) -> io::Result<()> {
        if plane >= self.planes {
            return Err(io::Error::new(io::ErrorKind::InvalidInput, "no such plane"));
        }
        let mut batch = TxBatch::new(1, bytes.len());
        let mut buf = bytes.to_vec();
        batch.push(&mut buf, bytes.len(), dest, 0);
        self.io.send(plane, &mut batch)?;
        if let Some(c) = &mut self.capture {
            c.sent_one(plane, dest, bytes);
        }
        self.stats.tx_host += 1;
        Ok(())
    }

    /// The peer already known at `planes[0]`'s address, if any.
    pub fn peer_at(&self, plane0: &SocketAddrV6) -> Option<PeerId> {
        self.by_source
            .get(&(u128::from(*plane0.ip()), plane0.port()))
            .copied()
    }

    /// The planes of peer `id`.
    pub fn peer_planes(&self, id: PeerId) -> Option<&[PeerPlane]> {
        self.peers.get(id.0 as usize).map(Vec::as_slice)
    }

    /// The largest datagram this datapath sends or accepts.
    pub fn max_datagram(&self) -> usize {
        self.max_datagram
    }
}

/// Congestion control for a software host. `window_packets` MTUs in flight, fixed: the bottleneck is the hosts'
/// CPUs, not a switch queue, and NSCC's delay signal there measures scheduling rather than queueing (on the
/// 2-core fabric NSCC settled at 3.7–4.9 Gbit/s where a fixed 64-packet window gave 7.1). Losses still retire
/// paths and are retransmitted; trims still come back as NACKs. `rate_bps: Some(..)` chooses NSCC for that
/// rate instead, without quick adapt (random loss there is a path's problem, not congestion).
pub fn software_cc(mtu: u32, window_packets: u32, rate_bps: Option<u64>) -> CcConfig {
    match rate_bps {
        None => CcConfig::Fixed {
            window: u64::from(mtu) * u64::from(window_packets.max(1)),
        },
        Some(rate) => CcConfig::Nscc(NsccConfig {
            qa_enabled: false,
            ..NsccConfig::for_path(u64::from(mtu), Duration::from_micros(500), rate)
        }),
    }
}

/// A random first PSN for a new QP (24 bits) from the OS, so an off-path attacker cannot predict the window
/// (spec SEC-PSN-1).
// spec: SEC-PSN-1
pub(crate) fn initial_psn() -> u32 {
    os_random_u64() as u32 & PSN_MASK
}

/// 64 random bits from the OS. Should the OS have none to give, the clock mixed with the process id: distinct
/// across runs, though then guessable.
fn os_random_u64() -> u64 {
    getrandom::u64().unwrap_or_else(|_| {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64);
        (t ^ u64::from(std::process::id()).rotate_left(32)).wrapping_mul(0x9E37_79B9_7F4A_7C15)
    })
}
