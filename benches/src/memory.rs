//! The two [`Memory`] implementations the engine benches replay with.

use mrc::Memory;

/// Memory that moves no bytes at all: `read` leaves the packet buffer as it is and `write` drops the payload.
///
/// [`mrc::NullMemory`] zero-fills on `read`, i.e. a payload-sized memset per packet; this one makes "without
/// the payload copy" literally true, so the per-packet figures are the protocol's cost alone.
#[derive(Debug, Default, Clone, Copy)]
pub struct NoCopy;

impl Memory for NoCopy {
    fn read(&mut self, _addr: u64, _dst: &mut [u8]) {}
    fn write(&mut self, _addr: u64, _src: &[u8]) {}
}

/// One registered region backed by a `Vec`: every `read` and `write` really copies, as a datapath over host
/// memory would.
///
/// The pages are touched at creation so page faults never land inside a timed region.
#[derive(Debug, Clone)]
pub struct Arena {
    base: u64,
    bytes: Vec<u8>,
}

impl Arena {
    /// `len` bytes addressed from `base`, filled with a fixed pattern (so a sender's payload is not all zeros).
    pub fn new(base: u64, len: usize) -> Self {
        let bytes = (0..len)
            .map(|i| (i as u64).wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes()[0])
            .collect();
        Self { base, bytes }
    }

    fn offset(&self, addr: u64) -> usize {
        usize::try_from(addr - self.base).expect("address inside the arena")
    }
}

impl Memory for Arena {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        let o = self.offset(addr);
        dst.copy_from_slice(&self.bytes[o..o + dst.len()]);
    }

    fn write(&mut self, addr: u64, src: &[u8]) {
        let o = self.offset(addr);
        self.bytes[o..o + src.len()].copy_from_slice(src);
    }
}
