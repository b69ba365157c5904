use super::*;

const US: u64 = 1000;

/// Defaults (BDP 1 MB, max 1.5 MB, target 7.5 µs, period 10 µs, eta 0.05, fi 1, gamma 1) with the window
/// starting at 500 kB and, unless a test wants it, no creep, so each quadrant shows alone.
fn cfg() -> NsccConfig {
    NsccConfig {
        init_cwnd: Some(500_000),
        creep: 0.0,
        ..NsccConfig::default()
    }
}

fn nscc(cfg: NsccConfig) -> Nscc {
    Nscc::new(cfg).unwrap()
}

fn at(us: u64) -> Instant {
    Instant::from_nanos(us * US)
}

/// One full packet acked with this RTT and ECN bit, the window otherwise fully in use.
fn ack(rtt_ns: u64, ecn: bool) -> AckSample {
    AckSample {
        newly_acked_bytes: 4096,
        rtt: Some(Duration::from_nanos(rtt_ns)),
        ecn,
        rcv_cwnd_pen: 0,
        inflight: 496_000,
    }
}

#[test]
fn defaults_follow_the_bdp() {
    let c = NsccConfig::default();
    assert_eq!(c.bdp(), 1_000_000);
    assert_eq!(c.max_cwnd_bytes(), 1_500_000);
    assert_eq!(c.min_cwnd_bytes(), 4096);
    assert_eq!(c.init_cwnd_bytes(), 1_500_000);
    assert_eq!(c.target_delay, Duration::from_nanos(7500));
    assert_eq!(c.adjust_period_resolved(), Duration::from_micros(10));
    c.validate().unwrap();
    // A BDP below one packet still gives a usable window range.
    let tiny = NsccConfig::for_path(4096, Duration::from_micros(1), 1_000_000);
    assert_eq!(tiny.max_cwnd_bytes(), 4096);
    tiny.validate().unwrap();
    assert_eq!(nscc(NsccConfig::default()).window(), 1_500_000);
}

#[test]
fn proportional_increase_below_target() {
    let mut n = nscc(cfg());
    // delay 2.5 µs of a 7.5 µs target: headroom 2/3; 2/3 × eta·BDP (50 kB) × 4096/500 000 = 273.07.
    n.on_ack(at(0), &ack(12_500, false));
    assert_eq!(n.window(), 500_273);
    assert_eq!(n.counters().proportional_increases, 1);
}

#[test]
fn proportional_increase_is_largest_at_zero_delay() {
    // An RTT below the base RTT counts as zero delay: headroom 1, 50 000 × 4096/500 000 = 409.6.
    let mut n = nscc(cfg());
    n.on_ack(at(0), &ack(5_000, false));
    assert_eq!(n.window(), 500_410);
    // At exactly the target there is no headroom left.
    let mut n = nscc(cfg());
    n.on_ack(at(0), &ack(17_500, false));
    assert_eq!(n.window(), 500_000);
}

#[test]
fn fair_increase_above_target_without_ecn() {
    let mut n = nscc(cfg());
    // fi = 1 MTU per RTT: 4096 × 4096/500 000 = 33.55 per ack.
    n.on_ack(at(0), &ack(20_000, false));
    assert_eq!(n.window(), 500_034);
    assert_eq!(n.counters().fair_increases, 1);
}

#[test]
fn multiplicative_decrease_above_target_with_ecn() {
    let mut n = nscc(cfg());
    // delay 15 µs: excess (15 − 7.5) / (10 + 15) = 0.3 of the window.
    n.on_ack(at(0), &ack(25_000, true));
    assert_eq!(n.window(), 350_000);
    // Within the adjust period: held.
    n.on_ack(at(5), &ack(25_000, true));
    assert_eq!(n.window(), 350_000);
    assert_eq!(n.counters().holds, 1);
    // One period later: again 0.3.
    n.on_ack(at(10), &ack(25_000, true));
    assert_eq!(n.window(), 245_000);
    assert_eq!(n.counters().decreases, 2);
}

#[test]
fn multiplicative_decrease_is_capped() {
    let mut n = nscc(cfg());
    // delay 90 µs: excess 82.5/100 = 0.825, capped at max_md_jump 0.5.
    n.on_ack(at(0), &ack(100_000, true));
    assert_eq!(n.window(), 250_000);
    let mut c = cfg();
    c.gamma = 0.5;
    let mut n = nscc(c);
    // gamma 0.5 halves the 0.3 of the earlier case.
    n.on_ack(at(0), &ack(25_000, true));
    assert_eq!(n.window(), 425_000);
}

