//! The exported tables `ncclNetPlugin_v8` … `ncclNetPlugin_v12`: thin per-version adapters over the one
//! implementation in [`crate::net`]. Entry points whose C signature is the same in every version are
//! written once ([`common`]); the others convert sizes and contexts and call the same functions.
#![allow(
    unsafe_code,
    reason = "exported C entry points writing NCCL's out-parameters"
)]
#![allow(
    non_upper_case_globals,
    reason = "the symbol names NCCL looks up with dlsym"
)]

use std::ffi::{c_char, c_int, c_void};

use crate::abi::{
    MAX_DEVS_PER_NIC_V12, NET_DEVICE_HOST, OPTIONAL_RECV_COMPLETION, PTR_HOST, ncclDebugLogger_t,
    ncclNetCommConfig_t, ncclNetDeviceHandle_t, ncclNetVDeviceProps_v9_t,
    ncclNetVDeviceProps_v12_t, ncclProfilerCallback_t, ncclResult_t, v8, v9, v10, v11, v12,
};
use crate::ffi::{Error, call, non_null};
use crate::net::{self, DEVICE, NAME, Props};

/// Writes `v` to the out-parameter `p`, refusing NULL.
///
/// # Safety
/// `p` is NULL or writable.
unsafe fn put<T>(p: *mut T, v: T, what: &'static str) -> Result<(), Error> {
    non_null(p, what)?;
    // SAFETY: non-NULL and writable per the contract.
    unsafe { p.write(v) };
    Ok(())
}

/// Entry points with the same C signature in every version.
mod common {
    use super::*;

    pub(super) unsafe extern "C" fn devices(ndev: *mut c_int) -> ncclResult_t {
        // SAFETY: NCCL passes a writable int.
        call("devices", || unsafe { put(ndev, net::devices()?, "ndev") })
    }

