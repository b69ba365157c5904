//! The metrics a report computes and a scenario's `[[validate]]` thresholds may name, with what each needs
//! to exist. Both the scenario checks and the report read this list, so neither imports the other.

/// What a metric needs besides the run itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Needs {
    /// Nothing: every run has it.
    Run,
    /// At least one failure.
    Failures,
    /// The healthy baseline run (`run.baseline = true`) and at least one failure to compare against.
    Baseline,
    /// A failed NIC port (`nic_port_down`, or a host link selected by `host`) and the baseline run.
    NicFailure,
    /// An incast victim flow (`workload.victim`) and its run alone (`run.baseline = true`).
    Victim,
    /// A run without failures: the scenario has none, or `run.baseline = true` runs it without them.
    Healthy,
}

/// One metric.
#[derive(Debug, Clone, Copy)]
pub struct Metric {
    /// Name used in reports and thresholds.
    pub name: &'static str,
    /// What it means.
    pub about: &'static str,
    /// What it needs.
    pub needs: Needs,
}

const fn m(name: &'static str, about: &'static str, needs: Needs) -> Metric {
    Metric { name, about, needs }
}

/// Every metric, in report order.
pub const METRICS: &[Metric] = &[
    m(
        "jct_us",
        "time from the first transfer start to the last completion, µs",
        Needs::Run,
    ),
    m(
        "jct_slowdown",
        "jct / jct of the same scenario without failures − 1",
        Needs::Baseline,
    ),
    m(
        "fct_p50_us",
        "median transfer completion time, µs",
        Needs::Run,
    ),
    m(
        "fct_p99_us",
        "99th percentile transfer completion time, µs",
        Needs::Run,
    ),
    m(
        "fct_max_us",
        "longest transfer completion time, µs",
        Needs::Run,
    ),
    m(
        "fct_p50_slowdown",
        "median FCT / median FCT of the same scenario without failures − 1",
        Needs::Baseline,
    ),
    m(
        "fct_p99_slowdown",
        "99th percentile FCT / that of the same scenario without failures − 1",
        Needs::Baseline,
    ),
    m(
        "fct_max_slowdown",
        "longest FCT / longest FCT of the same scenario without failures − 1",
        Needs::Baseline,
    ),
    m(
        "fct_max_over_p50",
        "longest FCT / median FCT − 1: how much the last transfer trails the typical one",
        Needs::Run,
    ),
    m(
        "fct_p50_over_ideal",
        "median FCT / median ideal FCT − 1 (ideal: fair share of the tightest bottleneck + one base RTT; \
         only when no transfer waits for a trigger)",
        Needs::Run,
    ),
    m(
        "fct_p99_over_ideal",
        "99th percentile FCT / that of the ideal − 1",
        Needs::Run,
    ),
    m(
        "fct_max_over_ideal",
        "longest FCT / longest ideal FCT − 1",
        Needs::Run,
    ),
    m(
        "spurious_retransmit_fraction",
        "data packets a receiver got twice (retransmissions of packets never lost) / data packets sent",
        Needs::Run,
    ),
    m(
        "needless_send_fraction",
        "data packets that reached their receiver and were not placed (got twice, or thrown away behind a hole \
         by a go-back-N receiver) / data packets sent: what recovery sent beyond what the network lost",
        Needs::Run,
    ),
    m(
        "goodput_gbps",
        "payload bytes placed / jct, Gbit/s, summed over all hosts",
        Needs::Run,
    ),
    m(
        "affected_throughput_fraction",
        "transfers of hosts with a failed NIC port, running when it failed: baseline time / time",
        Needs::NicFailure,
    ),
    m(
        "late_goodput_fraction",
        "goodput from settle_us after the first failure to 90% of the shorter job, over the baseline's",
        Needs::Baseline,
    ),
    m(
        "stalled_plane_bins",
        "time bins inside a failure window, while payload is still being placed, in which a plane no failure \
         touches placed nothing (must be 0: one plane's failure must not stall the others)",
        Needs::Failures,
    ),
    m(
        "waste_fraction",
        "1 − payload placed / payload sent (retransmissions and discards)",
        Needs::Run,
    ),
    m(
        "retransmit_fraction",
        "retransmitted data packets / data packets sent",
        Needs::Run,
    ),
    m(
        "victim_slowdown",
        "victim completion time / its time alone − 1",
        Needs::Victim,
    ),
    m(
        "lasting_data_drops",
        "data packets lost at failed parts later than settle_us after the last failure",
        Needs::Run,
    ),
    m("ev_retirements", "EVs retired (ASSUMED_BAD)", Needs::Run),
    m(
        "healthy_retirements",
        "EVs and planes retired in the run without failures (the run itself when the scenario has none, else \
         the baseline); every report checks it is 0: a healthy fabric retires no path",
        Needs::Healthy,
    ),
    m(
        "losses_by_time_fraction",
        "data packets found lost by time (each path's round trip, REL-LOSS-1, or presumed lost with a path \
         that lost twice) over all found lost by time or RTO; absent when there were none",
        Needs::Run,
    ),
    m("ev_recoveries", "EVs restored by probes", Needs::Run),
    m("trimmed_pkts", "packets trimmed by switches", Needs::Run),
    m(
        "overflow_drops",
        "packets dropped because a queue had no room, not even for a trimmed header",
        Needs::Run,
    ),
    m(
        "losses_by_rto",
        "data packets found lost only by the retransmission timeout",
        Needs::Run,
    ),
    m(
        "unfinished_transfers",
        "transfers not complete at the time limit",
        Needs::Run,
    ),
    m(
        "failed_transfers",
        "transfers completed with an error",
        Needs::Run,
    ),
    m("qp_errors", "QPs that went to the error state", Needs::Run),
    m(
        "placement_errors",
        "payload written elsewhere than it was read from (must be 0)",
        Needs::Run,
    ),
    m(
        "failed_link_crossings",
        "packets that crossed a link after it failed (must be 0)",
        Needs::Run,
    ),
    m(
        "conservation_error",
        "|sent − delivered − dropped − trimmed − in flight| in bytes plus packets (must be 0)",
        Needs::Run,
    ),
];

/// The metric called `name`.
pub fn find(name: &str) -> Option<&'static Metric> {
    METRICS.iter().find(|m| m.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique() {
        for (i, a) in METRICS.iter().enumerate() {
            assert!(
                METRICS[i + 1..].iter().all(|b| b.name != a.name),
                "{} twice",
                a.name
            );
        }
        assert_eq!(find("jct_us").map(|m| m.needs), Some(Needs::Run));
        assert!(find("nope").is_none());
    }
}
