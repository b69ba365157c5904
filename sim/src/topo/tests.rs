use super::*;
use crate::scenario::TopologyCfg;

use super::small_cfg as cfg;

fn build(c: &TopologyCfg) -> Result<Topology, ScenarioError> {
    Topology::build(shape_of(c), &links_of(c), &c.queue, 4200)
}

/// Following `forward` from every host on every path reaches the destination in the expected hops, and
/// `rev` pairs ports of the same link.
#[test]
fn forwarding_reaches_every_host() {
    for kind in [TopoKind::TwoTier, TopoKind::ThreeTier] {
        let t = build(&cfg(kind)).unwrap();
        for (i, p) in t.ports.iter().enumerate() {
            let r = t.ports[p.rev as usize];
            assert_eq!(
                (r.from, r.to, r.rev),
                (p.to, p.from, i as u32),
                "{kind:?} port {i}"
            );
        }
        for src in 0..t.hosts {
            for dst in 0..t.hosts {
                for plane in 0..t.shape.planes {
                    for path in 0..t.shape.paths_per_plane() {
                        let mut port = src * t.shape.planes + plane;
                        let mut hops = 1;
                        while t.ports[port as usize].to >= t.hosts {
                            let node = t.ports[port as usize].to;
                            port = t.forward(node, dst, path);
                            assert_eq!(t.ports[port as usize].from, node);
                            hops += 1;
                            assert!(hops <= t.max_hops);
                        }
                        assert_eq!(t.ports[port as usize].to, dst);
                    }
                }
            }
        }
    }
}

/// Issue 10.3: `t0 + t1` wrapped in u32, the size guard passed and the port arrays ate all memory.
#[test]
fn sizes_that_overflow_are_refused_before_allocating() {
    let mut c = cfg(TopoKind::TwoTier);
    (c.hosts_per_t0, c.t0, c.t1) = (2, 1, u32::MAX);
    let e = build(&c).unwrap_err();
    assert_eq!(e.field, "topology");
    assert!(e.problem.contains("ports"), "{e}");
    let mut c = cfg(TopoKind::ThreeTier);
    (c.pods, c.t0, c.hosts_per_t0, c.planes) = (u32::MAX, u32::MAX, u32::MAX, 16);
    let e = build(&c).unwrap_err();
    assert!(e.problem.contains("overflows"), "{e}");
}

#[test]
fn htsim_topo_parses() {
    let text = "Nodes 32\nTiers 2\nPodsize 32\n\nTier 0\nDownlink_speed_Gbps 400\nRadix_Down 8\nRadix_Up 4\n\
                Downlink_Latency_ns 500\nSwitch_Latency_ns 100\nQueue_Up 9000\nOversubscribed 2\n\n\
                Tier 1\nDownlink_speed_Gbps 200\nRadix_Down 4\nDownlink_Latency_ns 700\n";
    let (s, l) = parse_htsim_topo(text).unwrap();
    assert_eq!((s.t0, s.t1, s.hpt0, s.hosts()), (4, 4, 8, 32));
    let host_up = l[PortKind::HostUp as usize];
    let t0_up = l[PortKind::T0Up as usize];
    assert_eq!(
        (host_up.rate_bps, host_up.latency_ps),
        (400_000_000_000, 500_000)
    );
    assert_eq!(
        l[PortKind::T0Down as usize].latency_ps,
        600_000,
        "link + T0 latency"
    );
    assert_eq!(
        (t0_up.rate_bps, t0_up.latency_ps, t0_up.buffer),
        (200_000_000_000, 800_000, Some(9000))
    );
    assert_eq!(l[PortKind::T1Down as usize].buffer, None);
}

/// Every key htsim knows either builds exactly what it says or is refused by name: nothing is ignored.
#[test]
fn htsim_topo_refuses_what_it_cannot_build() {
    let base = "Nodes 32\nTiers 2\nPodsize 32\nTier 0\nDownlink_speed_Gbps 400\nRadix_Down 8\nRadix_Up 4\n\
                Downlink_Latency_ns 500\nTier 1\nDownlink_speed_Gbps 400\nRadix_Down 4\nDownlink_Latency_ns 500\n";
    assert!(parse_htsim_topo(base).is_ok());
    for (extra, want) in [
        ("Tier 0\nRadix_Dn 4\n", "an unknown key"),
        ("Tier 1\nBundle 2\n", "Bundle 2"),
        ("Tier 0\nOversubscribed 3\n", "Oversubscribed"),
        ("Tier 1\nQueue_Up 1000\n", "top tier has no uplinks"),
        ("Tier 0\nRadix_Up 4\n", "given twice"),
        ("Tier 0\nQueue_Down 1.5\n", "whole number"),
        ("Tier 2\nRadix_Down 1\n", "does not exist"),
    ] {
        let e = parse_htsim_topo(&format!("{base}{extra}")).unwrap_err();
        assert!(e.to_string().contains(want), "{extra:?}: {e}");
    }
    let e = parse_htsim_topo(&base.replace("Podsize 32", "Podsize 16")).unwrap_err();
    assert!(e.field.contains("Podsize"), "{e}");
    let e = parse_htsim_topo(&base.replace("Radix_Down 4\n", "Radix_Down 5\n")).unwrap_err();
    assert!(e.field.contains("Tier 1 Radix_Down"), "{e}");
    let e = parse_htsim_topo(&base.replace("Nodes 32", "Nodes 1e30")).unwrap_err();
    assert!(e.problem.contains("whole number"), "{e}");
}
