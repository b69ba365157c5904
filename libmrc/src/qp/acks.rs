//! What the requester does with feedback: SACKs, NACKs and ACKs acknowledge, retransmit and sample RTTs.

use super::{Qp, QpState, Timer};
use crate::cc::AckSample;
use crate::completion::WcStatus;
use crate::reliability::{PktState, SendOrder, unwrap_msn, unwrap_psn};
use crate::time::{Duration, Instant};
use crate::wire::{Ack, Nack, NackReason, PSN_MASK, Sack, SackMark};

/// RTT samples above this many ns are treated as garbage (a stale or forged echo).
const MAX_RTT_NS: u64 = 4_000_000_000;

impl Qp {
    /// Acknowledges `[una, epsn)` and the bitmap bits; returns newly acknowledged bytes.
    fn apply_acks(&mut self, now: Instant, epsn: u64, base: u64, bitmap: u64) -> u64 {
        let una = self.req.sent.una();
        let nxt = self.req.sent.nxt();
        let paths = &mut self.paths;
        let (mut bytes, newest) = self
            .req
            .sent
            .ack_below_with(epsn, |p| paths.on_clean_ack(p.ev, p.sent_at, now));
        if let Some(o) = newest {
            self.req.rack = self.req.rack.max(o);
        }
        let mut bits = bitmap;
        while bits != 0 {
            let i = bits.trailing_zeros();
            bits &= bits - 1;
            let psn = base + u64::from(i);
            if psn >= una && psn < nxt {
                bytes += self.ack_one(now, psn);
            }
        }
        bytes
    }

    fn ack_one(&mut self, now: Instant, psn: u64) -> u64 {
        match self.req.sent.ack(psn) {
            Some(p) => {
                if p.tx_count == 1 {
                    // Only unambiguous acknowledgements advance the time-based loss reference.
                    self.req.rack = self.req.rack.max(SendOrder::new(p.sent_at, psn));
                    self.paths.on_clean_ack(p.ev, p.sent_at, now);
                }
                u64::from(p.len)
            }
            None => 0,
        }
    }

    /// Unwraps a peer's cumulative PSN (CACK_PSN + 1) and checks that it names state that exists: nothing above
    /// `snd_nxt` (PSNs never sent) and nothing more than one window below `snd_una` (a genuine SACK overtaken by
    /// later ones is at most that stale; anything older is forged or from an earlier life of the QP). `None`,
    /// counted, otherwise.
    // spec: SEC-BLIND-2
    fn peer_epsn(&mut self, cack_psn: u32) -> Option<u64> {
        let una = self.req.sent.una();
        let epsn = unwrap_psn(cack_psn.wrapping_add(1) & PSN_MASK, una);
        let floor = una.saturating_sub(u64::from(self.cfg().mpr) * 128);
        if epsn > self.req.sent.nxt() || epsn < floor {
            self.stats.rx_bad_acks += 1;
            return None;
        }
        Some(epsn)
    }

