//! The addressing plan and the `ip` commands that build a fabric: pure functions, no side effects.
//!
//! - Block `fcbb:bb00::/32`, 16-bit uSIDs: T0 `(p, i)` = `0x1000 + p*0x100 + i`, T1 `(p, j)` = `0x2000 + p*0x100 + j`,
//!   host `k` in plane `p` = `0xe000 + p*0x100 + k`.
//! - Host `k` attaches in every plane `p` to T0 `(p, k / H)` through its NIC `p{p}`; every T0 of a plane links to
//!   every T1 of that plane.
//! - Link next hops (ULA, /64 per link): host link `fd0f:<p>:<host uSID>::1` (host) / `::2` (T0); T0–T1 link
//!   `fd0f:<p>:<T0 uSID>:<T1 uSID>::1` (T0) / `::2` (T1).
//! - Interface names: the host's NIC in plane `p` is `p{p}`; on a switch, the device towards a neighbour is named
//!   after that neighbour (`h{k}`, `t0-{i}`, `t1-{j}`); `sid0`/`sid0p` is each switch's private veth that carries the
//!   seg6local (uN) routes (a seg6local route `dev lo` becomes a REJECT route).

use std::fmt;
use std::net::Ipv6Addr;

use serde::{Deserialize, Serialize};

use super::{Error, Result};

/// The uSID block (top 32 bits of every uSID address).
pub const BLOCK: u32 = 0xfcbb_bb00;
/// The block as a prefix string.
pub const BLOCK_PREFIX: &str = "fcbb:bb00::/32";
/// UDP port written in the node files (RoCEv2's).
pub const NODE_PORT: u16 = 4791;
/// The uN behaviour: End with the NEXT-C-SID flavour, 32-bit locator block, 16-bit uSIDs.
const UN: &str = "encap seg6local action End flavors next-csid lblen 32 nflen 16 count dev sid0";

/// Size and shape of a fabric.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Topology {
    /// Planes (one NIC per host per plane), 1..=16.
    pub planes: usize,
    /// T0 (leaf) switches per plane.
    pub t0s: usize,
    /// T1 (spine) switches per plane.
    pub t1s: usize,
    /// Hosts per T0.
    pub hosts_per_t0: usize,
    /// MTU of every link.
    pub mtu: u32,
}

/// Role of a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// Host `k`.
    Host(usize),
    /// T0 `(plane, index)`.
    T0(usize, usize),
    /// T1 `(plane, index)`.
    T1(usize, usize),
}

/// One end of a link, as the CLI names it: `h<k>`, `t0-<i>`, `t1-<j>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Node {
    /// Host `k`.
    Host(usize),
    /// T0 index `i` (of the link's plane).
    T0(usize),
    /// T1 index `j` (of the link's plane).
    T1(usize),
}

impl fmt::Display for Node {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Node::Host(k) => write!(f, "h{k}"),
            Node::T0(i) => write!(f, "t0-{i}"),
            Node::T1(j) => write!(f, "t1-{j}"),
        }
    }
}

impl Node {
    /// Parses `h<k>`, `t0-<i>` or `t1-<j>`.
    pub fn parse(s: &str) -> Result<Self> {
        let bad = || {
            Error::arg(
                "--link",
                format!("{s:?} is not a node; write h<k>, t0-<i> or t1-<j> (e.g. h0, t0-1, t1-0)"),
            )
        };
        let num = |t: &str| t.parse::<usize>().map_err(|_| bad());
        if let Some(t) = s.strip_prefix("t0-") {
            Ok(Node::T0(num(t)?))
        } else if let Some(t) = s.strip_prefix("t1-") {
            Ok(Node::T1(num(t)?))
        } else if let Some(t) = s.strip_prefix('h') {
            Ok(Node::Host(num(t)?))
        } else {
            Err(bad())
        }
    }
}

/// One end of a link in a built fabric: the namespace and the device.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LinkEnd {
    /// Network namespace.
    pub ns: String,
    /// Device inside it.
    pub dev: String,
}

impl fmt::Display for LinkEnd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.ns, self.dev)
    }
}

