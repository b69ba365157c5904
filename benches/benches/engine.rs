//! Per-packet cost of the engine, measured by record and replay (see `mrc_benches::pair`), the cost of one
//! SACK at the sender, the receive window's bitmap, and the protocol's throughput with both endpoints in one
//! thread.
//!
//! Per-packet and per-SACK benches report criterion's "time" per data packet (or per SACK): each sample
//! replays whole traces and divides by the packets they carried.

use std::hint::black_box;
use std::time::{Duration, Instant as WallClock};

use criterion::{Bencher, Criterion, Throughput, criterion_group, criterion_main};
use mrc::Memory;
use mrc::internals::PsnTracker;
use mrc_benches::pair::{
    NoTap, REGION_BASE, Recording, Scenario, Wire, build_pair, record, run_pair, time_replays,
    verify,
};
use mrc_benches::{Arena, NoCopy};

/// 16 WRITEs of 1 MiB: 4096 data packets of 4 KiB.
const MESSAGES: u32 = 16;
const MESSAGE_LEN: u32 = 1 << 20;

/// One configuration of the pair: ICRC on or off, payload copied or not, keyed (AUTH tags) or not.
#[derive(Debug, Clone, Copy)]
struct Case {
    name: &'static str,
    icrc: bool,
    copy: bool,
    auth: bool,
}

const fn case(name: &'static str, icrc: bool, copy: bool, auth: bool) -> Case {
    Case {
        name,
        icrc,
        copy,
        auth,
    }
}

const CASES: [Case; 8] = [
    case("nocopy", false, false, false),
    case("nocopy_icrc", true, false, false),
    case("copy", false, true, false),
    case("copy_icrc", true, true, false),
    case("nocopy_auth", false, false, true),
    case("nocopy_icrc_auth", true, false, true),
    case("copy_auth", false, true, true),
    case("copy_icrc_auth", true, true, true),
];

fn scenario(case: Case) -> Scenario {
    Scenario {
        messages: MESSAGES,
        message_len: MESSAGE_LEN,
        icrc: case.icrc,
        auth: case.auth,
    }
}

fn arena(s: &Scenario) -> Arena {
    Arena::new(REGION_BASE, s.bytes() as usize)
}

/// Records the case, proves a replay reproduces it, and prints what the trace holds.
fn recorded(case: Case) -> Recording {
    let s = scenario(case);
    let rec = if case.copy {
        let r = record(&s, &mut [arena(&s), arena(&s)]);
        verify(&r, |_| arena(&s));
        r
    } else {
        let r = record(&s, &mut [NoCopy, NoCopy]);
        verify(&r, |_| NoCopy);
        r
    };
    let [a, b] = &rec.sides;
    let [sa, sb] = &rec.stats;
    assert_eq!(sa.tx_retransmits, 0, "the recorded run must be lossless");
    assert_eq!(a.sent.data, sa.tx_data_packets);
    assert_eq!(b.received.data, sb.rx_data_packets);
    assert_eq!(a.control_received(), sa.rx_sacks);
    eprintln!(
        "[{}] A: {} calls, {} data packets sent, {} SACKs handled ({:.1} data packets per SACK); \
         B: {} calls, {} data packets received, {} packets sent; engine time {:?}",
        case.name,
        a.calls.len(),
        a.sent.data,
        a.control_received(),
        a.sent.data as f64 / a.control_received().max(1) as f64,
        b.calls.len(),
        b.received.data,
        b.sent.packets,
        Duration::from_nanos(rec.end.as_nanos()),
    );
    rec
}

/// Runs `run(n)` (which times `n` whole replays of `units_per_run` units each) enough times for criterion's
/// `iters` and scales the time to exactly `iters` units, so criterion reports the mean time per unit.
fn per_unit(b: &mut Bencher<'_>, units_per_run: u64, mut run: impl FnMut(u64) -> Duration) {
    assert!(units_per_run > 0);
    b.iter_custom(|iters| {
        let runs = iters.div_ceil(units_per_run).max(1);
        run(runs).mul_f64(iters as f64 / (runs * units_per_run) as f64)
    });
}

fn replay_side<M: Memory>(rec: &Recording, side: usize, mem: &mut M, runs: u64) -> Duration {
    time_replays::<M, false>(rec, side, mem, runs).0
}

