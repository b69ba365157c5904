//! The one implementation behind every exported version: NCCL's calls with their arguments already in Rust
//! form (the per-version adapters in `exports` convert sizes and pick the context), over [`crate::host`] and
//! the rendezvous in [`crate::proto`].
//!
//! Objects handed to NCCL (comms, memory handles, requests) are recorded in a registry of live objects
//! (`mrc_ffi::registry`, as the verbs shim's) and checked there before every use, so a NULL, a pointer of the
//! wrong kind, a closed comm or a request of a closed comm gets an error code and is never dereferenced.
#![allow(
    unsafe_code,
    reason = "NCCL hands over raw pointers to its arrays, handles and out-parameters"
)]

use std::collections::BTreeMap;
use std::ffi::{CStr, c_int, c_void};
use std::sync::atomic::{AtomicU32, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use mrc_ffi::registry::{Refusal, Registry};

use crate::abi::{NET_HANDLE_MAXSIZE, PTR_HOST, ncclDebugLogger_t, ncclNetCommConfig_t};
use crate::config::Settings;
use crate::ctrl::CtrlBlock;
use crate::ffi::Error;
use crate::handle::{self, State};
use crate::host::{Connecting, Host, Link, Listener, Mr};
use crate::log::{info, set_logger};
use crate::proto::{
    self, CTRL_BYTES, Done, MAX_RECVS, MAX_TRANSFER, ReceiverInfo, RecvBuf, RecvId, RecvSide,
    SLOTS, SendId, SendSide, SenderInfo, Sge,
};

/// The name NCCL_NET selects this plugin by.
pub(crate) const NAME: &CStr = c"MRC";
/// The one device's name in NCCL's logs.
pub(crate) const DEVICE: &CStr = c"mrc0";

/// Process-wide state, set up by the first `init`.
struct Global {
    settings: Settings,
    /// Up to `progress_threads` host instances, opened as comms need them.
    hosts: Mutex<Vec<Arc<Host>>>,
}

static GLOBAL: OnceLock<Result<Global, Error>> = OnceLock::new();
/// `init` calls not yet matched by `finalize` (v11+), for the log.
static INITS: AtomicUsize = AtomicUsize::new(0);

fn global() -> Result<&'static Global, Error> {
    match GLOBAL.get() {
        Some(Ok(g)) => Ok(g),
        Some(Err(e)) => Err(e.clone()),
        None => Err(Error::usage("called before init")),
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while the lock was held was caught at the boundary and already reported; the state is still
    // consistent between calls.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

impl Global {
    /// The host a new listen or connect goes on: the one fewest comms use, or a new one (kept for the life of
    /// the process) while every open host is in use and fewer than `NCCL_MRC_PROGRESS_THREADS` are open. Comms
    /// of NCCL's channels so land on different progress threads, as NCCL's Socket transport gives each its own
    /// threads and sockets.
    fn host(&self) -> Result<Arc<Host>, Error> {
        let mut hosts = lock(&self.hosts);
        // Each listen comm, pending connect and comm holds one reference; the list holds one more.
        let least = hosts.iter().min_by_key(|h| Arc::strong_count(h));
        match least {
            Some(h)
                if Arc::strong_count(h) == 1 || hosts.len() >= self.settings.progress_threads =>
            {
                Ok(Arc::clone(h))
            }
            _ => {
                let new = Host::open(&self.settings)?;
                hosts.push(Arc::clone(&new));
                Ok(new)
            }
        }
    }
}

/// `init` (every version): reads the settings once and remembers NCCL's logger.
pub(crate) fn init(log: ncclDebugLogger_t) -> Result<(), Error> {
    set_logger(log);
    let g = GLOBAL.get_or_init(|| {
        Settings::from_env().map(|settings| {
            info!(
                INIT,
                "MRC plugin {} (protocol {}): {}, {} QP(s) per connection, maxRecvs {}, up to {} progress thread(s)",
                env!("CARGO_PKG_VERSION"),
                proto::PROTO_VERSION,
                match &settings.node_config {
                    Some(p) => format!("node file {}", p.display()),
                    None => format!("{} loopback plane(s)", settings.planes),
                },
                settings.qps_per_conn,
                settings.max_recvs,
                settings.progress_threads
            );
            Global {
                settings,
                hosts: Mutex::new(Vec::new()),
            }
        })
    });
    g.as_ref().map(|_| ()).map_err(Clone::clone)
}

const CTX_MAGIC: u64 = 0x4d52_435f_4354_5831; // "MRC_CTX1"

/// A v11+ per-communicator context.
pub(crate) struct Ctx {
    magic: u64,
    comm_id: u64,
}

/// `init` of v11+: one context per communicator.
pub(crate) fn init_ctx(
    log: ncclDebugLogger_t,
    comm_id: u64,
    config: Option<ncclNetCommConfig_t>,
) -> Result<*mut c_void, Error> {
    init(log)?;
    let tc = config.map_or(crate::abi::TRAFFIC_CLASS_UNDEF, |c| c.trafficClass);
    let n = INITS.fetch_add(1, Ordering::Relaxed) + 1;
    info!(
        INIT,
        "init for communicator {comm_id:#x} (traffic class {tc}; {n} open)"
    );
    Ok(Box::into_raw(Box::new(Ctx {
        magic: CTX_MAGIC,
        comm_id,
    }))
    .cast())
}

/// `finalize` of v11+: frees the context `init` returned.
///
/// # Safety
/// `ctx` is NULL or a pointer `init_ctx` returned and `finalize` has not freed.
pub(crate) unsafe fn finalize(ctx: *mut c_void) -> Result<(), Error> {
    // SAFETY: per this function's contract.
    let c = unsafe { ctx_ref(ctx) }?.ok_or_else(|| Error::invalid("finalize of a NULL context"))?;
    let id = c.comm_id;
    let ctx = ctx.cast::<Ctx>();
    // SAFETY: the magic check passed, so this is a live context from `init_ctx`; clearing the magic first
    // makes a second finalize of the same pointer fail its check while the memory is still ours.
    unsafe {
        (*ctx).magic = 0;
        drop(Box::from_raw(ctx));
    }
    let n = INITS.fetch_sub(1, Ordering::Relaxed).saturating_sub(1);
    info!(INIT, "finalize for communicator {id:#x} ({n} open)");
    Ok(())
}

/// # Safety
/// `ctx` is NULL or a pointer `init_ctx` returned.
unsafe fn ctx_ref<'a>(ctx: *mut c_void) -> Result<Option<&'a Ctx>, Error> {
    if ctx.is_null() {
        return Ok(None);
    }
    // SAFETY: per the contract, a non-NULL `ctx` points to a `Ctx`; the magic check catches other pointers.
    let c = unsafe { &*ctx.cast::<Ctx>() };
    if c.magic != CTX_MAGIC {
        return Err(Error::invalid(
            "not a context returned by this plugin's init",
        ));
    }
    Ok(Some(c))
}

/// `devices`: one MRC NIC (all planes of the node behind it).
pub(crate) fn devices() -> Result<c_int, Error> {
    global().map(|_| 1)
}

/// Device properties, independent of the ABI version.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) struct Props {
    pub(crate) guid: u64,
    pub(crate) speed: c_int,
    pub(crate) latency: f32,
    pub(crate) max_comms: c_int,
    pub(crate) max_recvs: c_int,
    pub(crate) max_p2p_bytes: usize,
    pub(crate) max_coll_bytes: usize,
}

/// `getProperties`.
pub(crate) fn properties(dev: c_int) -> Result<Props, Error> {
    let g = global()?;
    check_dev(dev)?;
    Ok(Props {
        guid: 0x4d52_4300 | dev as u64,
        speed: g.settings.speed(),
        latency: g.settings.latency_us,
        max_comms: 65_536,
        max_recvs: g.settings.max_recvs as c_int,
        max_p2p_bytes: MAX_TRANSFER,
        max_coll_bytes: MAX_TRANSFER / 2,
    })
}

fn check_dev(dev: c_int) -> Result<(), Error> {
    if dev == 0 {
        Ok(())
    } else {
        Err(Error::invalid(format!(
            "device {dev} does not exist (devices() is 1)"
        )))
    }
}

/// What a pointer handed to NCCL is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Obj {
    Listen,
    Send,
    Recv,
    Request,
    Mr,
}

