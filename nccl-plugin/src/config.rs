//! `NCCL_MRC_*` environment variables, read once at the first `init`. A bad value fails `init` with a line
//! naming the variable, the value and what is allowed (NCCL then falls back to its own transports unless
//! `NCCL_NET=MRC` pins this plugin). `README.md` documents each variable.

use std::path::PathBuf;
use std::str::FromStr;

use crate::ffi::Error;
use crate::proto::{MAX_QPS, MAX_RECVS};

/// Congestion control of the QPs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Cc {
    /// The host's software profile: a fixed window, paced at `NCCL_MRC_RATE_GBPS` if set.
    Fixed,
    /// The NSCC-like window controller (for fabrics that mark ECN or trim).
    Nscc,
}

/// Everything the environment can set.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Settings {
    /// `NCCL_MRC_NODE_CONFIG`: a node file (planes, addresses, uSIDs) as `mrc-fabric up` writes them.
    pub(crate) node_config: Option<PathBuf>,
    /// `NCCL_MRC_PLANES`: loopback planes when no node file is given.
    pub(crate) planes: usize,
    /// `NCCL_MRC_QPS_PER_CONN`: QPs each NCCL connection stripes over.
    pub(crate) qps_per_conn: usize,
    /// `NCCL_MRC_MAX_RECVS`: the `maxRecvs` property (receives one `irecv` may group).
    pub(crate) max_recvs: usize,
    /// `NCCL_MRC_TIMEOUT`: QP ACK timeout exponent, 1.024 µs × 2^value (0: wait forever).
    pub(crate) timeout: u8,
    /// `NCCL_MRC_RETRY_CNT`: retries at the ACK timeout; then the QP fails (no back-off, as NCCL_IB_RETRY_CNT).
    pub(crate) retry_cnt: u8,
    /// `NCCL_MRC_CONNECT_TIMEOUT_MS`: how long `connect` waits for the listener's answer.
    pub(crate) connect_timeout_ms: u64,
    /// `NCCL_MRC_CC`: congestion control.
    pub(crate) cc: Cc,
    /// `NCCL_MRC_RATE_GBPS`: line rate per plane for pacing and the CC's ceiling.
    pub(crate) rate_gbps: Option<f64>,
    /// `NCCL_MRC_EVS`: entropy values (paths) per plane.
    pub(crate) evs: Option<u16>,
    /// `NCCL_MRC_SPEED_MBPS`: the `speed` property NCCL's topology search weighs the NIC with.
    pub(crate) speed_mbps: Option<i32>,
    /// `NCCL_MRC_LATENCY_US`: the `latency` property.
    pub(crate) latency_us: f32,
    /// `NCCL_MRC_PROGRESS_THREADS`: host instances, each with its own sockets and progress thread, that new
    /// comms are spread over (NCCL opens a comm per channel and direction).
    pub(crate) progress_threads: usize,
}

/// Progress threads when `NCCL_MRC_PROGRESS_THREADS` is unset: a quarter of the CPUs, 1 to 8. A progress
/// thread moves every byte of its comms through the CPU (copies and the ICRC); a node usually runs a rank per
/// GPU and each rank has its own, so a rank takes a share of the cores, not all of them.
pub(crate) fn default_progress_threads(cpus: usize) -> usize {
    (cpus / 4).clamp(1, 8)
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            node_config: None,
            planes: 4,
            qps_per_conn: 1,
            max_recvs: MAX_RECVS,
            timeout: 20,
            retry_cnt: 7,
            connect_timeout_ms: 60_000,
            cc: Cc::Fixed,
            rate_gbps: None,
            evs: None,
            speed_mbps: None,
            latency_us: 0.0,
            progress_threads: default_progress_threads(
                std::thread::available_parallelism().map_or(1, |n| n.get()),
            ),
        }
    }
}

/// Parses `name`'s value as a number within `lo..=hi`.
fn number<T: FromStr + PartialOrd + std::fmt::Display + Copy>(
    name: &str,
    v: &str,
    lo: T,
    hi: T,
) -> Result<T, Error> {
    match v.trim().parse::<T>() {
        Ok(x) if x >= lo && x <= hi => Ok(x),
        _ => Err(Error::invalid(format!(
            "{name}={v:?}: expected a number from {lo} to {hi}"
        ))),
    }
}

impl Settings {
    /// From the process environment.
    pub(crate) fn from_env() -> Result<Self, Error> {
        Self::from_lookup(|k| std::env::var(k).ok())
    }

