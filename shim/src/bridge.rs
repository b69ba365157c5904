//! The bridge to libmrc's OCP C API (`capi/`, issue 15): how `libmrc.so` recognises the shim's verbs objects.
//!
//! The OCP API takes the application's `ibv_context` and `ibv_pd`, which come from this library (preloaded).
//! libmrc is a separate shared object, so it cannot share Rust types with the shim; it looks up
//! [`mrc_shim_bridge_v1`] with `dlsym` and calls the C functions of the table it returns. The table only grows
//! (new members at the end, `size` says how many there are), so an older libmrc keeps working with a newer
//! shim. Every function runs inside the shim's panic boundary and returns 0 or an errno value.
//!
//! Holding a context or PD counts as a user of it, so `ibv_close_device` and `ibv_dealloc_pd` refuse
//! (`EBUSY`) while an MRC context or QP still depends on it, as they do for the shim's own children.

use std::ffi::{c_char, c_int};

use crate::abi::{ibv_context, ibv_pd};
use crate::context::context;
use crate::ffi::{Error, guard};
use crate::pd::pd;

/// What libmrc learns about an open device.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct MrcShimContextInfo {
    /// The device's index in `ibv_get_device_list` (stable for the process).
    pub device_index: u32,
    /// MRC planes (libmrc presents them as ports 1..=planes of the controller API).
    pub planes: u32,
    /// Non-zero when EVs are SRv6 uSIDs; zero when they are UDP source ports (plain mode).
    pub usid: u32,
    /// Port 1's LID (plane 0's UDP port).
    pub lid: u16,
    /// GID 0 (plane 0's address).
    pub gid: [u8; 16],
    /// The device name (`mrc0`, …), NUL-terminated.
    pub name: [c_char; 64],
}

/// The bridge's function table (version 1).
#[repr(C)]
pub struct MrcShimBridgeV1 {
    /// `size_of::<MrcShimBridgeV1>()` of the shim that filled it in.
    pub size: usize,
    /// Fills `info` for a live context of this shim; `EINVAL` for anything else.
    pub context_info: unsafe extern "C" fn(*mut ibv_context, *mut MrcShimContextInfo) -> c_int,
    /// Counts one more user of a live context (`ibv_close_device` then says `EBUSY`).
    pub context_hold: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    /// Undoes one `context_hold`.
    pub context_release: unsafe extern "C" fn(*mut ibv_context) -> c_int,
    /// Counts one more user of a live PD and writes its context to `*ctx`.
    pub pd_hold: unsafe extern "C" fn(*mut ibv_pd, *mut *mut ibv_context) -> c_int,
    /// Undoes one `pd_hold`.
    pub pd_release: unsafe extern "C" fn(*mut ibv_pd) -> c_int,
}

fn errno_of(r: Result<(), Error>) -> c_int {
    match r {
        Ok(()) => 0,
        Err(e) => e.errno,
    }
}

unsafe extern "C" fn context_info(ctx: *mut ibv_context, info: *mut MrcShimContextInfo) -> c_int {
    errno_of(guard("mrc_shim_bridge.context_info", || {
        // "Is this an MRC device?" is a normal question for libmrc to ask: no log line for "no".
        let c = context(ctx).map_err(|e| Error::quiet(e.errno))?;
        if info.is_null() {
            return Err(Error::inval("info is NULL"));
        }
        let mut name = [0 as c_char; 64];
        for (d, s) in name.iter_mut().zip(c.dev.cfg.name.bytes().take(63)) {
            *d = s as c_char;
        }
        let out = MrcShimContextInfo {
            device_index: u32::try_from(c.dev.index).unwrap_or(u32::MAX),
            planes: u32::try_from(c.dev.cfg.node.planes.len()).unwrap_or(u32::MAX),
            usid: u32::from(c.dev.cfg.node.usid_block.is_some()),
            lid: c.lid(),
            gid: c.dev.gid().raw,
            name,
        };
        // SAFETY: `info` is non-NULL and, by the bridge's contract, points at a writable `MrcShimContextInfo`.
        unsafe { info.write(out) };
        Ok(())
    }))
}

unsafe extern "C" fn context_hold(ctx: *mut ibv_context) -> c_int {
    errno_of(guard("mrc_shim_bridge.context_hold", || {
        let c = context(ctx)?;
        c.users.add();
        c.holds.add();
        Ok(())
    }))
}

unsafe extern "C" fn context_release(ctx: *mut ibv_context) -> c_int {
    errno_of(guard("mrc_shim_bridge.context_release", || {
        let c = context(ctx)?;
        c.holds.sub();
        c.users.sub();
        Ok(())
    }))
}

unsafe extern "C" fn pd_hold(p: *mut ibv_pd, ctx: *mut *mut ibv_context) -> c_int {
    errno_of(guard("mrc_shim_bridge.pd_hold", || {
        let p = pd(p, "pd")?;
        if ctx.is_null() {
            return Err(Error::inval("ctx is NULL"));
        }
        p.users.add();
        // SAFETY: `ctx` is non-NULL and points at a writable pointer (the bridge's contract); the PD's C
        // struct is live, so reading its `context` member is sound.
        unsafe { ctx.write((*p.raw()).context) };
        Ok(())
    }))
}

unsafe extern "C" fn pd_release(p: *mut ibv_pd) -> c_int {
    errno_of(guard("mrc_shim_bridge.pd_release", || {
        pd(p, "pd")?.users.sub();
        Ok(())
    }))
}

static BRIDGE: MrcShimBridgeV1 = MrcShimBridgeV1 {
    size: size_of::<MrcShimBridgeV1>(),
    context_info,
    context_hold,
    context_release,
    pd_hold,
    pd_release,
};

/// The bridge table; libmrc finds this function with `dlsym(RTLD_DEFAULT, "mrc_shim_bridge_v1")`.
#[unsafe(no_mangle)]
pub extern "C" fn mrc_shim_bridge_v1() -> *const MrcShimBridgeV1 {
    &BRIDGE
}