fn bench_per_packet(c: &mut Criterion) {
    let recs: Vec<(Case, Recording)> = CASES.iter().map(|&k| (k, recorded(k))).collect();
    for (side, group, units) in [
        (0, "engine/sender_per_data_packet", "sent"),
        (1, "engine/receiver_per_data_packet", "received"),
    ] {
        let mut g = c.benchmark_group(group);
        for (case, rec) in &recs {
            let trace = &rec.sides[side];
            let n = if units == "sent" {
                trace.sent.data
            } else {
                trace.received.data
            };
            if case.copy {
                let mut mem = arena(&rec.scenario);
                g.bench_function(case.name, |b| {
                    per_unit(b, n, |runs| replay_side(rec, side, &mut mem, runs))
                });
            } else {
                g.bench_function(case.name, |b| {
                    per_unit(b, n, |runs| replay_side(rec, side, &mut NoCopy, runs))
                });
            }
        }
        g.finish();
    }

    // One SACK at the sender: A's trace replayed, only its handle_datagram calls timed.
    let (_, rec) = &recs[0];
    let sacks = rec.sides[0].control_received();
    let mut g = c.benchmark_group("engine/sack");
    g.bench_function("handle_sack_at_sender", |b| {
        per_unit(b, sacks, |runs| {
            time_replays::<NoCopy, true>(rec, 0, &mut NoCopy, runs)
                .1
                .deliver_time
        })
    });
    // The bias each timed call above carries: what an empty timed interval reads.
    g.bench_function("empty_timed_interval", |b| {
        b.iter_custom(|iters| {
            let mut acc = Duration::ZERO;
            for _ in 0..iters {
                let t0 = WallClock::now();
                acc += t0.elapsed();
            }
            acc
        })
    });
    g.finish();
}

/// The whole back-to-back loop, both endpoints and the driver, for 16 MiB.
fn bench_transfer(c: &mut Criterion) {
    let mut g = c.benchmark_group("engine/transfer_16MiB");
    g.sample_size(10);
    g.measurement_time(Duration::from_secs(5));
    let s = scenario(CASES[0]);
    g.throughput(Throughput::BytesDecimal(s.bytes()));
    let mut wire = Wire::default();
    g.bench_function("protocol_only", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut sides = build_pair(&s);
                let t0 = WallClock::now();
                black_box(run_pair(
                    &s,
                    &mut sides,
                    &mut [NoCopy, NoCopy],
                    &mut wire,
                    &mut NoTap,
                ));
                total += t0.elapsed();
            }
            total
        })
    });
    let s = scenario(CASES[3]);
    let mut mems = [arena(&s), arena(&s)];
    g.bench_function("copy_icrc", |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            for _ in 0..iters {
                let mut sides = build_pair(&s);
                let t0 = WallClock::now();
                black_box(run_pair(&s, &mut sides, &mut mems, &mut wire, &mut NoTap));
                total += t0.elapsed();
            }
            total
        })
    });
    g.finish();
}

/// The receive window alone: what one arriving data packet costs it, and one SACK bitmap.
fn bench_psn_tracker(c: &mut Criterion) {
    const PSNS: u64 = 4096;
    const WINDOW: u64 = 1024;
    let mut g = c.benchmark_group("reliability/psn_tracker");
    g.bench_function("insert_in_order", |b| {
        per_unit(b, PSNS, |runs| {
            let mut total = Duration::ZERO;
            for _ in 0..runs {
                let mut t = PsnTracker::new(0, WINDOW);
                let t0 = WallClock::now();
                for p in 0..PSNS {
                    black_box(t.insert(black_box(p)));
                }
                total += t0.elapsed();
            }
            total
        })
    });
    // Pairs swapped (1, 0, 3, 2, ...): every other PSN opens a hole that the next one fills.
    g.bench_function("insert_pairs_swapped", |b| {
        per_unit(b, PSNS, |runs| {
            let mut total = Duration::ZERO;
            for _ in 0..runs {
                let mut t = PsnTracker::new(0, WINDOW);
                let t0 = WallClock::now();
                for p in 0..PSNS {
                    black_box(t.insert(black_box(p ^ 1)));
                }
                total += t0.elapsed();
            }
            total
        })
    });
    // A window with every third PSN missing: the SACK bitmap at the first hole.
    let mut t = PsnTracker::new(0, WINDOW);
    for p in (1..WINDOW).filter(|p| p % 3 != 0) {
        t.insert(p);
    }
    g.bench_function("bitmap_with_holes", |b| {
        b.iter(|| black_box(&t).bitmap(black_box(0)))
    });
    g.finish();
}

criterion_group! {
    name = benches;
    config = Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30);
    targets = bench_per_packet, bench_transfer, bench_psn_tracker
}
criterion_main!(benches);