    /// Processes a SACK (spec REL-SACK-3).
    // spec: REL-SACK-3
    pub(crate) fn on_sack(&mut self, now: Instant, s: &Sack) {
        self.stats.rx_sacks += 1;
        if self.state != QpState::Rts {
            return;
        }
        let Some(epsn) = self.peer_epsn(s.cack_psn) else {
            return;
        };
        self.set_peer_mpr(s.mpr);
        let base = unwrap_psn(s.sack_base, self.req.sent.una());
        let acked = self.apply_acks(now, epsn, base, s.bitmap);
        let rtt = s
            .ts_echo
            .map(|ts| u64::from(now.ts32().wrapping_sub(ts)))
            .filter(|&r| r < MAX_RTT_NS);
        if let Some(r) = rtt {
            self.req.rtt.update_ns(r);
        }
        let mut outlier = false;
        if s.probe_reply
            && let Some(ts) = s.ts_echo
        {
            self.on_tail_probe_answer(ts);
        }
        if let Some(idx) = self.paths.find(s.ev) {
            if s.probe_reply {
                if let Some(ts) = s.ts_echo {
                    self.paths.on_probe_reply(idx, ts, s.mark, now);
                }
            } else {
                if let Some(ts) = s.ts_echo {
                    self.paths.on_late_delivery(idx, ts);
                }
                self.req.tail.last_delivered = Some(idx);
                self.paths.on_delivery(idx, rtt);
                if rtt.is_some() {
                    outlier = self.paths.weigh_by_delay(idx, self.typical_rtt_ns());
                }
                self.paths.on_mark(idx, s.mark, now);
            }
        }
        let ecn = s.mark != SackMark::None;
        self.stats.ecn_marks += u64::from(ecn);
        // A path much slower than the QP's others is load balancing's business (it now carries less), not
        // congestion control's: its delay and marks say that one path is slow, and cutting the whole window
        // for it would idle every fast path. Congestion that reaches the QP's typical path (an incast, a busy
        // receiver) still counts in full.
        let (rtt, ecn) = if outlier {
            (None, false)
        } else {
            (rtt.map(Duration::from_nanos), ecn)
        };
        let progressed = self.req.sent.advance() > 0;
        // spec: CC-API-1
        self.req.cc.on_ack(
            now,
            &AckSample {
                newly_acked_bytes: acked,
                rtt,
                ecn,
                rcv_cwnd_pen: s.cwnd_pen,
                inflight: self.req.sent.inflight_bytes(),
            },
        );
        self.detect_losses_rack(now);
        self.complete_sq();
        if progressed {
            self.arm_retry(now, true);
        }
        self.collect_ev_changes();
    }

    /// The QP's smoothed RTT over all its paths, ns: what a path is compared with to call it slow.
    pub(super) fn typical_rtt_ns(&self) -> u64 {
        self.req.rtt.srtt_ns()
    }

