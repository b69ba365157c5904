//! One way for a test to say that it did not run.

use std::io::Write as _;
use std::path::{Path, PathBuf};

/// The variable naming a file to which every skip appends one line (`.ci/run` counts them).
pub const SKIP_LOG: &str = "MRC_SKIP_LOG";

/// Reports that `test` skipped its checks, and why: `*** SKIPPED: <test>: <why> ***` straight to the process's
/// stderr (past the test harness's capture, which hides a passing test's `eprintln!`), and one line appended to
/// the file named by `MRC_SKIP_LOG` when it is set. The caller then returns: a skipped test passes, loudly.
pub fn skip(test: &str, why: &str) {
    let line = format!("*** SKIPPED: {test}: {why} ***");
    let _ = std::io::stderr().write_all(format!("\n{line}\n").as_bytes());
    if let Some(path) = std::env::var_os(SKIP_LOG).map(PathBuf::from)
        && let Err(e) = log_to(&path, &line)
    {
        let _ = writeln!(
            std::io::stderr(),
            "{SKIP_LOG}={}: {e} (the skip above is not counted)",
            path.display()
        );
    }
}

/// Appends `line` to the skip log: one write per line, so appends from test binaries running side by side do
/// not interleave.
fn log_to(path: &Path, line: &str) -> std::io::Result<()> {
    std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?
        .write_all(format!("{line}\n").as_bytes())
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_skip_is_logged_once_per_call() {
        let path = std::env::temp_dir().join(format!("mrc-skip-{}.log", std::process::id()));
        let _ = std::fs::remove_file(&path);
        super::log_to(&path, "*** SKIPPED: x: because ***").unwrap();
        super::log_to(&path, "*** SKIPPED: y: too ***").unwrap();
        let text = std::fs::read_to_string(&path).unwrap();
        let _ = std::fs::remove_file(&path);
        assert_eq!(
            text,
            "*** SKIPPED: x: because ***\n*** SKIPPED: y: too ***\n"
        );
    }
}
