//! Every requirement of `spec/wire.md` is cited (`spec: WIRE-...`) somewhere under `libmrc/src/wire/`, and
//! every `WIRE-` citation in `libmrc/src/` names a requirement that exists.

use std::collections::BTreeSet;
use std::path::Path;

/// The `WIRE-...` tags that follow each occurrence of `prefix` in `text`.
fn tags_after(text: &str, prefix: &str) -> Vec<String> {
    text.match_indices(prefix)
        .map(|(i, _)| {
            let rest = &text[i + prefix.len()..];
            let end = rest
                .find(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '-'))
                .unwrap_or(rest.len());
            format!("WIRE-{}", rest[..end].trim_end_matches('-'))
        })
        .collect()
}

fn rust_files(dir: &Path, out: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

fn citations(dir: &Path) -> BTreeSet<String> {
    let mut files = Vec::new();
    rust_files(dir, &mut files);
    files
        .iter()
        .flat_map(|f| tags_after(&std::fs::read_to_string(f).unwrap(), "spec: WIRE-"))
        .collect()
}

#[test]
fn wire_tags_are_cited_and_citations_exist() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let spec = std::fs::read_to_string(root.join("../spec/wire.md")).unwrap();
    let defined: BTreeSet<String> = tags_after(&spec, "id=\"WIRE-").into_iter().collect();
    assert!(defined.len() >= 30, "only {} tags found", defined.len());

    let in_wire = citations(&root.join("src/wire"));
    let uncited: Vec<_> = defined.difference(&in_wire).collect();
    assert!(uncited.is_empty(), "not cited under src/wire: {uncited:?}");

    let anywhere = citations(&root.join("src"));
    let unknown: Vec<_> = anywhere.difference(&defined).collect();
    assert!(
        unknown.is_empty(),
        "cited but not in spec/wire.md: {unknown:?}"
    );
}
