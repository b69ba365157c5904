//! `mrc-fabric show`: hosts, links with per-end packet counters, uN (seg6local) counters, active faults.

use std::collections::BTreeMap;

use serde::Serialize;

use super::Result;
use super::netns::{self, run_in};
use super::plan::{Topology, usid_addr};
use super::state::{Fault, State};

/// Packet and byte counters of one device.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct Counters {
    /// Received packets.
    pub rx_packets: u64,
    /// Transmitted packets.
    pub tx_packets: u64,
    /// Received bytes.
    pub rx_bytes: u64,
    /// Transmitted bytes.
    pub tx_bytes: u64,
    /// Dropped on receive + transmit.
    pub dropped: u64,
}

/// Counters of every device of a namespace, by name.
pub fn link_counters(ns: &str) -> Result<BTreeMap<String, Counters>> {
    let out = run_in(ns, "ip", &["-s", "-j", "link", "show"])?;
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
    let mut m = BTreeMap::new();
    for l in v.as_array().into_iter().flatten() {
        let name = l["ifname"].as_str().unwrap_or_default().to_string();
        let s = &l["stats64"];
        let g = |dir: &str, f: &str| s[dir][f].as_u64().unwrap_or(0);
        m.insert(
            name,
            Counters {
                rx_packets: g("rx", "packets"),
                tx_packets: g("tx", "packets"),
                rx_bytes: g("rx", "bytes"),
                tx_bytes: g("tx", "bytes"),
                dropped: g("rx", "dropped") + g("tx", "dropped"),
            },
        );
    }
    Ok(m)
}

/// Packets the switch's uN (seg6local End) route handled: `(packets, errors)`.
pub fn usid_counters(ns: &str, usid: u16) -> Result<(u64, u64)> {
    let prefix = format!("{}/48", usid_addr(usid));
    let out = run_in(ns, "ip", &["-s", "-6", "route", "show", &prefix])?;
    let text = String::from_utf8_lossy(&out.stdout);
    let field = |name: &str| -> u64 {
        let mut it = text.split_whitespace();
        while let Some(w) = it.next() {
            if w == name {
                return it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
            }
        }
        0
    };
    Ok((field("packets"), field("errors")))
}

/// One link in the report.
#[derive(Debug, Clone, Serialize)]
pub struct LinkReport {
    /// Plane.
    pub plane: usize,
    /// Name (`h0:t0-0`, `t0-0:t1-0`).
    pub link: String,
    /// `ns/dev` of each end.
    pub ends: [String; 2],
    /// Counters of each end.
    pub counters: [Counters; 2],
    /// Operational state of each end (`UP`, `DOWN`, `LOWERLAYERDOWN`).
    pub oper: [String; 2],
}

/// One switch in the report.
#[derive(Debug, Clone, Serialize)]
pub struct SwitchReport {
    /// Namespace.
    pub ns: String,
    /// Its uSID (hex).
    pub usid: String,
    /// Packets its uN route shifted.
    pub un_packets: u64,
    /// Packets its uN route dropped.
    pub un_errors: u64,
}

/// The whole report.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// Prefix.
    pub prefix: String,
    /// Shape.
    pub topology: Topology,
    /// Host namespaces, by index.
    pub hosts: Vec<String>,
    /// Node files, by index.
    pub node_files: Vec<String>,
    /// Links.
    pub links: Vec<LinkReport>,
    /// Switches.
    pub switches: Vec<SwitchReport>,
    /// Active faults.
    pub faults: Vec<Fault>,
}

fn oper_states(ns: &str) -> BTreeMap<String, String> {
    let mut m = BTreeMap::new();
    if let Ok(out) = run_in(ns, "ip", &["-j", "link", "show"]) {
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        for l in v.as_array().into_iter().flatten() {
            let admin_up = l["flags"]
                .as_array()
                .is_some_and(|f| f.iter().any(|x| x == "UP"));
            let oper = l["operstate"].as_str().unwrap_or("?");
            let s = if admin_up {
                oper.to_string()
            } else {
                "ADMIN-DOWN".to_string()
            };
            m.insert(l["ifname"].as_str().unwrap_or_default().to_string(), s);
        }
    }
    m
}