impl Obj {
    fn name(self) -> &'static str {
        match self {
            Obj::Listen => "listen comm",
            Obj::Send => "send comm",
            Obj::Recv => "receive comm",
            Obj::Request => "request",
            Obj::Mr => "memory handle",
        }
    }
}

/// Every object of this plugin NCCL holds (spec NCCL-HANDLE-1).
static LIVE: Registry<Obj> = Registry::new();

/// `p` is a live object of one of `kinds`, or the error naming what it is instead.
// spec: NCCL-HANDLE-1
fn live(p: *const c_void, kinds: &[Obj], what: &str) -> Result<Obj, Error> {
    LIVE.check_any(p as usize, kinds).map_err(|r| match r {
        Refusal::Null => Error::invalid(format!("{what} is NULL")),
        Refusal::Wrong(k) => Error::invalid(format!(
            "{what} is a {}, not a {}",
            k.name(),
            kinds
                .iter()
                .map(|k| k.name())
                .collect::<Vec<_>>()
                .join(" or ")
        )),
        Refusal::NotLive => Error::invalid(format!(
            "{what} {p:p} is no live {} of this plugin (closed, or never handed out)",
            kinds[0].name()
        )),
    })
}

/// Most bytes one registration may span: the user half of a 48-bit address space (x86-64 and AArch64 Linux).
/// A larger range cannot be memory of this process; registering it would let a peer aim at anything.
const MAX_REG_END: u64 = 1 << 47;

