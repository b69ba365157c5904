//! What the simulator's integration tests share.

/// A scratch folder (`mrc-sim-<name>-<random>` in the temp dir), removed when the test ends, pass or fail.
pub(crate) fn scratch(name: &str) -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix(&format!("mrc-sim-{name}-"))
        .tempdir()
        .expect("a scratch folder in the temp dir")
}
