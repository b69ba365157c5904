//! Every reference in the project's Markdown resolves: each relative link `[text](path#anchor)` names a file
//! that exists (and a heading of it, for an anchor), and each repository path a README names in backquotes
//! (`shim/src/lib.rs`, `../spec/host.md`) exists, beside the README or from the root. A path counts as the
//! project's when it names a source or Markdown file or its first component is beside the README or at the root;
//! other paths (`target/…`, `sim-out/report.json`, `/run/…`) are what programs write and are not checked. A path
//! on the development machine (`/work/…`) is always an error.

use std::path::{Component, Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("the workspace root")
        .to_path_buf()
}

/// Markdown files under `dir`, build outputs and fuzzing work folders left out.
fn markdown(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if path.is_dir() {
            let skip = name.starts_with('.')
                || ["target", "work", "corpus", "artifacts", "coverage"].contains(&&*name);
            if !skip {
                markdown(&path, out);
            }
        } else if name.ends_with(".md") {
            out.push(path);
        }
    }
}

/// GitHub's anchor for a heading: lower case, punctuation other than `-` and `_` dropped, spaces to `-`.
fn slug(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_alphanumeric() || c == '-' || c == '_' => Some(c),
            _ => None,
        })
        .collect()
}

/// The anchors of a Markdown file's headings (outside code blocks).
fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(slug(line.trim_start_matches('#')));
        }
    }
    out
}

/// The prose of a Markdown file: its lines outside fenced code blocks, with their line numbers.
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// Targets of inline links and images: `](target)`, title dropped.
fn link_targets(line: &str) -> Vec<&str> {
    line.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &line[i + 2..];
            let end = rest.find(')')?;
            rest[..end].split_whitespace().next()
        })
        .collect()
}

/// Backquoted spans of a line.
fn code_spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// A backquoted span that names a file or folder: one word with a `/`, no placeholders, options or URLs.
fn as_path(span: &str) -> Option<&str> {
    let span = span.trim_end_matches([',', '.', ':']);
    let plain = span
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-".contains(c));
    (plain && span.contains('/') && !span.starts_with('-') && !span.contains("//")).then_some(span)
}

/// Whether `rel` starts with a component that exists under `base`, so that it names something of the project.
fn anchored_in(base: &Path, rel: &Path) -> bool {
    let mut first = PathBuf::new();
    for c in rel.components() {
        first.push(c);
        if !matches!(c, Component::ParentDir | Component::CurDir) {
            break;
        }
    }
    base.join(first).exists()
}

/// What the root `.gitignore` names as a folder or file of the root (`/target`, `/fuzz/logs/`, `/scale-out*`):
/// build and run outputs, which a fresh clone does not have.
fn ignored(root: &Path) -> Vec<String> {
    std::fs::read_to_string(root.join(".gitignore"))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix('/'))
        .map(|l| l.trim_end_matches(['/', '*']).to_string())
        .filter(|l| !l.is_empty())
        .collect()
}

/// `p` (relative to `dir`) under one of the `ignored` root paths.
fn is_output(root: &Path, dir: &Path, p: &Path, ignored: &[String]) -> bool {
    [root.join(p), dir.join(p)].iter().any(|full| {
        let full: PathBuf = full.components().fold(PathBuf::new(), |mut acc, c| {
            match c {
                Component::ParentDir => {
                    acc.pop();
                }
                Component::CurDir => {}
                c => acc.push(c),
            }
            acc
        });
        full.strip_prefix(root).is_ok_and(|rel| {
            let rel = rel.to_string_lossy();
            ignored.iter().any(|i| rel.starts_with(i.as_str()))
        })
    })
}

fn check_file(file: &Path, root: &Path, problems: &mut Vec<String>) {
    let outputs = ignored(root);
    let text = std::fs::read_to_string(file).expect("read a Markdown file");
    let dir = file.parent().expect("a folder");
    let shown = file
        .strip_prefix(root)
        .unwrap_or(file)
        .display()
        .to_string();
    let is_readme = file.file_name().is_some_and(|n| n == "README.md");
    for (n, line) in prose(&text) {
        for target in link_targets(line) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, anchor) = target.split_once('#').unwrap_or((target, ""));
            let dest = if path.is_empty() {
                file.to_path_buf()
            } else {
                dir.join(path)
            };
            if !dest.exists() {
                problems.push(format!("{shown}:{n}: link to {target}: no such file"));
            } else if !anchor.is_empty() && dest.is_file() {
                let body = std::fs::read_to_string(&dest).unwrap_or_default();
                if !anchors(&body).iter().any(|a| a == anchor) {
                    problems.push(format!("{shown}:{n}: link to {target}: no such heading"));
                }
            }
        }
        if !is_readme {
            continue;
        }
        for span in code_spans(line) {
            let Some(p) = as_path(span) else { continue };
            if p.starts_with("/work/") || p == "/work" {
                problems.push(format!(
                    "{shown}:{n}: `{p}` is on the development machine, not in the project"
                ));
                continue;
            }
            let rel = Path::new(p);
            if rel.is_absolute() || is_output(root, dir, rel, &outputs) {
                continue;
            }
            let source = matches!(
                rel.extension().and_then(|e| e.to_str()),
                Some("md" | "rs" | "c" | "h" | "sh" | "py")
            );
            let ours = source || anchored_in(dir, rel) || anchored_in(root, rel);
            if ours && !dir.join(rel).exists() && !root.join(rel).exists() {
                problems.push(format!(
                    "{shown}:{n}: `{p}` is neither beside this file nor at the root"
                ));
            }
        }
    }
}

#[test]
fn every_reference_in_the_readmes_resolves() {
    let root = root();
    let mut files = Vec::new();
    markdown(&root, &mut files);
    files.sort();
    let readmes = files
        .iter()
        .filter(|f| f.file_name().is_some_and(|n| n == "README.md"))
        .count();
    assert!(
        readmes >= 10,
        "found only {readmes} READMEs under {}",
        root.display()
    );
    let mut problems = Vec::new();
    for f in &files {
        check_file(f, &root, &mut problems);
    }
    println!("{} Markdown files ({readmes} READMEs) checked", files.len());
    assert!(
        problems.is_empty(),
        "dead references:\n{}",
        problems.join("\n")
    );
}

#[test]
fn the_checker_sees_dead_links_and_paths() {
    let dir = std::env::temp_dir().join(format!("mrc-doc-links-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("sub")).expect("temp folder");
    std::fs::create_dir_all(dir.join("out/x")).expect("temp folder");
    std::fs::write(dir.join(".gitignore"), "/out/\n").expect("write");
    std::fs::write(dir.join("sub/a.md"), "# A title (`x`)\n").expect("write");
    let readme = dir.join("sub/README.md");
    std::fs::write(
        &readme,
        "[ok](a.md#a-title-x) [bad](b.md) [anchor](a.md#nope) `sub/a.md` `sub/gone.rs` `elsewhere/gone.md` \
         `target/x/y` `out/x/r.rs` `../out/gone.md` `/work/notes.md`\n```sh\n[in code](nowhere.md) `sub/code.rs`\n```\n",
    )
    .expect("write");
    let mut problems = Vec::new();
    check_file(&readme, &dir, &mut problems);
    std::fs::remove_dir_all(&dir).ok();
    let text = problems.join("\n");
    assert_eq!(problems.len(), 5, "{text}");
    for want in [
        "b.md: no such file",
        "a.md#nope: no such heading",
        "`sub/gone.rs`",
        "`elsewhere/gone.md`",
        "`/work/notes.md`",
    ] {
        assert!(text.contains(want), "missing {want} in\n{text}");
    }
}