#[test]
fn hold_below_target_with_ecn() {
    let mut n = nscc(cfg());
    n.on_ack(at(0), &ack(12_500, true));
    n.on_ack(at(20), &ack(10_000, true));
    assert_eq!(n.window(), 500_000);
    assert_eq!(n.counters().holds, 2);
}

#[test]
fn missing_rtt_only_counts_bytes() {
    let mut n = nscc(cfg());
    let s = AckSample {
        rtt: None,
        ecn: true,
        ..ack(0, true)
    };
    n.on_ack(at(0), &s);
    n.on_ack(at(20), &s);
    assert_eq!(n.window(), 500_000);
    assert_eq!(n.epoch_acked, 4096);
}

#[test]
fn one_ack_at_most_doubles_its_bytes() {
    let mut n = nscc(NsccConfig {
        init_cwnd: Some(4096),
        ..cfg()
    });
    // At one MTU, eta·BDP × 4096/4096 would add 50 kB; the ack acknowledged 4096.
    let s = AckSample {
        inflight: 0,
        ..ack(10_000, false)
    };
    n.on_ack(at(0), &s);
    assert_eq!(n.window(), 8192);
}

#[test]
fn no_growth_when_application_limited() {
    let mut n = nscc(cfg());
    let s = AckSample {
        inflight: 0,
        ..ack(10_000, false)
    };
    n.on_ack(at(0), &s);
    assert_eq!(n.window(), 500_000);
}

#[test]
fn creep_adds_in_every_quadrant_outside_a_hold() {
    let mut n = nscc(NsccConfig {
        creep: 2.0,
        ..cfg()
    });
    // ECN below target: the table holds, the creep adds 2 × 4096 × 4096/500 000 = 67.1.
    n.on_ack(at(0), &ack(12_500, true));
    assert_eq!(n.window(), 500_067);
    // After a decrease, no creep during the period.
    n.on_ack(at(1), &ack(25_000, true));
    let w = n.window();
    n.on_ack(at(2), &ack(12_500, true));
    assert_eq!(n.window(), w);
}

#[test]
fn window_stays_in_bounds() {
    let mut n = nscc(NsccConfig::default());
    for i in 0..100 {
        n.on_ack(at(i * 20), &ack(1_000_000, true));
    }
    assert_eq!(n.window(), 4096);
    let busy = AckSample {
        inflight: 2_000_000,
        ..ack(1, false)
    };
    for i in 100..10_000 {
        n.on_ack(at(i * 20), &busy);
    }
    assert_eq!(n.window(), 1_500_000);
}

#[test]
fn quick_adapt_drops_to_what_was_achieved() {
    let mut n = nscc(NsccConfig {
        init_cwnd: Some(1_000_000),
        ..cfg()
    });
    // 100 kB (10 % of the window) acked during the first period, no RTT samples.
    let s = AckSample {
        newly_acked_bytes: 10_000,
        rtt: None,
        inflight: 900_000,
        ..AckSample::default()
    };
    for i in 0..10 {
        n.on_ack(at(i), &s);
    }
    // 100 kB per base RTT at the target delay (0.75 base RTT) is a window of 175 kB (CC-QA-4).
    n.on_trim(at(10), 4096, false);
    assert_eq!(n.window(), 175_000);
    assert_eq!(n.counters().quick_adapts, 1);
    // At most once per period, and no multiplicative decrease in that period either.
    n.on_trim(at(15), 4096, true);
    n.on_ack(at(16), &ack(25_000, true));
    assert_eq!(n.window(), 175_000);
    assert_eq!(n.counters().trims, 2);
    assert_eq!(n.counters().last_hop_trims, 1);
}

#[test]
fn quick_adapt_interpolates_the_previous_period() {
    let mut n = nscc(NsccConfig {
        init_cwnd: Some(1_000_000),
        ..cfg()
    });
    let s = AckSample {
        newly_acked_bytes: 10_000,
        inflight: 900_000,
        ..AckSample::default()
    };
    for i in 0..10 {
        n.on_ack(at(i), &s);
    }
    // Half-way into the next period with 20 kB acked in it: 20 kB + half of the previous 100 kB.
    n.on_ack(at(12), &s);
    n.on_ack(at(14), &s);
    n.on_loss(at(15), 4096);
    assert_eq!(n.window(), 122_500);
    assert_eq!(n.counters().losses, 1);
}

#[test]
fn quick_adapt_needs_a_full_period_of_feedback() {
    let mut n = nscc(cfg());
    n.on_trim(at(0), 4096, false);
    n.on_trim(at(5), 4096, false);
    assert_eq!(n.window(), 500_000);
    // A period later it has seen what the QP achieved (nothing): down to min_cwnd.
    n.on_trim(at(10), 4096, false);
    assert_eq!(n.window(), 4096);
}