/// Collects the report.
pub fn report(st: &State) -> Result<Report> {
    let topo = st.topology;
    let mut counters = BTreeMap::new();
    let mut opers = BTreeMap::new();
    for ns in &st.namespaces {
        if netns::exists(ns) {
            counters.insert(ns.clone(), link_counters(ns)?);
            opers.insert(ns.clone(), oper_states(ns));
        }
    }
    let links = topo
        .all_links(&st.prefix)
        .into_iter()
        .map(|l| {
            let c = |i: usize| {
                counters
                    .get(&l.ends[i].ns)
                    .and_then(|m| m.get(&l.ends[i].dev))
                    .copied()
                    .unwrap_or_default()
            };
            let o = |i: usize| {
                opers
                    .get(&l.ends[i].ns)
                    .and_then(|m| m.get(&l.ends[i].dev))
                    .cloned()
                    .unwrap_or_else(|| "?".into())
            };
            LinkReport {
                plane: l.plane,
                link: l.name.clone(),
                ends: [l.ends[0].to_string(), l.ends[1].to_string()],
                counters: [c(0), c(1)],
                oper: [o(0), o(1)],
            }
        })
        .collect();
    let mut switches = Vec::new();
    for p in 0..topo.planes {
        let sw = (0..topo.t0s)
            .map(|i| (Topology::t0_ns(&st.prefix, p, i), Topology::t0_usid(p, i)))
            .chain(
                (0..topo.t1s).map(|j| (Topology::t1_ns(&st.prefix, p, j), Topology::t1_usid(p, j))),
            );
        for (ns, usid) in sw {
            let (un_packets, un_errors) = if netns::exists(&ns) {
                usid_counters(&ns, usid)?
            } else {
                (0, 0)
            };
            switches.push(SwitchReport {
                ns,
                usid: format!("{usid:x}"),
                un_packets,
                un_errors,
            });
        }
    }
    Ok(Report {
        prefix: st.prefix.clone(),
        topology: topo,
        hosts: (0..topo.hosts())
            .map(|k| Topology::host_ns(&st.prefix, k))
            .collect(),
        node_files: st
            .node_files
            .iter()
            .map(|p| p.display().to_string())
            .collect(),
        links,
        switches,
        faults: st.faults.clone(),
    })
}

/// The report as text.
pub fn render(r: &Report) -> String {
    let t = r.topology;
    let mut s = format!(
        "fabric {}: {} planes x ({} T0 + {} T1), {} hosts ({} per T0), mtu {}\nhosts:\n",
        r.prefix,
        t.planes,
        t.t0s,
        t.t1s,
        t.hosts(),
        t.hosts_per_t0,
        t.mtu
    );
    for (k, ns) in r.hosts.iter().enumerate() {
        let addrs: Vec<String> = (0..t.planes)
            .map(|p| usid_addr(Topology::host_usid(p, k)).to_string())
            .collect();
        s += &format!(
            "  h{k}  {ns}  {}  [{}]\n",
            r.node_files.get(k).map_or("", |x| x),
            addrs.join(" ")
        );
    }
    s += "links (packets rx/tx at each end):\n";
    for l in &r.links {
        s += &format!(
            "  p{:<2} {:<12} {:>22} {:>10}/{:<10} {:<10} | {:>22} {:>10}/{:<10} {}\n",
            l.plane,
            l.link,
            l.ends[0],
            l.counters[0].rx_packets,
            l.counters[0].tx_packets,
            l.oper[0],
            l.ends[1],
            l.counters[1].rx_packets,
            l.counters[1].tx_packets,
            l.oper[1]
        );
    }
    s += "switches (uN route packets/errors):\n";
    for w in &r.switches {
        s += &format!(
            "  {:<20} {:>5} {:>10}/{}\n",
            w.ns, w.usid, w.un_packets, w.un_errors
        );
    }
    s += "faults:\n";
    if r.faults.is_empty() {
        s += "  none\n";
    }
    for f in &r.faults {
        s += &format!(
            "  {:<10} plane {} link {}: {}{}\n",
            f.kind,
            f.plane,
            f.link,
            f.detail,
            f.pid.map_or(String::new(), |p| format!(" (pid {p})"))
        );
    }
    s
}
