//! `ncclNet_v12_t` (NCCL 2.30+): the v11 table with eight devices per virtual NIC and rail/plane ids in the
//! properties.

use std::ffi::{c_char, c_int};

use super::fns::*;
use super::ncclNetVDeviceProps_v12_t;
use super::v10::{Irecv, Isend};
use super::v11::{Connect, Finalize, Init, Listen, SetNetAttr};

/// `ncclNetProperties_v12_t` (128 bytes).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct ncclNetProperties_v12_t {
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
    pub vProps: ncclNetVDeviceProps_v12_t,
    /// Largest point-to-point transfer.
    pub maxP2pBytes: usize,
    /// Largest collective transfer.
    pub maxCollBytes: usize,
    /// Requests one multi-request may hold.
    pub maxMultiRequestSize: c_int,
    /// Rail of the NIC, or -1.
    pub railId: i16,
    /// Plane of the NIC, or -1.
    pub planeId: i16,
}

/// `ncclNet_v12_t`.
#[repr(C)]
pub struct ncclNet_v12_t {
    /// The name `NCCL_NET` is compared with.
    pub name: *const c_char,
    /// `init`, once per communicator.
    pub init: Init,
    /// `devices(&ndev)`.
    pub devices: Devices,
    /// `getProperties`.
    pub getProperties: GetProperties<ncclNetProperties_v12_t>,
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
    pub makeVDevice: MakeVDevice<ncclNetVDeviceProps_v12_t>,
    /// `finalize`, once per `init`.
    pub finalize: Finalize,
    /// `setNetAttr` (may be NULL).
    pub setNetAttr: SetNetAttr,
}

// SAFETY: immutable table of function pointers and a static string, as for v8.
unsafe impl Sync for ncclNet_v12_t {}
