//! The plugin as NCCL sees it: `dlopen` by path, `dlsym` of one `ncclNetPlugin_vN` table, and one Rust
//! method per entry point that hides the version's signature (as NCCL's own per-version shims do).
#![allow(unsafe_code, reason = "calling a C plugin through its function table")]

use std::ffi::{CStr, c_int, c_void};
use std::path::Path;

use nccl_net_mrc::abi::{
    NET_HANDLE_MAXSIZE, OPTIONAL_RECV_COMPLETION, PTR_HOST, ncclDebugLogger_t, ncclNetCommConfig_t,
    v8, v9, v10, v11, v12,
};

use crate::log::logger;

/// The ABI versions the plugin exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Version {
    /// NCCL 2.20–2.23.
    V8,
    /// NCCL 2.24–2.25.
    V9,
    /// NCCL 2.26–2.27.
    V10,
    /// NCCL 2.28–2.29.
    V11,
    /// NCCL 2.30+.
    V12,
}

impl Version {
    /// Every exported version, oldest first.
    pub const ALL: [Self; 5] = [Self::V8, Self::V9, Self::V10, Self::V11, Self::V12];

    /// The version number.
    pub fn number(self) -> u32 {
        match self {
            Self::V8 => 8,
            Self::V9 => 9,
            Self::V10 => 10,
            Self::V11 => 11,
            Self::V12 => 12,
        }
    }

    /// From the number (8..=12).
    pub fn from_number(n: u32) -> Option<Self> {
        Self::ALL.into_iter().find(|v| v.number() == n)
    }
}

/// An NCCL result code other than success.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Code(pub c_int);

impl std::fmt::Display for Code {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let name = match self.0 {
            1 => "ncclUnhandledCudaError",
            2 => "ncclSystemError",
            3 => "ncclInternalError",
            4 => "ncclInvalidArgument",
            5 => "ncclInvalidUsage",
            6 => "ncclRemoteError",
            _ => "unknown",
        };
        write!(f, "{name} ({})", self.0)
    }
}

impl std::error::Error for Code {}

fn ok(rc: c_int) -> Result<(), Code> {
    if rc == 0 { Ok(()) } else { Err(Code(rc)) }
}

/// Device properties, with the fields a version lacks as `None`.
#[derive(Debug, Clone, PartialEq)]
pub struct Props {
    pub name: String,
    pub pci_path_null: bool,
    pub guid: u64,
    pub ptr_support: c_int,
    pub reg_is_global: c_int,
    pub speed: c_int,
    pub port: c_int,
    pub latency: f32,
    pub max_comms: c_int,
    pub max_recvs: c_int,
    pub device_type: c_int,
    pub force_flush: Option<c_int>,
    pub vdevs: Option<Vec<c_int>>,
    pub max_p2p_bytes: Option<usize>,
    pub max_coll_bytes: Option<usize>,
    pub max_multi_request: Option<c_int>,
    pub rail_plane: Option<(i16, i16)>,
}

/// A raw pointer the plugin handed out (context, comm, memory handle, request).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Ptr(pub *mut c_void);

// SAFETY: an opaque token of the plugin's; NCCL moves comms between its threads too (one user at a time).
unsafe impl Send for Ptr {}

impl Ptr {
    /// NULL (the context of versions before v11).
    pub const NULL: Self = Self(std::ptr::null_mut());
}

#[derive(Clone, Copy)]
enum Table {
    V8(*const v8::ncclNet_v8_t),
    V9(*const v9::ncclNet_v9_t),
    V10(*const v10::ncclNet_v10_t),
    V11(*const v11::ncclNet_v11_t),
    V12(*const v12::ncclNet_v12_t),
}

/// The loaded plugin, one version's table.
pub struct Plugin {
    _lib: libloading::Library,
    table: Table,
    version: Version,
}

// SAFETY: the table is immutable and the library stays loaded while `Plugin` lives; the plugin's entry
// points are called from several threads by NCCL as well.
unsafe impl Send for Plugin {}
// SAFETY: as for Send.
unsafe impl Sync for Plugin {}

/// Calls slot `$f` of whichever table is loaded with the same arguments.
macro_rules! each {
    ($s:expr, $f:ident ( $($a:expr),* )) => {{
        // SAFETY: the table came from the loaded library and stays valid while it is loaded; the arguments
        // follow the entry point's contract (checked by the plugin, which is what the harness tests).
        unsafe {
            match $s.table {
                Table::V8(t) => ((*t).$f.expect(stringify!($f)))($($a),*),
                Table::V9(t) => ((*t).$f.expect(stringify!($f)))($($a),*),
                Table::V10(t) => ((*t).$f.expect(stringify!($f)))($($a),*),
                Table::V11(t) => ((*t).$f.expect(stringify!($f)))($($a),*),
                Table::V12(t) => ((*t).$f.expect(stringify!($f)))($($a),*),
            }
        }
    }};
}

