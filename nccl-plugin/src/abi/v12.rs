//! `ncclNet_v12_t` (NCCL 2.30+): the v11 table with eight devices per virtual NIC and rail/plane ids in the
//! properties.

use std::ffi::c_int;

use super::fns::*;
use super::ncclNetVDeviceProps_v12_t;
use super::v10::{Irecv, Isend};
use super::v11::{Connect, Finalize, Init, Listen, SetNetAttr};

properties! {
    /// `ncclNetProperties_v12_t` (128 bytes).
    ncclNetProperties_v12_t {
        /// Whether receives need a flush.
        forceFlush: c_int,
    } {
        /// Physical devices behind this one.
        vProps: ncclNetVDeviceProps_v12_t,
        /// Largest point-to-point transfer.
        maxP2pBytes: usize,
        /// Largest collective transfer.
        maxCollBytes: usize,
        /// Requests one multi-request may hold.
        maxMultiRequestSize: c_int,
        /// Rail of the NIC, or -1.
        railId: i16,
        /// Plane of the NIC, or -1.
        planeId: i16,
    }
}

net_table! {
    /// `ncclNet_v12_t`.
    ncclNet_v12_t {
        init: Init, getProperties: GetProperties<ncclNetProperties_v12_t>, listen: Listen, connect: Connect,
        isend: Isend, irecv: Irecv,
        /// `makeVDevice` (may be NULL).
        makeVDevice: MakeVDevice<ncclNetVDeviceProps_v12_t>,
        /// `finalize`, once per `init`.
        finalize: Finalize,
        /// `setNetAttr` (may be NULL).
        setNetAttr: SetNetAttr,
    }
}
