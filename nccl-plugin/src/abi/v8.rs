//! `ncclNet_v8_t` (NCCL 2.20–2.23): `int` sizes, `init(logger)`, 19 slots after the name.

use std::ffi::{c_char, c_int, c_void};

use super::fns::*;
use super::{ncclDebugLogger_t, ncclNetDeviceHandle_t, ncclResult_t};

/// `ncclNetProperties_v8_t` (64 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v8_t {
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
}

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

/// `ncclNet_v8_t`.
#[repr(C)]
pub struct ncclNet_v8_t {
    /// The name `NCCL_NET` is compared with.
    pub name: *const c_char,
    /// `init(logger)`.
    pub init: Option<unsafe extern "C" fn(log: ncclDebugLogger_t) -> ncclResult_t>,
    /// `devices(&ndev)`.
    pub devices: Devices,
    /// `getProperties`.
    pub getProperties: GetProperties<ncclNetProperties_v8_t>,
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
}

// SAFETY: the table is immutable after construction and holds only function pointers and a pointer to a
// static string; sharing it between threads is what NCCL does with it.
unsafe impl Sync for ncclNet_v8_t {}
