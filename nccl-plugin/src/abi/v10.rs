//! `ncclNet_v10_t` (NCCL 2.26–2.27): `init` takes a profiler callback, `connect` a per-connection config,
//! `isend`/`irecv` a profiler handle each.

use std::ffi::{c_int, c_void};

use super::fns::*;
use super::v9::ncclNetProperties_v9_t;
use super::{
    ncclDebugLogger_t, ncclNetCommConfig_t, ncclNetDeviceHandle_t, ncclNetVDeviceProps_v9_t,
    ncclProfilerCallback_t, ncclResult_t,
};

/// `ncclNetProperties_v10_t`: the v9 layout.
pub type ncclNetProperties_v10_t = ncclNetProperties_v9_t;

/// `init(logger, profiler)`.
pub type Init = Option<
    unsafe extern "C" fn(log: ncclDebugLogger_t, prof: ncclProfilerCallback_t) -> ncclResult_t,
>;
/// `connect(dev, config, handle, &sendComm, &sendDevComm)`.
pub type Connect = Option<
    unsafe extern "C" fn(
        dev: c_int,
        config: *mut ncclNetCommConfig_t,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        send_dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t,
>;
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

net_table! {
    /// `ncclNet_v10_t`.
    ncclNet_v10_t {
        init: Init, getProperties: GetProperties<ncclNetProperties_v10_t>, listen: Listen, connect: Connect,
        isend: Isend, irecv: Irecv,
        /// `makeVDevice` (may be NULL).
        makeVDevice: MakeVDevice<ncclNetVDeviceProps_v9_t>,
    }
}
