//! libmrc's entry points run inside [`FFI`], the shared panic boundary (`mrc_ffi::boundary`) reporting to
//! libmrc's log: a panic becomes `EIO`, an [`Error`] what the OCP header promises for that function (`-1` with
//! `errno`, an errno value like the verbs call it mirrors, `NULL` with `errno`, or a negative errno value), with
//! one log line naming the call and the reason.

pub(crate) use mrc_ffi::boundary::{Error, non_null};

/// libmrc's boundary.
pub(crate) static FFI: mrc_ffi::boundary::Boundary =
    mrc_ffi::boundary::Boundary::new(&crate::log::LOG);
