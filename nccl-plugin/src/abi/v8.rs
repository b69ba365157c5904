//! `ncclNet_v8_t` (NCCL 2.20–2.23): `int` sizes, `init(logger)`, 19 slots with the name.

use std::ffi::{c_int, c_void};

use super::fns::*;
use super::{ncclDebugLogger_t, ncclNetDeviceHandle_t, ncclResult_t};

properties! {
    /// `ncclNetProperties_v8_t` (64 bytes).
    ncclNetProperties_v8_t {} {}
}

/// `init(logger)` (v8, v9).
pub type Init = Option<unsafe extern "C" fn(log: ncclDebugLogger_t) -> ncclResult_t>;
/// `connect(dev, handle, &sendComm, &sendDevComm)` (v8, v9).
pub type Connect = Option<
    unsafe extern "C" fn(
        dev: c_int,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        send_dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t,
>;
/// `isend(sendComm, data, int size, tag, mhandle, &request)`.
pub type Isend = Option<
    unsafe extern "C" fn(
        send_comm: *mut c_void,
        data: *mut c_void,
        size: c_int,
        tag: c_int,
        mhandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;
/// `irecv(recvComm, n, data[], int sizes[], tags[], mhandles[], &request)`.
pub type Irecv = Option<
    unsafe extern "C" fn(
        recv_comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut c_int,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;

net_table! {
    /// `ncclNet_v8_t`.
    ncclNet_v8_t {
        init: Init, getProperties: GetProperties<ncclNetProperties_v8_t>, listen: Listen, connect: Connect,
        isend: Isend, irecv: Irecv,
    }
}
