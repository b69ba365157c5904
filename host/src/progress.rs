//! A progress thread: drives a [`UdpEndpoint`] in the background while the application posts work and polls
//! completions through [`Progress::with`].
//!
//! The thread holds the lock only for one round of progress; between rounds it sleeps in `ppoll` on the
//! sockets and a doorbell (an eventfd) that [`Progress::with`] rings, so a posted request leaves at once.
#![allow(unsafe_code, reason = "eventfd system calls")]

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::Duration;

use crate::driver::UdpEndpoint;
use crate::socket::wait;

/// Longest sleep between rounds when nothing is due (timers and the doorbell usually end it sooner).
const MAX_SLEEP: Duration = Duration::from_millis(5);
/// Rounds the thread keeps spinning after the last busy one before it sleeps.
const SPIN_ROUNDS: u32 = 64;

struct Shared {
    ep: Mutex<UdpEndpoint>,
    /// Signalled after every busy round, for applications waiting on completions.
    progressed: Condvar,
    stop: AtomicBool,
    doorbell: OwnedFd,
    error: Mutex<Option<io::Error>>,
}

impl Shared {
    fn ring(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own; failure (counter full) is harmless, as
        // the thread is then awake anyway.
        let _ = unsafe { libc::write(self.doorbell.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    fn drain_doorbell(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let _ = unsafe { libc::read(self.doorbell.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// A [`UdpEndpoint`] driven by its own thread.
pub struct Progress {
    shared: Arc<Shared>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Progress {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Progress").finish_non_exhaustive()
    }
}

impl Progress {
    /// Starts a thread that drives `ep`.
    pub fn spawn(ep: UdpEndpoint) -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let doorbell = unsafe { OwnedFd::from_raw_fd(raw) };
        let shared = Arc::new(Shared {
            ep: Mutex::new(ep),
            progressed: Condvar::new(),
            stop: AtomicBool::new(false),
            doorbell,
            error: Mutex::new(None),
        });
        let s = Arc::clone(&shared);
        let thread = std::thread::Builder::new()
            .name("mrc-progress".into())
            .spawn(move || run(&s))?;
        Ok(Self {
            shared,
            thread: Some(thread),
        })
    }

    /// Runs `f` on the endpoint (post work, poll a CQ, read counters), then wakes the thread so whatever `f`
    /// queued is sent at once.
    pub fn with<R>(&self, f: impl FnOnce(&mut UdpEndpoint) -> R) -> R {
        let r = f(&mut self.lock());
        self.shared.ring();
        r
    }

    /// Waits until the thread has made progress or `timeout` passed, then runs `f` (e.g. polls a CQ).
    pub fn wait_with<R>(&self, timeout: Duration, f: impl FnOnce(&mut UdpEndpoint) -> R) -> R {
        let g = self.lock();
        let (mut g, _) = self
            .shared
            .progressed
            .wait_timeout(g, timeout)
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        f(&mut g)
    }

    /// The first socket error the thread met, if any (it stops then).
    pub fn error(&self) -> Option<io::ErrorKind> {
        self.shared
            .error
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(io::Error::kind)
    }

    fn lock(&self) -> MutexGuard<'_, UdpEndpoint> {
        // A panic while the lock was held leaves the endpoint consistent between rounds; keep going.
        self.shared
            .ep
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Stops the thread and hands the endpoint back.
    pub fn stop(mut self) -> Option<UdpEndpoint> {
        self.halt();
        let shared = Arc::clone(&self.shared);
        drop(self);
        Arc::try_unwrap(shared).ok().map(|s| {
            s.ep.into_inner()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
        })
    }

    fn halt(&mut self) {
        self.shared.stop.store(true, Ordering::Release);
        self.shared.ring();
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Progress {
    fn drop(&mut self) {
        self.halt();
    }
}

fn run(s: &Shared) {
    let mut idle_rounds = 0u32;
    while !s.stop.load(Ordering::Acquire) {
        let (busy, fds, blocked, sleep) = {
            let mut ep =
                s.ep.lock()
                    .unwrap_or_else(std::sync::PoisonError::into_inner);
            let busy = match ep.progress() {
                Ok(b) => b,
                Err(e) => {
                    *s.error
                        .lock()
                        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some(e);
                    return;
                }
            };
            let mut fds = ep.fds();
            fds.push(s.doorbell.as_raw_fd());
            (busy, fds, ep.blocked().to_vec(), ep.idle_timeout(MAX_SLEEP))
        };
        if busy {
            s.progressed.notify_all();
            idle_rounds = 0;
            continue;
        }
        idle_rounds += 1;
        if idle_rounds < SPIN_ROUNDS || sleep.is_zero() {
            std::thread::yield_now();
            continue;
        }
        if wait(&fds, &blocked, Some(sleep)).is_err() {
            std::thread::sleep(Duration::from_micros(50));
        }
        s.drain_doorbell();
    }
}
