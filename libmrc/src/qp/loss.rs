//! Loss detection at the requester: the time rule, tail probes, the RTO, and losses presumed with a path or
//! plane.

use super::{Qp, QpState, Requester, Timer};
use crate::io::Transmit;
use crate::reliability::{PktState, SendOrder};
use crate::time::Instant;

/// A slow path's delay lengthens the RTO of its packets by at most this many RTOs: one wrong delay sample (an
/// echo corrupted on a link without ICRC read as 2 s) held a packet, and with it the QP, for seconds.
const MAX_EXTRA_RTOS: u64 = 4;

impl Qp {
    /// The fastest round trip seen (the configured base RTT before any sample), ns.
    pub(crate) fn min_rtt_ns(&self) -> u64 {
        self.req.rtt.min_or_base_ns()
    }

    /// Time-based loss detection (spec REL-LOSS-1): a packet still in flight is lost once a packet after it in
    /// send order was acknowledged and its path's expected round trip plus the reorder window has passed. A packet
    /// on a slow path (a long queue, a link below its rate) is expected later than one on a fast path, so it is
    /// given that much more time: resending it would waste the capacity the slow path still has. A packet on a
    /// path that died is found as soon as its path's round trip is over, not after an RTO.
    pub(crate) fn detect_losses_rack(&mut self, now: Instant) {
        let min = self.min_rtt_ns();
        loop {
            let (paths, rtt) = (&self.paths, &self.req.rtt);
            let Some(psn) = self
                .req
                .sent
                .pop_lost_by_time(self.req.rack, now, min, |ev, t| {
                    loss_wait_ns(paths, rtt, min, ev, t)
                })
            else {
                break;
            };
            self.stats.losses_rack += 1;
            self.declare_lost(psn, now, false);
        }
    }

    /// The tail loss probe (spec REL-TLP-1): when the oldest packet in flight has waited its path's round trip
    /// plus the reorder window and nothing sent after it was acknowledged (a loss at the tail of a burst has
    /// nothing behind it to overtake it), one probe goes out on a path that delivers; its answer stands for an
    /// acknowledgement of a packet sent then, so the time rule can judge everything sent before it.
    // spec: REL-TLP-1
    pub(super) fn check_tail(&mut self, now: Instant) {
        let Some(due) = self.tail_probe_due() else {
            return;
        };
        if due <= now {
            self.req.tail.wanted = true;
        }
    }

    /// When the tail probe is due, if one may go out (none wanted or unanswered within its own wait).
    pub(crate) fn tail_probe_due(&mut self) -> Option<Instant> {
        let oldest = self.req.sent.tail_front();
        self.tail_probe_due_after(oldest, self.min_rtt_ns())
    }

    /// [`tail_probe_due`](Self::tail_probe_due) for `oldest`, what [`SentWindow::tail_front`] says now, with the
    /// fastest round trip `min` (both already at hand in [`next_deadline`](Self::next_deadline)).
    pub(crate) fn tail_probe_due_after(
        &mut self,
        oldest: Option<(SendOrder, u16)>,
        min: u64,
    ) -> Option<Instant> {
        if self.req.tail.wanted || self.state != QpState::Rts {
            return None;
        }
        if self
            .req
            .tail
            .outstanding
            .is_some_and(|(_, at)| at <= self.req.rack.at)
        {
            // A packet sent after the probe was acknowledged: the probe's answer has nothing more to tell.
            self.req.tail.outstanding = None;
            self.req.tail.count = 0;
        }
        let (front, ev) = oldest?;
        if front <= self.req.rack {
            return None;
        }
        let t = front.at;
        let wait = loss_wait_ns(&self.paths, &self.req.rtt, min, ev, t);
        let mut due = Instant::from_nanos(t.as_nanos().saturating_add(wait));
        if let Some((_, at)) = self.req.tail.outstanding {
            // One probe at a time; an unanswered one is repeated after twice the wait, doubling.
            let back = wait.saturating_mul(2 << self.req.tail.count.min(10));
            due = due.max(Instant::from_nanos(at.as_nanos().saturating_add(back)));
        }
        Some(due)
    }

