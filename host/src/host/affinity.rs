//! Keeps the progress thread off the CPU of the application thread that drives it.
//!
//! Where spinning threads outnumber cores (two perftest processes on two cores: an application and a progress
//! thread each), a progress thread can share a CPU with its own application thread while that thread spins
//! without entering the library: `ib_write_lat` polls the last byte of its buffer for the peer's WRITE, which
//! only this process's progress thread can place. The progress thread yields while it spins, and the scheduler
//! then runs the application until its time slice ends at a tick (4 ms at `CONFIG_HZ=250`): the iteration
//! takes milliseconds instead of microseconds. Sharing a CPU with the *other* process's application costs
//! nothing, because that one spins in `ibv_poll_cq`, which yields. So when the progress thread finds itself on
//! the CPU its application last drove it from, it leaves that CPU out of its own affinity mask.
//!
//! On the 2-core development VM this took `ib_write_lat`'s average under the shim from 36 to 18 µs and its worst
//! iteration from 4.1 to 0.46 ms (medians of 12 runs), p50 unchanged (shim/README.md, "Latency").

use std::mem::size_of;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// How long an application must keep driving from one CPU before the progress thread leaves it: a bandwidth-bound
/// caller drives only until its first deep look (under 1 ms), and a progress thread moved off its CPU for that
/// lands beside the peer's progress thread (2 cores: ib_write_bw 0.90 instead of 0.95 of mrc-perf).
const SETTLE: Duration = Duration::from_millis(5);
/// How recent the last drive must be to say the application spins now (a latency-bound one drives every round
/// trip, tens of µs).
const FRESH_US: u64 = 1_000;
/// How stale the record may get before a drive from the same CPU writes it again (one store per 100 µs, not per
/// poll: the progress thread reads the line).
const REFRESH_US: u64 = 100;

/// Where and when a latency-bound application last drove the host: µs since the host's epoch above the low
/// 16 bits, the CPU in them; 0 before the first drive.
#[derive(Default)]
pub(super) struct AppCpu(AtomicU64);

impl AppCpu {
    /// A drive from the calling thread at `now` (since the host's epoch).
    pub(super) fn note(&self, now: Duration) {
        let Some(cpu) = current_cpu().filter(|&c| c < 0xFFFF) else {
            return;
        };
        let us = now.as_micros() as u64;
        let old = self.0.load(Ordering::Relaxed);
        if old & 0xFFFF != cpu as u64 || us.saturating_sub(old >> 16) >= REFRESH_US {
            self.0.store(us << 16 | cpu as u64, Ordering::Relaxed);
        }
    }

    /// The CPU of a drive within the last millisecond before `now`.
    pub(super) fn recent(&self, now: Duration) -> Option<usize> {
        let v = self.0.load(Ordering::Relaxed);
        let fresh = v != 0 && (now.as_micros() as u64).saturating_sub(v >> 16) <= FRESH_US;
        fresh.then_some((v & 0xFFFF) as usize)
    }
}

/// The CPUs the progress thread may run on, the one it keeps off, and the one the application has been driving
/// from since when.
pub(super) struct Steer {
    allowed: libc::cpu_set_t,
    avoiding: Option<usize>,
    settling: Option<(usize, Duration)>,
}

impl Steer {
    /// The calling thread's affinity (taken before the progress thread starts, which inherits it); `None` when
    /// there is only one CPU to run on or the mask cannot be read: then there is nothing to steer.
    pub(super) fn new() -> Option<Self> {
        // SAFETY: `cpu_set_t` is a plain bit array, valid when zeroed.
        let mut allowed: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: pid 0 is the calling thread; the pointer and size describe `allowed`, which outlives the call.
        let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut allowed) };
        (r == 0 && cpus(&allowed) >= 2).then_some(Self {
            allowed,
            avoiding: None,
            settling: None,
        })
    }

    /// Whether the thread keeps off a CPU now.
    pub(super) fn avoiding(&self) -> bool {
        self.avoiding.is_some()
    }

    /// At `now` (since the host's epoch): moves the calling (progress) thread off `app`, the CPU a spinning
    /// application has driven from for [`SETTLE`], if it runs there; with no such CPU (`None`: the application
    /// naps or stopped driving), gives it back every allowed CPU.
    pub(super) fn check(&mut self, app: Option<usize>, now: Duration) {
        let Some(app) = app else {
            self.settling = None;
            if self.avoiding.take().is_some() {
                set_affinity(&self.allowed);
            }
            return;
        };
        if self.avoiding == Some(app) {
            return;
        }
        match self.settling {
            Some((cpu, since)) if cpu == app => {
                if now.saturating_sub(since) < SETTLE {
                    return;
                }
            }
            _ => {
                self.settling = Some((app, now));
                return;
            }
        }
        if current_cpu() != Some(app) {
            return;
        }
        let Some(set) = without(&self.allowed, app) else {
            return;
        };
        if set_affinity(&set) {
            self.avoiding = Some(app);
        }
    }
}

