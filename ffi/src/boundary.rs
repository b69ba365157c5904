//! The panic boundary of every C entry point and the C error conventions (rustls-ffi's one `panic.rs`).
//!
//! A C front end runs each exported function's body through a [`Boundary`]: a panic is caught (never unwinds
//! into C), logged once with the call's name, and becomes `EIO`; an [`Error`] becomes the return value the
//! function's C convention promises (an errno value, `-1` with `errno` set, a negative errno value, `NULL` with
//! `errno` set), with one log line naming the call and the reason. [`catch`] is the bare boundary, for a front
//! end with its own result codes (the NCCL plugin's `ncclResult_t`).

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use mrc_host::HostError;
use mrc_host::verbs::qp_state::Refusal;

use crate::log::{Level, Log};

/// Why a call failed: the errno the caller sees, and the reason logged with the call's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Error {
    /// What the caller sees (a positive errno value).
    pub errno: c_int,
    why: Cow<'static, str>,
    /// Expected in normal operation (a non-blocking read with nothing waiting): no log line.
    quiet: bool,
}

impl Error {
    /// A failure logged as `call: why (ERRNO)`.
    pub fn new(errno: c_int, why: impl Into<Cow<'static, str>>) -> Self {
        Self {
            errno,
            why: why.into(),
            quiet: false,
        }
    }

    /// `EINVAL`: the caller's arguments are wrong.
    pub fn inval(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(libc::EINVAL, why)
    }

    /// `EOPNOTSUPP`: what a provider without the feature answers.
    pub fn unsupported(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(libc::EOPNOTSUPP, why)
    }

    /// A failure that is part of normal operation and is not logged.
    pub fn quiet(errno: c_int) -> Self {
        Self {
            errno,
            why: Cow::Borrowed(""),
            quiet: true,
        }
    }

    /// A modify the verbs state machine refused, with its errno and reason (no prefix: the reason names the step).
    pub fn refused(e: &Refusal) -> Self {
        Self::new(e.errno(), e.to_string())
    }

    /// The host layer's failure while doing `what`, with the errno it maps to.
    pub fn host(what: &str, e: &HostError) -> Self {
        Self::new(e.errno(), format!("{what}: {e}"))
    }

    /// The reason, for callers that wrap it and for tests.
    pub fn why(&self) -> &str {
        &self.why
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.why, errno_name(self.errno))
    }
}

