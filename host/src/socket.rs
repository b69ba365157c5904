//! One plane's UDP socket: batched `sendmmsg`/`recvmmsg`, the traffic class both ways, and the ICMP error
//! queue. Raw `libc` because we need what portable wrappers hide: the whole traffic class (the DSCP carries
//! the trim mark, not just ECN), `MSG_ERRQUEUE`, and Linux's zero-checksum UDP mode.
#![allow(unsafe_code, reason = "socket system calls and their C structures")]

use std::io;
use std::mem::{size_of, zeroed};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};

/// Linux `UDP_NO_CHECK6_TX`: send IPv6 UDP with a zero checksum.
const UDP_NO_CHECK6_TX: libc::c_int = 101;
/// Linux `UDP_NO_CHECK6_RX`: accept IPv6 UDP with a zero checksum.
const UDP_NO_CHECK6_RX: libc::c_int = 102;
/// Control-message room per datagram: one `int` (the traffic class) with its header.
const CMSG_ROOM: usize = 32;

fn sockaddr_from(a: &SocketAddrV6) -> libc::sockaddr_in6 {
    // SAFETY: sockaddr_in6 is plain data; all-zero is a valid value.
    let mut s: libc::sockaddr_in6 = unsafe { zeroed() };
    s.sin6_family = libc::AF_INET6 as libc::sa_family_t;
    s.sin6_port = a.port().to_be();
    s.sin6_addr.s6_addr = a.ip().octets();
    s.sin6_flowinfo = a.flowinfo();
    s.sin6_scope_id = a.scope_id();
    s
}

fn sockaddr_to(s: &libc::sockaddr_in6) -> SocketAddrV6 {
    SocketAddrV6::new(
        Ipv6Addr::from(s.sin6_addr.s6_addr),
        u16::from_be(s.sin6_port),
        s.sin6_flowinfo,
        s.sin6_scope_id,
    )
}

fn setsockopt_int(
    fd: RawFd,
    level: libc::c_int,
    name: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: `v` lives across the call and its size is passed alongside.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            name,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// A non-blocking IPv6 UDP socket bound to one plane's address.
#[derive(Debug)]
pub struct PlaneSocket {
    fd: OwnedFd,
    local: SocketAddrV6,
}

/// What the ICMP error queue said about a datagram we sent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SendError {
    /// Where the datagram was going.
    pub dest: SocketAddrV6,
    /// The error (`ENETUNREACH`, `EHOSTUNREACH`, ...).
    pub errno: i32,
    /// The router that reported it, if any.
    pub offender: Option<Ipv6Addr>,
    /// The start of the datagram's UDP payload.
    pub payload: Vec<u8>,
}

