//! The verbs object model every verbs front end (the LD_PRELOAD shim, libmrc's OCP API) shares, in verbs' own
//! numbering so a front end passes what the application gave it straight through.
//!
//! - [`qp_state`]: the RC QP state machine: which transitions exist, which attributes each one requires and
//!   takes, and the errno for a request that breaks them.

pub mod qp_state;
