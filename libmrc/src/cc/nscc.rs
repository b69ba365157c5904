//! An NSCC-like window controller: ECN × queuing delay decision table, quick adapt on trims and losses,
//! and the receiver's window penalty. Normative text: `spec/cc.md`.
//!
//! Everything per ack is a handful of comparisons and floating-point operations on plain fields; nothing
//! allocates, nothing reads a clock, nothing can panic.

use super::{AckSample, CcCounters, ConfigError, CongestionControl};
use crate::time::{self, Duration, Instant};

/// Parameters of [`Nscc`]. Sizes are payload bytes, times are engine time.
///
/// [`NsccConfig::for_path`] derives the BDP-based defaults from MTU, base RTT and link rate; the `Option`
/// fields left `None` are derived when the controller is built.
#[derive(Debug, Clone, PartialEq)]
pub struct NsccConfig {
    /// Payload bytes per full packet; the unit of fair increase and the receiver penalty's floor.
    pub mtu: u64,
    /// Unloaded round-trip time; delay above it is queuing.
    pub base_rtt: Duration,
    /// Bottleneck (NIC) rate of the whole QP in bit/s; with `base_rtt` it sets the BDP.
    pub link_rate_bps: u64,
    /// Queuing delay the controller steers to; UET uses 0.75 × base RTT when the fabric trims.
    pub target_delay: Duration,
    /// Largest window; `None` means 1.5 × BDP (UET's cwnd_max).
    pub max_cwnd: Option<u64>,
    /// Smallest window; `None` means one MTU.
    pub min_cwnd: Option<u64>,
    /// Window at start; `None` means the largest window, since MRC starts at line rate.
    pub init_cwnd: Option<u64>,
    /// Proportional increase gain: the fraction of a BDP the window grows per RTT at zero queuing delay.
    pub eta: f64,
    /// Fair increase: MTUs the window grows per RTT while the delay is above target without ECN.
    pub fi: f64,
    /// Additive creep: MTUs per RTT added on every ack outside a decrease hold, whatever the quadrant, so
    /// that flows parked at the target keep probing and converge to a fair share; 0 gives the bare table.
    pub creep: f64,
    /// Multiplicative decrease gain; 1.0 removes exactly the excess queue in one step (see spec CC-NSCC-6).
    pub gamma: f64,
    /// Cap on one multiplicative decrease, as a fraction of the window (0..=1).
    pub max_md_jump: f64,
    /// Quick adapt on trims and losses; off leaves ECN and delay as the only signals.
    pub qa_enabled: bool,
    /// Decreases and quick adapt happen at most once per period; `None` means `base_rtt`.
    pub adjust_period: Option<Duration>,
}

/// 8 planes × 100 Gbit/s.
const DEFAULT_LINK_RATE_BPS: u64 = 800_000_000_000;
/// A two-tier fabric's unloaded RTT.
const DEFAULT_BASE_RTT: Duration = Duration::from_micros(10);
/// MRC's usual payload per packet.
const DEFAULT_MTU: u64 = 4096;

impl Default for NsccConfig {
    /// [`NsccConfig::for_path`] with a 4096-byte MTU, 10 µs base RTT and 800 Gbit/s (8 planes × 100G):
    /// a BDP of 1 MB and a largest window of 1.5 MB.
    fn default() -> Self {
        Self::for_path(DEFAULT_MTU, DEFAULT_BASE_RTT, DEFAULT_LINK_RATE_BPS)
    }
}

/// 0.75 × `d`, in whole nanoseconds, without any chance of overflow.
fn three_quarters(d: Duration) -> Duration {
    Duration::from_nanos(time::nanos(d) / 4 * 3 + time::nanos(d) % 4 * 3 / 4)
}

impl NsccConfig {
    /// Defaults for a path of this MTU, base RTT and bottleneck rate: target delay 0.75 × base RTT, window
    /// bounds and start derived from the BDP, and the project's gains (see `spec/cc.md` CC-CFG-2).
    // spec: CC-CFG-2
    pub fn for_path(mtu: u64, base_rtt: Duration, link_rate_bps: u64) -> Self {
        Self {
            mtu,
            base_rtt,
            link_rate_bps,
            target_delay: three_quarters(base_rtt),
            max_cwnd: None,
            min_cwnd: None,
            init_cwnd: None,
            eta: 0.05,
            fi: 1.0,
            creep: 2.0,
            gamma: 1.0,
            max_md_jump: 0.5,
            qa_enabled: true,
            adjust_period: None,
        }
    }

