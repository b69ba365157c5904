//! The context (`ibv_close_device`), the query verbs and asynchronous events; `ops.rs` opens it with its ops
//! tables.
//!
//! The context the application gets is `&verbs_context.context` inside a `Context`, with
//! `abi_compat = VERBS_ABI_IS_EXTENDED` and `sz = sizeof(verbs_context)`, so the inline `verbs_get_ctx_op`
//! finds our extension ops and newer applications see the ops we do not know as absent
//! (`verbs-nccl-abi.md` §1.3). Extension ops with no MRC meaning point at stubs that log the op and fail with
//! `EOPNOTSUPP`, so even inline-only verbs leave a log line.

use std::cell::UnsafeCell;
use std::ffi::{c_int, c_uint, c_void};
use std::mem::offset_of;
use std::sync::Arc;

use crate::abi::*;
use crate::device::{self, Device};
use crate::ffi::{self, Error, FFI};
use crate::host::{HostDevice, HostEvent};
use crate::log::log;
use crate::registry::{self, Kind, Object, Users};

/// An open device.
#[repr(C)]
pub(crate) struct Context {
    vctx: UnsafeCell<verbs_context>,
    pub(crate) dev: &'static Device,
    pub(crate) host: Arc<HostDevice>,
    /// PDs, CQs and completion channels created on it.
    pub(crate) users: Users,
    /// Holds of libmrc's MRC contexts (`api.rs`): unlike verbs children, these make `ibv_close_device` fail
    /// with `EBUSY`, since libmrc would be left with a context it cannot release.
    pub(crate) holds: Users,
}

// SAFETY: the C `ibv_context` is the `context` member of the first field, a `verbs_context`.
unsafe impl Object for Context {
    type Raw = ibv_context;
    const KIND: Kind = Kind::Context;
    const RAW_OFFSET: usize = offset_of!(verbs_context, context);
}

impl Context {
    /// Opens `dev` with the ops tables `fill_ops` writes.
    pub(crate) fn open(
        dev: &'static Device,
        fill_ops: fn(&mut verbs_context),
    ) -> Result<*mut ibv_context, Error> {
        let host = HostDevice::open(&dev.cfg, u32::try_from(dev.index).unwrap_or(u32::MAX))?;
        // SAFETY: `verbs_context` is plain data (function pointers as Options, integers, a pthread mutex whose
        // all-zero value is PTHREAD_MUTEX_INITIALIZER on glibc); all-zero is valid.
        let mut v: verbs_context = unsafe { std::mem::zeroed() };
        v.sz = size_of::<verbs_context>();
        fill_ops(&mut v);
        let c = &mut v.context;
        c.device = dev.raw();
        c.cmd_fd = -1;
        // The host's event fd: readable once per queued event, so applications may poll it.
        c.async_fd = host.event_fd();
        c.num_comp_vectors = 1;
        c.abi_compat = VERBS_ABI_IS_EXTENDED;
        let ctx = Box::new(Self {
            vctx: UnsafeCell::new(v),
            dev,
            host,
            users: Users::default(),
            holds: Users::default(),
        });
        // SAFETY: initialises the context's mutex in place, inside the box that will not move.
        unsafe {
            libc::pthread_mutex_init(&raw mut (*ctx.vctx.get()).context.mutex, std::ptr::null())
        };
        log!(Info, "opened {} ({})", dev.cfg.name, dev.cfg.source);
        Ok(registry::publish(ctx))
    }

    /// The C view.
    pub(crate) fn raw(&self) -> *mut ibv_context {
        // SAFETY: only forms a pointer to a field of our own cell.
        unsafe { &raw mut (*self.vctx.get()).context }
    }

    /// The port's LID: plane 0's UDP port (optional for peers: the GID finds the host).
    pub(crate) fn lid(&self) -> u16 {
        self.host.port()
    }

    /// GID 0: finds this context's host without a LID (`mrc_host::PeerAddr::from_verbs`).
    pub(crate) fn gid(&self) -> ibv_gid {
        ibv_gid {
            raw: self.host.gid().octets(),
        }
    }
}

/// The live context behind `ctx`.
pub(crate) fn context<'a>(ctx: *mut ibv_context) -> Result<&'a Context, Error> {
    // SAFETY: the registry check inside `get` makes sure `ctx` is one of ours and live.
    unsafe { registry::get::<Context>(ctx, "context") }
}

fn write_port_attr(
    c: &Context,
    port: u8,
    out: *mut ibv_port_attr,
    len: usize,
) -> Result<(), Error> {
    let out = ffi::non_null(out, "port_attr")?;
    device::check_port(port.into())?;
    let a = c.dev.port_attr(c.lid());
    // SAFETY: the caller's buffer holds `len` bytes; we write at most that many, zeroing what we do not know
    // (a newer application's larger struct).
    unsafe {
        let n = len.min(size_of::<ibv_port_attr>());
        std::ptr::write_bytes(out.cast::<u8>(), 0, len);
        std::ptr::copy_nonoverlapping((&raw const a).cast::<u8>(), out.cast::<u8>(), n);
    }
    Ok(())
}

