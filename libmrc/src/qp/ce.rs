//! The receiver's ALWAYS_SKIP advice: which EVs' packets keep arriving CE-marked (spec PATH-EV-1, PATH-EV-3).

use crate::wire::SackMark;

/// Consecutive CE marks from one EV after which the SACK says ALWAYS_SKIP.
const ALWAYS_SKIP_AFTER: u16 = 8;

/// Share of the QP's recent arrivals (Q16, averaged over about 16) above which a mark is common-mode.
const COMMON_SHARE: u32 = 1 << 14;

/// Consecutive CE marks per EV (a 16-entry direct-mapped table) and the share of all arrivals marked.
#[derive(Debug, Clone, Default)]
pub(crate) struct CeTrack {
    slots: [(u32, u16); 16],
    /// Marked share of the QP's data arrivals, Q16, an average over about 16 arrivals.
    share: u32,
}

impl CeTrack {
    /// Counts one data arrival on `ev`. A mark that arrives while more than a quarter of the QP's arrivals
    /// (sprayed over its EVs) are marked was most likely set where all its paths meet, the receiver's own
    /// last hop in an incast, which says nothing about this EV's path (as PATH-EV-3 says of last-hop trims):
    /// it keeps the EV's count where it is. One hot path among a QP's EVs marks a small share. A share, not a
    /// run of marked arrivals: RED's partial marking at a last hop breaks every run (spec PATH-EV-3).
    // spec: PATH-EV-3
    pub(crate) fn note(&mut self, ev: u32, ce: bool) {
        let x = if ce { 1 << 16 } else { 0 };
        let common = self.share > COMMON_SHARE;
        self.share = (self.share * 15 + x) / 16;
        let slot = &mut self.slots[Self::index(ev)];
        if slot.0 != ev {
            *slot = (ev, 0);
        }
        if !ce {
            slot.1 = 0;
        } else if !common {
            slot.1 = slot.1.saturating_add(1);
        }
    }

    /// The marking advice for a SACK answering a packet on `ev` (CE-marked or not).
    // spec: PATH-EV-1
    pub(crate) fn mark(&self, ev: u32, ce: bool) -> SackMark {
        let slot = self.slots[Self::index(ev)];
        if slot.0 == ev && slot.1 >= ALWAYS_SKIP_AFTER {
            SackMark::AlwaysSkip
        } else if ce {
            SackMark::SkipOnce
        } else {
            SackMark::None
        }
    }

    fn index(ev: u32) -> usize {
        (ev.wrapping_mul(0x9E37_79B9) >> 28) as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An incast's last hop marks about half of everything (RED between its thresholds), over 8 EVs: no
    /// EV is ever advised ALWAYS_SKIP.
    #[test]
    fn a_last_hop_marking_half_of_all_arrivals_skips_no_path_for_good() {
        let mut t = CeTrack::default();
        let mut x = 0x2545_F491_4F6C_DD1D_u64;
        for i in 0..20_000u32 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (ev, ce) = (i % 8, x & 1 == 1);
            t.note(ev, ce);
            assert_ne!(
                t.mark(ev, ce),
                SackMark::AlwaysSkip,
                "arrival {i} on EV {ev}"
            );
        }
    }

    /// One hot path among 16: its EV is advised ALWAYS_SKIP after `ALWAYS_SKIP_AFTER` marks in a row.
    #[test]
    fn one_marked_path_among_many_is_skipped_for_good() {
        let mut t = CeTrack::default();
        let hot = 3;
        let mut marks = 0;
        for i in 0..16 * u32::from(ALWAYS_SKIP_AFTER) {
            let (ev, ce) = (i % 16, i % 16 == hot);
            t.note(ev, ce);
            marks += u16::from(ce);
            let want = if ce && marks >= ALWAYS_SKIP_AFTER {
                SackMark::AlwaysSkip
            } else if ce {
                SackMark::SkipOnce
            } else {
                SackMark::None
            };
            assert_eq!(t.mark(ev, ce), want, "arrival {i}");
        }
    }
}
