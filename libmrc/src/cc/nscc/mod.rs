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
mod tests;
