//! Which addresses are live objects of libmrc, and of what kind.
//!
//! Every entry point checks its object arguments here, so a pointer libmrc never handed out, a double
//! destroy, or a CQ passed where a QP belongs returns `EINVAL` instead of touching foreign memory. The objects
//! are the Rust structs themselves (C only sees forward declarations), leaked from a `Box` while live.

use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::ffi::Error;

/// Object kinds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Context,
    CompChannel,
    Cq,
    QpHint,
    Qp,
}

impl Kind {
    fn article(self) -> &'static str {
        if self == Kind::Context { "an" } else { "a" }
    }

    fn name(self) -> &'static str {
        match self {
            Kind::Context => "MRC context",
            Kind::CompChannel => "completion channel",
            Kind::Cq => "CQ",
            Kind::QpHint => "QP hint",
            Kind::Qp => "QP",
        }
    }
}

static LIVE: Mutex<BTreeMap<usize, Kind>> = Mutex::new(BTreeMap::new());

fn live() -> std::sync::MutexGuard<'static, BTreeMap<usize, Kind>> {
    // A panic while holding the lock cannot leave the map half-updated (single insert/remove calls).
    LIVE.lock().unwrap_or_else(|p| p.into_inner())
}

/// An object type C gets pointers to.
///
/// # Safety
/// Values of the type only ever live in a `Box` published with [`publish`].
pub(crate) unsafe trait Object: Sized {
    const KIND: Kind;
}

fn check(addr: usize, kind: Kind, what: &str) -> Result<(), Error> {
    if addr == 0 {
        return Err(Error::inval(format!("{what} is NULL")));
    }
    match live().get(&addr) {
        Some(k) if *k == kind => Ok(()),
        Some(k) => Err(Error::inval(format!(
            "{what} is {} {}, not {} {}",
            k.article(),
            k.name(),
            kind.article(),
            kind.name()
        ))),
        None => Err(Error::inval(format!(
            "{what} ({addr:#x}) is not a live {} of libmrc (already destroyed, or from elsewhere)",
            kind.name()
        ))),
    }
}

/// Leaks `b` and records it; returns the pointer C gets.
pub(crate) fn publish<T: Object>(b: Box<T>) -> *mut T {
    let p = Box::into_raw(b);
    live().insert(p as usize, T::KIND);
    p
}

/// The live object behind `p`; `what` names the argument in errors.
///
/// # Safety
/// The reference must not outlive the object: it is used within one call (destroying an object while another
/// thread uses it is a caller bug, as with verbs).
pub(crate) unsafe fn get<'a, T: Object>(p: *mut T, what: &str) -> Result<&'a T, Error> {
    check(p as usize, T::KIND, what)?;
    // SAFETY: the registry says `p` is a live `T` published by `publish`.
    Ok(unsafe { &*p })
}

/// Unpublishes a live object after `busy` (run on it) allowed it, and gives back its box.
///
/// # Safety
/// No other thread may be using the object (the rule for destroy calls).
pub(crate) unsafe fn destroy<T: Object>(
    p: *mut T,
    what: &str,
    busy: impl FnOnce(&T) -> Result<(), Error>,
) -> Result<Box<T>, Error> {
    let mut l = live();
    match l.get(&(p as usize)) {
        Some(k) if *k == T::KIND => {}
        _ => {
            drop(l);
            return check(p as usize, T::KIND, what).map(|()| unreachable!("checked above"));
        }
    }
    // SAFETY: live and of kind T (checked under the lock, which also keeps a concurrent destroy out).
    busy(unsafe { &*p })?;
    l.remove(&(p as usize));
    drop(l);
    // SAFETY: `p` came from `Box::into_raw` in `publish` and is now unpublished, so we own it again.
    Ok(unsafe { Box::from_raw(p) })
}

/// Counts the objects that hang off a parent (CQs off a context, QPs off a CQ, …).
#[derive(Debug, Default)]
pub(crate) struct Users(AtomicUsize);

impl Users {
    pub(crate) fn add(&self) {
        self.0.fetch_add(1, Ordering::AcqRel);
    }

    pub(crate) fn sub(&self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }

    pub(crate) fn count(&self) -> usize {
        self.0.load(Ordering::Acquire)
    }

    /// `EBUSY` while anything uses the parent.
    pub(crate) fn idle(&self, what: &str) -> Result<(), Error> {
        match self.count() {
            0 => Ok(()),
            n => Err(Error::new(
                libc::EBUSY,
                format!("the {what} is still used by {n} object(s); destroy them first"),
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug)]
    struct Thing(u32);
    // SAFETY: only ever published from a Box below.
    unsafe impl Object for Thing {
        const KIND: Kind = Kind::QpHint;
    }
    #[derive(Debug)]
    struct Other;
    // SAFETY: as above.
    unsafe impl Object for Other {
        const KIND: Kind = Kind::Cq;
    }

    #[test]
    fn kinds_busy_parents_and_double_destroy_are_caught() {
        let p = publish(Box::new(Thing(7)));
        // SAFETY: p is live.
        assert_eq!(unsafe { get(p, "hint") }.unwrap().0, 7);
        // SAFETY: p is NULL, live, or just destroyed: the registry decides before it is touched.
        let e = unsafe { get::<Other>(p.cast(), "cq") }.unwrap_err();
        assert!(e.why().contains("is a QP hint, not a CQ"), "{}", e.why());
        let users = Users::default();
        users.add();
        // SAFETY: p is NULL, live, or just destroyed: the registry decides before it is touched.
        let e = unsafe { destroy(p, "hint", |_| users.idle("hint")) }.unwrap_err();
        assert_eq!(e.errno, libc::EBUSY);
        users.sub();
        // SAFETY: p is NULL, live, or just destroyed: the registry decides before it is touched.
        let b = unsafe { destroy(p, "hint", |_| users.idle("hint")) }.unwrap();
        assert_eq!(b.0, 7);
        // SAFETY: p is NULL, live, or just destroyed: the registry decides before it is touched.
        let e = unsafe { destroy(p, "hint", |_| Ok(())) }.unwrap_err();
        assert_eq!(e.errno, libc::EINVAL);
        assert_eq!(
            // SAFETY: NULL is refused before it is touched.
            unsafe { get::<Thing>(std::ptr::null_mut(), "hint") }
                .unwrap_err()
                .errno,
            libc::EINVAL
        );
    }
}