/// Sets the calling thread's affinity mask; whether it took.
fn set_affinity(set: &libc::cpu_set_t) -> bool {
    // SAFETY: pid 0 is the calling thread; the pointer and size describe `set`, which outlives the call.
    unsafe { libc::sched_setaffinity(0, size_of::<libc::cpu_set_t>(), set) == 0 }
}

/// The CPU the calling thread runs on (a vDSO read, no system call on x86-64).
pub(super) fn current_cpu() -> Option<usize> {
    // SAFETY: no arguments; returns -1 on failure.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

fn cpus(set: &libc::cpu_set_t) -> usize {
    // SAFETY: reads the set's bits only.
    usize::try_from(unsafe { libc::CPU_COUNT(set) }).unwrap_or(0)
}

fn has(set: &libc::cpu_set_t, cpu: usize) -> bool {
    // SAFETY: `cpu` is below `CPU_SETSIZE` (callers), so the bit is inside the set.
    cpu < libc::CPU_SETSIZE as usize && unsafe { libc::CPU_ISSET(cpu, set) }
}

/// `allowed` without `cpu`, if `cpu` is in it and another CPU is left.
fn without(allowed: &libc::cpu_set_t, cpu: usize) -> Option<libc::cpu_set_t> {
    if !has(allowed, cpu) || cpus(allowed) < 2 {
        return None;
    }
    let mut set = *allowed;
    // SAFETY: `has` checked that `cpu` is below `CPU_SETSIZE`.
    unsafe { libc::CPU_CLR(cpu, &mut set) };
    Some(set)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn set(cpus: &[usize]) -> libc::cpu_set_t {
        // SAFETY: a zeroed `cpu_set_t` is the empty set.
        let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        for &c in cpus {
            // SAFETY: test CPUs are below `CPU_SETSIZE`.
            unsafe { libc::CPU_SET(c, &mut s) };
        }
        s
    }

    fn list(s: &libc::cpu_set_t) -> Vec<usize> {
        (0..libc::CPU_SETSIZE as usize)
            .filter(|&c| has(s, c))
            .collect()
    }

    #[test]
    fn the_mask_leaves_out_the_application_cpu_only() {
        let got = without(&set(&[0, 1, 5]), 1).map(|s| list(&s));
        assert_eq!(got, Some(vec![0, 5]));
    }

    fn mine() -> Vec<usize> {
        // SAFETY: a zeroed `cpu_set_t` is the empty set; pid 0 is this thread; `s` outlives the call.
        let mut s: libc::cpu_set_t = unsafe { std::mem::zeroed() };
        // SAFETY: as above.
        let r = unsafe { libc::sched_getaffinity(0, size_of::<libc::cpu_set_t>(), &mut s) };
        assert_eq!(r, 0);
        list(&s)
    }

    /// On the CPU the application has driven from for [`SETTLE`], the thread leaves it; once the application
    /// naps it may use every CPU again.
    #[test]
    fn a_thread_on_the_application_cpu_leaves_it_and_comes_back_when_it_naps() {
        let name = "a_thread_on_the_application_cpu_leaves_it_and_comes_back_when_it_naps";
        // A thread of its own: the test changes its affinity.
        std::thread::spawn(move || {
            let all = mine();
            let Some(mut steer) = Steer::new() else {
                mrc::testing::skip(name, "needs two CPUs in this process's affinity mask");
                return;
            };
            let app = all[0];
            assert!(set_affinity(&set(&[app])));
            assert_eq!(current_cpu(), Some(app));
            let t0 = Duration::from_secs(1);
            steer.check(Some(app), t0);
            steer.check(Some(app), t0 + SETTLE / 2);
            assert_eq!(
                mine(),
                vec![app],
                "a bandwidth-bound start does not move it"
            );
            steer.check(Some(app), t0 + SETTLE);
            let off: Vec<usize> = all.iter().copied().filter(|&c| c != app).collect();
            assert_eq!(mine(), off, "off the application's CPU");
            steer.check(None, t0 + SETTLE * 2);
            assert_eq!(mine(), all, "every CPU again");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_drive_is_recent_for_a_millisecond() {
        let a = AppCpu::default();
        let t = Duration::from_secs(3);
        assert_eq!(a.recent(t), None, "never driven");
        a.note(t);
        let cpu = current_cpu();
        assert!(cpu.is_some());
        assert_eq!(a.recent(t + Duration::from_micros(FRESH_US)), cpu);
        assert_eq!(a.recent(t + Duration::from_micros(FRESH_US + 1)), None);
    }

    #[test]
    fn nothing_is_steered_where_it_would_leave_no_cpu_or_is_not_allowed() {
        assert!(without(&set(&[3]), 3).is_none(), "the only CPU");
        assert!(without(&set(&[0, 1]), 2).is_none(), "not in the mask");
        assert!(
            without(&set(&[0, 1]), libc::CPU_SETSIZE as usize).is_none(),
            "past the set"
        );
    }
}
