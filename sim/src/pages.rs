//! 2 MiB pages for the simulator's heap.
//!
//! At 8,192 hosts a run reads about 240 MiB of engine and fabric state at random, and with 4 KiB pages nearly
//! every such read missed the TLB as well as the cache. glibc backs its heap with transparent huge pages only
//! when a tunable says so, and reads tunables before `main`; so the binary starts itself again, once, with
//! them set (scale-8192-perm: 13% less user CPU, 6–10% less wall time, peak RSS +2%; on the firecracker
//! development VM system time rises by about as much as user time falls, zeroing pages its host had not backed
//! yet; sim/README.md "Speed and scale").
//! Setting `GLIBC_TUNABLES` yourself, even to nothing, keeps one process and glibc's defaults (for valgrind,
//! which follows an exec only with `--trace-children=yes`).

/// Huge pages for the heap, which is never trimmed: trimming gives pages back and splits huge ones in a run
/// that frees and allocates all the time (with it, fairwater-8plane's peak RSS was 48 MB instead of 41).
const TUNABLES: &str = "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=4294967295";

/// The `GLIBC_TUNABLES` to start again with, given whether the variable is set now: none when it is (the
/// user's choice, or this process's second start).
fn tunables_for(set: bool) -> Option<&'static str> {
    (!set).then_some(TUNABLES)
}

/// Starts this binary again with huge pages on, where glibc runs it; returns, and the run goes on as it is,
/// when it should not or cannot.
pub(crate) fn use_huge_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::os::unix::process::CommandExt;
        let Some(t) = tunables_for(std::env::var_os("GLIBC_TUNABLES").is_some()) else {
            return;
        };
        let Ok(exe) = std::env::current_exe() else {
            return;
        };
        let mut args = std::env::args_os();
        let mut cmd = std::process::Command::new(exe);
        if let Some(a0) = args.next() {
            cmd.arg0(a0);
        }
        // Returns only if the exec failed.
        let _ = cmd.args(args).env("GLIBC_TUNABLES", t).exec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_again_only_when_the_tunables_are_unset() {
        assert_eq!(tunables_for(false), Some(TUNABLES));
        assert_eq!(
            tunables_for(true),
            None,
            "a set GLIBC_TUNABLES is the user's, and ends the re-execs"
        );
        assert!(TUNABLES.contains("glibc.malloc.hugetlb=1"));
    }
}