const LISTEN_MAGIC: u64 = 0x4d52_435f_4c53_4e31; // "MRC_LSN1"
const COMM_MAGIC: u64 = 0x4d52_435f_434f_4d31; // "MRC_COM1"
const MR_MAGIC: u64 = 0x4d52_435f_4d52_5f31; // "MRC_MR_1"
const REQ_MAGIC: u64 = 0x4d52_435f_5245_5131; // "MRC_REQ1"

/// What `listen` returns: the listener and the receiving side's control block, registered up front so its
/// address can go in the accept reply.
struct ListenComm {
    magic: u64,
    host: Arc<Host>,
    listener: Listener,
    ctrl: Option<(CtrlBlock, Mr)>,
}

/// A connected send or receive comm.
struct Comm {
    magic: u64,
    host: Arc<Host>,
    link: Link,
    ctrl_mr: Mr,
    side: Mutex<Side>,
    /// Request objects handed to NCCL: sends first, then one per receive slot.
    reqs: Box<[Request]>,
}

#[allow(
    clippy::large_enum_variant,
    reason = "one per comm, never moved after creation"
)]
enum Side {
    Send(SendSide),
    Recv(RecvSide),
}

/// A request as NCCL holds it: one per send id and one per receive slot, preallocated in the comm.
struct Request {
    magic: u64,
    comm: *const Comm,
    /// The send id, or the receive slot.
    index: u16,
    recv: bool,
    /// Receive: the sequence number of the request now using the slot (set under the comm's lock, read by
    /// `test`).
    seq: AtomicU32,
}

impl Request {
    fn kind(&self) -> ReqKind {
        if self.recv {
            ReqKind::Recv(RecvId {
                slot: self.index as u8,
                seq: self.seq.load(Ordering::Relaxed),
            })
        } else {
            ReqKind::Send(self.index)
        }
    }
}

#[derive(Clone, Copy)]
enum ReqKind {
    Send(SendId),
    Recv(RecvId),
}

/// A registration as NCCL holds it.
struct MrHandle {
    magic: u64,
    /// The comm it was registered through: only that comm deregisters it.
    comm: usize,
    addr: u64,
    len: usize,
    mr: Option<Mr>,
}

/// Connections `connect` has started, by the key written into their handles.
fn pending() -> &'static Mutex<BTreeMap<u64, PendingConn>> {
    static P: OnceLock<Mutex<BTreeMap<u64, PendingConn>>> = OnceLock::new();
    P.get_or_init(|| Mutex::new(BTreeMap::new()))
}

struct PendingConn {
    /// The listener blob of the handle that started it: a handle with another blob cannot claim it.
    blob: Vec<u8>,
    host: Arc<Host>,
    connecting: Connecting,
    ctrl: CtrlBlock,
    mr: Mr,
    qps: usize,
}