    /// Sends the wanted tail probe on the EV that last delivered (or the next in rotation).
    pub(crate) fn emit_tail_probe(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        let idx = self
            .req
            .tail
            .last_delivered
            .filter(|&i| self.paths.usable_ev(i))
            .or_else(|| self.paths.next_ev())?;
        self.req.tail.wanted = false;
        let t = self.emit_probe(idx, now, buf, false)?;
        if self.req.tail.outstanding.is_some() {
            self.req.tail.count = self.req.tail.count.saturating_add(1);
        }
        self.req.tail.outstanding = Some((now.ts32(), now));
        self.stats.tail_probes += 1;
        let due = self.tail_probe_due().unwrap_or(Instant::MAX);
        self.timers.set(Timer::TailProbe, due);
        Some(t)
    }

    /// A probe answer echoing `ts` arrived: when it answers the tail probe, whatever the receiver had not got by
    /// then was sent before the probe, as if a packet sent with the probe had been acknowledged.
    pub(super) fn on_tail_probe_answer(&mut self, ts: u32) {
        if let Some((pts, at)) = self.req.tail.outstanding
            && pts == ts
        {
            self.req.tail.outstanding = None;
            self.req.tail.count = 0;
            // Sent after every packet of its instant: the answer stands for all of them.
            self.req.rack = self.req.rack.max(SendOrder::new(at, u64::MAX));
        }
    }

    /// Per-packet RTO: whatever the time rule has not taken up and has been unacknowledged for an RTO (plus its
    /// path's extra delay, as above) is lost (spec REL-LOSS-2, REL-RTO-1).
    pub(crate) fn detect_losses_rto(&mut self, now: Instant) {
        let Some(cutoff) = now.as_nanos().checked_sub(self.req.rtt.rto_ns()) else {
            return;
        };
        let min = self.min_rtt_ns();
        let typical = self.req.rtt.srtt_ns().max(min);
        let cap = self.req.rtt.rto_ns().saturating_mul(MAX_EXTRA_RTOS);
        loop {
            let paths = &self.paths;
            let Some(psn) = self
                .req
                .sent
                .pop_lost_by_rto(Instant::from_nanos(cutoff), |ev, sent| {
                    loss_extra_ns(paths.expected_rtt(ev, sent), min, typical).min(cap)
                })
            else {
                break;
            };
            self.stats.losses_rto += 1;
            self.declare_lost(psn, now, true);
        }
    }

    fn declare_lost(&mut self, psn: u64, now: Instant, by_rto: bool) {
        if let Some(p) = self.req.sent.mark_lost(psn) {
            self.req.retx.push_back(psn);
            // spec: PATH-EV-8
            // Timed out with nothing after it in send order acknowledged since: the peer (or this host) went quiet
            // on every path at once, as a descheduled process does, which says nothing about this path.
            let peer_quiet = by_rto && self.req.rack < SendOrder::new(p.sent_at, psn);
            // spec: PATH-EV-4
            // While the receiver trims at its own last hop, a packet missing for long most likely waits in that
            // queue or its NACK behind others on the receiver's link: the receiver's congestion, which says
            // nothing about the path (as PATH-EV-3 says of the trims themselves).
            let receiver_congested = now < self.req.lasthop_trim_until;
            let was = self.paths.state(p.ev);
            let retired =
                self.paths
                    .on_loss(p.ev, now, p.sent_at, receiver_congested || peer_quiet);
            if retired.is_none() && self.paths.state(p.ev) == crate::path::EvState::AssumedBad {
                match self.paths.losses_in_a_row(p.ev) {
                    2 => self.presume_ev_lost(p.ev),
                    _ if was != crate::path::EvState::AssumedBad => self.suspect_ev(p.ev),
                    _ => {}
                }
            }
            // A loss on a path not yet measured or much slower than the QP's others may be a packet still in
            // that path's queue; the window is left to what the QP's typical paths say.
            if !self.paths.slow_or_unmeasured(p.ev, self.typical_rtt_ns()) {
                self.req.cc.on_loss(now, u64::from(p.len));
            }
            if let Some(plane) = retired {
                self.presume_plane_lost(plane);
            }
        }
    }

    /// EV `ev`, retired for a loss, lost a second packet with none acknowledged in between: its path does not
    /// deliver, and the packets still in flight on it followed the lost ones there, so they are resent
    /// elsewhere now instead of one by one as each comes due (the last of them, at the tail of a message, only
    /// after a tail probe's round trip). One loss alone does not do it: under random loss the packets behind it
    /// arrive. Neither congestion control nor other EVs are penalised for them.
    // spec: PATH-EV-4
    fn presume_ev_lost(&mut self, ev: u16) {
        self.req.suspects.clear();
        let doomed: Vec<u64> = self
            .req
            .sent
            .iter()
            .filter(|(_, p)| p.state == PktState::InFlight && p.ev == ev)
            .map(|(psn, _)| psn)
            .collect();
        for psn in doomed {
            if self.req.sent.mark_lost(psn).is_some() {
                self.req.retx.push_back(psn);
                self.stats.losses_path += 1;
            }
        }
    }

