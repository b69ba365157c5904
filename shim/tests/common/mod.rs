//! Helpers shared by the shim's integration tests: where the preload library is, compiling C probes against
//! the installed rdma-core headers, running programs under `LD_PRELOAD`.
#![allow(dead_code, reason = "each test binary uses a subset")]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The preload library built with these tests: `cargo test` writes it into `target/<profile>/deps/` (the
/// cdylib comes out of the same rustc run as the rlib the tests link), `cargo build` into `target/<profile>/`;
/// the newer of the two is the current one.
pub(crate) fn shim_lib() -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    // target/<profile>/deps/<test>-<hash>
    let deps = exe.parent().expect("target/<profile>/deps");
    let profile = deps.parent().expect("target/<profile>");
    let candidates = [
        deps.join("libmrc_verbs_shim.so"),
        profile.join("libmrc_verbs_shim.so"),
    ];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!(
                "libmrc_verbs_shim.so is in neither {} nor {}: build the mrc-verbs-shim cdylib",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// Installs hint for a missing system package.
pub(crate) fn need(what: &str, pkg: &str) -> ! {
    panic!("{what} is missing: install the Debian package {pkg} (.ci/run does, as root)")
}

/// Compiles `src` (a path under `tests/c/`) into an executable in the test's scratch directory.
pub(crate) fn compile_c(src: &str, extra: &[&str]) -> PathBuf {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        need("/usr/include/infiniband/verbs.h", "libibverbs-dev");
    }
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/c")
        .join(src);
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join(src.file_stem().expect("file name"));
    let o = Command::new("cc")
        .arg("-Wall")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .args(extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc ({e}): install gcc"));
    assert!(
        o.status.success(),
        "compiling {}:\n{}",
        src.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// How long a program run by [`preload`] may take: a hang fails the test (exit status 124) instead of
/// holding it forever.
pub(crate) const RUN_LIMIT_S: &str = "120";

/// Runs `cmd` with the shim preloaded and the given extra environment, killed after [`RUN_LIMIT_S`].
pub(crate) fn preload(cmd: &mut Command, env: &[(&str, &str)]) -> Output {
    let mut limited = Command::new("timeout");
    limited
        .arg(RUN_LIMIT_S)
        .arg(cmd.get_program())
        .args(cmd.get_args());
    if let Some(dir) = cmd.get_current_dir() {
        limited.current_dir(dir);
    }
    for (k, v) in cmd.get_envs() {
        match v {
            Some(v) => limited.env(k, v),
            None => limited.env_remove(k),
        };
    }
    limited.env("LD_PRELOAD", shim_lib());
    for (k, v) in env {
        limited.env(k, v);
    }
    limited.output().expect("run the program")
}

/// Path of an installed tool, or a failure naming its package.
pub(crate) fn tool(name: &str, pkg: &str) -> PathBuf {
    for dir in ["/usr/bin", "/usr/local/bin", "/bin"] {
        let p = Path::new(dir).join(name);
        if p.exists() {
            return p;
        }
    }
    need(name, pkg)
}

/// Stdout and stderr as text, for assertion messages.
pub(crate) fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}
