//! Helpers shared by libmrc's integration tests: where cargo left the libraries, the install step into a
//! scratch prefix, compiling C against the installed headers, running programs with libmrc preloaded.
#![allow(dead_code, reason = "each test binary uses a subset")]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// `target/<profile>/deps`, where `cargo test` writes both cdylibs (libmrc_capi.so and, as libmrc's dependency,
/// libmrc_verbs_shim.so) — or `target/<profile>` after `cargo build`; the newer copy wins.
fn newest(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("test executable path");
    let deps = exe.parent().expect("target/<profile>/deps");
    let profile = deps.parent().expect("target/<profile>");
    let candidates = [deps.join(name), profile.join(name)];
    candidates
        .iter()
        .filter_map(|p| Some((std::fs::metadata(p).ok()?.modified().ok()?, p.clone())))
        .max()
        .map(|(_, p)| p)
        .unwrap_or_else(|| {
            panic!(
                "{name} is in neither {} nor {}: build the workspace (cargo build --workspace)",
                candidates[0].display(),
                candidates[1].display()
            )
        })
}

/// The verbs shim's own library (for pure verbs programs; libmrc carries the same verbs).
pub(crate) fn shim_lib() -> PathBuf {
    newest("libmrc_verbs_shim.so")
}

/// The directory holding the freshly built libmrc_capi.so and libmrc_capi.a.
pub(crate) fn built_dir() -> PathBuf {
    let so = newest("libmrc_capi.so");
    let dir = so.parent().expect("a directory").to_path_buf();
    assert!(
        dir.join("libmrc_capi.a").exists(),
        "libmrc_capi.a is missing next to {}",
        so.display()
    );
    dir
}

/// Installs libmrc with `install.sh --from` into this test binary's scratch prefix (once per binary).
pub(crate) fn prefix() -> &'static Path {
    static PREFIX: OnceLock<PathBuf> = OnceLock::new();
    PREFIX.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let name = exe
            .file_stem()
            .expect("name")
            .to_string_lossy()
            .into_owned();
        let prefix = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("prefix-{name}"));
        let _ = std::fs::remove_dir_all(&prefix);
        let o = Command::new(Path::new(env!("CARGO_MANIFEST_DIR")).join("install.sh"))
            .arg("--prefix")
            .arg(&prefix)
            .arg("--from")
            .arg(built_dir())
            .output()
            .expect("run capi/install.sh");
        assert!(
            o.status.success(),
            "install.sh failed:\n{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        prefix
    })
}

/// Installs hint for a missing system package.
pub(crate) fn need(what: &str, pkg: &str) -> ! {
    panic!("{what} is missing: install the Debian package {pkg} (.ci/run does, as root)")
}

/// Compiles `tests/c/<src>` against the installed headers and links it to the installed libmrc (plus `extra`);
/// once per test binary and source, since the tests of a binary run in parallel.
pub(crate) fn compile_c(src: &str, extra: &[&str]) -> PathBuf {
    static BUILT: std::sync::Mutex<BTreeMap<String, PathBuf>> =
        std::sync::Mutex::new(BTreeMap::new());
    let mut built = BUILT.lock().unwrap_or_else(|p| p.into_inner());
    let key = format!("{src} {}", extra.join(" "));
    if let Some(p) = built.get(&key) {
        return p.clone();
    }
    let exe = compile_c_now(src, extra);
    built.insert(key, exe.clone());
    exe
}

