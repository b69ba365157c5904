//! Congestion control: a window-based controller per QP behind a trait.
//!
//! The engine asks [`CongestionControl::window`] how many payload bytes it may have in flight and reports
//! what it learns: every SACK or probe reply ([`AckSample`]), every trimmed packet and every packet declared
//! lost. The controller never reads a clock; `now` comes with each report. Normative behaviour is in
//! `spec/cc.md` (tags `CC-*`).
//!
//! Two controllers exist: [`Nscc`], an NSCC-like controller driven by ECN and queuing delay with quick
//! adapt and a receiver penalty, and [`FixedWindow`], a constant window for tests and for running without
//! congestion control.

use core::fmt;

use crate::time::{Duration, Instant};

mod fixed;
mod nscc;

pub use fixed::FixedWindow;
pub use nscc::{Nscc, NsccConfig};

/// What the sender learned from one SACK (or probe reply) about its own packets.
// spec: CC-API-1
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct AckSample {
    /// Payload bytes newly acknowledged by this feedback (zero for a SACK that acks nothing new).
    pub newly_acked_bytes: u64,
    /// RTT measured from the echoed transmit timestamp, when the echo is valid.
    pub rtt: Option<Duration>,
    /// The packet that triggered this feedback arrived CE-marked.
    pub ecn: bool,
    /// Receiver window penalty 0..=127 (0 none, 127 = one packet per RTT); larger values count as 127.
    pub rcv_cwnd_pen: u8,
    /// Payload bytes in flight after this ack was applied.
    pub inflight: u64,
}

/// Counters a controller keeps about its own decisions, for the engine's statistics and the simulator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct CcCounters {
    /// Acks that grew the window by proportional increase.
    pub proportional_increases: u64,
    /// Acks that grew the window by fair increase.
    pub fair_increases: u64,
    /// Multiplicative decreases applied.
    pub decreases: u64,
    /// Acks that asked for a decrease while decreases were on hold, or that were ECN-marked below target.
    pub holds: u64,
    /// Quick adapts applied.
    pub quick_adapts: u64,
    /// Trim NACKs reported (both kinds).
    pub trims: u64,
    /// Of those, TRIMMED_LASTHOP.
    pub last_hop_trims: u64,
    /// Packets reported lost.
    pub losses: u64,
}

/// Sender-side congestion controller of one QP. Window-based: the sender may have [`window`](Self::window)
/// payload bytes in flight.
// spec: CC-WIN-1
pub trait CongestionControl: Send + fmt::Debug {
    /// Payload bytes the sender may have in flight now; always within the controller's bounds.
    // spec: CC-WIN-2
    fn window(&self) -> u64;
    /// One SACK or probe reply arrived.
    fn on_ack(&mut self, now: Instant, sample: &AckSample);
    /// A trimmed packet came back as a NACK: `last_hop` is false for TRIMMED (mid-fabric) and true for
    /// TRIMMED_LASTHOP (last-hop or incast congestion). Both are congestion signals.
    fn on_trim(&mut self, now: Instant, bytes: u64, last_hop: bool);
    /// A packet was declared lost by time-based detection or RTO (silent loss).
    fn on_loss(&mut self, now: Instant, bytes: u64);
    /// Name, for counters and logs: `"nscc"`, `"fixed"`.
    fn name(&self) -> &'static str;
    /// The controller's decision counters; zero for a controller that keeps none.
    fn counters(&self) -> CcCounters {
        CcCounters::default()
    }
    /// Sets the window of a controller whose window is set from outside (a host sharing one in-flight budget
    /// among its QPs); `false` for a controller that computes its own.
    fn set_window(&mut self, _window: u64) -> bool {
        false
    }
}

/// Which controller a QP uses, with its parameters.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub enum CcConfig {
    /// The NSCC-like controller.
    Nscc(NsccConfig),
    /// A constant window of `window` payload bytes: no congestion control.
    Fixed {
        /// Payload bytes allowed in flight (at least 1).
        window: u64,
    },
}

impl Default for CcConfig {
    /// NSCC with [`NsccConfig::default`] (8 planes × 100 Gbit/s, 10 µs base RTT, 4 KiB MTU).
    fn default() -> Self {
        Self::Nscc(NsccConfig::default())
    }
}

impl CcConfig {
    /// Checks every field, naming the first wrong one and the fix.
    // spec: CC-CFG-1
    pub fn validate(&self) -> Result<(), ConfigError> {
        match self {
            Self::Nscc(c) => c.validate(),
            Self::Fixed { window } => FixedWindow::new(*window).map(|_| ()),
        }
    }

    /// Validates, then builds the controller.
    pub fn build(&self) -> Result<Box<dyn CongestionControl>, ConfigError> {
        Ok(match self {
            Self::Nscc(c) => Box::new(Nscc::new(c.clone())?),
            Self::Fixed { window } => Box::new(FixedWindow::new(*window)?),
        })
    }
}

// spec: CC-CFG-1
pub use crate::error::ConfigError;

#[cfg(test)]
mod fluid;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_builds_nscc() {
        let cc = CcConfig::default().build().unwrap();
        assert_eq!(cc.name(), "nscc");
        let max = NsccConfig::default().max_cwnd_bytes();
        assert_eq!(cc.window(), max);
    }

    #[test]
    fn fixed_builds_and_validates() {
        let cc = CcConfig::Fixed { window: 65536 }.build().unwrap();
        assert_eq!(cc.name(), "fixed");
        assert_eq!(cc.window(), 65536);
        let e = CcConfig::Fixed { window: 0 }.validate().unwrap_err();
        assert_eq!(e.field, "qp.cc.window");
        assert!(CcConfig::Fixed { window: 0 }.build().is_err());
    }

    #[test]
    fn build_validates_first() {
        let c = NsccConfig {
            mtu: 0,
            ..NsccConfig::default()
        };
        let e = CcConfig::Nscc(c).build().unwrap_err();
        assert_eq!(e.field, "qp.cc.mtu");
        assert!(e.to_string().starts_with("qp.cc.mtu: "));
    }
}