    /// Bandwidth-delay product in bytes: `link_rate_bps × base_rtt / 8`, saturating.
    pub fn bdp(&self) -> u64 {
        let bits = u128::from(self.link_rate_bps) * u128::from(time::nanos(self.base_rtt));
        u64::try_from(bits / 8_000_000_000).unwrap_or(u64::MAX)
    }

    /// The smallest window in force: `min_cwnd`, or one MTU.
    pub fn min_cwnd_bytes(&self) -> u64 {
        self.min_cwnd.unwrap_or(self.mtu)
    }

    /// The largest window in force: `max_cwnd`, or 1.5 × BDP but never below the smallest window.
    pub fn max_cwnd_bytes(&self) -> u64 {
        self.max_cwnd.unwrap_or_else(|| {
            let bdp = self.bdp();
            bdp.saturating_add(bdp / 2).max(self.min_cwnd_bytes())
        })
    }

    /// The window at start: `init_cwnd`, or the largest window.
    pub fn init_cwnd_bytes(&self) -> u64 {
        self.init_cwnd.unwrap_or_else(|| self.max_cwnd_bytes())
    }

    /// The adjust period in force: `adjust_period`, or `base_rtt`.
    pub fn adjust_period_resolved(&self) -> Duration {
        self.adjust_period.unwrap_or(self.base_rtt)
    }

    /// Checks every field; the error names the first wrong one and what would be accepted.
    // spec: CC-CFG-3
    pub fn validate(&self) -> Result<(), ConfigError> {
        if self.mtu == 0 {
            return Err(ConfigError::new(
                "qp.cc.mtu",
                "must be greater than zero (payload bytes per packet, e.g. 4096)",
            ));
        }
        if self.base_rtt.is_zero() {
            return Err(ConfigError::new(
                "qp.cc.base_rtt",
                "must be greater than zero (the unloaded round-trip time, e.g. 10 µs)",
            ));
        }
        if self.link_rate_bps == 0 {
            return Err(ConfigError::new(
                "qp.cc.link_rate_bps",
                "must be greater than zero (the QP's bottleneck rate in bit/s, e.g. 800e9)",
            ));
        }
        if self.target_delay.is_zero() {
            return Err(ConfigError::new(
                "qp.cc.target_delay",
                "must be greater than zero (UET uses 0.75 × base_rtt when the fabric trims)",
            ));
        }
        if self.adjust_period.is_some_and(|p| p.is_zero()) {
            return Err(ConfigError::new(
                "qp.cc.adjust_period",
                "must be greater than zero, or unset for base_rtt",
            ));
        }
        if self.min_cwnd == Some(0) {
            return Err(ConfigError::new(
                "qp.cc.min_cwnd",
                "must be at least 1 byte, or unset for one MTU",
            ));
        }
        if self.max_cwnd == Some(0) {
            return Err(ConfigError::new(
                "qp.cc.max_cwnd",
                "must be at least 1 byte, or unset for 1.5 × BDP",
            ));
        }
        let (min, max) = (self.min_cwnd_bytes(), self.max_cwnd_bytes());
        if min > max {
            return Err(if self.min_cwnd.is_some() {
                ConfigError::new(
                    "qp.cc.min_cwnd",
                    format!(
                        "{min} exceeds the largest window {max}; lower min_cwnd or raise max_cwnd"
                    ),
                )
            } else {
                ConfigError::new(
                    "qp.cc.max_cwnd",
                    format!("{max} is below the smallest window (one MTU, {min}); raise max_cwnd"),
                )
            });
        }
        if let Some(init) = self.init_cwnd
            && !(min..=max).contains(&init)
        {
            return Err(ConfigError::new(
                "qp.cc.init_cwnd",
                format!("{init} is outside [{min}, {max}]; pick a value in range or unset it"),
            ));
        }
        for (field, v, what) in [
            ("qp.cc.eta", self.eta, "a finite gain ≥ 0 (default 0.25)"),
            ("qp.cc.fi", self.fi, "a finite MTU count ≥ 0 (default 5)"),
            (
                "qp.cc.creep",
                self.creep,
                "a finite MTU count ≥ 0 (default 1)",
            ),
            ("qp.cc.gamma", self.gamma, "a finite gain ≥ 0 (default 1.0)"),
        ] {
            if !v.is_finite() || v < 0.0 {
                return Err(ConfigError::new(field, format!("is {v}; must be {what}")));
            }
        }
        if !self.max_md_jump.is_finite() || !(0.0..=1.0).contains(&self.max_md_jump) {
            return Err(ConfigError::new(
                "qp.cc.max_md_jump",
                format!(
                    "is {}; must be a fraction in [0, 1] (default 0.5)",
                    self.max_md_jump
                ),
            ));
        }
        Ok(())
    }
}

