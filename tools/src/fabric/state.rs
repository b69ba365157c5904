//! The state file: exactly what `up` and the faults created, so `down` and the un-faults touch nothing else.

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::plan::{LinkEnd, Topology};
use super::{Error, Result};

/// Root of all state directories.
pub const RUN_DIR: &str = "/run/mrc-fabric";

/// The state directory of a prefix.
pub fn dir(prefix: &str) -> PathBuf {
    Path::new(RUN_DIR).join(prefix)
}

/// The state file of a prefix.
pub fn file(prefix: &str) -> PathBuf {
    dir(prefix).join("state.json")
}

/// Host `k`'s node file.
pub fn node_file(prefix: &str, k: usize) -> PathBuf {
    dir(prefix).join(format!("h{k}.toml"))
}

/// What a fabric is made of.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct State {
    /// Format version.
    pub version: u32,
    /// Namespace prefix.
    pub prefix: String,
    /// Shape.
    pub topology: Topology,
    /// Switches ignore routes whose device lost carrier (ICMP unreachable instead of silent loss).
    pub ignore_linkdown: bool,
    /// `true` once `up` finished.
    pub complete: bool,
    /// Every namespace `up` created (or was about to create).
    pub namespaces: Vec<String>,
    /// Node files, by host index.
    pub node_files: Vec<PathBuf>,
    /// Active faults.
    pub faults: Vec<Fault>,
    /// Seconds `up` took.
    pub build_seconds: f64,
}

/// An active fault and how to undo it.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Fault {
    /// `cut`, `link-down`, `plane-down`, `drop`, `rate`, `trim`, `flap`.
    pub kind: String,
    /// Plane.
    pub plane: usize,
    /// Link name (`t0-0:t1-0`), or `*` for a plane fault.
    pub link: String,
    /// Human-readable parameters.
    pub detail: String,
    /// The process that runs it (flap), if any.
    pub pid: Option<u32>,
    /// What to undo, in order.
    pub undo: Vec<Undo>,
}

/// One thing a fault created.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub enum Undo {
    /// An nft table (`netdev` or `inet` family).
    NftTable {
        /// Namespace.
        ns: String,
        /// Family.
        family: String,
        /// Table name.
        table: String,
    },
    /// A qdisc (`root` or `clsact`) on a device.
    Qdisc {
        /// The device.
        end: LinkEnd,
        /// `root` or `clsact`.
        parent: String,
    },
    /// An admin-downed device and the routes the kernel deleted with it (`ip route replace` lines).
    LinkDown {
        /// The device.
        end: LinkEnd,
        /// Routes saved before the down.
        routes: Vec<String>,
    },
}

/// An exclusive lock on a prefix's state (held while a command reads, changes and writes it).
pub struct Lock(#[allow(dead_code, reason = "held for its flock")] File);

impl Lock {
    /// Takes the lock of `prefix` (a file next to, not in, its state directory, so `down` can remove that).
    pub fn take(prefix: &str) -> Result<Self> {
        std::fs::create_dir_all(RUN_DIR)
            .map_err(|e| Error::msg(format!("cannot create {RUN_DIR}: {e}")))?;
        let f = OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(Path::new(RUN_DIR).join(format!(".{prefix}.lock")))
            .map_err(|e| Error::msg(format!("lock: {e}")))?;
        // SAFETY: flock(2) on a descriptor owned by `f`, which lives as long as the lock.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(Error::msg(format!(
                "lock: {}",
                std::io::Error::last_os_error()
            )));
        }
        Ok(Self(f))
    }
}

impl State {
    /// Reads the state of `prefix`, `None` if there is none.
    pub fn load(prefix: &str) -> Result<Option<Self>> {
        match std::fs::read_to_string(file(prefix)) {
            Ok(t) => serde_json::from_str(&t)
                .map(Some)
                .map_err(|e| Error::msg(format!("{}: {e}", file(prefix).display()))),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::msg(format!("{}: {e}", file(prefix).display()))),
        }
    }

    /// Reads the state of `prefix`, failing if there is no fabric.
    pub fn need(prefix: &str) -> Result<Self> {
        Self::load(prefix)?.ok_or_else(|| {
            Error::msg(format!(
                "no fabric with prefix {prefix:?} (no {}); run `mrc-fabric up --prefix {prefix}` first",
                file(prefix).display()
            ))
        })
    }

    /// Writes the state atomically.
    pub fn save(&self) -> Result<()> {
        let path = file(&self.prefix);
        let tmp = path.with_extension("json.tmp");
        let text = serde_json::to_string_pretty(self).map_err(|e| Error::msg(e.to_string()))?;
        std::fs::write(&tmp, text)
            .and_then(|_| std::fs::rename(&tmp, &path))
            .map_err(|e| Error::msg(format!("{}: {e}", path.display())))
    }
}
