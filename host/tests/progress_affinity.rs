//! The progress thread keeps off the CPU its application spins on (host/src/host/affinity.rs). Where spinning
//! threads outnumber cores, a progress thread behind its own application's spin waits for a scheduler tick
//! (ib_write_lat under the shim: 3-4 ms iterations, an average 1.3-1.5x the p50). Its own file: the test
//! finds the one progress thread of the process by name.

use std::time::{Duration, Instant};

use mrc::testing;
use mrc_host::{Host, HostConfig};

/// The CPUs in thread `tid`'s affinity mask (0: the calling thread).
fn affinity(tid: libc::pid_t) -> Vec<usize> {
    // SAFETY: a zeroed `cpu_set_t` is the empty set; the pointer and size describe it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above; `set` outlives the call.
    let r = unsafe { libc::sched_getaffinity(tid, size_of::<libc::cpu_set_t>(), &mut set) };
    assert_eq!(r, 0, "sched_getaffinity({tid})");
    // SAFETY: every index is below `CPU_SETSIZE`.
    (0..libc::CPU_SETSIZE as usize)
        .filter(|&c| unsafe { libc::CPU_ISSET(c, &set) })
        .collect()
}

/// Pins thread `tid` (0: the calling thread) to `cpu`.
fn pin(tid: libc::pid_t, cpu: usize) {
    // SAFETY: a zeroed `cpu_set_t` is the empty set; `cpu` comes from an affinity mask, below `CPU_SETSIZE`.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // SAFETY: as above.
    unsafe { libc::CPU_SET(cpu, &mut set) };
    // SAFETY: the pointer and size describe `set`, which outlives the call.
    let r = unsafe { libc::sched_setaffinity(tid, size_of::<libc::cpu_set_t>(), &set) };
    assert_eq!(r, 0, "sched_setaffinity({tid}, {cpu})");
}

/// The thread id of the process's one `mrc-progress` thread (which names itself once it runs).
fn progress_tid() -> libc::pid_t {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let found: Vec<libc::pid_t> = std::fs::read_dir("/proc/self/task")
            .expect("/proc/self/task")
            .filter_map(|e| {
                let e = e.ok()?;
                let comm = std::fs::read_to_string(e.path().join("comm")).ok()?;
                (comm.trim() == "mrc-progress")
                    .then(|| e.file_name().to_str()?.parse().ok())
                    .flatten()
            })
            .collect();
        match found[..] {
            [tid] => return tid,
            [] if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => panic!("progress threads: {found:?}"),
        }
    }
}

#[test]
fn the_progress_thread_moves_off_the_cpu_its_application_spins_on() {
    let name = "the_progress_thread_moves_off_the_cpu_its_application_spins_on";
    let cpus = affinity(0);
    if cpus.len() < 2 {
        testing::skip(name, "needs two CPUs in this process's affinity mask");
        return;
    }
    let host = Host::start(HostConfig::loopback(1)).expect("loopback sockets");
    let tid = progress_tid();
    let cpu = cpus[0];
    // The worst case: the application and its progress thread on one CPU.
    pin(0, cpu);
    pin(tid, cpu);
    let deadline = Instant::now() + Duration::from_secs(10);
    // An application spinning on an empty completion queue drives the host, as the shim's poll does.
    while affinity(tid).contains(&cpu) {
        assert!(
            Instant::now() < deadline,
            "the progress thread stayed on CPU {cpu} for 10 s: {:?}",
            affinity(tid)
        );
        let _ = host.drive();
        std::thread::yield_now();
    }
    let left = affinity(tid);
    assert!(
        !left.is_empty() && left.iter().all(|c| cpus.contains(c)),
        "the progress thread's CPUs {left:?} are not the process's {cpus:?} less CPU {cpu}"
    );
    assert_eq!(left.len(), cpus.len() - 1, "{left:?} of {cpus:?}");
}
