//! # mrc — the Multipath Reliable Connection transport, sans-IO
//!
//! A queue pair (QP) sprays its packets over many paths (entropy values, EVs) spread equally over several
//! network planes. Every packet carries what the receiver needs to place it straight into registered memory, in
//! any order; selective ACKs retransmit only the holes, switch-trimmed packets come back as NACKs that drive
//! congestion control, and silent loss retires a path until probes bring it back.
//!
//! The engine does no I/O: it takes datagrams and the current time in, and gives datagrams and timer
//! deadlines out. The host layer (`mrc-host`: UDP datapath, progress), the verbs shim, the NCCL plugin and the simulator all drive the same
//! [`Endpoint`].
//!
//! Layout:
//! - [`wire`]: packet headers (views and owned representations), ICRC, uSID containers, EV expansion.
//! - `path`: the EVs of a QP, their health (GOOD/SKIP/ASSUMED_BAD/DENIED), per-packet choice and probes.
//! - `reliability`: PSN windows, SACK bitmaps, time-based loss detection, RTT and RTO.
//! - [`cc`]: congestion control behind a trait, with an NSCC-like window controller.
//! - [`qp`]: queue pairs: state machine, segmentation, placement, completions.
//! - [`endpoint`]: demultiplexing, transmit scheduling, timers, ports; the API drivers use.
//! - [`io`]: what drivers and the engine exchange: datagrams in and out, peers.
//! - [`error`]: the errors calls return, with their `errno` codes.
//! - [`mem`]: protection domains, registered regions, the [`Memory`] trait that moves payload.
//! - `testing` (feature `testing`): a deterministic in-memory network of N planes with loss, reordering,
//!   duplication, trimming, corruption and plane/path/port/node failures.
//!
//! Requirements of the normative spec (`spec/*.md`) are cited in the code as `spec: TAG`.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod completion;
pub mod config;
pub mod endpoint;
pub mod error;
pub mod io;
pub mod mem;
// The EV machinery and the reliability windows are internals; their public types are re-exported below.
#[allow(
    unreachable_pub,
    reason = "a private module; its items are public only where re-exported"
)]
mod path;
pub mod qp;
#[allow(
    unreachable_pub,
    reason = "a private module; its items are public only where re-exported"
)]
mod reliability;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod wire;

/// Internals that the project's own property tests and benches exercise directly (feature `testing`); not part
/// of the engine's API.
#[cfg(feature = "testing")]
#[doc(hidden)]
pub mod internals {
    pub use crate::reliability::{PsnCheck, PsnTracker};
}

pub use completion::{Completion, CqId, WcOpcode, WcStatus};
pub use config::{Caps, EndpointConfig, QpConfig};
pub use endpoint::{Endpoint, EndpointStats, Event, PayloadRef, RecvMeta, Transmit, TrimMark};
pub use error::{ConfigError, NoSuchObject};
pub use mem::{Access, AccessError, Memory, MrKeys, NullMemory, Pd, Sge};
pub use path::{EvChange, EvConfig, EvInfo, EvState, EvStats, MAX_EVS, PlaneStats};
pub use qp::{
    ConnInfo, ModifyError, PeerId, PostError, QpInit, QpKeys, QpState, QpStats, RecvWr, SendOp,
    SendWr, Transition,
};
pub use time::{Duration, Instant};
