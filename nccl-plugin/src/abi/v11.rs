//! `ncclNet_v11_t` (NCCL 2.28–2.29): `init` and `finalize` per communicator with a context pointer that
//! `listen` and `connect` receive; `setNetAttr`; `maxMultiRequestSize` in the properties.

use std::ffi::{c_int, c_void};

use super::fns::*;
use super::v10::{Irecv, Isend};
use super::{
    ncclDebugLogger_t, ncclNetAttr_v11_t, ncclNetCommConfig_t, ncclNetDeviceHandle_t,
    ncclNetVDeviceProps_v9_t, ncclProfilerCallback_t, ncclResult_t,
};

properties! {
    /// `ncclNetProperties_v11_t` (112 bytes).
    ncclNetProperties_v11_t {
        /// Whether receives need a flush.
        forceFlush: c_int,
    } {
        /// Physical devices behind this one.
        vProps: ncclNetVDeviceProps_v9_t,
        /// Largest point-to-point transfer.
        maxP2pBytes: usize,
        /// Largest collective transfer.
        maxCollBytes: usize,
        /// Requests one multi-request may hold.
        maxMultiRequestSize: c_int,
    }
}

/// `init(&ctx, commId, config, logger, profiler)`.
pub type Init = Option<
    unsafe extern "C" fn(
        ctx: *mut *mut c_void,
        comm_id: u64,
        config: *mut ncclNetCommConfig_t,
        log: ncclDebugLogger_t,
        prof: ncclProfilerCallback_t,
    ) -> ncclResult_t,
>;
/// `listen(ctx, dev, handle, &listenComm)`.
pub type Listen = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        dev: c_int,
        handle: *mut c_void,
        listen_comm: *mut *mut c_void,
    ) -> ncclResult_t,
>;
/// `connect(ctx, dev, handle, &sendComm, &sendDevComm)`.
pub type Connect = Option<
    unsafe extern "C" fn(
        ctx: *mut c_void,
        dev: c_int,
        handle: *mut c_void,
        send_comm: *mut *mut c_void,
        send_dev_comm: *mut *mut ncclNetDeviceHandle_t,
    ) -> ncclResult_t,
>;
/// `finalize(ctx)`.
pub type Finalize = Option<unsafe extern "C" fn(ctx: *mut c_void) -> ncclResult_t>;
/// `setNetAttr(ctx, attr)`.
pub type SetNetAttr =
    Option<unsafe extern "C" fn(ctx: *mut c_void, attr: *mut ncclNetAttr_v11_t) -> ncclResult_t>;

net_table! {
    /// `ncclNet_v11_t`.
    ncclNet_v11_t {
        init: Init, getProperties: GetProperties<ncclNetProperties_v11_t>, listen: Listen, connect: Connect,
        isend: Isend, irecv: Irecv,
        /// `makeVDevice` (may be NULL).
        makeVDevice: MakeVDevice<ncclNetVDeviceProps_v9_t>,
        /// `finalize`, once per `init`.
        finalize: Finalize,
        /// `setNetAttr` (may be NULL).
        setNetAttr: SetNetAttr,
    }
}