impl PlaneSocket {
    /// Binds to `addr` (port 0: any free port). `zero_checksum` turns on Linux's zero-checksum IPv6 UDP both
    /// ways, needed on SRv6 paths where every hop rewrites the destination inside the checksum's
    /// pseudo-header; MRC's own ICRC protects the packet instead.
    pub fn bind(addr: SocketAddrV6, zero_checksum: bool, buffer_bytes: usize) -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe {
            libc::socket(
                libc::AF_INET6,
                libc::SOCK_DGRAM | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
                libc::IPPROTO_UDP,
            )
        };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        let fd = unsafe { OwnedFd::from_raw_fd(raw) };
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_V6ONLY, 1)?;
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVTCLASS, 1)?;
        setsockopt_int(raw, libc::IPPROTO_IPV6, libc::IPV6_RECVERR, 1)?;
        if zero_checksum {
            setsockopt_int(raw, libc::IPPROTO_UDP, UDP_NO_CHECK6_TX, 1)?;
            setsockopt_int(raw, libc::IPPROTO_UDP, UDP_NO_CHECK6_RX, 1)?;
        }
        let bytes = buffer_bytes.min(i32::MAX as usize) as libc::c_int;
        for (force, plain) in [
            (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
            (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
        ] {
            // FORCE needs CAP_NET_ADMIN; without it the plain option is capped by the sysctl.
            if setsockopt_int(raw, libc::SOL_SOCKET, force, bytes).is_err() {
                setsockopt_int(raw, libc::SOL_SOCKET, plain, bytes)?;
            }
        }
        let sa = sockaddr_from(&addr);
        // SAFETY: `sa` is a valid sockaddr_in6 of the size passed.
        let r = unsafe {
            libc::bind(
                raw,
                (&sa as *const libc::sockaddr_in6).cast(),
                size_of::<libc::sockaddr_in6>() as libc::socklen_t,
            )
        };
        if r != 0 {
            let e = io::Error::last_os_error();
            return Err(io::Error::new(e.kind(), format!("bind {addr}: {e}")));
        }
        // SAFETY: all-zero is a valid sockaddr_in6; getsockname writes at most `len` bytes.
        let mut out: libc::sockaddr_in6 = unsafe { zeroed() };
        let mut len = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        // SAFETY: `out` and `len` are valid for writes.
        let r = unsafe {
            libc::getsockname(raw, (&mut out as *mut libc::sockaddr_in6).cast(), &mut len)
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(Self {
            fd,
            local: sockaddr_to(&out),
        })
    }

    /// The bound address, with the real port.
    pub fn local_addr(&self) -> SocketAddrV6 {
        self.local
    }

    /// The receive buffer the kernel granted, as `SO_RCVBUF` reports it (twice the bytes asked for: the kernel
    /// counts its own overhead in it).
    pub fn receive_buffer(&self) -> io::Result<usize> {
        let mut v: libc::c_int = 0;
        let mut len = size_of::<libc::c_int>() as libc::socklen_t;
        // SAFETY: `v` and `len` outlive the call and `len` is `v`'s size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_SOCKET,
                libc::SO_RCVBUF,
                (&mut v as *mut libc::c_int).cast(),
                &mut len,
            )
        };
        if r == 0 {
            Ok(v.max(0) as usize)
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// Sends `batch[from..]` with one `sendmmsg`. Returns how many went out; `WouldBlock` when none did because
    /// the socket buffer is full; another error concerns the first unsent datagram only.
    pub fn send(&self, batch: &mut TxBatch, from: usize) -> io::Result<usize> {
        let n = batch.len - from.min(batch.len);
        if n == 0 {
            return Ok(0);
        }
        batch.prepare(from, n);
        // SAFETY: `prepare` pointed every header at buffers owned by `batch`, which outlives the call and is
        // not touched meanwhile, and at lent payloads, which `push_lent`'s contract keeps valid.
        let r = unsafe {
            libc::sendmmsg(
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                n as libc::c_uint,
                0,
            )
        };
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(r as usize)
        }
    }

    /// Receives up to `batch.capacity()` datagrams with one `recvmmsg`. `Ok(0)` when none is waiting.
    pub fn recv(&self, batch: &mut RxBatch) -> io::Result<usize> {
        batch.prepare();
        // SAFETY: every header points at buffers owned by `batch`, valid for the sizes recorded in them.
        let r = unsafe {
            libc::recvmmsg(
                self.fd.as_raw_fd(),
                batch.hdrs.as_mut_ptr(),
                batch.hdrs.len() as libc::c_uint,
                libc::MSG_DONTWAIT,
                std::ptr::null_mut(),
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                batch.len = 0;
                Ok(0)
            } else {
                Err(e)
            };
        }
        batch.finish(r as usize);
        Ok(batch.len)
    }

    /// Takes one entry off the socket's error queue (ICMP unreachable and local send errors).
    pub fn recv_error(&self) -> io::Result<Option<SendError>> {
        let mut payload = [0u8; 256];
        let mut ctrl = [0u64; 64];
        // SAFETY: all-zero is valid for these C structures.
        let mut name: libc::sockaddr_in6 = unsafe { zeroed() };
        let mut iov = libc::iovec {
            iov_base: payload.as_mut_ptr().cast(),
            iov_len: payload.len(),
        };
        // SAFETY: as above.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut name as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = &mut iov;
        msg.msg_iovlen = 1;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        msg.msg_controllen = size_of::<[u64; 64]>();
        // SAFETY: every pointer in `msg` refers to a live local buffer of the recorded size.
        let r = unsafe {
            libc::recvmsg(
                self.fd.as_raw_fd(),
                &mut msg,
                libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::WouldBlock {
                Ok(None)
            } else {
                Err(e)
            };
        }
        let mut errno = 0;
        let mut offender = None;
        // SAFETY: the kernel filled `msg_controllen` bytes of `ctrl` with well-formed control messages; the
        // CMSG_* macros walk them within that length.
        unsafe {
            let mut c = libc::CMSG_FIRSTHDR(&msg);
            while !c.is_null() {
                if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_RECVERR {
                    let ee = libc::CMSG_DATA(c)
                        .cast::<libc::sock_extended_err>()
                        .read_unaligned();
                    errno = ee.ee_errno as i32;
                    let off = libc::SO_EE_OFFENDER(libc::CMSG_DATA(c).cast());
                    let off = off.cast::<libc::sockaddr_in6>().read_unaligned();
                    if off.sin6_family == libc::AF_INET6 as libc::sa_family_t {
                        offender = Some(Ipv6Addr::from(off.sin6_addr.s6_addr));
                    }
                }
                c = libc::CMSG_NXTHDR(&msg, c);
            }
        }
        let n = (r as usize).min(payload.len());
        Ok(Some(SendError {
            dest: sockaddr_to(&name),
            errno,
            offender,
            payload: payload[..n].to_vec(),
        }))
    }
}

impl AsRawFd for PlaneSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// Datagrams waiting to go out of one socket, each with its destination and traffic class. Payload buffers are
/// swapped in and out rather than copied, and reused from batch to batch, so sending allocates nothing. A
/// datagram may leave its payload in registered memory ([`push_lent`](Self::push_lent)): `sendmmsg` then
/// gathers headers, payload and ICRC from three places, and the payload is copied once, by the kernel.
pub struct TxBatch {
    slots: Vec<Vec<u8>>,
    lens: Vec<usize>,
    /// Per datagram, a payload outside its slot: (offset in the slot where it goes, address, length).
    lent: Vec<Option<(usize, *const u8, usize)>>,
    dests: Vec<libc::sockaddr_in6>,
    tclass: Vec<libc::c_int>,
    len: usize,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    ctrl: Vec<[u64; CMSG_ROOM / 8]>,
}

// SAFETY: the raw pointers inside are scratch space rebuilt before every use and point at what the batch owns,
// except lent payloads, which point into registered memory that moves with the batch's owner (see `push_lent`).
unsafe impl Send for TxBatch {}

impl std::fmt::Debug for TxBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxBatch").field("len", &self.len).finish()
    }
}

