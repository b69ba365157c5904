//! The install step (`install.sh`): headers, `libmrc.so` with its SONAME links, `libmrc.a` and `mrc.pc`; a C
//! program builds with `pkg-config --cflags --libs mrc` and runs against the shared library, and links
//! statically against `libmrc.a` as well.

mod common;

use std::process::Command;

const EXPECTED: &str = "api 1.0.1 (oldest 1.0.0) ctl 1.0.1; rc 0 supported 0";

#[test]
fn install_lays_out_the_c_library() {
    let p = common::prefix();
    for f in [
        "include/mrc.h",
        "include/mrc_api_ver.h",
        "include/mrc_ctl.h",
        "include/mrc_ctl_api_ver.h",
        "lib/libmrc.so.1.0.1",
        "lib/libmrc.so.1",
        "lib/libmrc.so",
        "lib/libmrc.a",
        "lib/pkgconfig/mrc.pc",
    ] {
        assert!(
            p.join(f).exists(),
            "{f} is not installed under {}",
            p.display()
        );
    }
    let o = Command::new("readelf")
        .arg("-d")
        .arg(p.join("lib/libmrc.so"))
        .output()
        .expect("run readelf");
    let d = String::from_utf8_lossy(&o.stdout);
    assert!(d.contains("Library soname: [libmrc.so.1]"), "{d}");
}

#[test]
fn a_program_builds_with_pkg_config_and_runs() {
    let p = common::prefix();
    let pc = Command::new("pkg-config")
        .args(["--cflags", "--libs", "mrc"])
        .env("PKG_CONFIG_PATH", p.join("lib/pkgconfig"))
        .output()
        .unwrap_or_else(|e| panic!("cannot run pkg-config ({e}): install pkg-config"));
    assert!(
        pc.status.success(),
        "{}",
        String::from_utf8_lossy(&pc.stderr)
    );
    let flags = String::from_utf8_lossy(&pc.stdout).into_owned();
    assert!(flags.contains("-lmrc"), "{flags}");
    let exe = p.join("version-shared");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/version.c");
    let o = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(&src)
        .args(flags.split_whitespace())
        .output()
        .expect("run cc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let run = common::run(&exe, &[], common::Preload::Nothing, &[]);
    let (out, err) = common::text(&run);
    assert!(
        run.status.success() && out.contains(EXPECTED),
        "{out}\n{err}"
    );
}

#[test]
fn a_program_links_statically() {
    let p = common::prefix();
    let exe = p.join("version-static");
    let src = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/c/version.c");
    let o = Command::new("cc")
        .args(["-std=gnu11", "-Wall", "-Werror", "-o"])
        .arg(&exe)
        .arg(format!("-I{}", p.join("include").display()))
        .arg(&src)
        .arg(p.join("lib/libmrc.a"))
        // mrc.pc's Libs.private: what the Rust runtime inside libmrc.a needs.
        .args([
            "-libverbs",
            "-lgcc_s",
            "-lutil",
            "-lrt",
            "-lpthread",
            "-lm",
            "-ldl",
            "-lc",
        ])
        .output()
        .expect("run cc");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let ldd = Command::new("ldd").arg(&exe).output().expect("run ldd");
    assert!(
        !String::from_utf8_lossy(&ldd.stdout).contains("libmrc"),
        "linked dynamically after all"
    );
    let run = Command::new(&exe)
        .env_remove("LD_PRELOAD")
        .output()
        .expect("run");
    let (out, err) = common::text(&run);
    assert!(
        run.status.success() && out.contains(EXPECTED),
        "{out}\n{err}"
    );
}
