//! Verbs addressing: how a node's plane 0 shows as GID 0, and how a GID (with an optional LID) from a verbs
//! program's exchange leads back to a peer's plane 0, as RoCE finds peers by GID alone.
//!
//! A node on the standard port (4791, every mrc-fabric host) has its plane-0 address as GID 0, as RoCE v2. A
//! loopback node (`::1`, a port of its own per process) has the IPv4-mapped GID `::ffff:127.0.P.P`, the port in
//! its last two bytes, so that two processes on one machine are told apart by GID. Any other node needs the
//! LID (plane 0's UDP port) as well.

use std::net::{Ipv6Addr, SocketAddrV6};

use crate::config::DEFAULT_PORT;
use crate::error::HostError;

use super::qp::PeerAddr;

/// GID 0 of a node whose plane 0 is `plane0`.
pub(super) fn gid_of(plane0: SocketAddrV6) -> Ipv6Addr {
    let ip = *plane0.ip();
    if ip == Ipv6Addr::LOCALHOST && plane0.port() != DEFAULT_PORT {
        let [hi, lo] = plane0.port().to_be_bytes();
        return Ipv6Addr::from([0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 127, 0, hi, lo]);
    }
    ip
}

impl PeerAddr {
    /// The peer a verbs RTR names: GID `dgid` (`ah_attr.grh.dgid`) and LID `dlid` (`ah_attr.dlid`, 0: unset).
    /// An unset GID, or a LID that contradicts the GID, is refused with a message naming the field.
    pub fn from_verbs(dgid: Ipv6Addr, dlid: u16) -> Result<Self, HostError> {
        if dgid.is_unspecified() {
            return Err(HostError::Invalid(
                "ah_attr.grh.dgid is :: (unset): give the peer's GID 0, which finds it (ibv_rc_pingpong: -g 0)"
                    .into(),
            ));
        }
        let o = dgid.octets();
        if o[..12] == [0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff] && o[12..14] == [127, 0] {
            let port = u16::from_be_bytes([o[14], o[15]]);
            if port == 0 {
                return Err(HostError::Invalid(format!(
                    "ah_attr.grh.dgid {dgid} names no loopback node (its last two bytes, the port, are 0)"
                )));
            }
            if dlid != 0 && dlid != port {
                return Err(HostError::Invalid(format!(
                    "ah_attr.dlid {dlid} contradicts ah_attr.grh.dgid {dgid} (a loopback node on port {port}): \
                     give the peer's LID or 0"
                )));
            }
            return Ok(PeerAddr {
                plane0: Ipv6Addr::LOCALHOST,
                port,
            });
        }
        Ok(PeerAddr {
            plane0: dgid,
            port: if dlid == 0 { DEFAULT_PORT } else { dlid },
        })
    }

    /// Plane 0's socket address.
    pub fn socket_addr(&self) -> SocketAddrV6 {
        SocketAddrV6::new(self.plane0, self.port, 0, 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sa(ip: &str, port: u16) -> SocketAddrV6 {
        SocketAddrV6::new(ip.parse().unwrap(), port, 0, 0)
    }

    #[test]
    fn a_gid_finds_its_node_without_a_lid() {
        for node in [
            sa("::1", 40_000),
            sa("::1", 4791),
            sa("fcbb:bb00:e001::", 4791),
        ] {
            let gid = gid_of(node);
            let back = PeerAddr::from_verbs(gid, 0).unwrap();
            assert_eq!(back.socket_addr(), node, "GID {gid}");
            // The LID the port shows (plane 0's port) agrees.
            assert_eq!(
                PeerAddr::from_verbs(gid, node.port())
                    .unwrap()
                    .socket_addr(),
                node
            );
        }
        assert_eq!(gid_of(sa("::1", 0xe400)).to_string(), "::ffff:127.0.228.0");
        assert_eq!(
            gid_of(sa("fcbb:bb00:e001::", 4791)).to_string(),
            "fcbb:bb00:e001::"
        );
    }

    #[test]
    fn an_unset_or_contradicted_address_is_named() {
        let e = PeerAddr::from_verbs(Ipv6Addr::UNSPECIFIED, 4791).unwrap_err();
        assert!(
            e.to_string().contains("ah_attr.grh.dgid is :: (unset)"),
            "{e}"
        );
        let gid = gid_of(sa("::1", 40_000));
        let e = PeerAddr::from_verbs(gid, 40_001).unwrap_err();
        assert!(
            e.to_string().contains("ah_attr.dlid 40001 contradicts"),
            "{e}"
        );
        let e = PeerAddr::from_verbs("::ffff:127.0.0.0".parse().unwrap(), 0).unwrap_err();
        assert!(e.to_string().contains("names no loopback node"), "{e}");
        // Another node on a port of its own needs its LID.
        let p = PeerAddr::from_verbs("fd00::7".parse().unwrap(), 5000).unwrap();
        assert_eq!(p.socket_addr(), sa("fd00::7", 5000));
    }
}
