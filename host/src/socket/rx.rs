//! The receive side of a plane's socket: datagrams read by one `recvmmsg`.

use std::mem::{size_of, zeroed};
use std::net::SocketAddrV6;

use super::{CMSG_ROOM, sockaddr_from, sockaddr_to};

/// Received datagrams: payloads, sources and traffic classes, reused from batch to batch.
pub struct RxBatch {
    pub(super) slot: usize,
    pub(super) buf: Vec<u8>,
    pub(super) srcs: Vec<libc::sockaddr_in6>,
    pub(super) ctrl: Vec<[u64; CMSG_ROOM / 8]>,
    pub(super) hdrs: Vec<libc::mmsghdr>,
    pub(super) iovs: Vec<libc::iovec>,
    pub(super) lens: Vec<usize>,
    pub(super) tclass: Vec<u8>,
    pub(super) len: usize,
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

    pub(super) fn prepare(&mut self) {
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

    pub(super) fn finish(&mut self, n: usize) {
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
