//! A constant window: for tests, and to run a QP without congestion control.

use super::{AckSample, CcCounters, ConfigError, CongestionControl};
use crate::time::Instant;

/// A window that never changes, whatever the feedback says.
///
/// It ignores ECN, delay, trims, losses and the receiver penalty, so a test can pin the sending pattern and
/// an operator can switch congestion control off.
// spec: CC-FIX-1
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FixedWindow {
    window: u64,
    counters: CcCounters,
}

impl FixedWindow {
    /// A controller that always allows `window` payload bytes in flight; `window` must be at least 1.
    pub fn new(window: u64) -> Result<Self, ConfigError> {
        if window == 0 {
            return Err(ConfigError::new(
                "qp.cc.window",
                "must be at least 1 byte (a zero window never sends; use e.g. 1.5 × BDP)",
            ));
        }
        Ok(Self {
            window,
            counters: CcCounters::default(),
        })
    }
}

impl CongestionControl for FixedWindow {
    fn window(&self) -> u64 {
        self.window
    }

    fn on_ack(&mut self, _now: Instant, _sample: &AckSample) {}

    fn on_trim(&mut self, _now: Instant, _bytes: u64, last_hop: bool) {
        self.counters.trims = self.counters.trims.saturating_add(1);
        if last_hop {
            self.counters.last_hop_trims = self.counters.last_hop_trims.saturating_add(1);
        }
    }

    fn on_loss(&mut self, _now: Instant, _bytes: u64) {
        self.counters.losses = self.counters.losses.saturating_add(1);
    }

    fn name(&self) -> &'static str {
        "fixed"
    }

    fn counters(&self) -> CcCounters {
        self.counters
    }

    fn set_window(&mut self, window: u64) -> bool {
        self.window = window.max(1);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;

    #[test]
    fn never_moves() {
        let mut f = FixedWindow::new(10_000).unwrap();
        let s = AckSample {
            newly_acked_bytes: 4096,
            rtt: Some(Duration::from_micros(100)),
            ecn: true,
            rcv_cwnd_pen: 127,
            inflight: 0,
        };
        f.on_ack(Instant::from_nanos(1), &s);
        f.on_trim(Instant::from_nanos(2), 4096, true);
        f.on_loss(Instant::from_nanos(3), 4096);
        assert_eq!(f.window(), 10_000);
        assert!(f.set_window(5000));
        assert_eq!(f.window(), 5000);
        assert_eq!(f.counters().trims, 1);
        assert_eq!(f.counters().last_hop_trims, 1);
        assert_eq!(f.counters().losses, 1);
    }

    #[test]
    fn zero_is_rejected() {
        assert_eq!(FixedWindow::new(0).unwrap_err().field, "qp.cc.window");
    }
}
