//! Protection domains.

use std::cell::UnsafeCell;
use std::ffi::c_int;

use crate::abi::*;
use crate::context::{Context, context};
use crate::ffi::{Error, FFI};
use crate::host::HostPd;
use crate::registry::{self, Kind, Object, Users};

/// A protection domain.
#[repr(C)]
pub(crate) struct Pd {
    raw: UnsafeCell<ibv_pd>,
    ctx: *const Context,
    pub(crate) host: HostPd,
    /// MRs and QPs in it.
    pub(crate) users: Users,
}

// SAFETY: the C struct is the first field.
unsafe impl Object for Pd {
    type Raw = ibv_pd;
    const KIND: Kind = Kind::Pd;
}

impl Pd {
    /// The context it was allocated on.
    pub(crate) fn ctx(&self) -> &Context {
        // SAFETY: a context with PDs cannot be closed (`Users`), so it outlives the PD.
        unsafe { &*self.ctx }
    }

    /// The C view.
    pub(crate) fn raw(&self) -> *mut ibv_pd {
        self.raw.get()
    }
}

/// The live PD behind `pd`.
pub(crate) fn pd<'a>(p: *mut ibv_pd, what: &str) -> Result<&'a Pd, Error> {
    // SAFETY: the registry check inside `get` makes sure `p` is one of ours and live.
    unsafe { registry::get::<Pd>(p, what) }
}

/// Allocates a protection domain.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_alloc_pd(ctx: *mut ibv_context) -> *mut ibv_pd {
    FFI.ptr("ibv_alloc_pd", || {
        let c = context(ctx)?;
        let host = c.host.alloc_pd()?;
        c.users.add();
        Ok(registry::publish(Box::new(Pd {
            raw: UnsafeCell::new(ibv_pd {
                context: ctx,
                handle: host.id(),
            }),
            ctx: c,
            host,
            users: Users::default(),
        })))
    })
}

/// Frees a protection domain; `EBUSY` while MRs or QPs are left in it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_dealloc_pd(pd: *mut ibv_pd) -> c_int {
    FFI.errno_value("ibv_dealloc_pd", || {
        // SAFETY: verbs callers do not use a PD while freeing it.
        let p =
            unsafe { registry::destroy::<Pd>(pd, "pd", |p| p.users.idle("protection domain")) }?;
        p.ctx().host.dealloc_pd(p.host);
        p.ctx().users.sub();
        Ok(())
    })
}
