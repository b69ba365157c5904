//! Per-flow drill-down: what the transport did for each transfer's QP pair (flows.csv's columns after the FCT),
//! read from the engine's own counters when the run ends, so a planner sees which flows paid for a failure and
//! how: retransmissions, losses by how they were found, trims, ECN marks, EVs retired, bytes per plane.

use mrc::Endpoint;

/// One QP pair's counters (its sender's, plus the receiver's duplicates). Transfers between the same two hosts
/// share one QP pair, and so these counters.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowCounters {
    /// Transfers on this QP pair.
    pub transfers: u32,
    /// Retransmissions sent.
    pub retransmits: u64,
    /// Packets declared lost by time (a later packet on the QP was acknowledged a reorder window on).
    pub losses_rack: u64,
    /// Packets declared lost by the per-packet retransmission timeout.
    pub losses_rto: u64,
    /// Packets presumed lost with a retired plane or a port that went down.
    pub losses_plane: u64,
    /// Trim NACKs received (packets a switch cut to their headers).
    pub trims: u64,
    /// CE marks the receiver reported.
    pub ecn_marks: u64,
    /// EVs retired.
    pub evs_retired: u64,
    /// EVs probes brought back.
    pub evs_restored: u64,
    /// Data packets the receiver already had (spurious retransmissions).
    pub rx_duplicates: u64,
    /// Multiplicative decreases of the sender's window (ECN marks above the target delay).
    pub cc_decreases: u64,
    /// Quick adapts of the sender's window (trims and losses).
    pub cc_quick_adapts: u64,
    /// Payload bytes sent per plane (first sends and retransmissions).
    pub plane_bytes: Vec<u64>,
}

/// The columns [`FlowCounters::csv`] writes, after flows.csv's first ones.
pub fn csv_header(planes: u32) -> String {
    let mut h = String::from(
        "qp_transfers,retransmits,losses_rack,losses_rto,losses_plane,trims,ecn_marks,evs_retired,evs_restored,rx_duplicates,cc_decreases,cc_quick_adapts",
    );
    for p in 0..planes {
        h.push_str(&format!(",plane{p}_bytes"));
    }
    h
}

impl FlowCounters {
    /// Reads QP `sq` of `sender` (and `rq` of `receiver`) over `planes` planes.
    pub fn read(sender: &Endpoint, sq: u32, receiver: &Endpoint, rq: u32, planes: u32) -> Self {
        let mut f = Self::default();
        if let Some(s) = sender.qp_stats(sq) {
            f.retransmits = s.tx_retransmits;
            f.losses_rack = s.losses_rack;
            f.losses_rto = s.losses_rto;
            f.losses_plane = s.losses_plane;
            f.trims = s.rx_trim_nacks;
            f.ecn_marks = s.ecn_marks;
            f.evs_retired = s.ev_retirements;
            f.evs_restored = s.ev_restorations;
        }
        if let Some(c) = sender.qp_cc_counters(sq) {
            f.cc_decreases = c.decreases;
            f.cc_quick_adapts = c.quick_adapts;
        }
        f.rx_duplicates = receiver.qp_stats(rq).map_or(0, |r| r.rx_duplicates);
        f.plane_bytes = (0..planes as usize)
            .map(|p| sender.plane_stats(sq, p).map_or(0, |s| s.tx_bytes))
            .collect();
        f
    }

    /// The CSV fields, in [`csv_header`]'s order.
    pub fn csv(&self) -> String {
        let mut s = format!(
            "{},{},{},{},{},{},{},{},{},{},{},{}",
            self.transfers,
            self.retransmits,
            self.losses_rack,
            self.losses_rto,
            self.losses_plane,
            self.trims,
            self.ecn_marks,
            self.evs_retired,
            self.evs_restored,
            self.rx_duplicates,
            self.cc_decreases,
            self.cc_quick_adapts
        );
        for b in &self.plane_bytes {
            s.push_str(&format!(",{b}"));
        }
        s
    }
}
