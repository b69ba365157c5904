//! What a run counted and what it returns.

use super::*;

/// Counters of one run.
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize, PartialEq)]
pub struct Counters {
    /// Events processed.
    pub events: u64,
    /// Packets and wire bytes hosts put on the fabric.
    pub injected_pkts: u64,
    /// Wire bytes injected.
    pub injected_bytes: u64,
    /// Packets delivered to hosts.
    pub delivered_pkts: u64,
    /// Wire bytes delivered.
    pub delivered_bytes: u64,
    /// Dropped because a link or switch was down.
    pub dropped_failure_pkts: u64,
    /// Dropped by grey loss.
    pub dropped_loss_pkts: u64,
    /// Dropped by a full queue (no trimming, or a full header queue).
    pub dropped_overflow_pkts: u64,
    /// Wire bytes of all drops.
    pub dropped_bytes: u64,
    /// Packets trimmed.
    pub trimmed_pkts: u64,
    /// Wire bytes cut off by trimming.
    pub trimmed_bytes: u64,
    /// Packets CE-marked.
    pub ecn_marked: u64,
    /// Data packets dropped at failed components later than the settle time after the last failure.
    pub lasting_data_drops: u64,
    /// Data packets a go-back-N receiver discarded (out of order).
    pub gbn_discards: u64,
    /// Packets in flight at the end, and their wire bytes.
    pub inflight_pkts: u64,
    /// Wire bytes in flight at the end.
    pub inflight_bytes: u64,
    /// Packets that arrived over a link that had failed after they entered it (must be 0).
    pub failed_link_crossings: u64,
    /// Payload writes whose bytes did not match their address (must be 0).
    pub placement_errors: u64,
    /// EVs retired (to ASSUMED_BAD).
    pub ev_retirements: u64,
    /// EVs restored by probes.
    pub ev_recoveries: u64,
    /// QPs that went to the error state.
    pub qp_errors: u64,
    /// Transfers completed with an error status.
    pub failed_transfers: u64,
    /// Data packets the senders declared lost by time (a later packet was acknowledged a reorder window on).
    pub losses_rack: u64,
    /// Data packets declared lost by the per-packet RTO.
    pub losses_rto: u64,
    /// Data packets presumed lost with an EV retired for a loss (they were in flight on the same path).
    pub losses_path: u64,
    /// Data packets presumed lost with a retired plane or a port that went down.
    pub losses_plane: u64,
    /// Data packets that reached a receiver which already had them: each is a retransmission of a packet that
    /// was never lost (or the late original of one), i.e. a spurious retransmission.
    pub rx_duplicates: u64,
}

impl Counters {
    /// The sum of two partitions' counters, field by field (through their serialized form, so a counter added
    /// later is summed too).
    pub fn plus(&self, o: &Self) -> Self {
        let (Ok(serde_json::Value::Object(mut a)), Ok(serde_json::Value::Object(b))) =
            (serde_json::to_value(self), serde_json::to_value(o))
        else {
            return self.clone();
        };
        for (k, v) in b {
            let x = a.get(&k).and_then(|x| x.as_u64()).unwrap_or(0);
            a.insert(k, (x + v.as_u64().unwrap_or(0)).into());
        }
        serde_json::from_value(serde_json::Value::Object(a)).unwrap_or_else(|_| self.clone())
    }
}

/// What a run produced.
#[derive(Debug, Clone, Default)]
pub struct Outcome {
    /// Counters.
    pub c: Counters,
    /// Per transfer: (start, end) in ps; end is `u64::MAX` if it did not finish.
    pub times: Vec<(u64, u64)>,
    /// Time the last transfer finished (or the limit), ps.
    pub end_ps: u64,
    /// All transfers finished.
    pub finished: bool,
    /// Per bin and plane: payload bytes placed.
    pub goodput: Vec<Vec<u64>>,
    /// Per bin and port kind: largest queue (bytes) seen.
    pub queues: Vec<[u64; 6]>,
    /// Per plane (summed over QPs): data packets sent, retransmits, trims, losses, plane retirements.
    pub plane_tx: Vec<[u64; 5]>,
    /// Payload bytes the senders transmitted (first sends and retransmissions).
    pub tx_payload_bytes: u64,
    /// Payload bytes the receivers placed (duplicates excluded).
    pub placed_bytes: u64,
    /// Peak memory of one QP estimate is left to the caller; EV count per QP.
    pub evs_per_qp: usize,
    /// The capture's packets written and left out by its size cap, if one was on.
    pub capture: Option<Result<(u64, u64), String>>,
    /// Per transfer: its QP pair's counters (drill.rs).
    pub flows: Vec<FlowCounters>,
}