impl Plugin {
    /// Loads the library at `path` and looks up `ncclNetPlugin_v<version>`.
    pub fn load(path: &Path, version: Version) -> Result<Self, String> {
        // SAFETY: loading the plugin runs no initialisers beyond Rust's (it has no constructors).
        let lib = unsafe { libloading::Library::new(path) }
            .map_err(|e| format!("dlopen {}: {e}", path.display()))?;
        let sym = format!("ncclNetPlugin_v{}\0", version.number());
        // SAFETY: the symbol is a data object of the version's table type (the ABI this harness checks).
        let addr: *const c_void = unsafe {
            *lib.get::<*const c_void>(sym.as_bytes())
                .map_err(|e| format!("dlsym {}: {e}", sym.trim_end_matches('\0')))?
        };
        let table = match version {
            Version::V8 => Table::V8(addr.cast()),
            Version::V9 => Table::V9(addr.cast()),
            Version::V10 => Table::V10(addr.cast()),
            Version::V11 => Table::V11(addr.cast()),
            Version::V12 => Table::V12(addr.cast()),
        };
        Ok(Self {
            _lib: lib,
            table,
            version,
        })
    }

    /// The version loaded.
    pub fn version(&self) -> Version {
        self.version
    }

    /// The table's name (what `NCCL_NET` is compared with).
    pub fn name(&self) -> String {
        // SAFETY: as in `each!`; the name is a static NUL-terminated string.
        let p = unsafe {
            match self.table {
                Table::V8(t) => (*t).name,
                Table::V9(t) => (*t).name,
                Table::V10(t) => (*t).name,
                Table::V11(t) => (*t).name,
                Table::V12(t) => (*t).name,
            }
        };
        cstr(p)
    }

    /// `init`; for v11+ the per-communicator form, returning its context.
    pub fn init(&self, comm_id: u64) -> Result<Ptr, Code> {
        let log: ncclDebugLogger_t = Some(logger());
        // SAFETY: as in `each!`.
        unsafe {
            match self.table {
                Table::V8(t) => ok(((*t).init.expect("init"))(log)).map(|_| Ptr::NULL),
                Table::V9(t) => ok(((*t).init.expect("init"))(log)).map(|_| Ptr::NULL),
                Table::V10(t) => ok(((*t).init.expect("init"))(log, None)).map(|_| Ptr::NULL),
                Table::V11(t) => init_ctx((*t).init.expect("init"), comm_id, log),
                Table::V12(t) => init_ctx((*t).init.expect("init"), comm_id, log),
            }
        }
    }

    /// `finalize` (v11+; nothing before).
    pub fn finalize(&self, ctx: Ptr) -> Result<(), Code> {
        // SAFETY: as in `each!`.
        unsafe {
            match self.table {
                Table::V11(t) => ok(((*t).finalize.expect("finalize"))(ctx.0)),
                Table::V12(t) => ok(((*t).finalize.expect("finalize"))(ctx.0)),
                _ => Ok(()),
            }
        }
    }

    /// `devices`.
    pub fn devices(&self) -> Result<c_int, Code> {
        let mut n: c_int = -1;
        ok(each!(self, devices(&raw mut n)))?;
        Ok(n)
    }

