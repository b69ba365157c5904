//! # mrc-verbs-shim — unmodified ibverbs programs over MRC
//!
//! Built as `libmrc_verbs_shim.so` and loaded with `LD_PRELOAD`, it replaces every exported `ibv_*` entry point
//! that `ibv_devices`, `ibv_devinfo`, `ibv_rc_pingpong` and perftest call, and hands out its own
//! `ibv_context`/`verbs_context` so the inline verbs (`ibv_post_send`, `ibv_poll_cq`, `ibv_query_port`, …)
//! land here too. The real libibverbs stays loaded (perftest links libmlx5, libefa and librdmacm against it);
//! the shim never gives it one of its objects. Why each piece is shaped so: `shared/design/verbs-nccl-abi.md`.
//!
//! The public modules hold the exported C entry points (callable from Rust tests too); their other items are
//! crate-private.
//!
//! Layout:
//! - [`abi`]: the C structures and constants (`mrc_ffi::verbs_abi`, checked against the installed headers there)
//!   and the ops-slot cast.
//! - `ffi`: the panic boundary and the errno conventions every entry point goes through.
//! - `log`: one line per refused or unsupported call, on stderr, filtered by `MRC_SHIM_LOG`.
//! - `config`: the environment (which MRC nodes become devices).
//! - `device`: the virtual devices and what `ibv_query_device`/`_port`/`_gid` report.
//! - `context`: the context, the query verbs, asynchronous events.
//! - `ops`: `ibv_open_device` with the ops tables and the `verbs_context` extension ops.
//! - `pd`, `mr`, `cq` (with completion channels), `qp`: the verbs objects, each holding its host-layer handle.
//! - `unsupported`: verbs with no MRC meaning (SRQ, AH, multicast, memory windows, …): errno plus one log line.
//! - `rdmacm`: the rdma_cm entry points, refused with a log line naming the call.
//! - `host`: the seam to the host layer (`mrc-host`), the only place that talks to the transport.
#![allow(
    clippy::missing_safety_doc,
    reason = "the exported verbs have verbs.h's contract: pointer arguments are valid objects of this library or \
              caller memory of the documented size; the shim checks NULLs and object identity where it can"
)]

pub mod abi;
pub mod api;
mod config;
pub mod context;
pub mod cq;
pub mod device;
mod ffi;
mod host;
mod log;
pub mod mr;
pub mod ops;
pub mod pd;
pub mod qp;
pub mod rdmacm;
mod registry;
pub mod unsupported;