    /// From any variable lookup (tests pass a map).
    pub(crate) fn from_lookup(get: impl Fn(&str) -> Option<String>) -> Result<Self, Error> {
        let mut s = Self::default();
        let var = |k: &str| get(k).filter(|v| !v.is_empty());
        if let Some(v) = var("NCCL_MRC_NODE_CONFIG") {
            let p = PathBuf::from(&v);
            if !p.is_file() {
                return Err(Error::invalid(format!(
                    "NCCL_MRC_NODE_CONFIG={v:?}: no such file (a node file as `mrc-fabric up` writes them, \
                     or unset it for loopback planes)"
                )));
            }
            s.node_config = Some(p);
        }
        if let Some(v) = var("NCCL_MRC_PLANES") {
            s.planes = number("NCCL_MRC_PLANES", &v, 1, 16)?;
        }
        if let Some(v) = var("NCCL_MRC_QPS_PER_CONN") {
            s.qps_per_conn = number("NCCL_MRC_QPS_PER_CONN", &v, 1, MAX_QPS)?;
        }
        if let Some(v) = var("NCCL_MRC_MAX_RECVS") {
            s.max_recvs = number("NCCL_MRC_MAX_RECVS", &v, 1, MAX_RECVS)?;
        }
        if let Some(v) = var("NCCL_MRC_TIMEOUT") {
            s.timeout = number("NCCL_MRC_TIMEOUT", &v, 0, 31)?;
        }
        if let Some(v) = var("NCCL_MRC_RETRY_CNT") {
            s.retry_cnt = number("NCCL_MRC_RETRY_CNT", &v, 0, 7)?;
        }
        if let Some(v) = var("NCCL_MRC_CONNECT_TIMEOUT_MS") {
            s.connect_timeout_ms = number("NCCL_MRC_CONNECT_TIMEOUT_MS", &v, 100, 3_600_000)?;
        }
        if let Some(v) = var("NCCL_MRC_CC") {
            s.cc = match v.trim().to_ascii_lowercase().as_str() {
                "fixed" => Cc::Fixed,
                "nscc" => Cc::Nscc,
                _ => {
                    return Err(Error::invalid(format!(
                        "NCCL_MRC_CC={v:?}: expected \"fixed\" or \"nscc\""
                    )));
                }
            };
        }
        if let Some(v) = var("NCCL_MRC_RATE_GBPS") {
            s.rate_gbps = Some(number("NCCL_MRC_RATE_GBPS", &v, 0.001, 3200.0)?);
        }
        if let Some(v) = var("NCCL_MRC_EVS") {
            s.evs = Some(number("NCCL_MRC_EVS", &v, 1, 4096)?);
        }
        if let Some(v) = var("NCCL_MRC_SPEED_MBPS") {
            s.speed_mbps = Some(number("NCCL_MRC_SPEED_MBPS", &v, 1, i32::MAX)?);
        }
        if let Some(v) = var("NCCL_MRC_PROGRESS_THREADS") {
            s.progress_threads = number("NCCL_MRC_PROGRESS_THREADS", &v, 1, 16)?;
        }
        if let Some(v) = var("NCCL_MRC_LATENCY_US") {
            s.latency_us = number("NCCL_MRC_LATENCY_US", &v, 0.0, 1e6)?;
        }
        Ok(s)
    }

    /// The `speed` property: the variable, else planes × rate, else 100 Gbit/s.
    pub(crate) fn speed(&self) -> i32 {
        self.speed_mbps.unwrap_or_else(|| match self.rate_gbps {
            Some(r) => (r * 1000.0 * self.planes as f64).min(f64::from(i32::MAX)) as i32,
            None => 100_000,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn parse(pairs: &[(&str, &str)]) -> Result<Settings, Error> {
        let m: BTreeMap<String, String> = pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        Settings::from_lookup(|k| m.get(k).cloned())
    }

    #[test]
    fn defaults_and_overrides() {
        assert_eq!(parse(&[]).unwrap(), Settings::default());
        let s = parse(&[
            ("NCCL_MRC_QPS_PER_CONN", "4"),
            ("NCCL_MRC_MAX_RECVS", "1"),
            ("NCCL_MRC_CC", "NSCC"),
            ("NCCL_MRC_RATE_GBPS", "12.5"),
            ("NCCL_MRC_PLANES", "8"),
            ("NCCL_MRC_TIMEOUT", "14"),
            ("NCCL_MRC_RETRY_CNT", "3"),
            ("NCCL_MRC_PROGRESS_THREADS", "6"),
        ])
        .unwrap();
        assert_eq!(s.progress_threads, 6);
        assert_eq!(
            (
                s.qps_per_conn,
                s.max_recvs,
                s.cc,
                s.planes,
                s.timeout,
                s.retry_cnt
            ),
            (4, 1, Cc::Nscc, 8, 14, 3)
        );
        assert_eq!(s.speed(), 100_000, "8 planes x 12.5 Gbit/s");
        assert_eq!(
            parse(&[("NCCL_MRC_SPEED_MBPS", "25000")]).unwrap().speed(),
            25_000
        );
        assert_eq!(
            parse(&[("NCCL_MRC_PLANES", "")]).unwrap().planes,
            4,
            "empty means unset"
        );
    }

    #[test]
    fn progress_threads_follow_the_machine() {
        let d: Vec<usize> = [1, 2, 4, 16, 64, 192]
            .iter()
            .map(|&c| default_progress_threads(c))
            .collect();
        assert_eq!(d, [1, 1, 1, 4, 8, 8]);
        assert!(parse(&[("NCCL_MRC_PROGRESS_THREADS", "0")]).is_err());
        assert!(parse(&[("NCCL_MRC_PROGRESS_THREADS", "17")]).is_err());
    }

    #[test]
    fn bad_values_name_the_variable_and_the_range() {
        let e = parse(&[("NCCL_MRC_QPS_PER_CONN", "9")]).unwrap_err();
        assert!(
            e.why.contains("NCCL_MRC_QPS_PER_CONN=\"9\"") && e.why.contains("1 to 8"),
            "{e}"
        );
        assert!(
            parse(&[("NCCL_MRC_CC", "cubic")])
                .unwrap_err()
                .why
                .contains("nscc")
        );
        assert!(parse(&[("NCCL_MRC_TIMEOUT", "x")]).is_err());
        assert!(
            parse(&[("NCCL_MRC_NODE_CONFIG", "/nonexistent/h0.toml")])
                .unwrap_err()
                .why
                .contains("no such file")
        );
    }
}
