//! The out-of-band connection blob two sides exchange before RTR (spec QP-CONN-1).

use crate::config::Caps;

/// What a peer needs to know to connect to a QP. Exchanged out of band (TCP, a job launcher, NCCL's own
/// bootstrap); versioned so mixed versions fail loudly.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConnInfo {
    /// The QP's number.
    pub qpn: u32,
    /// The first PSN it will send (24 bits).
    pub psn: u32,
    /// Extensions it accepts.
    pub caps: Caps,
    /// Payload bytes per packet it sends.
    pub mtu: u32,
    /// Its receive window in units of 128 PSNs.
    pub mpr: u8,
    /// Its ports that are up (bit p = plane p).
    pub ports: u32,
    /// EV bits holding the plane.
    pub plane_bits: u8,
    /// The endpoint's address as the datapath understands it (an IPv6 address or host uSID); opaque here.
    pub addr: u128,
}

const MAGIC: [u8; 4] = *b"MRC1";
const VERSION: u8 = 1;

impl ConnInfo {
    /// Encoded size.
    pub const LEN: usize = 44;

    /// Encodes as `LEN` bytes.
    // spec: QP-CONN-1
    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0..4].copy_from_slice(&MAGIC);
        b[4] = VERSION;
        b[5] = self.mpr;
        b[6] = self.plane_bits;
        b[8..12].copy_from_slice(&self.qpn.to_be_bytes());
        b[12..16].copy_from_slice(&self.psn.to_be_bytes());
        b[16..20].copy_from_slice(&self.caps.bits().to_be_bytes());
        b[20..24].copy_from_slice(&self.mtu.to_be_bytes());
        b[24..28].copy_from_slice(&self.ports.to_be_bytes());
        b[28..44].copy_from_slice(&self.addr.to_be_bytes());
        b
    }

    /// Decodes; `None` when the bytes are not a version-1 blob.
    pub fn from_bytes(b: &[u8]) -> Option<Self> {
        if b.len() != Self::LEN || b[0..4] != MAGIC || b[4] != VERSION {
            return None;
        }
        let u32_at = |i: usize| u32::from_be_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let mut addr = [0u8; 16];
        addr.copy_from_slice(&b[28..44]);
        Some(Self {
            qpn: u32_at(8) & crate::wire::PSN_MASK,
            psn: u32_at(12) & crate::wire::PSN_MASK,
            caps: Caps::from_bits(u32_at(16)),
            mtu: u32_at(20),
            mpr: b[5],
            ports: u32_at(24),
            plane_bits: b[6],
            addr: u128::from_be_bytes(addr),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_reject() {
        let c = ConnInfo {
            qpn: 0x12_3456,
            psn: 0xAB_CDEF,
            caps: Caps::ALL,
            mtu: 4096,
            mpr: 8,
            ports: 0xFF,
            plane_bits: 3,
            addr: 0xfcbb_bb00_e001_0000_0000_0000_0000_0001,
        };
        let b = c.to_bytes();
        assert_eq!(ConnInfo::from_bytes(&b), Some(c));
        let mut bad = b;
        bad[4] = 2;
        assert_eq!(ConnInfo::from_bytes(&bad), None);
        assert_eq!(ConnInfo::from_bytes(&b[..43]), None);
    }
}
