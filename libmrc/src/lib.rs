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
//! - [`path`]: the EVs of a QP, their health (GOOD/SKIP/ASSUMED_BAD/DENIED), per-packet choice and probes.
//! - [`reliability`]: PSN windows, SACK bitmaps, time-based loss detection, RTT and RTO.
//! - [`cc`]: congestion control behind a trait, with an NSCC-like window controller.
//! - [`qp`]: queue pairs: state machine, segmentation, placement, completions.
//! - [`endpoint`]: demultiplexing, transmit scheduling, timers, ports; the API drivers use.
//! - [`mem`]: protection domains, registered regions, the [`Memory`] trait that moves payload.
//! - `testing` (feature `testing`): a deterministic in-memory network of N planes with loss, reordering,
//!   duplication, trimming, corruption and plane/path/port/node failures.
//!
//! Requirements of the normative spec (`spec/*.md`) are cited in the code as `spec: TAG`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod completion;
pub mod config;
pub mod endpoint;
pub mod mem;
pub mod path;
pub mod qp;
pub mod reliability;
#[cfg(feature = "testing")]
pub mod testing;
pub mod time;
pub mod wire;

pub use completion::{Completion, CqId, WcOpcode, WcStatus};
pub use config::{Caps, ConfigError, EndpointConfig, QpConfig};
pub use endpoint::{
    Endpoint, Event, PayloadRef, QpEnd, RecvMeta, Transmit, TrimMark, connect_pair,
};
pub use mem::{Access, Memory, MrKeys, NullMemory, Pd, Sge};
pub use path::{EvConfig, EvState};
pub use qp::{
    ConnInfo, ModifyError, PeerId, PostError, QpInit, QpState, RecvWr, SendOp, SendWr, Transition,
};
pub use time::{Duration, Instant};