/// `verbs_context.query_port`: the inline `ibv_query_port` calls it with the application's struct size.
pub(crate) unsafe extern "C" fn query_port_op(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
    len: usize,
) -> c_int {
    FFI.errno_value("ibv_query_port", || {
        write_port_attr(context(ctx)?, port, attr, len)
    })
}

/// `verbs_context.query_device_ex`: the classic attributes, no extended capabilities.
pub(crate) unsafe extern "C" fn query_device_ex_op(
    ctx: *mut ibv_context,
    input: *const c_void,
    attr: *mut ibv_device_attr_ex,
    len: usize,
) -> c_int {
    FFI.errno_value("ibv_query_device_ex", || {
        let c = context(ctx)?;
        let attr = ffi::non_null(attr, "attr")?;
        if !input.is_null() {
            // SAFETY: `struct ibv_query_device_ex_input` starts with its u32 comp_mask.
            let mask = unsafe { *input.cast::<u32>() };
            if mask != 0 {
                return Err(Error::inval(format!(
                    "input comp_mask {mask:#x} is not supported"
                )));
            }
        }
        if len < size_of::<ibv_device_attr>() {
            return Err(Error::inval(format!(
                "attr_size {len} is smaller than ibv_device_attr"
            )));
        }
        let a = c.dev.attr();
        // SAFETY: the caller's struct holds `len` bytes, at least an `ibv_device_attr`.
        unsafe {
            std::ptr::write_bytes(attr.cast::<u8>(), 0, len);
            std::ptr::copy_nonoverlapping(&raw const a, &raw mut (*attr).orig_attr, 1);
        }
        Ok(())
    })
}

// ---------------------------------------------------------------------------------------------------------
// Exported entry points
// ---------------------------------------------------------------------------------------------------------

/// Closes a context; `EBUSY` while PDs, CQs or completion channels are left on it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_close_device(ctx: *mut ibv_context) -> c_int {
    FFI.errno_value("ibv_close_device", || {
        // SAFETY: verbs callers do not use a context while closing it.
        let c = unsafe {
            registry::destroy::<Context>(ctx, "context", |c| c.holds.idle("context (by libmrc)"))
        }?;
        if let Err(e) = c.users.idle("context") {
            // rdma-core closes whatever is left (the kernel frees it), and perftest's ib_send_bw client
            // leaves its receive CQ: succeed, and keep the context for the objects still using it.
            log!(
                Info,
                "ibv_close_device: {}: they stay usable until the process exits",
                e.why()
            );
            Box::leak(c);
            return Ok(());
        }
        // SAFETY: the mutex was initialised at open and nobody holds it now.
        unsafe { libc::pthread_mutex_destroy(&raw mut (*c.vctx.get()).context.mutex) };
        Ok(())
    })
}

/// Device attributes.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_device(
    ctx: *mut ibv_context,
    attr: *mut ibv_device_attr,
) -> c_int {
    FFI.errno_value("ibv_query_device", || {
        let c = context(ctx)?;
        let attr = ffi::non_null(attr, "device_attr")?;
        // SAFETY: the caller passes a writable `ibv_device_attr`.
        unsafe { attr.write(c.dev.attr()) };
        Ok(())
    })
}

/// The compat `ibv_query_port`, reached when an application's inline wrapper finds no `query_port` op; it may
/// write only the old 48-byte struct.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_port(
    ctx: *mut ibv_context,
    port: u8,
    attr: *mut ibv_port_attr,
) -> c_int {
    FFI.errno_value("ibv_query_port", || {
        write_port_attr(context(ctx)?, port, attr, 48)
    })
}

/// GID `index` of `port`: index 0 finds this host (shim/README.md, "Addressing").
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    gid: *mut ibv_gid,
) -> c_int {
    FFI.count("ibv_query_gid", || {
        let c = context(ctx)?;
        let gid = ffi::non_null(gid, "gid")?;
        device::check_port(port.into())?;
        if index != 0 {
            return Err(Error::inval(format!(
                "GID index {index} does not exist (the table has index 0)"
            )));
        }
        // SAFETY: the caller passes a writable 16-byte GID.
        unsafe { gid.write(c.gid()) };
        Ok(0)
    })
}

