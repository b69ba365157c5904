//! Round-trip time estimation for the sender: the smoothed RTT and its variation, the minimum, and the RTO and
//! reorder window derived from them.

use crate::time::{Duration, nanos};

/// Smoothed RTT estimation (RFC 6298 gains) plus the minimum seen, with the RTO and the reorder window derived
/// from them kept ready in nanoseconds: they are read on every transmission and timer check.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    min: u64,
    /// The configured base RTT, what stands for the minimum before the first sample.
    base: u64,
    samples: u64,
    rto_floor: u64,
    reorder_floor: u64,
    rto: u64,
    reorder: u64,
    /// Smoothed time and its variation until a NACK answered a transmission, ns (0 before the first).
    nack_srtt: u32,
    nack_var: u32,
    /// The latest such time: while NACKs queue up it grows faster than the smoothed value follows.
    nack_last: u32,
    /// What [`nack_wait_ns`](Self::nack_wait_ns) says, derived when a NACK sample arrives: every loss wait asks.
    nack_wait: u64,
}

impl RttEstimator {
    /// Starts from the configured base RTT until samples arrive; the RTO and the reorder window never go below
    /// their floors.
    pub fn new(base_rtt: Duration, rto_floor: Duration, reorder_floor: Duration) -> Self {
        let b = nanos(base_rtt);
        let mut e = Self {
            srtt: b,
            rttvar: b / 2,
            min: u64::MAX,
            base: b,
            samples: 0,
            rto_floor: nanos(rto_floor),
            reorder_floor: nanos(reorder_floor),
            rto: 0,
            reorder: 0,
            nack_srtt: 0,
            nack_var: 0,
            nack_last: 0,
            nack_wait: 0,
        };
        e.derive();
        e
    }

    // spec: REL-RTO-1
    fn derive(&mut self) {
        self.rto = (self.srtt + 4 * self.rttvar)
            .max(self.nack_wait_ns())
            .max(self.rto_floor);
        self.reorder = 4 * self.rttvar + self.reorder_floor;
    }

    /// How long NACKs may take now, ns (0 before the first): no loss rule calls a packet lost sooner, since its
    /// NACK may still be on its way.
    #[inline]
    pub fn nack_wait_ns(&self) -> u64 {
        self.nack_wait
    }

    /// Adds the time a NACK took to answer a transmission. It bounds the RTO from below (a receiver that trims
    /// many packets queues one NACK each behind the others on its own link, and a packet whose NACK waits
    /// there is not lost), but it is no sample of the round trip of a packet that is delivered: a trimmed
    /// header skips the queue whose length the RTT says.
    pub fn update_nack(&mut self, rtt: Duration) {
        let r = nanos(rtt).min(u64::from(u32::MAX)) as u32;
        self.nack_last = r;
        if self.nack_srtt == 0 {
            self.nack_srtt = r;
            self.nack_var = r / 2;
        } else {
            let err = self.nack_srtt.abs_diff(r);
            self.nack_var = ((3 * u64::from(self.nack_var) + u64::from(err)) / 4) as u32;
            self.nack_srtt = ((7 * u64::from(self.nack_srtt) + u64::from(r)) / 8) as u32;
        }
        self.nack_wait = (u64::from(self.nack_srtt) + 4 * u64::from(self.nack_var))
            .max(2 * u64::from(self.nack_last));
        self.derive();
    }

    /// Adds a sample.
    #[cfg(test)]
    pub fn update(&mut self, rtt: Duration) {
        self.update_ns(nanos(rtt));
    }

    /// Adds a sample of `r` ns (nanoseconds throughout: a SACK's sample is read by several rules, and each
    /// conversion from and to `Duration` costs a division or a 128-bit product).
    #[inline]
    pub fn update_ns(&mut self, r: u64) {
        self.min = self.min.min(r);
        if self.samples == 0 {
            self.srtt = r;
            self.rttvar = r / 2;
        } else {
            let err = self.srtt.abs_diff(r);
            self.rttvar = (3 * self.rttvar + err) / 4;
            self.srtt = (7 * self.srtt + r) / 8;
        }
        self.samples += 1;
        self.derive();
    }

    /// Smoothed RTT.
    pub fn srtt(&self) -> Duration {
        Duration::from_nanos(self.srtt)
    }

    /// Smoothed RTT, ns.
    #[inline]
    pub fn srtt_ns(&self) -> u64 {
        self.srtt
    }

    /// Smallest sample, ns, or the base RTT before the first.
    #[inline]
    pub fn min_or_base_ns(&self) -> u64 {
        if self.samples > 0 {
            self.min
        } else {
            self.base
        }
    }

    /// Smallest sample, if any.
    #[cfg(test)]
    pub fn min(&self) -> Option<Duration> {
        (self.samples > 0).then(|| Duration::from_nanos(self.min))
    }

    /// Per-packet RTO in ns: `max(floor, srtt + 4 × rttvar)`.
    pub fn rto_ns(&self) -> u64 {
        self.rto
    }

    /// Reorder window for time-based loss detection in ns: `max(floor, 2 × rttvar)`.
    pub fn reorder_ns(&self) -> u64 {
        self.reorder
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rto_has_floor_and_tracks_variance() {
        let us = Duration::from_micros;
        let r = RttEstimator::new(us(10), us(40), us(5));
        assert_eq!(r.rto_ns(), 40_000);
        assert_eq!(
            r.reorder_ns(),
            25_000,
            "4 × rttvar (half the base RTT before a sample) plus the floor"
        );
        let mut r = RttEstimator::new(us(10), Duration::ZERO, Duration::ZERO);
        r.update(us(10));
        r.update(us(30));
        assert!(r.rto_ns() > 30_000);
        assert_eq!(r.min(), Some(us(10)));
    }
}