/// # Safety
/// `handle` is NULL or points to `NCCL_NET_HANDLE_MAXSIZE` writable bytes.
unsafe fn handle_mut<'a>(handle: *mut c_void) -> Result<&'a mut [u8; NET_HANDLE_MAXSIZE], Error> {
    if handle.is_null() {
        return Err(Error::invalid("handle is NULL"));
    }
    // SAFETY: NCCL's handles are NCCL_NET_HANDLE_MAXSIZE bytes (this function's contract); alignment 1.
    Ok(unsafe { &mut *handle.cast::<[u8; NET_HANDLE_MAXSIZE]>() })
}

/// `listen`: a listener and the handle that reaches it.
///
/// # Safety
/// `ctx` as for [`finalize`]; `handle` as for [`handle_mut`].
pub(crate) unsafe fn listen(
    ctx: *mut c_void,
    dev: c_int,
    handle: *mut c_void,
) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    unsafe { ctx_ref(ctx) }?;
    // SAFETY: forwarded contract.
    let h = unsafe { handle_mut(handle) }?;
    let g = global()?;
    check_dev(dev)?;
    let host = g.host()?;
    let listener = host.listen()?;
    let ctrl = CtrlBlock::new(CTRL_BYTES);
    let mr = host.reg_mr(ctrl.addr(), ctrl.len(), true)?;
    handle::write_listen(h, &listener.blob())?;
    let l: *mut c_void = Box::into_raw(Box::new(ListenComm {
        magic: LISTEN_MAGIC,
        host,
        listener,
        ctrl: Some((ctrl, mr)),
    }))
    .cast();
    LIVE.insert(l as usize, Obj::Listen);
    Ok(l)
}

/// `connect`: NULL until the connection is up; its progress is kept under a key written into the handle.
///
/// # Safety
/// As for [`listen`].
pub(crate) unsafe fn connect(
    ctx: *mut c_void,
    dev: c_int,
    handle: *mut c_void,
) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    unsafe { ctx_ref(ctx) }?;
    // SAFETY: forwarded contract.
    let h = unsafe { handle_mut(handle) }?;
    let g = global()?;
    check_dev(dev)?;
    let (state, blob) = handle::parse(h)?;
    let blob = blob.to_vec();
    let key = match state {
        State::Fresh => {
            let host = g.host()?;
            let qps = g.settings.qps_per_conn;
            let ctrl = CtrlBlock::new(CTRL_BYTES);
            let mr = host.reg_mr(ctrl.addr(), ctrl.len(), true)?;
            let app = SenderInfo {
                qps: qps as u8,
                fifo_addr: ctrl.addr(),
                fifo_rkey: mr.rkey,
            }
            .encode();
            let connecting = host.connect(&blob, qps, &app)?;
            // A random key, so that a handle cannot name another connection by guessing it (spec NCCL-CONN-2).
            let mut map = lock(pending());
            let key = loop {
                let k = mrc_host::bootstrap::random_key();
                let k = u64::from_le_bytes(k[..8].try_into().unwrap_or_default());
                if k != 0 && !map.contains_key(&k) {
                    break k;
                }
            };
            map.insert(
                key,
                PendingConn {
                    blob: blob.clone(),
                    host,
                    connecting,
                    ctrl,
                    mr,
                    qps,
                },
            );
            handle::set_connecting(h, key);
            key
        }
        State::Connecting(key) => key,
    };
    let mut map = lock(pending());
    // spec: NCCL-CONN-2
    let p = map
        .get_mut(&key)
        .filter(|p| p.blob == blob)
        .ok_or_else(|| {
            Error::invalid(
                "the handle names a connection that is not in progress for its listener"
                    .to_string(),
            )
        })?;
    let up = match p.connecting.poll() {
        Ok(None) => return Ok(std::ptr::null_mut()),
        Ok(Some(up)) => Ok(up),
        Err(e) => Err(e),
    };
    let p = map.remove(&key).expect("present above");
    drop(map);
    let (link, reply) = up?;
    let peer = ReceiverInfo::decode(&reply)?;
    if link.qps() != p.qps {
        return Err(Error::internal(format!(
            "asked for {} QPs, got {}",
            p.qps,
            link.qps()
        )));
    }
    let side = SendSide::new(p.qps, p.ctrl, p.mr.lkey, peer);
    new_comm(p.host, link, p.mr, Side::Send(side))
}