    pub(super) unsafe extern "C" fn accept(
        listen_comm: *mut c_void,
        recv_comm: *mut *mut c_void,
        _recv_dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t {
        call("accept", || {
            non_null(recv_comm, "recvComm")?;
            // SAFETY: NCCL passes the listen comm `listen` returned and a writable out-parameter.
            unsafe { put(recv_comm, net::accept(listen_comm)?, "recvComm") }
        })
    }

    pub(super) unsafe extern "C" fn reg_mr(
        comm: *mut c_void,
        data: *mut c_void,
        size: usize,
        kind: c_int,
        mhandle: *mut *mut c_void,
    ) -> ncclResult_t {
        call("regMr", || {
            non_null(mhandle, "mhandle")?;
            // SAFETY: NCCL passes one of our comms and memory it owns until deregMr.
            unsafe { put(mhandle, net::reg_mr(comm, data, size, kind)?, "mhandle") }
        })
    }

    pub(super) unsafe extern "C" fn reg_mr_dma_buf(
        _comm: *mut c_void,
        _data: *mut c_void,
        _size: usize,
        kind: c_int,
        _offset: u64,
        _fd: c_int,
        _mhandle: *mut *mut c_void,
    ) -> ncclResult_t {
        call("regMrDmaBuf", || {
            Err(Error::usage(format!(
                "DMA-BUF registration (type {kind}) is not supported: ptrSupport is NCCL_PTR_HOST"
            )))
        })
    }

    pub(super) unsafe extern "C" fn dereg_mr(
        comm: *mut c_void,
        mhandle: *mut c_void,
    ) -> ncclResult_t {
        // SAFETY: NCCL passes one of our comms and a handle regMr returned.
        call("deregMr", || unsafe { net::dereg_mr(comm, mhandle) })
    }

    pub(super) unsafe extern "C" fn iflush(
        recv_comm: *mut c_void,
        _n: c_int,
        _data: *mut *mut c_void,
        _sizes: *mut c_int,
        _mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        // SAFETY: NCCL passes a writable out-parameter.
        call("iflush", || unsafe {
            put(request, net::iflush(recv_comm)?, "request")
        })
    }

    pub(super) unsafe extern "C" fn test(
        request: *mut c_void,
        done: *mut c_int,
        sizes: *mut c_int,
    ) -> ncclResult_t {
        // SAFETY: NCCL passes a request isend/irecv returned and room for its sizes.
        call("test", || unsafe { net::test(request, done, sizes) })
    }

    pub(super) unsafe extern "C" fn close_send(comm: *mut c_void) -> ncclResult_t {
        // SAFETY: NCCL passes a send comm and uses it no more.
        call("closeSend", || unsafe { net::close(comm, true) })
    }

    pub(super) unsafe extern "C" fn close_recv(comm: *mut c_void) -> ncclResult_t {
        // SAFETY: NCCL passes a receive comm and uses it no more.
        call("closeRecv", || unsafe { net::close(comm, false) })
    }

    pub(super) unsafe extern "C" fn close_listen(comm: *mut c_void) -> ncclResult_t {
        // SAFETY: NCCL passes a listen comm and uses it no more.
        call("closeListen", || unsafe { net::close_listen(comm) })
    }

    /// `listen` without a context (v8–v10).
    pub(super) unsafe extern "C" fn listen(
        dev: c_int,
        handle: *mut c_void,
        listen_comm: *mut *mut c_void,
    ) -> ncclResult_t {
        call("listen", || {
            non_null(listen_comm, "listenComm")?;
            // SAFETY: NCCL passes a handle of NCCL_NET_HANDLE_MAXSIZE bytes and a writable out-parameter.
            unsafe {
                put(
                    listen_comm,
                    net::listen(std::ptr::null_mut(), dev, handle)?,
                    "listenComm",
                )
            }
        })
    }

    /// `listen(ctx, …)` (v11+).
    pub(super) unsafe extern "C" fn listen_ctx(
        ctx: *mut c_void,
        dev: c_int,
        handle: *mut c_void,
        listen_comm: *mut *mut c_void,
    ) -> ncclResult_t {
        call("listen", || {
            non_null(listen_comm, "listenComm")?;
            // SAFETY: as for `listen`; `ctx` is what init returned.
            unsafe { put(listen_comm, net::listen(ctx, dev, handle)?, "listenComm") }
        })
    }

    /// The `connect` of every version, once the context (NULL before v11) is known.
    pub(super) unsafe fn connect(
        ctx: *mut c_void,
        dev: c_int,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
    ) -> ncclResult_t {
        call("connect", || {
            non_null(send_comm, "sendComm")?;
            // SAFETY: NCCL passes the handle it got from listen (writable) and a writable out-parameter.
            unsafe { put(send_comm, net::connect(ctx, dev, handle)?, "sendComm") }
        })
    }

    /// The `isend` of every version (v9's signature).
    pub(super) unsafe extern "C" fn isend(
        comm: *mut c_void,
        data: *mut c_void,
        size: usize,
        tag: c_int,
        mhandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        call("isend", || {
            non_null(request, "request")?;
            // SAFETY: NCCL passes a send comm, a buffer inside `mhandle` and a writable out-parameter.
            unsafe {
                put(
                    request,
                    net::isend(comm, data, size, tag, mhandle)?,
                    "request",
                )
            }
        })
    }

    /// The `irecv` of every version; `size(i)` reads NCCL's size array; `hint` tells whether the caller's
    /// `*request` may carry NCCL_NET_OPTIONAL_RECV_COMPLETION (v9+).
    #[allow(
        clippy::too_many_arguments,
        reason = "NCCL's irecv arguments plus the version's size reader"
    )]
    pub(super) unsafe fn irecv(
        comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        size: impl Fn(usize) -> usize,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
        hint: bool,
    ) -> ncclResult_t {
        call("irecv", || {
            non_null(request, "request")?;
            // SAFETY: `request` is readable and writable (NCCL's out-parameter).
            let optional = hint && unsafe { *request } as usize == OPTIONAL_RECV_COMPLETION;
            // SAFETY: NCCL passes a receive comm and `n` buffers, tags and handles.
            let r = unsafe { net::irecv(comm, n, data, size, tags, mhandles, optional) };
            // spec: NCCL-HINT-1 — `*request` is always overwritten, also when the call fails.
            // SAFETY: as above.
            unsafe {
                put(
                    request,
                    r.as_ref().map_or(std::ptr::null_mut(), |p| *p),
                    "request",
                )
            }?;
            r.map(|_| ())
        })
    }

    /// Reads element `i` of NCCL's `int` size array (v8; every version's `iflush`/`test`).
    ///
    /// # Safety
    /// `sizes` has more than `i` elements.
    pub(super) unsafe fn int_size(sizes: *const c_int, i: usize) -> usize {
        // SAFETY: per the contract; a negative size is read as 0 and then refused by no buffer.
        usize::try_from(unsafe { *sizes.add(i) }).unwrap_or(0)
    }

    /// Properties common to every version, with the NCCL_NET_HOST device fields.
    pub(super) fn props(dev: c_int) -> Result<Props, Error> {
        net::properties(dev)
    }
}

