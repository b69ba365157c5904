//! The panic boundary and the error conventions of the verbs ABI (rustls-ffi's `ffi_panic_boundary!` idea).
//!
//! Every exported function runs its body through one of [`int_call`], [`neg_call`], [`ptr_call`] or
//! [`void_call`]: a panic is caught, logged once with the call's name, and becomes `EIO`; an [`Error`]
//! becomes the return value verbs expects for that function (an errno value, `-1` with `errno` set, or `NULL`
//! with `errno` set), with one log line naming the call and the reason.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use crate::log::log;

/// Why a call failed: the errno verbs callers see, and the reason logged with the call's name.
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

    /// `EOPNOTSUPP`: a real provider without the feature answers so.
    pub(crate) fn unsupported(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(libc::EOPNOTSUPP, why)
    }

    /// A failure that is part of normal operation and is not logged.
    pub(crate) fn quiet(errno: c_int) -> Self {
        Self {
            errno,
            why: Cow::Borrowed(""),
            quiet: true,
        }
    }

    /// The reason, for tests and callers that wrap it.
    pub(crate) fn why(&self) -> &str {
        &self.why
    }

    fn report(&self, call: &str) {
        if !self.quiet {
            log!(Warn, "{call}: {} ({})", self.why, errno_name(self.errno));
        }
    }
}

/// A `NULL` check that names the argument.
pub(crate) fn non_null<T>(p: *mut T, what: &'static str) -> Result<*mut T, Error> {
    if p.is_null() {
        Err(Error::inval(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

/// `errno` of the calling thread.
pub(crate) fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// The symbolic name of the errno values the shim returns, for log lines.
pub(crate) fn errno_name(e: c_int) -> Cow<'static, str> {
    Cow::Borrowed(match e {
        libc::EINVAL => "EINVAL",
        libc::EOPNOTSUPP => "EOPNOTSUPP",
        libc::ENOMEM => "ENOMEM",
        libc::EBUSY => "EBUSY",
        libc::ENODEV => "ENODEV",
        libc::EAGAIN => "EAGAIN",
        libc::EIO => "EIO",
        libc::ENOSYS => "ENOSYS",
        libc::ENOTCONN => "ENOTCONN",
        libc::EPERM => "EPERM",
        libc::EFAULT => "EFAULT",
        libc::ENOENT => "ENOENT",
        libc::ENOSPC => "ENOSPC",
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

/// Chains a panic hook that stays silent inside an entry point (the boundary logs one line naming the call
/// instead of the default multi-line report) and defers to the previous hook elsewhere, so a Rust application
/// that loads the shim keeps its own panic reporting.
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

/// Runs `f`, turning a panic into `EIO` and logging any failure once with `call`; for entry points whose
/// error convention the helpers below do not cover (a negative errno, …).
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

/// For verbs that return 0 or an errno value (`ibv_modify_qp`, `ibv_dealloc_pd`, `ibv_post_send`, …); `errno`
/// is set as well, as libibverbs does for most of them.
pub(crate) fn int_call(call: &'static str, f: impl FnOnce() -> Result<(), Error>) -> c_int {
    match guard(call, f) {
        Ok(()) => 0,
        Err(e) => {
            set_errno(e.errno);
            e.errno
        }
    }
}

/// For calls that return a count or `-1` with `errno` set (`ibv_get_cq_event`, `_ibv_query_gid_table`, …).
pub(crate) fn neg_call<R: From<i8>>(call: &'static str, f: impl FnOnce() -> Result<R, Error>) -> R {
    match guard(call, f) {
        Ok(v) => v,
        Err(e) => {
            set_errno(e.errno);
            R::from(-1)
        }
    }
}

/// For calls that return an object or `NULL` with `errno` set.
pub(crate) fn ptr_call<T>(call: &'static str, f: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
    match guard(call, f) {
        Ok(p) => p,
        Err(e) => {
            set_errno(e.errno);
            std::ptr::null_mut()
        }
    }
}

/// For calls that return a value and cannot fail except by panicking (then `on_error`).
pub(crate) fn value_call<R>(
    call: &'static str,
    on_error: R,
    f: impl FnOnce() -> Result<R, Error>,
) -> R {
    match guard(call, f) {
        Ok(v) => v,
        Err(e) => {
            set_errno(e.errno);
            on_error
        }
    }
}

/// For calls that return nothing.
pub(crate) fn void_call(call: &'static str, f: impl FnOnce() -> Result<(), Error>) {
    if let Err(e) = guard(call, f) {
        set_errno(e.errno);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_become_eio_and_errors_keep_their_errno() {
        let e = guard::<()>("t", || panic!("boom")).unwrap_err();
        assert_eq!(e.errno, libc::EIO);
        assert!(e.why().contains("boom at shim/src/ffi.rs"), "{}", e.why());
        assert_eq!(int_call("t", || panic!("boom")), libc::EIO);
        assert_eq!(
            int_call("t", || Err(Error::unsupported("x"))),
            libc::EOPNOTSUPP
        );
        assert_eq!(int_call("t", || Ok(())), 0);
        assert!(ptr_call::<u8>("t", || panic!("boom")).is_null());
        assert_eq!(neg_call::<i32>("t", || Err(Error::quiet(libc::EAGAIN))), -1);
        // SAFETY: reads the calling thread's errno slot.
        assert_eq!(unsafe { *libc::__errno_location() }, libc::EAGAIN);
        assert_eq!(value_call("t", 7u64, || panic!("boom")), 7);
    }

    #[test]
    fn null_checks_name_the_argument() {
        let e = non_null(std::ptr::null_mut::<u8>(), "pd").unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.why().contains("pd"));
    }
}
