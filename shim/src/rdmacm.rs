//! librdmacm entry points: the connection manager needs the kernel's `rdma_ucm`, which an MRC device does not
//! have, so every call that starts a connection-manager session fails with `EOPNOTSUPP` and a log line naming
//! it (perftest `-R`, rping). Programs that exchange QP numbers themselves (perftest's default TCP exchange,
//! `ibv_rc_pingpong`) never get here.

use std::ffi::{c_char, c_int, c_void};

use crate::ffi::{Error, FFI};

fn no_cm() -> Error {
    Error::unsupported(
        "rdma_cm (the RDMA connection manager) is not supported by mrc-verbs-shim; exchange QP numbers \
         out of band (perftest: leave out -R)",
    )
}

macro_rules! refuse_cm {
    ($(fn $name:ident($($a:ident: $t:ty),*) -> $kind:ident;)*) => {$(
        #[unsafe(no_mangle)]
        #[doc = concat!("`", stringify!($name), "`: refused (see the module doc).")]
        pub unsafe extern "C" fn $name($($a: $t),*) -> refuse_cm!(@ty $kind) {
            $(let _ = $a;)*
            refuse_cm!(@call $kind, stringify!($name))
        }
    )*};
    (@ty ptr) => { *mut c_void };
    (@ty int) => { c_int };
    (@call ptr, $n:expr) => { FFI.ptr($n, || Err(no_cm())) };
    (@call int, $n:expr) => { FFI.count($n, || Err::<c_int, _>(no_cm())) };
}

refuse_cm! {
    fn rdma_create_event_channel() -> ptr;
    fn rdma_get_devices(num: *mut c_int) -> ptr;
    fn rdma_create_id(channel: *mut c_void, id: *mut *mut c_void, context: *mut c_void, ps: c_int) -> int;
    fn rdma_create_ep(id: *mut *mut c_void, res: *mut c_void, pd: *mut c_void, qp_init: *mut c_void) -> int;
    fn rdma_getaddrinfo(node: *const c_char, service: *const c_char, hints: *const c_void, res: *mut *mut c_void) -> int;
    fn rdma_bind_addr(id: *mut c_void, addr: *mut c_void) -> int;
    fn rdma_resolve_addr(id: *mut c_void, src: *mut c_void, dst: *mut c_void, timeout_ms: c_int) -> int;
    fn rdma_resolve_route(id: *mut c_void, timeout_ms: c_int) -> int;
    fn rdma_listen(id: *mut c_void, backlog: c_int) -> int;
    fn rdma_connect(id: *mut c_void, param: *mut c_void) -> int;
    fn rdma_accept(id: *mut c_void, param: *mut c_void) -> int;
    fn rdma_create_qp(id: *mut c_void, pd: *mut c_void, attr: *mut c_void) -> int;
    fn rdma_create_qp_ex(id: *mut c_void, attr: *mut c_void) -> int;
    fn rdma_join_multicast(id: *mut c_void, addr: *mut c_void, context: *mut c_void) -> int;
}
