//! Configuration by environment: which MRC nodes this process presents as RDMA devices.
//!
//! - `MRC_SHIM_NODE=h0.toml[,h1.toml…]`: one device per node file (the format `mrc-fabric up` writes and
//!   `mrc_host::NodeConfig` reads): `mrc0`, `mrc1`, … in the order given.
//! - otherwise one loopback device `mrc0` with `MRC_SHIM_PLANES` planes (default 8, like `mrc-perf`) on `::1`.
//!
//! A wrong value names the variable and the fix; the shim then presents no device, so `ibv_get_device_list`
//! returns an empty list instead of a half-configured device.

use std::net::Ipv6Addr;
use std::path::Path;
use std::time::Duration;

use mrc_host::MAX_PLANES;
use mrc_host::NodeConfig;

/// Node files, comma-separated.
pub(crate) const NODE_ENV: &str = "MRC_SHIM_NODE";
/// Loopback planes.
pub(crate) const PLANES_ENV: &str = "MRC_SHIM_PLANES";
/// Planes of the loopback device when `MRC_SHIM_PLANES` is not set.
pub(crate) const DEFAULT_PLANES: usize = 8;
/// MRC payload bytes per packet.
pub(crate) const MTU_ENV: &str = "MRC_SHIM_MTU";
/// Active EVs per plane.
pub(crate) const EVS_ENV: &str = "MRC_SHIM_EVS";
/// Fixed congestion window in packets.
pub(crate) const WINDOW_ENV: &str = "MRC_SHIM_WINDOW";
/// `auto` (default: `busy` on machines with [`BUSY_MIN_CPUS`] or more CPUs, else `thread`), `thread` (spin while
/// busy, then sleep) or `busy` (never sleep).
pub(crate) const PROGRESS_ENV: &str = "MRC_SHIM_PROGRESS";
/// CPUs from which `MRC_SHIM_PROGRESS=auto` busy-polls. A NIC never sleeps: with cores to spare the progress
/// thread, the shim's NIC, does not either, and a WRITE lands while the application spins on its buffer without
/// a wake-up (ib_write_lat on 16 cores: 1.03x mrc-perf busy, 1.33x sleeping). On fewer cores a spinning progress
/// thread would take the CPU that the applications' own spinning threads need.
const BUSY_MIN_CPUS: usize = 8;
/// Print per-plane transport counters on stderr every this many milliseconds.
pub(crate) const STATS_ENV: &str = "MRC_SHIM_STATS_MS";
/// `1` (default): application threads run progress rounds when they post a lone send or poll an empty CQ;
/// `0`: every round is the progress thread's.
pub(crate) const ASSIST_ENV: &str = "MRC_SHIM_ASSIST";
/// Microseconds a thread that polls an empty CQ sleeps while its QPs are bandwidth-bound (default 0: it only
/// yields).
pub(crate) const NAP_ENV: &str = "MRC_SHIM_NAP_US";
/// The default of [`NAP_ENV`]: none. A nap once gave a spinning poller's CPU to the progress threads on 2 cores
/// (ib_write_bw 19-21 Gbit/s against 11-18 when only yielding, 2026-11-24); since the progress thread no longer
/// waits for the engine lock, a 20 µs nap (50-70 µs with the kernel's timer slack) costs it 20%: 2026-11-28,
/// `shim/bench.sh 3 3` read 0.75-0.80 of mrc-perf with it in three runs, 1.03 without.
const NAP_DEFAULT_US: u64 = 0;
/// Microseconds a QP holds the acknowledgement of a lone message for its own next send (default 20; 0: none).
pub(crate) const ACK_HOLD_ENV: &str = "MRC_SHIM_ACK_HOLD_US";
/// The default of [`ACK_HOLD_ENV`]: the host's SACK delay for other packets.
const ACK_HOLD_DEFAULT_US: u64 = 20;

/// How the host layer runs, from the environment (`MRC_SHIM_MTU`, `_EVS`, `_WINDOW`, `_PROGRESS`,
/// `_STATS_MS`); unset values keep mrc-perf's profile.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tuning {
    mtu: Option<u32>,
    evs: Option<u16>,
    window: Option<u32>,
    /// `None`: auto.
    busy: Option<bool>,
    stats_ms: Option<u64>,
    no_assist: bool,
    nap_us: Option<u64>,
    ack_hold_us: Option<u64>,
}

fn number<T: std::str::FromStr + PartialOrd + std::fmt::Display>(
    var: &str,
    v: Option<&str>,
    lo: T,
    hi: T,
) -> Result<Option<T>, String> {
    match v.map(str::trim) {
        None | Some("") => Ok(None),
        Some(s) => match s.parse::<T>() {
            Ok(n) if n >= lo && n <= hi => Ok(Some(n)),
            _ => Err(format!("{var}={s:?}: use a number in {lo}..={hi}")),
        },
    }
}

