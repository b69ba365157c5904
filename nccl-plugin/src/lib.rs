//! # libnccl-net-mrc — an NCCL net plugin over MRC
//!
//! NCCL loads this library with `NCCL_NET_PLUGIN=mrc` (after `install.sh` named it `libnccl-net-mrc.so`)
//! and selects it with `NCCL_NET=MRC`. It exports the tables `ncclNetPlugin_v8` … `ncclNetPlugin_v12`, so
//! NCCL 2.20 and every later release finds one it knows; all of them are thin adapters over one
//! implementation.
//!
//! Layout:
//! - [`abi`]: NCCL's plugin ABI, `#[repr(C)]` per version.
//! - `exports`: the exported tables and the per-version adapters.
//! - `net`: the one implementation: contexts, comms, registrations, requests.
//! - `proto`: NCCL's send/receive semantics over RDMA WRITEs (a clear-to-send FIFO), sans-IO.
//! - `host`: the seam to `mrc-host`, which owns progress, memory, peers, bootstrap and QPs.
//! - `handle`: the 128-byte connection handle; `ctrl`: a comm's control block; `config`: `NCCL_MRC_*`;
//!   `ffi`: the panic boundary; `log`: logging through NCCL's logger.

pub mod abi;
mod config;
mod ctrl;
mod exports;
mod ffi;
mod handle;
mod host;
mod log;
mod net;
mod proto;

pub use exports::{
    ncclNetPlugin_v8, ncclNetPlugin_v9, ncclNetPlugin_v10, ncclNetPlugin_v11, ncclNetPlugin_v12,
};
