//! Send-side reliability: what is in flight, what is acknowledged, what is lost.
//!
//! Every transmitted PSN has an entry in a window indexed by `psn - snd_una`. Both loss rules need the oldest
//! transmission still in flight:
//! - time-based (RACK-like): a packet is lost once a packet sent more than a reorder window after it was acknowledged;
//! - per-packet RTO: a packet is lost once it has been unacknowledged for an RTO.
//!
//! First transmissions go out in PSN order and the engine's clock only moves forward, so the window itself is
//! in send-time order for them: a cursor that only moves forward finds the oldest one still in flight.
//! Retransmissions break that order, so they also go into a small queue of their own, which is in send-time order
//! by construction. The oldest transmission in flight is the older of the two fronts. Entries made stale by an
//! acknowledgement, a loss or a later retransmission are skipped lazily, so each is passed once.
//!
//! A transmission on a path that is slower than the fastest one (a longer queue, a link running below its rate)
//! is expected to arrive later than its send time suggests: judged against packets sprayed on fast paths it
//! would look lost while it is only late. When the loss rules reach such a transmission, the caller says how
//! much later its path delivers ([`SentWindow::pop_due`]'s `allowance`); the transmission then moves to a third
//! queue, ordered by send time plus that allowance, and both rules judge it from there.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::time::{Duration, Instant, nanos};

/// State of one PSN at the sender.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PktState {
    /// Sent, not acknowledged, not declared lost.
    InFlight,
    /// Acknowledged (cumulatively or selectively).
    Acked,
    /// Declared lost; waiting in a retransmission queue.
    Lost,
}

/// One PSN in flight.
#[derive(Debug, Clone, Copy)]
pub struct SentPkt {
    /// Send-queue sequence number of the message it belongs to.
    pub wqe: u64,
    /// Byte offset of its payload in the message.
    pub offset: u32,
    /// Payload bytes.
    pub len: u32,
    /// Index (in the QP's path set) of the EV of its latest transmission.
    pub ev: u16,
    /// Time of its latest transmission.
    pub sent_at: Instant,
    /// Transmissions so far (1 = never retransmitted).
    pub tx_count: u16,
    /// Where it stands.
    pub state: PktState,
}

/// The sender's window of PSNs `[snd_una, snd_nxt)`.
#[derive(Debug, Clone, Default)]
pub struct SentWindow {
    una: u64,
    pkts: VecDeque<SentPkt>,
    /// No first transmission below this PSN is still in flight.
    scan: u64,
    /// (send time, PSN) of retransmissions, oldest first.
    retx_times: VecDeque<(Instant, u64)>,
    /// (send time + its path's extra delay, PSN, send time) of transmissions held back on a slow path,
    /// earliest first.
    held: BinaryHeap<Reverse<(Instant, u64, Instant)>>,
    inflight_bytes: u64,
}

impl SentWindow {
    /// A window whose first PSN will be `initial_psn`.
    pub fn new(initial_psn: u64) -> Self {
        Self {
            una: initial_psn,
            scan: initial_psn,
            ..Self::default()
        }
    }

    /// Oldest unacknowledged PSN.
    #[inline]
    pub fn una(&self) -> u64 {
        self.una
    }

    /// Next PSN to assign.
    #[inline]
    pub fn nxt(&self) -> u64 {
        self.una + self.pkts.len() as u64
    }

    /// PSNs in `[una, nxt)`.
    #[inline]
    pub fn len(&self) -> u64 {
        self.pkts.len() as u64
    }