impl Tuning {
    /// Whether the progress thread busy-polls on a machine with `cpus` CPUs.
    fn busy_poll(&self, cpus: usize) -> bool {
        self.busy.unwrap_or(cpus >= BUSY_MIN_CPUS)
    }

    fn parse(get: impl Fn(&str) -> Option<String>) -> Result<Self, String> {
        let busy = match get(PROGRESS_ENV).as_deref().map(str::trim) {
            None | Some("") | Some("auto") => None,
            Some("thread") => Some(false),
            Some("busy") => Some(true),
            Some(s) => {
                return Err(format!(
                    "{PROGRESS_ENV}={s:?}: use `auto` (busy with {BUSY_MIN_CPUS} or more CPUs), `thread` (sleep \
                     when idle) or `busy` (never sleep)"
                ));
            }
        };
        Ok(Self {
            mtu: number(MTU_ENV, get(MTU_ENV).as_deref(), 256, 65_000)?,
            evs: number(EVS_ENV, get(EVS_ENV).as_deref(), 1, 64)?,
            window: number(WINDOW_ENV, get(WINDOW_ENV).as_deref(), 1, 65_536)?,
            busy,
            stats_ms: number(STATS_ENV, get(STATS_ENV).as_deref(), 10, 3_600_000)?,
            no_assist: number(ASSIST_ENV, get(ASSIST_ENV).as_deref(), 0u8, 1)? == Some(0),
            nap_us: number(NAP_ENV, get(NAP_ENV).as_deref(), 0u64, 10_000)?,
            ack_hold_us: number(ACK_HOLD_ENV, get(ACK_HOLD_ENV).as_deref(), 0u64, 1_000)?,
        })
    }
}

/// One device to present.
#[derive(Debug, Clone)]
pub(crate) struct DeviceConfig {
    /// `mrc<index>`.
    pub(crate) name: String,
    /// Where it came from (a node file, or "loopback"), for `ibv_devinfo` and log lines.
    pub(crate) source: String,
    /// The node: its planes and addressing plan.
    pub(crate) node: NodeConfig,
    /// How its host runs.
    pub(crate) tuning: Tuning,
}

impl DeviceConfig {
    /// The node's address as the verbs GID shows it: plane 0's address.
    pub(crate) fn address(&self) -> Ipv6Addr {
        self.node
            .planes
            .first()
            .map_or(Ipv6Addr::LOCALHOST, |p| *p.addr.ip())
    }

    /// The host layer's configuration: mrc-perf's profile (packets as large as the planes' links carry),
    /// adjusted by the environment.
    pub(crate) fn host_config(&self) -> mrc_host::HostConfig {
        let mut h = mrc_host::HostConfig::loopback(1);
        h.node = self.node.clone();
        let t = &self.tuning;
        if let Some(m) = t.mtu {
            h.profile.mtu = m;
        }
        if let Some(e) = t.evs {
            h.profile.evs_per_plane = e;
        }
        if let Some(w) = t.window {
            h.profile.window_packets = w;
        }
        h.profile.sack_hold = Duration::from_micros(t.ack_hold_us.unwrap_or(ACK_HOLD_DEFAULT_US));
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        if t.busy_poll(cpus) {
            h.progress = mrc_host::ProgressMode::BusyPoll;
        }
        h
    }

    /// Whether application threads run progress rounds themselves (`MRC_SHIM_ASSIST`, default yes).
    pub(crate) fn assist(&self) -> bool {
        !self.tuning.no_assist
    }

    /// How long a poller of an empty CQ sleeps while its QPs are bandwidth-bound (`MRC_SHIM_NAP_US`).
    pub(crate) fn nap(&self) -> Duration {
        Duration::from_micros(self.tuning.nap_us.unwrap_or(NAP_DEFAULT_US))
    }

    /// Every how many milliseconds to print per-plane counters (`MRC_SHIM_STATS_MS`).
    pub(crate) fn stats_interval(&self) -> Option<Duration> {
        self.tuning.stats_ms.map(Duration::from_millis)
    }

    /// Plane 0's configured UDP port (0: chosen when the device is opened).
    pub(crate) fn port(&self) -> u16 {
        self.node.planes.first().map_or(0, |p| p.addr.port())
    }
}

/// Reads the devices from the environment.
pub(crate) fn from_env() -> Result<Vec<DeviceConfig>, String> {
    let nodes = std::env::var(NODE_ENV).ok();
    let planes = std::env::var(PLANES_ENV).ok();
    let tuning = Tuning::parse(|v| std::env::var(v).ok())?;
    let mut d = parse(nodes.as_deref(), planes.as_deref(), |p| {
        NodeConfig::load(p).map_err(|e| e.to_string())
    })?;
    for x in &mut d {
        x.tuning = tuning.clone();
    }
    Ok(d)
}

