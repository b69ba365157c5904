//! The controller's changes (denied and replaced EVs, the receive penalty) and the counters and views.

use super::*;

impl Endpoint {
    /// Denies (or allows again) an EV of a QP, as MRC's controller does.
    pub fn set_ev_denied(
        &mut self,
        qpn: u32,
        ev: u32,
        denied: bool,
        now: Instant,
    ) -> Result<(), NoSuchObject> {
        let slot = self.slot_of(qpn).ok_or(NoSuchObject)?;
        let qp = self.qps[slot].as_mut().ok_or(NoSuchObject)?;
        if !qp.paths.set_denied(ev, denied) {
            return Err(NoSuchObject);
        }
        qp.collect_ev_changes();
        self.after_qp(slot, now);
        Ok(())
    }

    /// Puts EV `new` in the place of `old` in a live QP with explicit EVs, as MRC's controller does (REPLACE_EV
    /// on a profile the QP uses); `NoSuchObject` when the QP or `old` is unknown or the swap is refused
    /// (`PathSet::replace_ev`).
    pub fn replace_ev(
        &mut self,
        qpn: u32,
        old: u32,
        new: u32,
        now: Instant,
    ) -> Result<(), NoSuchObject> {
        let slot = self.slot_of(qpn).ok_or(NoSuchObject)?;
        let qp = self.qps[slot].as_mut().ok_or(NoSuchObject)?;
        if !qp.paths.replace_ev(old, new) {
            return Err(NoSuchObject);
        }
        self.after_qp(slot, now);
        Ok(())
    }

    /// Sets the receive-window penalty a QP advertises (0 none … 127 one packet per RTT), for slow consumers.
    pub fn set_receive_penalty(&mut self, qpn: u32, pen: u8) -> Result<(), NoSuchObject> {
        let slot = self.slot_of(qpn).ok_or(NoSuchObject)?;
        self.qps[slot]
            .as_mut()
            .ok_or(NoSuchObject)?
            .set_receive_penalty(pen);
        Ok(())
    }

    /// Endpoint counters.
    pub fn stats(&self) -> EndpointStats {
        self.stats
    }

    /// A QP's state.
    pub fn qp_state(&self, qpn: u32) -> Option<QpState> {
        self.qp(qpn).map(|q| q.state)
    }

    /// A QP's counters.
    pub fn qp_stats(&self, qpn: u32) -> Option<QpStats> {
        self.qp(qpn).map(|q| q.stats)
    }

    /// Every EV of a QP with its state and counters.
    pub fn ev_infos(&self, qpn: u32) -> Vec<EvInfo> {
        self.qp(qpn)
            .map(|q| q.paths.infos().collect())
            .unwrap_or_default()
    }

    /// A QP's counters for one plane.
    pub fn plane_stats(&self, qpn: u32, plane: usize) -> Option<PlaneStats> {
        self.qp(qpn).and_then(|q| q.paths.plane_stats(plane))
    }

    /// Smoothed RTT, congestion window and bytes in flight of a QP.
    pub fn qp_transport(&self, qpn: u32) -> Option<(Duration, u64, u64)> {
        self.qp(qpn).map(|q| {
            (
                q.req.rtt.srtt(),
                q.req.cc.window(),
                q.req.sent.inflight_bytes(),
            )
        })
    }

    /// A QP's congestion-control counters (decreases, quick adapts, trims...): why a flow was slow.
    pub fn qp_cc_counters(&self, qpn: u32) -> Option<crate::cc::CcCounters> {
        self.qp(qpn).map(|q| q.req.cc.counters())
    }

    /// Numbers of every QP.
    pub fn qpns(&self) -> Vec<u32> {
        self.qps.iter().flatten().map(|q| q.qpn).collect()
    }

    /// The largest datagram any QP of this endpoint can produce.
    pub fn max_datagram_len(&self) -> usize {
        let mtu = self
            .qps
            .iter()
            .flatten()
            .map(|q| q.cfg().mtu as usize)
            .max()
            .unwrap_or(0);
        mtu + crate::wire::MAX_DATA_HEADER_LEN + crate::wire::AUTH_LEN + crate::wire::ICRC_LEN
    }
}
