//! Issue 14: a job whose plane comes back must be no slower than one whose plane stays down, and should get
//! the returned plane's capacity back. Plane 3's T0-T1 links fail silently (the NIC ports stay up) at 5 us;
//! in one run they return at 25 us, in its twin they stay down. Before the fix the returning plane's EVs were
//! retired by the outage's late-found losses just as the plane delivered again and came back only after the
//! 100 us probe interval: 196.3 us against 200.8 with the plane down for good (healthy 175.5).

use mrc_sim::{Scenario, run_scenario};

fn load(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    Scenario::load(path.as_ref()).expect("scenario loads")
}

#[test]
fn a_returning_plane_is_picked_up_again() {
    let back = load("plane-return-8host");
    let down = load("plane-down-8host");
    let rb = run_scenario(&back, true, &mut |_, _| true).expect("runs");
    let rd = run_scenario(&down, false, &mut |_, _| true).expect("runs");
    assert!(rb.invariant_violations().is_empty() && rd.invariant_violations().is_empty());
    assert!(rb.run.finished && rd.run.finished);
    let healthy = rb.baseline.as_ref().expect("baseline ran").jct_us;
    let f = &back.failures[0];
    let outage = f.until_us.unwrap() - f.at_us;
    // The outage's share of capacity (1/8) plus one base RTT to find and resend what it swallowed.
    let bound = healthy + outage / 8.0 + rb.base_rtt_us;
    println!(
        "plane back: {:.1} us, plane down: {:.1} us, healthy {healthy:.1} us, bound {bound:.1} us; EVs retired {} restored {}",
        rb.run.jct_us, rd.run.jct_us, rb.run.counters.ev_retirements, rb.run.counters.ev_recoveries
    );
    assert!(
        rb.run.jct_us <= rd.run.jct_us,
        "the job whose plane came back took {:.1} us, the one whose plane stayed down {:.1} us",
        rb.run.jct_us,
        rd.run.jct_us
    );
    assert!(
        rb.run.jct_us <= bound,
        "the job whose plane came back took {:.1} us; at most {bound:.1}",
        rb.run.jct_us
    );
    // The plane down for good costs its share for the whole job, so the pair tells the two cases apart.
    assert!(rd.run.jct_us > bound, "plane down: {:.1} us", rd.run.jct_us);
    assert!(rb.passed(), "{:?}", rb.checks);
}
