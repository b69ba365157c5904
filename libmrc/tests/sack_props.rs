//! Property: the receiver's PSN tracker (cumulative PSN + ring bitmap, the source of every SACK) agrees with a
//! `BTreeSet` model of the PSNs received, for any arrival order, duplicates and out-of-window PSNs.

use std::collections::BTreeSet;

use mrc::reliability::{PsnCheck, PsnTracker};
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
            // The SACK's base rule (spec REL-SACK-2) keeps the trigger inside the bitmap.
            let trigger = start + b;
            if trigger >= epsn && trigger < epsn + window {
                let sb = t.sack_base(trigger);
                prop_assert!(sb >= epsn && trigger - sb < 64);
            }
        }
    }
}
