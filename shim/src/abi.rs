//! The libibverbs ABI: the `#[repr(C)]` types and constants are [`mrc_ffi::verbs_abi`] (one copy for every verbs
//! front end, checked against the installed rdma-core headers there); this module adds what only the shim does
//! with them: filling ops tables.

pub use mrc_ffi::verbs_abi::*;

/// Casts a typed function into an ops slot.
macro_rules! slot {
    ($f:expr, $ty:ty) => {{
        let f: $ty = $f;
        // SAFETY: function pointers all have the same size; C calls the slot with the signature `$ty`,
        // which is the one `f` was checked against just above.
        Some(unsafe { std::mem::transmute::<$ty, unsafe extern "C" fn()>(f) })
    }};
}
pub(crate) use slot;