impl TxBatch {
    /// Room for `capacity` datagrams of up to `slot` bytes.
    pub fn new(capacity: usize, slot: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: all-zero is valid for these C structures.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_sa: libc::sockaddr_in6 = unsafe { zeroed() };
        Self {
            slots: (0..capacity).map(|_| vec![0; slot]).collect(),
            lens: vec![0; capacity],
            lent: vec![None; capacity],
            dests: vec![zero_sa; capacity],
            tclass: vec![0; capacity],
            len: 0,
            hdrs: vec![zero_hdr; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                3 * capacity
            ],
            ctrl: vec![[0; CMSG_ROOM / 8]; capacity],
        }
    }

    /// Datagrams queued.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Nothing queued.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// No room for another datagram.
    pub fn is_full(&self) -> bool {
        self.len == self.slots.len()
    }

    /// Queues the first `len` bytes of `buf` by swapping `buf` with a free slot: `buf` comes back as an
    /// equally sized scratch buffer. Returns `false` (and leaves `buf` alone) when the batch is full.
    pub fn push(&mut self, buf: &mut Vec<u8>, len: usize, dest: SocketAddrV6, tclass: u8) -> bool {
        if self.is_full() {
            return false;
        }
        let i = self.len;
        std::mem::swap(&mut self.slots[i], buf);
        if buf.len() < self.slots[i].len() {
            buf.resize(self.slots[i].len(), 0);
        }
        self.lens[i] = len.min(self.slots[i].len());
        self.lent[i] = None;
        self.dests[i] = sockaddr_from(&dest);
        self.tclass[i] = libc::c_int::from(tclass);
        self.len += 1;
        true
    }