/// `accept`: NULL until a connector arrived.
///
/// # Safety
/// `listen_comm` is NULL or a pointer `listen` returned.
pub(crate) unsafe fn accept(listen_comm: *mut c_void) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    let l = unsafe { listen_mut(listen_comm) }?;
    let Some((ctrl, _)) = l.ctrl.as_ref() else {
        return Err(Error::usage(
            "this listen comm has already accepted its connection",
        ));
    };
    let reply = ReceiverInfo {
        sizes_addr: ctrl.addr() + proto::SIZES_AT as u64,
        sizes_rkey: l.ctrl.as_ref().expect("checked").1.rkey,
    }
    .encode();
    let Some((link, app)) = l.listener.poll_accept(&reply)? else {
        return Ok(std::ptr::null_mut());
    };
    let peer = SenderInfo::decode(&app)?;
    let (ctrl, mr) = l.ctrl.take().expect("checked");
    let side = RecvSide::new(ctrl, mr.lkey, peer);
    if link.qps() != side.qps() {
        return Err(Error::remote(format!(
            "peer asked for {} QPs, the link has {}",
            side.qps(),
            link.qps()
        )));
    }
    new_comm(Arc::clone(&l.host), link, mr, Side::Recv(side))
}

/// # Safety
/// `p` is NULL or a pointer `listen` returned.
unsafe fn listen_mut<'a>(p: *mut c_void) -> Result<&'a mut ListenComm, Error> {
    live(p, &[Obj::Listen], "listen comm")?;
    // SAFETY: per the contract; NCCL uses a listen comm from one thread at a time.
    let l = unsafe { &mut *p.cast::<ListenComm>() };
    if l.magic != LISTEN_MAGIC {
        return Err(Error::invalid("not a listen comm of this plugin"));
    }
    Ok(l)
}

fn new_comm(host: Arc<Host>, link: Link, ctrl_mr: Mr, side: Side) -> Result<*mut c_void, Error> {
    let kind = if matches!(side, Side::Send(_)) {
        Obj::Send
    } else {
        Obj::Recv
    };
    let nsend = SLOTS * MAX_RECVS * 2;
    let c = Box::into_raw(Box::new(Comm {
        magic: COMM_MAGIC,
        host,
        link,
        ctrl_mr,
        side: Mutex::new(side),
        reqs: Box::new([]),
    }));
    let reqs: Box<[Request]> = (0..nsend)
        .map(|i| (i, false))
        .chain((0..SLOTS).map(|s| (s, true)))
        .map(|(index, recv)| Request {
            magic: REQ_MAGIC,
            comm: c,
            index: index as u16,
            recv,
            seq: AtomicU32::new(0),
        })
        .collect();
    for r in reqs.iter() {
        LIVE.insert(std::ptr::from_ref(r) as usize, Obj::Request);
    }
    // SAFETY: `c` was just created from a Box and is not shared yet.
    unsafe { (*c).reqs = reqs };
    LIVE.insert(c as usize, kind);
    // Post this side's receives now, before NCCL's first call: the sender's go out ahead of its ready word, so
    // the receiver's first announcement already finds one (spec: NCCL-CONN-3).
    // SAFETY: as above; still not shared.
    let comm = unsafe { &*c };
    let first = comm.pump(&mut lock(&comm.side));
    if let Err(e) = first {
        forget(comm);
        // SAFETY: not handed out; dropping the box drops the link and the control block.
        let c = unsafe { Box::from_raw(c) };
        c.host.dereg_mr(&c.ctrl_mr);
        return Err(e);
    }
    Ok(c.cast())
}

/// Takes a comm and its requests out of the registry (it is being freed).
fn forget(c: &Comm) {
    let _ = LIVE.remove(std::ptr::from_ref(c) as usize, Obj::Send);
    let _ = LIVE.remove(std::ptr::from_ref(c) as usize, Obj::Recv);
    let start = c.reqs.as_ptr() as usize;
    LIVE.remove_range(start, start + size_of_val(&*c.reqs));
}

/// # Safety
/// `p` is NULL or a pointer `connect`/`accept` returned.
unsafe fn comm_ref<'a>(p: *mut c_void) -> Result<&'a Comm, Error> {
    live(p, &[Obj::Send, Obj::Recv], "comm")?;
    // SAFETY: per the contract; the magic check catches other pointers and closed comms.
    let c = unsafe { &*p.cast::<Comm>() };
    if c.magic != COMM_MAGIC {
        return Err(Error::invalid("not a send or receive comm of this plugin"));
    }
    Ok(c)
}

