//! Reliability: PSN tracking at the receiver; what is in flight, acknowledged or lost at the sender, and its
//! round-trip estimate.

mod rtt;
mod rx;
mod tx;

pub use rtt::RttEstimator;
pub use rx::{PsnCheck, PsnTracker, unwrap_msn, unwrap_psn};
pub use tx::{PktState, SendOrder, SentWindow};