    /// Like [`push`](Self::push), for a datagram whose payload of `payload_len` bytes at `payload` goes between
    /// `buf[..at]` and `buf[at..len]`.
    ///
    /// # Safety
    /// `[payload, payload + payload_len)` must stay valid for reads and unchanged until the datagram is sent,
    /// dropped or [`materialize`](Self::materialize)d.
    pub unsafe fn push_lent(
        &mut self,
        buf: &mut Vec<u8>,
        len: usize,
        dest: SocketAddrV6,
        tclass: u8,
        (at, payload, payload_len): (usize, *const u8, usize),
    ) -> bool {
        // The whole datagram must fit the slot, so that `materialize` can copy the payload in.
        if at > len || len + payload_len > buf.len() || !self.push(buf, len, dest, tclass) {
            return false;
        }
        self.lent[self.len - 1] = Some((at, payload, payload_len));
        true
    }

    /// Copies every lent payload into its datagram's slot, so the batch no longer points outside itself (before
    /// it waits for a full socket while the memory may change or go away).
    pub fn materialize(&mut self) {
        for i in 0..self.len {
            if let Some((at, ptr, n)) = self.lent[i].take() {
                let slot = &mut self.slots[i];
                let len = self.lens[i];
                slot.copy_within(at..len, at + n);
                // SAFETY: `push_lent`'s contract keeps `[ptr, ptr + n)` valid and unchanged until now; the slot
                // is a distinct buffer with room for `at + n` bytes (checked in `push_lent`).
                let src = unsafe { std::slice::from_raw_parts(ptr, n) };
                slot[at..at + n].copy_from_slice(src);
                self.lens[i] = len + n;
            }
        }
    }

    /// Datagram `i` whole (its bytes and a lent payload gathered), appended to `out`: for a plane I/O that
    /// carries datagrams without `sendmmsg` (crate::plane).
    pub fn gather(&self, i: usize, out: &mut Vec<u8>) {
        let slot = &self.slots[i][..self.lens[i]];
        match self.lent[i] {
            None => out.extend_from_slice(slot),
            Some((at, ptr, n)) => {
                out.extend_from_slice(&slot[..at]);
                // SAFETY: `push_lent`'s contract keeps `[ptr, ptr + n)` valid and unchanged while the datagram
                // is in the batch, as for `sendmmsg`, which reads the same range.
                out.extend_from_slice(unsafe { std::slice::from_raw_parts(ptr, n) });
                out.extend_from_slice(&slot[at..]);
            }
        }
    }

    /// The IPv6 traffic class datagram `i` goes with.
    pub fn tclass(&self, i: usize) -> u8 {
        self.tclass[i] as u8
    }

    /// Where datagram `i` was going.
    pub fn dest(&self, i: usize) -> SocketAddrV6 {
        sockaddr_to(&self.dests[i])
    }

    /// The bytes of datagram `i` held in the batch (without a lent payload: its headers and ICRC).
    pub fn payload(&self, i: usize) -> &[u8] {
        &self.slots[i][..self.lens[i]]
    }

    /// Forgets every datagram.
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Drops the first `n` datagrams, keeping the rest in order.
    pub fn consume(&mut self, n: usize) {
        let n = n.min(self.len);
        if n == 0 {
            return;
        }
        self.slots[..self.len].rotate_left(n);
        self.lens.copy_within(n..self.len, 0);
        self.lent.copy_within(n..self.len, 0);
        self.dests.copy_within(n..self.len, 0);
        self.tclass.copy_within(n..self.len, 0);
        self.len -= n;
    }

