//! Version and device queries, MRC contexts, and asynchronous events.

#![allow(
    non_camel_case_types,
    reason = "the object types carry their C names (mrc.h)"
)]

use std::ffi::c_int;
use std::sync::Arc;

use crate::abi::*;
use crate::device::{self, Device};
use crate::ffi::{Error, FFI, non_null};
use crate::log::log_once;
use crate::registry::{self, Kind, Object, Users};
use mrc_verbs_shim::api as verbs;

/// An MRC context: one program's handle on one MRC device, parent of its CQs, channels, hints and QPs.
pub struct mrc_context {
    pub(crate) vctx: *mut ibv_context,
    pub(crate) dev: Arc<Device>,
    /// The application API revision the program was written for (0 given: the newest).
    #[allow(
        dead_code,
        reason = "stage 2: selects the 1.0.0 or 1.0.1 layout of what the transport reports"
    )]
    pub(crate) api_version: u32,
    /// Objects created on it.
    pub(crate) users: Users,
    /// QP hints created on it (limited by `max_qp_hint`).
    pub(crate) hints: Users,
    /// Its asynchronous events (`mrc_get_async_event`).
    pub(crate) sink: Arc<crate::events::Sink>,
}

// SAFETY: only ever published from a Box by `mrc_create_context`.
unsafe impl Object for mrc_context {
    const KIND: Kind = Kind::Context;
}

// SAFETY: the raw pointers are the application's verbs context (used only through the thread-safe
// `mrc_verbs_shim::api`) and event elements (plain addresses handed back to the application); the rest is Sync.
unsafe impl Send for mrc_context {}
// SAFETY: as above.
unsafe impl Sync for mrc_context {}

/// The live context behind `p`.
pub(crate) fn context<'a>(p: *mut mrc_context) -> Result<&'a mrc_context, Error> {
    // SAFETY: the registry check inside `get` makes sure `p` is one of ours and live.
    unsafe { registry::get(p, "mrc_ctx") }
}

fn write_out<T>(p: *mut T, v: T) {
    if !p.is_null() {
        // SAFETY: the caller passed a pointer to writable memory of type T (the header's contract).
        unsafe { p.write(v) };
    }
}

/// The API revisions implemented. NULL outputs are skipped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_version(
    current_version: *mut u32,
    last_supported_version: *mut u32,
    vendor_version: *mut u32,
    last_supported_vendor_version: *mut u32,
) {
    FFI.void("mrc_query_version", || {
        write_out(current_version, MRC_API_CURRENT_VERSION);
        // mrc_query_device keeps the 1.0.0 meaning, so 1.0.0 programs are still served.
        write_out(last_supported_version, mrc_api_ver(1, 0, 0));
        write_out(vendor_version, MRC_VENDOR_API_CURRENT_VERSION);
        write_out(
            last_supported_vendor_version,
            MRC_VENDOR_API_CURRENT_VERSION,
        );
        Ok(())
    })
}

/// The device of a verbs context, if it is an MRC device (a shim device).
pub(crate) fn device_of(vctx: *mut ibv_context) -> Option<Arc<Device>> {
    verbs::device_info(vctx).map(device::get)
}

fn query_device(
    vctx: *mut ibv_context,
    mctx: Option<&mrc_context>,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> Result<(), Error> {
    non_null(vctx, "context")?;
    non_null(attr, "attr")?;
    non_null(supported, "supported")?;
    if let Some(m) = mctx
        && m.vctx != vctx
    {
        return Err(Error::inval(
            "mcontext was created on another verbs context",
        ));
    }
    match device_of(vctx) {
        Some(d) => {
            write_out(attr, d.attr());
            write_out(supported, 1);
        }
        None => {
            write_out(attr, mrc_device_attr::default());
            write_out(supported, 0);
        }
    }
    Ok(())
}

/// Whether `context` is an MRC device, and its attributes (revision 1.0.0 form).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_device(
    context: *mut ibv_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_query_device", || {
        query_device(context, None, attr, supported)
    })
}

/// Whether `context` is an MRC device, and its attributes, for the program behind `mcontext` (may be NULL).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_device_ex(
    context: *mut ibv_context,
    mcontext: *mut mrc_context,
    attr: *mut mrc_device_attr,
    supported: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_query_device_ex", || {
        let m = if mcontext.is_null() {
            None
        } else {
            Some(crate::context::context(mcontext)?)
        };
        query_device(context, m, attr, supported)
    })
}

