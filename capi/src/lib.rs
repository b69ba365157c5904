//! # libmrc — the OCP MRC application and controller C API
//!
//! Built as `libmrc_capi.so` / `libmrc_capi.a` and installed as `libmrc.so` / `libmrc.a` with the headers in
//! `include/` (`install.sh`, README.md). A program written against the OCP MRC API 1.0.1 (`mrc.h`,
//! `mrc_ctl.h`) builds against our own headers and runs on MRC's verbs devices, which it opens with ordinary
//! verbs calls: libmrc links mrc-verbs-shim, so it exports the `ibv_*` entry points too, and runs with
//! `LD_PRELOAD=libmrc.so` (or linked before libibverbs) alone.
//!
//! Layout:
//! - [`abi`]: the C types and constants, checked against the OCP table (`tests/layout/`).
//! - `ffi`: the panic boundary and the OCP error conventions every entry point goes through.
//! - `log`: one line per refused call on stderr, filtered by `MRC_CAPI_LOG`.
//! - `registry`: which pointers are live objects of libmrc, and of what kind.
//! - `device`: the per-device state (limits, controller state) shared by the contexts on a device.
//! - `events`: each context's event thread, which brings asynchronous events and EV events from the verbs
//!   layer and the host.
//! - [`context`], [`cq`], [`hint`], [`qp`]: the application API's objects.
//! - [`ctl`]: the controller API: ports, EV format, EV and CC profiles, EV events, endpoint operations.
//! - `transport`: the one seam to the data path; stage 1 refuses what needs it (README.md, "Stage 2").
#![allow(
    clippy::missing_safety_doc,
    reason = "the exported functions have mrc.h's contract: pointer arguments are NULL, objects of this \
              library, or caller memory of the documented type; libmrc checks NULLs and object identity"
)]

pub mod abi;
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