/// A link of one plane, both ends resolved.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Link {
    /// The plane.
    pub plane: usize,
    /// Its name as the CLI writes it (`h0:t0-0`, `t0-0:t1-1`).
    pub name: String,
    /// The two ends, in the order the user named them.
    pub ends: [LinkEnd; 2],
}

/// The full build: namespaces, root-namespace veth batch, and per-namespace batches in three phases
/// (0: create/address, 1: links up, 2: routes — routes only once their next hop is up).
#[derive(Debug, Clone)]
pub struct Plan {
    /// Namespaces in creation order, with their role.
    pub namespaces: Vec<(String, Role)>,
    /// `ip -batch` lines run in the root namespace (veth pairs created straight into their namespaces).
    pub veths: Vec<String>,
    /// Per namespace (same order as `namespaces`): the three phases.
    pub batches: Vec<[Vec<String>; 3]>,
}

/// A locally administered MAC address, one per veth end: the plan knows both ends of every link.
fn mac(n: u32) -> String {
    let b = n.to_be_bytes();
    format!("02:00:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3])
}

/// A permanent neighbour entry for the far end of a link. A fabric link knows its neighbour for good: with
/// neighbour discovery instead, an entry made or probed during a silent cut (`flap`, `cut`) stays unresolved
/// and retries once a second, so at 10 Hz every retry lands in a cut again and the link stays dead one way for
/// the whole flap, which says nothing of the transport over it.
fn neighbour(addr: &str, mac: &str, dev: &str) -> String {
    format!("neigh replace {addr} lladdr {mac} dev {dev} nud permanent")
}

/// `block:usid::` as an address.
pub fn usid_addr(usid: u16) -> Ipv6Addr {
    Ipv6Addr::from(((BLOCK as u128) << 96) | ((usid as u128) << 80))
}

impl Topology {
    /// Checks the limits of the addressing plan; errors name the argument and the allowed values.
    pub fn validate(&self) -> Result<()> {
        if !(1..=16).contains(&self.planes) {
            return Err(Error::arg(
                "--planes",
                format!("{} is out of range; allowed 1..=16", self.planes),
            ));
        }
        if !(1..=256).contains(&self.t0s) {
            return Err(Error::arg(
                "--t0s",
                format!("{} is out of range; allowed 1..=256", self.t0s),
            ));
        }
        if !(1..=256).contains(&self.t1s) {
            return Err(Error::arg(
                "--t1s",
                format!("{} is out of range; allowed 1..=256", self.t1s),
            ));
        }
        if self.hosts_per_t0 == 0 || self.hosts() > 256 {
            return Err(Error::arg(
                "--hosts-per-t0",
                format!(
                    "{} gives {} hosts; allowed 1.. with t0s * hosts-per-t0 <= 256",
                    self.hosts_per_t0,
                    self.hosts()
                ),
            ));
        }
        if !(1280..=65535).contains(&self.mtu) {
            return Err(Error::arg(
                "--mtu",
                format!("{} is out of range; allowed 1280..=65535", self.mtu),
            ));
        }
        Ok(())
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.t0s * self.hosts_per_t0
    }

    /// uSID of T0 `(p, i)`.
    pub fn t0_usid(p: usize, i: usize) -> u16 {
        (0x1000 + p * 0x100 + i) as u16
    }

    /// uSID of T1 `(p, j)`.
    pub fn t1_usid(p: usize, j: usize) -> u16 {
        (0x2000 + p * 0x100 + j) as u16
    }

    /// uSID of host `k`'s port in plane `p`.
    pub fn host_usid(p: usize, k: usize) -> u16 {
        (0xe000 + p * 0x100 + k) as u16
    }

    /// The T0 index host `k` hangs off (in every plane).
    pub fn t0_of(&self, k: usize) -> usize {
        k / self.hosts_per_t0
    }

    /// Host `k`'s namespace.
    pub fn host_ns(prefix: &str, k: usize) -> String {
        format!("{prefix}-h{k}")
    }

    /// T0 `(p, i)`'s namespace.
    pub fn t0_ns(prefix: &str, p: usize, i: usize) -> String {
        format!("{prefix}-p{p}t0-{i}")
    }

    /// T1 `(p, j)`'s namespace.
    pub fn t1_ns(prefix: &str, p: usize, j: usize) -> String {
        format!("{prefix}-p{p}t1-{j}")
    }

    /// Resolves a link of `plane` named by its two ends.
    pub fn link(&self, prefix: &str, plane: usize, a: Node, b: Node) -> Result<Link> {
        if plane >= self.planes {
            return Err(Error::arg(
                "--plane",
                format!("{plane} does not exist; allowed 0..={}", self.planes - 1),
            ));
        }
        let end = |n: Node, other: Node| -> Result<LinkEnd> {
            Ok(match n {
                Node::Host(k) => LinkEnd {
                    ns: Self::host_ns(prefix, k),
                    dev: format!("p{plane}"),
                },
                Node::T0(i) => LinkEnd {
                    ns: Self::t0_ns(prefix, plane, i),
                    dev: other.to_string(),
                },
                Node::T1(j) => LinkEnd {
                    ns: Self::t1_ns(prefix, plane, j),
                    dev: other.to_string(),
                },
            })
        };
        let valid = match (a, b) {
            (Node::Host(k), Node::T0(i)) | (Node::T0(i), Node::Host(k)) => {
                k < self.hosts() && i < self.t0s && self.t0_of(k) == i
            }
            (Node::T0(i), Node::T1(j)) | (Node::T1(j), Node::T0(i)) => i < self.t0s && j < self.t1s,
            _ => false,
        };
        if !valid {
            return Err(Error::arg(
                "--link",
                format!(
                    "{a}:{b} is not a link of this fabric; links are h<k>:t0-<k/{}> (k < {}) and t0-<i>:t1-<j> \
                     (i < {}, j < {})",
                    self.hosts_per_t0,
                    self.hosts(),
                    self.t0s,
                    self.t1s
                ),
            ));
        }
        Ok(Link {
            plane,
            name: format!("{a}:{b}"),
            ends: [end(a, b)?, end(b, a)?],
        })
    }

    /// Every link of the fabric: per plane, the host links then the T0–T1 links.
    pub fn all_links(&self, prefix: &str) -> Vec<Link> {
        let mut v = Vec::new();
        for p in 0..self.planes {
            for k in 0..self.hosts() {
                v.extend(self.link(prefix, p, Node::Host(k), Node::T0(self.t0_of(k))));
            }
            for i in 0..self.t0s {
                for j in 0..self.t1s {
                    v.extend(self.link(prefix, p, Node::T0(i), Node::T1(j)));
                }
            }
        }
        v
    }

    /// The namespaces, in creation order.
    pub fn namespaces(&self, prefix: &str) -> Vec<(String, Role)> {
        let mut v: Vec<(String, Role)> = (0..self.hosts())
            .map(|k| (Self::host_ns(prefix, k), Role::Host(k)))
            .collect();
        for p in 0..self.planes {
            for i in 0..self.t0s {
                v.push((Self::t0_ns(prefix, p, i), Role::T0(p, i)));
            }
            for j in 0..self.t1s {
                v.push((Self::t1_ns(prefix, p, j), Role::T1(p, j)));
            }
        }
        v
    }

    /// Host `k`'s node file (the format of `mrc_host::NodeConfig`).
    pub fn node_file(&self, k: usize) -> String {
        let mut s = format!(
            "# written by mrc-fabric: host {k}, {} planes\n[usid]\nblock = \"{BLOCK_PREFIX}\"\n",
            self.planes
        );
        for p in 0..self.planes {
            let t1: Vec<String> = (0..self.t1s)
                .map(|j| format!("\"{:x}\"", Self::t1_usid(p, j)))
                .collect();
            s += &format!(
                "\n[[plane]]\naddr = \"{}\"\nport = {NODE_PORT}\nt0 = \"{:x}\"\nt1 = [{}]\n",
                usid_addr(Self::host_usid(p, k)),
                Self::t0_usid(p, self.t0_of(k)),
                t1.join(", ")
            );
        }
        s
    }

    /// The whole build.
    pub fn plan(&self, prefix: &str) -> Plan {
        let namespaces = self.namespaces(prefix);
        let index = |name: &str| namespaces.iter().position(|(n, _)| n == name).unwrap_or(0);
        let mut batches: Vec<[Vec<String>; 3]> = vec![Default::default(); namespaces.len()];
        let mut add = |ns: &str, phase: usize, line: String| batches[index(ns)][phase].push(line);
        let mut veths = Vec::new();
        let mtu = self.mtu;
        let mut macs = 0u32;
        let mut mac_pair = || {
            macs += 1;
            (mac(2 * macs), mac(2 * macs + 1))
        };

        for (ns, role) in &namespaces {
            add(ns, 1, "link set dev lo up".into());
            if !matches!(role, Role::Host(_)) {
                add(ns, 0, "link add name sid0 type veth peer name sid0p".into());
                add(ns, 1, "link set dev sid0 up".into());
                add(ns, 1, "link set dev sid0p up".into());
            }
        }
        for k in 0..self.hosts() {
            let h = Self::host_ns(prefix, k);
            let i = self.t0_of(k);
            for p in 0..self.planes {
                let hu = Self::host_usid(p, k);
                let t0 = Self::t0_ns(prefix, p, i);
                let t0u = Self::t0_usid(p, i);
                let (ha, ta) = (
                    format!("fd0f:{p:x}:{hu:x}::1"),
                    format!("fd0f:{p:x}:{hu:x}::2"),
                );
                let (hm, tm) = mac_pair();
                veths.push(format!(
                    "link add name p{p} netns {h} mtu {mtu} address {hm} type veth peer name h{k} netns {t0} mtu {mtu} address {tm}"
                ));
                add(&h, 1, neighbour(&ta, &tm, &format!("p{p}")));
                add(&t0, 1, neighbour(&ha, &hm, &format!("h{k}")));
                // Host side: my plane-p uSID address, everything after it local, first uSID picks the NIC.
                add(&h, 0, format!("address add {}/128 dev lo", usid_addr(hu)));
                add(&h, 0, format!("address add {ha}/64 dev p{p} nodad"));
                add(&h, 1, format!("link set dev p{p} up"));
                add(
                    &h,
                    2,
                    format!("route add local {}/48 dev lo", usid_addr(hu)),
                );
                add(
                    &h,
                    2,
                    format!("route add {}/48 via {ta} dev p{p}", usid_addr(t0u)),
                );
                add(
                    &h,
                    2,
                    format!("route add fcbb:bb00:e{p:x}00::/40 via {ta} dev p{p}"),
                );
                add(
                    &h,
                    2,
                    format!("route add fd0f:{p:x}::/32 via {ta} dev p{p}"),
                );
                // T0 side: the attached host's uSID (and its plain addresses) via the host link.
                add(&t0, 0, format!("address add {ta}/64 dev h{k} nodad"));
                add(&t0, 1, format!("link set dev h{k} up"));
                add(
                    &t0,
                    2,
                    format!("route add {}/48 via {ha} dev h{k}", usid_addr(hu)),
                );
                // T1s: the host (uSID and plain) via its T0.
                for j in 0..self.t1s {
                    let t1u = Self::t1_usid(p, j);
                    let via = format!("fd0f:{p:x}:{t0u:x}:{t1u:x}::1");
                    let t1 = Self::t1_ns(prefix, p, j);
                    add(
                        &t1,
                        2,
                        format!("route add {}/48 via {via} dev t0-{i}", usid_addr(hu)),
                    );
                    add(
                        &t1,
                        2,
                        format!("route add fd0f:{p:x}:{hu:x}::/64 via {via} dev t0-{i}"),
                    );
                }
            }
        }
        for p in 0..self.planes {
            for j in 0..self.t1s {
                let t1 = Self::t1_ns(prefix, p, j);
                add(
                    &t1,
                    2,
                    format!("route add {}/48 {UN}", usid_addr(Self::t1_usid(p, j))),
                );
            }
            for i in 0..self.t0s {
                let t0 = Self::t0_ns(prefix, p, i);
                let t0u = Self::t0_usid(p, i);
                add(&t0, 2, format!("route add {}/48 {UN}", usid_addr(t0u)));
                let mut hops = Vec::new();
                for j in 0..self.t1s {
                    let t1 = Self::t1_ns(prefix, p, j);
                    let t1u = Self::t1_usid(p, j);
                    let (a0, a1) = (
                        format!("fd0f:{p:x}:{t0u:x}:{t1u:x}::1"),
                        format!("fd0f:{p:x}:{t0u:x}:{t1u:x}::2"),
                    );
                    let (m0, m1) = mac_pair();
                    veths.push(format!(
                        "link add name t1-{j} netns {t0} mtu {mtu} address {m0} type veth peer name t0-{i} netns {t1} mtu {mtu} address {m1}"
                    ));
                    add(&t0, 1, neighbour(&a1, &m1, &format!("t1-{j}")));
                    add(&t1, 1, neighbour(&a0, &m0, &format!("t0-{i}")));
                    add(&t0, 0, format!("address add {a0}/64 dev t1-{j} nodad"));
                    add(&t0, 1, format!("link set dev t1-{j} up"));
                    add(
                        &t0,
                        2,
                        format!("route add {}/48 via {a1} dev t1-{j}", usid_addr(t1u)),
                    );
                    add(&t1, 0, format!("address add {a1}/64 dev t0-{i} nodad"));
                    add(&t1, 1, format!("link set dev t0-{i} up"));
                    add(
                        &t1,
                        2,
                        format!("route add {}/48 via {a0} dev t0-{i}", usid_addr(t0u)),
                    );
                    hops.push((a1, format!("t1-{j}")));
                }
                // Plain routing (and any uSID this T0 does not own): up to the T1s, ECMP.
                let nh = if hops.len() == 1 {
                    format!("via {} dev {}", hops[0].0, hops[0].1)
                } else {
                    hops.iter()
                        .map(|(a, d)| format!("nexthop via {a} dev {d}"))
                        .collect::<Vec<_>>()
                        .join(" ")
                };
                add(&t0, 2, format!("route add fcbb:bb00:e{p:x}00::/40 {nh}"));
                add(&t0, 2, format!("route add fcbb:bb00::/32 {nh}"));
                add(&t0, 2, format!("route add fd0f:{p:x}::/32 {nh}"));
            }
        }
        Plan {
            namespaces,
            veths,
            batches,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mrc_host::{NodeConfig, PeerPlane};

    const TOPO: Topology = Topology {
        planes: 2,
        t0s: 2,
        t1s: 2,
        hosts_per_t0: 1,
        mtu: 9000,
    };

    #[test]
    fn node_file_parses_and_routes_through_the_plan() {
        let a = NodeConfig::from_toml(&TOPO.node_file(0)).unwrap();
        let b = NodeConfig::from_toml(&TOPO.node_file(1)).unwrap();
        let peer = PeerPlane {
            addr: b.planes[1].addr,
            t0: b.planes[1].t0,
        };
        let d = a.destination(1, &peer, 1);
        assert_eq!(
            *d.ip(),
            "fcbb:bb00:1100:2101:1101:e101::"
                .parse::<Ipv6Addr>()
                .unwrap()
        );
        assert_eq!(d.port(), NODE_PORT);
    }

    #[test]
    fn links_are_checked() {
        assert!(TOPO.link("x", 0, Node::Host(1), Node::T0(1)).is_ok());
        assert!(TOPO.link("x", 0, Node::Host(1), Node::T0(0)).is_err());
        assert!(TOPO.link("x", 2, Node::T0(0), Node::T1(0)).is_err());
        let l = TOPO.link("x", 1, Node::T1(1), Node::T0(0)).unwrap();
        assert_eq!(
            l.ends[0],
            LinkEnd {
                ns: "x-p1t1-1".into(),
                dev: "t0-0".into()
            }
        );
        assert_eq!(
            l.ends[1],
            LinkEnd {
                ns: "x-p1t0-0".into(),
                dev: "t1-1".into()
            }
        );
        assert_eq!(TOPO.all_links("x").len(), 2 * (2 + 4));
        assert!(Node::parse("t2-0").is_err());
    }

    #[test]
    fn plan_covers_every_namespace() {
        let plan = TOPO.plan("x");
        assert_eq!(plan.namespaces.len(), 2 + 2 * 4);
        assert_eq!(plan.veths.len(), 2 * (2 + 4));
        assert!(plan.batches.iter().all(|b| !b[1].is_empty()));
    }
}
