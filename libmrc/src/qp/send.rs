//! The requester half of a QP: segmentation, spraying, emitting and completing; what feedback does is in
//! acks.rs, how losses are found in loss.rs.

use super::{Qp, QpState, SendWqe, WqeKind};
use crate::completion::{Completion, WcStatus};
use crate::io::{PayloadRef, Transmit};
use crate::mem::{Access, Memory, MrTable, Pd, Sge};
use crate::reliability::PktState;
use crate::time::Instant;
use crate::wire::{
    Body, Bth, DataHeader, Meth, OpKind, Opcode, PSN_MASK, Packet, Position, Probe, Reth,
    TrafficClass,
};

impl Qp {
    /// PSNs the requester may have outstanding: the smaller of its own and the peer's advertised window.
    #[inline]
    pub(crate) fn psn_window(&self) -> u64 {
        self.req.psn_window
    }

    /// Adopts the peer's advertised receive window.
    // spec: WIRE-SACK-3
    pub(super) fn set_peer_mpr(&mut self, mpr: u8) {
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
        self.paths.probe_deadline() <= now
            || self.req_used
                && (self.req.ack_probe_wanted || self.req.tail.wanted || self.data_ready())
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
        if !self.req_used {
            return None;
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
        self.req_used && self.req.burst.is_some_and(|(_, left)| left > 0)
    }

    #[inline(always)]
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

    /// Numbers a message when its first packet goes out (spec WIRE-METH-1, WIRE-METH-2). Inline, as every
    /// packet asks and only a message's first needs the work.
    #[inline(always)]
    fn start_wqe(&mut self, seq: u64, psn: u64) {
        let i = (seq - self.req.sq_base) as usize;
        if !self.req.sq[i].started {
            self.number_wqe(i, psn);
        }
    }

    #[inline(never)]
    fn number_wqe(&mut self, i: usize, psn: u64) {
        let mtu = self.cfg().mtu;
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
    #[inline(always)]
    pub(crate) fn seal(&self, buf: &mut [u8], len: usize) -> Option<usize> {
        if self.cfg().icrc {
            crate::wire::seal(buf, len).ok()
        } else {
            buf.get_mut(len..len + crate::wire::ICRC_LEN)?.fill(0);
            Some(len + crate::wire::ICRC_LEN)
        }
    }

    pub(super) fn emit_probe(
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
