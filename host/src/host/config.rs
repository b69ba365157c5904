//! How a host is set up: the progress mode, the QP profile, timeouts and retries, the environment.

use std::time::Duration as StdDuration;

use crate::config::NodeConfig;
use crate::error::HostError;

/// How the progress loop runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ProgressMode {
    /// A progress thread that spins briefly when idle, then sleeps in `ppoll` on the sockets, the next timer
    /// and a doorbell that posting rings.
    #[default]
    Thread,
    /// A progress thread that never sleeps: lowest latency, one core.
    BusyPoll,
    /// No thread: the caller runs rounds with [`Host::progress`](crate::Host::progress) (a single-threaded
    /// application or a test).
    Manual,
}

/// The software QP and congestion-control profile every QP of a host gets (defaults = mrc-perf's).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct QpProfile {
    /// Payload bytes per packet; 0 (the default): the largest the planes carry
    /// ([`PlaneIo::payload_mtu`](crate::PlaneIo::payload_mtu); over UDP
    /// [`pmtu::payload_mtu`](crate::pmtu::payload_mtu): 60000 on loopback, the link MTU less headers on a fabric).
    pub mtu: u32,
    /// Active EVs (paths) per plane.
    pub evs_per_plane: u16,
    /// Packets in flight per QP (a fixed window; see [`software_cc`](crate::software_cc)).
    pub window_packets: u32,
    /// NSCC sized for this rate instead of the fixed window.
    pub rate_bps: Option<u64>,
    /// MRC's ICRC on (off only where the UDP checksum protects the path).
    pub icrc: bool,
    /// QP local-ACK timeout, the engine's exponent: a QP that makes no progress for 1.024 µs × 2^`ack_timeout`
    /// retries; 0 waits forever (`QpConfig::timeout`, spec REL-QPTO-1). Default 14 (16.8 ms). Verbs counts
    /// 4.096 µs units: see [`QpRetry::from_verbs`].
    pub ack_timeout: u8,
    /// Retries at that timeout (`QpConfig::retry_linear`). Default 7.
    pub retry_cnt: u8,
    /// Retries after those at 2×, 4×, … the timeout (`QpConfig::retry_exp`); 25 or more: never give up. When
    /// the last one expires the oldest request completes with `RetryExcErr` and the QP enters ERROR. Default 3.
    pub retry_backoff: u8,
    /// New packets per EV before the next (`QpConfig::ev_burst`, spec PATH-EV-6); 0 (the default): enough for
    /// one segmented train when the planes take trains ([`crate::offload`]), else 1.
    pub ev_burst: u8,
    /// How long a QP may hold the SACK owed to a lone message for its own next send, which carries it out
    /// (`QpConfig::sack_hold`, spec REL-SACK-5); zero (the default): SACK at once.
    pub sack_hold: StdDuration,
}

impl Default for QpProfile {
    fn default() -> Self {
        Self {
            mtu: 0,
            evs_per_plane: 4,
            window_packets: 64,
            rate_bps: None,
            icrc: true,
            ack_timeout: 14,
            retry_cnt: 7,
            retry_backoff: 3,
            ev_burst: 0,
            sack_hold: StdDuration::ZERO,
        }
    }
}

impl QpProfile {
    /// The profile's timeout and retry settings.
    pub fn retry(&self) -> QpRetry {
        QpRetry {
            ack_timeout: self.ack_timeout,
            retry_cnt: self.retry_cnt,
            retry_backoff: self.retry_backoff,
        }
    }
}

/// A QP's local-ACK timeout and retry counts (the engine's units; the fields of [`QpProfile`] of the same names). Set
/// per QP with [`Qp::set_retry`](crate::Qp::set_retry) or verbs' RTS
/// ([`QpTransition::Rts`](crate::QpTransition::Rts)).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpRetry {
    /// 1.024 µs × 2^`ack_timeout` without progress before a retry (0..=31; 0: wait forever).
    pub ack_timeout: u8,
    /// Retries at that timeout.
    pub retry_cnt: u8,
    /// Further retries at 2×, 4×, … the timeout (25 or more: unlimited).
    pub retry_backoff: u8,
}

impl QpRetry {
    /// Verbs' RTS values: `timeout` counts 4.096 µs × 2^timeout (0: infinite), so the engine's exponent is two
    /// more (capped at 31, 37 minutes: verbs 30 and 31 ask for longer than anyone waits); `retry_cnt` retries, all at
    /// that timeout (verbs has no back-off).
    pub fn from_verbs(timeout: u8, retry_cnt: u8) -> Self {
        Self {
            ack_timeout: if timeout == 0 {
                0
            } else {
                timeout.saturating_add(2).min(31)
            },
            retry_cnt,
            retry_backoff: 0,
        }
    }

    /// The verbs `timeout` these settings come from (the inverse of [`from_verbs`](Self::from_verbs)).
    pub fn verbs_timeout(&self) -> u8 {
        self.ack_timeout
            .saturating_sub(2)
            .max(u8::from(self.ack_timeout != 0))
    }

    /// How long a QP whose peer went silent keeps retrying, from its last progress to the error completion:
    /// `retry_cnt + 1` timeouts, then `2 + 4 + … + 2^retry_backoff` more. `None` when it never gives up.
    pub fn give_up_after(&self) -> Option<StdDuration> {
        if self.ack_timeout == 0 || self.retry_backoff >= 25 {
            return None;
        }
        let t = StdDuration::from_nanos(1024u64 << self.ack_timeout.min(31));
        let units = u32::from(self.retry_cnt) + 1 + ((2u32 << self.retry_backoff) - 2);
        Some(t.saturating_mul(units))
    }
}