impl Comm {
    /// Posts what the protocol queued and feeds it the completions that arrived.
    fn pump(&self, side: &mut Side) -> Result<(), Error> {
        let mut done: Vec<Done> = Vec::new();
        self.link.poll(&mut done)?;
        for d in done {
            match side {
                Side::Send(s) => s.on_done(d),
                Side::Recv(r) => r.on_done(d),
            }
        }
        let ops = match side {
            Side::Send(s) => s.ops(),
            Side::Recv(r) => r.ops(),
        };
        while let Some(op) = ops.front() {
            if !self.link.post(op)? {
                break;
            }
            ops.pop_front();
        }
        Ok(())
    }

    /// The request object NCCL gets for `kind` (the comm's lock is held by the caller).
    fn request(&self, kind: ReqKind) -> *mut c_void {
        let req = match kind {
            ReqKind::Send(id) => &self.reqs[usize::from(id)],
            ReqKind::Recv(r) => {
                let req = &self.reqs[SLOTS * MAX_RECVS * 2 + usize::from(r.slot)];
                req.seq.store(r.seq, Ordering::Relaxed);
                req
            }
        };
        // NCCL only passes the pointer back to `test`, which reads through it.
        std::ptr::from_ref(req).cast_mut().cast()
    }
}

/// # Safety
/// `mh` is NULL or a pointer `reg_mr` returned.
unsafe fn mr_ref<'a>(mh: *mut c_void) -> Result<&'a MrHandle, Error> {
    live(mh, &[Obj::Mr], "memory handle")?;
    // SAFETY: per the contract; the magic check catches other pointers.
    let m = unsafe { &*mh.cast::<MrHandle>() };
    if m.magic != MR_MAGIC {
        return Err(Error::invalid("not a memory handle of this plugin"));
    }
    Ok(m)
}

/// `regMr`: host memory only (`ptrSupport` is `NCCL_PTR_HOST`).
///
/// # Safety
/// `comm` as for [`comm_ref`]; `[data, data + size)` is memory of this process that stays valid until
/// `dereg_mr`.
pub(crate) unsafe fn reg_mr(
    comm: *mut c_void,
    data: *mut c_void,
    size: usize,
    kind: c_int,
) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    let c = unsafe { comm_ref(comm) }?;
    if kind != PTR_HOST {
        return Err(Error::usage(format!(
            "regMr of memory type {kind}: this plugin registers host memory only (NCCL_PTR_HOST)"
        )));
    }
    if data.is_null() && size > 0 {
        return Err(Error::invalid("regMr of NULL"));
    }
    // spec: NCCL-HANDLE-1
    if (data as u64)
        .checked_add(size as u64)
        .is_none_or(|end| end > MAX_REG_END)
    {
        return Err(Error::invalid(format!(
            "regMr of {size} bytes at {data:p}: the range leaves the process's address space"
        )));
    }
    let remote = matches!(*lock(&c.side), Side::Recv(_));
    let mr = if size == 0 {
        None
    } else {
        Some(c.host.reg_mr(data as u64, size, remote)?)
    };
    let mh: *mut c_void = Box::into_raw(Box::new(MrHandle {
        magic: MR_MAGIC,
        comm: comm as usize,
        addr: data as u64,
        len: size,
        mr,
    }))
    .cast();
    LIVE.insert(mh as usize, Obj::Mr);
    Ok(mh)
}

/// `deregMr`.
///
/// # Safety
/// `comm` as for [`comm_ref`], `mh` as for [`mr_ref`].
pub(crate) unsafe fn dereg_mr(comm: *mut c_void, mh: *mut c_void) -> Result<(), Error> {
    // SAFETY: forwarded contract.
    let c = unsafe { comm_ref(comm) }?;
    // SAFETY: forwarded contract.
    let m = unsafe { mr_ref(mh) }?;
    if m.comm != comm as usize {
        return Err(Error::invalid(
            "deregMr through another comm than the one it was registered with",
        ));
    }
    LIVE.remove(mh as usize, Obj::Mr)
        .map_err(|_| Error::invalid("memory handle deregistered twice"))?;
    let mh = mh.cast::<MrHandle>();
    // SAFETY: the magic check passed, so this is a live handle from `reg_mr`; the magic is cleared before the
    // box is freed so a second deregMr of it fails its check.
    let m = unsafe {
        (*mh).magic = 0;
        Box::from_raw(mh)
    };
    if let Some(mr) = &m.mr {
        c.host.dereg_mr(mr);
    }
    Ok(())
}