    /// Processes a NACK (spec REL-NACK-1). It must name a PSN that is outstanding (sent, not yet acknowledged),
    /// else it is counted and dropped whole: a blind NACK guessing a PSN changes nothing (spec SEC-BLIND-1).
    // spec: REL-NACK-1
    pub(crate) fn on_nack(&mut self, now: Instant, n: &Nack) {
        if self.state != QpState::Rts {
            return;
        }
        let psn = unwrap_psn(n.psn, self.req.sent.una());
        // spec: SEC-BLIND-1
        if self
            .req
            .sent
            .get(psn)
            .is_none_or(|p| p.state == PktState::Acked)
        {
            self.stats.rx_bad_acks += 1;
            return;
        }
        let Some(epsn) = self.peer_epsn(n.cack_psn) else {
            return;
        };
        let acked = self.apply_acks(now, epsn, epsn, 0);
        let progressed = self.req.sent.advance() > 0;
        if let Some(idx) = self.paths.find(n.ev) {
            // The header made it back: the path is alive even if the payload was cut.
            self.paths.on_delivery(idx, None);
        }
        // Only a NACK for the latest transmission of a PSN still unacknowledged counts; an older one is stale.
        let latest = self
            .req
            .sent
            .get(psn)
            .filter(|p| p.state != PktState::Acked && p.sent_at.ts32() == n.ts_echo)
            .copied();
        let current = latest.filter(|p| p.state == PktState::InFlight);
        if let Some(p) = latest {
            // The NACK answers exactly this transmission: how long feedback takes, which the RTO must cover.
            self.req.rtt.update_nack(Duration::from_nanos(
                now.as_nanos().saturating_sub(p.sent_at.as_nanos()),
            ));
        }
        match n.reason {
            NackReason::Trimmed | NackReason::TrimmedLastHop => {
                self.stats.rx_trim_nacks += 1;
                if n.reason == NackReason::TrimmedLastHop {
                    self.req.lasthop_trim_until = now + self.cfg().rto_min();
                }
                if let Some(p) = current {
                    let last_hop = n.reason == NackReason::TrimmedLastHop;
                    self.req.sent.mark_lost(psn);
                    // spec: REL-TRIM-1
                    self.req.retx.push_front(psn);
                    self.paths.on_trim(p.ev, last_hop);
                    // A trim in the fabric on a path not yet measured or much slower than the QP's others is
                    // that path's congestion, which the SKIP above and the delay weighting move traffic off;
                    // it says nothing about the QP's window.
                    if last_hop || !self.paths.slow_or_unmeasured(p.ev, self.typical_rtt_ns()) {
                        self.req.cc.on_trim(now, u64::from(p.len), last_hop);
                    }
                }
            }
            NackReason::NoResource | NackReason::PsnOutOfWindow => {
                self.stats.rx_retry_nacks += 1;
                if n.reason == NackReason::PsnOutOfWindow {
                    self.set_peer_mpr(n.mpr);
                } else {
                    self.req.last_nack_rnr = true;
                }
                if current.is_some() {
                    self.req.sent.mark_lost(psn);
                    // spec: REL-NACK-2
                    let at = now + self.cfg().rnr_delay;
                    self.req.delayed.push_back((at, psn));
                    let first = self.req.delayed.front().map_or(at, |&(t, _)| t);
                    self.timers.set(Timer::RnrResend, first);
                }
            }
            NackReason::RemoteAccess | NackReason::InvalidRequest | NackReason::Unexpected => {
                self.stats.rx_fatal_nacks += 1;
                // A fatal NACK must also echo the time of the PSN's latest transmission: a stale one (an earlier
                // copy was refused, the retransmission will be answered too) or a forged one ends nothing.
                if let Some(p) = latest {
                    let status = match n.reason {
                        NackReason::RemoteAccess => WcStatus::RemAccessErr,
                        NackReason::InvalidRequest => WcStatus::RemInvReqErr,
                        _ => WcStatus::RemOpErr,
                    };
                    // spec: REL-NACK-3
                    self.enter_error(Some((p.wqe, status)), now);
                    return;
                }
            }
            NackReason::Unknown(_) => self.stats.rx_unknown_nacks += 1,
        }
        if acked > 0 {
            self.req.cc.on_ack(
                now,
                &AckSample {
                    newly_acked_bytes: acked,
                    rtt: None,
                    ecn: false,
                    rcv_cwnd_pen: 0,
                    inflight: self.req.sent.inflight_bytes(),
                },
            );
        }
        self.complete_sq();
        if progressed {
            self.arm_retry(now, true);
        }
        self.collect_ev_changes();
    }

    /// Processes a transport ACK: the peer's completed MSN releases WRITE_WITH_IMM credits (spec WIRE-ACK-1).
    pub(crate) fn on_ack(&mut self, now: Instant, a: &Ack) {
        self.stats.rx_acks += 1;
        if self.state != QpState::Rts {
            return;
        }
        // Both numbers must name state that exists, else the whole ACK is dropped (spec SEC-BLIND-2).
        let Some(epsn) = self.peer_epsn(a.cack_psn) else {
            return;
        };
        let cmsn = unwrap_msn(a.cmsn, self.req.peer_cmsn);
        if cmsn >= self.req.next_msn {
            self.stats.rx_bad_acks += 1;
            return;
        }
        self.req.peer_cmsn = self.req.peer_cmsn.max(cmsn);
        // spec: QP-WIMM-1
        while self
            .req
            .wimm_msns
            .front()
            .is_some_and(|&m| m <= self.req.peer_cmsn)
        {
            self.req.wimm_msns.pop_front();
            self.req.wimm_inflight = self.req.wimm_inflight.saturating_sub(1);
        }
        self.apply_acks(now, epsn, epsn, 0);
        if self.req.sent.advance() > 0 {
            self.complete_sq();
            self.arm_retry(now, true);
        }
    }
}
