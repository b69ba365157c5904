//! One in-flight budget shared by a host's fixed-window QPs.
//!
//! A software host's QPs send with a fixed window (`software_cc`): the CPUs, not a switch queue, are the
//! bottleneck. That is right for a few QPs. With many (NCCL opens a comm per channel and direction) their
//! windows together exceed what the peer's sockets queue while its progress thread is busy, and the overflow is
//! dropped by the kernel and sent again: 8 comms each way with 64-packet windows of 60000-byte packets dropped
//! 0.8 % of the datagrams at the receiving sockets and resent 5 % of the packets. So the host gives each QP an
//! equal share of a budget — half of what its planes' receive buffers hold, the same at a peer configured
//! alike — between a floor of four packets and the profile's window.

use crate::host::QpProfile;

/// Packets a QP may always have in flight, however many share the budget.
const FLOOR_PACKETS: u64 = 4;

/// How a host sizes its fixed-window QPs' windows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct WindowShare {
    budget: u64,
    floor: u64,
    ceiling: u64,
}

impl WindowShare {
    /// The share rule for a host with `planes` planes whose smallest receive queue holds `receive_buffer` bytes;
    /// `None` when the profile's QPs size their own windows (NSCC) or the queues are unbounded.
    pub(crate) fn new(p: &QpProfile, planes: usize, receive_buffer: Option<usize>) -> Option<Self> {
        if p.rate_bps.is_some() {
            return None;
        }
        let mtu = u64::from(p.mtu);
        let floor = FLOOR_PACKETS * mtu;
        Some(Self {
            budget: planes as u64 * receive_buffer? as u64 / 2,
            floor,
            ceiling: (mtu * u64::from(p.window_packets.max(1))).max(floor),
        })
    }

    /// Each QP's window when `qps` QPs share the budget.
    pub(crate) fn window(&self, qps: usize) -> u64 {
        (self.budget / qps.max(1) as u64).clamp(self.floor, self.ceiling)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_qps_keep_the_profile_window_many_share_the_budget() {
        let p = QpProfile {
            mtu: 60_000,
            ..QpProfile::default()
        };
        // 4 planes of 8 MB: a 16 MB budget.
        let s = WindowShare::new(&p, 4, Some(8 << 20)).unwrap();
        assert_eq!(s.window(1), 64 * 60_000, "the profile's 64 packets");
        assert_eq!(
            s.window(4),
            64 * 60_000,
            "4 MB each is more than the profile's window"
        );
        assert_eq!(s.window(8), (16 << 20) / 8);
        assert_eq!(s.window(16), (16 << 20) / 16);
        assert_eq!(s.window(10_000), 4 * 60_000, "never under four packets");
    }

    #[test]
    fn nscc_and_unbounded_queues_are_left_alone() {
        let nscc = QpProfile {
            mtu: 9000,
            rate_bps: Some(100_000_000_000),
            ..QpProfile::default()
        };
        assert_eq!(WindowShare::new(&nscc, 4, Some(8 << 20)), None);
        let fixed = QpProfile {
            mtu: 9000,
            ..QpProfile::default()
        };
        assert_eq!(WindowShare::new(&fixed, 4, None), None);
    }
}