/// Everything [`Host::start`](crate::Host::start) needs. `#[non_exhaustive]`: start from [`Default`],
/// [`HostConfig::loopback`] or [`HostConfig::from_env`] and set fields.
#[derive(Debug, Clone)]
#[non_exhaustive]
pub struct HostConfig {
    /// Planes, local addresses, UDP port (0 = ephemeral), uSID or plain (the node-file format).
    pub node: NodeConfig,
    /// How progress runs.
    pub progress: ProgressMode,
    /// The QP/CC profile.
    pub profile: QpProfile,
    /// Most QPs at once.
    pub max_qps: u32,
    /// Most registrations at once.
    pub max_mrs: u32,
    /// Socket send and receive buffer size.
    pub socket_buffer: usize,
    /// How long bootstrap (connect, peer resolution) retries before it gives up.
    pub bootstrap_timeout: StdDuration,
    /// Send queue depth of each QP of a [`Link`](crate::Link).
    pub link_send_wr: u32,
    /// Receive queue depth of each QP of a [`Link`](crate::Link).
    pub link_recv_wr: u32,
    /// A pcapng capture of every datagram (off: `None`, unless `MRC_CAPTURE` is set; see
    /// [`CaptureConfig::from_env`](crate::capture::CaptureConfig::from_env)).
    pub capture: Option<crate::capture::CaptureConfig>,
    /// Where to serve the counters over HTTP (`/metrics`, `/counters.json`); off: `None`, unless `MRC_METRICS`
    /// is set (counters.rs).
    pub metrics: Option<std::net::SocketAddr>,
    /// UDP segmentation and receive offload ([`crate::offload`]); `None`: `MRC_OFFLOAD`, else auto (on in plain
    /// mode).
    pub offload: Option<crate::offload::Offload>,
}

impl Default for HostConfig {
    fn default() -> Self {
        Self::loopback(2)
    }
}

impl HostConfig {
    /// `planes` UDP sockets on `::1`, ephemeral ports: no configuration at all.
    pub fn loopback(planes: usize) -> Self {
        Self {
            node: NodeConfig::loopback(planes),
            progress: ProgressMode::Thread,
            profile: QpProfile::default(),
            max_qps: 4096,
            max_mrs: 1 << 16,
            socket_buffer: 8 << 20,
            bootstrap_timeout: StdDuration::from_secs(10),
            link_send_wr: 1024,
            link_recv_wr: 1024,
            capture: None,
            metrics: None,
            offload: None,
        }
    }

    /// From environment variables named `{prefix}CONFIG` (a node file; otherwise `{prefix}PLANES` loopback
    /// planes, default 2), `{prefix}PROGRESS` (`thread`, `busy`, `manual`), `{prefix}MTU`, `{prefix}EVS`,
    /// `{prefix}WINDOW`, `{prefix}RATE_GBPS`, `{prefix}TIMEOUT_MS`.
    pub fn from_env(prefix: &str) -> Result<Self, HostError> {
        let var = |name: &str| std::env::var(format!("{prefix}{name}")).ok();
        let num = |name: &str| -> Result<Option<u64>, HostError> {
            var(name)
                .map(|v| {
                    v.trim().parse::<u64>().map_err(|_| {
                        HostError::Invalid(format!("{prefix}{name}={v}: not a number"))
                    })
                })
                .transpose()
        };
        let mut cfg = match var("CONFIG") {
            Some(path) => Self {
                node: NodeConfig::load(std::path::Path::new(&path))?,
                ..Self::loopback(1)
            },
            None => {
                let planes = num("PLANES")?.unwrap_or(2) as usize;
                if planes == 0 || planes > crate::config::MAX_PLANES {
                    return Err(HostError::Invalid(format!(
                        "{prefix}PLANES={planes}: give 1..=16"
                    )));
                }
                Self::loopback(planes)
            }
        };
        if let Some(p) = var("PROGRESS") {
            cfg.progress = match p.trim() {
                "thread" => ProgressMode::Thread,
                "busy" => ProgressMode::BusyPoll,
                "manual" => ProgressMode::Manual,
                other => {
                    return Err(HostError::Invalid(format!(
                        "{prefix}PROGRESS={other}: give thread, busy or manual"
                    )));
                }
            };
        }
        if let Some(m) = num("MTU")? {
            cfg.profile.mtu = (m as u32).clamp(256, 65_000);
        }
        if let Some(e) = num("EVS")? {
            cfg.profile.evs_per_plane = (e as u16).max(1);
        }
        if let Some(w) = num("WINDOW")? {
            cfg.profile.window_packets = (w as u32).max(1);
        }
        if let Some(r) = num("RATE_GBPS")? {
            cfg.profile.rate_bps = Some(r.saturating_mul(1_000_000_000));
        }
        if let Some(t) = num("TIMEOUT_MS")? {
            cfg.bootstrap_timeout = StdDuration::from_millis(t);
        }
        if let Some(t) = num("ACK_TIMEOUT")? {
            if t > 31 {
                return Err(HostError::Invalid(format!(
                    "{prefix}ACK_TIMEOUT={t}: give 0 (wait forever) or 1..=31 (1.024 µs × 2^t)"
                )));
            }
            cfg.profile.ack_timeout = t as u8;
        }
        if let Some(r) = num("RETRY_CNT")? {
            cfg.profile.retry_cnt = r.min(255) as u8;
        }
        if let Some(r) = num("RETRY_BACKOFF")? {
            cfg.profile.retry_backoff = r.min(255) as u8;
        }
        Ok(cfg)
    }
}
