//! htsim's `.topo` files: the subset `sim/README.md` documents, read into one plane's shape and the port
//! parameters.

use super::*;

/// Keys of an htsim `.topo` file's `Tier N` sections.
pub const TOPO_TIER_KEYS: [&str; 9] = [
    "downlink_speed_gbps",
    "radix_up",
    "radix_down",
    "queue_up",
    "queue_down",
    "oversubscribed",
    "bundle",
    "switch_latency_ns",
    "downlink_latency_ns",
];

/// Parses htsim's `.topo` format (the subset `sim/README.md` documents): a header of `Nodes`, `Tiers` and
/// `Podsize`, then one `Tier N` section per tier with the keys of [`TOPO_TIER_KEYS`] (any case). Everything
/// else, every value that is not a whole number, and every combination the simulator cannot build exactly
/// (bundles, radices that do not add up) is an error naming the line and the key. Returns one plane's
/// shape and the port parameters: a port's latency is its link's plus its sending switch's.
pub fn parse_htsim_topo(text: &str) -> Result<(Shape, Links), ScenarioError> {
    let (head, tiers) = read_topo_lines(text)?;
    let e = |f: String, m: String| Err(ScenarioError::new(format!("topology.file {f}"), m));
    let (Some(nodes), Some(ntiers), Some(podsize)) = (head[0], head[1], head[2]) else {
        let missing = ["Nodes", "Tiers", "Podsize"]
            .iter()
            .zip(head)
            .filter(|(_, v)| v.is_none())
            .map(|(n, _)| *n)
            .collect::<Vec<_>>()
            .join(", ");
        return e(
            "header".into(),
            format!("missing {missing}; the header gives Nodes N, Tiers 2|3 and Podsize P"),
        );
    };
    if !(2..=3).contains(&ntiers) {
        return e("Tiers".into(), format!("{ntiers}; must be 2 or 3"));
    }
    let nt = ntiers as usize;
    check_tiers(&tiers, nt)?;
    let get = |t: usize, k: &str| tier_value(&tiers, t, k);
    let r = |t: usize, k: &str| get(t, k).unwrap_or(0);
    let hpt0 = r(0, "radix_down");
    if hpt0 == 0 || !nodes.is_multiple_of(hpt0) || !podsize.is_multiple_of(hpt0) {
        return e(
            "Tier 0 Radix_Down".into(),
            format!("{hpt0} must divide Nodes ({nodes}) and Podsize ({podsize})"),
        );
    }
    if podsize == 0 || !nodes.is_multiple_of(podsize) {
        return e(
            "Podsize".into(),
            format!("{podsize} must divide Nodes ({nodes})"),
        );
    }
    if nt == 2 && podsize != nodes {
        return e(
            "Podsize".into(),
            format!("{podsize}: a two-tier fabric is one pod; use Podsize {nodes} (= Nodes)"),
        );
    }
    let t0 = podsize / hpt0;
    let t1 = r(0, "radix_up");
    if t1 == 0 {
        return e("Tier 0 Radix_Up".into(), "must be at least 1".into());
    }
    if r(1, "radix_down") != t0 {
        return e(
            "Tier 1 Radix_Down".into(),
            format!(
                "{}: every T1 links to each of the {t0} T0s of its pod (Podsize / Tier 0 Radix_Down), so it \
                 must be {t0}",
                r(1, "radix_down")
            ),
        );
    }
    let pods = nodes / podsize;
    let t2 = if nt == 3 {
        if r(2, "radix_down") != pods {
            return e(
                "Tier 2 Radix_Down".into(),
                format!(
                    "{}: every T2 links to one T1 in each of the {pods} pods, so it must be {pods}",
                    r(2, "radix_down")
                ),
            );
        }
        r(1, "radix_up")
    } else {
        0
    };
    let n32 = |f: &str, v: u64| {
        u32::try_from(v).map_err(|_| {
            ScenarioError::new(format!("topology.file {f}"), format!("{v} is too large"))
        })
    };
    let shape = Shape {
        planes: 1,
        pods: n32("Nodes", pods)?,
        t0: n32("Podsize", t0)?,
        t1: n32("Tier 0 Radix_Up", t1)?,
        t2_per_t1: n32("Tier 1 Radix_Up", t2)?,
        hpt0: n32("Tier 0 Radix_Down", hpt0)?,
    };
    // A port's latency: its link's, plus the latency of the switch it leaves (hosts add none).
    let lat = |t: usize| r(t, "downlink_latency_ns") * 1000;
    let sw = |t: usize| r(t, "switch_latency_ns") * 1000;
    let port = |t: usize, from_switch: Option<usize>, queue: Option<u64>| PortParams {
        rate_bps: r(t, "downlink_speed_gbps") * 1_000_000_000,
        latency_ps: lat(t) + from_switch.map_or(0, sw),
        buffer: queue,
    };
    let top = nt.min(3) - 1;
    let links = [
        port(0, None, None),
        port(0, Some(0), get(0, "queue_down")),
        port(1, Some(0), get(0, "queue_up")),
        port(1, Some(1), get(1, "queue_down")),
        port(top, Some(1), get(1, "queue_up")),
        port(top, Some(top), get(top, "queue_down")),
    ];
    Ok((shape, links))
}

/// Per tier, per key of [`TOPO_TIER_KEYS`]: the value and the line that gave it.
type TierValues = [[Option<(u64, usize)>; 9]; 3];