fn parse(
    nodes: Option<&str>,
    planes: Option<&str>,
    load: impl Fn(&Path) -> Result<NodeConfig, String>,
) -> Result<Vec<DeviceConfig>, String> {
    let files: Vec<&str> = nodes
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .collect();
    if files.is_empty() {
        let n = match planes.map(str::trim) {
            None | Some("") => DEFAULT_PLANES,
            Some(s) => match s.parse::<usize>() {
                Ok(n) if (1..=MAX_PLANES).contains(&n) => n,
                _ => {
                    return Err(format!(
                        "{PLANES_ENV}={s:?}: use a number of loopback planes in 1..={MAX_PLANES}"
                    ));
                }
            },
        };
        return Ok(vec![DeviceConfig {
            name: "mrc0".into(),
            source: format!("loopback, {n} planes"),
            node: NodeConfig::loopback(n),
            tuning: Tuning::default(),
        }]);
    }
    files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            let node = load(Path::new(f)).map_err(|e| {
                format!(
                    "{NODE_ENV}: node file {f}: {e} (write the node file as `mrc-fabric up` does)"
                )
            })?;
            Ok(DeviceConfig {
                name: format!("mrc{i}"),
                source: (*f).to_string(),
                node,
                tuning: Tuning::default(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_files(_: &Path) -> Result<NodeConfig, String> {
        Err("no such file".into())
    }

    #[test]
    fn loopback_by_default() {
        let d = parse(None, None, no_files).unwrap();
        assert_eq!(d.len(), 1);
        assert_eq!(d[0].name, "mrc0");
        assert_eq!(d[0].node.plane_count(), DEFAULT_PLANES);
        assert_eq!(d[0].address(), Ipv6Addr::LOCALHOST);
        let d = parse(Some(" "), Some("2"), no_files).unwrap();
        assert_eq!(d[0].node.plane_count(), 2);
    }

    #[test]
    fn bad_values_name_the_variable_and_the_fix() {
        for bad in ["0", "17", "two"] {
            let e = parse(None, Some(bad), no_files).unwrap_err();
            assert!(e.contains(PLANES_ENV) && e.contains("1..=16"), "{e}");
        }
        let e = parse(Some("/nonexistent.toml"), None, no_files).unwrap_err();
        assert!(
            e.contains(NODE_ENV) && e.contains("/nonexistent.toml"),
            "{e}"
        );
    }

    #[test]
    fn tuning_names_the_variable() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        let t = Tuning::parse(env(&[(MTU_ENV, "8000"), (PROGRESS_ENV, "busy")])).unwrap();
        assert_eq!((t.mtu, t.busy_poll(2)), (Some(8000), true));
        let auto = Tuning::parse(env(&[])).unwrap();
        assert!(!auto.busy_poll(2) && auto.busy_poll(BUSY_MIN_CPUS));
        let thread = Tuning::parse(env(&[(PROGRESS_ENV, "thread")])).unwrap();
        assert!(!thread.busy_poll(64));
        let e = Tuning::parse(env(&[(MTU_ENV, "10")])).unwrap_err();
        assert!(e.contains(MTU_ENV) && e.contains("256..=65000"), "{e}");
        let e = Tuning::parse(env(&[(PROGRESS_ENV, "fast")])).unwrap_err();
        assert!(e.contains(PROGRESS_ENV), "{e}");
        let e = Tuning::parse(env(&[(ACK_HOLD_ENV, "5000")])).unwrap_err();
        assert!(e.contains(ACK_HOLD_ENV) && e.contains("0..=1000"), "{e}");
    }

    #[test]
    fn the_ack_hold_reaches_the_host_profile() {
        let dev = |hold: Option<&'static str>| {
            let mut d = parse(None, None, no_files).unwrap().remove(0);
            d.tuning = Tuning::parse(move |k: &str| {
                (k == ACK_HOLD_ENV)
                    .then_some(hold)
                    .flatten()
                    .map(String::from)
            })
            .unwrap();
            d.host_config().profile.sack_hold
        };
        assert_eq!(dev(None), Duration::from_micros(ACK_HOLD_DEFAULT_US));
        assert_eq!(dev(Some("0")), Duration::ZERO);
        assert_eq!(dev(Some("7")), Duration::from_micros(7));
    }

    #[test]
    fn one_device_per_node_file() {
        let file = |p: &Path| {
            let port = if p.ends_with("a.toml") { 4791 } else { 4792 };
            NodeConfig::from_toml(&format!(
                "[[plane]]\naddr = \"fd00::{port:x}\"\nport = {port}\n"
            ))
            .map_err(|e| e.to_string())
        };
        let d = parse(Some("a.toml,b.toml"), Some("3"), file).unwrap();
        assert_eq!(
            d.iter().map(|d| d.name.as_str()).collect::<Vec<_>>(),
            ["mrc0", "mrc1"]
        );
        assert_eq!(d[1].port(), 4792);
        assert_eq!(d[1].address(), "fd00::12b8".parse::<Ipv6Addr>().unwrap());
    }
}