    /// Whether nothing is outstanding.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.pkts.is_empty()
    }

    /// Payload bytes in flight (sent, neither acknowledged nor declared lost).
    #[inline]
    pub fn inflight_bytes(&self) -> u64 {
        self.inflight_bytes
    }

    /// The entry of `psn`, if it is in the window.
    #[inline]
    pub fn get(&self, psn: u64) -> Option<&SentPkt> {
        psn.checked_sub(self.una)
            .and_then(|i| self.pkts.get(usize::try_from(i).ok()?))
    }

    #[inline]
    fn get_mut(&mut self, psn: u64) -> Option<&mut SentPkt> {
        let i = usize::try_from(psn.checked_sub(self.una)?).ok()?;
        self.pkts.get_mut(i)
    }

    /// Records the first transmission of the next PSN and returns it.
    #[inline]
    pub fn push(&mut self, wqe: u64, offset: u32, len: u32, ev: u16, now: Instant) -> u64 {
        let psn = self.nxt();
        self.pkts.push_back(SentPkt {
            wqe,
            offset,
            len,
            ev,
            sent_at: now,
            tx_count: 1,
            state: PktState::InFlight,
        });
        self.inflight_bytes += u64::from(len);
        psn
    }

    /// Records a retransmission of `psn` (which must be `Lost`) on EV `ev`.
    pub fn retransmitted(&mut self, psn: u64, ev: u16, now: Instant) {
        if let Some(p) = self.get_mut(psn)
            && p.state == PktState::Lost
        {
            p.state = PktState::InFlight;
            p.ev = ev;
            p.sent_at = now;
            p.tx_count = p.tx_count.saturating_add(1);
            let len = u64::from(p.len);
            self.inflight_bytes += len;
            self.retx_times.push_back((now, psn));
        }
    }

    /// Marks `psn` acknowledged. Returns the entry as it was if this acknowledgement is news.
    pub fn ack(&mut self, psn: u64) -> Option<SentPkt> {
        let p = self.get_mut(psn)?;
        let before = *p;
        match p.state {
            PktState::Acked => None,
            PktState::InFlight => {
                p.state = PktState::Acked;
                self.inflight_bytes -= u64::from(before.len);
                Some(before)
            }
            PktState::Lost => {
                // A transmission we had given up on arrived after all; its retransmission entry becomes stale.
                p.state = PktState::Acked;
                Some(before)
            }
        }
    }

    /// Acknowledges every PSN below `epsn` in one pass. Returns the payload bytes newly acknowledged and the
    /// latest send time among newly acknowledged packets that were never retransmitted (an unambiguous sample
    /// for time-based loss detection), if any.
    pub fn ack_below(&mut self, epsn: u64) -> (u64, Option<Instant>) {
        self.ack_below_with(epsn, |_| {})
    }

    /// [`ack_below`](Self::ack_below), calling `clean` with each newly acknowledged packet that was never
    /// retransmitted (its EV and send time are an unambiguous sample of that path).
    pub fn ack_below_with(
        &mut self,
        epsn: u64,
        mut clean: impl FnMut(&SentPkt),
    ) -> (u64, Option<Instant>) {
        let n = epsn.saturating_sub(self.una).min(self.pkts.len() as u64) as usize;
        let mut bytes = 0;
        let mut newest: Option<Instant> = None;
        for p in self.pkts.range_mut(..n) {
            match p.state {
                PktState::Acked => continue,
                PktState::InFlight => {
                    bytes += u64::from(p.len);
                    self.inflight_bytes -= u64::from(p.len);
                }
                // A packet given up on that arrived after all; its retransmission entry is now stale.
                PktState::Lost => bytes += u64::from(p.len),
            }
            p.state = PktState::Acked;
            if p.tx_count == 1 {
                newest = Some(newest.map_or(p.sent_at, |t| t.max(p.sent_at)));
                clean(p);
            }
        }
        (bytes, newest)
    }

    /// Marks `psn` lost (if in flight). Returns its entry.
    pub fn mark_lost(&mut self, psn: u64) -> Option<SentPkt> {
        let p = self.get_mut(psn)?;
        if p.state != PktState::InFlight {
            return None;
        }
        p.state = PktState::Lost;
        let before = *p;
        self.inflight_bytes -= u64::from(before.len);
        Some(before)
    }

    /// Drops acknowledged PSNs from the front; returns how far `una` moved.
    pub fn advance(&mut self) -> u64 {
        let mut n = 0;
        while let Some(p) = self.pkts.front() {
            if p.state != PktState::Acked {
                break;
            }
            self.pkts.pop_front();
            n += 1;
        }
        self.una += n;
        n
    }

    /// The oldest first transmission still in flight (moving the cursor past everything that is not one).
    #[inline]
    fn first_live(&mut self) -> Option<(Instant, u64)> {
        self.scan = self.scan.max(self.una);
        loop {
            let p = self.get(self.scan)?;
            if p.state == PktState::InFlight && p.tx_count == 1 {
                return Some((p.sent_at, self.scan));
            }
            self.scan += 1;
        }
    }

    /// The oldest retransmission still in flight (dropping stale entries).
    #[inline]
    fn retx_live(&mut self) -> Option<(Instant, u64)> {
        while let Some(&(t, psn)) = self.retx_times.front() {
            match self.get(psn) {
                Some(p) if p.state == PktState::InFlight && p.sent_at == t => {
                    return Some((t, psn));
                }
                _ => {
                    self.retx_times.pop_front();
                }
            }
        }
        None
    }

    /// The held transmission due first, if still in flight (dropping stale entries).
    #[inline]
    fn held_live(&mut self) -> Option<(Instant, u64)> {
        while let Some(&Reverse((due, psn, sent))) = self.held.peek() {
            match self.get(psn) {
                Some(p) if p.state == PktState::InFlight && p.sent_at == sent => {
                    return Some((due, psn));
                }
                _ => {
                    self.held.pop();
                }
            }
        }
        None
    }

    /// The transmission in flight due first (send time, or send time plus allowance when held) and where it
    /// waits.
    #[inline]
    fn front_live(&mut self) -> Option<(Instant, u64, Front)> {
        let first = match (self.first_live(), self.retx_live()) {
            (Some((a, _)), Some((b, pb))) if b < a => Some((b, pb, Front::Retx)),
            (Some((a, pa)), _) => Some((a, pa, Front::First)),
            (None, Some((b, pb))) => Some((b, pb, Front::Retx)),
            (None, None) => None,
        };
        match (first, self.held_live()) {
            (Some(f), Some((h, ph))) if h < f.0 => Some((h, ph, Front::Held)),
            (Some(f), _) => Some(f),
            (None, Some((h, ph))) => Some((h, ph, Front::Held)),
            (None, None) => None,
        }
    }

    /// When the transmission in flight due first was sent (plus its allowance when held): the loss rules'
    /// reference for the RTO timer.
    #[inline]
    pub fn oldest_inflight(&mut self) -> Option<Instant> {
        self.front_live().map(|(t, _, _)| t)
    }

    /// Takes the oldest in-flight transmission if it was sent at or before `cutoff`, returning its PSN.
    /// Callers use it for both loss rules: RACK (`cutoff` = newest acknowledged send time − reorder window) and
    /// RTO (`cutoff` = now − RTO).
    // spec: REL-LOSS-1
    // spec: REL-LOSS-2
    #[inline]
    pub fn pop_sent_before(&mut self, cutoff: Instant) -> Option<u64> {
        self.pop_due(cutoff, |_, _| 0)
    }

    /// Like [`pop_sent_before`](Self::pop_sent_before), but a transmission whose path delivers
    /// `allowance(ev, sent_at)` ns later than the fastest is judged at send time + allowance: one not yet due is
    /// held back until it is (asked again then, as the path's delay may have grown), or until it is
    /// acknowledged.
    #[inline]
    pub fn pop_due(
        &mut self,
        cutoff: Instant,
        mut allowance: impl FnMut(u16, Instant) -> u64,
    ) -> Option<u64> {
        loop {
            let (t, psn, front) = self.front_live()?;
            if t > cutoff {
                return None;
            }
            match front {
                Front::Held => {
                    self.held.pop();
                }
                Front::Retx => {
                    self.retx_times.pop_front();
                }
                Front::First => self.scan = psn + 1,
            }
            let p = self.get(psn)?;
            let extra = allowance(p.ev, p.sent_at);
            let due = Instant::from_nanos(p.sent_at.as_nanos().saturating_add(extra));
            if due <= cutoff {
                return Some(psn);
            }
            self.held.push(Reverse((due, psn, p.sent_at)));
        }
    }

    /// Iterates over the window, oldest PSN first.
    pub fn iter(&self) -> impl Iterator<Item = (u64, &SentPkt)> {
        self.pkts
            .iter()
            .enumerate()
            .map(move |(i, p)| (self.una + i as u64, p))
    }
}