/// A later version's properties from the v9 ones plus that version's fields.
macro_rules! props_from {
    ($t:path, $b:expr, { $($f:ident: $v:expr),* $(,)? }) => {{
        let b: v9::ncclNetProperties_v9_t = $b;
        $t {
            name: b.name,
            pciPath: b.pciPath,
            guid: b.guid,
            ptrSupport: b.ptrSupport,
            regIsGlobal: b.regIsGlobal,
            forceFlush: b.forceFlush,
            speed: b.speed,
            port: b.port,
            latency: b.latency,
            maxComms: b.maxComms,
            maxRecvs: b.maxRecvs,
            netDeviceType: b.netDeviceType,
            netDeviceVersion: b.netDeviceVersion,
            maxP2pBytes: b.maxP2pBytes,
            maxCollBytes: b.maxCollBytes,
            $($f: $v,)*
        }
    }};
}

fn name_ptr() -> *mut c_char {
    DEVICE.as_ptr().cast_mut()
}

// ---------------------------------------------------------------------------------------------- v8

mod a8 {
    use super::*;

    pub(super) unsafe extern "C" fn init(log: ncclDebugLogger_t) -> ncclResult_t {
        call("init", || net::init(log))
    }

    pub(super) unsafe extern "C" fn get_properties(
        dev: c_int,
        props: *mut v8::ncclNetProperties_v8_t,
    ) -> ncclResult_t {
        call("getProperties", || {
            let p = common::props(dev)?;
            let v = v8::ncclNetProperties_v8_t {
                name: name_ptr(),
                pciPath: std::ptr::null_mut(),
                guid: p.guid,
                ptrSupport: PTR_HOST,
                regIsGlobal: 0,
                speed: p.speed,
                port: 0,
                latency: p.latency,
                maxComms: p.max_comms,
                maxRecvs: p.max_recvs,
                netDeviceType: NET_DEVICE_HOST,
                netDeviceVersion: 0,
            };
            // SAFETY: NCCL passes a writable properties struct of this version.
            unsafe { put(props, v, "props") }
        })
    }

    pub(super) unsafe extern "C" fn connect(
        dev: c_int,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        _dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t {
        // SAFETY: forwarded from NCCL.
        unsafe { common::connect(std::ptr::null_mut(), dev, handle, send_comm) }
    }

    pub(super) unsafe extern "C" fn isend(
        comm: *mut c_void,
        data: *mut c_void,
        size: c_int,
        tag: c_int,
        mhandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        let Ok(size) = usize::try_from(size) else {
            return call("isend", || {
                Err(Error::invalid(format!("isend of {size} bytes")))
            });
        };
        // SAFETY: forwarded from NCCL.
        unsafe { common::isend(comm, data, size, tag, mhandle, request) }
    }

    pub(super) unsafe extern "C" fn irecv(
        comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut c_int,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        if sizes.is_null() {
            return call("irecv", || Err(Error::invalid("sizes is NULL")));
        }
        // SAFETY: NCCL passes `n` sizes; `common::irecv` reads only indices below `n`.
        let size = |i| unsafe { common::int_size(sizes, i) };
        // SAFETY: forwarded from NCCL; v8 has no completion hint.
        unsafe { common::irecv(comm, n, data, size, tags, mhandles, request, false) }
    }
}

/// NCCL 2.20–2.23.
#[unsafe(no_mangle)]
pub static ncclNetPlugin_v8: v8::ncclNet_v8_t = v8::ncclNet_v8_t {
    name: NAME.as_ptr(),
    init: Some(a8::init),
    devices: Some(common::devices),
    getProperties: Some(a8::get_properties),
    listen: Some(common::listen),
    connect: Some(a8::connect),
    accept: Some(common::accept),
    regMr: Some(common::reg_mr),
    regMrDmaBuf: Some(common::reg_mr_dma_buf),
    deregMr: Some(common::dereg_mr),
    isend: Some(a8::isend),
    irecv: Some(a8::irecv),
    iflush: Some(common::iflush),
    test: Some(common::test),
    closeSend: Some(common::close_send),
    closeRecv: Some(common::close_recv),
    closeListen: Some(common::close_listen),
    getDeviceMr: None,
    irecvConsumed: None,
};

// ---------------------------------------------------------------------------------------------- v9, v10

/// Properties of v9 and v10 (one layout).
fn props_v9(p: &Props, dev: c_int) -> v9::ncclNetProperties_v9_t {
    v9::ncclNetProperties_v9_t {
        name: name_ptr(),
        pciPath: std::ptr::null_mut(),
        guid: p.guid,
        ptrSupport: PTR_HOST,
        regIsGlobal: 0,
        forceFlush: 0,
        speed: p.speed,
        port: 0,
        latency: p.latency,
        maxComms: p.max_comms,
        maxRecvs: p.max_recvs,
        netDeviceType: NET_DEVICE_HOST,
        netDeviceVersion: 0,
        vProps: ncclNetVDeviceProps_v9_t {
            ndevs: 1,
            devs: [dev, 0, 0, 0],
        },
        maxP2pBytes: p.max_p2p_bytes,
        maxCollBytes: p.max_coll_bytes,
    }
}

mod a9 {
    use super::*;

