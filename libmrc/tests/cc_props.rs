//! Property tests of the congestion controllers (spec/cc.md): the window never leaves its bounds, nothing
//! panics, and the same inputs give the same windows.

use mrc::cc::{AckSample, CcConfig, CongestionControl, Nscc, NsccConfig};
use mrc::time::{Duration, Instant};
use proptest::prelude::*;

/// One thing the engine can report.
#[derive(Debug, Clone)]
enum Op {
    Ack(AckSample),
    Trim { bytes: u64, last_hop: bool },
    Loss { bytes: u64 },
}

/// Time steps from "same instant" through "within a period" to "long idle", and now and then backwards
/// (a driver bug the controller must survive).
fn step() -> impl Strategy<Value = i64> {
    prop_oneof![
        3 => Just(0i64),
        6 => 1i64..20_000,
        1 => 20_000i64..10_000_000,
        1 => -50_000i64..0,
    ]
}

fn rtt() -> impl Strategy<Value = Option<Duration>> {
    prop_oneof![
        1 => Just(None),
        6 => (0u64..200_000).prop_map(|ns| Some(Duration::from_nanos(ns))),
        1 => any::<u64>().prop_map(|ns| Some(Duration::from_nanos(ns))),
    ]
}

fn bytes() -> impl Strategy<Value = u64> {
    prop_oneof![8 => 0u64..65_536, 1 => any::<u64>()]
}