fn tier_value(tiers: &TierValues, t: usize, k: &str) -> Option<u64> {
    let i = TOPO_TIER_KEYS.iter().position(|x| *x == k).unwrap_or(0);
    tiers[t][i].map(|x| x.0)
}

/// The header (Nodes, Tiers, Podsize) and the per-tier values of an htsim topology file, each key checked
/// to be known, whole and given once, in its place.
fn read_topo_lines(text: &str) -> Result<([Option<u64>; 3], TierValues), ScenarioError> {
    let mut head: [Option<u64>; 3] = [None; 3]; // nodes, tiers, podsize
    let mut tiers: TierValues = [[None; 9]; 3];
    let mut cur: Option<usize> = None;
    for (ln, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let ln = ln + 1;
        let err = |what: String| ScenarioError::new(format!("topology.file line {ln}"), what);
        let toks: Vec<&str> = line.split_whitespace().collect();
        let key = toks[0].to_ascii_lowercase();
        // The file's own words are never quoted back (it may be any file): only keys this reader knows.
        let name = if ["nodes", "tiers", "podsize", "tier"].contains(&key.as_str())
            || TOPO_TIER_KEYS.contains(&key.as_str())
        {
            format!("`{}`", toks[0])
        } else {
            "the key".to_string()
        };
        if toks.len() != 2 {
            return Err(err(format!("{name} takes exactly one value")));
        }
        let v: u64 = toks[1]
            .parse()
            .map_err(|_| err(format!("{name} needs a whole number")))?;
        let slot = match key.as_str() {
            "nodes" => Some(0),
            "tiers" => Some(1),
            "podsize" => Some(2),
            _ => None,
        };
        if let Some(i) = slot {
            if cur.is_some() {
                return Err(err(format!(
                    "{name} belongs in the header, before any `Tier N`"
                )));
            }
            if head[i].replace(v).is_some() {
                return Err(err(format!("{name} given twice")));
            }
            continue;
        }
        if key == "tier" {
            if v > 2 {
                return Err(err("tier must be 0, 1 or 2".into()));
            }
            cur = Some(v as usize);
            continue;
        }
        let Some(k) = TOPO_TIER_KEYS.iter().position(|x| *x == key) else {
            return Err(err(
                "an unknown key; the accepted keys are Nodes, Tiers, Podsize, Tier, Downlink_speed_Gbps, \
                 Radix_Up, Radix_Down, Queue_Up, Queue_Down, Oversubscribed, Bundle, Switch_Latency_ns and \
                 Downlink_Latency_ns (see sim/README.md)"
                    .into(),
            ));
        };
        let Some(c) = cur else {
            return Err(err(format!("{name} before any `Tier N` line")));
        };
        if tiers[c][k].replace((v, ln)).is_some() {
            return Err(err(format!("{name} given twice for tier {c}")));
        }
    }
    Ok((head, tiers))
}

/// Every tier value in range and allowed where it is, and every tier of the `nt` given complete.
fn check_tiers(tiers: &TierValues, nt: usize) -> Result<(), ScenarioError> {
    let e = |f: String, m: String| Err(ScenarioError::new(format!("topology.file {f}"), m));
    let get = |t: usize, k: &str| tier_value(tiers, t, k);
    for (t, keys) in tiers.iter().enumerate() {
        let name = |k: usize| TOPO_TIER_KEYS[k];
        for (k, v) in keys.iter().enumerate() {
            let Some((v, ln)) = v else { continue };
            let at = format!("line {ln} (Tier {t} {})", name(k));
            if t >= nt {
                return e(at, format!("tier {t} does not exist with Tiers {nt}"));
            }
            let top = t == nt - 1;
            match name(k) {
                "radix_up" | "queue_up" if top => {
                    return e(at, "the top tier has no uplinks".into());
                }
                "bundle" if *v != 1 => {
                    return e(
                        at,
                        format!(
                            "Bundle {v}: parallel links between one pair of switches are not modelled; use \
                             Bundle 1 (or more switches)"
                        ),
                    );
                }
                "downlink_speed_gbps" if !(1..=MAX_GBPS as u64).contains(v) => {
                    return e(at, format!("{v}; use 1..={MAX_GBPS} Gbit/s"));
                }
                "switch_latency_ns" | "downlink_latency_ns" if *v > MAX_LATENCY_NS => {
                    return e(at, format!("{v} ns; use 0..={MAX_LATENCY_NS}"));
                }
                "queue_up" | "queue_down" if !(1..=MAX_BUFFER_BYTES).contains(v) => {
                    return e(at, format!("{v} bytes; use 1..={MAX_BUFFER_BYTES}"));
                }
                _ => {}
            }
        }
        if t >= nt {
            continue;
        }
        for need in ["downlink_speed_gbps", "radix_down", "downlink_latency_ns"] {
            if get(t, need).is_none() {
                return e(
                    format!("Tier {t}"),
                    format!(
                        "missing {need}: htsim would take it from its command line; write it in the file"
                    ),
                );
            }
        }
        if t < nt - 1 && get(t, "radix_up").is_none() {
            return e(format!("Tier {t}"), "missing radix_up".into());
        }
        if let (Some(o), Some(d), Some(u)) = (
            get(t, "oversubscribed"),
            get(t, "radix_down"),
            get(t, "radix_up"),
        ) && (u == 0 || d != o * u)
        {
            return e(
                format!("Tier {t} Oversubscribed"),
                format!(
                    "{o}, but Radix_Down {d} / Radix_Up {u} is not {o}: the radices give the \
                     oversubscription; make them agree"
                ),
            );
        }
    }
    Ok(())
}
