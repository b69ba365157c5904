//! Configuration of endpoints and QPs, validated up front so a mistake names the field and the fix.

use crate::cc::CcConfig;
pub use crate::error::ConfigError;
use crate::path::EvConfig;
use crate::time::Duration;

/// Capabilities beyond MRC 1.0 that a side supports (spec WIRE-OP-2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Caps {
    /// SEND/RECV (project extension).
    pub send: bool,
    /// RDMA READ (project extension).
    pub read: bool,
}

impl Caps {
    /// Both extensions.
    pub const ALL: Self = Self {
        send: true,
        read: true,
    };
    /// MRC 1.0 only: WRITE and WRITE_WITH_IMM.
    pub const MRC_1_0: Self = Self {
        send: false,
        read: false,
    };

    /// As a bit mask for connection blobs: bit 0 SEND, bit 1 READ.
    pub const fn bits(self) -> u32 {
        (self.send as u32) | (self.read as u32) << 1
    }
    /// From [`bits`](Self::bits); unknown bits are ignored.
    pub const fn from_bits(b: u32) -> Self {
        Self {
            send: b & 1 != 0,
            read: b & 2 != 0,
        }
    }
    /// What both sides support.
    pub const fn intersect(self, other: Self) -> Self {
        Self {
            send: self.send && other.send,
            read: self.read && other.read,
        }
    }
}

/// Configuration of one endpoint (one NIC with one port per plane).
#[derive(Debug, Clone, PartialEq)]
pub struct EndpointConfig {
    /// Number of ports, one per plane (1..=32).
    pub ports: u8,
    /// Extensions this endpoint accepts and offers.
    pub caps: Caps,
    /// How often a PORT_STATUS is repeated to peers while any local port is down.
    pub port_status_interval: Duration,
    /// Most undelivered asynchronous events kept before the oldest are dropped (and counted).
    pub max_events: usize,
    /// Scrambles the QP numbers this endpoint hands out, so that an off-path attacker cannot guess them (spec
    /// SEC-QPN-1). The engine draws no randomness itself: drivers supply a random value (the UDP datapath draws
    /// one from the OS when this is 0; simulations derive one from their seed). 0 keeps the plain numbering
    /// 16, 17, 18, ...
    pub qpn_seed: u64,
}

impl Default for EndpointConfig {
    fn default() -> Self {
        Self {
            ports: 8,
            caps: Caps::ALL,
            port_status_interval: Duration::from_millis(100),
            max_events: 4096,
            qpn_seed: 0,
        }
    }
}

impl EndpointConfig {
    /// Checks every field.
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(1..=32).contains(&self.ports) {
            return Err(ConfigError::new(
                "endpoint.ports",
                format!("{} ports; use 1..=32 (one per plane)", self.ports),
            ));
        }
        if self.port_status_interval.is_zero() {
            return Err(ConfigError::new(
                "endpoint.port_status_interval",
                "must be positive; the default is 100 ms",
            ));
        }
        Ok(())
    }
}

/// Per-QP transport parameters. Connection-specific values (peer, PSNs) come with the state transitions.
#[derive(Debug, Clone, PartialEq)]
pub struct QpConfig {
    /// Payload bytes per packet (the path MTU minus headers), 64..=65000.
    pub mtu: u32,
    /// Unloaded round-trip time; floors the RTO and sizes the reorder window before samples arrive.
    pub base_rtt: Duration,
    /// Entropy values and path health.
    pub ev: EvConfig,
    /// Congestion control.
    pub cc: CcConfig,
    /// Receive window in units of 128 PSNs (1..=255), advertised in every SACK.
    pub mpr: u8,
    /// Most WRITE_WITH_IMM this QP may have outstanding (sent, not yet completed at the peer).
    pub max_wimm: u16,
    /// Most WRITE_WITH_IMM this QP accepts that have not yet completed here.
    pub max_wimm_dest: u16,
    /// Most READ requests this QP serves at once.
    pub max_read_dest: u16,
    /// QP local-ACK timeout exponent: the timeout is 1.024 µs × 2^timeout; 0 disables it (wait forever).
    pub timeout: u8,
    /// Retries at the plain timeout before backing off.
    pub retry_linear: u8,
    /// Retries with exponential backoff after the linear ones; 25 or more means unlimited (MRC's convention).
    pub retry_exp: u8,
    /// Lowest per-packet RTO; `None` means 4 × `base_rtt`.
    pub rto_min: Option<Duration>,
    /// Smallest reorder window for time-based loss detection; `None` means `base_rtt` / 2.
    pub reorder_min: Option<Duration>,
    /// The receiver SACKs at least every this many data packets...
    pub sack_every_packets: u16,
    /// ...or this many payload bytes...
    pub sack_every_bytes: u32,
    /// ...or this long after an unacknowledged packet arrived.
    pub sack_delay: Duration,
    /// How long the SACK owed to a lone packet's A flag may wait for this QP's next send, which then carries
    /// it out in the same batch (a request/response peer answers at once); zero (the default) SACKs at once, as
    /// REL-SACK-1 says. A second arrival, a hole, RTX or CE still SACK at once (spec REL-SACK-4).
    pub sack_hold: Duration,
    /// Wait before retrying a packet the peer answered with NACK NO_RESOURCE or PSN_OOR_WINDOW.
    pub rnr_delay: Duration,
    /// Partition key carried in the BTH and checked on receipt.
    pub pkey: u16,
    /// Whether to compute and check the ICRC (turn off only in simulations that carry no payload bytes).
    pub icrc: bool,
    /// New packets sent on one EV before the next is picked (1..=64): 1 sprays packet by packet (MRC's way); a
    /// software host that sends segmented trains of a few packets to one path sets a few (spec PATH-EV-6).
    pub ev_burst: u8,
}