/// `Err(EINVAL)` naming `what` when `p` is NULL; `p` otherwise.
pub fn non_null<P: Pointer>(p: P, what: &'static str) -> Result<P, Error> {
    if p.is_null() {
        Err(Error::inval(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

/// A raw pointer of either mutability, for [`non_null`].
pub trait Pointer: Copy {
    /// Whether it is NULL.
    fn is_null(self) -> bool;
}

impl<T> Pointer for *mut T {
    fn is_null(self) -> bool {
        <*mut T>::is_null(self)
    }
}

impl<T> Pointer for *const T {
    fn is_null(self) -> bool {
        <*const T>::is_null(self)
    }
}

/// Sets the calling thread's `errno`.
pub fn set_errno(e: c_int) {
    // SAFETY: `__errno_location` returns the calling thread's errno slot, valid for the thread's lifetime.
    unsafe { *libc::__errno_location() = e };
}

/// The symbolic name of the errno values the front ends return, for log lines.
pub fn errno_name(e: c_int) -> Cow<'static, str> {
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
        libc::E2BIG => "E2BIG",
        libc::ETIMEDOUT => "ETIMEDOUT",
        libc::ECONNREFUSED => "ECONNREFUSED",
        libc::EPROTO => "EPROTO",
        _ => return Cow::Owned(format!("errno {e}")),
    })
}

thread_local! {
    /// Entry-point calls in progress on this thread (a panic inside one is reported by its boundary).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The last panic's message and location, for the boundary's log line.
    static LAST_PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Chains, once per process, a panic hook that stays silent inside an entry point (the boundary reports one
/// line naming the call instead of Rust's multi-line report) and defers to the previous hook elsewhere, so a
/// Rust program that loads a front end keeps its own panic reporting.
fn install_hook() {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if DEPTH.with(Cell::get) == 0 {
                prev(info);
                return;
            }
            let p = info.payload();
            let msg = p
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| p.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST_PANIC.with(|l| *l.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// Runs `f` inside the boundary: a panic comes back as `Err` with its message and location.
pub fn catch<R>(f: impl FnOnce() -> R) -> Result<R, String> {
    install_hook();
    DEPTH.with(|d| d.set(d.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    r.map_err(|_| {
        LAST_PANIC
            .with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| "unknown".into())
    })
}

/// One front end's boundary: its log, and one method per C return convention.
#[derive(Debug)]
pub struct Boundary {
    log: &'static Log,
}

impl Boundary {
    /// A boundary reporting to `log` (usable in a `static`).
    pub const fn new(log: &'static Log) -> Self {
        Self { log }
    }

    /// Runs `f` as entry point `call`: a panic becomes `EIO`; a failure is logged once with `call`.
    pub fn guard<R>(&self, call: &str, f: impl FnOnce() -> Result<R, Error>) -> Result<R, Error> {
        let r = catch(f).unwrap_or_else(|what| {
            Err(Error::new(
                libc::EIO,
                format!("internal error (panic: {what}); please report it"),
            ))
        });
        if let Err(e) = &r
            && !e.quiet
            && self.log.enabled(Level::Warn)
        {
            self.log.write(format_args!("{call}: {e}"));
        }
        r
    }

    /// 0, or the errno value (`errno` set too): `ibv_modify_qp`, `ibv_post_send`, the OCP calls "like verbs".
    pub fn errno_value(&self, call: &str, f: impl FnOnce() -> Result<(), Error>) -> c_int {
        self.guard(call, f).map_or_else(
            |e| {
                set_errno(e.errno);
                e.errno
            },
            |()| 0,
        )
    }

    /// 0, or `-1` with `errno` set.
    pub fn minus_one(&self, call: &str, f: impl FnOnce() -> Result<(), Error>) -> c_int {
        self.count(call, || f().map(|()| 0))
    }

    /// A count or value, or `-1` with `errno` set (`ibv_get_cq_event`, `mrc_poll_cq`).
    pub fn count<R: From<i8>>(&self, call: &str, f: impl FnOnce() -> Result<R, Error>) -> R {
        self.value(call, R::from(-1), f)
    }

    /// A count, or a negative errno value (`errno` set too): `mrc_ctl_poll_ev_event`.
    pub fn neg_errno(&self, call: &str, f: impl FnOnce() -> Result<c_int, Error>) -> c_int {
        self.guard(call, f).unwrap_or_else(|e| {
            set_errno(e.errno);
            -e.errno
        })
    }

    /// An object, or `NULL` with `errno` set.
    pub fn ptr<T>(&self, call: &str, f: impl FnOnce() -> Result<*mut T, Error>) -> *mut T {
        self.value(call, std::ptr::null_mut(), f)
    }

    /// A value, or `on_error` with `errno` set.
    pub fn value<R>(&self, call: &str, on_error: R, f: impl FnOnce() -> Result<R, Error>) -> R {
        self.guard(call, f).unwrap_or_else(|e| {
            set_errno(e.errno);
            on_error
        })
    }

    /// Nothing: a failure sets `errno` and is logged.
    pub fn void(&self, call: &str, f: impl FnOnce() -> Result<(), Error>) {
        if let Err(e) = self.guard(call, f) {
            set_errno(e.errno);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    static LOG: Log = Log::new("test", "MRC_FFI_TEST_LOG");
    static B: Boundary = Boundary::new(&LOG);

    fn errno() -> c_int {
        // SAFETY: reads the calling thread's errno slot.
        unsafe { *libc::__errno_location() }
    }

    #[test]
    fn panics_become_eio_and_each_convention_is_kept() {
        let e = B.guard::<()>("t", || panic!("boom")).unwrap_err();
        assert_eq!(e.errno, libc::EIO);
        assert!(
            e.why().contains("boom at ffi/src/boundary.rs"),
            "{}",
            e.why()
        );
        assert_eq!(B.errno_value("t", || panic!("boom")), libc::EIO);
        assert_eq!(
            B.errno_value("t", || Err(Error::unsupported("x"))),
            libc::EOPNOTSUPP
        );
        assert_eq!(errno(), libc::EOPNOTSUPP);
        assert_eq!(B.errno_value("t", || Ok(())), 0);
        assert_eq!(B.minus_one("t", || Err(Error::inval("x"))), -1);
        assert_eq!(errno(), libc::EINVAL);
        assert_eq!(B.count::<i32>("t", || Ok(3)), 3);
        assert_eq!(B.count::<i32>("t", || Err(Error::quiet(libc::EAGAIN))), -1);
        assert_eq!(errno(), libc::EAGAIN);
        assert_eq!(
            B.neg_errno("t", || Err(Error::new(libc::EOPNOTSUPP, "x"))),
            -libc::EOPNOTSUPP
        );
        assert!(B.ptr::<u8>("t", || panic!("boom")).is_null());
        assert_eq!(B.value("t", 7u64, || panic!("boom")), 7);
        B.void("t", || Err(Error::new(libc::EBUSY, "x")));
        assert_eq!(errno(), libc::EBUSY);
        // The boundary is left balanced after a panic, and a panic outside it is no boundary's business.
        assert_eq!(DEPTH.with(Cell::get), 0);
        assert_eq!(catch(|| 5), Ok(5));
    }

    #[test]
    fn null_checks_name_the_argument() {
        let e = non_null(std::ptr::null_mut::<u8>(), "pd").unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert!(e.why().contains("pd"));
        assert!(non_null(std::ptr::null::<u8>(), "attr").is_err());
        let x = 1u8;
        assert!(non_null(&raw const x, "x").is_ok());
    }

    #[test]
    fn host_errors_keep_their_errno_and_name_the_call() {
        let e = Error::host("posting a send", &HostError::Full("the send queue"));
        assert_eq!(e.errno, libc::ENOMEM);
        assert!(e.why().starts_with("posting a send: "), "{}", e.why());
    }
}
