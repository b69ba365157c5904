//! The send side of a plane's socket: datagrams batched for one `sendmmsg`.
//!
//! With segmentation offload on, consecutive datagrams to the same destination with the same traffic class and
//! the same length (the last may be shorter) go as one message with a `UDP_SEGMENT` control message: a *train*
//! the kernel cuts back into the same datagrams below the socket (on the host's link, or on a NIC that does UDP
//! segmentation), so every datagram on the wire is still one MRC packet with its own headers and ICRC.

use std::mem::{size_of, zeroed};
use std::net::SocketAddrV6;

use super::addr::{sockaddr_from, sockaddr_to};

/// Linux `UDP_SEGMENT` (level `SOL_UDP`): the size of the datagrams a message is cut into.
pub(super) const UDP_SEGMENT: libc::c_int = 103;
/// Datagrams one message may carry (the kernel's `UDP_MAX_SEGMENTS`).
const MAX_SEGMENTS: usize = 64;
/// Bytes one message may carry: a UDP datagram's length field, less the headers' room.
const MAX_TRAIN_BYTES: usize = 65_000;
/// Control-message room per message: the traffic class and the segment size.
const TX_CMSG_ROOM: usize = 64;

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
    pub(super) ctrl: Vec<[u64; TX_CMSG_ROOM / 8]>,
    /// Trains allowed ([`with_segmentation`](Self::with_segmentation)).
    pub(super) gso: bool,
    /// Per datagram: it rides in the message of the one before it.
    pub(super) joins: Vec<bool>,
    /// Per message built by the last `prepare`: how many datagrams it carries.
    pub(super) msg_datagrams: Vec<usize>,
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
            ctrl: vec![[0; TX_CMSG_ROOM / 8]; capacity],
            gso: false,
            joins: vec![false; capacity],
            msg_datagrams: Vec::with_capacity(capacity),
        }
    }

    /// Lets consecutive datagrams to one destination go as one segmented message (see the module's
    /// description); the socket must have UDP checksums on.
    pub fn with_segmentation(mut self, on: bool) -> Self {
        self.gso = on;
        self
    }

    /// Whether trains are allowed.
    pub fn segmentation(&self) -> bool {
        self.gso
    }

    /// Stops making trains and splits the ones queued (the kernel refused one).
    pub fn stop_segmentation(&mut self) {
        self.gso = false;
        self.joins.fill(false);
    }

    /// Datagrams in the message that starts at datagram `i` (1 without segmentation).
    pub fn message_len(&self, i: usize) -> usize {
        1 + self.joins[i + 1..self.len]
            .iter()
            .take_while(|&&j| j)
            .count()
    }

    /// Whole length of datagram `i`, a lent payload included.
    fn datagram_len(&self, i: usize) -> usize {
        self.lens[i] + self.lent[i].map_or(0, |(_, _, n)| n)
    }

    /// Whether datagram `i` (just queued) can ride in the message of the datagrams before it: same
    /// destination and class, the message's datagrams all of its first one's length and this one no longer,
    /// within the kernel's limits.
    // spec: HOST-IO-4
    fn can_join(&self, i: usize) -> bool {
        if !self.gso || i == 0 {
            return false;
        }
        let (a, b) = (&self.dests[i - 1], &self.dests[i]);
        if a.sin6_addr.s6_addr != b.sin6_addr.s6_addr
            || a.sin6_port != b.sin6_port
            || self.tclass[i - 1] != self.tclass[i]
        {
            return false;
        }
        let first = (0..i).rev().find(|&k| !self.joins[k]).unwrap_or(0);
        let seg = self.datagram_len(first);
        let count = i - first;
        let bytes: usize = (first..i).map(|k| self.datagram_len(k)).sum();
        self.datagram_len(i - 1) == seg
            && self.datagram_len(i) <= seg
            && count < MAX_SEGMENTS
            && bytes + self.datagram_len(i) <= MAX_TRAIN_BYTES
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
        self.joins[i] = false;
        self.len += 1;
        self.joins[i] = self.can_join(i);
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
        let i = self.len - 1;
        self.lent[i] = Some((at, payload, payload_len));
        // The payload changed the datagram's length: decide again.
        self.joins[i] = self.can_join(i);
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
        self.joins.copy_within(n..self.len, 0);
        self.joins[0] = false;
        self.len -= n;
    }

    /// Builds the `sendmmsg` headers for datagrams `from..from + n` (`from` starts a message); returns how
    /// many messages they make.
    pub(super) fn prepare(&mut self, from: usize, n: usize) -> usize {
        self.msg_datagrams.clear();
        let mut iov_at = 0;
        let mut i = from;
        while i < from + n {
            let first = i;
            let msg_iov = iov_at;
            loop {
                iov_at += self.datagram_iovecs(i, iov_at);
                i += 1;
                if i >= from + n || !self.joins[i] {
                    break;
                }
            }
            let count = i - first;
            let seg = (count > 1).then(|| self.datagram_len(first));
            let k = self.msg_datagrams.len();
            self.msg_datagrams.push(count);
            self.hdrs[k] = libc::mmsghdr {
                msg_hdr: self.message(k, first, msg_iov, iov_at - msg_iov, seg),
                msg_len: 0,
            };
        }
        self.msg_datagrams.len()
    }

    /// Points iovecs at datagram `i` from `self.iovs[at]` on; returns how many.
    fn datagram_iovecs(&mut self, i: usize, at: usize) -> usize {
        let base: *mut u8 = self.slots[i].as_mut_ptr();
        let iov = |p: *mut u8, len: usize| libc::iovec {
            iov_base: p.cast(),
            iov_len: len,
        };
        let iovs = &mut self.iovs[at..at + 3];
        match self.lent[i] {
            None => {
                iovs[0] = iov(base, self.lens[i]);
                1
            }
            Some((off, ptr, len)) => {
                iovs[0] = iov(base, off);
                // sendmmsg only reads through iovecs; the pointer is mutable in the C type alone.
                iovs[1] = iov(ptr.cast_mut(), len);
                // SAFETY: `off <= lens[i] <= slot length` (checked in `push_lent`), so the offset stays in
                // the slot.
                iovs[2] = iov(unsafe { base.add(off) }, self.lens[i] - off);
                3
            }
        }
    }

    /// Message `k`: datagram `first`'s destination and class, `iovlen` iovecs from `iov_at`, and the segment
    /// size of a train.
    fn message(
        &mut self,
        k: usize,
        first: usize,
        iov_at: usize,
        iovlen: usize,
        seg: Option<usize>,
    ) -> libc::msghdr {
        let ctrl = &mut self.ctrl[k];
        // SAFETY: all-zero is valid for msghdr.
        let mut msg: libc::msghdr = unsafe { zeroed() };
        msg.msg_name = (&mut self.dests[first] as *mut libc::sockaddr_in6).cast();
        msg.msg_namelen = size_of::<libc::sockaddr_in6>() as libc::socklen_t;
        msg.msg_iov = self.iovs[iov_at..].as_mut_ptr();
        msg.msg_iovlen = iovlen;
        msg.msg_control = ctrl.as_mut_ptr().cast();
        // SAFETY: CMSG_SPACE is arithmetic on constant sizes.
        let (int_space, seg_space) = unsafe {
            (
                libc::CMSG_SPACE(size_of::<libc::c_int>() as u32) as usize,
                libc::CMSG_SPACE(size_of::<u16>() as u32) as usize,
            )
        };
        msg.msg_controllen = int_space + if seg.is_some() { seg_space } else { 0 };
        // SAFETY: `ctrl` holds TX_CMSG_ROOM bytes, more than the two control messages need; each header and
        // its data are written inside it, the second after the first as CMSG_NXTHDR places it.
        unsafe {
            let c = libc::CMSG_FIRSTHDR(&msg);
            (*c).cmsg_level = libc::IPPROTO_IPV6;
            (*c).cmsg_type = libc::IPV6_TCLASS;
            (*c).cmsg_len = libc::CMSG_LEN(size_of::<libc::c_int>() as u32) as usize;
            libc::CMSG_DATA(c)
                .cast::<libc::c_int>()
                .write_unaligned(self.tclass[first]);
            if let Some(seg) = seg {
                let c = libc::CMSG_NXTHDR(&msg, c);
                (*c).cmsg_level = libc::SOL_UDP;
                (*c).cmsg_type = UDP_SEGMENT;
                (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as usize;
                libc::CMSG_DATA(c).cast::<u16>().write_unaligned(seg as u16);
            }
        }
        msg
    }
}
