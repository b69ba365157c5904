//! Spec traceability: every requirement of `spec/*.md` carries its anchor and is cited (`// spec: TAG`)
//! somewhere in the code, and every citation names a requirement that exists. Code is searched in every crate
//! of the workspace (the members of the root `Cargo.toml`, and `fuzz/`), tests excluded.

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

/// The requirement tag a spec line starts with, anchored or not: `TAG.`, `**TAG**` or `- **TAG**` at the start
/// of the line, where TAG is `[A-Z]+(-[A-Z0-9]+)+` ending in a digit.
fn leading_tag(line: &str) -> Option<&str> {
    let rest = line
        .trim_start()
        .trim_start_matches("- ")
        .trim_start_matches("**");
    let end = rest
        .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'))
        .unwrap_or(rest.len());
    let tag = &rest[..end];
    let after = &rest[end..];
    (tag.contains('-')
        && tag.starts_with(|c: char| c.is_ascii_uppercase())
        && tag.ends_with(|c: char| c.is_ascii_digit())
        && (after.starts_with(". ") || after.starts_with("**") || after.starts_with(": ")))
    .then_some(tag)
}

/// Requirements written without their anchor, as `file:line TAG`.
fn unanchored(path: &Path, text: &str) -> Vec<String> {
    text.lines()
        .enumerate()
        .filter(|(_, l)| {
            !l.trim_start()
                .trim_start_matches("- ")
                .starts_with("<a id=\"")
        })
        .filter_map(|(n, l)| Some(format!("{}:{} {}", path.display(), n + 1, leading_tag(l)?)))
        .collect()
}

/// The workspace's member folders, read from the root `Cargo.toml`.
fn members(root: &Path) -> Vec<PathBuf> {
    let manifest = std::fs::read_to_string(root.join("Cargo.toml")).unwrap();
    let list = manifest
        .split("members = [")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .expect("a `members = [...]` list in the root Cargo.toml");
    let out: Vec<PathBuf> = list
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|m| root.join(m))
        .collect();
    for m in &out {
        assert!(
            m.join("Cargo.toml").is_file(),
            "{} is no crate",
            m.display()
        );
    }
    out
}

#[test]
fn requirement_lines_without_an_anchor_are_found() {
    let bare = "## X\n\nHOST-IO-9. Something normative.\n- **WIRE-X-2** Another.\n";
    let anchored =
        "<a id=\"HOST-IO-9\"></a>**HOST-IO-9** Fine.\n- <a id=\"W-X-2\"></a>**W-X-2** Fine.\n";
    let p = Path::new("x.md");
    assert_eq!(unanchored(p, bare), ["x.md:3 HOST-IO-9", "x.md:4 WIRE-X-2"]);
    assert!(unanchored(p, anchored).is_empty());
    assert!(unanchored(p, "HOST-DGRAM-3: its token only, in prose.").len() == 1);
    assert!(unanchored(p, "On CLOSED (HOST-DGRAM-3: its token only)").is_empty());
}

#[test]
fn every_requirement_is_cited_and_every_citation_exists() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut specs = Vec::new();
    files(&root.join("spec"), "md", &mut specs);
    let mut defined: BTreeMap<String, PathBuf> = BTreeMap::new();
    let mut bare = Vec::new();
    for f in &specs {
        let text = std::fs::read_to_string(f).unwrap();
        bare.extend(unanchored(f, &text));
        for tag in tags_after(&text, "<a id=\"") {
            assert!(
                defined.insert(tag.clone(), f.clone()).is_none(),
                "{tag} is defined twice"
            );
        }
    }
    assert!(
        bare.is_empty(),
        "requirements without an anchor (write `<a id=\"TAG\"></a>**TAG**`):\n{}",
        bare.join("\n")
    );
    assert!(
        defined.len() >= 100,
        "only {} requirements found",
        defined.len()
    );

    let mut code = Vec::new();
    let crates = members(&root);
    for krate in crates.iter().chain([&root.join("fuzz")]) {
        files(krate, "rs", &mut code);
    }
    for must in [
        "libmrc",
        "host",
        "tools",
        "shim",
        "capi",
        "ffi",
        "nccl-plugin",
        "sim",
    ] {
        assert!(
            crates.contains(&root.join(must)),
            "{must} is not a workspace member any more: {crates:?}"
        );
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
