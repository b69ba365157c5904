//! The panic boundary and NCCL's error convention (rustls-ffi's idea, with `ncclResult_t` codes).
//!
//! Every exported function runs its body through [`call`]: a panic is caught and becomes
//! `ncclInternalError`, an [`Error`] becomes its code; either is logged once through NCCL's logger with the
//! entry point's name and the reason.

use std::borrow::Cow;
use std::cell::{Cell, RefCell};
use std::ffi::c_int;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Once;

use crate::abi::{ncclResult_t, result};
use crate::log::warning;

/// Why a call failed: the NCCL result code and the reason logged with the call's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Error {
    pub(crate) code: c_int,
    pub(crate) why: Cow<'static, str>,
}

impl Error {
    fn new(code: c_int, why: impl Into<Cow<'static, str>>) -> Self {
        Self {
            code,
            why: why.into(),
        }
    }

    /// `ncclInvalidArgument`: NULL or out-of-range arguments.
    pub(crate) fn invalid(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(result::INVALID_ARGUMENT, why)
    }

    /// `ncclInvalidUsage`: a call NCCL should not make in this state or configuration.
    pub(crate) fn usage(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(result::INVALID_USAGE, why)
    }

    /// `ncclSystemError`: a resource or the host layer failed.
    pub(crate) fn system(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(result::SYSTEM_ERROR, why)
    }

    /// `ncclRemoteError`: the peer or the network failed, or the peer broke the protocol.
    pub(crate) fn remote(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(result::REMOTE_ERROR, why)
    }

    /// `ncclInternalError`: a bug here.
    pub(crate) fn internal(why: impl Into<Cow<'static, str>>) -> Self {
        Self::new(result::INTERNAL_ERROR, why)
    }
}

impl std::fmt::Display for Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.why)
    }
}

/// A `NULL` check naming the argument.
pub(crate) fn non_null<T>(p: *mut T, what: &'static str) -> Result<*mut T, Error> {
    if p.is_null() {
        Err(Error::invalid(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

thread_local! {
    /// Entry points in progress on this thread (a panic inside one is reported by its boundary).
    static DEPTH: Cell<u32> = const { Cell::new(0) };
    /// The last panic's message and location, for the boundary's log line.
    static LAST: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs, once, a panic hook that records a panic inside an entry point for its boundary to log (one
/// line through NCCL's logger instead of Rust's report on stderr) and defers to the previous hook elsewhere.
fn hook() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
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
                .unwrap_or_else(|| "non-string payload".into());
            let at = info
                .location()
                .map(|l| format!(" at {}:{}", l.file(), l.line()))
                .unwrap_or_default();
            LAST.with(|l| *l.borrow_mut() = Some(format!("{msg}{at}")));
        }));
    });
}

/// Runs `f` as entry point `name`: a panic becomes `ncclInternalError`, an error its code; both are logged.
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> Result<(), Error>) -> ncclResult_t {
    hook();
    DEPTH.with(|d| d.set(d.get() + 1));
    let r = catch_unwind(AssertUnwindSafe(f));
    DEPTH.with(|d| d.set(d.get() - 1));
    let r = r.unwrap_or_else(|_| {
        let what = LAST
            .with(|l| l.borrow_mut().take())
            .unwrap_or_else(|| "unknown".into());
        Err(Error::internal(format!(
            "internal error (panic: {what}); please report it"
        )))
    });
    match r {
        Ok(()) => result::SUCCESS,
        Err(e) => {
            warning!("{name}: {}", e.why);
            e.code
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn panics_and_errors_become_result_codes() {
        assert_eq!(call("ok", || Ok(())), result::SUCCESS);
        assert_eq!(
            call("bad", || Err(Error::invalid("x is NULL"))),
            result::INVALID_ARGUMENT
        );
        assert_eq!(
            call("remote", || Err(Error::remote("peer gone"))),
            result::REMOTE_ERROR
        );
        assert_eq!(call("boom", || panic!("planted")), result::INTERNAL_ERROR);
        // The boundary is left balanced after a panic.
        assert_eq!(DEPTH.with(Cell::get), 0);
        assert!(non_null(std::ptr::null_mut::<u8>(), "p").is_err());
    }
}
