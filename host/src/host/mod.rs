//! [`Host`]: one engine, its sockets, clock, peer table and the one progress loop, shared by every front end.
//!
//! Threads. Application threads post through a lock-free submission ring per QP (a doorbell) and poll a
//! lock-free completion ring per CQ; neither waits behind a progress round. Only the progress loop, and
//! control calls (creating objects, state transitions, registration), take the engine's lock. The loop runs
//! in a thread that sleeps in `ppoll` on the sockets and a doorbell eventfd ([`ProgressMode::Thread`]), in
//! a thread that never sleeps ([`ProgressMode::BusyPoll`]), or in the caller ([`ProgressMode::Manual`]:
//! [`Host::progress`]).

mod affinity;
mod api;
mod capture;
mod config;
mod control;
mod counters;
mod cq;
mod gid;
mod info;
mod links;
mod memory;
mod peers;
mod progress;
mod qp;
mod state;

pub use config::{HostConfig, ProgressMode, QpProfile, QpRetry};
pub use cq::Cq;
pub use info::{AsyncEvent, HostStats, LocalInfo, Mr};
pub use links::{Accepted, Closing, Connecting, Link, Listener};
pub use qp::{PeerAddr, Qp, QpSpec, QpTransition, SendRequest};
pub use state::Host;
