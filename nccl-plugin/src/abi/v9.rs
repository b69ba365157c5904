//! `ncclNet_v9_t` (NCCL 2.24–2.25): `size_t` sizes in `isend`/`irecv`, virtual devices, `forceFlush`,
//! transfer-size limits in the properties.

use std::ffi::{c_char, c_int, c_void};

use super::fns::*;
use super::{ncclDebugLogger_t, ncclNetDeviceHandle_t, ncclNetVDeviceProps_v9_t, ncclResult_t};

/// `ncclNetProperties_v9_t` (104 bytes); also `_v10_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v9_t {
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

/// `ncclNet_v9_t`.
#[repr(C)]
pub struct ncclNet_v9_t {
    /// The name `NCCL_NET` is compared with.
    pub name: *const c_char,
    /// `init(logger)`.
    pub init: Option<unsafe extern "C" fn(log: ncclDebugLogger_t) -> ncclResult_t>,
    /// `devices(&ndev)`.
    pub devices: Devices,
    /// `getProperties`.
    pub getProperties: GetProperties<ncclNetProperties_v9_t>,
    /// `listen`.
    pub listen: Listen,
    /// `connect(dev, handle, &sendComm, &sendDevComm)`.
    pub connect: Option<
        unsafe extern "C" fn(
            dev: c_int,
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
unsafe impl Sync for ncclNet_v9_t {}