impl Default for QpConfig {
    fn default() -> Self {
        Self {
            mtu: 4096,
            base_rtt: Duration::from_micros(10),
            ev: EvConfig::default(),
            cc: CcConfig::default(),
            mpr: 8,
            max_wimm: 128,
            max_wimm_dest: 128,
            max_read_dest: 16,
            timeout: 14,
            retry_linear: 7,
            retry_exp: 3,
            rto_min: None,
            reorder_min: None,
            sack_every_packets: 4,
            sack_every_bytes: 16 * 1024,
            sack_delay: Duration::from_micros(2),
            sack_hold: Duration::ZERO,
            rnr_delay: Duration::from_micros(50),
            pkey: crate::wire::DEFAULT_PKEY,
            icrc: true,
            ev_burst: 1,
        }
    }
}

impl QpConfig {
    /// Checks every field (and those of the EV and CC configurations).
    pub fn validate(&self) -> Result<(), ConfigError> {
        if !(64..=65000).contains(&self.mtu) {
            return Err(ConfigError::new(
                "qp.mtu",
                format!(
                    "{} payload bytes; use 64..=65000 (e.g. 4096 for a 4 KiB path MTU)",
                    self.mtu
                ),
            ));
        }
        if !(1..=64).contains(&self.ev_burst) {
            return Err(ConfigError::new(
                "qp.ev_burst",
                format!(
                    "{} packets per EV; use 1..=64 (1 sprays every packet on its own EV)",
                    self.ev_burst
                ),
            ));
        }
        if self.base_rtt.is_zero() {
            return Err(ConfigError::new(
                "qp.base_rtt",
                "must be positive: the unloaded round-trip time, e.g. 10 µs",
            ));
        }
        if self.mpr == 0 {
            return Err(ConfigError::new(
                "qp.mpr",
                "must be 1..=255 (units of 128 PSNs); 8 is typical",
            ));
        }
        if self.max_wimm == 0 || self.max_wimm_dest == 0 {
            return Err(ConfigError::new(
                "qp.max_wimm",
                "max_wimm and max_wimm_dest must be at least 1; 128 is typical",
            ));
        }
        if self.max_read_dest == 0 {
            return Err(ConfigError::new(
                "qp.max_read_dest",
                "must be at least 1; 16 is typical",
            ));
        }
        if self.timeout > 31 {
            return Err(ConfigError::new(
                "qp.timeout",
                format!(
                    "{} is too large; use 0 (no timeout) or 1..=31 (1.024 µs × 2^t)",
                    self.timeout
                ),
            ));
        }
        if self.sack_every_packets == 0 || self.sack_every_bytes == 0 {
            return Err(ConfigError::new(
                "qp.sack_every_packets",
                "sack_every_packets and sack_every_bytes must be at least 1",
            ));
        }
        if self.sack_delay.is_zero() {
            return Err(ConfigError::new(
                "qp.sack_delay",
                "must be positive, e.g. 2 µs",
            ));
        }
        self.ev.validate()?;
        self.cc.validate()
    }

    /// The per-packet RTO floor.
    pub fn rto_min(&self) -> Duration {
        self.rto_min.unwrap_or(self.base_rtt * 4)
    }

    /// The smallest reorder window.
    pub fn reorder_min(&self) -> Duration {
        self.reorder_min.unwrap_or(self.base_rtt / 4)
    }

    /// The QP local-ACK timeout, or `None` when disabled.
    // spec: REL-QPTO-1
    pub fn qp_timeout(&self) -> Option<Duration> {
        (self.timeout != 0).then(|| Duration::from_nanos(1024u64 << self.timeout))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_the_field() {
        let mut c = QpConfig {
            mtu: 10,
            ..QpConfig::default()
        };
        assert_eq!(c.validate().unwrap_err().field, "qp.mtu");
        c.mtu = 4096;
        c.mpr = 0;
        assert_eq!(c.validate().unwrap_err().field, "qp.mpr");
        c.mpr = 8;
        c.timeout = 40;
        let e = c.validate().unwrap_err();
        assert_eq!(e.field, "qp.timeout");
        assert!(e.to_string().starts_with("qp.timeout: "));
        c.timeout = 20;
        assert!(c.validate().is_ok());
        assert_eq!(c.qp_timeout(), Some(Duration::from_nanos(1_073_741_824)));
        let e = EndpointConfig {
            ports: 0,
            ..Default::default()
        };
        assert_eq!(e.validate().unwrap_err().field, "endpoint.ports");
    }
}
