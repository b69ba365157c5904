//! Send-side reliability: what is in flight, what is acknowledged, what is lost.
//!
//! Every transmitted PSN has an entry in a window indexed by `psn - snd_una`. The loss rules need the oldest
//! transmissions still in flight:
//! - time-based (RACK-like, per path): a packet is lost once a packet after it in send order (time, then PSN) was
//!   acknowledged and its own path's expected round trip plus a reorder allowance has passed since it was sent;
//! - tail probe: when nothing sent after the oldest packet in flight has been acknowledged by that time, the
//!   caller sends a probe whose answer stands for such an acknowledgement;
//! - per-packet RTO (the backstop): a packet is lost once it has been unacknowledged for an RTO.
//!
//! First transmissions go out in PSN order and the engine's clock only moves forward, so the window itself is
//! in send-time order for them: a cursor that only moves forward finds the oldest one still in flight.
//! Retransmissions break that order, so they also go into a small queue of their own, which is in send-time order
//! by construction. The oldest transmission in flight is the older of the two fronts. Entries made stale by an
//! acknowledgement, a loss or a later retransmission are skipped lazily, so each is passed once.
//!
//! Each path delivers in its own time (a longer queue, a link running below its rate), so the time rule judges a
//! transmission by when its path is expected to deliver it: once a later-sent packet has been acknowledged and
//! the transmission is older than the fastest round trip, the caller says how long its path takes
//! ([`SentWindow::pop_lost_by_time`]'s `wait`) and it moves to a queue ordered by that due time.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::time::Instant;

/// A transmission's place in send order: its time, then its PSN, the order RACK gives segments sent in the same
/// instant (RFC 8985, section 6.2). A burst leaves in one `now`; by time alone every packet of it would count as
/// sent before whichever one was acknowledged first, and wait on the time rule until acknowledged in turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
pub struct SendOrder {
    pub at: Instant,
    pub psn: u64,
}

impl SendOrder {
    pub const fn new(at: Instant, psn: u64) -> Self {
        SendOrder { at, psn }
    }
}

/// What [`SentWindow::deadlines`] finds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Deadlines {
    /// The oldest transmission in flight that neither loss rule has taken up yet, and its EV.
    pub oldest: Option<(SendOrder, u16)>,
    /// When the time rule next has something to decide.
    pub loss: Option<Instant>,
    /// When the RTO next has something to decide.
    pub rto: Option<Instant>,
}

fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

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
    /// Transmissions that a later-sent packet's acknowledgement made subject to the time rule, due at send time
    /// + their path's wait; earliest due first.
    due: BinaryHeap<Reverse<Timed>>,
    /// Transmissions past the plain RTO that the RTO gives longer because their path is slow, due at send time +
    /// their path's extra delay; earliest first.
    slow: BinaryHeap<Reverse<Timed>>,
    inflight_bytes: u64,
    /// A front was found or sent since anything last took one away: a send need not look for one.
    front_seen: bool,
    /// The front may have changed since [`deadlines`](Self::deadlines) last read it.
    front_moved: bool,
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
        self.front_moved |= self.takes_front(now);
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
        self.front_seen = true;
        psn
    }

    /// Records a retransmission of `psn` (which must be `Lost`) on EV `ev`.
    pub fn retransmitted(&mut self, psn: u64, ev: u16, now: Instant) {
        self.front_moved |= self.takes_front(now);
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
            self.front_seen = true;
        }
    }

    /// Marks `psn` acknowledged. Returns the entry as it was if this acknowledgement is news.
    pub fn ack(&mut self, psn: u64) -> Option<SentPkt> {
        self.lose_front();
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
    /// latest in send order among newly acknowledged packets that were never retransmitted (an unambiguous
    /// sample for time-based loss detection), if any.
    #[cfg(test)]
    pub fn ack_below(&mut self, epsn: u64) -> (u64, Option<SendOrder>) {
        self.ack_below_with(epsn, |_| {})
    }

    /// [`ack_below`](Self::ack_below), calling `clean` with each newly acknowledged packet that was never
    /// retransmitted (its EV and send time are an unambiguous sample of that path).
    pub fn ack_below_with(
        &mut self,
        epsn: u64,
        mut clean: impl FnMut(&SentPkt),
    ) -> (u64, Option<SendOrder>) {
        let n = epsn.saturating_sub(self.una).min(self.pkts.len() as u64) as usize;
        self.lose_front();
        let mut bytes = 0;
        let mut newest: Option<SendOrder> = None;
        for (psn, p) in (self.una..).zip(self.pkts.range_mut(..n)) {
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
                // First transmissions leave in PSN order, so the last one here is the latest sent.
                newest = Some(SendOrder::new(p.sent_at, psn));
                clean(p);
            }
        }
        (bytes, newest)
    }

    /// Marks `psn` lost (if in flight). Returns its entry.
    pub fn mark_lost(&mut self, psn: u64) -> Option<SentPkt> {
        self.lose_front();
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

    /// The live entry at the top of `heap` (dropping stale ones): (key, PSN).
    #[inline]
    fn heap_live(
        pkts: &VecDeque<SentPkt>,
        una: u64,
        heap: &mut BinaryHeap<Reverse<Timed>>,
    ) -> Option<(Instant, u64)> {
        while let Some(&Reverse(e)) = heap.peek() {
            if e.live_in(pkts, una).is_some() {
                return Some((e.due(), e.psn(una)));
            }
            heap.pop();
        }
        None
    }

    /// The oldest transmission in flight that neither rule has taken up yet: (send time, PSN, where it waits).
    #[inline]
    fn front_live(&mut self) -> Option<(Instant, u64, Front)> {
        let front = match (self.first_live(), self.retx_live()) {
            (Some((a, _)), Some((b, pb))) if b < a => Some((b, pb, Front::Retx)),
            (Some((a, pa)), _) => Some((a, pa, Front::First)),
            (None, Some((b, pb))) => Some((b, pb, Front::Retx)),
            (None, None) => None,
        };
        self.front_seen = front.is_some();
        front
    }

    fn take_front(&mut self, psn: u64, front: Front) {
        self.lose_front();
        match front {
            Front::Retx => {
                self.retx_times.pop_front();
            }
            Front::First => self.scan = psn + 1,
        }
    }

    /// Whether a transmission sent at `now` may become the front: there is none, or the front may be a
    /// retransmission sent in the same instant (a first transmission goes first on a tie). Any other front is
    /// older and stays. Inline, as every send asks; the look for a front is not, as few need it.
    #[inline(always)]
    fn takes_front(&mut self, now: Instant) -> bool {
        (!self.front_seen && self.no_front())
            || self.retx_times.back().is_some_and(|&(t, _)| t == now)
    }

    #[inline(never)]
    fn no_front(&mut self) -> bool {
        self.front_live().is_none()
    }

    /// Anything that may take the front away may move the deadlines that run from it, earlier too (a later
    /// front on a faster path).
    #[inline]
    fn lose_front(&mut self) {
        self.front_seen = false;
        self.front_moved = true;
    }

    /// Whether the front (what the RTO and the tail probe run from) may have changed since
    /// [`deadlines`](Self::deadlines) last read it: a send that changed nothing else need not be filed again.
    #[inline]
    pub fn front_moved(&self) -> bool {
        self.front_moved
    }

    /// The oldest transmission in flight that no acknowledgement has made subject to the time rule yet:
    /// its send time and EV. The caller probes the tail when it is overdue.
    #[inline]
    pub fn tail_front(&mut self) -> Option<(SendOrder, u16)> {
        let front = self.front_live();
        self.oldest_of(front)
    }

    /// A front's place in send order and its EV.
    #[inline]
    fn oldest_of(&self, front: Option<(Instant, u64, Front)>) -> Option<(SendOrder, u16)> {
        let (t, psn, _) = front?;
        Some((SendOrder::new(t, psn), self.get(psn)?.ev))
    }

    /// When each loss rule next has something to decide, and the tail probe's reference, in one pass over the
    /// fronts (a QP asks after every acknowledgement and every burst it sends):
    /// - the time rule: the earliest due transmission, or the oldest one a later-sent packet's acknowledgement
    ///   (at or before `acked` in send order) made subject to the rule, once it is `min_wait` old;
    /// - the RTO, for transmissions the time rule has not taken up: `rto` ns after the oldest one was sent, or
    ///   when a slow one's extra time runs out;
    /// - the oldest of those transmissions and its EV ([`tail_front`](Self::tail_front)).
    #[inline]
    pub fn deadlines(&mut self, acked: SendOrder, min_wait: u64, rto: u64) -> Deadlines {
        self.front_moved = false;
        let front = self.front_live();
        let due = Self::heap_live(&self.pkts, self.una, &mut self.due).map(|(d, _)| d);
        let slow = Self::heap_live(&self.pkts, self.una, &mut self.slow).map(|(d, _)| d);
        let after = |t: Instant, ns: u64| Instant::from_nanos(t.as_nanos().saturating_add(ns));
        let next = front
            .filter(|&(t, psn, _)| SendOrder::new(t, psn) <= acked)
            .map(|(t, _, _)| after(t, min_wait));
        Deadlines {
            oldest: self.oldest_of(front),
            loss: earliest(due, next),
            rto: earliest(front.map(|(t, _, _)| t), slow).map(|t| after(t, rto)),
        }
    }

    #[cfg(test)]
    fn time_deadline(&mut self, acked: SendOrder, min_wait: u64) -> Option<Instant> {
        self.deadlines(acked, min_wait, 0).loss
    }

    /// The time rule (spec REL-LOSS-1): takes a transmission still in flight that was sent at or before
    /// `acked` (the latest acknowledged packet in send order) and is due at `now`, i.e. sent at least
    /// `wait(ev, sent_at)` ns ago, and returns its PSN. `wait` is its path's expected round trip plus the
    /// reorder allowance; `min_wait` (no larger than any `wait`) lets younger transmissions stay where they are.
    /// A transmission not yet due waits in due-time order and is asked again when due, as its path's delay may
    /// have grown meanwhile.
    // spec: REL-LOSS-1
    pub fn pop_lost_by_time(
        &mut self,
        acked: SendOrder,
        now: Instant,
        min_wait: u64,
        mut wait: impl FnMut(u16, Instant) -> u64,
    ) -> Option<u64> {
        let gate = now.as_nanos().saturating_sub(min_wait);
        while let Some((t, psn, front)) = self.front_live() {
            if SendOrder::new(t, psn) > acked || t.as_nanos() > gate {
                break;
            }
            self.take_front(psn, front);
            let p = self.get(psn)?;
            let due = Instant::from_nanos(t.as_nanos().saturating_add(wait(p.ev, t)));
            self.due.push(Reverse(Timed::new(due, psn, p)));
        }
        if !self.slow.is_empty() {
            // Past the plain RTO on a slow path, and now a later packet was acknowledged: the time rule decides.
            let (pkts, una, due) = (&self.pkts, self.una, &mut self.due);
            self.slow.retain(|&Reverse(e)| {
                let Some(p) = e.live_in(pkts, una) else {
                    return false;
                };
                if SendOrder::new(p.sent_at, e.psn(una)) > acked {
                    return true;
                }
                due.push(Reverse(Timed::new(p.sent_at, e.psn(una), p)));
                false
            });
        }
        loop {
            let (due, psn) = Self::heap_live(&self.pkts, self.una, &mut self.due)?;
            if due > now {
                return None;
            }
            self.due.pop();
            let p = self.get(psn)?;
            let due =
                Instant::from_nanos(p.sent_at.as_nanos().saturating_add(wait(p.ev, p.sent_at)));
            if due <= now {
                return Some(psn);
            }
            self.due.push(Reverse(Timed::new(due, psn, p)));
        }
    }

    #[cfg(test)]
    fn rto_deadline(&mut self, rto: u64) -> Option<Instant> {
        self.deadlines(SendOrder::default(), 0, rto).rto
    }

    /// The RTO (spec REL-LOSS-2): takes a transmission the time rule has not taken up that was sent at or
    /// before `cutoff` (now − RTO) plus `extra(ev, sent_at)` ns, its path's extra delay, and returns its PSN.
    // spec: REL-LOSS-2
    pub fn pop_lost_by_rto(
        &mut self,
        cutoff: Instant,
        mut extra: impl FnMut(u16, Instant) -> u64,
    ) -> Option<u64> {
        loop {
            let front = self.front_live().filter(|&(t, _, _)| t <= cutoff);
            let slow =
                Self::heap_live(&self.pkts, self.una, &mut self.slow).filter(|&(d, _)| d <= cutoff);
            let psn = match (front, slow) {
                (Some((t, psn, f)), Some((d, _))) if t <= d => {
                    self.take_front(psn, f);
                    psn
                }
                (_, Some((_, psn))) => {
                    self.slow.pop();
                    psn
                }
                (Some((_, psn, f)), None) => {
                    self.take_front(psn, f);
                    psn
                }
                (None, None) => return None,
            };
            let p = self.get(psn)?;
            let due =
                Instant::from_nanos(p.sent_at.as_nanos().saturating_add(extra(p.ev, p.sent_at)));
            if due <= cutoff {
                return Some(psn);
            }
            self.slow.push(Reverse(Timed::new(due, psn, p)));
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

/// A transmission waiting for a loss rule: when it is due, its PSN and which transmission of it, as one integer
/// (due ns, then the PSN's low 48 bits, then the transmission count), so that the queues compare and move 16
/// bytes. Later transmissions of a PSN count higher, so entries order as (due, PSN, send time) would; only two
/// entries due in the same nanosecond on either side of a multiple of 2^48 PSNs (one such pair in 2^48 packets
/// of a QP) swap places.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
struct Timed(u128);

impl Timed {
    /// A live entry's PSN is within the window above `una`, far less than 2^47 PSNs, so 48 bits find it.
    const PSN_MASK: u64 = (1 << 48) - 1;

    fn new(due: Instant, psn: u64, p: &SentPkt) -> Self {
        let low = (psn & Self::PSN_MASK) << 16 | u64::from(p.tx_count);
        Timed(u128::from(due.as_nanos()) << 64 | u128::from(low))
    }

    fn due(self) -> Instant {
        Instant::from_nanos((self.0 >> 64) as u64)
    }

    /// The PSN, taken as the one at or above `una` with these low bits (an entry left from below `una` then
    /// lands far above the window, where nothing is in flight).
    fn psn(self, una: u64) -> u64 {
        una.wrapping_add(self.offset(una))
    }

    /// The entry's place in a window starting at PSN `una`.
    fn offset(self, una: u64) -> u64 {
        ((self.0 as u64) >> 16).wrapping_sub(una) & Self::PSN_MASK
    }

    /// The packet of window `pkts` (starting at PSN `una`) this entry stands for, while it is still this
    /// transmission in flight.
    fn live_in(self, pkts: &VecDeque<SentPkt>, una: u64) -> Option<&SentPkt> {
        pkts.get(usize::try_from(self.offset(una)).ok()?)
            .filter(|p| self.times(p))
    }

    /// Whether this entry is `p`'s transmission in flight (not one acknowledged, lost or sent again since).
    fn times(self, p: &SentPkt) -> bool {
        p.state == PktState::InFlight && p.tx_count == self.0 as u16
    }
}

/// Where the transmission due first waits.
#[derive(Debug, Clone, Copy)]
enum Front {
    First,
    Retx,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn t(us: u64) -> Instant {
        Instant::from_nanos(us * 1000)
    }

    /// The place in send order of PSN `psn`, sent at `psn` µs (as the tests below send).
    fn o(psn: u64) -> SendOrder {
        SendOrder::new(t(psn), psn)
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

    /// A queue entry gives back its due time and PSN, orders as (due, PSN, transmission) would, and stops
    /// standing for its packet once the packet is sent again.
    #[test]
    fn timed_entries_pack_due_psn_and_transmission() {
        let mut w = SentWindow::new((1 << 47) + 5);
        let psn = w.push(0, 0, 10, 3, t(1));
        let p = *w.get(psn).unwrap();
        let e = Timed::new(t(9), psn, &p);
        assert_eq!((e.due(), e.psn(w.una())), (t(9), psn));
        assert!(e.times(&p));
        let keys = [(t(2), 7, 1), (t(2), 7, 2), (t(2), 8, 1), (t(3), 0, 1)];
        for pair in keys.windows(2) {
            let [(d0, q0, x0), (d1, q1, x1)] = [pair[0], pair[1]];
            let mk = |d, q, x| Timed::new(d, q, &SentPkt { tx_count: x, ..p });
            assert!(
                mk(d0, q0, x0) < mk(d1, q1, x1),
                "{:?} before {:?}",
                pair[0],
                pair[1]
            );
        }
        w.mark_lost(psn);
        assert!(!e.times(w.get(psn).unwrap()), "lost");
        w.retransmitted(psn, 4, t(5));
        assert!(!e.times(w.get(psn).unwrap()), "sent again");

        // Across a multiple of 2^48 PSNs the window still finds each entry's PSN; one left from below `una`
        // lands above the window.
        let mut w = SentWindow::new((1 << 48) - 2);
        let psns: Vec<u64> = (0..4).map(|i| w.push(0, 0, 10, 0, t(i))).collect();
        let entries: Vec<Timed> = psns
            .iter()
            .map(|&q| Timed::new(t(9), q, w.get(q).unwrap()))
            .collect();
        for (q, e) in psns.iter().zip(&entries) {
            assert_eq!(e.psn(w.una()), *q);
        }
        w.ack(psns[0]);
        w.advance();
        assert!(entries[0].psn(w.una()) >= w.nxt(), "below una");
        assert_eq!(entries[3].psn(w.una()), psns[3]);
    }

    /// The RTO takes the oldest transmission still in flight, skipping acknowledged and retransmitted ones.
    #[test]
    fn rto_queue_skips_stale_entries() {
        let mut w = SentWindow::new(0);
        for i in 0..3 {
            w.push(0, 0, 1, 0, t(i));
        }
        w.ack(0);
        let none = |_, _| 0;
        assert_eq!(w.rto_deadline(1000), Some(t(2)));
        assert_eq!(w.pop_lost_by_rto(t(0), none), None);
        assert_eq!(w.pop_lost_by_rto(t(1), none), Some(1));
        w.mark_lost(1);
        w.retransmitted(1, 3, t(5));
        assert_eq!(w.get(1).unwrap().tx_count, 2);
        assert_eq!(w.pop_lost_by_rto(t(4), none), Some(2));
        assert_eq!(w.pop_lost_by_rto(t(4), none), None);
        assert_eq!(w.rto_deadline(0), Some(t(5)));
    }

    /// The time rule takes a transmission only once a packet sent at or after it was acknowledged and its own
    /// path's wait has passed: one on a slow path waits longer than packets sent after it on fast ones, and an
    /// acknowledgement meanwhile clears it.
    #[test]
    fn time_rule_waits_for_each_path() {
        let mut w = SentWindow::new(0);
        for i in 0..4u64 {
            w.push(0, 0, 1, u16::from(i == 0 || i == 2), t(i));
        }
        // EV 0 delivers in 10 µs, EV 1 in 30 µs.
        let wait = |ev: u16, _| if ev == 1 { 30_000 } else { 10_000 };
        assert_eq!(
            w.pop_lost_by_time(o(1), t(5), 10_000, wait),
            None,
            "PSN 0 and 1 may be judged (a packet sent at 1 µs was acknowledged), but neither has waited its path's time"
        );
        assert_eq!(w.pop_lost_by_time(o(3), t(12), 10_000, wait), Some(1));
        assert_eq!(
            w.pop_lost_by_time(o(3), t(12), 10_000, wait),
            None,
            "PSN 0 and 2 are on the slow path, PSN 3 not yet due"
        );
        assert_eq!(w.time_deadline(o(3), 10_000), Some(t(13)));
        assert_eq!(w.pop_lost_by_time(o(3), t(13), 10_000, wait), Some(3));
        assert_eq!(w.time_deadline(o(3), 10_000), Some(t(30)));
        w.ack(2);
        assert_eq!(w.pop_lost_by_time(o(3), t(30), 10_000, wait), Some(0));
        assert!(w.mark_lost(0).is_some());
        assert_eq!(
            w.pop_lost_by_time(o(3), t(100), 10_000, wait),
            None,
            "PSN 2 was acknowledged while it waited"
        );
        assert_eq!(w.time_deadline(o(3), 10_000), None);
    }

    /// A burst leaves in one instant: the acknowledgement of one packet of it makes the packets before it in
    /// PSN order subject to the time rule, not those after it (RFC 8985's tie-break), which wait for their own.
    #[test]
    fn same_instant_orders_by_psn() {
        let mut w = SentWindow::new(0);
        for _ in 0..4 {
            w.push(0, 0, 1, 0, t(0));
        }
        w.ack(1);
        let acked = SendOrder::new(t(0), 1);
        let wait = |_, _| 10_000;
        assert_eq!(w.time_deadline(acked, 1000), Some(t(1)), "PSN 0 waits");
        assert_eq!(w.pop_lost_by_time(acked, t(10), 1000, wait), Some(0));
        assert!(w.mark_lost(0).is_some());
        assert_eq!(
            w.pop_lost_by_time(acked, t(100), 1000, wait),
            None,
            "PSN 2 and 3 left with PSN 1 but after it"
        );
        assert_eq!(w.time_deadline(acked, 1000), None);
        assert_eq!(w.tail_front(), Some((SendOrder::new(t(0), 2), 0)));
    }

    /// The oldest transmission no acknowledgement has made subject to the time rule is the tail probe's
    /// reference.
    #[test]
    fn tail_front_is_the_oldest_unjudged() {
        let mut w = SentWindow::new(0);
        for i in 0..3u64 {
            w.push(0, 0, 1, i as u16, t(i));
        }
        assert_eq!(w.tail_front(), Some((o(0), 0)));
        w.ack(2);
        // PSN 0 and 1 become subject to the rule once they are old enough to be judged.
        assert_eq!(w.pop_lost_by_time(o(2), t(5), 1000, |_, _| 10_000), None);
        assert_eq!(
            w.tail_front(),
            None,
            "PSN 2 is acknowledged, 0 and 1 wait on their paths"
        );
    }

    /// What a send may move is reported: a front where there was none, or a first transmission that takes the
    /// place of a retransmission sent in the same instant; a packet behind an older front moves nothing.
    #[test]
    fn a_send_reports_a_new_front() {
        let mut w = SentWindow::new(0);
        w.push(0, 0, 1, 0, t(0));
        assert!(w.front_moved(), "the first packet is the front");
        w.deadlines(SendOrder::default(), 0, 0);
        assert!(!w.front_moved(), "read by the deadlines");
        w.push(0, 0, 1, 1, t(1));
        assert!(!w.front_moved(), "behind PSN 0");
        w.mark_lost(0);
        assert!(w.front_moved(), "the front was taken away");
        w.mark_lost(1);
        w.retransmitted(0, 2, t(5));
        assert_eq!(w.tail_front(), Some((SendOrder::new(t(5), 0), 2)));
        w.deadlines(SendOrder::default(), 0, 0);
        w.push(0, 0, 1, 3, t(5));
        assert!(
            w.front_moved(),
            "a first transmission goes first on a tie with a retransmission"
        );
        assert_eq!(w.tail_front(), Some((SendOrder::new(t(5), 2), 3)));
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
            Some(SendOrder::new(t(5), 15)),
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

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 1000, ..Default::default() })]

        /// What the RTO takes agrees with a brute-force scan of the window under any mix of sends, acks, losses,
        /// retransmissions and pops, and the time rule never takes a transmission that no later one's
        /// acknowledgement made subject to it, nor one younger than its wait. (As in the engine, a popped PSN is
        /// declared lost at once.)
        #[test]
        fn loss_rules_match_a_scan(ops in proptest::collection::vec((0u8..7, 0u64..40, 0u64..3), 1..200)) {
            let mut w = SentWindow::new(1000);
            let mut now = 0u64;
            let mut acked = SendOrder::default();
            let wait = |ev: u16, _| 1000 * (1 + u64::from(ev % 3));
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
                        w.push(0, 0, 1, (x % 5) as u16, Instant::from_nanos(now * 1000));
                    }
                    2 => {
                        if let Some(p) = w.ack(psn) && p.tx_count == 1 {
                            acked = acked.max(SendOrder::new(p.sent_at, psn));
                        }
                        w.advance();
                    }
                    3 => {
                        w.mark_lost(psn);
                    }
                    4 => w.retransmitted(psn, 1, Instant::from_nanos(now * 1000)),
                    5 => {
                        let n = Instant::from_nanos(now * 1000);
                        if let Some(q) = w.pop_lost_by_time(acked, n, 1000, wait) {
                            let p = *w.get(q).unwrap();
                            proptest::prop_assert!(SendOrder::new(p.sent_at, q) <= acked, "PSN {} judged with nothing later acknowledged", q);
                            proptest::prop_assert!(p.sent_at.as_nanos() + wait(p.ev, p.sent_at) <= n.as_nanos(), "PSN {} taken before its wait", q);
                            proptest::prop_assert!(w.mark_lost(q).is_some(), "popped PSN {} was in flight", q);
                        }
                    }
                    _ => {
                        // Only transmissions the time rule has not taken up are the RTO's: compare before the
                        // time rule has run in this case.
                        let cutoff = Instant::from_nanos((now * 1000).saturating_sub(x * 1000));
                        let got = w.pop_lost_by_rto(cutoff, |_, _| 0);
                        if let Some(q) = got {
                            proptest::prop_assert!(w.get(q).unwrap().sent_at <= cutoff);
                            proptest::prop_assert!(w.mark_lost(q).is_some(), "popped PSN {} was in flight", q);
                        }
                    }
                }
                if w.due.is_empty() && w.slow.is_empty() {
                    proptest::prop_assert_eq!(w.rto_deadline(0), scan(&w));
                }
            }
        }
    }
}
