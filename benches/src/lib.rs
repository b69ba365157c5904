//! Shared harness of the `mrc` criterion benches (the benches themselves are in `benches/benches/`).
//!
//! - [`pair`]: two endpoints back to back with a tiny lossless driver, and record/replay of each endpoint's
//!   calls, so one side's per-packet cost can be timed alone.
//! - [`memory`]: a [`Memory`](mrc::Memory) that moves no bytes and one that really copies.
#![forbid(unsafe_code)]

pub mod memory;
pub mod pair;

pub use memory::{Arena, NoCopy};
