//! Which addresses are live objects of this library, and of what kind.
//!
//! Control-path calls (`ibv_dealloc_pd`, `ibv_create_qp(pd, …)`, …) check their object arguments here, so a
//! pointer the shim never handed out, a double destroy, or a PD passed where a CQ belongs returns `EINVAL`
//! instead of touching foreign memory. The data path (`ibv_post_send`, `ibv_poll_cq`) is reached only through
//! an object's own context ops and checks for NULL only, as providers do.

use mrc_ffi::registry::{Refusal, Registry};

use crate::ffi::Error;

/// Object kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Context,
    Pd,
    Mr,
    CompChannel,
    Cq,
    Qp,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Context => "context",
            Kind::Pd => "protection domain",
            Kind::Mr => "memory region",
            Kind::CompChannel => "completion channel",
            Kind::Cq => "completion queue",
            Kind::Qp => "queue pair",
        }
    }
}

static LIVE: Registry<Kind> = Registry::new();

/// Records a new object.
pub(crate) fn insert(addr: usize, kind: Kind) {
    LIVE.insert(addr, kind);
}

fn refused(addr: usize, kind: Kind, what: &str, r: Refusal<Kind>) -> Error {
    match r {
        Refusal::Null => Error::inval(format!("{what} is NULL")),
        Refusal::Wrong(k) => {
            Error::inval(format!("{what} is a {}, not a {}", k.name(), kind.name()))
        }
        Refusal::NotLive => Error::inval(format!(
            "{what} ({addr:#x}) is not a live {} of mrc-verbs-shim (already destroyed, or from another library)",
            kind.name()
        )),
    }
}

/// Checks that `addr` is a live object of `kind`; `what` names the argument in the error.
pub(crate) fn check(addr: usize, kind: Kind, what: &str) -> Result<(), Error> {
    LIVE.check(addr, kind)
        .map_err(|r| refused(addr, kind, what, r))
}

/// Forgets an object being destroyed; fails as [`check`] does if it is not live.
pub(crate) fn remove(addr: usize, kind: Kind, what: &str) -> Result<(), Error> {
    LIVE.remove(addr, kind)
        .map_err(|r| refused(addr, kind, what, r))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_and_double_removal_are_caught() {
        let a = 0x1000_0000_usize;
        insert(a, Kind::Pd);
        assert!(check(a, Kind::Pd, "pd").is_ok());
        let e = check(a, Kind::Cq, "cq").unwrap_err();
        assert!(e.why().contains("protection domain"), "{e:?}");
        remove(a, Kind::Pd, "pd").unwrap();
        assert_eq!(remove(a, Kind::Pd, "pd").unwrap_err().errno, libc::EINVAL);
        assert_eq!(check(0, Kind::Pd, "pd").unwrap_err().errno, libc::EINVAL);
    }
}

/// A container the shim hands out as a C object: `#[repr(C)]`, with the C struct at `RAW_OFFSET`.
///
/// # Safety
/// `RAW_OFFSET` must be the offset of a `Self::Raw` inside `Self`, and `Self` must only ever live in a `Box`
/// published with [`publish`].
pub(crate) unsafe trait Object: Sized {
    /// The C struct.
    type Raw;
    /// Its kind in the registry.
    const KIND: Kind;
    /// Where the C struct sits in the container.
    const RAW_OFFSET: usize = 0;
}

/// Leaks `b` and records it; returns the pointer C callers get.
pub(crate) fn publish<T: Object>(b: Box<T>) -> *mut T::Raw {
    let p = Box::into_raw(b);
    // SAFETY: `RAW_OFFSET` lies inside the allocation (the trait's contract).
    let raw = unsafe { p.cast::<u8>().add(T::RAW_OFFSET) }.cast::<T::Raw>();
    insert(raw as usize, T::KIND);
    crate::log::log!(Debug, "created {:?} {raw:p}", T::KIND);
    raw
}

/// The container behind a live C object; `what` names the argument in errors.
///
/// # Safety
/// The returned reference must not outlive the object (callers use it within one verbs call; destroying an
/// object while another thread uses it is a caller bug, as with any provider).
pub(crate) unsafe fn get<'a, T: Object>(p: *mut T::Raw, what: &str) -> Result<&'a T, Error> {
    check(p as usize, T::KIND, what)?;
    // SAFETY: the registry says `p` is a live `T::Raw` published by `publish::<T>`, so the container starts
    // `RAW_OFFSET` bytes before it.
    Ok(unsafe { &*p.cast::<u8>().sub(T::RAW_OFFSET).cast::<T>() })
}

/// The container behind a C object reached through its own context's ops (data path): NULL-checked only.
///
/// # Safety
/// `p` must be NULL or an object of kind `T` published by this library and still live.
pub(crate) unsafe fn get_unchecked<'a, T: Object>(
    p: *mut T::Raw,
    what: &str,
) -> Result<&'a T, Error> {
    if p.is_null() {
        return Err(Error::inval(format!("{what} is NULL")));
    }
    // SAFETY: the caller guarantees `p` was published by `publish::<T>`.
    Ok(unsafe { &*p.cast::<u8>().sub(T::RAW_OFFSET).cast::<T>() })
}

/// Unpublishes a live object and gives back its box, after `busy` (run on the live object) allowed it.
///
/// # Safety
/// No other thread may be using the object (the verbs rule for destroy calls).
pub(crate) unsafe fn destroy<T: Object>(
    p: *mut T::Raw,
    what: &str,
    busy: impl FnOnce(&T) -> Result<(), Error>,
) -> Result<Box<T>, Error> {
    // SAFETY: forwarded contract.
    let obj = unsafe { get::<T>(p, what) }?;
    busy(obj)?;
    remove(p as usize, T::KIND, what)?;
    crate::log::log!(Debug, "destroyed {:?} {p:p}", T::KIND);
    // SAFETY: `p` was published from a `Box<T>` by `publish` and is now unpublished, so we own it again.
    Ok(unsafe { Box::from_raw(p.cast::<u8>().sub(T::RAW_OFFSET).cast::<T>()) })
}

/// Counts the objects that hang off a parent (MRs and QPs off a PD, QPs off a CQ, …).
#[derive(Debug, Default)]
pub(crate) struct Users(std::sync::atomic::AtomicUsize);

impl Users {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }

    pub(crate) fn sub(&self) {
        self.0.fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }

    /// `EBUSY` while anything uses the parent.
    pub(crate) fn idle(&self, what: &str) -> Result<(), Error> {
        match self.0.load(std::sync::atomic::Ordering::Acquire) {
            0 => Ok(()),
            n => Err(Error::new(
                libc::EBUSY,
                format!("the {what} is still used by {n} object(s); destroy them first"),
            )),
        }
    }
}
