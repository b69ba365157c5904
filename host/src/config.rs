//! How a node learns its planes and turns an EV into a destination address.
//!
//! A node has one NIC port per plane; each port is a UDP socket bound to that port's own address. In **plain**
//! mode (loopback, or any routed network) a packet for plane `p` goes to the peer's plane-`p` address and the EV
//! only picks the plane. In **uSID** mode the destination is an SRv6 uSID container that names the whole path:
//! `block : my T0 : a T1 : the peer's T0 : the peer's port`, so the EV's path index picks the T1 (the spine the
//! packet crosses). No entropy follows the host uSID: Linux delivers UDP only to a socket bound to the exact
//! destination address, and each plane's socket is bound to its port's address.
//!
//! The file format (TOML; `mrc-fabric up` writes one per host):
//!
//! ```toml
//! [usid]                       # leave out for plain mode
//! block = "fcbb:bb00::/32"     # the uSID block: a /32 prefix
//!
//! [[plane]]                    # one table per plane, in plane order
//! addr = "fcbb:bb00:e000::"    # this port's address (the socket binds to it); in uSID mode block:host-uSID::
//! port = 4791                  # UDP port; 0 or absent picks a free one
//! t0 = "1000"                  # uSID mode: my T0's uSID in this plane (hex)
//! t1 = ["2000", "2001"]        # uSID mode: this plane's T1 uSIDs (hex); path index i crosses t1[i % len]
//! ```

use std::net::{Ipv6Addr, SocketAddrV6};
use std::path::Path;

use serde::Deserialize;

use mrc::config::ConfigError;
use mrc::wire::UsidContainer;

/// UDP port MRC listens on when the file names none (RoCEv2's port, which MRC inherits).
pub const DEFAULT_PORT: u16 = 4791;

/// Planes a node may have: the EV's plane field and the port masks are sized for this.
pub const MAX_PLANES: usize = 16;

/// One plane as seen by this node.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaneAddr {
    /// The port's socket address (port 0: pick a free one).
    pub addr: SocketAddrV6,
    /// uSID mode: the uSID of this node's T0 in this plane.
    pub t0: u16,
    /// uSID mode: the plane's T1 uSIDs.
    pub t1: Vec<u16>,
}

/// What a node must know about a peer's plane to reach it: exchanged out of band (see `mrc-perf`) or written in
/// a peer's node file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerPlane {
    /// The peer port's socket address; in uSID mode `block:host-uSID::`.
    pub addr: SocketAddrV6,
    /// uSID mode: the peer's T0 in this plane.
    pub t0: u16,
}

/// A node's planes and addressing plan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeConfig {
    /// The uSID block (top 32 bits), or `None` for plain mode.
    pub usid_block: Option<u32>,
    /// One entry per plane, in plane order.
    pub planes: Vec<PlaneAddr>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFile {
    usid: Option<RawUsid>,
    #[serde(default)]
    plane: Vec<RawPlane>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawUsid {
    block: String,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPlane {
    addr: String,
    port: Option<u16>,
    t0: Option<String>,
    #[serde(default)]
    t1: Vec<String>,
}

fn parse_usid(field: &'static str, plane: usize, s: &str) -> Result<u16, ConfigError> {
    let v = u16::from_str_radix(s.trim_start_matches("0x"), 16).map_err(|_| {
        ConfigError::new(
            field,
            format!("plane {plane}: {s:?} is not a 16-bit hex uSID (write e.g. \"1000\")"),
        )
    })?;
    if v == 0 {
        return Err(ConfigError::new(
            field,
            format!("plane {plane}: uSID 0 ends a container; use a non-zero uSID"),
        ));
    }
    Ok(v)
}

impl NodeConfig {
    /// Zero configuration: `planes` ports on `::1`, each on a free UDP port.
    pub fn loopback(planes: usize) -> Self {
        Self {
            usid_block: None,
            planes: (0..planes)
                .map(|_| PlaneAddr {
                    addr: SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0),
                    t0: 0,
                    t1: Vec::new(),
                })
                .collect(),
        }
    }

    /// Reads a node file; errors name the field and the fix.
    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let text = std::fs::read_to_string(path).map_err(|e| {
            ConfigError::new("file", format!("cannot read {}: {e}", path.display()))
        })?;
        Self::from_toml(&text)
    }

    /// Parses a node file's text.
    pub fn from_toml(text: &str) -> Result<Self, ConfigError> {
        let raw: RawFile = toml::from_str(text).map_err(|e| {
            ConfigError::new(
                "file",
                format!("{e}; allowed keys: [usid] block, [[plane]] addr, port, t0, t1"),
            )
        })?;
        let usid_block = match &raw.usid {
            None => None,
            Some(u) => Some(parse_block(&u.block)?),
        };
        if raw.plane.is_empty() || raw.plane.len() > MAX_PLANES {
            return Err(ConfigError::new(
                "plane",
                format!(
                    "{} [[plane]] tables; give 1..={MAX_PLANES}, one per NIC port",
                    raw.plane.len()
                ),
            ));
        }
        let mut planes = Vec::with_capacity(raw.plane.len());
        for (i, p) in raw.plane.iter().enumerate() {
            let ip: Ipv6Addr = p.addr.parse().map_err(|_| {
                ConfigError::new(
                    "plane.addr",
                    format!("plane {i}: {:?} is not an IPv6 address", p.addr),
                )
            })?;
            let addr = SocketAddrV6::new(ip, p.port.unwrap_or(DEFAULT_PORT), 0, 0);
            let (t0, t1) = match usid_block {
                None => (0, Vec::new()),
                Some(block) => {
                    if (u128::from(ip) >> 96) as u32 != block {
                        return Err(ConfigError::new(
                            "plane.addr",
                            format!(
                                "plane {i}: {ip} is outside the uSID block; write block:host-uSID::"
                            ),
                        ));
                    }
                    let t0 = p.t0.as_deref().ok_or_else(|| {
                        ConfigError::new(
                            "plane.t0",
                            format!("plane {i}: uSID mode needs this plane's T0 uSID, e.g. t0 = \"1000\""),
                        )
                    })?;
                    let t0 = parse_usid("plane.t0", i, t0)?;
                    if p.t1.is_empty() {
                        return Err(ConfigError::new(
                            "plane.t1",
                            format!(
                                "plane {i}: uSID mode needs at least one T1 uSID, e.g. t1 = [\"2000\"]"
                            ),
                        ));
                    }
                    let t1 =
                        p.t1.iter()
                            .map(|s| parse_usid("plane.t1", i, s))
                            .collect::<Result<Vec<_>, _>>()?;
                    (t0, t1)
                }
            };
            planes.push(PlaneAddr { addr, t0, t1 });
        }
        Ok(Self { usid_block, planes })
    }

    /// Number of planes (NIC ports).
    pub fn plane_count(&self) -> usize {
        self.planes.len()
    }

    /// The host uSID of an address in uSID mode (the first uSID after the block).
    pub fn host_usid(addr: &Ipv6Addr) -> u16 {
        (u128::from(*addr) >> 80) as u16
    }

    /// Where a packet to `peer` on `plane`, path index `path`, goes.
    ///
    /// Plain mode: the peer's port address. uSID mode: `block:myT0:T1[path % n]:peerT0:peerHost`; EVs whose
    /// path indexes agree modulo the number of T1s share a route.
    // spec: WIRE-USID-1
    pub fn destination(&self, plane: usize, peer: &PeerPlane, path: u32) -> SocketAddrV6 {
        let (Some(block), Some(me)) = (self.usid_block, self.planes.get(plane)) else {
            return peer.addr;
        };
        let n = me.t1.len().max(1) as u32;
        let t1 = me.t1.get((path % n) as usize).copied().unwrap_or(0);
        let host = Self::host_usid(peer.addr.ip());
        match UsidContainer::new(block, &[me.t0, t1, peer.t0, host]) {
            Ok(c) => SocketAddrV6::new(c.to_ipv6(), peer.addr.port(), 0, 0),
            // A zero uSID (only from a hand-made PeerPlane): fall back to the plain route.
            Err(_) => peer.addr,
        }
    }
}