/// `ibv_query_gid_type` (IBVERBS_PRIVATE, used by ibv_devinfo): every GID is RoCE v2.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_gid_type(
    ctx: *mut ibv_context,
    port: u8,
    index: c_uint,
    ty: *mut c_int,
) -> c_int {
    FFI.count("ibv_query_gid_type", || {
        context(ctx)?;
        let ty = ffi::non_null(ty, "type")?;
        device::check_port(port.into())?;
        if index != 0 {
            return Err(Error::inval(format!("GID index {index} does not exist")));
        }
        // SAFETY: the caller passes a writable int.
        unsafe { *ty = IBV_GID_TYPE_SYSFS_ROCE_V2 };
        Ok(0)
    })
}

fn gid_entry(c: &Context) -> ibv_gid_entry {
    ibv_gid_entry {
        gid: c.gid(),
        gid_index: 0,
        port_num: 1,
        gid_type: IBV_GID_TYPE_ROCE_V2,
        ndev_ifindex: 0,
    }
}

/// `ibv_query_gid_ex` (inline) lands here.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_ex(
    ctx: *mut ibv_context,
    port: u32,
    index: u32,
    entry: *mut ibv_gid_entry,
    flags: u32,
    entry_size: usize,
) -> c_int {
    FFI.errno_value("ibv_query_gid_ex", || {
        let c = context(ctx)?;
        let entry = ffi::non_null(entry, "entry")?;
        device::check_port(port)?;
        if flags != 0 || entry_size < size_of::<ibv_gid_entry>() {
            return Err(Error::inval(format!(
                "flags {flags:#x} / entry_size {entry_size} not supported"
            )));
        }
        if index != 0 {
            return Err(Error::inval(format!("GID index {index} does not exist")));
        }
        // SAFETY: the caller's entry holds `entry_size` ≥ sizeof bytes.
        unsafe { entry.write(gid_entry(c)) };
        Ok(())
    })
}

/// `ibv_query_gid_table` (inline) lands here: one entry.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn _ibv_query_gid_table(
    ctx: *mut ibv_context,
    entries: *mut ibv_gid_entry,
    max_entries: usize,
    flags: u32,
    entry_size: usize,
) -> isize {
    let r = FFI.guard("ibv_query_gid_table", || {
        let c = context(ctx)?;
        let entries = ffi::non_null(entries, "entries")?;
        if flags != 0 || entry_size < size_of::<ibv_gid_entry>() || max_entries == 0 {
            return Err(Error::inval(format!(
                "flags {flags:#x} / entry_size {entry_size} / max_entries {max_entries} not supported"
            )));
        }
        // SAFETY: the caller's array holds at least one entry of `entry_size` bytes.
        unsafe { entries.write(gid_entry(c)) };
        Ok(1)
    });
    // Failures return a negative errno.
    r.unwrap_or_else(|e| -(e.errno as isize))
}

/// P_Key `index` (the default full-membership key 0xffff at index 0), big-endian.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_query_pkey(
    ctx: *mut ibv_context,
    port: u8,
    index: c_int,
    pkey: *mut u16,
) -> c_int {
    FFI.count("ibv_query_pkey", || {
        context(ctx)?;
        let pkey = ffi::non_null(pkey, "pkey")?;
        device::check_port(port.into())?;
        if index != 0 {
            return Err(Error::inval(format!("P_Key index {index} does not exist")));
        }
        // SAFETY: the caller passes a writable u16.
        unsafe { *pkey = 0xffff_u16.to_be() };
        Ok(0)
    })
}

/// The index of a big-endian P_Key.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_pkey_index(ctx: *mut ibv_context, port: u8, pkey: u16) -> c_int {
    FFI.count("ibv_get_pkey_index", || {
        context(ctx)?;
        device::check_port(port.into())?;
        if u16::from_be(pkey) & 0x7fff != 0x7fff {
            return Err(Error::new(
                libc::ENOENT,
                format!("P_Key {:#x} is not in the table", u16::from_be(pkey)),
            ));
        }
        Ok(0)
    })
}

/// Waits for the next asynchronous event (blocking unless `async_fd` was made non-blocking).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn ibv_get_async_event(
    ctx: *mut ibv_context,
    event: *mut ibv_async_event,
) -> c_int {
    FFI.count("ibv_get_async_event", || {
        let c = context(ctx)?;
        let event = ffi::non_null(event, "event")?;
        let ev = loop {
            mrc_ffi::eventfd::wait(c.host.event_fd(), "the event fd")?;
            match c.host.next_event() {
                // Counted but taken by another thread: wait again.
                None => {}
                // Its QP or CQ was destroyed meanwhile.
                Some(None) => {}
                Some(Some(e)) => break e,
            }
        };
        let (ty, element) = match ev {
            HostEvent::QpFatal(p) => (IBV_EVENT_QP_FATAL, p),
            HostEvent::CqError(p) => (IBV_EVENT_CQ_ERR, p),
        };
        // SAFETY: the caller passes a writable event.
        unsafe {
            event.write(ibv_async_event {
                element: element as *mut c_void,
                event_type: ty,
            })
        };
        Ok(0)
    })
}