    /// `getProperties`, whatever the version.
    pub fn properties(&self, dev: c_int) -> Result<Props, Code> {
        macro_rules! base {
            ($p:expr) => {
                Props {
                    name: cstr($p.name),
                    pci_path_null: $p.pciPath.is_null(),
                    guid: $p.guid,
                    ptr_support: $p.ptrSupport,
                    reg_is_global: $p.regIsGlobal,
                    speed: $p.speed,
                    port: $p.port,
                    latency: $p.latency,
                    max_comms: $p.maxComms,
                    max_recvs: $p.maxRecvs,
                    device_type: $p.netDeviceType,
                    force_flush: None,
                    vdevs: None,
                    max_p2p_bytes: None,
                    max_coll_bytes: None,
                    max_multi_request: None,
                    rail_plane: None,
                }
            };
        }
        macro_rules! later {
            ($p:expr) => {{
                let mut r = base!($p);
                r.force_flush = Some($p.forceFlush);
                r.vdevs = Some(
                    $p.vProps.devs[..($p.vProps.ndevs.max(0) as usize).min($p.vProps.devs.len())]
                        .to_vec(),
                );
                r.max_p2p_bytes = Some($p.maxP2pBytes);
                r.max_coll_bytes = Some($p.maxCollBytes);
                r
            }};
        }
        // SAFETY: zeroed properties structs are valid (pointers NULL, numbers 0); the plugin overwrites them.
        unsafe {
            match self.table {
                Table::V8(t) => {
                    let mut p: v8::ncclNetProperties_v8_t = std::mem::zeroed();
                    ok(((*t).getProperties.expect("getProperties"))(
                        dev, &raw mut p,
                    ))?;
                    Ok(base!(p))
                }
                Table::V9(t) => {
                    let mut p: v9::ncclNetProperties_v9_t = std::mem::zeroed();
                    ok(((*t).getProperties.expect("getProperties"))(
                        dev, &raw mut p,
                    ))?;
                    Ok(later!(p))
                }
                Table::V10(t) => {
                    let mut p: v10::ncclNetProperties_v10_t = std::mem::zeroed();
                    ok(((*t).getProperties.expect("getProperties"))(
                        dev, &raw mut p,
                    ))?;
                    Ok(later!(p))
                }
                Table::V11(t) => {
                    let mut p: v11::ncclNetProperties_v11_t = std::mem::zeroed();
                    ok(((*t).getProperties.expect("getProperties"))(
                        dev, &raw mut p,
                    ))?;
                    let mut r = later!(p);
                    r.max_multi_request = Some(p.maxMultiRequestSize);
                    Ok(r)
                }
                Table::V12(t) => {
                    let mut p: v12::ncclNetProperties_v12_t = std::mem::zeroed();
                    ok(((*t).getProperties.expect("getProperties"))(
                        dev, &raw mut p,
                    ))?;
                    let mut r = later!(p);
                    r.max_multi_request = Some(p.maxMultiRequestSize);
                    r.rail_plane = Some((p.railId, p.planeId));
                    Ok(r)
                }
            }
        }
    }

    /// `listen`: the listen comm; the handle is written into `handle`.
    pub fn listen(
        &self,
        ctx: Ptr,
        dev: c_int,
        handle: &mut [u8; NET_HANDLE_MAXSIZE],
    ) -> Result<Ptr, Code> {
        let mut l: *mut c_void = std::ptr::null_mut();
        let h = handle.as_mut_ptr().cast::<c_void>();
        // SAFETY: as in `each!`.
        let rc = unsafe {
            match self.table {
                Table::V8(t) => ((*t).listen.expect("listen"))(dev, h, &raw mut l),
                Table::V9(t) => ((*t).listen.expect("listen"))(dev, h, &raw mut l),
                Table::V10(t) => ((*t).listen.expect("listen"))(dev, h, &raw mut l),
                Table::V11(t) => ((*t).listen.expect("listen"))(ctx.0, dev, h, &raw mut l),
                Table::V12(t) => ((*t).listen.expect("listen"))(ctx.0, dev, h, &raw mut l),
            }
        };
        ok(rc).map(|_| Ptr(l))
    }

    /// One `connect` call: `None` while the connection is still being set up.
    pub fn connect(
        &self,
        ctx: Ptr,
        dev: c_int,
        handle: &mut [u8; NET_HANDLE_MAXSIZE],
    ) -> Result<Option<Ptr>, Code> {
        let mut s: *mut c_void = std::ptr::null_mut();
        let mut d: *mut c_void = std::ptr::null_mut();
        let h = handle.as_mut_ptr().cast::<c_void>();
        let mut cfg = ncclNetCommConfig_t { trafficClass: -1 };
        // SAFETY: as in `each!`.
        let rc = unsafe {
            match self.table {
                Table::V8(t) => ((*t).connect.expect("connect"))(dev, h, &raw mut s, &raw mut d),
                Table::V9(t) => ((*t).connect.expect("connect"))(dev, h, &raw mut s, &raw mut d),
                Table::V10(t) => {
                    ((*t).connect.expect("connect"))(dev, &raw mut cfg, h, &raw mut s, &raw mut d)
                }
                Table::V11(t) => {
                    ((*t).connect.expect("connect"))(ctx.0, dev, h, &raw mut s, &raw mut d)
                }
                Table::V12(t) => {
                    ((*t).connect.expect("connect"))(ctx.0, dev, h, &raw mut s, &raw mut d)
                }
            }
        };
        ok(rc).map(|_| (!s.is_null()).then_some(Ptr(s)))
    }