    pub(super) unsafe extern "C" fn get_properties(
        dev: c_int,
        props: *mut v9::ncclNetProperties_v9_t,
    ) -> ncclResult_t {
        call("getProperties", || {
            let v = props_v9(&common::props(dev)?, dev);
            // SAFETY: NCCL passes a writable properties struct of this version.
            unsafe { put(props, v, "props") }
        })
    }

    pub(super) unsafe extern "C" fn irecv(
        comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut usize,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        if sizes.is_null() {
            return call("irecv", || Err(Error::invalid("sizes is NULL")));
        }
        // SAFETY: NCCL passes `n` sizes; `common::irecv` reads only indices below `n`.
        let size = |i| unsafe { *sizes.add(i) };
        // SAFETY: forwarded from NCCL.
        unsafe { common::irecv(comm, n, data, size, tags, mhandles, request, true) }
    }
}

/// NCCL 2.24–2.25.
#[unsafe(no_mangle)]
pub static ncclNetPlugin_v9: v9::ncclNet_v9_t = v9::ncclNet_v9_t {
    name: NAME.as_ptr(),
    init: Some(a8::init),
    devices: Some(common::devices),
    getProperties: Some(a9::get_properties),
    listen: Some(common::listen),
    connect: Some(a8::connect),
    accept: Some(common::accept),
    regMr: Some(common::reg_mr),
    regMrDmaBuf: Some(common::reg_mr_dma_buf),
    deregMr: Some(common::dereg_mr),
    isend: Some(common::isend),
    irecv: Some(a9::irecv),
    iflush: Some(common::iflush),
    test: Some(common::test),
    closeSend: Some(common::close_send),
    closeRecv: Some(common::close_recv),
    closeListen: Some(common::close_listen),
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
};

mod a10 {
    use super::*;

    pub(super) unsafe extern "C" fn init(
        log: ncclDebugLogger_t,
        _prof: ncclProfilerCallback_t,
    ) -> ncclResult_t {
        call("init", || net::init(log))
    }

