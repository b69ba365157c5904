//! What a driver and the engine hand each other: datagrams in ([`RecvMeta`]) and out ([`Transmit`]), and the
//! peers they come from and go to ([`PeerId`]).
//!
//! Kept apart from [`endpoint`](crate::endpoint), which re-exports them, so that the queue pairs, which build
//! and take datagrams, do not depend on the endpoint that owns them.

use crate::wire::TrafficClass;

/// Identifies a peer endpoint. The engine treats it as opaque; the driver maps it to addresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PeerId(pub u32);

/// A packet the driver must send: its bytes are in the buffer given to
/// [`Endpoint::poll_transmit`](crate::Endpoint::poll_transmit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Transmit {
    /// Destination endpoint.
    pub peer: PeerId,
    /// Entropy value: with the peer, it names the path (expand it to the uSID destination address).
    pub ev: u32,
    /// Local port (plane) to send from.
    pub plane: u8,
    /// Traffic class (maps to a DSCP).
    pub class: TrafficClass,
    /// Bytes of the UDP payload written at the start of the buffer.
    pub len: usize,
    /// The local QP that produced it (`EP_QPN` for endpoint packets).
    pub qpn: u32,
    /// A payload left in place, where the driver's [`Memory::view`](crate::Memory::view) lends bytes (zero-copy
    /// send): the datagram is then `buf[..at]`, the payload, `buf[at..len]`. Always `None` for memories that do
    /// not lend.
    pub payload: Option<PayloadRef>,
}

/// Where a zero-copy packet's payload lies (see [`Transmit::payload`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PayloadRef {
    /// Offset in the packet buffer at which the payload goes (the headers before it, the ICRC after).
    pub at: usize,
    /// Address of the payload in registered memory, already checked by the engine.
    pub addr: u64,
    /// Its length in bytes.
    pub len: usize,
}

impl Transmit {
    /// Length of the whole datagram: the buffer's bytes plus a payload left in place.
    pub fn datagram_len(&self) -> usize {
        self.len + self.payload.map_or(0, |p| p.len)
    }
}

/// How a switch marked a trimmed packet (read from the DSCP).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum TrimMark {
    /// Trimmed inside the fabric (DSCP TRIMMED).
    Fabric,
    /// Trimmed at the last hop, i.e. at the receiver's own port (DSCP TRIMMED_LASTHOP).
    LastHop,
}

/// What the driver knows about a received datagram besides its bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct RecvMeta {
    /// The sending endpoint, as the driver tells from the source address; `None` when the address belongs to no
    /// known peer, and then no connected QP accepts the datagram (spec SEC-PEER-1).
    pub peer: Option<PeerId>,
    /// Local port (plane) it arrived on.
    pub port: u8,
    /// It arrived with ECN CE.
    pub ecn_ce: bool,
    /// It was trimmed.
    pub trim: Option<TrimMark>,
}