    /// EV `ev` was just retired for its first loss: the packets still in flight on it may have followed the lost
    /// one onto a dead path, or may arrive (random loss). They become suspects: resent as soon as the QP has no
    /// new data to send (the tail of a message, where nothing later would find them soon), else left to the
    /// loss rules (a second loss on the EV gives them all up).
    // spec: PATH-EV-4
    fn suspect_ev(&mut self, ev: u16) {
        let Requester { sent, suspects, .. } = &mut self.req;
        suspects.extend(
            sent.iter()
                .filter(|(_, p)| p.state == PktState::InFlight && p.ev == ev)
                .map(|(psn, _)| psn),
        );
    }

    /// With nothing new to send, resends the suspects still in flight (see [`suspect_ev`](Self::suspect_ev)).
    pub(super) fn resend_suspects(&mut self) {
        while let Some(psn) = self.req.suspects.pop_front() {
            let on_retired = self.req.sent.get(psn).is_some_and(|p| {
                p.state == PktState::InFlight
                    && self.paths.state(p.ev) == crate::path::EvState::AssumedBad
            });
            if on_retired && self.req.sent.mark_lost(psn).is_some() {
                self.req.retx.push_back(psn);
                self.stats.losses_path += 1;
            }
        }
    }

    /// A plane was just retired for silence, or a port of it went down at either end: whatever is still in
    /// flight on it went the same way, so it is resent elsewhere now instead of one reorder window (or one RTO)
    /// at a time. Neither congestion control nor the EVs are penalised for it.
    // spec: PATH-PLANE-1
    // spec: PATH-PLANE-2
    pub(crate) fn presume_plane_lost(&mut self, plane: u8) {
        let doomed: Vec<u64> = self
            .req
            .sent
            .iter()
            .filter(|(_, p)| p.state == PktState::InFlight && self.paths.plane(p.ev) == plane)
            .map(|(psn, _)| psn)
            .collect();
        for psn in doomed {
            if self.req.sent.mark_lost(psn).is_some() {
                self.req.retx.push_back(psn);
                self.stats.losses_plane += 1;
            }
        }
    }
}

/// How many smoothed RTTs loss detection waits for a packet on a path that trimmed but has not been sampled
/// yet (see `PathSet::loss_allowance_ns`): a full queue on a link slowed to a quarter of its rate holds about
/// four RTTs of a 1-BDP buffer, twice that both ways.
const CONGESTED_PATH_RTTS: u64 = 16;

/// How long after sending it the time rule waits for a packet on EV `ev` sent at `sent` (see
/// [`Qp::detect_losses_rack`]), ns: its path's expected round trip plus the reorder allowance, or only the
/// fastest round trip `min` when a later packet on the same EV was acknowledged (one path delivers in order: it
/// was overtaken).
fn loss_wait_ns(
    paths: &crate::path::PathSet,
    rtt: &crate::reliability::RttEstimator,
    min: u64,
    ev: u16,
    sent: Instant,
) -> u64 {
    use crate::path::PathDelay;
    let typical = rtt.srtt_ns().max(min);
    let reo = rtt.reorder_ns();
    let d = paths.expected_rtt(ev, sent);
    let w = match d {
        PathDelay::Overtaken => min,
        PathDelay::Known(e) if 4 * e > 5 * typical => 3 * e + reo,
        PathDelay::Known(e) => e.max(typical) + reo,
        PathDelay::Unknown(w) => typical.max(w) + reo,
        PathDelay::Congested => CONGESTED_PATH_RTTS * min,
    };
    w.max(rtt.nack_wait_ns())
}

/// How much later than the fastest round trip (`min`) a packet on a path of delay `d` may be acknowledged:
/// what the RTO adds for it (spec REL-LOSS-2).
fn loss_extra_ns(d: crate::path::PathDelay, min: u64, typical: u64) -> u64 {
    use crate::path::PathDelay;
    match d {
        PathDelay::Overtaken => 0,
        PathDelay::Known(e) => e.saturating_sub(min),
        PathDelay::Unknown(w) => typical.max(w).saturating_sub(min),
        PathDelay::Congested => CONGESTED_PATH_RTTS * min,
    }
}
