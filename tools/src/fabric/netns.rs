//! Running things inside network namespaces: `ip -batch`, commands entered with `setns`, per-namespace sysctls.

use std::fs::File;
use std::io::Write;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

use super::{Error, Result};

/// Where `ip netns` keeps its namespace handles.
pub const NETNS_DIR: &str = "/run/netns";

/// Whether a named namespace exists.
pub fn exists(ns: &str) -> bool {
    Path::new(NETNS_DIR).join(ns).exists()
}

/// Opens a namespace handle.
fn open_ns(ns: &str) -> Result<File> {
    File::open(Path::new(NETNS_DIR).join(ns))
        .map_err(|e| Error::msg(format!("namespace {ns}: {e} (is the fabric up?)")))
}

/// A command that runs inside namespace `ns` (the child calls `setns` before `exec`; cheaper than `ip netns exec`,
/// which also remounts /sys).
pub fn command_in(ns: &str, prog: &str) -> Result<Command> {
    let f = open_ns(ns)?;
    let mut c = Command::new(prog);
    // SAFETY: the closure runs in the forked child before exec and only calls setns(2), which is
    // async-signal-safe; `f` is moved in and outlives the call, so the descriptor is valid.
    unsafe {
        c.pre_exec(move || {
            if libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) != 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    Ok(c)
}

fn check(what: &str, out: std::io::Result<Output>) -> Result<Output> {
    let out = out.map_err(|e| Error::msg(format!("{what}: cannot run: {e}")))?;
    if !out.status.success() {
        return Err(Error::msg(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stderr).trim(),
            String::from_utf8_lossy(&out.stdout).trim()
        )));
    }
    Ok(out)
}

/// Runs `prog args` in `ns`, failing with its stderr.
pub fn run_in(ns: &str, prog: &str, args: &[&str]) -> Result<Output> {
    let out = command_in(ns, prog)?
        .args(args)
        .stdin(Stdio::null())
        .output();
    check(&format!("{ns}: {prog} {}", args.join(" ")), out)
}

/// Runs `prog` in `ns` with `stdin` as its input.
pub fn run_in_with_input(ns: &str, prog: &str, args: &[&str], stdin: &str) -> Result<Output> {
    let (what, child) = spawn_in_with_input(ns, prog, args, stdin)?;
    finish(&what, child)
}

/// Starts `prog` in `ns` with `stdin` as its input; returns what to call it and the child, for [`finish`].
pub fn spawn_in_with_input(
    ns: &str,
    prog: &str,
    args: &[&str],
    stdin: &str,
) -> Result<(String, Child)> {
    let mut child = command_in(ns, prog)?
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::msg(format!("{ns}: {prog}: cannot run: {e}")))?;
    if let Some(mut i) = child.stdin.take() {
        let _ = i.write_all(stdin.as_bytes());
    }
    Ok((format!("{ns}: {prog} {}", args.join(" ")), child))
}

/// Waits for a child of [`spawn_in_with_input`], failing with its stderr.
pub fn finish(what: &str, child: Child) -> Result<Output> {
    check(what, child.wait_with_output())
}

/// Starts `ip [-n ns] [-force] -batch -` fed with `lines`; returns the child to wait on.
pub fn spawn_batch(ns: Option<&str>, lines: &[String], force: bool) -> Result<Child> {
    let mut c = Command::new("ip");
    if let Some(ns) = ns {
        c.args(["-n", ns]);
    }
    if force {
        c.arg("-force");
    }
    let mut child = c
        .args(["-batch", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| Error::msg(format!("cannot run ip (iproute2): {e}")))?;
    let mut text = lines.join("\n");
    text.push('\n');
    if let Some(mut i) = child.stdin.take() {
        i.write_all(text.as_bytes())
            .map_err(|e| Error::msg(format!("ip -batch: {e}")))?;
    }
    Ok(child)
}

/// Waits for a batch started by [`spawn_batch`].
pub fn wait_batch(what: &str, child: Child) -> Result<()> {
    check(what, child.wait_with_output()).map(|_| ())
}

/// Runs one `ip -batch` to completion.
pub fn batch(ns: Option<&str>, lines: &[String]) -> Result<()> {
    if lines.is_empty() {
        return Ok(());
    }
    let what = format!("ip -batch in {}", ns.unwrap_or("the root namespace"));
    wait_batch(&what, spawn_batch(ns, lines, false)?)
}

/// Sysctl settings: (path under /proc/sys, value).
pub type Settings = Vec<(String, String)>;

/// Writes `settings` (paths under /proc/sys, value) in every namespace of `namespaces`, from one helper thread
/// that enters each namespace in turn (no process per namespace).
pub fn sysctls(namespaces: &[(String, Settings)]) -> Result<()> {
    let work: Vec<(String, File, Settings)> = namespaces
        .iter()
        .map(|(ns, s)| Ok((ns.clone(), open_ns(ns)?, s.clone())))
        .collect::<Result<_>>()?;
    std::thread::spawn(move || -> Result<()> {
        for (ns, f, settings) in work {
            // SAFETY: plain syscall on a valid descriptor owned by `f`; it moves only this helper thread, which
            // ends right after the loop, into the namespace.
            if unsafe { libc::setns(f.as_raw_fd(), libc::CLONE_NEWNET) } != 0 {
                return Err(Error::msg(format!(
                    "setns {ns}: {}",
                    std::io::Error::last_os_error()
                )));
            }
            for (path, value) in settings {
                std::fs::write(format!("/proc/sys/{path}"), &value)
                    .map_err(|e| Error::msg(format!("{ns}: sysctl {path}={value}: {e}")))?;
            }
        }
        Ok(())
    })
    .join()
    .map_err(|_| Error::msg("sysctl thread panicked"))?
}
