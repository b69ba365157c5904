//! The requester half of a QP: segmentation, spraying, retransmission and what feedback does to them.

use super::{Qp, QpState, Requester, SendWqe, Timer, WqeKind};
use crate::cc::AckSample;
use crate::completion::{Completion, WcStatus};
use crate::io::{PayloadRef, Transmit};
use crate::mem::{Access, Memory, MrTable, Pd, Sge};
use crate::reliability::{PktState, unwrap_msn, unwrap_psn};
use crate::time::{Duration, Instant};
use crate::wire::{
    Ack, Body, Bth, DataHeader, Meth, Nack, NackReason, OpKind, Opcode, PSN_MASK, Packet, Position,
    Probe, Reth, Sack, SackMark, TrafficClass,
};

/// RTT samples above this are treated as garbage (a stale or forged echo).
const MAX_RTT: Duration = Duration::from_secs(4);
/// A slow path's delay lengthens the RTO of its packets by at most this many RTOs: one wrong delay sample (an
/// echo corrupted on a link without ICRC read as 2 s) held a packet, and with it the QP, for seconds.
const MAX_EXTRA_RTOS: u64 = 4;

impl Qp {
    /// PSNs the requester may have outstanding: the smaller of its own and the peer's advertised window.
    #[inline]
    pub(crate) fn psn_window(&self) -> u64 {
        self.req.psn_window
    }

    /// Adopts the peer's advertised receive window.
    // spec: WIRE-SACK-3
    fn set_peer_mpr(&mut self, mpr: u8) {
        self.req.peer_mpr = mpr.max(1);
        self.req.psn_window = u64::from(self.cfg().mpr.min(self.req.peer_mpr)) * 128;
    }

    #[inline]
    fn cwnd_allows(&self, len: u64) -> bool {
        let inflight = self.req.sent.inflight_bytes();
        // spec: CC-WIN-1
        inflight == 0 || inflight + len <= self.req.cc.window()
    }

    #[inline]
    fn has_new_data(&self) -> bool {
        self.req.sq_next < self.req.sq_base + self.req.sq.len() as u64
            && self.req.sent.len() < self.psn_window()
    }

    /// Whether data (new or retransmitted) could go out now.
    #[inline]
    pub(crate) fn data_ready(&self) -> bool {
        if self.req.retx.is_empty() && !self.has_new_data() && self.req.suspects.is_empty() {
            return false;
        }
        (self.req.force_any_ev || self.paths.usable())
            && self.cwnd_allows(u64::from(self.cfg().mtu))
    }

