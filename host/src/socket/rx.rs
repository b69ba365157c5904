//! The receive side of a plane's socket: datagrams read by one `recvmmsg`.
//!
//! With receive offload on (`UDP_GRO`), the kernel may hand over consecutive datagrams of one flow as one
//! message and say their size in a control message; the batch cuts such a message back into its datagrams, so
//! the engine still sees one MRC packet at a time.

use std::mem::{size_of, zeroed};
use std::net::SocketAddrV6;

use super::addr::{CMSG_ROOM, sockaddr_from, sockaddr_to};

/// Linux `UDP_GRO` (level `SOL_UDP`): as a socket option, coalesced receives on; as a control message, the
/// size of the datagrams a message holds.
pub(super) const UDP_GRO: libc::c_int = 104;

/// One datagram of the batch: where it lies in its message's slot.
#[derive(Debug, Clone, Copy, Default)]
struct Datagram {
    msg: usize,
    start: usize,
    len: usize,
}

/// Received datagrams: payloads, sources and traffic classes, reused from batch to batch.
pub struct RxBatch {
    pub(super) slot: usize,
    pub(super) buf: Vec<u8>,
    pub(super) srcs: Vec<libc::sockaddr_in6>,
    pub(super) ctrl: Vec<[u64; CMSG_ROOM / 8]>,
    pub(super) hdrs: Vec<libc::mmsghdr>,
    pub(super) iovs: Vec<libc::iovec>,
    /// Per message: its length, or `slot + 1` when it was cut to fit.
    pub(super) lens: Vec<usize>,
    pub(super) tclass: Vec<u8>,
    /// Messages filled.
    pub(super) msgs: usize,
    datagrams: Vec<Datagram>,
}

// SAFETY: the raw pointers inside are scratch space rebuilt before every use; the batch owns what they point at.
unsafe impl Send for RxBatch {}

impl std::fmt::Debug for RxBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxBatch")
            .field("datagrams", &self.datagrams.len())
            .finish()
    }
}

impl RxBatch {
    /// Room for `capacity` messages of up to `slot` bytes (longer ones are cut and must be dropped); with
    /// receive offload a message may hold several datagrams, so `slot` is then 64 KiB.
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
            msgs: 0,
            datagrams: Vec::with_capacity(capacity),
        }
    }

    /// Datagrams in the batch.
    pub fn len(&self) -> usize {
        self.datagrams.len()
    }

    /// The batch holds nothing.
    pub fn is_empty(&self) -> bool {
        self.datagrams.is_empty()
    }

    /// How many messages one receive may put in the batch.
    pub fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Empties the batch (before a plane I/O without `recvmmsg` fills it with [`push`](Self::push)).
    pub fn clear(&mut self) {
        self.msgs = 0;
        self.datagrams.clear();
    }

    /// Appends one received datagram (cut to the slot, and marked so, if longer); `false` when the batch is
    /// full. For a plane I/O that carries datagrams without `recvmmsg` (crate::plane).
    pub fn push(&mut self, payload: &[u8], src: SocketAddrV6, tclass: u8) -> bool {
        let i = self.msgs;
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
        self.msgs += 1;
        self.datagrams.push(Datagram {
            msg: i,
            start: 0,
            len: n,
        });
        true
    }

    /// Datagram `i`: payload, source, IPv6 traffic class, and whether its message was cut to fit the slot.
    pub fn get(&self, i: usize) -> (&[u8], SocketAddrV6, u8, bool) {
        let d = self.datagrams[i];
        let at = d.msg * self.slot + d.start;
        (
            &self.buf[at..at + d.len],
            sockaddr_to(&self.srcs[d.msg]),
            self.tclass[d.msg],
            self.lens[d.msg] > self.slot,
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

    /// Records the `n` messages `recvmmsg` filled and cuts coalesced ones into their datagrams.
    pub(super) fn finish(&mut self, n: usize) {
        self.msgs = n;
        self.datagrams.clear();
        for i in 0..n {
            let h = &self.hdrs[i];
            let truncated = h.msg_hdr.msg_flags & libc::MSG_TRUNC != 0;
            let len = h.msg_len as usize;
            self.lens[i] = if truncated { self.slot + 1 } else { len };
            let (tc, seg) = control(&h.msg_hdr);
            self.tclass[i] = tc;
            let seg = match seg {
                Some(s) if s > 0 && !truncated => s,
                _ => len.max(1),
            };
            let body = len.min(self.slot);
            if body == 0 {
                self.datagrams.push(Datagram {
                    msg: i,
                    start: 0,
                    len: 0,
                });
            }
            let mut start = 0;
            while start < body {
                let n = seg.min(body - start);
                self.datagrams.push(Datagram {
                    msg: i,
                    start,
                    len: n,
                });
                start += n;
            }
        }
    }
}

/// The traffic class and the coalesced datagrams' size from a received message's control messages.
fn control(msg: &libc::msghdr) -> (u8, Option<usize>) {
    let (mut tc, mut seg) = (0u8, None);
    // SAFETY: the kernel wrote `msg_controllen` bytes of well-formed control messages into this message's control
    // buffer; the CMSG_* macros stay within that length.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(msg);
        while !c.is_null() {
            match ((*c).cmsg_level, (*c).cmsg_type) {
                (libc::IPPROTO_IPV6, libc::IPV6_TCLASS) => {
                    tc = libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned() as u8;
                }
                (libc::SOL_UDP, UDP_GRO) => {
                    seg = Some(libc::CMSG_DATA(c).cast::<libc::c_int>().read_unaligned() as usize);
                }
                _ => {}
            }
            c = libc::CMSG_NXTHDR(msg, c);
        }
    }
    (tc, seg)
}
