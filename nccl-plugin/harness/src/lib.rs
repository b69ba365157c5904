//! CPU harness for `libnccl-net-mrc.so`: loads the built plugin by path, exactly as NCCL does (`dlopen`,
//! `dlsym` of `ncclNetPlugin_vN`), and replays NCCL's proxy pattern on it for each exported version.
//!
//! - [`plugin`]: the loaded table and one method per entry point, hiding the version's signature.
//! - [`proxy`]: NCCL's proxy pattern: connection setup, outstanding sends and grouped receives with tags,
//!   the NULL-request retry, verification, close and finalize; and the throughput run.
//! - [`mod@bench`]: throughput as NCCL drives the plugin (two ranks, N comms, one way or both), beside
//!   mrc-perf's equivalent.
//! - [`log`]: the logger handed to `init` (C, since it is variadic).
//! - [`locate`]: where cargo put the plugin.

pub mod bench;
pub mod locate;
pub mod log;
pub mod plugin;
pub mod proxy;

pub use plugin::{Code, Plugin, Props, Ptr, Version};
