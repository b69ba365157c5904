//! Issue 16: one plane's outage must not stall the other seven. An 8-host 1 MB job with plane 3 down from 5 to
//! 20 us used to take 86.2 us instead of 21.5, with no goodput on any plane from 16 us on.

use mrc_sim::{Scenario, run_scenario};

fn scenario() -> Scenario {
    let path = format!(
        "{}/scenarios/plane-outage-8host.toml",
        env!("CARGO_MANIFEST_DIR")
    );
    Scenario::load(path.as_ref()).expect("scenario loads")
}

#[test]
fn one_plane_outage_costs_its_share_and_stalls_no_other_plane() {
    let s = scenario();
    let r = run_scenario(&s, true, &mut |_, _| true).expect("runs");
    assert!(r.invariant_violations().is_empty());
    let base = r.baseline.as_ref().expect("baseline ran");
    let f = &s.failures[0];
    let outage = f.until_us.unwrap() - f.at_us;
    // The capacity lost (1/8 for the outage) plus one base RTT to find and resend what was in flight on it.
    let bound = base.jct_us + outage / 8.0 + r.base_rtt_us;
    println!(
        "job {:.1} us, healthy {:.1} us, bound {bound:.1} us (base RTT {:.1} us)",
        r.run.jct_us, base.jct_us, r.base_rtt_us
    );
    assert!(r.run.finished);
    assert!(
        r.run.jct_us <= bound,
        "job took {:.1} us; at most {bound:.1}",
        r.run.jct_us
    );
    // Every 1 us bin of the outage while payload is still arriving: every plane but 3 placed some.
    let bin = r.run.bin_us;
    let first = (f.at_us / bin) as usize;
    let placing = r
        .run
        .goodput_gbps
        .iter()
        .rposition(|row| row.iter().any(|&g| g > 0.0))
        .unwrap();
    let last = ((f.until_us.unwrap() / bin) as usize).min(placing);
    println!("checked bins [{first}, {last}) us");
    assert!(last > first + 5, "the outage barely overlaps the transfer");
    for b in first..last {
        let row = r.run.goodput_gbps.get(b).cloned().unwrap_or_default();
        for p in (0..8).filter(|&p| p != 3) {
            let g = row.get(p).copied().unwrap_or(0.0);
            assert!(
                g > 0.0,
                "plane {p} placed nothing in [{b}, {}) us: {row:?}",
                b + 1
            );
        }
    }
    assert_eq!(r.metrics["stalled_plane_bins"], 0.0);
    assert!(r.passed(), "{:?}", r.checks);
}

/// The metric catches a stall: when plane 3 fails silently (its T0-T1 links; NIC ports stay up), the tail
/// of packets lost on it can only be found by RTO (the simulator's reorder window is two base RTTs), and until
/// then the other planes have nothing left to carry.
#[test]
fn stalled_plane_bins_counts_a_stall() {
    let mut s = scenario();
    s.validate.clear();
    let mut f = s.failures[0].clone();
    f.kind = mrc_sim::scenario::FailureKind::LinkDown;
    f.plane = None;
    f.link =
        Some(toml::from_str::<mrc_sim::scenario::LinkRef>("tier = \"t0_t1\"\nplane = 3").unwrap());
    s.failures = vec![f];
    let r = run_scenario(&s, true, &mut |_, _| true).expect("runs");
    println!(
        "silent outage: job {:.1} us, stalled bins {}",
        r.run.jct_us, r.metrics["stalled_plane_bins"]
    );
    assert!(r.metrics["stalled_plane_bins"] > 0.0);
}
