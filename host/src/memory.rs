//! Real registered memory: the placement target of the UDP datapath (the host's registration calls are in
//! `host/memory.rs`).
//!
//! Application-owned buffers arrive as raw pointers ([`Host::reg_mr`](crate::Host::reg_mr), whose caller promises the
//! range stays valid until [`Host::dereg_mr`](crate::Host::dereg_mr)). The engine checks every access against the
//! registered region (key, domain, bounds, rights) before it calls [`Memory`]; this layer checks again that the range
//! lies inside memory it was given, so a bug upstream can never turn into a stray write.
#![allow(unsafe_code, reason = "placement into registered memory is a raw copy")]

use mrc::mem::Memory;

struct Region {
    addr: u64,
    len: u64,
    /// Memory we allocated and free on drop; `false` for memory the caller lent us.
    owned: bool,
}

/// The regions payload may be read from and placed into: buffers the datapath owns, and caller memory
/// registered with [`HostMemory::lend`].
#[derive(Default)]
pub struct HostMemory {
    /// Sorted by address. Lent regions may overlap or repeat: verbs lets an application register the same
    /// buffer twice (NCCL does), and each registration is forgotten on its own.
    regions: Vec<Region>,
    /// Accesses outside every region (refused; a bug upstream if ever non-zero).
    pub refused: u64,
}

// SAFETY: the regions are plain bytes; the owner of a HostMemory is the only one that moves data through it
// (lent regions are the caller's promise, see `lend`).
unsafe impl Send for HostMemory {}

impl std::fmt::Debug for HostMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostMemory")
            .field("regions", &self.regions.len())
            .field("refused", &self.refused)
            .finish()
    }
}

impl HostMemory {
    /// Allocates `len` zeroed bytes and returns their address.
    pub fn alloc(&mut self, len: usize) -> u64 {
        let b: Box<[u8]> = vec![0u8; len.max(1)].into_boxed_slice();
        let len = b.len() as u64;
        let addr = Box::into_raw(b).cast::<u8>() as u64;
        self.insert(Region {
            addr,
            len,
            owned: true,
        });
        addr
    }

    /// Makes `[addr, addr + len)` of the caller's memory a placement target.
    ///
    /// # Safety
    /// The range must be valid for reads and writes, and not be accessed through other references while the
    /// datapath may place into it, until [`forget`](Self::forget) is called for it.
    pub unsafe fn lend(&mut self, addr: u64, len: u64) {
        self.insert(Region {
            addr,
            len,
            owned: false,
        });
    }

    /// Removes one lent region `[addr, addr + len)` (one registration of it; others of the same range stay).
    pub fn forget_lent(&mut self, addr: u64, len: u64) -> bool {
        let Some(i) = self
            .regions
            .iter()
            .position(|r| r.addr == addr && r.len == len && !r.owned)
        else {
            return false;
        };
        self.regions.remove(i);
        true
    }

    /// Removes the region starting at `addr` (freeing it if we allocated it).
    pub fn forget(&mut self, addr: u64) -> bool {
        let Some(i) = self
            .regions
            .iter()
            .position(|r| r.addr == addr && r.owned)
            .or_else(|| self.regions.iter().position(|r| r.addr == addr))
        else {
            return false;
        };
        let r = self.regions.remove(i);
        if r.owned {
            Self::free(&r);
        }
        true
    }

    /// The bytes of the region starting at `addr`.
    pub fn bytes(&self, addr: u64) -> Option<&[u8]> {
        let r = self.regions.iter().find(|r| r.addr == addr)?;
        // SAFETY: the region is valid for `len` bytes (allocated here or lent with that promise), and `&self`
        // excludes placement (which needs `&mut self`) while the slice lives.
        Some(unsafe { std::slice::from_raw_parts(r.addr as *const u8, r.len as usize) })
    }

    /// The bytes of the region starting at `addr`, writable.
    pub fn bytes_mut(&mut self, addr: u64) -> Option<&mut [u8]> {
        let r = self.regions.iter().find(|r| r.addr == addr)?;
        // SAFETY: as in `bytes`, and `&mut self` makes this the only access.
        Some(unsafe { std::slice::from_raw_parts_mut(r.addr as *mut u8, r.len as usize) })
    }

    fn insert(&mut self, r: Region) {
        let i = self.regions.partition_point(|x| x.addr < r.addr);
        self.regions.insert(i, r);
    }

    fn free(r: &Region) {
        let ptr = std::ptr::slice_from_raw_parts_mut(r.addr as *mut u8, r.len as usize);
        // SAFETY: owned regions come from `Box::into_raw` of exactly this slice in `alloc`, freed only here.
        drop(unsafe { Box::from_raw(ptr) });
    }

    /// Whether `[addr, addr + len)` lies inside one region.
    fn contains(&self, addr: u64, len: usize) -> bool {
        let Some(end) = addr.checked_add(len as u64) else {
            return false;
        };
        let i = self.regions.partition_point(|r| r.addr <= addr);
        // Fast path: the region starting closest below. Overlapping registrations may hide the one that holds
        // the range behind a shorter one starting later: then look at every region starting at or below.
        self.regions[..i]
            .iter()
            .rev()
            .any(|r| end <= r.addr.saturating_add(r.len))
    }
}

impl Memory for HostMemory {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        if !self.contains(addr, dst.len()) {
            self.refused += 1;
            dst.fill(0);
            return;
        }
        // SAFETY: `contains` proved the range lies inside a region valid for reads; `dst` is a distinct Rust
        // buffer, so the ranges cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(addr as *const u8, dst.as_mut_ptr(), dst.len()) };
    }

    fn write(&mut self, addr: u64, src: &[u8]) {
        if !self.contains(addr, src.len()) {
            self.refused += 1;
            return;
        }
        // SAFETY: `contains` proved the range lies inside a region valid for writes; `src` is a received
        // datagram in a distinct buffer.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr(), addr as *mut u8, src.len()) };
    }

    fn view(&self, addr: u64, len: usize) -> Option<&[u8]> {
        if !self.contains(addr, len) {
            return None;
        }
        // SAFETY: `contains` proved the range lies inside a region valid for reads; `&self` excludes placement
        // (which needs `&mut self`) while the slice lives.
        Some(unsafe { std::slice::from_raw_parts(addr as *const u8, len) })
    }
}

impl Drop for HostMemory {
    fn drop(&mut self) {
        for r in self.regions.iter().filter(|r| r.owned) {
            Self::free(r);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_inside_and_refuses_outside() {
        let mut m = HostMemory::default();
        let a = m.alloc(64);
        let b = m.alloc(16);
        m.write(a + 60, &[1, 2, 3, 4]);
        assert_eq!(&m.bytes(a).unwrap()[60..], &[1, 2, 3, 4]);
        m.write(a + 61, &[9; 4]); // one past the end
        m.write(u64::MAX - 1, &[9; 4]); // wraps
        m.write(a.wrapping_sub(1), &[9]);
        assert_eq!(m.refused, 3);
        assert_eq!(&m.bytes(a).unwrap()[60..], &[1, 2, 3, 4]);
        let mut out = [7u8; 4];
        m.read(a + 60, &mut out);
        assert_eq!(out, [1, 2, 3, 4]);
        assert_eq!(m.view(a + 60, 4), Some(&[1u8, 2, 3, 4][..]));
        assert_eq!(m.view(a + 61, 4), None);
        assert!(m.forget(b));
        m.write(b, &[1]);
        assert_eq!(m.refused, 4);
        assert_eq!(m.view(b, 1), None);
    }
}
