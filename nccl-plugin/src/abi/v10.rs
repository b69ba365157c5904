//! `ncclNet_v10_t` (NCCL 2.26–2.27): `init` takes a profiler callback, `connect` a per-connection config,
//! `isend`/`irecv` a profiler handle each.

use std::ffi::{c_char, c_int, c_void};

use super::fns::*;
use super::v9::ncclNetProperties_v9_t;
use super::{
    ncclDebugLogger_t, ncclNetCommConfig_t, ncclNetDeviceHandle_t, ncclNetVDeviceProps_v9_t,
    ncclProfilerCallback_t, ncclResult_t,
};

/// `ncclNetProperties_v10_t`: the v9 layout.
pub type ncclNetProperties_v10_t = ncclNetProperties_v9_t;

/// `isend(sendComm, data, size, tag, mhandle, phandle, &request)` (v10+).
pub type Isend = Option<
    unsafe extern "C" fn(
        send_comm: *mut c_void,
        data: *mut c_void,
        size: usize,
        tag: c_int,
        mhandle: *mut c_void,
        phandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;
/// `irecv(recvComm, n, data[], sizes[], tags[], mhandles[], phandles[], &request)` (v10+).
pub type Irecv = Option<
    unsafe extern "C" fn(
        recv_comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut usize,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        phandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;

/// `ncclNet_v10_t`.
#[repr(C)]
pub struct ncclNet_v10_t {
    /// The name `NCCL_NET` is compared with.
    pub name: *const c_char,
    /// `init(logger, profiler)`.
    pub init: Option<
        unsafe extern "C" fn(log: ncclDebugLogger_t, prof: ncclProfilerCallback_t) -> ncclResult_t,
    >,
    /// `devices(&ndev)`.
    pub devices: Devices,
    /// `getProperties`.
    pub getProperties: GetProperties<ncclNetProperties_v10_t>,
    /// `listen`.
    pub listen: Listen,
    /// `connect(dev, config, handle, &sendComm, &sendDevComm)`.
    pub connect: Option<
        unsafe extern "C" fn(
            dev: c_int,
            config: *mut ncclNetCommConfig_t,
            handle: *mut c_void,
            send_comm: *mut *mut c_void,
            send_dev_comm: *mut *mut ncclNetDeviceHandle_t,
        ) -> ncclResult_t,
    >,
    /// `accept`.
    pub accept: Accept,
    /// `regMr`.
    pub regMr: RegMr,
    /// `regMrDmaBuf`.
    pub regMrDmaBuf: RegMrDmaBuf,
    /// `deregMr`.
    pub deregMr: DeregMr,
    /// `isend`.
    pub isend: Isend,
    /// `irecv`.
    pub irecv: Irecv,
    /// `iflush`.
    pub iflush: Iflush,
    /// `test`.
    pub test: Test,
    /// `closeSend`.
    pub closeSend: Close,
    /// `closeRecv`.
    pub closeRecv: Close,
    /// `closeListen`.
    pub closeListen: Close,
    /// `getDeviceMr` (may be NULL).
    pub getDeviceMr: GetDeviceMr,
    /// `irecvConsumed` (may be NULL).
    pub irecvConsumed: IrecvConsumed,
    /// `makeVDevice` (may be NULL).
    pub makeVDevice: MakeVDevice<ncclNetVDeviceProps_v9_t>,
}

// SAFETY: immutable table of function pointers and a static string, as for v8.
unsafe impl Sync for ncclNet_v10_t {}
