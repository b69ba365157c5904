//! Every function our headers declare is exported by the installed `libmrc.so` and defined in `libmrc.a`, and
//! nothing else of the `mrc_` namespace is; libmrc carries the verbs devices, so it exports exactly the verbs
//! entry points the shim's own library does.

mod common;

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// `nm` symbol names of `kind` (`T`: defined text) in `path`.
fn defined(path: &Path, dynamic: bool) -> BTreeSet<String> {
    let mut cmd = Command::new("nm");
    if dynamic {
        cmd.arg("-D");
    }
    let o = cmd
        .args(["--defined-only"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run nm ({e}): install binutils"));
    assert!(
        o.status.success(),
        "nm {}: {}",
        path.display(),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace().rev();
            let name = w.next()?;
            let kind = w.next()?;
            (kind == "T").then(|| name.to_string())
        })
        .collect()
}

#[test]
fn every_declared_function_is_exported() {
    let declared: BTreeSet<String> = common::our_functions().into_iter().collect();
    assert_eq!(declared.len(), 41, "{declared:?}");
    let lib = common::prefix().join("lib");
    let shared = defined(&lib.join("libmrc.so"), true);
    let missing: Vec<&String> = declared.iter().filter(|f| !shared.contains(*f)).collect();
    assert!(missing.is_empty(), "libmrc.so does not export {missing:?}");
    let extra: Vec<&String> = shared
        .iter()
        .filter(|s| s.starts_with("mrc_") && !declared.contains(*s))
        .collect();
    assert!(extra.is_empty(), "libmrc.so exports undeclared {extra:?}");
    let statik = defined(&lib.join("libmrc.a"), false);
    let missing: Vec<&String> = declared.iter().filter(|f| !statik.contains(*f)).collect();
    assert!(missing.is_empty(), "libmrc.a does not define {missing:?}");
}

#[test]
fn libmrc_exports_the_verbs_of_the_shim_and_nothing_more() {
    let declared: BTreeSet<String> = common::our_functions().into_iter().collect();
    let libmrc = defined(&common::prefix().join("lib/libmrc.so"), true);
    let shim = defined(&common::shim_lib(), true);
    let verbs: BTreeSet<&String> = shim.iter().filter(|s| s.starts_with("ibv_")).collect();
    assert!(verbs.len() >= 40, "the shim exports only {verbs:?}");
    let missing: Vec<&String> = shim.difference(&libmrc).collect();
    assert!(missing.is_empty(), "libmrc.so lacks the shim's {missing:?}");
    let more: Vec<&String> = libmrc
        .iter()
        .filter(|s| !shim.contains(*s) && !declared.contains(*s))
        .collect();
    assert!(
        more.is_empty(),
        "libmrc.so exports {more:?}, neither verbs nor OCP"
    );
    let ours: Vec<&String> = shim.iter().filter(|s| s.starts_with("mrc_")).collect();
    assert!(
        ours.is_empty(),
        "the shim exports libmrc's namespace: {ours:?}"
    );
}
