//! Test memory: one arena per endpoint, with guard bytes around every allocation.

use crate::mem::Memory;

/// The byte value of guard areas.
pub const GUARD: u8 = 0xA5;
/// Guard bytes before and after every allocation.
pub const GUARD_LEN: u64 = 64;

/// A growable arena addressed from `base`. Allocations are separated by guard bytes so tests can prove that
/// nothing was written outside a target region. Accesses outside the arena are counted, not performed.
#[derive(Debug, Clone)]
pub struct VecMemory {
    base: u64,
    bytes: Vec<u8>,
    /// Reads or writes the engine attempted outside the arena (must stay 0).
    pub violations: u64,
    /// Lend payloads in place ([`Memory::view`]), so the engine sends zero-copy.
    pub lend: bool,
}

impl VecMemory {
    /// An empty arena whose first address is `base`.
    pub fn new(base: u64) -> Self {
        Self {
            base,
            bytes: Vec::new(),
            violations: 0,
            lend: false,
        }
    }

    /// Allocates `len` bytes surrounded by guard bytes; returns the address.
    pub fn alloc(&mut self, len: u64) -> u64 {
        let start = self.bytes.len() as u64 + GUARD_LEN;
        self.bytes.resize((start + len + GUARD_LEN) as usize, GUARD);
        self.bytes[start as usize..(start + len) as usize].fill(0);
        self.base + start
    }

    fn range(&self, addr: u64, len: usize) -> Option<core::ops::Range<usize>> {
        let off = usize::try_from(addr.checked_sub(self.base)?).ok()?;
        let end = off.checked_add(len)?;
        (end <= self.bytes.len()).then_some(off..end)
    }

    /// The bytes at `[addr, addr + len)`.
    pub fn slice(&self, addr: u64, len: usize) -> &[u8] {
        match self.range(addr, len) {
            Some(r) => &self.bytes[r],
            None => &[],
        }
    }

    /// Fills `[addr, addr + len)` with a pattern derived from `seed` (so two fills with different seeds differ).
    pub fn fill_pattern(&mut self, addr: u64, len: usize, seed: u64) {
        if let Some(r) = self.range(addr, len) {
            for (i, b) in self.bytes[r].iter_mut().enumerate() {
                *b = pattern_byte(seed, i as u64);
            }
        }
    }

    /// Whether every guard byte of every allocation is intact, i.e. nothing was written outside allocations.
    pub fn guards_intact(&self, allocations: &[(u64, u64)]) -> bool {
        let mut sorted: Vec<(u64, u64)> = allocations.to_vec();
        sorted.sort_unstable();
        let mut pos = self.base;
        for &(addr, len) in &sorted {
            if !self
                .slice(pos, (addr - pos) as usize)
                .iter()
                .all(|&b| b == GUARD)
            {
                return false;
            }
            pos = addr + len;
        }
        let end = self.base + self.bytes.len() as u64;
        self.slice(pos, (end - pos) as usize)
            .iter()
            .all(|&b| b == GUARD)
    }
}

/// Byte `i` of the pattern with seed `seed`.
pub fn pattern_byte(seed: u64, i: u64) -> u8 {
    let x = (seed ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    (x >> 56) as u8
}

impl Memory for VecMemory {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        match self.range(addr, dst.len()) {
            Some(r) => dst.copy_from_slice(&self.bytes[r]),
            None => self.violations += 1,
        }
    }

    fn write(&mut self, addr: u64, src: &[u8]) {
        match self.range(addr, src.len()) {
            Some(r) => self.bytes[r].copy_from_slice(src),
            None => self.violations += 1,
        }
    }

    fn view(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.lend {
            return None;
        }
        self.range(addr, len).map(|r| &self.bytes[r])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guards_detect_stray_writes() {
        let mut m = VecMemory::new(0x1000);
        let a = m.alloc(16);
        let b = m.alloc(8);
        let allocs = [(a, 16), (b, 8)];
        assert!(m.guards_intact(&allocs));
        m.write(a, &[1; 16]);
        assert!(m.guards_intact(&allocs));
        m.write(a + 16, &[1]);
        assert!(!m.guards_intact(&allocs));
        m.write(0, &[1]);
        assert_eq!(m.violations, 1);
    }
}
