//! A small deterministic packet-level loop for convergence tests: senders with their own NIC rate and
//! controller share one FIFO bottleneck of known rate and buffer. Queue delay is backlog / rate; a packet
//! is CE-marked when the backlog it finds exceeds the ECN threshold and trimmed when it would exceed the
//! buffer. Every packet is acked individually; the unloaded RTT is exactly the base RTT.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use super::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// One scenario.
pub(super) struct Scenario {
    pub(super) mtu: u64,
    pub(super) base_rtt: Duration,
    /// Bottleneck rate, bit/s.
    pub(super) bottleneck_bps: u64,
    /// Each sender's NIC rate, bit/s.
    pub(super) nic_bps: u64,
    /// Backlog above which packets start to be CE-marked, bytes.
    pub(super) ecn_min: u64,
    /// Backlog above which every packet is CE-marked, bytes; between the two the marking probability rises
    /// linearly (a fixed-seed generator keeps runs deterministic). Equal to `ecn_min` for a plain threshold.
    pub(super) ecn_max: u64,
    /// Backlog at which packets are trimmed, bytes.
    pub(super) buffer_bytes: u64,
    /// Trims are reported as TRIMMED_LASTHOP.
    pub(super) last_hop: bool,
    /// Simulated time.
    pub(super) duration: Duration,
    /// Statistics are taken from this time on.
    pub(super) measure_from: Duration,
}

/// What a run measured over the measurement interval.
#[derive(Debug)]
pub(super) struct Report {
    /// Bytes the bottleneck sent / what it could have sent.
    pub(super) utilization: f64,
    /// Time-weighted mean backlog, bytes.
    pub(super) mean_queue: f64,
    /// Largest backlog seen by an arriving packet, bytes.
    pub(super) max_queue: f64,
    /// Bytes delivered per sender.
    pub(super) delivered: Vec<u64>,
    /// Trims over the whole run.
    pub(super) trims: u64,
    /// Trims over the measurement interval.
    pub(super) trims_measured: u64,
    /// Final windows.
    pub(super) windows: Vec<u64>,
    /// Final controller counters.
    pub(super) counters: Vec<crate::cc::CcCounters>,
}

impl Report {
    /// max / min delivered over the measurement interval.
    pub(super) fn fairness_ratio(&self) -> f64 {
        let max = self.delivered.iter().copied().max().unwrap_or(0) as f64;
        let min = self.delivered.iter().copied().min().unwrap_or(0) as f64;
        if min == 0.0 { f64::INFINITY } else { max / min }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    /// Sender's NIC may send its next packet.
    Nic(usize),
    /// A packet reaches the bottleneck.
    Arrive { flow: usize, sent_ps: u64 },
    /// Its ack reaches the sender.
    Ack {
        flow: usize,
        sent_ps: u64,
        ecn: bool,
    },
    /// A trim NACK reaches the sender.
    Nack { flow: usize },
}

struct Sender {
    cc: Box<dyn CongestionControl>,
    inflight: u64,
    nic_busy: bool,
    delivered: u64,
}

const PS_PER_NS: u64 = 1000;

fn ser_ps(bytes: u64, bps: u64) -> u64 {
    u64::try_from(u128::from(bytes) * 8 * 1_000_000_000_000 / u128::from(bps.max(1)))
        .unwrap_or(u64::MAX)
}

fn ps(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX / PS_PER_NS) * PS_PER_NS
}

#[derive(Default)]
struct Events {
    heap: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    seq: u64,
}

impl Events {
    fn push(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.heap.push(Reverse((t, self.seq, ev)));
    }
}

