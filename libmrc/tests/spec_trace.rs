//! Spec traceability: every requirement of `spec/*.md` is cited (`// spec: TAG`) somewhere in the code, and
//! every citation names a requirement that exists. Code is searched in every crate of the workspace.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Tags that follow each occurrence of `marker` in `text`: `[A-Z]+(-[A-Z0-9]+)+`.
fn tags_after(text: &str, marker: &str) -> Vec<String> {
    text.match_indices(marker)
        .filter_map(|(i, _)| {
            let rest = &text[i + marker.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            let tag = rest[..end].trim_end_matches('-');
            (tag.contains('-') && tag.starts_with(|c: char| c.is_ascii_uppercase()))
                .then(|| tag.to_string())
        })
        .collect()
}

fn files(dir: &Path, ext: &str, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            if path
                .file_name()
                .is_some_and(|n| n == "target" || n == "tests")
            {
                continue;
            }
            files(&path, ext, out);
        } else if path.extension().is_some_and(|e| e == ext) {
            out.push(path);
        }
    }
}

#[test]
fn every_requirement_is_cited_and_every_citation_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut specs = Vec::new();
    files(&root.join("spec"), "md", &mut specs);
    let mut defined: BTreeMap<String, PathBuf> = BTreeMap::new();
    for f in &specs {
        for tag in tags_after(&std::fs::read_to_string(f).unwrap(), "<a id=\"") {
            assert!(
                defined.insert(tag.clone(), f.clone()).is_none(),
                "{tag} is defined twice"
            );
        }
    }
    assert!(
        defined.len() >= 100,
        "only {} requirements found",
        defined.len()
    );

    let mut code = Vec::new();
    for krate in [
        "libmrc/src",
        "shim/src",
        "nccl-plugin/src",
        "sim/src",
        "benches",
    ] {
        files(&root.join(krate), "rs", &mut code);
    }
    let mut cited: BTreeSet<String> = BTreeSet::new();
    let mut unknown = Vec::new();
    for f in &code {
        for tag in tags_after(&std::fs::read_to_string(f).unwrap(), "spec: ") {
            if !defined.contains_key(&tag) {
                unknown.push(format!("{} cites {tag}", f.display()));
            }
            cited.insert(tag);
        }
    }
    assert!(
        unknown.is_empty(),
        "citations of requirements that do not exist:\n{}",
        unknown.join("\n")
    );
    let uncited: Vec<String> = defined
        .iter()
        .filter(|(t, _)| !cited.contains(*t))
        .map(|(t, f)| format!("{t} ({})", f.display()))
        .collect();
    assert!(
        uncited.is_empty(),
        "requirements cited nowhere in the code:\n{}",
        uncited.join("\n")
    );
}
