//! The way into mrc-verbs-shim's objects: the application's `ibv_context` and `ibv_pd` come from the shim
//! (preloaded), which exports `mrc_shim_bridge_v1` (`shim/src/bridge.rs`). libmrc finds it with `dlsym` at
//! first use, so it never links the shim (whose `ibv_*` exports would then come along twice) and works with
//! whichever copy the process loaded. Without the shim there are no MRC devices: queries say "unsupported" and
//! creating a context fails with `ENODEV`.

use std::ffi::{c_char, c_int};
use std::sync::OnceLock;

use crate::abi::{ibv_context, ibv_pd};
use crate::ffi::Error;

/// Mirror of the shim's `MrcShimContextInfo`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct ContextInfo {
    pub(crate) device_index: u32,
    pub(crate) planes: u32,
    pub(crate) usid: u32,
    pub(crate) lid: u16,
    pub(crate) gid: [u8; 16],
    pub(crate) name: [c_char; 64],
}

/// Mirror of the shim's `MrcShimBridgeV1`.
#[repr(C)]
pub(crate) struct Table {
    size: usize,
    context_info: unsafe extern "C" fn(*mut ibv_context, *mut ContextInfo) -> c_int,
    context_hold: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    context_release: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    pd_hold: unsafe extern "C" fn(*mut ibv_pd, *mut *mut ibv_context) -> c_int,
    pd_release: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
}

struct Found(Option<&'static Table>);
// SAFETY: the table is an immutable static of the shim; its functions are thread-safe.
unsafe impl Send for Found {}
// SAFETY: as above.
unsafe impl Sync for Found {}

static TABLE: OnceLock<Found> = OnceLock::new();

fn lookup() -> Found {
    // SAFETY: dlsym with a NUL-terminated name; RTLD_DEFAULT searches the global scope.
    let sym = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"mrc_shim_bridge_v1".as_ptr()) };
    if sym.is_null() {
        return Found(None);
    }
    // SAFETY: the shim exports `mrc_shim_bridge_v1` as `extern "C" fn() -> *const MrcShimBridgeV1`.
    let f: extern "C" fn() -> *const Table = unsafe { std::mem::transmute(sym) };
    let t = f();
    // SAFETY: a non-NULL result points at the shim's static table, which lives as long as the process keeps
    // the shim loaded (a preload is never unloaded).
    match unsafe { t.as_ref() } {
        Some(t) if t.size >= size_of::<Table>() => Found(Some(t)),
        _ => Found(None),
    }
}

fn table() -> Option<&'static Table> {
    TABLE.get_or_init(lookup).0
}

fn no_shim() -> Error {
    Error::new(
        libc::ENODEV,
        "no MRC device: mrc-verbs-shim is not loaded (run with LD_PRELOAD=libmrc_verbs_shim.so)",
    )
}

fn result(rc: c_int, what: impl FnOnce() -> String) -> Result<(), Error> {
    match rc {
        0 => Ok(()),
        e => Err(Error::new(e, what())),
    }
}

/// The device behind a verbs context, or `None` if the context is not an MRC device's (or no shim).
pub(crate) fn context_info(ctx: *mut ibv_context) -> Option<ContextInfo> {
    let t = table()?;
    let mut info = std::mem::MaybeUninit::<ContextInfo>::uninit();
    // SAFETY: the shim checks `ctx` against its registry and writes a full `ContextInfo` on success.
    let rc = unsafe { (t.context_info)(ctx, info.as_mut_ptr()) };
    // SAFETY: rc == 0 means the shim wrote it.
    (rc == 0).then(|| unsafe { info.assume_init() })
}

/// Marks the verbs context as used by an MRC context (`ibv_close_device` then fails with `EBUSY`).
pub(crate) fn context_hold(ctx: *mut ibv_context) -> Result<(), Error> {
    let t = table().ok_or_else(no_shim)?;
    // SAFETY: the shim validates `ctx`.
    result(unsafe { (t.context_hold)(ctx) }, || {
        "the verbs context is not an open mrc-verbs-shim device".into()
    })
}

/// Undoes [`context_hold`].
pub(crate) fn context_release(ctx: *mut ibv_context) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `ctx`; a held context cannot have been closed.
        unsafe { (t.context_release)(ctx) };
    }
}

/// Marks the PD as used by a QP and returns its verbs context.
pub(crate) fn pd_hold(pd: *mut ibv_pd) -> Result<*mut ibv_context, Error> {
    let t = table().ok_or_else(no_shim)?;
    let mut ctx = std::ptr::null_mut();
    // SAFETY: the shim validates `pd` and writes `ctx` on success.
    result(unsafe { (t.pd_hold)(pd, &mut ctx) }, || {
        "pd is not a live protection domain of mrc-verbs-shim".into()
    })?;
    Ok(ctx)
}

/// Undoes [`pd_hold`].
pub(crate) fn pd_release(pd: *mut ibv_pd) {
    if let Some(t) = table() {
        // SAFETY: the shim validates `pd`; a held PD cannot have been freed.
        unsafe { (t.pd_release)(pd) };
    }
}
