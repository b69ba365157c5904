//! The packet size a node's links carry: every front end asks here instead of guessing per transport.
//!
//! A plane's link MTU is read from the kernel: in uSID mode the MTU of the route to the plane's T0 (the host's
//! own address sits on `lo`, the traffic leaves through the plane's link), in plain mode the MTU of the
//! interface that holds the plane's address (`::1` → `lo`, 65536). The payload is the smallest of them less
//! the IPv6 and UDP headers and room for MRC's own, capped where one UDP datagram ends.

use std::net::{Ipv6Addr, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

use mrc::wire::UsidContainer;

use crate::config::NodeConfig;

/// IPv6 (40) and UDP (8) headers, and up to 64 bytes of MRC headers (BTH, RETH/immediate, ICRC).
pub const PACKET_OVERHEAD: u32 = 40 + 8 + 64;
/// Largest payload per packet: one UDP datagram holds at most 65,527 bytes; 60,000 leaves room for headers
/// and matches what the loopback figures of every tool were taken with.
pub const MAX_PAYLOAD: u32 = 60_000;
/// Smallest payload per packet the engine is given.
pub const MIN_PAYLOAD: u32 = 256;
/// A link whose MTU cannot be read is taken to be Ethernet's default.
pub const FALLBACK_LINK_MTU: u32 = 1500;

/// Payload bytes per packet that fit every plane of `node` (see the module's description).
pub fn payload_mtu(node: &NodeConfig) -> u32 {
    let link = (0..node.planes.len())
        .map(|p| plane_link_mtu(node, p).unwrap_or(FALLBACK_LINK_MTU))
        .min()
        .unwrap_or(FALLBACK_LINK_MTU);
    payload_for_link(link)
}

/// The payload a link of `mtu` bytes carries.
pub fn payload_for_link(mtu: u32) -> u32 {
    mtu.saturating_sub(PACKET_OVERHEAD)
        .clamp(MIN_PAYLOAD, MAX_PAYLOAD)
}

/// The MTU of the link plane `p`'s packets leave through, when the kernel says.
fn plane_link_mtu(node: &NodeConfig, p: usize) -> Option<u32> {
    let plane = node.planes.get(p)?;
    match node.usid_block {
        Some(block) => {
            let t0 = UsidContainer::new(block, &[plane.t0]).ok()?.to_ipv6();
            route_mtu(*plane.addr.ip(), t0)
        }
        None => interface_of(plane.addr.ip()).and_then(|dev| interface_mtu(&dev)),
    }
}

/// The MTU of the route from `src` to `dest`: a UDP socket connected there (no packet leaves) asks the kernel.
fn route_mtu(src: Ipv6Addr, dest: Ipv6Addr) -> Option<u32> {
    let s = UdpSocket::bind(SocketAddrV6::new(src, 0, 0, 0))
        .or_else(|_| UdpSocket::bind(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 0, 0, 0)))
        .ok()?;
    s.connect(SocketAddrV6::new(dest, 9, 0, 0)).ok()?;
    let mut mtu: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    #[allow(unsafe_code, reason = "getsockopt has no safe wrapper in std")]
    // SAFETY: `mtu` and `len` outlive the call and `len` is `mtu`'s size; the descriptor is open.
    let r = unsafe {
        libc::getsockopt(
            s.as_raw_fd(),
            libc::IPPROTO_IPV6,
            libc::IPV6_MTU,
            (&mut mtu as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0 && mtu > 0).then_some(mtu as u32)
}

/// The interface that holds `addr`, from the kernel's list of IPv6 addresses (`/proc/net/if_inet6`: the
/// address in 32 hex digits first, the interface's name last).
fn interface_of(addr: &Ipv6Addr) -> Option<String> {
    let want: String = addr.octets().iter().map(|b| format!("{b:02x}")).collect();
    let list = std::fs::read_to_string("/proc/net/if_inet6").ok()?;
    list.lines().find_map(|l| {
        let mut f = l.split_whitespace();
        let (a, dev) = (f.next()?, f.last()?);
        (a == want).then(|| dev.to_string())
    })
}

fn interface_mtu(dev: &str) -> Option<u32> {
    if dev.contains('/') || dev.starts_with('.') {
        return None;
    }
    std::fs::read_to_string(format!("/sys/class/net/{dev}/mtu"))
        .ok()?
        .trim()
        .parse()
        .ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_carries_the_largest_payload() {
        // `lo` has a 65536-byte MTU on Linux: the cap applies.
        assert_eq!(payload_mtu(&NodeConfig::loopback(4)), MAX_PAYLOAD);
    }

    #[test]
    fn an_unknown_address_falls_back_to_ethernet() {
        let mut n = NodeConfig::loopback(1);
        n.planes[0].addr = "[2001:db8::77]:0".parse().unwrap();
        assert_eq!(payload_mtu(&n), FALLBACK_LINK_MTU - PACKET_OVERHEAD);
    }

    #[test]
    fn headers_come_off_the_link_mtu() {
        assert_eq!(payload_for_link(9000), 9000 - 112);
        assert_eq!(payload_for_link(65536), MAX_PAYLOAD);
        assert_eq!(payload_for_link(100), MIN_PAYLOAD);
    }
}
