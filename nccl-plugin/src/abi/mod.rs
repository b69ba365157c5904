//! NCCL's external net-plugin ABI, written by hand per version (`ncclNet_v8_t` … `ncclNet_v12_t`).
//!
//! Only what a plugin sees is declared: the properties structs, the per-communicator configuration and
//! attribute structs, and the function tables. `tests/layout.rs` checks every size and offset against the
//! values measured with NCCL's own headers (`shared/design/verbs-nccl-abi.md` §4.2) and against
//! `include/nccl_net_mrc.h`, a C rendering of these declarations compiled in the test.
#![allow(
    non_camel_case_types,
    non_snake_case,
    reason = "the C names, so each type and field can be found in NCCL's headers"
)]

use std::ffi::{c_char, c_int, c_ulong, c_void};

/// Declares a `ncclNetProperties_v*_t`: the fields every version has, `forceFlush` (v9+) in `$mid`, and
/// the version's additions in `$tail`.
macro_rules! properties {
    ($(#[$doc:meta])* $name:ident { $($(#[$md:meta])* $mid:ident: $mt:ty,)* } { $($(#[$td:meta])* $tail:ident: $tt:ty,)* }) => {
        $(#[$doc])*
        #[repr(C)]
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            /// Device name, for logs.
            pub name: *mut std::ffi::c_char,
            /// sysfs path of the PCI device, or NULL for a virtual NIC.
            pub pciPath: *mut std::ffi::c_char,
            /// Unique id of the NIC.
            pub guid: u64,
            /// `NCCL_PTR_*` bits.
            pub ptrSupport: std::ffi::c_int,
            /// Whether a registration is valid for every comm.
            pub regIsGlobal: std::ffi::c_int,
            $($(#[$md])* pub $mid: $mt,)*
            /// Port speed in Mbit/s.
            pub speed: std::ffi::c_int,
            /// Port number.
            pub port: std::ffi::c_int,
            /// Latency in µs.
            pub latency: f32,
            /// Comms the device supports.
            pub maxComms: std::ffi::c_int,
            /// Receives one `irecv` may group.
            pub maxRecvs: std::ffi::c_int,
            /// `ncclNetDeviceType` (offload).
            pub netDeviceType: std::ffi::c_int,
            /// Offload version.
            pub netDeviceVersion: std::ffi::c_int,
            $($(#[$td])* pub $tail: $tt,)*
        }
    };
}

/// Declares a `ncclNet_v*_t`: the slots every version has in NCCL's order, with the version's types for
/// the slots whose signature changed, and its additions at the end.
macro_rules! net_table {
    ($(#[$doc:meta])* $name:ident {
        init: $init:ty, getProperties: $gp:ty, listen: $listen:ty, connect: $connect:ty,
        isend: $isend:ty, irecv: $irecv:ty, $($(#[$xd:meta])* $extra:ident: $xt:ty,)*
    }) => {
        $(#[$doc])*
        #[repr(C)]
        pub struct $name {
            /// The name `NCCL_NET` is compared with.
            pub name: *const std::ffi::c_char,
            /// `init`.
            pub init: $init,
            /// `devices(&ndev)`.
            pub devices: $crate::abi::fns::Devices,
            /// `getProperties(dev, props)`.
            pub getProperties: $gp,
            /// `listen`.
            pub listen: $listen,
            /// `connect`.
            pub connect: $connect,
            /// `accept`.
            pub accept: $crate::abi::fns::Accept,
            /// `regMr`.
            pub regMr: $crate::abi::fns::RegMr,
            /// `regMrDmaBuf`.
            pub regMrDmaBuf: $crate::abi::fns::RegMrDmaBuf,
            /// `deregMr`.
            pub deregMr: $crate::abi::fns::DeregMr,
            /// `isend`.
            pub isend: $isend,
            /// `irecv`.
            pub irecv: $irecv,
            /// `iflush`.
            pub iflush: $crate::abi::fns::Iflush,
            /// `test`.
            pub test: $crate::abi::fns::Test,
            /// `closeSend`.
            pub closeSend: $crate::abi::fns::Close,
            /// `closeRecv`.
            pub closeRecv: $crate::abi::fns::Close,
            /// `closeListen`.
            pub closeListen: $crate::abi::fns::Close,
            /// `getDeviceMr` (may be NULL).
            pub getDeviceMr: $crate::abi::fns::GetDeviceMr,
            /// `irecvConsumed` (may be NULL).
            pub irecvConsumed: $crate::abi::fns::IrecvConsumed,
            $($(#[$xd])* pub $extra: $xt,)*
        }

        // SAFETY: the table is immutable after construction and holds only function pointers and a pointer
        // to a static string; sharing it between threads is what NCCL does with it.
        unsafe impl Sync for $name {}
    };
}

pub mod v10;
pub mod v11;
pub mod v12;
pub mod v8;
pub mod v9;

/// `ncclResult_t`.
pub type ncclResult_t = c_int;

/// `ncclResult_t` values.
pub mod result {
    use std::ffi::c_int;
    /// `ncclSuccess`.
    pub const SUCCESS: c_int = 0;
    /// `ncclUnhandledCudaError`.
    pub const UNHANDLED_CUDA_ERROR: c_int = 1;
    /// `ncclSystemError`: a system call or resource failed.
    pub const SYSTEM_ERROR: c_int = 2;
    /// `ncclInternalError`: a bug in the plugin (a caught panic).
    pub const INTERNAL_ERROR: c_int = 3;
    /// `ncclInvalidArgument`: a bad argument (NULL, out of range).
    pub const INVALID_ARGUMENT: c_int = 4;
    /// `ncclInvalidUsage`: a call out of order or not supported in this configuration.
    pub const INVALID_USAGE: c_int = 5;
    /// `ncclRemoteError`: the peer or the network failed.
    pub const REMOTE_ERROR: c_int = 6;
}

/// `ncclDebugLogLevel` values.
pub mod level {
    use std::ffi::c_int;
    /// `NCCL_LOG_WARN`.
    pub const WARN: c_int = 2;
    /// `NCCL_LOG_INFO`.
    pub const INFO: c_int = 3;
    /// `NCCL_LOG_TRACE`.
    pub const TRACE: c_int = 5;
}

/// `ncclDebugLogSubSys` bits this plugin logs under.
pub mod subsys {
    use std::ffi::c_ulong;
    /// `NCCL_INIT`.
    pub const INIT: c_ulong = 1;
    /// `NCCL_NET`.
    pub const NET: c_ulong = 16;
}

/// `ncclDebugLogger_t`: `void (*)(level, flags, file, line, fmt, ...)`.
pub type ncclDebugLogger_t = Option<
    unsafe extern "C" fn(
        level: c_int,
        flags: c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    ),
>;

/// `ncclProfilerCallback_t` (v10+); the plugin emits no profiler events and only accepts it.
pub type ncclProfilerCallback_t = Option<
    unsafe extern "C" fn(
        e_handle: *mut *mut c_void,
        kind: c_int,
        p_handle: *mut c_void,
        plugin_id: i64,
        ext_data: *mut c_void,
    ) -> ncclResult_t,
>;

/// `NCCL_NET_HANDLE_MAXSIZE`: the bytes `listen` may write into the handle.
pub const NET_HANDLE_MAXSIZE: usize = 128;
/// `NCCL_PTR_HOST`.
pub const PTR_HOST: c_int = 1;
/// `NCCL_PTR_CUDA`.
pub const PTR_CUDA: c_int = 2;
/// `NCCL_PTR_DMABUF`.
pub const PTR_DMABUF: c_int = 4;
/// `NCCL_NET_MAX_REQUESTS`: requests a comm may have outstanding (times `maxRecvs` for grouped receives).
pub const NET_MAX_REQUESTS: usize = 32;
/// `NCCL_NET_OPTIONAL_RECV_COMPLETION`: the value `*request` may hold on entry to `irecv` (v9+).
pub const OPTIONAL_RECV_COMPLETION: usize = 0x1;
/// `NCCL_NET_DEVICE_HOST`: no device offload.
pub const NET_DEVICE_HOST: c_int = 0;
/// `NCCL_NET_MAX_DEVS_PER_NIC` (v9–v11).
pub const MAX_DEVS_PER_NIC: usize = 4;
/// `NCCL_NET_MAX_DEVS_PER_NIC_V12`.
pub const MAX_DEVS_PER_NIC_V12: usize = 8;

/// `ncclNetDeviceHandle_v*_t` is only passed by pointer (device offload); the plugin never reads it.
pub type ncclNetDeviceHandle_t = c_void;

/// `ncclNetCommConfig_v10_t` … `_v12_t`: per-connection (v10) or per-communicator (v11+) configuration.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ncclNetCommConfig_t {
    /// Plugin-specific traffic class, or `NCCL_NET_TRAFFIC_CLASS_UNDEF` (-1).
    pub trafficClass: c_int,
}

/// `NCCL_NET_TRAFFIC_CLASS_UNDEF`.
pub const TRAFFIC_CLASS_UNDEF: c_int = -1;

/// `ncclNetVDeviceProps_v9_t` … `_v11_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ncclNetVDeviceProps_v9_t {
    /// Physical devices merged into this one.
    pub ndevs: c_int,
    /// Their indices.
    pub devs: [c_int; MAX_DEVS_PER_NIC],
}

/// `ncclNetVDeviceProps_v12_t`: eight devices per virtual NIC.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ncclNetVDeviceProps_v12_t {
    /// Physical devices merged into this one.
    pub ndevs: c_int,
    /// Their indices.
    pub devs: [c_int; MAX_DEVS_PER_NIC_V12],
}

/// `ncclNetCommAttr_v11_t`.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ncclNetCommAttr_v11_t {
    /// Peers the comm talks to at once, at most.
    pub maxConcurrentPeers: i32,
    /// ... and at least.
    pub minConcurrentPeers: i32,
    /// Flows per peer, at most.
    pub maxFlowsPerPeer: i32,
    /// ... and at least.
    pub minFlowsPerPeer: i32,
}

/// `ncclNetAttr_v11_t` (also v12): what NCCL tells `setNetAttr` about the coming transfers.
#[repr(C)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ncclNetAttr_v11_t {
    /// Send side.
    pub sendCommAttr: ncclNetCommAttr_v11_t,
    /// Receive side.
    pub recvCommAttr: ncclNetCommAttr_v11_t,
    /// Collective.
    pub op: u32,
    /// Algorithm.
    pub algo: u32,
    /// Protocol.
    pub proto: u32,
}

/// Function-pointer types shared by several versions (same C signature in each).
pub mod fns {
    use super::{ncclNetDeviceHandle_t, ncclResult_t};
    use std::ffi::{c_int, c_void};

    /// `getProperties(dev, props)`, typed per version by the caller.
    pub type GetProperties<P> =
        Option<unsafe extern "C" fn(dev: c_int, props: *mut P) -> ncclResult_t>;
    /// `devices(&ndev)`.
    pub type Devices = Option<unsafe extern "C" fn(ndev: *mut c_int) -> ncclResult_t>;
    /// `listen(dev, handle, &listenComm)` (v8–v10).
    pub type Listen = Option<
        unsafe extern "C" fn(
            dev: c_int,
            handle: *mut c_void,
            listen_comm: *mut *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `accept(listenComm, &recvComm, &recvDevComm)`.
    pub type Accept = Option<
        unsafe extern "C" fn(
            listen_comm: *mut c_void,
            recv_comm: *mut *mut c_void,
            recv_dev_comm: *mut *mut ncclNetDeviceHandle_t,
        ) -> ncclResult_t,
    >;
    /// `regMr(comm, data, size, type, &mhandle)`.
    pub type RegMr = Option<
        unsafe extern "C" fn(
            comm: *mut c_void,
            data: *mut c_void,
            size: usize,
            kind: c_int,
            mhandle: *mut *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `regMrDmaBuf(comm, data, size, type, offset, fd, &mhandle)`.
    pub type RegMrDmaBuf = Option<
        unsafe extern "C" fn(
            comm: *mut c_void,
            data: *mut c_void,
            size: usize,
            kind: c_int,
            offset: u64,
            fd: c_int,
            mhandle: *mut *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `deregMr(comm, mhandle)`.
    pub type DeregMr =
        Option<unsafe extern "C" fn(comm: *mut c_void, mhandle: *mut c_void) -> ncclResult_t>;
    /// `iflush(recvComm, n, data[], int sizes[], mhandles[], &request)`: `int` sizes in every version.
    pub type Iflush = Option<
        unsafe extern "C" fn(
            recv_comm: *mut c_void,
            n: c_int,
            data: *mut *mut c_void,
            sizes: *mut c_int,
            mhandles: *mut *mut c_void,
            request: *mut *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `test(request, &done, int sizes[])`.
    pub type Test = Option<
        unsafe extern "C" fn(
            request: *mut c_void,
            done: *mut c_int,
            sizes: *mut c_int,
        ) -> ncclResult_t,
    >;
    /// `closeSend` / `closeRecv` / `closeListen`.
    pub type Close = Option<unsafe extern "C" fn(comm: *mut c_void) -> ncclResult_t>;
    /// `getDeviceMr(comm, mhandle, &dptr_mhandle)`.
    pub type GetDeviceMr = Option<
        unsafe extern "C" fn(
            comm: *mut c_void,
            mhandle: *mut c_void,
            dptr: *mut *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `irecvConsumed(recvComm, n, request)`.
    pub type IrecvConsumed = Option<
        unsafe extern "C" fn(
            recv_comm: *mut c_void,
            n: c_int,
            request: *mut c_void,
        ) -> ncclResult_t,
    >;
    /// `makeVDevice(&d, props)`, typed per version.
    pub type MakeVDevice<P> =
        Option<unsafe extern "C" fn(d: *mut c_int, props: *mut P) -> ncclResult_t>;
}
