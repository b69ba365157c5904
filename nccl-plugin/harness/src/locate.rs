//! Where the built plugin is: cargo writes `libnccl_net_mrc.so` into `target/<profile>/deps/` when it builds
//! this crate (the plugin is a dependency) and into `target/<profile>/` on `cargo build -p mrc-nccl-net`.

use std::path::{Path, PathBuf};

/// The library file cargo produces.
pub const FILE: &str = "libnccl_net_mrc.so";

/// The plugin built alongside `exe` (a test or harness binary in `target/<profile>/[deps/]`): the newest of
/// the candidate files, or an explanation naming where it looked.
pub fn plugin_near(exe: &Path) -> Result<PathBuf, String> {
    let dir = exe.parent().ok_or("executable without a directory")?;
    let profile = if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let candidates = [profile.join("deps").join(FILE), profile.join(FILE)];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p)
        .ok_or_else(|| {
            format!(
                "{FILE} not found in {} or {} (build it with `cargo build -p mrc-nccl-net`)",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// A binary of the workspace (`mrc-perf`) next to this one, or how to build it.
pub fn sibling(name: &str) -> Result<PathBuf, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let dir = exe.parent().ok_or("executable without a directory")?;
    let dir = if dir.ends_with("deps") {
        dir.parent().unwrap_or(dir)
    } else {
        dir
    };
    let p = dir.join(name);
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} not found (build it with `cargo build --release -p mrc-tools`, or pass --perf PATH or --perf none)",
            p.display()
        ))
    }
}
