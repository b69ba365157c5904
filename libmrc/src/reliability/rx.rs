//! Receive-side PSN tracking: which PSNs of the peer's stream have arrived.
//!
//! PSNs are kept unwrapped (`u64`) inside the engine; only the wire carries 24 bits. The tracker holds the
//! next expected PSN (`epsn`: everything below it has arrived) and a ring bitmap of the window
//! `[epsn, epsn + window)`, so insertion, the cumulative advance and SACK bitmap extraction are word operations.

use crate::wire::PSN_MASK;

/// What the receiver should do with an arriving PSN.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PsnCheck {
    /// Not seen before and inside the window.
    New,
    /// Already received (below `epsn` or its bit is set).
    Duplicate,
    /// Beyond the window: NACK PSN_OOR_WINDOW.
    OutOfWindow,
}

/// Receive window state of one direction of one QP.
#[derive(Debug, Clone)]
pub struct PsnTracker {
    epsn: u64,
    window: u64,
    /// Ring of `bits.len() × 64` PSNs, a power of two at least `window`, so a slot is a mask away.
    bits: Vec<u64>,
    ring_mask: u64,
    /// PSNs received above `epsn` (the SACK's OOO_COUNT).
    ooo: u32,
}

impl PsnTracker {
    /// A tracker expecting `initial_psn` first, with a window of `window` PSNs (a multiple of 64, at least 64).
    pub fn new(initial_psn: u64, window: u64) -> Self {
        let window = window.max(64).next_multiple_of(64);
        let ring = window.next_power_of_two();
        Self {
            epsn: initial_psn,
            window,
            bits: vec![0; (ring / 64) as usize],
            ring_mask: ring - 1,
            ooo: 0,
        }
    }

    /// The next expected PSN: every PSN below it has arrived.
    pub fn epsn(&self) -> u64 {
        self.epsn
    }

    /// The window in PSNs.
    pub fn window(&self) -> u64 {
        self.window
    }

    /// PSNs received above `epsn`.
    pub fn out_of_order(&self) -> u32 {
        self.ooo
    }

    /// Unwraps a 24-bit wire PSN to the PSN closest to `epsn` (within ±2^23).
    pub fn unwrap(&self, psn24: u32) -> u64 {
        unwrap_psn(psn24, self.epsn)
    }

    #[inline]
    fn slot(&self, psn: u64) -> (usize, u32) {
        let i = psn & self.ring_mask;
        ((i >> 6) as usize, (i & 63) as u32)
    }

    /// Whether `psn` has been received.
    pub fn contains(&self, psn: u64) -> bool {
        if psn < self.epsn {
            return true;
        }
        if psn >= self.epsn + self.window {
            return false;
        }
        let (w, b) = self.slot(psn);
        self.bits[w] >> b & 1 == 1
    }

    /// Classifies an arriving PSN.
    // spec: REL-RX-1
    pub fn check(&self, psn: u64) -> PsnCheck {
        if psn >= self.epsn + self.window {
            PsnCheck::OutOfWindow
        } else if self.contains(psn) {
            PsnCheck::Duplicate
        } else {
            PsnCheck::New
        }
    }

    /// Records `psn` as received. Returns `false` (and changes nothing) unless [`check`](Self::check) says `New`.
    #[cfg(any(test, feature = "testing"))]
    pub fn insert(&mut self, psn: u64) -> bool {
        if self.check(psn) != PsnCheck::New {
            return false;
        }
        self.insert_new(psn);
        true
    }

    /// Records a PSN that [`check`](Self::check) just classified `New` (the receive path checks first, then
    /// decides whether to accept, so it need not classify twice).
    #[inline]
    pub fn insert_new(&mut self, psn: u64) {
        debug_assert_eq!(self.check(psn), PsnCheck::New);
        if psn != self.epsn {
            let (w, b) = self.slot(psn);
            self.bits[w] |= 1 << b;
            self.ooo += 1;
            return;
        }
        // The hole at epsn is filled: advance over it and over every consecutive received PSN.
        self.epsn += 1;
        while self.ooo > 0 {
            let (w, b) = self.slot(self.epsn);
            let run = (self.bits[w] >> b).trailing_ones();
            if run == 0 {
                break;
            }
            let mask = if run == 64 {
                u64::MAX
            } else {
                ((1u64 << run) - 1) << b
            };
            self.bits[w] &= !mask;
            self.epsn += u64::from(run);
            self.ooo -= run;
        }
    }

    /// The SACK bitmap for PSNs `[base, base + 64)`: bit i set when `base + i` has been received.
    /// PSNs below `epsn` read as received; PSNs beyond the window as not received.
    pub fn bitmap(&self, base: u64) -> u64 {
        let mut out = 0u64;
        // Walk at most two ring words per 64 PSNs: take runs of bits that stay inside one word.
        let mut i = 0u32;
        while i < 64 {
            let psn = base + u64::from(i);
            if psn < self.epsn {
                let n = (self.epsn - psn).min(u64::from(64 - i)) as u32;
                out |= ones(n) << i;
                i += n;
                continue;
            }
            if psn >= self.epsn + self.window {
                break;
            }
            let (w, b) = self.slot(psn);
            let n = (64 - b).min(64 - i);
            let limit = (self.epsn + self.window - psn).min(u64::from(n)) as u32;
            let chunk = (self.bits[w] >> b) & ones(limit);
            out |= chunk << i;
            i += limit;
        }
        out
    }

