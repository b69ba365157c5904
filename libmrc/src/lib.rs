//! # mrc — the Multipath Reliable Connection transport, sans-IO
//!
//! A queue pair (QP) sprays its packets over many paths (entropy values, EVs) spread equally over several
//! network planes. Every packet carries what the receiver needs to place it straight into registered memory, in
//! any order; selective ACKs retransmit only the holes, switch-trimmed packets come back as NACKs that drive
//! congestion control, and silent loss retires a path until probes bring it back.
//!
//! The engine does no I/O: it takes datagrams and the current time in, and gives datagrams and timer
//! deadlines out. The UDP datapath, the verbs shim, the NCCL plugin and the simulator all drive the same
//! [`Endpoint`](crate::endpoint::Endpoint).
//!
//! Layout:
//! - [`wire`]: packet headers (views and owned representations), ICRC, uSID containers, EV expansion.
//! - [`cc`]: congestion control behind a trait, with an NSCC-like window controller.
//!
//! Requirements of the normative spec (`spec/*.md`) are cited in the code as `spec: TAG`.
#![deny(unsafe_code)]
#![warn(missing_docs)]

pub mod cc;
pub mod time;
pub mod wire;