fn parse_block(s: &str) -> Result<u32, ConfigError> {
    let err = || {
        ConfigError::new(
            "usid.block",
            format!("{s:?} is not a /32 IPv6 prefix; write e.g. \"fcbb:bb00::/32\""),
        )
    };
    let (addr, len) = s.split_once('/').ok_or_else(err)?;
    if len != "32" {
        return Err(err());
    }
    let ip: Ipv6Addr = addr.parse().map_err(|_| err())?;
    let bits = u128::from(ip);
    if bits & ((1u128 << 96) - 1) != 0 {
        return Err(err());
    }
    Ok((bits >> 96) as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = r#"
[usid]
block = "fcbb:bb00::/32"
[[plane]]
addr = "fcbb:bb00:e000::"
t0 = "1000"
t1 = ["2000", "2001"]
[[plane]]
addr = "fcbb:bb00:e100::"
port = 5000
t0 = "1100"
t1 = ["2100", "2101"]
"#;

    #[test]
    fn usid_destination_names_the_path() {
        let c = NodeConfig::from_toml(FILE).unwrap();
        assert_eq!(c.plane_count(), 2);
        assert_eq!(c.planes[0].addr.port(), DEFAULT_PORT);
        let peer = PeerPlane {
            addr: "[fcbb:bb00:e101::]:5000".parse().unwrap(),
            t0: 0x1101,
        };
        let d = c.destination(1, &peer, 3);
        assert_eq!(
            *d.ip(),
            "fcbb:bb00:1100:2101:1101:e101::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        assert_eq!(d.port(), 5000);
        // Paths 0 and 2 cross the same T1, paths 0 and 1 different ones.
        assert_eq!(c.destination(1, &peer, 0), c.destination(1, &peer, 2));
        assert_ne!(c.destination(1, &peer, 0), c.destination(1, &peer, 1));
    }

    #[test]
    fn plain_mode_ignores_the_path() {
        let c = NodeConfig::loopback(4);
        let peer = PeerPlane {
            addr: "[::1]:7000".parse().unwrap(),
            t0: 0,
        };
        assert_eq!(c.destination(2, &peer, 17), peer.addr);
    }

    #[test]
    fn errors_name_the_field() {
        let e = NodeConfig::from_toml("[[plane]]\naddr = \"nope\"\n").unwrap_err();
        assert_eq!(e.field, "plane.addr");
        let e = NodeConfig::from_toml(&FILE.replace("t0 = \"1000\"", "t0 = \"xyz\"")).unwrap_err();
        assert_eq!(e.field, "plane.t0");
        let e = NodeConfig::from_toml(&FILE.replace("/32", "/48")).unwrap_err();
        assert_eq!(e.field, "usid.block");
        let e = NodeConfig::from_toml("[[plane]]\naddr = \"::1\"\nspeed = 3\n").unwrap_err();
        assert_eq!(e.field, "file");
        assert!(e.problem.contains("allowed keys"), "{}", e.problem);
        let e = NodeConfig::from_toml("").unwrap_err();
        assert_eq!(e.field, "plane");
    }
}
