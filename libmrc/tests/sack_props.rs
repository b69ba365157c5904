//! Property: the receiver's PSN tracker (cumulative PSN + ring bitmap, the source of every SACK) agrees with a
//! `BTreeSet` model of the PSNs received, for any arrival order, duplicates and out-of-window PSNs.

use std::collections::BTreeSet;

use mrc::internals::{PsnCheck, PsnTracker};
use proptest::prelude::*;

proptest! {
    #![proptest_config(ProptestConfig { cases: 1000, ..ProptestConfig::default() })]

    #[test]
    fn tracker_agrees_with_a_set(
        start in 0u64..(1 << 30),
        mpr in 1u64..4,
        arrivals in prop::collection::vec(0u64..1200, 1..600),
        bases in prop::collection::vec(0u64..1300, 1..8),
    ) {
        let window = mpr * 128;
        let mut t = PsnTracker::new(start, window);
        let mut model: BTreeSet<u64> = BTreeSet::new();
        for &off in &arrivals {
            let psn = start + off;
            let epsn = (start..).find(|p| !model.contains(p)).unwrap();
            let want = if model.contains(&psn) {
                PsnCheck::Duplicate
            } else if psn >= epsn + window {
                PsnCheck::OutOfWindow
            } else {
                PsnCheck::New
            };
            prop_assert_eq!(t.check(psn), want);
            prop_assert_eq!(t.insert(psn), want == PsnCheck::New);
            if want == PsnCheck::New {
                model.insert(psn);
            }
            let epsn = (start..).find(|p| !model.contains(p)).unwrap();
            prop_assert_eq!(t.epsn(), epsn);
            prop_assert_eq!(t.out_of_order() as usize, model.range(epsn..).count());
        }
        let epsn = t.epsn();
        for &b in &bases {
            let base = start + b;
            let bits = t.bitmap(base);
            for i in 0..64u64 {
                let psn = base + i;
                // PSNs below epsn read as received; beyond the window nothing can have arrived.
                let want = model.contains(&psn) || psn < epsn;
                prop_assert_eq!(bits >> i & 1 == 1, want, "psn {} base {}", psn, base);
            }
        }
        // The SACK's base rule (spec REL-SACK-2): for any lowest and highest arrival since the previous SACK, the
        // one or two bitmaps start at or above epsn and hold both (whichever lie at or above epsn).
        for pair in bases.windows(2) {
            let (lo, hi) = (start + pair[0].min(pair[1]), start + pair[0].max(pair[1]));
            if hi >= epsn + window {
                continue;
            }
            let (first, second) = t.sack_bases(lo, hi);
            let holds = |x: u64| x < epsn || (x >= first && x - first < 64)
                || second.is_some_and(|s| x >= s && x - s < 64);
            prop_assert!(first >= epsn && second.is_none_or(|s| s >= epsn && s < first));
            prop_assert!(holds(lo) && holds(hi), "lo {} hi {} epsn {} -> {} {:?}", lo, hi, epsn, first, second);
        }
    }
}