#[test]
fn quick_adapt_restarts_its_measurement_after_idle() {
    let mut n = nscc(NsccConfig {
        init_cwnd: Some(1_000_000),
        ..cfg()
    });
    let busy = AckSample {
        newly_acked_bytes: 100_000,
        inflight: 900_000,
        ..AckSample::default()
    };
    let idle = AckSample {
        inflight: 0,
        ..busy
    };
    n.on_ack(at(0), &busy);
    n.on_ack(at(5), &idle);
    // 100 µs later the QP sends again and the first feedback is a trim: no history, no quick adapt.
    n.on_trim(at(105), 4096, false);
    assert_eq!(n.window(), 1_000_000);
    // One period of feedback later, quick adapt works again.
    n.on_ack(at(110), &busy);
    n.on_trim(at(116), 4096, false);
    assert_eq!(n.window(), 175_000);
}

/// A flight that vanished into a failure is not a measure of the network: after a period of silence with
/// bytes in flight, the losses that RTO then declares leave the window alone (it used to fall to one MTU,
/// stalling every plane of a QP that had lost one).
#[test]
fn quick_adapt_ignores_a_flight_lost_in_silence() {
    let mut n = nscc(NsccConfig {
        init_cwnd: Some(1_000_000),
        ..cfg()
    });
    let s = AckSample {
        newly_acked_bytes: 100_000,
        inflight: 70_000,
        ..AckSample::default()
    };
    for i in 0..10 {
        n.on_ack(at(i), &s);
    }
    // The last 70 kB in flight went down with a plane: nothing is acked for 3 periods, then RTO.
    for k in 0..8 {
        n.on_loss(at(40 + k), 4096);
    }
    assert_eq!(n.window(), 1_000_000);
    assert_eq!(n.counters().quick_adapts, 0);
    // With a period of feedback again, a loss that follows what got through does adapt.
    n.on_ack(at(50), &s);
    n.on_loss(at(60), 4096);
    assert_eq!(n.window(), 175_000);
}

/// A window is a round trip's bytes, a period's acks are one base RTT's: a flow that gets its window
/// through at the target delay acks `W × base / (base + target)` per period, and a trim on one of its
/// queues must not cut it to that (a slowed spine's tail was +12.7% over healthy, 7.3% without the cut).
#[test]
fn quick_adapt_leaves_a_window_that_was_achieved() {
    // 1 MB per period of 10 µs; then W = 500 kB over base 10 µs + target 7.5 µs: 285.8 kB per period.
    for per_ack in [100_000, 28_580] {
        let mut n = nscc(cfg());
        let s = AckSample {
            newly_acked_bytes: per_ack,
            inflight: 450_000,
            ..AckSample::default()
        };
        for i in 0..10 {
            n.on_ack(at(i), &s);
        }
        n.on_trim(at(10), 4096, false);
        assert_eq!(n.window(), 500_000, "{per_ack} B per ack");
        assert_eq!(n.counters().quick_adapts, 0);
    }
}

#[test]
fn quick_adapt_can_be_disabled() {
    let mut n = nscc(NsccConfig {
        qa_enabled: false,
        ..cfg()
    });
    n.on_trim(at(0), 4096, false);
    n.on_trim(at(50), 4096, false);
    n.on_loss(at(100), 4096);
    assert_eq!(n.window(), 500_000);
}

#[test]
fn receiver_penalty_caps_geometrically() {
    let mut n = nscc(NsccConfig::default());
    let pen = |p| AckSample {
        rcv_cwnd_pen: p,
        rtt: None,
        ..AckSample::default()
    };
    n.on_ack(at(0), &pen(0));
    assert_eq!(n.window(), 1_500_000);
    n.on_ack(at(1), &pen(127));
    assert_eq!(n.window(), 4096);
    // Values past 127 count as 127.
    n.on_ack(at(2), &pen(255));
    assert_eq!(n.window(), 4096);
    // 1.5 MB × (4096 / 1.5 MB)^(64/127) = 76 583.
    n.on_ack(at(3), &pen(64));
    assert_eq!(n.window(), 76_583);
    assert_eq!(n.penalty_cap(), 76_583);
    assert_eq!(n.cwnd(), 1_500_000);
    n.on_ack(at(4), &pen(0));
    assert_eq!(n.window(), 1_500_000);
}

#[test]
fn receiver_penalty_respects_min_cwnd() {
    let mut n = nscc(NsccConfig {
        min_cwnd: Some(16_384),
        ..NsccConfig::default()
    });
    let s = AckSample {
        rcv_cwnd_pen: 127,
        ..AckSample::default()
    };
    n.on_ack(at(0), &s);
    assert_eq!(n.window(), 16_384);
}

