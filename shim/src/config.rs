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

use mrc_host::MAX_PLANES;
use mrc_host::NodeConfig;

/// Node files, comma-separated.
pub(crate) const NODE_ENV: &str = "MRC_SHIM_NODE";
/// Loopback planes.
pub(crate) const PLANES_ENV: &str = "MRC_SHIM_PLANES";
/// Planes of the loopback device when `MRC_SHIM_PLANES` is not set.
pub(crate) const DEFAULT_PLANES: usize = 8;

/// One device to present.
#[derive(Debug, Clone)]
pub(crate) struct DeviceConfig {
    /// `mrc<index>`.
    pub(crate) name: String,
    /// Where it came from (a node file, or "loopback"), for `ibv_devinfo` and log lines.
    pub(crate) source: String,
    /// The node: its planes and addressing plan.
    pub(crate) node: NodeConfig,
}

impl DeviceConfig {
    /// The node's address as the verbs GID shows it: plane 0's address.
    pub(crate) fn address(&self) -> Ipv6Addr {
        self.node
            .planes
            .first()
            .map_or(Ipv6Addr::LOCALHOST, |p| *p.addr.ip())
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
    parse(nodes.as_deref(), planes.as_deref(), |p| {
        NodeConfig::load(p).map_err(|e| e.to_string())
    })
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