    fn prepare(&mut self, from: usize, n: usize) {
        for k in 0..n {
            let i = from + k;
            let base: *mut u8 = self.slots[i].as_mut_ptr();
            let iov = |p: *mut u8, len: usize| libc::iovec {
                iov_base: p.cast(),
                iov_len: len,
            };
            let iovs = &mut self.iovs[3 * k..3 * k + 3];
            let count = match self.lent[i] {
                None => {
                    iovs[0] = iov(base, self.lens[i]);
                    1
                }
                Some((at, ptr, len)) => {
                    iovs[0] = iov(base, at);
                    // sendmmsg only reads through iovecs; the pointer is mutable in the C type alone.
                    iovs[1] = iov(ptr.cast_mut(), len);
                    // SAFETY: `at <= lens[i] <= slot length` (checked in `push_lent`), so the offset stays in
                    // the slot.
                    iovs[2] = iov(unsafe { base.add(at) }, self.lens[i] - at);
                    3
                }
            };
            let ctrl = &mut self.ctrl[k];
            // SAFETY: all-zero is valid for msghdr.
            let mut msg: libc::msghdr = unsafe { zeroed() };
            msg.msg_name = (&mut self.dests[i] as *mut libc::sockaddr_in6).cast();
            msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            msg.msg_iov = self.iovs[3 * k..].as_mut_ptr();
            msg.msg_iovlen = count;
            msg.msg_control = ctrl.as_mut_ptr().cast();
            // SAFETY: CMSG_SPACE is arithmetic on a constant size.
            msg.msg_controllen =
                unsafe { libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) } as usize;
            // SAFETY: `ctrl` holds CMSG_ROOM bytes, more than one int-sized control message needs; the header
            // and data are written inside it.
            unsafe {
                let c = libc::CMSG_FIRSTHDR(&msg);
                (*c).cmsg_level = libc::IPPROTO_IPV6;
                (*c).cmsg_type = libc::IPV6_TCLASS;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
                libc::CMSG_DATA(c)
                    .cast::<libc::c_int>()
                    .write_unaligned(self.tclass[i]);
            }
            self.hdrs[k] = libc::mmsghdr {
                msg_hdr: msg,
                msg_len: 0,
            };
        }
    }
}

/// Received datagrams: payloads, sources and traffic classes, reused from batch to batch.
pub struct RxBatch {
    slot: usize,
    buf: Vec<u8>,
    srcs: Vec<libc::sockaddr_in6>,
    ctrl: Vec<[u64; CMSG_ROOM / 8]>,
    hdrs: Vec<libc::mmsghdr>,
    iovs: Vec<libc::iovec>,
    lens: Vec<usize>,
    tclass: Vec<u8>,
    len: usize,
}

// SAFETY: the raw pointers inside are scratch space rebuilt before every use; the batch owns what they point at.
unsafe impl Send for RxBatch {}

impl std::fmt::Debug for RxBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxBatch").field("len", &self.len).finish()
    }
}

impl RxBatch {
    /// Room for `capacity` datagrams of up to `slot` bytes (longer ones are cut and must be dropped).
    pub fn new(capacity: usize, slot: usize) -> Self {
        let capacity = capacity.max(1);
        // SAFETY: all-zero is valid for these C structures.
        let zero_hdr: libc::mmsghdr = unsafe { zeroed() };
        // SAFETY: as above.
        let zero_sa: libc::sockaddr_in6 = unsafe { zeroed() };
        Self {
            slot,
            buf: vec![0; capacity * slot],
            srcs: vec![zero_sa; capacity],
            ctrl: vec![[0; CMSG_ROOM / 8]; capacity],
            hdrs: vec![zero_hdr; capacity],
            iovs: vec![
                libc::iovec {
                    iov_base: std::ptr::null_mut(),
                    iov_len: 0
                };
                capacity
            ],
            lens: vec![0; capacity],
            tclass: vec![0; capacity],
            len: 0,
        }
    }

    /// Datagrams in the batch.
    pub fn len(&self) -> usize {
        self.len
    }

    /// The batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many datagrams one receive may put in the batch.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Empties the batch (before a plane I/O without `recvmmsg` fills it with [`push`](Self::push)).
    pub fn clear(&mut self) {
        self.len = 0;
    }

    /// Appends one received datagram (cut to the slot, and marked so, if longer); `false` when the batch is
    /// full. For a plane I/O that carries datagrams without `recvmmsg` (crate::plane).
    pub fn push(&mut self, payload: &[u8], src: SocketAddrV6, tclass: u8) -> bool {
        let i = self.len;
        if i >= self.capacity() {
            return false;
        }
        let n = payload.len().min(self.slot);
        self.buf[i * self.slot..i * self.slot + n].copy_from_slice(&payload[..n]);
        self.lens[i] = if payload.len() > self.slot {
            self.slot + 1
        } else {
            n
        };
        self.srcs[i] = sockaddr_from(&src);
        self.tclass[i] = tclass;
        self.len += 1;
        true
    }

