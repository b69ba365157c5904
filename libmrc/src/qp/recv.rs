//! The responder half of a QP: checks, placement, in-order completion, and the feedback it owes the peer.

use super::send::scatter;
use super::{Ctl, Echo, MAX_CTL_QUEUE, MsgSlot, Qp, QpState, SendWqe, Timer, WqeKind};
use crate::completion::{Completion, WcOpcode};
use crate::io::{RecvMeta, Transmit, TrimMark};
use crate::mem::{Access, Memory, MrTable};
use crate::reliability::{PsnCheck, unwrap_msn};
use crate::time::Instant;
use crate::wire::{
    Ack, Body, Bth, Data, Nack, NackReason, OpKind, Opcode, PSN_MASK, Packet, Position, Probe,
    Sack, SackMark, TrafficClass,
};

/// Slot kinds (`MsgSlot::kind`).
const K_WRITE: u8 = 1;
const K_SEND: u8 = 2;
const K_READ_REQ: u8 = 3;
const K_READ_RESP: u8 = 4;

/// A data packet that passed every check: what placing and completing it need.
struct Arrival {
    psn: u64,
    kind: OpKind,
    /// Index of its message in `Responder::msgs`.
    slot: usize,
    slot_kind: u8,
    rqmsn: u64,
    /// Payload bytes the message carries: a READ request names a length but carries nothing.
    total: u64,
    /// Payload bytes this packet carries.
    len: u64,
    is_last: bool,
}

/// Why a data packet is not taken; each is counted and answered as the spec says.
enum Refusal {
    /// Received before: the acknowledgement was probably lost.
    Duplicate,
    /// Outside the receive window (spec REL-RX-2).
    OutOfWindow,
    /// Trimmed by a switch: the header arrived, the payload did not (spec REL-TRIM-1).
    Trimmed(TrimMark),
    /// Not a packet this QP may take: the NACK's reason says why.
    Invalid(NackReason),
    /// Outside the registered memory and access it names.
    Access,
    /// No receive posted, or the responder's READ or WRITE_WITH_IMM resources are used up (spec QP-RNR-1).
    NoResource,
}

