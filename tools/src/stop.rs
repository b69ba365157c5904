//! A SIGINT/SIGTERM flag for the foreground loops (`mrc-fabric flap`, `mrc-blast`).

use std::sync::atomic::{AtomicBool, Ordering};

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    STOP.store(true, Ordering::Relaxed);
}

/// Installs the handler for SIGINT and SIGTERM (idempotent).
pub fn install() {
    let handler: extern "C" fn(libc::c_int) = on_signal;
    for sig in [libc::SIGINT, libc::SIGTERM] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe; the pointer is a valid
        // `extern "C" fn(c_int)` for the whole program.
        unsafe {
            libc::signal(sig, handler as libc::sighandler_t);
        }
    }
}

/// Whether a stop signal arrived.
pub fn requested() -> bool {
    STOP.load(Ordering::Relaxed)
}
