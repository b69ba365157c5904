//! Replays one side of the recorded 16 × 1 MiB transfer many times, for profilers (callgrind, perf), which
//! need a plain binary rather than criterion's sampling loop.
//!
//! `cargo run --profile profiling -p mrc-benches --example replay -- [sender|receiver] [runs] [icrc] [copy] [noverify]`
//! (the `profiling` profile is release with debug info and symbols; `release` is stripped)
//!
//! For an instruction profile of the replays alone (`noverify` skips the hashing replay that would be
//! collected too):
//! `valgrind --tool=callgrind --toggle-collect='*pair::replay' target/profiling/examples/replay sender 20 noverify`

use mrc_benches::pair::{REGION_BASE, Scenario, record, time_replays, verify};
use mrc_benches::{Arena, NoCopy};

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let side = match args.first().map(String::as_str) {
        None | Some("sender") => 0,
        Some("receiver") => 1,
        Some(other) => panic!("unknown side {other:?}: use sender or receiver"),
    };
    let runs: u64 = args.get(1).map_or(100, |r| r.parse().expect("runs"));
    let icrc = args.iter().any(|a| a == "icrc");
    let copy = args.iter().any(|a| a == "copy");
    let auth = args.iter().any(|a| a == "auth");
    let check = !args.iter().any(|a| a == "noverify");
    let s = Scenario {
        messages: 16,
        message_len: 1 << 20,
        icrc,
        auth,
    };
    let arena = || Arena::new(REGION_BASE, s.bytes() as usize);
    let (elapsed, units) = if copy {
        let rec = record(&s, &mut [arena(), arena()]);
        if check {
            verify(&rec, |_| arena());
        }
        let units = units(&rec, side);
        (
            time_replays::<_, false>(&rec, side, &mut arena(), runs).0,
            units,
        )
    } else {
        let rec = record(&s, &mut [NoCopy, NoCopy]);
        if check {
            verify(&rec, |_| NoCopy);
        }
        let units = units(&rec, side);
        (
            time_replays::<_, false>(&rec, side, &mut NoCopy, runs).0,
            units,
        )
    };
    let per = elapsed.as_nanos() as f64 / (runs * units) as f64;
    println!("{runs} runs of side {side}: {per:.1} ns per data packet ({elapsed:?} replaying)");
}

fn units(rec: &mrc_benches::pair::Recording, side: usize) -> u64 {
    if side == 0 {
        rec.sides[0].sent.data
    } else {
        rec.sides[1].received.data
    }
}