    /// One `accept` call: `None` until a connector arrived.
    pub fn accept(&self, listen: Ptr) -> Result<Option<Ptr>, Code> {
        let mut r: *mut c_void = std::ptr::null_mut();
        let mut d: *mut c_void = std::ptr::null_mut();
        ok(each!(self, accept(listen.0, &raw mut r, &raw mut d)))?;
        Ok((!r.is_null()).then_some(Ptr(r)))
    }

    /// `regMr` of host memory.
    pub fn reg_mr(&self, comm: Ptr, data: *mut u8, len: usize) -> Result<Ptr, Code> {
        self.reg_mr_kind(comm, data, len, PTR_HOST)
    }

    /// `regMr` with any memory type (the plugin must refuse all but host memory).
    pub fn reg_mr_kind(
        &self,
        comm: Ptr,
        data: *mut u8,
        len: usize,
        kind: c_int,
    ) -> Result<Ptr, Code> {
        let mut mh: *mut c_void = std::ptr::null_mut();
        ok(each!(
            self,
            regMr(comm.0, data.cast(), len, kind, &raw mut mh)
        ))?;
        Ok(Ptr(mh))
    }

    /// `regMrDmaBuf`.
    pub fn reg_mr_dma_buf(&self, comm: Ptr, data: *mut u8, len: usize) -> Result<Ptr, Code> {
        let mut mh: *mut c_void = std::ptr::null_mut();
        ok(each!(
            self,
            regMrDmaBuf(comm.0, data.cast(), len, 4, 0, -1, &raw mut mh)
        ))?;
        Ok(Ptr(mh))
    }

    /// `deregMr`.
    pub fn dereg_mr(&self, comm: Ptr, mh: Ptr) -> Result<(), Code> {
        ok(each!(self, deregMr(comm.0, mh.0)))
    }

    /// `isend`: `None` is NCCL's NULL request (retry later).
    pub fn isend(
        &self,
        comm: Ptr,
        data: *mut u8,
        size: usize,
        tag: c_int,
        mh: Ptr,
    ) -> Result<Option<Ptr>, Code> {
        let mut req: *mut c_void = std::ptr::null_mut();
        let d = data.cast::<c_void>();
        // SAFETY: as in `each!`.
        let rc = unsafe {
            match self.table {
                Table::V8(t) => {
                    let size = c_int::try_from(size).map_err(|_| Code(4))?;
                    ((*t).isend.expect("isend"))(comm.0, d, size, tag, mh.0, &raw mut req)
                }
                Table::V9(t) => {
                    ((*t).isend.expect("isend"))(comm.0, d, size, tag, mh.0, &raw mut req)
                }
                Table::V10(t) => ((*t).isend.expect("isend"))(
                    comm.0,
                    d,
                    size,
                    tag,
                    mh.0,
                    std::ptr::null_mut(),
                    &raw mut req,
                ),
                Table::V11(t) => ((*t).isend.expect("isend"))(
                    comm.0,
                    d,
                    size,
                    tag,
                    mh.0,
                    std::ptr::null_mut(),
                    &raw mut req,
                ),
                Table::V12(t) => ((*t).isend.expect("isend"))(
                    comm.0,
                    d,
                    size,
                    tag,
                    mh.0,
                    std::ptr::null_mut(),
                    &raw mut req,
                ),
            }
        };
        ok(rc).map(|_| (!req.is_null()).then_some(Ptr(req)))
    }