fn sample() -> impl Strategy<Value = AckSample> {
    (
        bytes(),
        rtt(),
        any::<bool>(),
        prop_oneof![6 => Just(0u8), 3 => 0u8..=127, 1 => any::<u8>()],
        bytes(),
    )
        .prop_map(
            |(newly_acked_bytes, rtt, ecn, rcv_cwnd_pen, inflight)| AckSample {
                newly_acked_bytes,
                rtt,
                ecn,
                rcv_cwnd_pen,
                inflight: inflight.saturating_mul(16),
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => sample().prop_map(Op::Ack),
        2 => (bytes(), any::<bool>()).prop_map(|(bytes, last_hop)| Op::Trim { bytes, last_hop }),
        1 => bytes().prop_map(|bytes| Op::Loss { bytes }),
    ]
}

fn gain() -> impl Strategy<Value = f64> {
    prop_oneof![1 => Just(0.0), 4 => 0.0f64..2.0, 1 => 0.0f64..1e6]
}

/// Valid configurations over a wide range of paths and gains.
fn config() -> impl Strategy<Value = NsccConfig> {
    (
        (
            1u64..16_384,
            100u64..1_000_000,
            1_000_000u64..2_000_000_000_000,
        ),
        (
            1u64..2_000_000,
            prop::option::of(1u64..100_000),
            prop::option::of(1u64..100_000_000),
        ),
        (gain(), gain(), gain(), gain(), 0.0f64..=1.0),
        (any::<bool>(), prop::option::of(1u64..100_000)),
    )
        .prop_filter_map(
            "window bounds out of order",
            |(
                (mtu, base_ns, rate),
                (target_ns, min, max),
                (eta, fi, creep, gamma, jump),
                (qa, period),
            )| {
                let mut c = NsccConfig::for_path(mtu, Duration::from_nanos(base_ns), rate);
                c.target_delay = Duration::from_nanos(target_ns);
                c.min_cwnd = min;
                c.max_cwnd = max;
                c.eta = eta;
                c.fi = fi;
                c.creep = creep;
                c.gamma = gamma;
                c.max_md_jump = jump;
                c.qa_enabled = qa;
                c.adjust_period = period.map(Duration::from_nanos);
                c.validate().is_ok().then_some(c)
            },
        )
}

/// Applies `ops` and returns the window after each.
fn drive(cc: &mut dyn CongestionControl, ops: &[(i64, Op)]) -> Vec<u64> {
    let mut t: u64 = 1_000_000_000;
    ops.iter()
        .map(|(dt, op)| {
            t = t.saturating_add_signed(*dt);
            let now = Instant::from_nanos(t);
            match op {
                Op::Ack(s) => cc.on_ack(now, s),
                Op::Trim { bytes, last_hop } => cc.on_trim(now, *bytes, *last_hop),
                Op::Loss { bytes } => cc.on_loss(now, *bytes),
            }
            cc.window()
        })
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    // spec: CC-WIN-2
    #[test]
    fn window_stays_within_bounds(cfg in config(), ops in prop::collection::vec((step(), op()), 0..300)) {
        let (min, max) = (cfg.min_cwnd_bytes(), cfg.max_cwnd_bytes());
        let mut cc = Nscc::new(cfg).unwrap();
        prop_assert!((min..=max).contains(&cc.window()));
        for (i, w) in drive(&mut cc, &ops).into_iter().enumerate() {
            prop_assert!((min..=max).contains(&w), "op {i}: window {w} outside [{min}, {max}]");
        }
    }

    #[test]
    fn same_inputs_same_windows(cfg in config(), ops in prop::collection::vec((step(), op()), 0..200)) {
        let mut a = Nscc::new(cfg.clone()).unwrap();
        let mut b = CcConfig::Nscc(cfg).build().unwrap();
        prop_assert_eq!(drive(&mut a, &ops), drive(b.as_mut(), &ops));
        prop_assert_eq!(a.counters(), b.counters());
    }

    // spec: CC-PEN-1
    #[test]
    fn a_larger_penalty_never_allows_more(cfg in config(), p in 0u8..=127, q in 0u8..=127) {
        let (lo, hi) = if p <= q { (p, q) } else { (q, p) };
        let window_at = |pen| {
            let mut cc = Nscc::new(cfg.clone()).unwrap();
            cc.on_ack(Instant::ZERO, &AckSample { rcv_cwnd_pen: pen, ..AckSample::default() });
            cc.window()
        };
        prop_assert!(window_at(hi) <= window_at(lo));
        prop_assert_eq!(window_at(0), cfg.init_cwnd_bytes());
        prop_assert_eq!(window_at(127), cfg.mtu.clamp(cfg.min_cwnd_bytes(), cfg.init_cwnd_bytes()));
    }

    // spec: CC-CFG-3
    #[test]
    fn any_config_validates_or_names_a_field(
        mtu in prop_oneof![Just(0u64), 1u64..100_000],
        base_ns in prop_oneof![Just(0u64), 1u64..1_000_000],
        rate in prop_oneof![Just(0u64), any::<u64>()],
        target_ns in prop_oneof![Just(0u64), 1u64..1_000_000],
        min in prop::option::of(any::<u64>()),
        max in prop::option::of(any::<u64>()),
        init in prop::option::of(any::<u64>()),
        gains in prop::array::uniform5(prop_oneof![Just(f64::NAN), Just(f64::INFINITY), -10.0f64..10.0]),
    ) {
        let mut c = NsccConfig::for_path(mtu, Duration::from_nanos(base_ns), rate);
        c.target_delay = Duration::from_nanos(target_ns);
        c.min_cwnd = min;
        c.max_cwnd = max;
        c.init_cwnd = init;
        [c.eta, c.fi, c.creep, c.gamma, c.max_md_jump] = gains;
        match CcConfig::Nscc(c.clone()).build() {
            Ok(cc) => {
                prop_assert!(c.validate().is_ok());
                prop_assert_eq!(cc.window(), c.init_cwnd_bytes());
            }
            Err(e) => {
                prop_assert!(e.field.starts_with("qp.cc."));
                prop_assert!(!e.problem.is_empty());
                prop_assert_eq!(c.validate().unwrap_err(), e);
            }
        }
    }

    // spec: CC-FIX-1
    #[test]
    fn fixed_window_never_moves(window in 1u64..u64::MAX, ops in prop::collection::vec((step(), op()), 0..100)) {
        let mut cc = CcConfig::Fixed { window }.build().unwrap();
        prop_assert!(drive(cc.as_mut(), &ops).into_iter().all(|w| w == window));
    }
}