/// Where the transmission due first waits.
#[derive(Debug, Clone, Copy)]
enum Front {
    First,
    Retx,
    Held,
}

/// Smoothed RTT estimation (RFC 6298 gains) plus the minimum seen, with the RTO and the reorder window derived
/// from them kept ready in nanoseconds: they are read on every transmission and timer check.
#[derive(Debug, Clone, Copy)]
pub struct RttEstimator {
    srtt: u64,
    rttvar: u64,
    min: u64,
    samples: u64,
    rto_floor: u64,
    reorder_floor: u64,
    rto: u64,
    reorder: u64,
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
            samples: 0,
            rto_floor: nanos(rto_floor),
            reorder_floor: nanos(reorder_floor),
            rto: 0,
            reorder: 0,
        };
        e.derive();
        e
    }

    // spec: REL-RTO-1
    fn derive(&mut self) {
        self.rto = (self.srtt + 4 * self.rttvar).max(self.rto_floor);
        self.reorder = (2 * self.rttvar).max(self.reorder_floor);
    }

    /// Adds a sample.
    pub fn update(&mut self, rtt: Duration) {
        let r = nanos(rtt);
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

    /// RTT variation.
    pub fn rttvar(&self) -> Duration {
        Duration::from_nanos(self.rttvar)
    }

    /// Smallest sample, if any.
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

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    #[test]
    fn ack_advance_and_inflight() {
        let mut w = SentWindow::new(100);
        for i in 0..4 {
            w.push(0, i * 10, 10, 0, t(u64::from(i)));
        }
        assert_eq!(w.inflight_bytes(), 40);
        assert!(w.ack(101).is_some());
        assert!(w.ack(101).is_none());
        assert_eq!(w.advance(), 0);
        w.ack(100);
        assert_eq!(w.advance(), 2);
        assert_eq!((w.una(), w.nxt(), w.inflight_bytes()), (102, 104, 20));
    }

    #[test]
    fn time_queue_skips_stale_entries() {
        let mut w = SentWindow::new(0);
        for i in 0..3 {
            w.push(0, 0, 1, 0, t(i));
        }
        w.ack(0);
        assert_eq!(w.oldest_inflight(), Some(t(1)));
        assert_eq!(w.pop_sent_before(t(0)), None);
        assert_eq!(w.pop_sent_before(t(1)), Some(1));
        w.mark_lost(1);
        w.retransmitted(1, 3, t(5));
        assert_eq!(w.get(1).unwrap().tx_count, 2);
        assert_eq!(w.pop_sent_before(t(4)), Some(2));
        assert_eq!(w.pop_sent_before(t(4)), None);
        assert_eq!(w.oldest_inflight(), Some(t(5)));
    }

    /// A transmission on a slow path is judged at send time + its allowance: packets sent after it on fast
    /// paths are taken first, it is taken once due, and an acknowledgement meanwhile clears it.
    #[test]
    fn slow_path_transmissions_are_held_until_due() {
        let mut w = SentWindow::new(0);
        for i in 0..4u64 {
            w.push(0, 0, 1, u16::from(i == 0 || i == 2), t(i));
        }
        // EV 1 delivers 10 µs later than the fastest path.
        let slow = |ev: u16, _| if ev == 1 { 10_000 } else { 0 };
        assert_eq!(
            w.pop_due(t(3), slow),
            Some(1),
            "PSN 0 is held, PSN 1 is due"
        );
        assert_eq!(w.pop_due(t(3), slow), Some(3), "PSN 2 is held too");
        assert_eq!(w.pop_due(t(3), slow), None);
        assert_eq!(
            w.oldest_inflight(),
            Some(t(10)),
            "the RTO reference moves with it"
        );
        w.ack(2);
        assert_eq!(w.pop_due(t(10), slow), Some(0));
        assert!(w.mark_lost(0).is_some());
        assert_eq!(
            w.pop_due(t(100), slow),
            None,
            "PSN 2 was acknowledged while held"
        );
        assert_eq!(w.oldest_inflight(), None);
    }

    #[test]
    fn ack_below_matches_one_by_one() {
        let mut a = SentWindow::new(10);
        for i in 0..8u64 {
            a.push(0, 0, 100 + i as u32, 0, t(i));
        }
        let mut b = a.clone();
        a.mark_lost(12);
        b.mark_lost(12);
        a.retransmitted(12, 1, t(20));
        b.retransmitted(12, 1, t(20));
        b.ack(11);
        a.ack(11);
        let (bytes, newest) = a.ack_below(16);
        let mut want = 0;
        for psn in 10..16 {
            if let Some(p) = b.ack(psn) {
                want += u64::from(p.len);
            }
        }
        assert_eq!(bytes, want);
        assert_eq!(
            newest,
            Some(t(5)),
            "PSN 12 was retransmitted: not a clean sample"
        );
        assert_eq!(a.inflight_bytes(), b.inflight_bytes());
        assert_eq!(a.ack_below(3), (0, None));
    }

    #[test]
    fn late_ack_of_lost_packet_counts() {
        let mut w = SentWindow::new(0);
        w.push(0, 0, 8, 0, t(0));
        w.mark_lost(0);
        assert_eq!(w.inflight_bytes(), 0);
        assert!(w.ack(0).is_some());
        assert_eq!(w.inflight_bytes(), 0);
        assert_eq!(w.advance(), 1);
    }

    #[test]
    fn rto_has_floor_and_tracks_variance() {
        let us = Duration::from_micros;
        let r = RttEstimator::new(us(10), us(40), us(5));
        assert_eq!(r.rto_ns(), 40_000);
        assert_eq!(r.reorder_ns(), 10_000, "2 × rttvar of the base RTT");
        let mut r = RttEstimator::new(us(10), Duration::ZERO, Duration::ZERO);
        r.update(us(10));
        r.update(us(30));
        assert!(r.rto_ns() > 30_000);
        assert_eq!(r.min(), Some(us(10)));
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1000, ..Default::default() })]

        /// The oldest in-flight transmission, and what `pop_sent_before` takes, agree with a brute-force scan of
        /// the window under any mix of sends, acks, losses, retransmissions and pops. (As in the engine, a
        /// popped PSN is declared lost at once.)
        #[test]
        fn oldest_inflight_matches_a_scan(ops in proptest::collection::vec((0u8..6, 0u64..40, 0u64..3), 1..200)) {
            let mut w = SentWindow::new(1000);
            let mut now = 0u64;
            for (op, x, dt) in ops {
                now += dt;
                let psn = w.una() + x % w.len().max(1);
                let scan = |w: &SentWindow| {
                    w.iter()
                        .filter(|(_, p)| p.state == PktState::InFlight)
                        .map(|(_, p)| p.sent_at)
                        .min()
                };
                match op {
                    0 | 1 => {
                        w.push(0, 0, 1, 0, Instant::from_nanos(now));
                    }
                    2 => {
                        w.ack(psn);
                        w.advance();
                    }
                    3 => {
                        w.mark_lost(psn);
                    }
                    4 => w.retransmitted(psn, 1, Instant::from_nanos(now)),
                    _ => {
                        let cutoff = Instant::from_nanos(now.saturating_sub(x));
                        let want = scan(&w).filter(|t| *t <= cutoff);
                        let got = w.pop_sent_before(cutoff);
                        proptest::prop_assert_eq!(got.map(|q| w.get(q).unwrap().sent_at), want);
                        if let Some(q) = got {
                            proptest::prop_assert!(w.mark_lost(q).is_some(), "popped PSN {} was in flight", q);
                        }
                    }
                }
                proptest::prop_assert_eq!(w.oldest_inflight(), scan(&w));
            }
        }
    }
}