impl Qp {
    /// Handles a data, READ request or READ response packet of the peer's stream: checks it, places its
    /// payload, then records it and completes what it finished.
    // spec: QP-RX-1
    pub(crate) fn on_data<M: Memory>(
        &mut self,
        now: Instant,
        meta: &RecvMeta,
        bth: &Bth,
        d: &Data<'_>,
        mem: &mut M,
        mrs: &MrTable,
    ) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return;
        }
        let psn = self.resp.rx.unwrap(bth.psn);
        let echo = Echo {
            ev: d.meth.ev,
            ts: d.ts,
            ce: meta.ecn_ce,
            psn,
        };
        let placed = self
            .check_data(psn, meta, bth, d, mrs)
            .and_then(|a| Ok((self.place_data(&a, d, mem, mrs)?, a)));
        match placed {
            Ok((held, a)) => self.complete_data(now, &a, bth, d, held, echo, mem, mrs),
            Err(r) => self.refuse(r, echo),
        }
    }

    /// Every check a data packet must pass before any of it is placed; changes nothing.
    fn check_data(
        &self,
        psn: u64,
        meta: &RecvMeta,
        bth: &Bth,
        d: &Data<'_>,
        mrs: &MrTable,
    ) -> Result<Arrival, Refusal> {
        match self.resp.rx.check(psn) {
            PsnCheck::Duplicate => return Err(Refusal::Duplicate),
            PsnCheck::OutOfWindow => return Err(Refusal::OutOfWindow),
            PsnCheck::New => {}
        }
        if let Some(mark) = meta.trim {
            // spec: WIRE-ICRC-2
            return Err(Refusal::Trimmed(mark));
        }
        let kind = bth.opcode.kind();
        // spec: WIRE-OP-2
        let allowed = match kind {
            OpKind::Send => self.local_caps.send,
            OpKind::ReadRequest | OpKind::ReadResponse => self.local_caps.read,
            _ => true,
        };
        if !allowed {
            return Err(Refusal::Invalid(NackReason::InvalidRequest));
        }
        let msn = unwrap_msn(d.meth.msn, self.resp.msn_base);
        if msn < self.resp.msn_base || msn - self.resp.msn_base >= self.resp.rx.window() {
            // A new PSN cannot belong to a finished message, nor to one a window ahead.
            return Err(Refusal::Invalid(NackReason::Unexpected));
        }
        let a = Arrival {
            psn,
            kind,
            slot: (msn - self.resp.msn_base) as usize,
            slot_kind: match kind {
                OpKind::Write => K_WRITE,
                OpKind::Send => K_SEND,
                OpKind::ReadRequest => K_READ_REQ,
                _ => K_READ_RESP,
            },
            rqmsn: unwrap_msn(d.meth.rqmsn, self.resp.rq_base),
            total: if kind == OpKind::ReadRequest {
                0
            } else {
                u64::from(d.reth.dma_len)
            },
            len: d.payload.len() as u64,
            is_last: matches!(
                bth.opcode.position().unwrap_or(Position::Only),
                Position::Last | Position::Only
            ),
        };
        if let Some(slot) = self.resp.msgs.get(a.slot) {
            let consistent = !slot.open
                || (slot.kind == a.slot_kind
                    && u64::from(slot.total) == a.total
                    && slot.rqmsn == a.rqmsn);
            if !consistent || slot.bytes + a.len > a.total {
                return Err(Refusal::Invalid(NackReason::Unexpected));
            }
        } else if a.len > a.total {
            return Err(Refusal::Invalid(NackReason::Unexpected));
        }
        self.check_op(&a, d, mrs)?;
        Ok(a)
    }

    /// The checks of each operation: the target memory and access, the receive queue, the responder's limits.
    fn check_op(&self, a: &Arrival, d: &Data<'_>, mrs: &MrTable) -> Result<(), Refusal> {
        let pd = self.init.pd;
        match a.kind {
            OpKind::Write => {
                // spec: QP-PLACE-1
                // A zero-length WRITE touches no memory, so (as in verbs) its key is not checked, and nothing
                // is asked of `Memory` for it.
                let ok = a.total == 0
                    || (self.access.contains(Access::REMOTE_WRITE)
                        && mrs
                            .check(d.reth.rkey, pd, d.reth.va, a.len, Access::REMOTE_WRITE)
                            .is_ok());
                if !ok {
                    return Err(Refusal::Access);
                }
                // spec: QP-RNR-1
                if d.imm.is_some()
                    && (!self.rq_has(a.rqmsn)
                        || self.resp.pending_imm >= u32::from(self.cfg().max_wimm_dest))
                {
                    return Err(Refusal::NoResource);
                }
            }
            OpKind::Send => {
                // spec: QP-RNR-1
                let wqe = self.rq_get(a.rqmsn).ok_or(Refusal::NoResource)?;
                if a.total > wqe.len || d.reth.va.saturating_add(a.len) > a.total {
                    return Err(Refusal::Invalid(NackReason::InvalidRequest));
                }
            }
            OpKind::ReadRequest => {
                let read_len = u64::from(d.reth.dma_len);
                let ok = self.access.contains(Access::REMOTE_READ)
                    && mrs
                        .check(d.reth.rkey, pd, d.reth.va, read_len, Access::REMOTE_READ)
                        .is_ok();
                if !ok {
                    return Err(Refusal::Access);
                }
                if self.req.serving_reads >= u32::from(self.cfg().max_read_dest) {
                    return Err(Refusal::NoResource);
                }
            }
            _ => {}
        }
        Ok(())
    }

    /// Places a checked packet's payload; returns a WRITE's final byte (address, value), kept back to be
    /// written last (spec QP-PLACE-2).
    fn place_data<M: Memory>(
        &mut self,
        a: &Arrival,
        d: &Data<'_>,
        mem: &mut M,
        mrs: &MrTable,
    ) -> Result<Option<(u64, u8)>, Refusal> {
        match a.kind {
            OpKind::Write => {
                if d.imm.is_some() {
                    self.resp.pending_imm += 1;
                }
                // spec: SEC-MEM-1
                if let Some((&final_byte, body)) = d.payload.split_last().filter(|_| a.is_last) {
                    if !body.is_empty() {
                        mem.write(d.reth.va, body);
                    }
                    return Ok(Some((d.reth.va + body.len() as u64, final_byte)));
                } else if !d.payload.is_empty() {
                    mem.write(d.reth.va, d.payload);
                }
            }
            OpKind::Send => {
                let sges = self
                    .rq_get(a.rqmsn)
                    .ok_or(Refusal::NoResource)?
                    .sges
                    .clone();
                if !scatter(&sges, d.reth.va, d.payload, mem, mrs, self.init.pd) {
                    return Err(Refusal::Access);
                }
            }
            OpKind::ReadRequest => {
                // spec: QP-READ-1
                self.req.serving_reads += 1;
                self.req_used = true;
                let source = crate::mem::Sge {
                    addr: d.reth.va,
                    len: d.reth.dma_len,
                    lkey: d.reth.rkey,
                };
                self.req.sq.push_back(SendWqe::new(
                    0,
                    WqeKind::ReadResponse {
                        req_msn: d.meth.msn,
                    },
                    [source].into_iter().collect(),
                    d.reth.dma_len,
                    0,
                    0,
                    None,
                    false,
                    false,
                ));
            }
            _ => {
                // READ response: place into the outstanding READ it names (spec QP-READ-2).
                if !self.place_read_response(d, a.len, a.total, mem, mrs) {
                    self.stats.rx_unexpected_read_responses += 1;
                }
            }
        }
        Ok(None)
    }

    /// Records a placed packet: its PSN, its message's progress (and the message's final byte once every
    /// other byte is in), then the completions it allows and the SACK it asks for.
    #[allow(
        clippy::too_many_arguments,
        reason = "the packet, its checked view and the engine's tables"
    )]
    fn complete_data<M: Memory>(
        &mut self,
        now: Instant,
        a: &Arrival,
        bth: &Bth,
        d: &Data<'_>,
        held: Option<(u64, u8)>,
        echo: Echo,
        mem: &mut M,
        mrs: &MrTable,
    ) {
        let had_holes = self.resp.rx.out_of_order() > 0;
        let fills = had_holes && a.psn == self.resp.rx.epsn();
        self.resp.rx.insert_new(a.psn);
        if self.resp.msgs.len() <= a.slot {
            self.resp.msgs.resize(a.slot + 1, MsgSlot::default());
        }
        let slot = &mut self.resp.msgs[a.slot];
        if !slot.open {
            slot.open = true;
            slot.kind = a.slot_kind;
            slot.total = a.total as u32;
            slot.rqmsn = a.rqmsn;
        }
        slot.bytes += a.len;
        if a.is_last {
            slot.last_seen = true;
            slot.imm = d.imm;
        }
        if held.is_some() {
            slot.held = held;
            slot.rkey = d.reth.rkey;
        }
        // spec: QP-PLACE-2
        if slot.bytes == u64::from(slot.total)
            && let Some((addr, byte)) = slot.held.take()
        {
            // Every other byte of the WRITE is placed: now its final byte. It was checked when its packet
            // arrived, but the region may have gone since, so it is checked again.
            if self.access.contains(Access::REMOTE_WRITE)
                && mrs
                    .check(slot.rkey, self.init.pd, addr, 1, Access::REMOTE_WRITE)
                    .is_ok()
            {
                mem.write(addr, &[byte]);
            } else {
                self.stats.rx_access_errors += 1;
            }
        }
        self.stats.rx_data_packets += 1;
        self.stats.rx_data_bytes += a.len;
        self.complete_messages();
        self.feedback.sack_lo = self.feedback.sack_lo.min(a.psn);
        self.feedback.sack_hi = self.feedback.sack_hi.max(a.psn);
        // spec: REL-SACK-1
        // A hole appears, or the packet filling the oldest one arrives: the sender's time rule is judging that
        // packet now, and a coalesced SACK would add its delay to the packet's.
        let gap = !had_holes && self.resp.rx.out_of_order() > 0;
        let urgent = gap || fills || bth.rtx || echo.ce;
        let was_held = self.feedback.sack_held;
        // spec: REL-SACK-4
        let hold = bth.ack_req
            && !urgent
            && self.feedback.sack_pkts == 0
            && !self.cfg().sack_hold.is_zero();
        let immediate = urgent || (bth.ack_req && !hold);
        self.feedback.ce.note(echo.ev, echo.ce);
        if echo.ce {
            self.push_ctl(Ctl::Sack {
                echo,
                probe_reply: false,
            });
        } else {
            self.schedule_sack(now, echo, immediate, a.len as u32);
            if was_held {
                // A second arrival: the held SACK goes now, as it would have without the hold.
                self.release_held_sack();
            } else if hold {
                self.feedback.sack_held = true;
                self.timers.set(Timer::Sack, now + self.cfg().sack_hold);
            }
        }
    }

    /// This QP sends: a held SACK goes with it (spec REL-SACK-4).
    pub(crate) fn release_held_sack(&mut self) {
        if self.feedback.sack_held {
            self.feedback.sack_held = false;
            self.feedback.sack_now = true;
        }
    }

    /// Counts a refused packet and owes the peer what the refusal calls for.
    fn refuse(&mut self, r: Refusal, echo: Echo) {
        let reason = match r {
            Refusal::Duplicate => {
                // The peer retransmitted: answer at once.
                self.stats.rx_duplicates += 1;
                self.feedback.sack_echo = echo;
                self.feedback.sack_now = true;
                if self.resp.msn_base - 1 != self.feedback.cmsn_sent {
                    self.feedback.ack_pending = true;
                }
                return;
            }
            Refusal::OutOfWindow => {
                self.stats.rx_out_of_window += 1;
                // spec: REL-RX-2
                NackReason::PsnOutOfWindow
            }
            Refusal::Trimmed(mark) => {
                self.stats.rx_trimmed += 1;
                // spec: REL-TRIM-1
                match mark {
                    TrimMark::Fabric => NackReason::Trimmed,
                    TrimMark::LastHop => NackReason::TrimmedLastHop,
                }
            }
            Refusal::Invalid(reason) => {
                self.stats.rx_invalid += 1;
                reason
            }
            Refusal::Access => {
                self.stats.rx_access_errors += 1;
                NackReason::RemoteAccess
            }
            Refusal::NoResource => {
                self.stats.rx_no_resource += 1;
                NackReason::NoResource
            }
        };
        self.push_nack(reason, echo);
    }

    fn rq_has(&self, rqmsn: u64) -> bool {
        self.rq_get(rqmsn).is_some()
    }

    fn rq_get(&self, rqmsn: u64) -> Option<&super::RecvWqe> {
        let i = usize::try_from(rqmsn.checked_sub(self.resp.rq_base)?).ok()?;
        self.resp.rq.get(i)
    }

    // spec: QP-READ-2
    fn place_read_response<M: Memory>(
        &mut self,
        d: &Data<'_>,
        len: u64,
        total: u64,
        mem: &mut M,
        mrs: &MrTable,
    ) -> bool {
        let req = d.reth.rkey as u16;
        let started = (self.req.sq_next - self.req.sq_base) as usize;
        let Some(i) = self.req.sq.iter().take(started + 1).position(|w| {
            w.kind == WqeKind::Read && w.started && w.msn as u16 == req && !w.read_done
        }) else {
            return false;
        };
        let pd = self.init.pd;
        let w = &self.req.sq[i];
        if u64::from(w.len) != total || d.reth.va.saturating_add(len) > total {
            return false;
        }
        let sges = w.sges.clone();
        if !scatter(&sges, d.reth.va, d.payload, mem, mrs, pd) {
            return false;
        }
        let w = &mut self.req.sq[i];
        w.read_bytes += len;
        if w.read_bytes >= u64::from(w.len) {
            w.read_done = true;
        }
        true
    }

    /// Releases finished messages in MSN order; SEND and WRITE_WITH_IMM produce receive completions
    /// (spec QP-CQ-3).
    // spec: QP-CQ-3
    fn complete_messages(&mut self) {
        let mut completed_recv = false;
        loop {
            match self.resp.msgs.front() {
                Some(s) if s.open && s.last_seen && s.bytes == u64::from(s.total) => {}
                _ => break,
            }
            let Some(s) = self.resp.msgs.pop_front() else {
                break;
            };
            self.resp.msn_base += 1;
            let consumes = s.kind == K_SEND || (s.kind == K_WRITE && s.imm.is_some());
            if s.kind == K_READ_RESP {
                // The READ's own completion is ordered by the send queue.
                self.complete_sq();
            }
            if !consumes {
                continue;
            }
            let Some(r) = self.resp.rq.pop_front() else {
                // Checked on arrival; unreachable unless the queue was flushed, which ends the QP.
                continue;
            };
            self.resp.rq_base += 1;
            if s.kind == K_WRITE {
                self.resp.pending_imm = self.resp.pending_imm.saturating_sub(1);
            }
            let (qpn, cq) = (self.qpn, self.init.recv_cq);
            self.complete(
                cq,
                Completion {
                    wr_id: r.wr_id,
                    status: crate::completion::WcStatus::Success,
                    opcode: if s.kind == K_SEND {
                        WcOpcode::Recv
                    } else {
                        WcOpcode::RecvRdmaWithImm
                    },
                    byte_len: s.total,
                    imm: s.imm,
                    qpn,
                },
            );
            completed_recv = true;
        }
        if completed_recv {
            // spec: WIRE-ACK-1
            self.feedback.ack_pending = true;
        }
    }

    /// Coalesces SACKs: at once on the triggers of spec REL-SACK-1, otherwise every few packets or bytes, or
    /// after `sack_delay`.
    fn schedule_sack(&mut self, now: Instant, echo: Echo, immediate: bool, len: u32) {
        self.feedback.sack_echo = echo;
        self.feedback.sack_pkts = self.feedback.sack_pkts.saturating_add(1);
        self.feedback.sack_bytes = self.feedback.sack_bytes.saturating_add(len);
        let cfg = self.cfg();
        if immediate
            || self.feedback.sack_pkts >= cfg.sack_every_packets
            || self.feedback.sack_bytes >= cfg.sack_every_bytes
        {
            self.feedback.sack_now = true;
        } else if !self.timers.is_running(Timer::Sack) {
            let at = now + cfg.sack_delay;
            self.timers.set(Timer::Sack, at);
        }
    }

    fn push_ctl(&mut self, c: Ctl) {
        if self.feedback.ctl.len() >= MAX_CTL_QUEUE {
            self.feedback.ctl.pop_front();
        }
        self.feedback.ctl.push_back(c);
    }

    fn push_nack(&mut self, reason: NackReason, echo: Echo) {
        self.push_ctl(Ctl::Nack { reason, echo });
    }

    /// A reliability probe from the peer: answer with a SACK (PR = 1), and with a transport ACK when the ACK is
    /// news or the prober asked for it (BTH.A) (spec WIRE-PROBE-1).
    pub(crate) fn on_probe(&mut self, meta: &RecvMeta, bth: &Bth, p: &Probe) {
        if !matches!(self.state, QpState::Rtr | QpState::Rts) {
            return;
        }
        self.stats.rx_probes += 1;
        let echo = Echo {
            ev: p.ev,
            ts: Some(p.ts),
            ce: meta.ecn_ce,
            psn: self.resp.rx.epsn(),
        };
        self.push_ctl(Ctl::Sack {
            echo,
            probe_reply: true,
        });
        if bth.ack_req || self.resp.msn_base - 1 != self.feedback.cmsn_sent {
            self.feedback.ack_pending = true;
        }
    }

    /// The next control packet owed to the peer, if any.
    #[inline]
    pub(crate) fn poll_control(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if self.feedback.ctl.is_empty()
            && !self.feedback.sack_now
            && !self.timers.is_expired(Timer::Sack, now)
            && !self.feedback.ack_pending
        {
            return None;
        }
        self.poll_control_due(now, buf)
    }

    fn poll_control_due(&mut self, now: Instant, buf: &mut [u8]) -> Option<Transmit> {
        if let Some(c) = self.feedback.ctl.pop_front() {
            return match c {
                Ctl::Sack { echo, probe_reply } => self.emit_sack(echo, probe_reply, buf),
                Ctl::SackBlock { ev, base } => self.emit_sack_block(ev, base, buf),
                Ctl::Nack { reason, echo } => self.emit_nack(reason, echo, buf),
            };
        }
        if self.feedback.sack_now || self.timers.is_expired(Timer::Sack, now) {
            let echo = self.feedback.sack_echo;
            return self.emit_sack(echo, false, buf);
        }
        if self.feedback.ack_pending {
            return self.emit_ack(buf);
        }
        None
    }

    fn cack_psn(&self) -> u32 {
        ((self.resp.rx.epsn() - 1) as u32) & PSN_MASK
    }

    // spec: WIRE-SACK-2
    fn emit_sack(&mut self, echo: Echo, probe_reply: bool, buf: &mut [u8]) -> Option<Transmit> {
        // A probe answer reports from epsn and leaves the arrivals to the next coalesced SACK.
        let base = if probe_reply {
            self.resp.rx.epsn()
        } else {
            let (lo, hi) = if self.feedback.sack_lo == u64::MAX {
                (echo.psn, echo.psn)
            } else {
                (self.feedback.sack_lo, self.feedback.sack_hi)
            };
            self.feedback.sack_lo = u64::MAX;
            self.feedback.sack_hi = 0;
            self.feedback.sack_now = false;
            self.feedback.sack_held = false;
            self.timers.stop(Timer::Sack);
            self.feedback.sack_pkts = 0;
            self.feedback.sack_bytes = 0;
            let (first, second) = self.resp.rx.sack_bases(lo, hi);
            if let Some(base) = second {
                self.push_ctl(Ctl::SackBlock { ev: echo.ev, base });
            }
            first
        };
        let mark = self.feedback.ce.mark(echo.ev, echo.ce);
        self.send_sack(echo.ev, base, mark, probe_reply, echo.ts, buf)
    }

    /// The second SACK of spec REL-SACK-2: the same state seen from `base`, with nothing to echo (no RTT
    /// sample, no marking advice: the first SACK carried them).
    fn emit_sack_block(&mut self, ev: u32, base: u64, buf: &mut [u8]) -> Option<Transmit> {
        // epsn may have passed `base` since it was chosen; a SACK's base stays above CACK_PSN (WIRE-SACK-2).
        let base = base.max(self.resp.rx.epsn());
        self.send_sack(ev, base, SackMark::None, false, None, buf)
    }

    /// Builds the SACK of the receive state from `base` and sends it on `ev`.
    fn send_sack(
        &mut self,
        ev: u32,
        base: u64,
        mark: SackMark,
        probe_reply: bool,
        ts_echo: Option<u32>,
        buf: &mut [u8],
    ) -> Option<Transmit> {
        let sack = Sack {
            mark,
            probe_reply,
            mpr: self.cfg().mpr,
            ev,
            cack_psn: self.cack_psn(),
            sack_base: (base as u32) & PSN_MASK,
            bitmap: self.resp.rx.bitmap(base),
            ts_echo,
            cwnd_pen: self.feedback.rcv_pen,
            ooo_count: self.resp.rx.out_of_order().min(PSN_MASK),
        };
        self.stats.tx_sacks += 1;
        let pkt = Packet {
            bth: self.control_bth(Opcode::Sack),
            body: Body::Sack(sack),
        };
        self.emit_control(&pkt, ev, buf)
    }

    fn emit_nack(&mut self, reason: NackReason, echo: Echo, buf: &mut [u8]) -> Option<Transmit> {
        self.stats.tx_nacks += 1;
        // spec: WIRE-NACK-2
        let pkt = Packet {
            bth: self.control_bth(Opcode::Nack),
            body: Body::Nack(Nack {
                reason,
                psn: (echo.psn as u32) & PSN_MASK,
                ev: echo.ev,
                ts_echo: echo.ts.unwrap_or(0),
                mpr: self.cfg().mpr,
                cack_psn: self.cack_psn(),
            }),
        };
        self.emit_control(&pkt, echo.ev, buf)
    }

    fn emit_ack(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        self.feedback.ack_pending = false;
        self.feedback.cmsn_sent = self.resp.msn_base - 1;
        self.stats.tx_acks += 1;
        let pkt = Packet {
            bth: self.control_bth(Opcode::Ack),
            body: Body::Ack(Ack {
                cack_psn: self.cack_psn(),
                cmsn: self.feedback.cmsn_sent as u16,
            }),
        };
        let ev = self.feedback.sack_echo.ev;
        self.emit_control(&pkt, ev, buf)
    }

    /// Sends a control packet back on the EV it answers (spec WIRE-SACK-4), or on a usable EV of our own when
    /// that EV's plane is down here.
    fn emit_control(&mut self, pkt: &Packet<'_>, ev: u32, buf: &mut [u8]) -> Option<Transmit> {
        let n = pkt.emit_header(buf).ok()?;
        let n = self.authenticate(buf, n)?;
        let n = self.seal(buf, n)?;
        let bits = self.cfg().ev.plane_bits;
        let mut plane = crate::wire::plane_of(ev, bits) as usize;
        let mut ev = ev;
        if plane >= self.paths.planes() || !self.paths.local_up(plane) {
            let idx = self.paths.next_ev().or_else(|| self.paths.next_any_ev())?;
            ev = self.paths.value(idx);
            plane = usize::from(self.paths.plane(idx));
        }
        Some(Transmit {
            peer: self.peer?,
            ev,
            plane: plane as u8,
            class: TrafficClass::Control,
            len: n,
            qpn: self.qpn,
            payload: None,
        })
    }
}
