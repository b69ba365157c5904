//! The UDP datapath (feature `udp`): real sockets, one per plane, driving the sans-IO [`Endpoint`].
//!
//! - [`config`]: a node's planes and the EV → destination-address expansion (plain or SRv6 uSID).
//! - [`socket`]: one plane's socket: batched send and receive, traffic class, the ICMP error queue.
//! - [`memory`]: registered host memory, the placement target.
//! - [`driver`]: [`UdpEndpoint`], one round of progress at a time (application-driven poll mode).
//! - [`progress`]: a progress thread that drives a [`UdpEndpoint`] while the application posts and polls.
//!
//! [`Endpoint`]: crate::Endpoint

pub mod config;
pub mod driver;
pub mod memory;
pub mod progress;
pub mod socket;

pub use config::{NodeConfig, PeerPlane, PlaneAddr};
pub use driver::{DatapathConfig, DatapathStats, StartError, UdpEndpoint, software_cc};
pub use memory::HostMemory;
pub use progress::Progress;
