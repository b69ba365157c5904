//! Property: on an 8-plane in-memory network with random mixes of loss (up to 30%), reordering, duplication,
//! trimming and corruption, every WRITE, WRITE_WITH_IMM, SEND and READ of random size (1 B to 4 MiB) completes
//! exactly once, successfully, byte-exact, in posting order, and nothing outside the target regions changes.

mod common;

use common::*;
use mrc::testing::PlaneConfig;
use mrc::*;
use proptest::prelude::*;

fn cases() -> u32 {
    std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1000)
}

#[derive(Debug, Clone)]
struct Mix {
    loss: f64,
    reorder: f64,
    duplicate: f64,
    trim: f64,
    corrupt: f64,
}

impl Mix {
    /// A plane with these impairments.
    fn plane(&self) -> PlaneConfig {
        PlaneConfig {
            loss: self.loss,
            reorder: self.reorder,
            duplicate: self.duplicate,
            trim: self.trim,
            corrupt: self.corrupt,
            ..PlaneConfig::default()
        }
    }
}

fn mix() -> impl Strategy<Value = Mix> {
    (
        0.0..0.30f64,
        0.0..0.5f64,
        0.0..0.1f64,
        0.0..0.2f64,
        0.0..0.05f64,
    )
        .prop_map(|(loss, reorder, duplicate, trim, corrupt)| Mix {
            loss,
            reorder,
            duplicate,
            trim,
            corrupt,
        })
}

fn size() -> impl Strategy<Value = u32> {
    (0u32..22, any::<u32>()).prop_map(|(bits, r)| {
        let lo = 1u32 << bits;
        let hi = (lo << 1).min(4 << 20);
        lo + r % (hi - lo + 1)
    })
}

fn op() -> impl Strategy<Value = Op> {
    (
        prop_oneof![
            Just(OpKind::Write),
            Just(OpKind::WriteImm),
            Just(OpKind::Send),
            Just(OpKind::Read)
        ],
        size(),
    )
        .prop_map(|(kind, len)| Op { kind, len })
}

fn run(seed: u64, m: &Mix, ops: &[Op]) -> Result<(), String> {
    let plane = m.plane();
    let (mut net, qa, qb) = pair(8, plane, seed, &qp_config(8));
    // Half the cases send zero-copy on each side (memory that lends payloads in place).
    net.nodes[A].mem.lend = seed & 1 == 1;
    net.nodes[B].mem.lend = seed & 2 == 2;
    let posted: Vec<Posted> = ops
        .iter()
        .enumerate()
        .map(|(i, &op)| post(&mut net, qa, qb, op, i as u64 + 1))
        .collect();
    let limit = net.now() + Duration::from_secs(5);
    let (ok, mut seen) = run_to_completion(&mut net, &posted, limit);
    if !ok {
        return Err(format!(
            "incomplete at {:?}: {} of {} send completions, {} receive; A {:?} B {:?}",
            net.now(),
            seen.a.len(),
            posted.len(),
            seen.b.len(),
            net.nodes[A].ep.qp_stats(qa),
            net.nodes[B].ep.qp_stats(qb)
        ));
    }
    // Exactly once: nothing more may complete later.
    net.run_for(Duration::from_millis(2));
    drain(&mut net, &mut seen);
    check(&net, &posted, &seen)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: cases(), ..ProptestConfig::default() })]

    #[test]
    fn every_operation_completes_exactly_once_byte_exact(
        seed in any::<u64>(),
        m in mix(),
        ops in prop::collection::vec(op(), 1..=4),
    ) {
        if let Err(e) = run(seed, &m, &ops) {
            return Err(TestCaseError::fail(format!("{e}\nmix {m:?}\nops {ops:?}")));
        }
    }
}

#[test]
fn clean_network_each_kind() {
    for kind in [OpKind::Write, OpKind::WriteImm, OpKind::Send, OpKind::Read] {
        for len in [1u32, 4095, 4096, 4097, 1 << 20] {
            run(
                7,
                &Mix {
                    loss: 0.0,
                    reorder: 0.0,
                    duplicate: 0.0,
                    trim: 0.0,
                    corrupt: 0.0,
                },
                &[Op { kind, len }],
            )
            .unwrap_or_else(|e| panic!("{kind:?} {len}: {e}"));
        }
    }
}

/// The worst mix of the property test, with proof that every impairment happened and was handled.
#[test]
fn worst_mix_exercises_every_impairment() {
    let m = Mix {
        loss: 0.30,
        reorder: 0.5,
        duplicate: 0.1,
        trim: 0.2,
        corrupt: 0.05,
    };
    let plane = m.plane();
    let (mut net, qa, qb) = pair(8, plane, 99, &qp_config(8));
    let ops = [
        Op {
            kind: OpKind::Write,
            len: 4 << 20,
        },
        Op {
            kind: OpKind::WriteImm,
            len: 1 << 20,
        },
        Op {
            kind: OpKind::Send,
            len: 777_777,
        },
        Op {
            kind: OpKind::Read,
            len: 3 << 20,
        },
    ];
    let posted: Vec<Posted> = ops
        .iter()
        .enumerate()
        .map(|(i, &op)| post(&mut net, qa, qb, op, i as u64 + 1))
        .collect();
    let limit = net.now() + Duration::from_secs(5);
    let (ok, seen) = run_to_completion(&mut net, &posted, limit);
    assert!(ok, "incomplete");
    check(&net, &posted, &seen).unwrap();
    let sa = net.nodes[A].ep.qp_stats(qa).unwrap();
    let sb = net.nodes[B].ep.qp_stats(qb).unwrap();
    let corrupted: u64 = net.counters.iter().map(|c| c.corrupted).sum();
    let icrc_drops = net.nodes[A].ep.stats().rx_bad_icrc + net.nodes[B].ep.stats().rx_bad_icrc;
    println!(
        "A {sa:?}\nB {sb:?}\nnet {:?}\nicrc drops {icrc_drops} of {corrupted} corrupted",
        net.counters
    );
    assert!(
        sa.tx_retransmits > 100,
        "losses were repaired by retransmission"
    );
    assert!(
        sa.rx_trim_nacks > 50 && sb.rx_trimmed > 50,
        "trims came back as NACKs"
    );
    assert!(sb.rx_duplicates > 10, "duplicates were recognised");
    assert!(
        corrupted > 20 && icrc_drops > 0,
        "corruption was caught by the ICRC"
    );
    // A corrupted packet that was not dropped by the ICRC can only be a trimmed one (no ICRC), which is never placed.
    assert!(icrc_drops <= corrupted);
    assert!(sa.ev_retirements > 0, "silent loss retired paths");
}