/// The NSCC-like controller of one QP. Build it with [`Nscc::new`] or [`CcConfig::build`](super::CcConfig::build).
#[derive(Debug, Clone)]
pub struct Nscc {
    cfg: NsccConfig,
    // Derived once; f64 copies keep `on_ack` to plain float arithmetic.
    min: u64,
    max: u64,
    min_f: f64,
    max_f: f64,
    mtu_f: f64,
    base_ns: f64,
    target_ns: f64,
    period_ns: u64,
    /// eta × BDP: bytes per RTT of proportional increase at zero delay.
    pi_per_rtt: f64,
    /// fi × MTU: bytes per RTT of fair increase.
    fi_per_rtt: f64,
    /// creep × MTU: bytes per RTT of additive creep.
    creep_per_rtt: f64,
    /// ln(MTU / max_cwnd), for the geometric receiver penalty.
    pen_ln_ratio: f64,
    /// (base RTT + target delay) / adjust period: turns bytes acked in a period into the window that carries
    /// them at the target delay (spec CC-QA-4).
    qa_scale: f64,

    /// The congestion window, within [min, max].
    cwnd: f64,
    /// Receiver penalty last reported and the cap it implies, within [min, max].
    pen: u8,
    pen_cap: f64,
    /// No multiplicative decrease before this time (ns).
    md_hold_until: u64,
    /// No quick adapt before this time (ns).
    qa_hold_until: u64,
    /// Acked-bytes bookkeeping in consecutive periods, for quick adapt.
    started: bool,
    epoch_start: u64,
    epoch_acked: u64,
    prev_epoch_acked: u64,
    /// Start of the current unbroken run of feedback; quick adapt needs one full period of it.
    measure_since: u64,
    /// `window()` as of the last event: it is read before every transmission, so it is computed once per event.
    win: u64,
    counters: CcCounters,
}

impl Nscc {
    /// Validates `cfg` and builds a controller whose window starts at `init_cwnd`.
    pub fn new(cfg: NsccConfig) -> Result<Self, ConfigError> {
        cfg.validate()?;
        let min = cfg.min_cwnd_bytes();
        let max = cfg.max_cwnd_bytes();
        let (min_f, max_f) = (min as f64, max as f64);
        let mtu_f = cfg.mtu as f64;
        let pen_ln_ratio = (mtu_f.max(1.0) / max_f.max(1.0)).ln();
        let mut n = Self {
            min,
            max,
            min_f,
            max_f,
            mtu_f,
            base_ns: time::nanos(cfg.base_rtt) as f64,
            target_ns: time::nanos(cfg.target_delay) as f64,
            period_ns: time::nanos(cfg.adjust_period_resolved()),
            pi_per_rtt: cfg.eta * cfg.bdp() as f64,
            fi_per_rtt: cfg.fi * mtu_f,
            creep_per_rtt: cfg.creep * mtu_f,
            pen_ln_ratio,
            // In f64: a configuration's durations may sum past u64 (the bounds are checked elsewhere).
            qa_scale: (time::nanos(cfg.base_rtt) as f64 + time::nanos(cfg.target_delay) as f64)
                / (time::nanos(cfg.adjust_period_resolved()) as f64).max(1.0),
            cwnd: (cfg.init_cwnd_bytes() as f64).clamp(min_f, max_f),
            pen: 0,
            pen_cap: max_f,
            md_hold_until: 0,
            qa_hold_until: 0,
            started: false,
            epoch_start: 0,
            epoch_acked: 0,
            prev_epoch_acked: 0,
            measure_since: 0,
            win: 0,
            counters: CcCounters::default(),
            cfg,
        };
        n.refresh();
        Ok(n)
    }

