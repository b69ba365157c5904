//! # libmrc — the OCP MRC application and controller C API
//!
//! Built as `libmrc_capi.so` / `libmrc_capi.a` and installed as `libmrc.so` / `libmrc.a` with the headers in
//! `include/` (`install.sh`, README.md). A program written against the OCP MRC API 1.0.1 (`mrc.h`,
//! `mrc_ctl.h`) builds against our own headers and runs on the devices of mrc-verbs-shim, which it opens
//! with ordinary verbs calls (`LD_PRELOAD=libmrc_verbs_shim.so`).
//!
//! Layout:
//! - [`abi`]: the C types and constants, checked against the OCP table (`tests/layout/`).
//! - `ffi`: the panic boundary and the OCP error conventions every entry point goes through.
//! - `log`: one line per refused call on stderr, filtered by `MRC_CAPI_LOG`.
//! - `registry`: which pointers are live objects of libmrc, and of what kind.
//! - `bridge`: finds the shim's verbs objects (`mrc_shim_bridge_v1`, looked up with `dlsym`).
//! - `device`: the per-device state (limits, controller state) shared by the contexts on a device.
//! - `events`: each context's event thread, which brings asynchronous events and EV events from the shim.
//! - [`context`], [`cq`], [`hint`], [`qp`]: the application API's objects.
//! - [`ctl`]: the controller API: ports, EV format, EV and CC profiles, EV events, endpoint operations.
//! - `transport`: the one seam to the data path; stage 1 refuses what needs it (README.md, "Stage 2").
#![allow(
    clippy::missing_safety_doc,
    reason = "the exported functions have mrc.h's contract: pointer arguments are NULL, objects of this \
              library, or caller memory of the documented type; libmrc checks NULLs and object identity"
)]

pub mod abi;
mod bridge;
pub mod context;
pub mod cq;
pub mod ctl;
mod device;
mod events;
mod ffi;
pub mod hint;
mod log;
pub mod qp;
mod registry;
mod transport;
