//! `ncclNet_v11_t` (NCCL 2.28–2.29): `init` and `finalize` per communicator with a context pointer that
//! `listen` and `connect` receive; `setNetAttr`; `maxMultiRequestSize` in the properties.

use std::ffi::{c_char, c_int, c_void};

use super::fns::*;
use super::v10::{Irecv, Isend};
use super::{
    ncclDebugLogger_t, ncclNetAttr_v11_t, ncclNetCommConfig_t, ncclNetDeviceHandle_t,
    ncclNetVDeviceProps_v9_t, ncclProfilerCallback_t, ncclResult_t,
};

/// `ncclNetProperties_v11_t` (112 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v11_t {
    /// Device name, for logs.
    pub name: *mut c_char,
    /// sysfs path of the PCI device, or NULL for a virtual NIC.
    pub pciPath: *mut c_char,
    /// Unique id of the NIC.
    pub guid: u64,
    /// `NCCL_PTR_*` bits.
    pub ptrSupport: c_int,
    /// Whether a registration is valid for every comm.
    pub regIsGlobal: c_int,
    /// Whether receives need a flush.
    pub forceFlush: c_int,
    /// Port speed in Mbit/s.
    pub speed: c_int,
    /// Port number.
    pub port: c_int,
    /// Latency in µs.
    pub latency: f32,
    /// Comms the device supports.
    pub maxComms: c_int,
    /// Receives one `irecv` may group.
    pub maxRecvs: c_int,
    /// `ncclNetDeviceType` (offload).
    pub netDeviceType: c_int,
    /// Offload version.
    pub netDeviceVersion: c_int,
    /// Physical devices behind this one.
    pub vProps: ncclNetVDeviceProps_v9_t,
    /// Largest point-to-point transfer.
    pub maxP2pBytes: usize,
    /// Largest collective transfer.
    pub maxCollBytes: usize,
    /// Requests one multi-request may hold.
    pub maxMultiRequestSize: c_int,
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

/// `ncclNet_v11_t`.
#[repr(C)]
pub struct ncclNet_v11_t {
    /// The name `NCCL_NET` is compared with.
    pub name: *const c_char,
    /// `init`, once per communicator.
    pub init: Init,
    /// `devices(&ndev)`.
    pub devices: Devices,
    /// `getProperties`.
    pub getProperties: GetProperties<ncclNetProperties_v11_t>,
    /// `listen`.
    pub listen: Listen,
    /// `connect`.
    pub connect: Connect,
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
    /// `finalize`, once per `init`.
    pub finalize: Finalize,
    /// `setNetAttr` (may be NULL).
    pub setNetAttr: SetNetAttr,
}

// SAFETY: immutable table of function pointers and a static string, as for v8.
unsafe impl Sync for ncclNet_v11_t {}