    pub(super) unsafe extern "C" fn connect(
        dev: c_int,
        _config: *mut ncclNetCommConfig_t,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        _dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t {
        // SAFETY: forwarded from NCCL.
        unsafe { common::connect(std::ptr::null_mut(), dev, handle, send_comm) }
    }

    pub(super) unsafe extern "C" fn isend(
        comm: *mut c_void,
        data: *mut c_void,
        size: usize,
        tag: c_int,
        mhandle: *mut c_void,
        _phandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        // SAFETY: forwarded from NCCL.
        unsafe { common::isend(comm, data, size, tag, mhandle, request) }
    }

    pub(super) unsafe extern "C" fn irecv(
        comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut usize,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        _phandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t {
        // SAFETY: forwarded from NCCL.
        unsafe { a9::irecv(comm, n, data, sizes, tags, mhandles, request) }
    }
}

/// NCCL 2.26–2.27.
#[unsafe(no_mangle)]
pub static ncclNetPlugin_v10: v10::ncclNet_v10_t = v10::ncclNet_v10_t {
    name: NAME.as_ptr(),
    init: Some(a10::init),
    devices: Some(common::devices),
    getProperties: Some(a9::get_properties),
    listen: Some(common::listen),
    connect: Some(a10::connect),
    accept: Some(common::accept),
    regMr: Some(common::reg_mr),
    regMrDmaBuf: Some(common::reg_mr_dma_buf),
    deregMr: Some(common::dereg_mr),
    isend: Some(a10::isend),
    irecv: Some(a10::irecv),
    iflush: Some(common::iflush),
    test: Some(common::test),
    closeSend: Some(common::close_send),
    closeRecv: Some(common::close_recv),
    closeListen: Some(common::close_listen),
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
};

// ---------------------------------------------------------------------------------------------- v11, v12

mod a11 {
    use super::*;

    pub(super) unsafe extern "C" fn init(
        ctx: *mut *mut c_void,
        comm_id: u64,
        config: *mut ncclNetCommConfig_t,
        log: ncclDebugLogger_t,
        _prof: ncclProfilerCallback_t,
    ) -> ncclResult_t {
        call("init", || {
            non_null(ctx, "ctx")?;
            // SAFETY: NCCL passes NULL or a readable config.
            let cfg = (!config.is_null()).then(|| unsafe { *config });
            // SAFETY: `ctx` is writable (NCCL's out-parameter, checked non-NULL).
            unsafe { put(ctx, net::init_ctx(log, comm_id, cfg)?, "ctx") }
        })
    }

    pub(super) unsafe extern "C" fn finalize(ctx: *mut c_void) -> ncclResult_t {
        // SAFETY: NCCL passes the context init returned, once.
        call("finalize", || unsafe { net::finalize(ctx) })
    }

    pub(super) unsafe extern "C" fn get_properties(
        dev: c_int,
        props: *mut v11::ncclNetProperties_v11_t,
    ) -> ncclResult_t {
        call("getProperties", || {
            let b = props_v9(&common::props(dev)?, dev);
            let v = props_from!(v11::ncclNetProperties_v11_t, b, { vProps: b.vProps, maxMultiRequestSize: 1 });
            // SAFETY: NCCL passes a writable properties struct of this version.
            unsafe { put(props, v, "props") }
        })
    }

    pub(super) unsafe extern "C" fn connect(
        ctx: *mut c_void,
        dev: c_int,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        _dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t {
        // SAFETY: forwarded from NCCL.
        unsafe { common::connect(ctx, dev, handle, send_comm) }
    }
}

/// NCCL 2.28–2.29.
#[unsafe(no_mangle)]
pub static ncclNetPlugin_v11: v11::ncclNet_v11_t = v11::ncclNet_v11_t {
    name: NAME.as_ptr(),
    init: Some(a11::init),
    devices: Some(common::devices),
    getProperties: Some(a11::get_properties),
    listen: Some(common::listen_ctx),
    connect: Some(a11::connect),
    accept: Some(common::accept),
    regMr: Some(common::reg_mr),
    regMrDmaBuf: Some(common::reg_mr_dma_buf),
    deregMr: Some(common::dereg_mr),
    isend: Some(a10::isend),
    irecv: Some(a10::irecv),
    iflush: Some(common::iflush),
    test: Some(common::test),
    closeSend: Some(common::close_send),
    closeRecv: Some(common::close_recv),
    closeListen: Some(common::close_listen),
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
    finalize: Some(a11::finalize),
    setNetAttr: None,
};

mod a12 {
    use super::*;

    pub(super) unsafe extern "C" fn get_properties(
        dev: c_int,
        props: *mut v12::ncclNetProperties_v12_t,
    ) -> ncclResult_t {
        call("getProperties", || {
            let b = props_v9(&common::props(dev)?, dev);
            let mut devs = [0; MAX_DEVS_PER_NIC_V12];
            devs[0] = dev;
            // One NIC spans every plane: no single rail or plane (NCCL_NET_ID_UNDEF).
            let v = props_from!(v12::ncclNetProperties_v12_t, b, {
                vProps: ncclNetVDeviceProps_v12_t { ndevs: 1, devs },
                maxMultiRequestSize: 1,
                railId: -1,
                planeId: -1,
            });
            // SAFETY: NCCL passes a writable properties struct of this version.
            unsafe { put(props, v, "props") }
        })
    }
}

/// NCCL 2.30 and later.
#[unsafe(no_mangle)]
pub static ncclNetPlugin_v12: v12::ncclNet_v12_t = v12::ncclNet_v12_t {
    name: NAME.as_ptr(),
    init: Some(a11::init),
    devices: Some(common::devices),
    getProperties: Some(a12::get_properties),
    listen: Some(common::listen_ctx),
    connect: Some(a11::connect),
    accept: Some(common::accept),
    regMr: Some(common::reg_mr),
    regMrDmaBuf: Some(common::reg_mr_dma_buf),
    deregMr: Some(common::dereg_mr),
    isend: Some(a10::isend),
    irecv: Some(a10::irecv),
    iflush: Some(common::iflush),
    test: Some(common::test),
    closeSend: Some(common::close_send),
    closeRecv: Some(common::close_recv),
    closeListen: Some(common::close_listen),
    getDeviceMr: None,
    irecvConsumed: None,
    makeVDevice: None,
    finalize: Some(a11::finalize),
    setNetAttr: None,
};