/// Runs `sc` with one sender per controller; flow `i` starts at `starts[i]`.
pub(super) fn run(
    sc: &Scenario,
    ccs: Vec<Box<dyn CongestionControl>>,
    starts: &[Duration],
) -> Report {
    let end = ps(sc.duration);
    let measure_from = ps(sc.measure_from);
    let bn_ser = ser_ps(sc.mtu, sc.bottleneck_bps);
    let nic_ser = ser_ps(sc.mtu, sc.nic_bps);
    // Unloaded RTT = two propagation legs + one bottleneck serialization = base RTT.
    let prop = ps(sc.base_rtt).saturating_sub(bn_ser) / 2;
    let bytes_per_ps = sc.bottleneck_bps as f64 / 8.0 / 1e12;

    let mut q = Events::default();
    let mut senders: Vec<Sender> = ccs
        .into_iter()
        .map(|cc| Sender {
            cc,
            inflight: 0,
            nic_busy: true,
            delivered: 0,
        })
        .collect();
    for (i, s) in starts.iter().enumerate() {
        q.push(ps(*s), Ev::Nic(i));
    }

    let mut busy_until = 0u64; // the bottleneck transmits until then
    let mut sent_measured = 0u64;
    let mut queue_area = 0.0f64; // ∫ backlog dt over the measurement interval, byte·ps
    let mut last_t = measure_from;
    let mut max_queue = 0.0f64;
    let mut trims = 0u64;
    let mut trims_measured = 0u64;
    let mut rng = 0x9E37_79B9_7F4A_7C15u64;

    while let Some(Reverse((t, _, ev))) = q.heap.pop() {
        if t >= end {
            break;
        }
        let now = Instant::from_nanos(t / PS_PER_NS);
        match ev {
            Ev::Nic(i) => {
                let s = &mut senders[i];
                if s.inflight == 0 || s.inflight + sc.mtu <= s.cc.window() {
                    s.inflight += sc.mtu;
                    q.push(
                        t + prop,
                        Ev::Arrive {
                            flow: i,
                            sent_ps: t,
                        },
                    );
                    q.push(t + nic_ser, Ev::Nic(i));
                } else {
                    s.nic_busy = false;
                }
            }
            Ev::Arrive { flow, sent_ps } => {
                // The backlog falls at line rate between arrivals: integrate it from the last arrival.
                if t > measure_from {
                    let a = busy_until.saturating_sub(last_t) as f64;
                    let b = busy_until.saturating_sub(t) as f64;
                    queue_area += (a * a - b * b) / 2.0 * bytes_per_ps;
                    last_t = t;
                }
                let backlog = busy_until.saturating_sub(t) as f64 * bytes_per_ps;
                if t >= measure_from {
                    max_queue = max_queue.max(backlog);
                }
                if backlog + sc.mtu as f64 > sc.buffer_bytes as f64 {
                    trims += 1;
                    if t >= measure_from {
                        trims_measured += 1;
                    }
                    q.push(t + prop, Ev::Nack { flow });
                } else {
                    let p = if backlog <= sc.ecn_min as f64 {
                        0.0
                    } else if backlog > sc.ecn_max as f64 {
                        1.0
                    } else {
                        (backlog - sc.ecn_min as f64) / (sc.ecn_max - sc.ecn_min).max(1) as f64
                    };
                    // xorshift64: deterministic, and unlike error diffusion it cannot phase-lock onto one flow.
                    rng ^= rng << 13;
                    rng ^= rng >> 7;
                    rng ^= rng << 17;
                    let ecn = p >= 1.0 || ((rng >> 11) as f64 / (1u64 << 53) as f64) < p;
                    let departure = busy_until.max(t) + bn_ser;
                    busy_until = departure;
                    if departure >= measure_from && departure < end {
                        sent_measured += sc.mtu;
                    }
                    q.push(departure + prop, Ev::Ack { flow, sent_ps, ecn });
                }
            }
            Ev::Ack { flow, sent_ps, ecn } => {
                let s = &mut senders[flow];
                s.inflight = s.inflight.saturating_sub(sc.mtu);
                if t >= measure_from {
                    s.delivered += sc.mtu;
                }
                let sample = AckSample {
                    newly_acked_bytes: sc.mtu,
                    rtt: Some(Duration::from_nanos((t - sent_ps) / PS_PER_NS)),
                    ecn,
                    rcv_cwnd_pen: 0,
                    inflight: s.inflight,
                };
                s.cc.on_ack(now, &sample);
                if !s.nic_busy {
                    s.nic_busy = true;
                    q.push(t, Ev::Nic(flow));
                }
            }
            Ev::Nack { flow } => {
                let s = &mut senders[flow];
                s.inflight = s.inflight.saturating_sub(sc.mtu);
                s.cc.on_trim(now, sc.mtu, sc.last_hop);
                if !s.nic_busy {
                    s.nic_busy = true;
                    q.push(t, Ev::Nic(flow));
                }
            }
        }
    }
    let interval = end.saturating_sub(measure_from) as f64;
    Report {
        utilization: sent_measured as f64 / (interval * bytes_per_ps),
        mean_queue: queue_area / interval,
        max_queue,
        delivered: senders.iter().map(|s| s.delivered).collect(),
        trims,
        trims_measured,
        windows: senders.iter().map(|s| s.cc.window()).collect(),
        counters: senders.iter().map(|s| s.cc.counters()).collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cc::{FixedWindow, Nscc, NsccConfig};

    const G800: u64 = 800_000_000_000;

    /// A bottleneck of `bottleneck_bps` with a 1-BDP buffer (UET's mid-fabric trim point) and a plain ECN
    /// threshold at 0.8 BDP (the top of UET's marking ramp); senders have 800G NICs; 10 µs base RTT.
    fn scenario(bottleneck_bps: u64) -> Scenario {
        let bdp = bottleneck_bps / 8 / 100_000; // bytes in 10 µs
        Scenario {
            mtu: 4096,
            base_rtt: Duration::from_micros(10),
            bottleneck_bps,
            nic_bps: G800,
            ecn_min: bdp * 4 / 5,
            ecn_max: bdp * 4 / 5,
            buffer_bytes: bdp,
            last_hop: false,
            duration: Duration::from_millis(6),
            measure_from: Duration::from_millis(3),
        }
    }

    /// UET's marking ramp: probability rising from 0.2 to 0.8 BDP of backlog.
    fn ramp(mut sc: Scenario) -> Scenario {
        let bdp = sc.buffer_bytes;
        sc.ecn_min = bdp / 5;
        sc.ecn_max = bdp * 4 / 5;
        sc
    }

    /// A last hop: no ECN (MRC turns it off there), trims at 1.5 BDP reported as TRIMMED_LASTHOP.
    fn last_hop(mut sc: Scenario) -> Scenario {
        sc.ecn_min = u64::MAX;
        sc.ecn_max = u64::MAX;
        sc.buffer_bytes = sc.buffer_bytes.saturating_mul(3) / 2;
        sc.last_hop = true;
        sc
    }

    /// Controllers configured for an 800G NIC with the default parameters.
    fn nsccs(n: usize) -> Vec<Box<dyn CongestionControl>> {
        (0..n)
            .map(|_| {
                Box::new(Nscc::new(NsccConfig::default()).unwrap()) as Box<dyn CongestionControl>
            })
            .collect()
    }

    fn staggered(n: usize, gap_us: u64) -> Vec<Duration> {
        (0..n as u64)
            .map(|i| Duration::from_micros(gap_us * i))
            .collect()
    }

    fn show(name: &str, r: &Report) {
        eprintln!(
            "{name}: utilization {:.4}, mean queue {:.0} B, max queue {:.0} B, trims {} ({} measured), fairness {:.3}, windows {:?}",
            r.utilization,
            r.mean_queue,
            r.max_queue,
            r.trims,
            r.trims_measured,
            r.fairness_ratio(),
            r.windows
        );
    }

    #[test]
    fn unloaded_rtt_is_base() {
        // One packet per RTT when the window is one packet.
        let sc = scenario(G800);
        let r = run(
            &sc,
            vec![Box::new(FixedWindow::new(4096).unwrap())],
            &[Duration::ZERO],
        );
        let expect = 3_000_000.0 / 10_000.0 * 4096.0;
        assert!((r.delivered[0] as f64 - expect).abs() <= 4096.0, "{r:?}");
    }

    #[test]
    fn fixed_window_overflows_the_buffer() {
        // The control experiment: without congestion control, 2 × 1.5 BDP into one BDP trims all the time.
        let sc = scenario(G800);
        let fixed = || Box::new(FixedWindow::new(1_500_000).unwrap()) as Box<dyn CongestionControl>;
        let r = run(
            &sc,
            vec![fixed(), fixed()],
            &[Duration::ZERO, Duration::ZERO],
        );
        assert!(r.trims_measured > 1000, "{r:?}");
    }

    #[test]
    fn single_flow_settles_on_a_slower_bottleneck() {
        // The QP is configured for 800G but the path narrows to 400G, so max_cwnd is 3 × the path's BDP.
        let sc = scenario(G800 / 2);
        let r = run(&sc, nsccs(1), &[Duration::ZERO]);
        show("1 flow, 400G bottleneck", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.max_queue <= sc.buffer_bytes as f64, "{r:?}");
        assert_eq!(r.trims_measured, 0, "{r:?}");
        // Steered to about the target (0.75 × base RTT = 375 kB at 400G), not to the buffer.
        assert!(r.mean_queue < 0.9 * sc.buffer_bytes as f64, "{r:?}");
    }

    #[test]
    fn two_flows_share_a_bottleneck() {
        let sc = scenario(G800);
        let r = run(&sc, nsccs(2), &staggered(2, 300));
        show("2 flows, ECN threshold", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.mean_queue < sc.buffer_bytes as f64, "{r:?}");
        assert_eq!(r.trims_measured, 0, "{r:?}");
        assert!(r.fairness_ratio() < 2.0, "{r:?}");
    }

    #[test]
    fn two_flows_share_with_an_ecn_ramp() {
        let sc = ramp(scenario(G800));
        let r = run(&sc, nsccs(2), &staggered(2, 300));
        show("2 flows, ECN ramp", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.fairness_ratio() < 2.0, "{r:?}");
    }

    #[test]
    fn two_flows_share_a_last_hop_without_ecn() {
        let sc = last_hop(scenario(G800));
        let r = run(&sc, nsccs(2), &staggered(2, 300));
        show("2 flows, last hop (trims only)", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.fairness_ratio() < 2.0, "{r:?}");
    }

    #[test]
    fn eight_flows_share() {
        let sc = scenario(G800);
        let r = run(&sc, nsccs(8), &staggered(8, 100));
        show("8 flows, ECN threshold", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.fairness_ratio() < 2.0, "{r:?}");
    }

    #[test]
    fn incast_settles() {
        // 16 senders start together at line rate into one last hop: 24 BDP offered at once.
        let sc = last_hop(scenario(G800));
        let r = run(&sc, nsccs(16), &staggered(16, 0));
        show("16-to-1 incast, last hop", &r);
        assert!(r.utilization > 0.9, "{r:?}");
        assert!(r.counters.iter().all(|c| c.quick_adapts > 0), "{r:?}");
        // After the first round trips, trims are a small fraction of what is delivered.
        let delivered: u64 = r.delivered.iter().sum();
        assert!(r.trims_measured * 4096 * 10 < delivered, "{r:?}");
    }
}