    /// Datagram `i`: payload, source, IPv6 traffic class, and whether it was cut to fit the slot.
    pub fn get(&self, i: usize) -> (&[u8], SocketAddrV6, u8, bool) {
        let len = self.lens[i];
        (
            &self.buf[i * self.slot..i * self.slot + len.min(self.slot)],
            sockaddr_to(&self.srcs[i]),
            self.tclass[i],
            len > self.slot,
        )
    }

    fn prepare(&mut self) {
        for i in 0..self.hdrs.len() {
            self.iovs[i] = libc::iovec {
                iov_base: self.buf[i * self.slot..].as_mut_ptr().cast(),
                iov_len: self.slot,
            };
            // SAFETY: all-zero is valid for msghdr.
            let mut msg: libc::msghdr = unsafe { zeroed() };
            msg.msg_name = (&mut self.srcs[i] as *mut libc::sockaddr_in6).cast();
            msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
            msg.msg_iov = &mut self.iovs[i];
            msg.msg_iovlen = 1;
            msg.msg_control = self.ctrl[i].as_mut_ptr().cast();
            msg.msg_controllen = CMSG_ROOM;
            self.hdrs[i] = libc::mmsghdr {
                msg_hdr: msg,
                msg_len: 0,
            };
        }
    }

    fn finish(&mut self, n: usize) {
        self.len = n;
        for i in 0..n {
            let h = &self.hdrs[i];
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            self.lens[i] = if truncated {
                self.slot + 1
            } else {
                h.msg_len as usize
            };
            let mut tc = 0u8;
            // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed control messages into this
            // datagram's control buffer; the CMSG_* macros stay within that length.
            unsafe {
                let mut c = libc::CMSG_FIRSTHDR(&h.msg_hdr);
                while !c.is_null() {
                    if (*c).cmsg_level == libc::IPPROTO_IPV6 && (*c).cmsg_type == libc::IPV6_TCLASS
                    {
                        tc = libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned() as u8;
                    }
                    c = libc::CMSG_NXTHDR(&h.msg_hdr, c);
                }
            }
            self.tclass[i] = tc;
        }
    }
}

/// An eventfd: a counter the kernel makes readable while it is not zero. Wakes a sleeping progress thread (the
/// doorbell) and makes completion channels and the async-event queue pollable.
#[derive(Debug)]
pub struct EventFd(OwnedFd);

impl EventFd {
    /// A new non-blocking eventfd at zero.
    pub fn new() -> io::Result<Self> {
        // SAFETY: plain system call; the result is checked.
        let raw = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if raw < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `raw` is a new descriptor nobody else owns.
        Ok(Self(unsafe { OwnedFd::from_raw_fd(raw) }))
    }

    /// Adds one: readable now. A full counter (2^64 − 2) is left alone: it is readable anyway.
    pub fn signal(&self) {
        let one: u64 = 1;
        // SAFETY: writes 8 bytes from a live u64 to an eventfd we own.
        let _ = unsafe { libc::write(self.0.as_raw_fd(), (&one as *const u64).cast(), 8) };
    }

    /// Reads and clears the counter; 0 when it was zero.
    pub fn drain(&self) -> u64 {
        let mut v: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we own.
        let r = unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
        if r == 8 { v } else { 0 }
    }

    /// The descriptor, for poll/epoll.
    pub fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }
}

