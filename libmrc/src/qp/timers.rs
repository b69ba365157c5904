//! A QP's timers, one deadline per kind (quinn-proto's timer table): the endpoint files the earliest, and a
//! timer set before what it filed is how the endpoint learns that it must file the QP again. The timers derived
//! from the sent window (loss time, tail probe, RTO) are recomputed at each filing ([`TimerTable::derive`]); what
//! may move them earlier between filings is a new front of the window, which the window itself reports.

use crate::time::Instant;

/// The kinds of timer a QP runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Timer {
    /// The delayed SACK (spec REL-SACK-1).
    Sack,
    /// The oldest retransmission an RNR NACK delayed (spec REL-NACK-2).
    RnrResend,
    /// The next probe of a retired EV (spec PATH-PROBE-1).
    PathProbe,
    /// The time rule's next loss (spec REL-LOSS-1).
    LossTime,
    /// The tail loss probe (spec REL-TLP-1).
    TailProbe,
    /// The retransmission timeout (spec REL-LOSS-2).
    Rto,
    /// The QP local-ACK timeout (spec REL-QPTO-1).
    Retry,
}

impl Timer {
    const COUNT: usize = 7;
    /// The timers that only a requester (a QP in RTS) runs.
    const REQUESTER: [Self; 5] = [
        Self::PathProbe,
        Self::LossTime,
        Self::TailProbe,
        Self::Rto,
        Self::Retry,
    ];
}

/// One deadline per [`Timer`] (`Instant::MAX`: not running), and what the endpoint filed.
#[derive(Debug, Clone)]
pub(crate) struct TimerTable {
    at: [Instant; Timer::COUNT],
    /// The deadline the endpoint has filed for the QP: it wakes the QP then at the latest.
    filed: Instant,
    /// A timer was set before `filed` since the endpoint last filed the QP.
    moved_earlier: bool,
}

impl Default for TimerTable {
    fn default() -> Self {
        Self {
            at: [Instant::MAX; Timer::COUNT],
            filed: Instant::MAX,
            moved_earlier: false,
        }
    }
}

impl TimerTable {
    pub(crate) fn get(&self, t: Timer) -> Instant {
        self.at[t as usize]
    }

    pub(crate) fn is_running(&self, t: Timer) -> bool {
        self.get(t) != Instant::MAX
    }

    pub(crate) fn is_expired(&self, t: Timer, now: Instant) -> bool {
        self.get(t) <= now
    }

    pub(crate) fn set(&mut self, t: Timer, at: Instant) {
        self.at[t as usize] = at;
        self.moved_earlier |= at < self.filed;
    }

    /// Sets a timer derived from the QP's state while the endpoint files it: the filing reads every timer
    /// anyway, so there is nothing to flag.
    pub(crate) fn derive(&mut self, t: Timer, at: Instant) {
        self.at[t as usize] = at;
    }

    pub(crate) fn stop(&mut self, t: Timer) {
        self.at[t as usize] = Instant::MAX;
    }

    /// Stops `t` and says whether it had expired at `now`.
    pub(crate) fn take_expired(&mut self, t: Timer, now: Instant) -> bool {
        let expired = self.is_expired(t, now);
        if expired {
            self.stop(t);
        }
        expired
    }

    pub(crate) fn stop_all(&mut self) {
        self.at = [Instant::MAX; Timer::COUNT];
    }

    /// The earliest deadline, counting the requester's timers only when `requester`.
    pub(crate) fn next(&self, requester: bool) -> Instant {
        let responder = self.get(Timer::Sack).min(self.get(Timer::RnrResend));
        if !requester {
            return responder;
        }
        Timer::REQUESTER
            .iter()
            .fold(responder, |d, &t| d.min(self.get(t)))
    }

    /// The endpoint filed the QP to wake at `at`.
    pub(crate) fn filed(&mut self, at: Instant) {
        self.filed = at;
        self.moved_earlier = false;
    }

    /// Whether a timer was set earlier than the endpoint's filed deadline since it last filed the QP.
    pub(crate) fn moved_earlier(&self) -> bool {
        self.moved_earlier
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_a_timer_set_before_the_filed_deadline_asks_for_filing() {
        let mut t = TimerTable::default();
        let at = |ns| Instant::from_nanos(ns);
        t.set(Timer::Rto, at(100));
        assert!(t.moved_earlier(), "anything is earlier than nothing filed");
        t.filed(t.next(true));
        assert!(!t.moved_earlier());
        t.set(Timer::Sack, at(150));
        assert!(!t.moved_earlier(), "the QP wakes at 100 anyway");
        t.set(Timer::Retry, at(50));
        assert!(t.moved_earlier());
        assert_eq!(t.next(true), at(50));
        assert_eq!(
            t.next(false),
            at(150),
            "a responder runs no requester timer"
        );
        assert!(t.take_expired(Timer::Retry, at(60)));
        assert!(!t.is_running(Timer::Retry));
        assert!(!t.take_expired(Timer::Sack, at(60)));
    }
}
