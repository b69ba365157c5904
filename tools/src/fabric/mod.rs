//! `mrc-fabric`: a two-tier, multi-plane SRv6 uSID fabric built from Linux network namespaces, with run-time
//! fault injection. See `tools/README.md` for the addressing plan and the commands.
//!
//! - [`plan`]: the addressing plan and the `ip` commands (pure).
//! - [`state`]: the state file listing what was created.
//! - [`netns`]: running commands inside namespaces.
//! - [`faults`]: link down/up, silent cuts, random drop, rate limits, flapping, trimming.
//! - [`show`]: counters and active faults.

pub mod faults;
pub mod netns;
pub mod plan;
pub mod show;
pub mod state;

use std::fmt;
use std::time::Instant;

use plan::{Role, Topology};
use state::{Lock, State};

/// An error: a bad argument (naming it and the allowed values) or a failed operation.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// The offending argument, if the error is a usage error.
    pub arg: Option<&'static str>,
    /// What went wrong.
    pub message: String,
}

impl Error {
    /// A bad argument.
    pub fn arg(arg: &'static str, message: impl Into<String>) -> Self {
        Self {
            arg: Some(arg),
            message: message.into(),
        }
    }

    /// A failed operation.
    pub fn msg(message: impl Into<String>) -> Self {
        Self {
            arg: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.arg {
            Some(a) => write!(f, "invalid value for {a}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl std::error::Error for Error {}

/// Result of fabric operations.
pub type Result<T> = std::result::Result<T, Error>;

/// Checks a namespace prefix: 1 to 12 characters, lowercase letters and digits, starting with a letter.
pub fn check_prefix(prefix: &str) -> Result<()> {
    let ok = (1..=12).contains(&prefix.len())
        && prefix.starts_with(|c: char| c.is_ascii_lowercase())
        && prefix
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit());
    if ok {
        Ok(())
    } else {
        Err(Error::arg(
            "--prefix",
            format!(
                "{prefix:?}; allowed: 1 to 12 lowercase letters or digits, starting with a letter"
            ),
        ))
    }
}

/// What `up` built.
#[derive(Debug, Clone)]
pub struct Built {
    /// The state written.
    pub state: State,
    /// Wall-clock seconds.
    pub seconds: f64,
}

fn sysctl_settings(forwarding: bool, ignore_linkdown: bool) -> Vec<(String, String)> {
    let mut v = Vec::new();
    let mut set = |k: &str, val: &str| v.push((format!("net/ipv6/{k}"), val.to_string()));
    for c in ["default", "all"] {
        set(&format!("conf/{c}/accept_dad"), "0");
        set(&format!("conf/{c}/keep_addr_on_down"), "1");
        set(&format!("conf/{c}/accept_ra"), "0");
        set(&format!("conf/{c}/seg6_enabled"), "1");
        set(
            &format!("conf/{c}/ignore_routes_with_linkdown"),
            if ignore_linkdown { "1" } else { "0" },
        );
        set(
            &format!("conf/{c}/forwarding"),
            if forwarding { "1" } else { "0" },
        );
    }
    // ECMP (T0 -> T1s for plain traffic) hashes on L4 ports.
    set("fib_multipath_hash_policy", "1");
    v
}

/// Builds a fabric. Refuses if the prefix's fabric (state or any of its namespaces) exists; on failure removes
/// what it created.
pub fn up(prefix: &str, topo: Topology, ignore_linkdown: bool) -> Result<Built> {
    check_prefix(prefix)?;
    topo.validate()?;
    let _lock = Lock::take(prefix)?;
    if State::load(prefix)?.is_some() {
        return Err(Error::msg(format!(
            "a fabric with prefix {prefix:?} already exists ({}); run `mrc-fabric down --prefix {prefix}` first",
            state::file(prefix).display()
        )));
    }
    let plan = topo.plan(prefix);
    if let Some((ns, _)) = plan.namespaces.iter().find(|(n, _)| netns::exists(n)) {
        return Err(Error::msg(format!(
            "namespace {ns} already exists but has no mrc-fabric state; pick another --prefix (it is not ours to remove)"
        )));
    }
    let t = Instant::now();
    let mut st = State {
        version: 1,
        prefix: prefix.to_string(),
        topology: topo,
        ignore_linkdown,
        complete: false,
        namespaces: plan.namespaces.iter().map(|(n, _)| n.clone()).collect(),
        node_files: (0..topo.hosts())
            .map(|k| state::node_file(prefix, k))
            .collect(),
        faults: Vec::new(),
        build_seconds: 0.0,
    };
    // Written first so that `down` can clean up a half-built fabric.
    let d = state::dir(prefix);
    std::fs::create_dir_all(&d)
        .map_err(|e| Error::msg(format!("cannot create {}: {e}", d.display())))?;
    st.save()?;
    match build(&plan, &topo, &st, ignore_linkdown) {
        Ok(()) => {
            st.complete = true;
            st.build_seconds = t.elapsed().as_secs_f64();
            st.save()?;
            Ok(Built {
                seconds: st.build_seconds,
                state: st,
            })
        }
        Err(e) => {
            let _ = remove(&st);
            Err(Error::msg(format!("up failed (cleaned up): {e}")))
        }
    }
}

fn build(plan: &plan::Plan, topo: &Topology, st: &State, ignore_linkdown: bool) -> Result<()> {
    let adds: Vec<String> = plan
        .namespaces
        .iter()
        .map(|(n, _)| format!("netns add {n}"))
        .collect();
    netns::batch(None, &adds)?;
    let settings: Vec<(String, Vec<(String, String)>)> = plan
        .namespaces
        .iter()
        .map(|(n, r)| {
            (
                n.clone(),
                sysctl_settings(!matches!(r, Role::Host(_)), ignore_linkdown),
            )
        })
        .collect();
    netns::sysctls(&settings)?;
    netns::batch(None, &plan.veths)?;
    let mut children = Vec::new();
    for ((ns, _), b) in plan.namespaces.iter().zip(&plan.batches) {
        let lines: Vec<String> = b.iter().flatten().cloned().collect();
        children.push((ns, netns::spawn_batch(Some(ns), &lines, false)?));
    }
    let mut first_err = None;
    for (ns, c) in children {
        if let Err(e) = netns::wait_batch(&format!("ip -n {ns} -batch"), c) {
            first_err.get_or_insert(e);
        }
    }
    if let Some(e) = first_err {
        return Err(e);
    }
    for (k, path) in st.node_files.iter().enumerate() {
        std::fs::write(path, topo.node_file(k))
            .map_err(|e| Error::msg(format!("{}: {e}", path.display())))?;
    }
    Ok(())
}

/// Ends the flap processes the state lists (only if the pid is still an `mrc-fabric` process).
fn stop_flappers(st: &State) {
    for f in &st.faults {
        let Some(pid) = f.pid else { continue };
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        if String::from_utf8_lossy(&cmdline).contains("mrc-fabric") && pid != std::process::id() {
            // SAFETY: kill(2) with a pid read from our own state file and checked to be an mrc-fabric process.
            unsafe {
                libc::kill(pid as libc::pid_t, libc::SIGTERM);
            }
        }
    }
}

/// Removes what the state lists: its namespaces (with them go every veth, nft table, qdisc and BPF program a
/// fault put there), the node files and the state directory.
fn remove(st: &State) -> Result<usize> {
    stop_flappers(st);
    let dels: Vec<String> = st
        .namespaces
        .iter()
        .filter(|n| netns::exists(n))
        .map(|n| format!("netns del {n}"))
        .collect();
    netns::batch(None, &dels)?;
    let dir = state::dir(&st.prefix);
    std::fs::remove_dir_all(&dir).map_err(|e| Error::msg(format!("{}: {e}", dir.display())))?;
    let _ = std::fs::remove_file(
        std::path::Path::new(state::RUN_DIR).join(format!(".{}.lock", st.prefix)),
    );
    Ok(dels.len())
}

/// Tears a fabric down; `Ok(None)` if there was none (idempotent), else the number of namespaces deleted.
pub fn down(prefix: &str) -> Result<Option<usize>> {
    check_prefix(prefix)?;
    let lock = Lock::take(prefix)?;
    let Some(st) = State::load(prefix)? else {
        let _ = std::fs::remove_dir(state::dir(prefix));
        drop(lock);
        let _ = std::fs::remove_file(
            std::path::Path::new(state::RUN_DIR).join(format!(".{prefix}.lock")),
        );
        return Ok(None);
    };
    remove(&st).map(Some)
}
