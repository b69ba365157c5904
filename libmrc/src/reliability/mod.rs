//! Reliability: PSN tracking at the receiver, and what is in flight, acknowledged or lost at the sender.

mod rx;
mod tx;

pub use rx::{PsnCheck, PsnTracker, unwrap_msn, unwrap_psn};
pub use tx::{PktState, RttEstimator, SendOrder, SentWindow};
