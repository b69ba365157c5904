//! # mrc-host — the host layer of the MRC transport
//!
//! The engine (`mrc`) is sans-IO: it takes datagrams and the time in and gives datagrams and deadlines out.
//! This crate is everything around it that a host needs and every front end (mrc-perf, the verbs shim, the
//! NCCL plugin, the C API) would otherwise write again: per-plane UDP sockets, registered application memory,
//! the clock, the peer table and the progress loop.
//!
//! - [`config`]: a node's planes and the EV → destination-address expansion (plain or SRv6 uSID).
//! - `socket` (private): one plane's socket: batched send and receive, traffic class, the ICMP error queue
//!   ([`TxBatch`], [`RxBatch`] are the currency of [`PlaneIo`]).
//! - [`memory`]: registered host memory, the placement target.
//! - [`plane`]: [`PlaneIo`], what the progress loop needs from a carrier of datagrams; [`UdpPlanes`] (the
//!   default) implements it over the sockets, `mem_plane` over memory ([`MemFabric`], tests).
//! - `driver` (private): [`Datapath`] ([`UdpEndpoint`] over UDP), one round of progress at a time.
//! - [`Host`] (`host/`): the engine, clock, peer table, the one progress loop, lock-free rings, bootstrap;
//!   one file per concern (`state`, `api`, `qp`, `cq`, `progress`, `peers`, `links`, `config`, `info`).
//! - [`pmtu`]: the packet size a node's links carry (every front end's default).
//! - [`bootstrap`]: the blob and the host-level datagrams (spec/host.md).
//! - [`capture`]: pcapng of what the host sends and receives (off unless asked).
//! - [`counters`]: per-QP, per-plane and per-EV counters as JSON and Prometheus text, served when asked.
//! - [`verbs`]: the verbs object model the verbs front ends share (the RC QP state machine).

pub mod bootstrap;
pub mod capture;
pub mod config;
mod connect_queue;
pub mod control;
pub mod counters;
mod driver;
mod error;
mod host;
mod mem_plane;
pub mod memory;
pub mod offload;
pub mod plane;
pub mod pmtu;
mod share;
mod socket;
pub mod verbs;

pub use bootstrap::{Blob, BlobKind};
pub use config::{MAX_PLANES, NodeConfig, PeerPlane, PlaneAddr};
pub use control::{EvEvent, ExplicitEvs};
pub use driver::{Datapath, DatapathConfig, DatapathStats, StartError, UdpEndpoint, software_cc};
pub use error::HostError;
pub use host::{
    Accepted, AsyncEvent, Closing, Connecting, Cq, Host, HostConfig, HostStats, Link, Listener,
    LocalInfo, Mr, PeerAddr, ProgressMode, Qp, QpProfile, QpRetry, QpSpec, QpTransition,
    SendRequest,
};
pub use mem_plane::{MemFabric, MemPlanes};
pub use memory::HostMemory;
pub use offload::Offload;
pub use plane::{PlaneIo, UdpPlanes};
pub use socket::{RxBatch, SendError, TxBatch};
