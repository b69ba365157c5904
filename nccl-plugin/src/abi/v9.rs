//! `ncclNet_v9_t` (NCCL 2.24–2.25): `size_t` sizes in `isend`/`irecv`, virtual devices, `forceFlush`,
//! transfer-size limits in the properties.

use std::ffi::{c_int, c_void};

use super::fns::*;
use super::v8::{Connect, Init};
use super::{ncclNetVDeviceProps_v9_t, ncclResult_t};

properties! {
    /// `ncclNetProperties_v9_t` (104 bytes); also `_v10_t`.
    ncclNetProperties_v9_t {
        /// Whether receives need a flush.
        forceFlush: c_int,
    } {
        /// Physical devices behind this one.
        vProps: ncclNetVDeviceProps_v9_t,
        /// Largest point-to-point transfer.
        maxP2pBytes: usize,
        /// Largest collective transfer.
        maxCollBytes: usize,
    }
}

/// `isend(sendComm, data, size_t size, tag, mhandle, &request)`.
pub type Isend = Option<
    unsafe extern "C" fn(
        send_comm: *mut c_void,
        data: *mut c_void,
        size: usize,
        tag: c_int,
        mhandle: *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;
/// `irecv(recvComm, n, data[], size_t sizes[], tags[], mhandles[], &request)`.
pub type Irecv = Option<
    unsafe extern "C" fn(
        recv_comm: *mut c_void,
        n: c_int,
        data: *mut *mut c_void,
        sizes: *mut usize,
        tags: *mut c_int,
        mhandles: *mut *mut c_void,
        request: *mut *mut c_void,
    ) -> ncclResult_t,
>;

net_table! {
    /// `ncclNet_v9_t`.
    ncclNet_v9_t {
        init: Init, getProperties: GetProperties<ncclNetProperties_v9_t>, listen: Listen, connect: Connect,
        isend: Isend, irecv: Irecv,
        /// `makeVDevice` (may be NULL).
        makeVDevice: MakeVDevice<ncclNetVDeviceProps_v9_t>,
    }
}