    /// Where the bitmaps of a SACK start (spec REL-SACK-2), given the lowest and highest PSN that arrived since
    /// the previous SACK. The first bitmap holds `hi`: from `epsn` when it reaches, else ending at `hi`. A second
    /// one is needed when `lo` lies below the first: from `epsn` when it reaches, else from `lo`. Without it a
    /// straggler just below the newest arrivals would go unreported until the cumulative ACK passes it, and
    /// the sender's time-based detection would resend it.
    // spec: REL-SACK-2
    pub fn sack_bases(&self, lo: u64, hi: u64) -> (u64, Option<u64>) {
        let e = self.epsn;
        let first = if hi < e + 64 { e } else { hi - 63 };
        let lo = lo.max(e);
        let second = (lo < first).then_some(if lo < e + 64 { e } else { lo });
        (first, second)
    }
}

fn ones(n: u32) -> u64 {
    if n >= 64 { u64::MAX } else { (1u64 << n) - 1 }
}

/// Unwraps a 24-bit PSN to the 64-bit PSN nearest `reference` (within ±2^23).
// spec: WIRE-BTH-4
pub fn unwrap_psn(psn24: u32, reference: u64) -> u64 {
    let r24 = (reference as u32) & PSN_MASK;
    let d = psn24.wrapping_sub(r24) & PSN_MASK;
    if d < 1 << 23 {
        reference + u64::from(d)
    } else {
        reference.saturating_sub(u64::from((1u32 << 24) - d))
    }
}

/// Unwraps a 16-bit MSN to the 64-bit MSN nearest `reference` (within ±2^15).
pub fn unwrap_msn(msn16: u16, reference: u64) -> u64 {
    let d = msn16.wrapping_sub(reference as u16);
    if d < 1 << 15 {
        reference + u64::from(d)
    } else {
        reference.saturating_sub(u64::from(0u16.wrapping_sub(d)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_advances() {
        let mut t = PsnTracker::new(10, 128);
        for p in 10..300 {
            assert_eq!(t.check(p), PsnCheck::New);
            assert!(t.insert(p));
            assert_eq!(t.epsn(), p + 1);
        }
        assert_eq!(t.check(5), PsnCheck::Duplicate);
        assert_eq!(t.check(300 + 128), PsnCheck::OutOfWindow);
    }

    #[test]
    fn hole_then_fill_crosses_words() {
        let mut t = PsnTracker::new(0, 256);
        for p in 1..200 {
            t.insert(p);
        }
        assert_eq!(t.epsn(), 0);
        assert_eq!(t.out_of_order(), 199);
        assert_eq!(t.bitmap(0), !1u64);
        assert_eq!(t.bitmap(64), u64::MAX);
        t.insert(0);
        assert_eq!(t.epsn(), 200);
        assert_eq!(t.out_of_order(), 0);
    }

    #[test]
    fn unwrap_near_wrap() {
        assert_eq!(unwrap_psn(2, 0xFF_FFFE), 0x100_0002);
        assert_eq!(unwrap_psn(0xFF_FFFE, 0x100_0002), 0xFF_FFFE);
        assert_eq!(unwrap_psn(5, 3), 5);
        assert_eq!(unwrap_psn(0xFF_FFFF, 0), 0, "below zero saturates");
        assert_eq!(unwrap_msn(1, 0xFFFF), 0x1_0001);
        assert_eq!(unwrap_msn(0xFFFE, 0x1_0001), 0xFFFE);
    }

    #[test]
    fn sack_bases_cover_the_newest_and_the_stragglers() {
        let mut t = PsnTracker::new(100, 1024);
        t.insert(500);
        // Everything within 64 of epsn: one bitmap from epsn.
        assert_eq!(t.sack_bases(120, 163), (100, None));
        // Far arrivals that fit in 64 PSNs: one bitmap ending at the highest.
        assert_eq!(t.sack_bases(450, 500), (437, None));
        // A straggler 64 or more below the highest: a second bitmap, from epsn when it reaches...
        assert_eq!(t.sack_bases(130, 500), (437, Some(100)));
        // ...else from the straggler.
        assert_eq!(t.sack_bases(300, 500), (437, Some(300)));
        // A lowest arrival now below epsn: others between it and the first bitmap may still need the second.
        assert_eq!(t.sack_bases(50, 500), (437, Some(100)));
        // All of them below epsn: the cumulative ACK covers them.
        assert_eq!(t.sack_bases(50, 90), (100, None));
        assert_eq!(t.bitmap(448) >> (500 - 448) & 1, 1);
    }
}