    /// Whether [`poll_transmit`](Self::poll_transmit) may return a packet at `now`.
    pub(crate) fn wants_transmit(&self, now: Instant) -> bool {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return false;
        }
        if !self.feedback.ctl.is_empty() || self.feedback.sack_now || self.feedback.ack_pending {
            return true;
        }
        if self.state != QpState::Rts {
            return false;
        }
        self.req.ack_probe_wanted
            || self.req.tail.wanted
            || self.paths.probe_deadline() <= now
            || self.data_ready()
    }

    /// Writes the next packet of this QP into `buf`, if one is due: control first, then probes, then
    /// retransmissions, then new data.
    pub(crate) fn poll_transmit<M: Memory>(
        &mut self,
        now: Instant,
        ports_ready: u32,
        buf: &mut [u8],
        mem: &mut M,
        mrs: &MrTable,
    ) -> Option<Transmit> {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return None;
        }
        if let Some(t) = self.poll_control(now, buf) {
            return Some(t);
        }
        if self.state != QpState::Rts {
            return None;
        }
        if let Some(idx) = self.paths.poll_probe(now) {
            return self.emit_probe(idx, now, buf, false);
        }
        if self.req.tail.wanted
            && let Some(t) = self.emit_tail_probe(now, buf)
        {
            return Some(t);
        }
        if self.req.ack_probe_wanted
            && let Some(idx) = self.paths.next_ev()
        {
            // spec: QP-WIMM-1
            self.req.ack_probe_wanted = false;
            return self.emit_probe(idx, now, buf, true);
        }
        self.poll_data(now, ports_ready, buf, mem, mrs)
    }

    /// Whether the next packet should follow the last on its EV: the endpoint then serves this QP again at
    /// once, so the packets of a burst leave back to back (a train the host sends in one piece).
    pub(crate) fn bursting(&self) -> bool {
        self.req.burst.is_some_and(|(_, left)| left > 0)
    }

    #[inline]
    fn choose_ev(&mut self, ports_ready: u32) -> Option<u16> {
        // spec: PATH-EV-6
        if let Some((i, left)) = self.req.burst
            && left > 0
            && self.paths.can_send_on(i, ports_ready)
        {
            self.req.burst = Some((i, left - 1));
            return Some(i);
        }
        if let Some(i) = self.paths.next_ev_on(ports_ready) {
            self.req.burst = Some((i, self.cfg().ev_burst.saturating_sub(1)));
            return Some(i);
        }
        self.req.burst = None;
        if ports_ready != u32::MAX && self.paths.usable() {
            // Only the ports are busy; the endpoint retries when they have room.
            self.req.port_blocked = true;
            return None;
        }
        if self.req.force_any_ev {
            // spec: REL-QPTO-2
            self.req.force_any_ev = false;
            return self.paths.next_any_ev();
        }
        None
    }

    fn poll_data<M: Memory>(
        &mut self,
        now: Instant,
        ports_ready: u32,
        buf: &mut [u8],
        mem: &mut M,
        mrs: &MrTable,
    ) -> Option<Transmit> {
        if !self.req.suspects.is_empty() && !self.has_new_data() {
            self.resend_suspects();
        }
        // Retransmissions first (spec REL-RETX-1).
        while let Some(&psn) = self.req.retx.front() {
            match self.req.sent.get(psn) {
                Some(p) if p.state == PktState::Lost => break,
                _ => {
                    self.req.retx.pop_front();
                }
            }
        }
        if let Some(&psn) = self.req.retx.front() {
            let p = *self.req.sent.get(psn)?;
            if !self.cwnd_allows(u64::from(p.len)) {
                return None;
            }
            // Another plane than the one it was lost on, when one can take it now: a plane whose links die
            // loses every packet sent into it until its paths are retired.
            let lost_on = self.paths.plane(p.ev);
            let ev = if self.paths.usable_except(lost_on) {
                let mask = 1u32.checked_shl(u32::from(lost_on)).unwrap_or(0);
                self.choose_ev(ports_ready & !mask)?
            } else {
                self.choose_ev(ports_ready)?
            };
            self.req.retx.pop_front();
            self.start_rto(now);
            // spec: REL-RETX-1
            let t = self.emit_data(now, psn, p.wqe, p.offset, p.len, ev, true, buf, mem, mrs)?;
            self.req.sent.retransmitted(psn, ev, now);
            return Some(t);
        }
        if !self.has_new_data() {
            return None;
        }
        let seq = self.req.sq_next;
        let mtu = self.cfg().mtu;
        let (len, offset) = {
            let w = &self.req.sq[(seq - self.req.sq_base) as usize];
            let offset = self.req.seg_offset;
            let len = if w.kind == WqeKind::Read {
                0
            } else {
                (w.len - offset).min(mtu)
            };
            (len, offset)
        };
        if !self.cwnd_allows(u64::from(len)) {
            return None;
        }
        let ev = self.choose_ev(ports_ready)?;
        let psn = self.req.sent.nxt();
        self.start_wqe(seq, psn);
        let t = self.emit_data(now, psn, seq, offset, len, ev, false, buf, mem, mrs)?;
        self.start_rto(now);
        self.req.sent.push(seq, offset, len, ev, now);
        let w = &self.req.sq[(seq - self.req.sq_base) as usize];
        let done = w.kind == WqeKind::Read || offset + len >= w.len;
        if done {
            self.req.sq_next += 1;
            self.req.seg_offset = 0;
        } else {
            self.req.seg_offset += len;
        }
        self.arm_retry(now, false);
        Some(t)
    }

    /// Numbers a message when its first packet goes out (spec WIRE-METH-1, WIRE-METH-2).
    fn start_wqe(&mut self, seq: u64, psn: u64) {
        let mtu = self.cfg().mtu;
        let i = (seq - self.req.sq_base) as usize;
        if self.req.sq[i].started {
            return;
        }
        let msn = self.req.next_msn;
        let rqmsn = self.req.next_rqmsn;
        let w = &mut self.req.sq[i];
        // spec: WIRE-METH-1
        w.started = true;
        w.msn = msn;
        // spec: WIRE-METH-2
        w.rqmsn = rqmsn;
        w.first_psn = psn;
        w.npkts = if w.kind == WqeKind::Read {
            1
        } else {
            w.len.div_ceil(mtu).max(1)
        };
        let consumes = w.consumes_recv();
        let wimm = w.kind == WqeKind::Write && w.imm.is_some();
        self.req.next_msn += 1;
        if consumes {
            self.req.next_rqmsn += 1;
        }
        if wimm {
            self.req.wimm_msns.push_back(msn);
        }
    }

    /// Builds one data packet of message `seq` at `offset` into `buf` (spec WIRE-RETH-1, WIRE-PAY-1).
    #[allow(
        clippy::too_many_arguments,
        reason = "one call site per transmission kind; a struct would only rename them"
    )]
    fn emit_data<M: Memory>(
        &mut self,
        now: Instant,
        psn: u64,
        seq: u64,
        offset: u32,
        len: u32,
        ev_idx: u16,
        rtx: bool,
        buf: &mut [u8],
        mem: &mut M,
        mrs: &MrTable,
    ) -> Option<Transmit> {
        let i = usize::try_from(seq.checked_sub(self.req.sq_base)?).ok()?;
        let pd = self.init.pd;
        let pkey = self.cfg().pkey;
        let window_tight = self.req.sent.len() * 4 >= self.psn_window() * 3;
        let ev = self.paths.value(ev_idx);
        let w = self.req.sq.get(i)?;
        let last = w.kind == WqeKind::Read || offset + len >= w.len;
        let pos = match (offset == 0, last) {
            (true, true) => Position::Only,
            (true, false) => Position::First,
            (false, true) => Position::Last,
            (false, false) => Position::Middle,
        };
        let (kind, va, rkey) = match w.kind {
            // spec: WIRE-RETH-1
            WqeKind::Write => (
                OpKind::Write,
                w.remote_addr.wrapping_add(u64::from(offset)),
                w.rkey,
            ),
            // spec: WIRE-RETH-2
            WqeKind::Send => (OpKind::Send, u64::from(offset), 0),
            WqeKind::Read => (OpKind::ReadRequest, w.remote_addr, w.rkey),
            WqeKind::ReadResponse { req_msn } => {
                (OpKind::ReadResponse, u64::from(offset), u32::from(req_msn))
            }
        };
        let imm = if last { w.imm } else { None };
        let hdr = DataHeader {
            bth: Bth {
                opcode: Opcode::data(kind, pos, imm.is_some())?,
                se: last && w.solicited,
                rtx,
                pkey,
                dest_qp: self.remote_qpn,
                // spec: REL-SACK-1
                ack_req: last || window_tight,
                psn: (psn as u32) & PSN_MASK,
            },
            meth: Meth {
                ev,
                msn: w.msn as u16,
                rqmsn: w.rqmsn as u16,
            },
            // spec: WIRE-TSETH-1
            ts: Some(now.ts32()),
            reth: Reth {
                va,
                rkey,
                dma_len: w.len,
            },
            imm,
        };
        let hlen = hdr.emit(buf).ok()?;
        let hlen = self.authenticate(buf, hlen)?;
        let total = hlen + len as usize;
        if buf.len() < total + crate::wire::ICRC_LEN {
            return None;
        }
        // One checked piece (the common case) can be lent in place by memory that supports it.
        let piece = match w.kind {
            WqeKind::Read => None,
            // The source was checked when the request arrived; check again in case it was deregistered since.
            WqeKind::ReadResponse { .. } => Some(checked_piece(
                &w.sges[..1],
                offset,
                len,
                mrs,
                pd,
                Access::REMOTE_READ,
            )),
            _ if w.sges.len() == 1 => {
                Some(checked_piece(&w.sges, offset, len, mrs, pd, Access::NONE))
            }
            _ => None,
        };
        let mut payload = None;
        let gathered = match piece {
            Some(None) => false,
            Some(Some(addr)) => {
                if let Some(bytes) = mem.view(addr, len as usize) {
                    payload = Some(PayloadRef {
                        at: hlen,
                        addr,
                        len: len as usize,
                    });
                    // The ICRC covers the payload where it lies; the buffer holds the headers and the ICRC.
                    self.seal_around(buf, hlen, bytes)
                } else {
                    mem.read(addr, &mut buf[hlen..total]);
                    true
                }
            }
            None if w.kind == WqeKind::Read => true,
            None => gather(&w.sges, offset, &mut buf[hlen..total], mem, mrs, pd),
        };
        if !gathered {
            // The application deregistered a buffer it had posted: fail the request, touch nothing.
            self.enter_error(Some((seq, WcStatus::LocProtErr)), now);
            return None;
        }
        let n = match payload {
            Some(_) => hlen + crate::wire::ICRC_LEN,
            None => self.seal(buf, total)?,
        };
        let plane = self.paths.on_sent(ev_idx, u64::from(len), rtx);
        self.stats.tx_data_packets += 1;
        self.stats.tx_data_bytes += u64::from(len);
        self.stats.tx_retransmits += u64::from(rtx);
        Some(Transmit {
            peer: self.peer?,
            ev,
            plane,
            class: if rtx {
                TrafficClass::DataRetx
            } else {
                TrafficClass::Data
            },
            len: n,
            qpn: self.qpn,
            payload,
        })
    }

    /// Appends the ICRC of `buf[..hlen]` followed by `payload` at `buf[hlen..]` (or four zero bytes when the QP
    /// runs without it), for a payload that stays in memory. False when the buffer is too short.
    fn seal_around(&self, buf: &mut [u8], hlen: usize, payload: &[u8]) -> bool {
        let crc = if self.cfg().icrc {
            crate::wire::icrc_parts(&[&buf[..hlen], payload])
        } else {
            0
        };
        match buf.get_mut(hlen..hlen + crate::wire::ICRC_LEN) {
            Some(trailer) => {
                trailer.copy_from_slice(&crc.to_be_bytes());
                true
            }
            None => false,
        }
    }

    /// Tags the headers at `buf[..hlen]` when the connection is authenticated (spec SEC-AUTH-1); returns where
    /// the payload or ICRC goes.
    #[inline]
    pub(crate) fn authenticate(&self, buf: &mut [u8], hlen: usize) -> Option<usize> {
        match &self.auth {
            // spec: SEC-AUTH-1
            Some(k) => k.tx.seal_headers(buf, hlen).ok(),
            None => Some(hlen),
        }
    }

    /// Appends the ICRC (or four zero bytes when the QP runs without it).
    #[inline]
    pub(crate) fn seal(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        if self.cfg().icrc {
            crate::wire::seal(buf, len).ok()
        } else {
            buf.get_mut(len..len + crate::wire::ICRC_LEN)?.fill(0);
            Some(len + crate::wire::ICRC_LEN)
        }
    }

    fn emit_probe(
        &mut self,
        idx: u16,
        now: Instant,
        buf: &mut [u8],
        ack_req: bool,
    ) -> Option<Transmit> {
        let ev = self.paths.value(idx);
        let mut bth = self.control_bth(Opcode::Probe);
        bth.ack_req = ack_req;
        // spec: WIRE-PROBE-1
        let pkt = Packet {
            bth,
            body: Body::Probe(Probe { ev, ts: now.ts32() }),
        };
        let hlen = pkt.emit_header(buf).ok()?;
        let hlen = self.authenticate(buf, hlen)?;
        let n = self.seal(buf, hlen)?;
        self.stats.tx_probes += 1;
        Some(Transmit {
            peer: self.peer?,
            ev,
            plane: self.paths.plane(idx),
            class: TrafficClass::Control,
            len: n,
            qpn: self.qpn,
            payload: None,
        })
    }

    #[inline]
    pub(crate) fn control_bth(&self, opcode: Opcode) -> Bth {
        Bth {
            opcode,
            se: false,
            rtx: false,
            pkey: self.cfg().pkey,
            dest_qp: self.remote_qpn,
            ack_req: false,
            psn: 0,
        }
    }

    /// Acknowledges `[una, epsn)` and the bitmap bits; returns newly acknowledged bytes.
    fn apply_acks(&mut self, now: Instant, epsn: u64, base: u64, bitmap: u64) -> u64 {
        let una = self.req.sent.una();
        let nxt = self.req.sent.nxt();
        let paths = &mut self.paths;
        let (mut bytes, newest) = self
            .req
            .sent
            .ack_below_with(epsn, |p| paths.on_clean_ack(p.ev, p.sent_at, now));
        if let Some(t) = newest {
            self.req.rack_xmit = self.req.rack_xmit.max(t);
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
                    self.req.rack_xmit = self.req.rack_xmit.max(p.sent_at);
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
            .map(|ts| Duration::from_nanos(u64::from(now.ts32().wrapping_sub(ts))))
            .filter(|r| *r < MAX_RTT);
        if let Some(r) = rtt {
            self.req.rtt.update(r);
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
        let (rtt, ecn) = if outlier { (None, false) } else { (rtt, ecn) };
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
    fn typical_rtt_ns(&self) -> u64 {
        crate::time::nanos(self.req.rtt.srtt())
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

    /// The fastest round trip seen (the configured base RTT before any sample), ns.
    pub(crate) fn min_rtt_ns(&self) -> u64 {
        self.req
            .rtt
            .min()
            .map_or(crate::time::nanos(self.cfg().base_rtt), crate::time::nanos)
    }

    /// How long after sending it the time rule waits for a packet on EV `ev` sent at `sent` before calling it
    /// lost, ns: its path's expected round trip plus the reorder allowance, or only the fastest round trip
    /// when a later packet on the same EV was acknowledged (one path delivers in order: it was overtaken).
    fn loss_wait_ns(&self, ev: u16, sent: Instant) -> u64 {
        loss_wait_ns(&self.paths, &self.req.rtt, self.min_rtt_ns(), ev, sent)
    }

    /// Time-based loss detection (spec REL-LOSS-1): a packet still in flight is lost once a packet sent at or
    /// after it was acknowledged and its path's expected round trip plus the reorder window has passed. A packet
    /// on a slow path (a long queue, a link below its rate) is expected later than one on a fast path, so it is
    /// given that much more time: resending it would waste the capacity the slow path still has. A packet on a
    /// path that died is found as soon as its path's round trip is over, not after an RTO.
    pub(crate) fn detect_losses_rack(&mut self, now: Instant) {
        let min = self.min_rtt_ns();
        loop {
            let (paths, rtt) = (&self.paths, &self.req.rtt);
            let Some(psn) =
                self.req
                    .sent
                    .pop_lost_by_time(self.req.rack_xmit, now, min, |ev, t| {
                        loss_wait_ns(paths, rtt, min, ev, t)
                    })
            else {
                break;
            };
            self.stats.losses_rack += 1;
            self.declare_lost(psn, now, false);
        }
        self.check_tail(now);
    }

    /// The tail loss probe (spec REL-TLP-1): when the oldest packet in flight has waited its path's round trip
    /// plus the reorder window and nothing sent after it was acknowledged (a loss at the tail of a burst has
    /// nothing behind it to overtake it), one probe goes out on a path that delivers; its answer stands for an
    /// acknowledgement of a packet sent then, so the time rule can judge everything sent before it.
    // spec: REL-TLP-1
    fn check_tail(&mut self, now: Instant) {
        let Some(due) = self.tail_probe_due() else {
            return;
        };
        if due <= now {
            self.req.tail.wanted = true;
        }
    }

    /// The first packet in flight starts the RTO timer (spec REL-LOSS-2).
    fn start_rto(&mut self, now: Instant) {
        if self.req.sent.inflight_bytes() == 0 {
            let rto = Duration::from_nanos(self.req.rtt.rto_ns());
            self.timers.set(Timer::Rto, now.saturating_add(rto));
        }
    }

    /// When the tail probe is due, if one may go out (none wanted or unanswered within its own wait).
    pub(crate) fn tail_probe_due(&mut self) -> Option<Instant> {
        if self.req.tail.wanted || self.state != QpState::Rts {
            return None;
        }
        if self
            .req
            .tail
            .outstanding
            .is_some_and(|(_, at)| at <= self.req.rack_xmit)
        {
            // A packet sent after the probe was acknowledged: the probe's answer has nothing more to tell.
            self.req.tail.outstanding = None;
            self.req.tail.count = 0;
        }
        let (t, ev) = self.req.sent.tail_front()?;
        if t <= self.req.rack_xmit {
            return None;
        }
        let wait = self.loss_wait_ns(ev, t);
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
    fn on_tail_probe_answer(&mut self, ts: u32) {
        if let Some((pts, at)) = self.req.tail.outstanding
            && pts == ts
        {
            self.req.tail.outstanding = None;
            self.req.tail.count = 0;
            self.req.rack_xmit = self.req.rack_xmit.max(at);
        }
    }

    /// Per-packet RTO: whatever the time rule has not taken up and has been unacknowledged for an RTO (plus its
    /// path's extra delay, as above) is lost (spec REL-LOSS-2, REL-RTO-1).
    pub(crate) fn detect_losses_rto(&mut self, now: Instant) {
        let Some(cutoff) = now.as_nanos().checked_sub(self.req.rtt.rto_ns()) else {
            return;
        };
        let min = self.min_rtt_ns();
        let typical = crate::time::nanos(self.req.rtt.srtt()).max(min);
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
            // Timed out with nothing sent at or after it acknowledged since: the peer (or this host) went quiet
            // on every path at once, as a descheduled process does, which says nothing about this path.
            let peer_quiet = by_rto && self.req.rack_xmit < p.sent_at;
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
    fn resend_suspects(&mut self) {
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

    /// Completes send work requests in posting order once every packet is acknowledged (and, for READ, every
    /// response byte has arrived) (spec QP-CQ-1).
    // spec: QP-CQ-1
    pub(crate) fn complete_sq(&mut self) {
        let una = self.req.sent.una();
        while self.req.sq_base < self.req.sq_next {
            match self.req.sq.front() {
                Some(w)
                    if w.started
                        && una >= w.first_psn + u64::from(w.npkts)
                        && (w.kind != WqeKind::Read || w.read_done) => {}
                _ => break,
            }
            let Some(w) = self.req.sq.pop_front() else {
                break;
            };
            self.req.sq_base += 1;
            self.finish_wqe(w);
        }
    }

    fn finish_wqe(&mut self, w: SendWqe) {
        if let WqeKind::ReadResponse { .. } = w.kind {
            self.req.serving_reads = self.req.serving_reads.saturating_sub(1);
            return;
        }
        // spec: QP-CQ-2
        if w.signaled {
            let byte_len = if w.kind == WqeKind::Read { w.len } else { 0 };
            let opcode = w.opcode();
            let (qpn, cq) = (self.qpn, self.init.send_cq);
            self.complete(
                cq,
                Completion {
                    wr_id: w.wr_id,
                    status: WcStatus::Success,
                    opcode,
                    byte_len,
                    imm: None,
                    qpn,
                },
            );
            self.req.sq_used = self
                .req
                .sq_used
                .saturating_sub(self.req.unsignaled_done + 1);
            self.req.unsignaled_done = 0;
        } else {
            self.req.unsignaled_done += 1;
        }
    }
}

/// How many smoothed RTTs loss detection waits for a packet on a path that trimmed but has not been sampled
/// yet (see `PathSet::loss_allowance_ns`): a full queue on a link slowed to a quarter of its rate holds about
/// four RTTs of a 1-BDP buffer, twice that both ways.
const CONGESTED_PATH_RTTS: u64 = 16;

/// How long after sending it the time rule waits for a packet on EV `ev` sent at `sent` (see
/// [`Qp::detect_losses_rack`]), ns.
fn loss_wait_ns(
    paths: &crate::path::PathSet,
    rtt: &crate::reliability::RttEstimator,
    min: u64,
    ev: u16,
    sent: Instant,
) -> u64 {
    use crate::path::PathDelay;
    let typical = crate::time::nanos(rtt.srtt()).max(min);
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

/// The pieces of a scatter/gather list that hold `len` bytes starting at byte `offset` of the list:
/// `(local key, address, start in the caller's buffer, length)`. The pieces cover fewer than `len` bytes when the
/// list is too short; callers check the total.
fn pieces(
    sges: &[Sge],
    offset: u64,
    len: usize,
) -> impl Iterator<Item = (u32, u64, usize, usize)> + '_ {
    let mut off = offset;
    let mut done = 0usize;
    sges.iter().filter_map(move |s| {
        let slen = u64::from(s.len);
        if done == len || off >= slen {
            off = off.saturating_sub(slen);
            return None;
        }
        let take = ((slen - off) as usize).min(len - done);
        let piece = (s.lkey, s.addr + off, done, take);
        done += take;
        off = 0;
        Some(piece)
    })
}

/// The address of `len` bytes at byte `offset` of a one-element scatter/gather list, after checking them against
/// the element and the region table (with `access`); `None` when a check fails.
fn checked_piece(
    sges: &[Sge],
    offset: u32,
    len: u32,
    mrs: &MrTable,
    pd: Pd,
    access: Access,
) -> Option<u64> {
    let s = sges.first()?;
    let addr = s.addr.wrapping_add(u64::from(offset));
    let fits = u64::from(offset) + u64::from(len) <= u64::from(s.len);
    (fits && mrs.check(s.lkey, pd, addr, u64::from(len), access).is_ok()).then_some(addr)
}

/// Copies `dst.len()` bytes of a scatter/gather list starting at byte `offset` into `dst`, checking each piece
/// against the region table first. Returns false when a check fails or the list is too short.
pub(crate) fn gather<M: Memory>(
    sges: &[Sge],
    offset: u32,
    dst: &mut [u8],
    mem: &mut M,
    mrs: &MrTable,
    pd: Pd,
) -> bool {
    let mut total = 0;
    for (lkey, addr, at, n) in pieces(sges, u64::from(offset), dst.len()) {
        if mrs.check(lkey, pd, addr, n as u64, Access::NONE).is_err() {
            return false;
        }
        mem.read(addr, &mut dst[at..at + n]);
        total += n;
    }
    total == dst.len()
}

/// Places `src` into a scatter/gather list at byte `offset`, checking every piece for `LOCAL_WRITE` before
/// writing any, so a failure (or a list too short) leaves memory untouched.
// spec: QP-PLACE-1
pub(crate) fn scatter<M: Memory>(
    sges: &[Sge],
    offset: u64,
    src: &[u8],
    mem: &mut M,
    mrs: &MrTable,
    pd: Pd,
) -> bool {
    let mut total = 0;
    for (lkey, addr, _, n) in pieces(sges, offset, src.len()) {
        if mrs
            .check(lkey, pd, addr, n as u64, Access::LOCAL_WRITE)
            .is_err()
        {
            return false;
        }
        total += n;
    }
    if total != src.len() {
        return false;
    }
    for (_, addr, at, n) in pieces(sges, offset, src.len()) {
        mem.write(addr, &src[at..at + n]);
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testing::VecMemory;

    fn setup() -> (MrTable, VecMemory, Pd, Vec<Sge>) {
        let mut mrs = MrTable::default();
        let mut mem = VecMemory::new(0x1000);
        let pd = Pd(0);
        let mut sges = Vec::new();
        for len in [10u32, 20, 5] {
            let addr = mem.alloc(u64::from(len));
            let k = mrs
                .register(pd, addr, u64::from(len), Access::LOCAL_WRITE)
                .unwrap();
            sges.push(Sge {
                addr,
                len,
                lkey: k.lkey,
            });
        }
        (mrs, mem, pd, sges)
    }

    #[test]
    fn pieces_span_elements_from_an_offset() {
        let (_, _, _, s) = setup();
        let got: Vec<_> = pieces(&s, 15, 14).map(|(_, a, at, n)| (a, at, n)).collect();
        assert_eq!(got, vec![(s[1].addr + 5, 0, 14)]);
        let got: Vec<_> = pieces(&s, 8, 25).map(|(_, a, at, n)| (a, at, n)).collect();
        assert_eq!(
            got,
            vec![
                (s[0].addr + 8, 0, 2),
                (s[1].addr, 2, 20),
                (s[2].addr, 22, 3)
            ]
        );
        assert_eq!(pieces(&s, 40, 1).count(), 0);
    }

    #[test]
    fn scatter_then_gather_round_trips_and_short_lists_touch_nothing() {
        let (mrs, mut mem, pd, s) = setup();
        // 35 bytes in three elements; 30 of them from offset 3 span all three.
        let src: Vec<u8> = (1..=30).collect();
        assert!(scatter(&s, 3, &src, &mut mem, &mrs, pd));
        assert_eq!(mem.slice(s[0].addr + 3, 7), &src[..7]);
        assert_eq!(mem.slice(s[2].addr, 3), &src[27..]);
        let mut back = [0u8; 30];
        assert!(gather(&s, 3, &mut back, &mut mem, &mrs, pd));
        assert_eq!(&back[..], &src[..]);
        let before = mem.clone();
        let long = [9u8; 33];
        assert!(
            !scatter(&s, 3, &long, &mut mem, &mrs, pd),
            "the list holds only 32 bytes from offset 3"
        );
        assert_eq!(mem.slice(s[0].addr, 10), before.slice(s[0].addr, 10));
        assert!(!gather(&s, 3, &mut [0u8; 33], &mut mem, &mrs, pd));
        let allocs: Vec<(u64, u64)> = s.iter().map(|x| (x.addr, u64::from(x.len))).collect();
        assert!(mem.guards_intact(&allocs));
    }
}
