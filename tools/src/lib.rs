//! Front ends of MRC over real UDP sockets: the perftest-like `mrc-perf`, the SRv6 uSID network-namespace fabric
//! builder `mrc-fabric`, and `mrc-blast`, a raw per-packet UDP sender that measures the forwarding ceiling.

pub mod blast;
pub mod fabric;
pub mod perf;
pub mod stop;
