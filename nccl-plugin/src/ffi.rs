//! NCCL's error convention over the shared panic boundary (`mrc_ffi::boundary::catch`).
//!
//! Every exported function runs its body through [`call`]: a panic is caught and becomes
//! `ncclInternalError`, an [`Error`] becomes its `ncclResult_t` code; either is logged once through NCCL's
//! logger with the entry point's name and the reason.

use std::borrow::Cow;
use std::ffi::c_int;

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

/// Runs `f` as entry point `name`: a panic becomes `ncclInternalError`, an error its code; both are logged.
pub(crate) fn call(name: &'static str, f: impl FnOnce() -> Result<(), Error>) -> ncclResult_t {
    let r = mrc_ffi::boundary::catch(f).unwrap_or_else(|what| {
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
        assert!(non_null(std::ptr::null_mut::<u8>(), "p").is_err());
    }
}
