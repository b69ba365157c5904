//! The UDP datapath (feature `udp`): real sockets, one per plane, driving the sans-IO [`Endpoint`].
//!
//! - [`config`]: a node's planes and the EV → destination-address expansion (plain or SRv6 uSID).
//!
//! [`Endpoint`]: crate::Endpoint

pub mod config;

pub use config::{NodeConfig, PeerPlane, PlaneAddr};
