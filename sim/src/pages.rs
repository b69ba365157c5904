//! 2 MiB pages for the simulator's heap.
//!
//! At 8,192 hosts a run reads about 240 MiB of engine and fabric state at random, and with 4 KiB pages nearly
//! every such read missed the TLB as well as the cache. glibc backs its heap with transparent huge pages only
//! when a tunable says so, and reads tunables before `main`; so the binary starts itself again, once, with
//! them set (`sim/cpu-per-event.sh`, scale-8192-perm: user CPU −6%, wall −7%, peak RSS +2%; on the firecracker
//! development VM system time rises by about as much as user time falls, zeroing pages its host had not backed
//! yet; sim/README.md "Speed and scale").
//! Setting `MRC_SIM_HUGE_PAGES` (to anything, e.g. `off`) or `GLIBC_TUNABLES` yourself keeps one process and
//! glibc's defaults (for valgrind, which follows an exec only with `--trace-children=yes`). The second start
//! has `MRC_SIM_HUGE_PAGES` set, so it never starts a third, whatever glibc leaves of `GLIBC_TUNABLES`.

/// Huge pages for the heap, which is never trimmed: trimming gives pages back and splits huge ones in a run
/// that frees and allocates all the time (with it, fairwater-8plane's peak RSS was 48 MB instead of 41).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
const TUNABLES: &str = "glibc.malloc.hugetlb=1:glibc.malloc.trim_threshold=4294967295";

/// Set in the second start, and the user's way to stay in one process with 4 KiB pages.
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
const MARK: &str = "MRC_SIM_HUGE_PAGES";

/// The `GLIBC_TUNABLES` to start again with, given whether that variable and [`MARK`] are set now: none when
/// either is (the user's choice, or this process's second start).
#[cfg_attr(not(all(target_os = "linux", target_env = "gnu")), allow(dead_code))]
fn tunables_for(tunables_set: bool, mark_set: bool) -> Option<&'static str> {
    (!tunables_set && !mark_set).then_some(TUNABLES)
}

/// Starts this binary again with huge pages on, where glibc runs it; returns, and the run goes on as it is,
/// when it should not or cannot.
pub(crate) fn use_huge_pages() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        use std::env::var_os;
        use std::os::unix::process::CommandExt;
        let Some(t) = tunables_for(var_os("GLIBC_TUNABLES").is_some(), var_os(MARK).is_some())
        else {
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
        let _ = cmd
            .args(args)
            .env("GLIBC_TUNABLES", t)
            .env(MARK, "on")
            .exec();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn starts_again_only_when_neither_variable_is_set() {
        assert_eq!(tunables_for(false, false), Some(TUNABLES));
        assert_eq!(
            tunables_for(true, false),
            None,
            "a set GLIBC_TUNABLES is the user's"
        );
        assert_eq!(
            tunables_for(false, true),
            None,
            "the second start, or the user's opt-out"
        );
        assert!(TUNABLES.contains("glibc.malloc.hugetlb=1"));
    }
}