/// Waits until one of `fds` is readable (or has an error queued, or is writable where `want_write` says so), or
/// until `timeout` passes (`None`: forever). Returns whether anything is ready.
pub fn wait(
    fds: &[RawFd],
    want_write: &[bool],
    timeout: Option<std::time::Duration>,
) -> io::Result<bool> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .enumerate()
        .map(|(i, &fd)| libc::pollfd {
            fd,
            events: libc::POLLIN
                | if want_write.get(i).copied().unwrap_or(false) {
                    libc::POLLOUT
                } else {
                    0
                },
            revents: 0,
        })
        .collect();
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let tsp = ts
        .as_ref()
        .map_or(std::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `pfds` and `tsp` are valid for the duration of the call; no signal mask is passed.
    let r = unsafe {
        libc::ppoll(
            pfds.as_mut_ptr(),
            pfds.len() as libc::nfds_t,
            tsp,
            std::ptr::null(),
        )
    };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(false)
        } else {
            Err(e)
        };
    }
    Ok(r > 0)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Receives `n` datagrams on `sock` (waiting up to a second), each mapped by `f`.
    fn receive<T>(
        sock: &PlaneSocket,
        n: usize,
        f: impl Fn((&[u8], SocketAddrV6, u8, bool)) -> T,
    ) -> Vec<T> {
        let mut rx = RxBatch::new(8, 2048);
        let mut got = Vec::new();
        for _ in 0..100 {
            let k = sock.recv(&mut rx).unwrap();
            got.extend((0..k).map(|i| f(rx.get(i))));
            if got.len() >= n {
                break;
            }
            wait(
                &[sock.as_raw_fd()],
                &[],
                Some(std::time::Duration::from_millis(10)),
            )
            .unwrap();
        }
        got
    }

    #[test]
    fn loopback_batch_carries_payload_and_traffic_class() {
        let any = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0);
        let a = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let b = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let mut tx = TxBatch::new(4, 2048);
        let mut buf = vec![0u8; 2048];
        for (i, tc) in [(0u8, 0x1cu8), (1, 0xb8), (2, 0x28)] {
            buf[..3].copy_from_slice(&[i, i, i]);
            assert!(tx.push(&mut buf, 3 + usize::from(i), b.local_addr(), tc));
        }
        assert_eq!(a.send(&mut tx, 0).unwrap(), 3);
        let got: Vec<_> = receive(&b, 3, |(p, src, tc, cut)| (p.len(), p[0], src, tc, cut));
        assert_eq!(
            got,
            vec![
                (3, 0, a.local_addr(), 0x1c, false),
                (4, 1, a.local_addr(), 0xb8, false),
                (5, 2, a.local_addr(), 0x28, false)
            ]
        );
    }

    #[test]
    #[allow(unsafe_code, reason = "push_lent takes a raw payload pointer")]
    fn lent_payloads_are_gathered_and_materialized() {
        let any = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 0, 0, 0);
        let a = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let b = PlaneSocket::bind(any, false, 1 << 20).unwrap();
        let payload: Vec<u8> = (0..1000u32).map(|i| i as u8).collect();
        let mut tx = TxBatch::new(4, 2048);
        let mut buf = vec![0u8; 2048];
        // Headers "HH", payload elsewhere, trailer "TTTT".
        buf[..6].copy_from_slice(b"HHTTTT");
        for _ in 0..2 {
            // SAFETY: `payload` outlives the batch's use of it below.
            assert!(unsafe {
                tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 1000))
            });
            buf[..6].copy_from_slice(b"HHTTTT");
        }
        // Dropping the first keeps the second's lent payload with it; it goes out gathered from three places.
        tx.consume(1);
        assert_eq!(a.send(&mut tx, 0).unwrap(), 1);
        tx.consume(1);
        // A materialized datagram holds its payload and no longer needs the memory.
        // SAFETY: as above.
        assert!(unsafe {
            tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 1000))
        });
        tx.materialize();
        assert_eq!(tx.payload(0).len(), 1006);
        assert_eq!(a.send(&mut tx, 0).unwrap(), 1);
        // Too long for a slot: refused.
        // SAFETY: as above; refused, so never used.
        assert!(!unsafe {
            tx.push_lent(&mut buf, 6, b.local_addr(), 0, (2, payload.as_ptr(), 2043))
        });
        let want = [&b"HH"[..], &payload, b"TTTT"].concat();
        let got = receive(&b, 2, |(p, ..)| p.to_vec());
        assert_eq!(got, vec![want.clone(), want]);
    }

    #[test]
    fn consume_keeps_the_rest_in_order() {
        let d = SocketAddrV6::new(Ipv6Addr::LOCALHOST, 9, 0, 0);
        let mut tx = TxBatch::new(4, 16);
        let mut buf = vec![0u8; 16];
        for i in 0..4u8 {
            buf[0] = i;
            assert!(tx.push(&mut buf, 1, d, i));
        }
        assert!(tx.is_full());
        assert!(!tx.push(&mut buf, 1, d, 9));
        tx.consume(3);
        assert_eq!(tx.len(), 1);
        assert_eq!(tx.payload(0), &[3]);
    }
}