/// Opens an MRC context on a verbs context of an MRC device.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_context(
    vcontext: *mut ibv_context,
    context_attr: *mut mrc_context_attr,
) -> *mut mrc_context {
    FFI.ptr("mrc_create_context", || {
        non_null(vcontext, "vcontext")?;
        let attr = if context_attr.is_null() {
            mrc_context_attr::default()
        } else {
            // SAFETY: non-NULL, and the header's contract makes it a readable `mrc_context_attr`.
            unsafe { context_attr.read() }
        };
        let mut v = attr.mrc_api_version_used;
        if v == MRC_PROTOCOL_VERSION_1 {
            // OCP's mrc_example passes the protocol version here: 1 would read as API 0.0.1, which no
            // library implements. Taken as the current API.
            log_once!(
                "mrc_api_version_used=MRC_PROTOCOL_VERSION_1",
                Warn,
                "mrc_create_context: mrc_api_version_used 1 is MRC_PROTOCOL_VERSION_1, not an MRC_API_VER(); \
                 taken as the current API {}.{}.{}",
                MRC_API_CURRENT_VERSION >> 24,
                (MRC_API_CURRENT_VERSION >> 16) & 0xff,
                MRC_API_CURRENT_VERSION & 0xffff
            );
            v = MRC_API_CURRENT_VERSION;
        }
        if v != 0 && !(mrc_api_ver(1, 0, 0)..=MRC_API_CURRENT_VERSION).contains(&v) {
            return Err(Error::inval(format!(
                "mrc_api_version_used {}.{}.{} is not one libmrc implements (1.0.0 to 1.0.1)",
                v >> 24,
                (v >> 16) & 0xff,
                v & 0xffff
            )));
        }
        let vv = attr.mrc_vendor_api_version_used;
        if vv != 0 && vv != MRC_VENDOR_API_CURRENT_VERSION {
            return Err(Error::inval(
                "mrc_vendor_api_version_used must be 0 or 1.0.0 (libmrc has no vendor extensions)",
            ));
        }
        let Some(dev) = device_of(vcontext) else {
            return Err(Error::new(
                libc::ENODEV,
                "vcontext is not an open MRC device of this libmrc (libmrc.so carries the verbs devices: \
                 preload only libmrc.so, not libmrc_verbs_shim.so as well)",
            ));
        };
        let sink = crate::events::Sink::new(dev.info.device_index, vcontext)?;
        crate::events::install();
        verbs::hold_context(vcontext)?;
        Ok(registry::publish(Box::new(mrc_context {
            vctx: vcontext,
            dev,
            api_version: if v == 0 { MRC_API_CURRENT_VERSION } else { v },
            users: Users::default(),
            hints: Users::default(),
            sink,
        })))
    })
}

/// Frees a context; `EBUSY` while objects remain on it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_context(mrc_ctx: *mut mrc_context) -> c_int {
    FFI.minus_one("mrc_destroy_context", || {
        // SAFETY: the caller does not use the context while destroying it.
        let c = unsafe {
            registry::destroy(mrc_ctx, "mrc_ctx", |c: &mrc_context| {
                c.users.idle("MRC context")
            })
        }?;
        let _ = verbs::release_context(c.vctx);
        Ok(())
    })
}

/// Waits for the next asynchronous event of the context.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_get_async_event(
    mrc_ctx: *mut mrc_context,
    event: *mut mrc_async_event,
) -> c_int {
    FFI.minus_one("mrc_get_async_event", || {
        let c = context(mrc_ctx)?;
        non_null(event, "event")?;
        let e = c.sink.get()?;
        write_out(event, e);
        Ok(())
    })
}

/// Acknowledges an event (events hold no resources in libmrc; checks the argument only).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ack_async_event(event: *mut mrc_async_event) {
    FFI.void("mrc_ack_async_event", || non_null(event, "event").map(drop))
}

/// A context on a made-up device (no verbs context, no shim), for unit tests of the objects below it.
#[cfg(test)]
pub(crate) fn test_context(device_index: u32, planes: u32) -> *mut mrc_context {
    let info = verbs::DeviceInfo {
        device_index,
        planes,
        usid: false,
        lid: 0,
        gid: [0; 16],
    };
    registry::publish(Box::new(mrc_context {
        vctx: std::ptr::null_mut(),
        dev: device::get(info),
        api_version: MRC_API_CURRENT_VERSION,
        users: Users::default(),
        hints: Users::default(),
        sink: crate::events::Sink::new(device_index, std::ptr::null_mut()).expect("eventfd"),
    }))
}
