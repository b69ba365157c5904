//! The send side of a plane's socket: datagrams batched for one `sendmmsg`.

use std::mem::{size_of, zeroed};
use std::net::SocketAddrV6;

use super::{CMSG_ROOM, sockaddr_from, sockaddr_to};

/// Datagrams waiting to go out of one socket, each with its destination and traffic class. Payload buffers are
/// swapped in and out rather than copied, and reused from batch to batch, so sending allocates nothing. A
/// datagram may leave its payload in registered memory ([`push_lent`](Self::push_lent)): `sendmmsg` then
/// gathers headers, payload and ICRC from three places, and the payload is copied once, by the kernel.
pub struct TxBatch {
    pub(super) slots: Vec<Vec<u8>>,
    pub(super) lens: Vec<usize>,
    /// Per datagram, a payload outside its slot: (offset in the slot where it goes, address, length).
    pub(super) lent: Vec<Option<(usize, *const u8, usize)>>,
    pub(super) dests: Vec<libc::sockaddr_in6>,
    pub(super) tclass: Vec<libc::c_int>,
    pub(super) len: usize,
    pub(super) hdrs: Vec<libc::mmsghdr>,
    pub(super) iovs: Vec<libc::iovec>,
    pub(super) ctrl: Vec<[u64; CMSG_ROOM / 8]>,
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

    pub(super) fn prepare(&mut self, from: usize, n: usize) {
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
