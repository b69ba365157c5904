//! The panic boundary and the OCP error conventions.
//!
//! Every exported function runs its body through one of the helpers below: a panic is caught, logged once
//! with the call's name and becomes `EIO`; an [`Error`] becomes what the OCP header promises for that
//! function (`-1` with `errno`, an errno value like the verbs call it mirrors, `NULL` with `errno`, or a
//! negative errno value), with one log line naming the call and the reason.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use crate::log::log;

/// Why a call failed: the errno the caller sees, and the reason logged with the call's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub(crate) errno: c_int,
    why: Cow<'static, str>,
    /// Expected in normal operation (a non-blocking read with nothing waiting): no log line.
    quiet: bool,
}

impl Error {
    /// A failure logged as `call: why (ERRNO)`.
    pub(crate) fn new(errno: c_int, why: impl Into<Cow<'static, str>>) -> Self {
        Self {
            errno,
            why: why.into(),
            quiet: false,
        }
    }

    /// `EINVAL`: the caller's arguments are wrong.
    pub(crate) fn inval(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(libc::EINVAL, why)
    }

    /// A failure that is part of normal operation and is not logged.
    pub(crate) fn quiet(errno: c_int) -> Self {
        Self {
            errno,
            why: Cow::Borrowed(""),
            quiet: true,
        }
    }

    /// The reason, for tests.
    #[cfg(test)]
    pub(crate) fn why(&self) -> &str {
        &self.why
    }

    fn report(&self, call: &str) {
        if !self.quiet {
            log!(Warn, "{call}: {} ({})", self.why, errno_name(self.errno));
        }
    }
}

/// `Err(EINVAL)` naming `what` when `p` is NULL.
pub(crate) fn non_null<T>(p: *const T, what: &'static str) -> Result<(), Error> {
    if p.is_null() {
        Err(Error::inval(format!("{what} is NULL")))
    } else {
        Ok(())
    }
}

/// Sets the calling thread's `errno`.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// The symbolic name of the errno values libmrc returns, for log lines.
pub(crate) fn errno_name(e: c_int) -> Cow<'static, str> {
    Cow::Borrowed(match e {
        libc::EINVAL => "EINVAL",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EAGAIN => "EAGAIN",
        libc::EIO => "EIO",
        libc::EPERM => "EPERM",
        libc::ENOENT => "ENOENT",
        libc::ENOSPC => "ENOSPC",
        libc::E2BIG => "E2BIG",
        libc::ETIMEDOUT => "ETIMEDOUT",
        _ => return Cow::Owned(format!("errno {e}")),
    })
}

thread_local! {
    /// Entry-point calls in progress on this thread (a panic inside one is reported by its boundary).
    static IN_BOUNDARY: Cell<u32> = const { Cell::new(0) };
    /// The last panic's message and location, for the boundary's log line.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Chains a panic hook that stays silent inside an entry point (the boundary logs one line naming the call)
/// and defers to the previous hook elsewhere, so a Rust program that links libmrc keeps its own reporting.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if IN_BOUNDARY.with(Cell::get) > 0 {
                let msg = info
                    .payload()
                    .downcast_ref::<&str>()
                    .map(|s| (*s).to_string())
                    .or_else(|| info.payload().downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "non-string panic payload".into());
                let at = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                LAST_PANIC.with(|p| *p.borrow_mut() = Some(format!("{msg}{at}")));
            } else {
                prev(info);
            }
        }));
    });
}

/// Runs `f`, turning a panic into `EIO` and logging any failure once with `call`.
pub(crate) fn guard<R>(
    call: &'static str,
    f: impl FnOnce() -> Result<R, Error>,
) -> Result<R, Error> {
    install_hook();
    IN_BOUNDARY.with(|c| c.set(c.get() + 1));
    let caught = catch_unwind(AssertUnwindSafe(f));
    IN_BOUNDARY.with(|c| c.set(c.get() - 1));
    let r = caught.unwrap_or_else(|_| {
        let what = LAST_PANIC
            .with(|p| p.borrow_mut().take())
            .unwrap_or_else(|| "unknown".into());
        Err(Error::new(
            libc::EIO,
            format!("internal error (panic: {what}); please report it"),
        ))
    });
    if let Err(e) = &r {
        e.report(call);
    }
    r
}

/// "0 on success, -1 on failure (errno set)".
pub(crate) fn minus_one(call: &'static str, f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match guard(call, f) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e.errno);
            -1
        }
    }
}

/// "Errors like ibv_destroy_qp()" and the other verbs that return 0 or an errno value; `errno` is set too.
pub(crate) fn errno_value(call: &'static str, f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match guard(call, f) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e.errno);
            e.errno
        }
    }
}

/// A count, or `-1` with `errno` set (`mrc_poll_cq`).
pub(crate) fn count(call: &'static str, f: impl FnOnce() -> Result<c_int, Error>) -> c_int {
    match guard(call, f) {
        Ok(n) => n,
        Err(e) => {
            set_errno(e.errno);
            -1
        }
    }
}

/// A count, or a negative errno value (`mrc_ctl_poll_ev_event`); `errno` is set too.
pub(crate) fn neg_errno(call: &'static str, f: impl FnOnce() -> Result<c_int, Error>) -> c_int {
    match guard(call, f) {
        Ok(n) => n,
        Err(e) => {
            set_errno(e.errno);
            -e.errno
        }
    }
}

/// An object, or `NULL` with `errno` set.
pub(crate) fn ptr<T>(call: &'static str, f: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
    match guard(call, f) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e.errno);
            std::ptr::null_mut()
        }
    }
}

/// Calls that return nothing: a failure sets `errno` and is logged.
pub(crate) fn void(call: &'static str, f: impl FnOnce() -> Result<(), Error>) {
    if let Err(e) = guard(call, f) {
        set_errno(e.errno);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn errno() -> c_int {
        // SAFETY: reads the calling thread's errno slot.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn panics_become_eio_and_each_convention_is_kept() {
        let e = guard::<()>("t", || panic!("boom")).unwrap_err();
        assert_eq!(e.errno, libc::EIO);
        assert!(e.why().contains("boom at capi/src/ffi.rs"), "{}", e.why());
        assert_eq!(minus_one("t", || panic!("boom")), -1);
        assert_eq!(errno(), libc::EIO);
        assert_eq!(errno_value("t", || Err(Error::inval("x"))), libc::EINVAL);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(
            neg_errno("t", || Err(Error::new(libc::EOPNOTSUPP, "x"))),
            -libc::EOPNOTSUPP
        );
        assert_eq!(count("t", || Ok(3)), 3);
        assert_eq!(count("t", || Err(Error::quiet(libc::EAGAIN))), -1);
        assert_eq!(errno(), libc::EAGAIN);
        assert!(ptr::<u8>("t", || panic!("boom")).is_null());
        void("t", || Err(Error::new(libc::EBUSY, "x")));
        assert_eq!(errno(), libc::EBUSY);
    }

    #[test]
    fn null_checks_name_the_argument() {
        let e = non_null(std::ptr::null::<u8>(), "attr").unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.why().contains("attr"));
    }
}
