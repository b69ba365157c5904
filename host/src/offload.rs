//! UDP segmentation and receive offload: a train of MRC packets to one path per system call and per trip
//! through the sender's stack, each packet still whole on the wire.
//!
//! Segmentation needs UDP checksums: the kernel refuses `UDP_SEGMENT` on a socket that sends without them. In
//! plain mode (loopback, or a routed network) checksums are valid end to end, so offload is on by default. In
//! SRv6 uSID mode every hop rewrites the destination address, which the checksum's pseudo-header covers, so a
//! real checksum is wrong at the receiver and the host sends none (spec WIRE-ICRC-1); offload there is off
//! unless asked for, and asking is only right on a fabric that does not verify UDP checksums of packets that
//! never left the machine (the kernel fabric of network namespaces: veth passes them on unchecked).

/// Whether a host batches its datagrams into segmented trains.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum Offload {
    /// On where checksums survive the path (plain mode), off in uSID mode.
    #[default]
    Auto,
    /// On, in uSID mode too (see the module's description).
    On,
    /// Off: one datagram per packet, as sent.
    Off,
}

impl Offload {
    /// `MRC_OFFLOAD` (`auto`, `on`, `off`), when set.
    pub fn from_env() -> Result<Option<Self>, String> {
        match std::env::var("MRC_OFFLOAD") {
            Ok(v) => Self::parse(&v).map(Some),
            Err(_) => Ok(None),
        }
    }

    /// Parses `auto`, `on` or `off`; the error names the variable and the choices.
    pub fn parse(v: &str) -> Result<Self, String> {
        match v.trim().to_ascii_lowercase().as_str() {
            "" | "auto" => Ok(Self::Auto),
            "on" | "1" => Ok(Self::On),
            "off" | "0" => Ok(Self::Off),
            other => Err(format!(
                "MRC_OFFLOAD={other}: give auto (on in plain mode), on or off"
            )),
        }
    }

    /// Whether a node in uSID mode (`usid`) batches.
    pub fn enabled(self, usid: bool) -> bool {
        match self {
            Self::Auto => !usid,
            Self::On => true,
            Self::Off => false,
        }
    }
}

/// Packets a QP sends on one EV before it picks the next when its datagrams of `packet` bytes go as trains:
/// a train of up to 64 KiB, at most 8 packets (spraying stays fine-grained: a 1 MiB message still crosses
/// every plane).
pub fn ev_burst(packet: usize) -> u8 {
    (65_000 / packet.max(1)).clamp(1, 8) as u8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn auto_is_on_in_plain_mode_only() {
        assert!(Offload::Auto.enabled(false));
        assert!(!Offload::Auto.enabled(true));
        assert!(Offload::On.enabled(true));
        assert!(!Offload::Off.enabled(false));
        assert_eq!(Offload::parse("ON"), Ok(Offload::On));
        assert!(Offload::parse("maybe").unwrap_err().contains("MRC_OFFLOAD"));
    }

    #[test]
    fn bursts_fill_a_train() {
        assert_eq!(ev_burst(60_112), 1, "loopback packets are a train each");
        assert_eq!(ev_burst(9000), 7);
        assert_eq!(ev_burst(1500), 8);
    }
}