    /// Recomputes the cached window after the window or the penalty cap may have changed.
    fn refresh(&mut self) {
        // Both terms are positive, so adding one half and truncating rounds (without a libm call).
        self.win = ((self.cwnd.min(self.pen_cap) + 0.5) as u64).clamp(self.min, self.max);
    }

    /// The configuration this controller was built from.
    pub fn config(&self) -> &NsccConfig {
        &self.cfg
    }

    /// The congestion window before the receiver penalty's cap, in bytes (for tests and tracing).
    pub fn cwnd(&self) -> u64 {
        (self.cwnd.round() as u64).clamp(self.min, self.max)
    }

    /// The receiver penalty's current cap on the window, in bytes.
    pub fn penalty_cap(&self) -> u64 {
        (self.pen_cap as u64).clamp(self.min, self.max)
    }

    /// Advances the acked-bytes periods to `now`.
    // spec: CC-QA-1
    fn tick(&mut self, now: u64) {
        if !self.started {
            self.started = true;
            self.epoch_start = now;
            self.measure_since = now;
            return;
        }
        let elapsed = now.saturating_sub(self.epoch_start);
        if elapsed < self.period_ns {
            return;
        }
        let periods = elapsed / self.period_ns;
        // The period just ended is the current one only if exactly one has passed; otherwise the last full
        // period saw no feedback at all.
        self.prev_epoch_acked = if periods == 1 { self.epoch_acked } else { 0 };
        self.epoch_acked = 0;
        self.epoch_start = self
            .epoch_start
            .saturating_add(periods.saturating_mul(self.period_ns));
        if periods > 1 {
            // A full period without feedback: the QP was idle, or everything it had in flight vanished into a
            // failure the path layer deals with. Either way the bytes it got acked say nothing about what the
            // network carries now.
            // spec: CC-QA-3
            self.measure_since = now;
        }
    }

    /// Bytes acked over the last period ending at `now`: the current period's bytes plus the share of the
    /// previous period's bytes that still falls inside the window (assumed evenly spread).
    // spec: CC-QA-1
    fn achieved(&self, now: u64) -> f64 {
        let p = self.period_ns as f64;
        let elapsed = now.saturating_sub(self.epoch_start) as f64;
        let left = ((p - elapsed) / p).clamp(0.0, 1.0);
        self.epoch_acked as f64 + self.prev_epoch_acked as f64 * left
    }

    /// Sets the window to what was achieved when it is less than the window.
    // spec: CC-QA-2
    fn quick_adapt(&mut self, now: u64) {
        if !self.cfg.qa_enabled || now < self.qa_hold_until {
            return;
        }
        // spec: CC-QA-3
        if now < self.measure_since.saturating_add(self.period_ns) {
            return;
        }
        // spec: CC-QA-4
        let achieved = self.achieved(now) * self.qa_scale;
        if achieved >= self.cwnd {
            return;
        }
        self.cwnd = achieved.clamp(self.min_f, self.max_f);
        let until = now.saturating_add(self.period_ns);
        self.qa_hold_until = until;
        self.md_hold_until = self.md_hold_until.max(until);
        self.counters.quick_adapts = self.counters.quick_adapts.saturating_add(1);
    }

    /// Grows the window by `inc` bytes, unless the receiver's cap already binds or the sender is not using
    /// its window (application-limited: less than half of it was in flight before this ack).
    // spec: CC-NSCC-5
    fn grow(&mut self, inc: f64, sample: &AckSample) -> bool {
        let limit = self.cwnd.min(self.pen_cap);
        let used = sample.inflight.saturating_add(sample.newly_acked_bytes) as f64;
        if inc <= 0.0 || self.cwnd >= self.pen_cap || used < limit * 0.5 {
            return false;
        }
        self.cwnd = (self.cwnd + inc).min(self.max_f);
        true
    }

