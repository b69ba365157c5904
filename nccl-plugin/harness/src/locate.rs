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