fn compile_c_now(src: &str, extra: &[&str]) -> PathBuf {
    if !Path::new("/usr/include/infiniband/verbs.h").exists() {
        need("/usr/include/infiniband/verbs.h", "libibverbs-dev");
    }
    let prefix = prefix();
    // `examples/x.c` names an example program; anything else a test program in `tests/c`.
    let src = match src.strip_prefix("examples/") {
        Some(e) => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("examples")
            .join(e),
        None => Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/c")
            .join(src),
    };
    let out = prefix.join(src.file_stem().expect("file name"));
    let o = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Wextra", "-Werror", "-o"])
        .arg(&out)
        .arg(format!("-I{}", prefix.join("include").display()))
        .arg(&src)
        .arg(format!("-L{}", prefix.join("lib").display()))
        .args(extra)
        .args(["-lmrc", "-libverbs"])
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

/// What a program runs with in front of its own libraries.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Preload {
    /// Nothing: the program's link order decides (`-lmrc` before `-libverbs` gives it libmrc's verbs).
    Nothing,
    /// The installed libmrc.so, as capi/README.md says to run OCP programs.
    Libmrc,
    /// The shim's own library in front of libmrc.so: two copies of the verbs devices, the program's `ibv_*`
    /// calls answered by the shim's.
    ShimThenLibmrc,
}

/// Runs `exe` with the installed libmrc on the library path, `preload` and extra environment; killed after
/// 120 s, so that a hang fails the test (exit status 124) instead of holding it.
pub(crate) fn run(exe: &Path, args: &[&str], preload: Preload, env: &[(&str, &str)]) -> Output {
    let mut cmd = Command::new("timeout");
    cmd.arg("120")
        .arg(exe)
        .args(args)
        .env("LD_LIBRARY_PATH", prefix().join("lib"))
        .env_remove("LD_PRELOAD");
    let libmrc = prefix().join("lib/libmrc.so");
    match preload {
        Preload::Nothing => {}
        Preload::Libmrc => {
            cmd.env("LD_PRELOAD", &libmrc);
        }
        Preload::ShimThenLibmrc => {
            cmd.env(
                "LD_PRELOAD",
                format!("{}:{}", shim_lib().display(), libmrc.display()),
            );
        }
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd.output().expect("run the program")
}

/// Stdout and stderr as text, for assertion messages.
pub(crate) fn text(o: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// The prototypes our headers declare, normalised by gcc. Worked out once per test binary, in files of its
/// own: two tests that compiled the same file at once read a truncated aux-info file and found no function.
pub(crate) fn our_prototypes() -> Vec<String> {
    static PROTOTYPES: OnceLock<Vec<String>> = OnceLock::new();
    PROTOTYPES.get_or_init(gcc_prototypes).clone()
}

fn gcc_prototypes() -> Vec<String> {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("prototypes-{}", std::process::id()));
    std::fs::create_dir_all(&dir).expect("create the prototypes folder");
    let src = dir.join("prototypes.c");
    std::fs::write(&src, "#include <mrc_ctl.h>\n").expect("write prototypes.c");
    let aux = dir.join("prototypes.aux");
    let include = format!(
        "-I{}",
        Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("include")
            .display()
    );
    let o = Command::new("cc")
        .args([
            "-std=gnu11",
            "-w",
            &include,
            "-aux-info",
            &aux.to_string_lossy(),
            "-c",
            &src.to_string_lossy(),
            "-o",
            &dir.join("prototypes.o").to_string_lossy(),
        ])
        .output()
        .unwrap_or_else(|e| panic!("cannot run cc ({e}): install gcc"));
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let text = std::fs::read_to_string(&aux).expect("read the aux-info file");
    let mut v: Vec<String> = text
        .lines()
        .filter(|l| l.starts_with("/* ") && l.contains("/mrc") && l.contains(".h:"))
        .filter_map(|l| l.split_once("*/").map(|(_, p)| p.trim().to_string()))
        .collect();
    v.sort();
    let _ = std::fs::remove_dir_all(&dir);
    v
}

/// The function names our headers declare.
pub(crate) fn our_functions() -> Vec<String> {
    our_prototypes()
        .iter()
        .filter_map(|p| {
            let before_paren = p.split(" (").next()?;
            Some(before_paren.rsplit([' ', '*']).next()?.to_string())
        })
        .collect()
}