/// The local buffer `[data, data + size)` as the transport names it.
fn local_sge(m: &MrHandle, data: u64, size: usize) -> Result<(Sge, u32), Error> {
    // An empty transfer moves no bytes, wherever its pointer points (NCCL sends empty messages).
    let inside = size == 0
        || (data >= m.addr
            && data
                .checked_add(size as u64)
                .is_some_and(|end| end <= m.addr + m.len as u64));
    if !inside {
        return Err(Error::invalid(format!(
            "buffer {data:#x}+{size} lies outside its registration {:#x}+{}",
            m.addr, m.len
        )));
    }
    if size > MAX_TRANSFER {
        return Err(Error::invalid(format!(
            "transfer of {size} bytes; maxP2pBytes is {MAX_TRANSFER}"
        )));
    }
    let (lkey, rkey) = m.mr.as_ref().map_or((0, 0), |r| (r.lkey, r.rkey));
    Ok((
        Sge {
            addr: data,
            len: size as u32,
            lkey,
        },
        rkey,
    ))
}

/// `isend`: NULL request when the receiver has not announced a matching receive yet.
///
/// # Safety
/// `comm` as for [`comm_ref`], `mh` as for [`mr_ref`].
pub(crate) unsafe fn isend(
    comm: *mut c_void,
    data: *mut c_void,
    size: usize,
    tag: c_int,
    mh: *mut c_void,
) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    let c = unsafe { comm_ref(comm) }?;
    // SAFETY: forwarded contract.
    let (sge, _) = local_sge(unsafe { mr_ref(mh) }?, data as u64, size)?;
    let mut side = lock(&c.side);
    c.pump(&mut side)?;
    let Side::Send(s) = &mut *side else {
        return Err(Error::usage("isend on a receive comm"));
    };
    let r = s.isend(sge, tag)?;
    let req = r.map_or(std::ptr::null_mut(), |id| c.request(ReqKind::Send(id)));
    c.pump(&mut side)?;
    Ok(req)
}

/// `irecv` of `n` grouped buffers; `size(i)` reads NCCL's size array (`int` or `size_t` by version).
///
/// # Safety
/// `comm` as for [`comm_ref`]; `data`, `tags` and `mhandles` point to `n` elements each, every handle as for
/// [`mr_ref`].
pub(crate) unsafe fn irecv(
    comm: *mut c_void,
    n: c_int,
    data: *mut *mut c_void,
    size: impl Fn(usize) -> usize,
    tags: *mut c_int,
    mhandles: *mut *mut c_void,
    optional: bool,
) -> Result<*mut c_void, Error> {
    // SAFETY: forwarded contract.
    let c = unsafe { comm_ref(comm) }?;
    let n = usize::try_from(n)
        .ok()
        .filter(|n| (1..=MAX_RECVS).contains(n))
        .ok_or_else(|| {
            Error::invalid(format!(
                "irecv of {n} buffers (maxRecvs is at most {MAX_RECVS})"
            ))
        })?;
    crate::ffi::non_null(data, "data")?;
    crate::ffi::non_null(tags, "tags")?;
    crate::ffi::non_null(mhandles, "mhandles")?;
    let mut bufs = [RecvBuf {
        addr: 0,
        size: 0,
        rkey: 0,
        tag: 0,
    }; MAX_RECVS];
    for (i, b) in bufs.iter_mut().enumerate().take(n) {
        // SAFETY: the arrays hold `n` elements (contract); `i < n`.
        let (d, t, m) = unsafe { (*data.add(i), *tags.add(i), *mhandles.add(i)) };
        let len = size(i);
        // SAFETY: forwarded contract.
        let (_, rkey) = local_sge(unsafe { mr_ref(m) }?, d as u64, len)?;
        *b = RecvBuf {
            addr: d as u64,
            size: len,
            rkey,
            tag: t,
        };
    }
    let mut side = lock(&c.side);
    c.pump(&mut side)?;
    let Side::Recv(r) = &mut *side else {
        return Err(Error::usage("irecv on a send comm"));
    };
    let id = r.irecv(&bufs[..n], optional)?;
    let req = id.map_or(std::ptr::null_mut(), |id| c.request(ReqKind::Recv(id)));
    c.pump(&mut side)?;
    Ok(req)
}

