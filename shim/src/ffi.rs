//! The shim's entry points run inside [`FFI`], the shared panic boundary (`mrc_ffi::boundary`) reporting to the
//! shim's log: a panic becomes `EIO`, an [`Error`] the value verbs returns for that function (an errno value,
//! `-1` with `errno` set, or `NULL` with `errno` set), with one log line naming the call and the reason.

pub(crate) use mrc_ffi::boundary::{Error, non_null};

/// The shim's boundary.
pub(crate) static FFI: mrc_ffi::boundary::Boundary =
    mrc_ffi::boundary::Boundary::new(&crate::log::LOG);
