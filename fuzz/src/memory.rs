//! The harness's checked memory: every access the engine asks for is checked against live regions.

use mrc::{Access, Memory};

use crate::{BUFFER_LEN, BUFFERS, GUARD, GUARD_LEN};

/// A node's memory: buffers between guard bytes, and the regions registered in them. Every access the engine
/// asks for is checked against the live regions.
#[derive(Debug, Clone)]
pub struct CheckedMemory {
    pub(crate) base: u64,
    pub(crate) bytes: Vec<u8>,
    /// Buffer start addresses.
    pub(crate) buffers: Vec<u64>,
    /// Live registrations: (lkey, address, length, rights).
    pub(crate) regions: Vec<(u32, u64, u64, Access)>,
    /// Lend payloads in place, so the engine sends zero-copy.
    pub(crate) lend: bool,
}

impl CheckedMemory {
    pub(crate) fn new(base: u64, lend: bool) -> Self {
        let mut m = Self {
            base,
            bytes: Vec::new(),
            buffers: Vec::new(),
            regions: Vec::new(),
            lend,
        };
        for i in 0..BUFFERS {
            let start = m.bytes.len() as u64 + GUARD_LEN;
            m.bytes
                .resize((start + BUFFER_LEN + GUARD_LEN) as usize, GUARD);
            for (k, b) in m.bytes[start as usize..(start + BUFFER_LEN) as usize]
                .iter_mut()
                .enumerate()
            {
                *b = (k as u8).wrapping_mul(7) ^ (i as u8) ^ (base >> 28) as u8;
            }
            m.buffers.push(base + start);
        }
        m
    }

    /// Asserts that the engine may touch `[addr, addr + len)`: inside one live region, with a write right if
    /// it writes. A zero-length access must still name a place in (or at the end of) a region.
    fn check(&self, addr: u64, len: usize, write: bool) {
        let ok = self.regions.iter().any(|&(_, a, l, acc)| {
            addr >= a
                && addr.checked_add(len as u64).is_some_and(|e| e <= a + l)
                && (!write
                    || acc.contains(Access::LOCAL_WRITE)
                    || acc.contains(Access::REMOTE_WRITE))
        });
        assert!(
            ok,
            "the engine {} [{addr:#x}, +{len}) outside every registered region: {:x?}",
            if write { "wrote" } else { "read" },
            self.regions
        );
    }

    fn offset(&self, addr: u64, len: usize) -> std::ops::Range<usize> {
        let off = (addr - self.base) as usize;
        off..off + len
    }

    /// Whether every byte outside the buffers still holds the guard value.
    pub(crate) fn guards_intact(&self) -> bool {
        let mut pos = self.base;
        for &b in &self.buffers {
            if !self.bytes[self.offset(pos, (b - pos) as usize)]
                .iter()
                .all(|&x| x == GUARD)
            {
                return false;
            }
            pos = b + BUFFER_LEN;
        }
        let end = self.base + self.bytes.len() as u64;
        self.bytes[self.offset(pos, (end - pos) as usize)]
            .iter()
            .all(|&x| x == GUARD)
    }

    pub(crate) fn slice(&self, addr: u64, len: usize) -> &[u8] {
        &self.bytes[self.offset(addr, len)]
    }
}

impl Memory for CheckedMemory {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        self.check(addr, dst.len(), false);
        dst.copy_from_slice(&self.bytes[self.offset(addr, dst.len())]);
    }

    fn write(&mut self, addr: u64, src: &[u8]) {
        self.check(addr, src.len(), true);
        let r = self.offset(addr, src.len());
        self.bytes[r].copy_from_slice(src);
    }

    fn view(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.lend {
            return None;
        }
        self.check(addr, len, false);
        Some(&self.bytes[self.offset(addr, len)])
    }
}
