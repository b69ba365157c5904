//! What a host tells: its addresses, counters, async events, registered regions.

use std::net::{Ipv6Addr, SocketAddrV6};

use mrc::endpoint::EndpointStats;

use crate::driver::DatapathStats;

/// This host's addresses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LocalInfo {
    /// Every plane's bound socket address.
    pub planes: Vec<SocketAddrV6>,
    /// Plane 0's UDP port (a verbs LID).
    pub port: u16,
    /// Plane 0's address.
    pub plane0: Ipv6Addr,
    /// GID 0 as verbs shows it: finds this host without a LID ([`PeerAddr::from_verbs`](crate::PeerAddr::from_verbs)).
    pub gid: Ipv6Addr,
}

/// Counters of a host.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct HostStats {
    /// The socket layer's counters.
    pub datapath: DatapathStats,
    /// The engine's counters.
    pub engine: EndpointStats,
    /// Async events dropped because nobody read them.
    pub events_dropped: u64,
    /// Completions lost because a completion ring was full (the CQ is then in error).
    pub cq_overruns: u64,
    /// Host datagrams dropped unanswered because they did not prove a secret (a CONNECT without its listener's
    /// key, a CLOSE without its link's) or named nothing this host has (spec HOST-AUTH-1, HOST-AUTH-2).
    pub bootstrap_rejected: u64,
    /// Waiting CONNECTs dropped because their listener's queue or the host's was full (spec HOST-QUEUE-1).
    pub connects_dropped: u64,
    /// CONNECTs refused by `poll_accept` (plane count, a peer address that belongs to another peer).
    pub connects_refused: u64,
}

/// Something that happened outside any work request (verbs async events).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AsyncEvent {
    /// A QP went to ERROR (retries exhausted, a CQ overran, the peer failed it).
    QpFatal {
        /// The QP.
        qpn: u32,
    },
    /// A CQ overran and is in error.
    CqError {
        /// The CQ's id.
        cq: u32,
    },
    /// A local plane came up.
    PortUp {
        /// The plane.
        plane: u8,
    },
    /// A local plane went down.
    PortDown {
        /// The plane.
        plane: u8,
    },
    /// A path (EV) of a QP was retired (loss, ICMP unreachable, denied).
    PathRetired {
        /// The QP.
        qpn: u32,
        /// The plane.
        plane: u8,
        /// The EV.
        ev: u32,
    },
    /// A retired path came back.
    PathRestored {
        /// The QP.
        qpn: u32,
        /// The plane.
        plane: u8,
        /// The EV.
        ev: u32,
    },
    /// The peer closed the link this QP belonged to ([`Link::close`](crate::Link::close)): both sides drained their
    /// QPs, and this one is destroyed (receives still posted are dropped without completions, as by
    /// `ibv_destroy_qp`).
    LinkClosed {
        /// The QP.
        qpn: u32,
    },
}

/// A registered region: the keys work requests and peers use. Valid until [`Host::dereg_mr`](crate::Host::dereg_mr).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Mr {
    /// Key for local scatter/gather elements.
    pub lkey: u32,
    /// Key a peer names in a WRITE or READ.
    pub rkey: u32,
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: usize,
    /// Memory the host allocated ([`Host::alloc_buffer`]) and frees at deregistration.
    pub(crate) owned: bool,
}