    /// Recomputes the penalty cap when the receiver's value changes.
    // spec: CC-PEN-1
    fn set_penalty(&mut self, pen: u8) {
        let p = pen.min(127);
        if p == self.pen {
            return;
        }
        self.pen = p;
        let cap = match p {
            0 => self.max_f,
            127 => self.mtu_f,
            _ => (self.max_f * (self.pen_ln_ratio * f64::from(p) / 127.0).exp()).round(),
        };
        self.pen_cap = cap.clamp(self.min_f, self.max_f);
    }
}

impl Nscc {
    // spec: CC-COST-1
    fn ack(&mut self, now: Instant, sample: &AckSample) {
        let now = now.as_nanos();
        self.tick(now);
        self.epoch_acked = self.epoch_acked.saturating_add(sample.newly_acked_bytes);
        self.set_penalty(sample.rcv_cwnd_pen);
        // spec: CC-NSCC-8
        let Some(rtt) = sample.rtt else { return };
        // spec: CC-NSCC-1
        let delay = (time::nanos(rtt) as f64 - self.base_ns).max(0.0);
        let acked = sample.newly_acked_bytes as f64;
        // Per-ack share of a per-RTT increase: a window's worth of acks arrives per RTT.
        let share = acked / self.cwnd;
        // spec: CC-NSCC-2
        let inc = match (sample.ecn, delay > self.target_ns) {
            (false, false) => {
                // spec: CC-NSCC-3
                let headroom = (self.target_ns - delay) / self.target_ns;
                headroom * self.pi_per_rtt * share
            }
            // spec: CC-NSCC-4
            (false, true) => self.fi_per_rtt * share,
            (true, true) => {
                // spec: CC-NSCC-6
                if now < self.md_hold_until {
                    self.counters.holds = self.counters.holds.saturating_add(1);
                    return;
                }
                let excess = (delay - self.target_ns) / (self.base_ns + delay);
                let frac = (self.cfg.gamma * excess).min(self.cfg.max_md_jump);
                if frac > 0.0 {
                    self.cwnd = (self.cwnd * (1.0 - frac)).clamp(self.min_f, self.max_f);
                    self.md_hold_until = now.saturating_add(self.period_ns);
                    self.counters.decreases = self.counters.decreases.saturating_add(1);
                }
                return;
            }
            (true, false) => {
                // spec: CC-NSCC-7
                self.counters.holds = self.counters.holds.saturating_add(1);
                0.0
            }
        };
        // spec: CC-NSCC-9
        let creep = if now < self.md_hold_until {
            0.0
        } else {
            self.creep_per_rtt * share
        };
        // spec: CC-NSCC-5
        let inc = (inc + creep).min(acked);
        if self.grow(inc, sample) {
            let c = &mut self.counters;
            match (sample.ecn, delay > self.target_ns) {
                (false, false) => {
                    c.proportional_increases = c.proportional_increases.saturating_add(1)
                }
                (false, true) => c.fair_increases = c.fair_increases.saturating_add(1),
                _ => {}
            }
        }
    }

    // spec: CC-TRIM-1
    fn trim(&mut self, now: Instant, last_hop: bool) {
        let now = now.as_nanos();
        self.tick(now);
        self.counters.trims = self.counters.trims.saturating_add(1);
        if last_hop {
            self.counters.last_hop_trims = self.counters.last_hop_trims.saturating_add(1);
        }
        self.quick_adapt(now);
    }

    // spec: CC-LOSS-1
    fn loss(&mut self, now: Instant) {
        let now = now.as_nanos();
        self.tick(now);
        self.counters.losses = self.counters.losses.saturating_add(1);
        self.quick_adapt(now);
    }
}

impl CongestionControl for Nscc {
    // spec: CC-WIN-2
    fn window(&self) -> u64 {
        self.win
    }

    fn on_ack(&mut self, now: Instant, sample: &AckSample) {
        self.ack(now, sample);
        self.refresh();
    }

    fn on_trim(&mut self, now: Instant, _bytes: u64, last_hop: bool) {
        self.trim(now, last_hop);
        self.refresh();
    }

    fn on_loss(&mut self, now: Instant, _bytes: u64) {
        self.loss(now);
        self.refresh();
    }

    fn name(&self) -> &'static str {
        "nscc"
    }

    fn counters(&self) -> CcCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
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
}
