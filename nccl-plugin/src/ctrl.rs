//! A comm's control block: plugin-owned memory the peer writes into (the clear-to-send FIFO on the sending
//! side, the size records on the receiving side) and the local sources of what this side writes to the peer.
//!
//! The transport reads and writes this memory from its own thread, so it is never borrowed as a Rust slice:
//! every access goes through a raw pointer to one slot, and the protocol touches a slot only when the
//! completion queue has said the transport is done with it (spec: NCCL-CTS-2).
#![allow(
    unsafe_code,
    reason = "memory shared with the transport's progress thread"
)]

use std::ptr::NonNull;

/// A zeroed, 64-byte-aligned block of `len` bytes, freed on drop.
pub(crate) struct CtrlBlock {
    ptr: NonNull<u64>,
    words: usize,
}

// SAFETY: the block is plain memory; the protocol's slot discipline (above) orders the accesses between the
// owner and the transport's thread.
unsafe impl Send for CtrlBlock {}
// SAFETY: as for Send; `&CtrlBlock` only hands out addresses and copies through raw pointers.
unsafe impl Sync for CtrlBlock {}

impl CtrlBlock {
    /// Allocates `len` zeroed bytes (rounded up to 64).
    pub(crate) fn new(len: usize) -> Self {
        let words = len.div_ceil(64) * 8;
        let v: Box<[u64]> = vec![0u64; words.max(8)].into_boxed_slice();
        let words = v.len();
        let ptr = NonNull::new(Box::into_raw(v).cast::<u64>()).expect("Box is never null");
        Self { ptr, words }
    }

    /// The address the transport registers and the peer writes to.
    pub(crate) fn addr(&self) -> u64 {
        self.ptr.as_ptr() as u64
    }

    /// Length in bytes.
    pub(crate) fn len(&self) -> usize {
        self.words * 8
    }

    fn check(&self, off: usize, len: usize) {
        assert!(
            off.checked_add(len).is_some_and(|end| end <= self.len()),
            "control block access {off}+{len} outside {} bytes",
            self.len()
        );
    }

    /// Copies `dst.len()` bytes at `off` out of the block.
    pub(crate) fn read(&self, off: usize, dst: &mut [u8]) {
        self.check(off, dst.len());
        // SAFETY: bounds checked above; `dst` is a distinct Rust buffer; the slot is not being written by the
        // transport (its completion was polled before this read).
        unsafe {
            std::ptr::copy_nonoverlapping(
                self.ptr.as_ptr().cast::<u8>().add(off),
                dst.as_mut_ptr(),
                dst.len(),
            );
        }
    }

    /// The 8-byte word at `off` (a multiple of 8) while the peer may be writing it: a volatile load the
    /// compiler can neither elide nor hoist out of a polling loop, then an acquire fence so what this side
    /// does after seeing the value is ordered after it. Only for words polled without a completion (the
    /// ready word, spec: NCCL-CONN-3); a torn read returns a mix of old and new bytes, which the caller's
    /// value check rejects.
    pub(crate) fn read_u64_landing(&self, off: usize) -> u64 {
        self.check(off, 8);
        assert!(off.is_multiple_of(8), "word at unaligned offset {off}");
        // SAFETY: bounds checked above; `off` is 8-aligned and the block is 64-aligned, so the pointer is a
        // valid, aligned `u64` inside the allocation. The transport may store into it concurrently (memory
        // written by the "NIC"); a volatile load of plain memory is how such device-written words are read.
        let v = unsafe { std::ptr::read_volatile(self.ptr.as_ptr().add(off / 8)) };
        std::sync::atomic::fence(std::sync::atomic::Ordering::Acquire);
        v
    }

    /// Copies `src` into the block at `off`.
    pub(crate) fn write(&self, off: usize, src: &[u8]) {
        self.check(off, src.len());
        // SAFETY: bounds checked above; `src` is a distinct Rust buffer; the slot is not being read by the
        // transport (the work request that last used it has completed).
        unsafe {
            std::ptr::copy_nonoverlapping(
                src.as_ptr(),
                self.ptr.as_ptr().cast::<u8>().add(off),
                src.len(),
            );
        }
    }
}

impl Drop for CtrlBlock {
    fn drop(&mut self) {
        let slice = std::ptr::slice_from_raw_parts_mut(self.ptr.as_ptr(), self.words);
        // SAFETY: the pointer came from `Box::into_raw` of exactly this slice in `new` and is freed only here.
        drop(unsafe { Box::from_raw(slice) });
    }
}

impl std::fmt::Debug for CtrlBlock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CtrlBlock")
            .field("addr", &format_args!("{:#x}", self.addr()))
            .field("len", &self.len())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_back_what_was_written_and_refuses_out_of_bounds() {
        let b = CtrlBlock::new(100);
        assert_eq!(b.len(), 128);
        assert_eq!(b.addr() % 8, 0);
        b.write(120, &[1, 2, 3, 4, 5, 6, 7, 8]);
        let mut out = [0u8; 8];
        b.read(120, &mut out);
        assert_eq!(out, [1, 2, 3, 4, 5, 6, 7, 8]);
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| b.read(121, &mut out)));
        assert!(r.is_err());
    }
}