    /// `irecv` of grouped buffers `(data, size, tag, mhandle)`; `hint` passes
    /// NCCL_NET_OPTIONAL_RECV_COMPLETION in `*request` (v9+). Returns the request and what `*request` held
    /// after the call (the plugin must always overwrite it).
    pub fn irecv(
        &self,
        comm: Ptr,
        bufs: &[(*mut u8, usize, c_int, Ptr)],
        hint: bool,
    ) -> Result<Option<Ptr>, Code> {
        let n = bufs.len() as c_int;
        let mut data: Vec<*mut c_void> = bufs.iter().map(|b| b.0.cast()).collect();
        let mut sizes: Vec<usize> = bufs.iter().map(|b| b.1).collect();
        let mut isizes: Vec<c_int> = bufs.iter().map(|b| b.1 as c_int).collect();
        let mut tags: Vec<c_int> = bufs.iter().map(|b| b.2).collect();
        let mut mhs: Vec<*mut c_void> = bufs.iter().map(|b| b.3.0).collect();
        let mut ph: Vec<*mut c_void> = vec![std::ptr::null_mut(); bufs.len()];
        let mut req: *mut c_void = if hint && self.version >= Version::V9 {
            OPTIONAL_RECV_COMPLETION as *mut c_void
        } else {
            std::ptr::null_mut()
        };
        let (d, t, m) = (data.as_mut_ptr(), tags.as_mut_ptr(), mhs.as_mut_ptr());
        // SAFETY: as in `each!`; the arrays hold `n` elements.
        let rc = unsafe {
            match self.table {
                Table::V8(tb) => ((*tb).irecv.expect("irecv"))(
                    comm.0,
                    n,
                    d,
                    isizes.as_mut_ptr(),
                    t,
                    m,
                    &raw mut req,
                ),
                Table::V9(tb) => ((*tb).irecv.expect("irecv"))(
                    comm.0,
                    n,
                    d,
                    sizes.as_mut_ptr(),
                    t,
                    m,
                    &raw mut req,
                ),
                Table::V10(tb) => ((*tb).irecv.expect("irecv"))(
                    comm.0,
                    n,
                    d,
                    sizes.as_mut_ptr(),
                    t,
                    m,
                    ph.as_mut_ptr(),
                    &raw mut req,
                ),
                Table::V11(tb) => ((*tb).irecv.expect("irecv"))(
                    comm.0,
                    n,
                    d,
                    sizes.as_mut_ptr(),
                    t,
                    m,
                    ph.as_mut_ptr(),
                    &raw mut req,
                ),
                Table::V12(tb) => ((*tb).irecv.expect("irecv"))(
                    comm.0,
                    n,
                    d,
                    sizes.as_mut_ptr(),
                    t,
                    m,
                    ph.as_mut_ptr(),
                    &raw mut req,
                ),
            }
        };
        ok(rc)?;
        if req as usize == OPTIONAL_RECV_COMPLETION {
            // NCCL would treat the hint value as a live request: the plugin must never leave it.
            return Err(Code(-1));
        }
        Ok((!req.is_null()).then_some(Ptr(req)))
    }

    /// `iflush`: the request (NULL: nothing to wait for).
    pub fn iflush(
        &self,
        comm: Ptr,
        data: *mut u8,
        size: c_int,
        mh: Ptr,
    ) -> Result<Option<Ptr>, Code> {
        let mut d = data.cast::<c_void>();
        let mut s = size;
        let mut m = mh.0;
        let mut req: *mut c_void = std::ptr::null_mut();
        ok(each!(
            self,
            iflush(comm.0, 1, &raw mut d, &raw mut s, &raw mut m, &raw mut req)
        ))?;
        Ok((!req.is_null()).then_some(Ptr(req)))
    }

    /// `test`: whether the request is done; `sizes` receives the sizes (room for the request's buffers).
    pub fn test(&self, req: Ptr, sizes: &mut [c_int]) -> Result<bool, Code> {
        let mut done: c_int = 0;
        let s = if sizes.is_empty() {
            std::ptr::null_mut()
        } else {
            sizes.as_mut_ptr()
        };
        ok(each!(self, test(req.0, &raw mut done, s)))?;
        Ok(done != 0)
    }

    /// `closeSend`.
    pub fn close_send(&self, comm: Ptr) -> Result<(), Code> {
        ok(each!(self, closeSend(comm.0)))
    }

    /// `closeRecv`.
    pub fn close_recv(&self, comm: Ptr) -> Result<(), Code> {
        ok(each!(self, closeRecv(comm.0)))
    }

    /// `closeListen`.
    pub fn close_listen(&self, comm: Ptr) -> Result<(), Code> {
        ok(each!(self, closeListen(comm.0)))
    }
}

/// A C string of the plugin's (a static name), or "" for NULL.
fn cstr(p: *const std::ffi::c_char) -> String {
    if p.is_null() {
        return String::new();
    }
    // SAFETY: non-NULL: the plugin's NUL-terminated static string.
    unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned()
}

/// The v11/v12 `init` entry point.
type V11Init = unsafe extern "C" fn(
    *mut *mut c_void,
    u64,
    *mut ncclNetCommConfig_t,
    ncclDebugLogger_t,
    nccl_net_mrc::abi::ncclProfilerCallback_t,
) -> nccl_net_mrc::abi::ncclResult_t;

/// # Safety
/// `f` is a v11/v12 `init` entry point.
unsafe fn init_ctx(f: V11Init, comm_id: u64, log: ncclDebugLogger_t) -> Result<Ptr, Code> {
    let mut ctx: *mut c_void = std::ptr::null_mut();
    let mut cfg = ncclNetCommConfig_t { trafficClass: -1 };
    // SAFETY: per the contract.
    ok(unsafe { f(&raw mut ctx, comm_id, &raw mut cfg, log, None) })?;
    if ctx.is_null() {
        return Err(Code(-2));
    }
    Ok(Ptr(ctx))
}