/// `test`: `done` and, for receives, the size of each grouped buffer.
///
/// # Safety
/// `request` is a pointer `isend`/`irecv` returned and not yet reported done; `done` is writable; `sizes` is
/// NULL or has room for the request's buffer count.
pub(crate) unsafe fn test(
    request: *mut c_void,
    done: *mut c_int,
    sizes: *mut c_int,
) -> Result<(), Error> {
    crate::ffi::non_null(done, "done")?;
    // A request of a closed comm left the registry with it: refused before it is read.
    live(request, &[Obj::Request], "request")?;
    // SAFETY: a live request (registry check above): its comm is live too.
    let req = unsafe { &*request.cast::<Request>() };
    if req.magic != REQ_MAGIC {
        return Err(Error::invalid("not a request of this plugin"));
    }
    // SAFETY: requests live inside their comm, which NCCL closes only after its requests are done.
    let c = unsafe { comm_ref(req.comm.cast_mut().cast()) }?;
    let mut side = lock(&c.side);
    c.pump(&mut side)?;
    let mut out = [0u32; MAX_RECVS];
    let kind = req.kind();
    let (finished, n) = match (&mut *side, kind) {
        (Side::Send(s), ReqKind::Send(id)) => match s.test(id)? {
            Some(size) => {
                out[0] = size;
                (true, 1)
            }
            None => (false, 0),
        },
        (Side::Recv(r), ReqKind::Recv(id)) => (r.test(id, &mut out)?, r.count(id)),
        _ => return Err(Error::internal("request kind does not match its comm")),
    };
    // SAFETY: `done` is writable (contract, checked non-NULL).
    unsafe { *done = c_int::from(finished) };
    if finished && !sizes.is_null() {
        for (i, v) in out.iter().enumerate().take(n) {
            // SAFETY: `sizes` has room for the request's buffer count (contract); `n` is that count.
            unsafe { *sizes.add(i) = *v as c_int };
        }
    }
    Ok(())
}

/// `iflush`: host memory needs no flush, so no request (NCCL treats NULL as done).
pub(crate) fn iflush(comm: *mut c_void) -> Result<*mut c_void, Error> {
    // SAFETY: NCCL passes its recv comm; the magic check rejects anything else.
    unsafe { comm_ref(comm) }?;
    Ok(std::ptr::null_mut())
}

/// `closeSend` / `closeRecv`.
///
/// # Safety
/// `comm` as for [`comm_ref`]; no request of it is used afterwards.
pub(crate) unsafe fn close(comm: *mut c_void, send: bool) -> Result<(), Error> {
    let (kind, what) = if send {
        (Obj::Send, "closeSend's comm")
    } else {
        (Obj::Recv, "closeRecv's comm")
    };
    live(comm, &[kind], what)?;
    // SAFETY: forwarded contract; live per the registry.
    forget(unsafe { comm_ref(comm) }?);
    let c = comm.cast::<Comm>();
    // SAFETY: the magic check passed: a live comm from `new_comm`. The magic is cleared before the box (and
    // with it the link and registrations) is dropped.
    let c = unsafe {
        (*c).magic = 0;
        Box::from_raw(c)
    };
    let failure = match &*lock(&c.side) {
        Side::Send(s) => s.failure().cloned(),
        Side::Recv(r) => r.failure().cloned(),
    };
    if let Some(e) = failure {
        info!(NET, "closing a comm that had failed: {e}");
    }
    c.host.dereg_mr(&c.ctrl_mr);
    Ok(())
}

/// `closeListen`.
///
/// # Safety
/// `listen_comm` as for [`listen_mut`].
pub(crate) unsafe fn close_listen(listen_comm: *mut c_void) -> Result<(), Error> {
    // SAFETY: forwarded contract.
    unsafe { listen_mut(listen_comm) }?;
    let _ = LIVE.remove(listen_comm as usize, Obj::Listen);
    let l = listen_comm.cast::<ListenComm>();
    // SAFETY: a live listen comm from `listen`; the magic is cleared before it is freed.
    let l = unsafe {
        (*l).magic = 0;
        Box::from_raw(l)
    };
    if let Some((_, mr)) = &l.ctrl {
        l.host.dereg_mr(mr);
    }
    Ok(())
}