#[test]
fn no_growth_while_the_penalty_binds() {
    let mut n = nscc(cfg());
    let s = AckSample {
        rcv_cwnd_pen: 127,
        ..ack(10_000, false)
    };
    for i in 0..100 {
        n.on_ack(at(i), &s);
    }
    assert_eq!(n.cwnd(), 500_000);
    assert_eq!(n.window(), 4096);
}

#[test]
fn each_invalid_field_is_named() {
    let base = NsccConfig::default;
    let cases: Vec<(NsccConfig, &str)> = vec![
        (NsccConfig { mtu: 0, ..base() }, "qp.cc.mtu"),
        (
            NsccConfig {
                base_rtt: Duration::ZERO,
                ..base()
            },
            "qp.cc.base_rtt",
        ),
        (
            NsccConfig {
                link_rate_bps: 0,
                ..base()
            },
            "qp.cc.link_rate_bps",
        ),
        (
            NsccConfig {
                target_delay: Duration::ZERO,
                ..base()
            },
            "qp.cc.target_delay",
        ),
        (
            NsccConfig {
                adjust_period: Some(Duration::ZERO),
                ..base()
            },
            "qp.cc.adjust_period",
        ),
        (
            NsccConfig {
                min_cwnd: Some(0),
                ..base()
            },
            "qp.cc.min_cwnd",
        ),
        (
            NsccConfig {
                max_cwnd: Some(0),
                ..base()
            },
            "qp.cc.max_cwnd",
        ),
        (
            NsccConfig {
                min_cwnd: Some(100_000),
                max_cwnd: Some(50_000),
                ..base()
            },
            "qp.cc.min_cwnd",
        ),
        (
            NsccConfig {
                max_cwnd: Some(1000),
                ..base()
            },
            "qp.cc.max_cwnd",
        ),
        (
            NsccConfig {
                init_cwnd: Some(1),
                ..base()
            },
            "qp.cc.init_cwnd",
        ),
        (
            NsccConfig {
                init_cwnd: Some(2_000_000),
                ..base()
            },
            "qp.cc.init_cwnd",
        ),
        (
            NsccConfig {
                eta: f64::NAN,
                ..base()
            },
            "qp.cc.eta",
        ),
        (
            NsccConfig {
                eta: -0.1,
                ..base()
            },
            "qp.cc.eta",
        ),
        (
            NsccConfig {
                fi: f64::INFINITY,
                ..base()
            },
            "qp.cc.fi",
        ),
        (NsccConfig { fi: -1.0, ..base() }, "qp.cc.fi"),
        (
            NsccConfig {
                creep: f64::NEG_INFINITY,
                ..base()
            },
            "qp.cc.creep",
        ),
        (
            NsccConfig {
                gamma: f64::NAN,
                ..base()
            },
            "qp.cc.gamma",
        ),
        (
            NsccConfig {
                gamma: -1.0,
                ..base()
            },
            "qp.cc.gamma",
        ),
        (
            NsccConfig {
                max_md_jump: 1.5,
                ..base()
            },
            "qp.cc.max_md_jump",
        ),
        (
            NsccConfig {
                max_md_jump: -0.5,
                ..base()
            },
            "qp.cc.max_md_jump",
        ),
        (
            NsccConfig {
                max_md_jump: f64::NAN,
                ..base()
            },
            "qp.cc.max_md_jump",
        ),
    ];
    for (c, field) in cases {
        let e = Nscc::new(c.clone()).unwrap_err();
        assert_eq!(e.field, field, "{c:?}");
        assert!(!e.problem.is_empty());
        assert_eq!(e.to_string(), format!("{field}: {}", e.problem));
    }
}

#[test]
fn extreme_inputs_do_not_panic() {
    let c = NsccConfig {
        base_rtt: Duration::MAX,
        link_rate_bps: u64::MAX,
        target_delay: Duration::from_nanos(1),
        adjust_period: Some(Duration::from_nanos(1)),
        ..NsccConfig::default()
    };
    let mut n = nscc(c);
    let s = AckSample {
        newly_acked_bytes: u64::MAX,
        rtt: Some(Duration::MAX),
        ecn: true,
        rcv_cwnd_pen: 200,
        inflight: u64::MAX,
    };
    n.on_ack(Instant::MAX, &s);
    n.on_ack(
        Instant::ZERO,
        &AckSample {
            ecn: false,
            rtt: Some(Duration::ZERO),
            ..s
        },
    );
    n.on_trim(Instant::MAX, u64::MAX, true);
    n.on_loss(Instant::ZERO, u64::MAX);
    let w = n.window();
    assert!((n.cfg.min_cwnd_bytes()..=n.cfg.max_cwnd_bytes()).contains(&w));
}
