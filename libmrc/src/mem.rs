//! Registered memory: protection domains, memory regions and their keys, and the [`Memory`] trait through
//! which the engine touches bytes.
//!
//! The engine never dereferences an address. It checks every access against the region table (key, protection
//! domain, bounds, access rights) and only then asks the driver's [`Memory`] to copy. That keeps the core free
//! of `unsafe` and lets the simulator run without storing payload at all.

use core::fmt;

/// Access rights of a memory region (the verbs `IBV_ACCESS_*` bit values).
#[derive(Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct Access(u32);

impl Access {
    /// No rights beyond being a send source.
    pub const NONE: Self = Self(0);
    /// The local QP may write here (receive buffers, READ targets).
    pub const LOCAL_WRITE: Self = Self(1);
    /// A peer may WRITE here.
    pub const REMOTE_WRITE: Self = Self(2);
    /// A peer may READ from here.
    pub const REMOTE_READ: Self = Self(4);
    /// Atomics: accepted at registration for compatibility, never granted on the wire (MRC has no atomics).
    pub const REMOTE_ATOMIC: Self = Self(8);
    /// Every bit this engine understands; other bits (e.g. relaxed ordering) are ignored.
    const KNOWN: u32 = 0xF;

    /// From verbs access flags; unknown bits (relaxed ordering, optional ranges) are dropped.
    pub const fn from_bits(bits: u32) -> Self {
        Self(bits & Self::KNOWN)
    }
    /// The verbs bit value.
    pub const fn bits(self) -> u32 {
        self.0
    }
    /// Whether every right in `other` is present.
    pub const fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
    /// Both sets of rights.
    pub const fn union(self, other: Self) -> Self {
        Self(self.0 | other.0)
    }
}

impl core::ops::BitOr for Access {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        self.union(rhs)
    }
}

impl fmt::Debug for Access {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let names = [
            (Self::LOCAL_WRITE, "LOCAL_WRITE"),
            (Self::REMOTE_WRITE, "REMOTE_WRITE"),
            (Self::REMOTE_READ, "REMOTE_READ"),
            (Self::REMOTE_ATOMIC, "REMOTE_ATOMIC"),
        ];
        let mut first = true;
        write!(f, "Access(")?;
        for (flag, name) in names {
            if self.contains(flag) {
                if !first {
                    write!(f, "|")?;
                }
                write!(f, "{name}")?;
                first = false;
            }
        }
        write!(f, ")")
    }
}

/// A protection domain: a QP may only touch regions of its own domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pd(pub(crate) u32);

impl Pd {
    /// The domain's number (for handles in C front ends).
    pub const fn id(self) -> u32 {
        self.0
    }
}

/// The keys of a registered region. `lkey == rkey`, as on most RDMA NICs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MrKeys {
    /// Key for local work requests.
    pub lkey: u32,
    /// Key a peer puts in RETH.R_Key.
    pub rkey: u32,
}

/// Why an access was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum AccessError {
    /// No live region has this key (never registered, deregistered, or a stale generation).
    BadKey,
    /// The region belongs to another protection domain.
    WrongPd,
    /// The range leaves the region (or overflows the address space).
    OutOfBounds,
    /// The region lacks the needed right.
    NotPermitted,
    /// Registration refused: the endpoint already holds [`MAX_REGIONS`] regions.
    TooManyRegions,
}

impl AccessError {
    /// The `errno` a C API returns: `EINVAL` for a bad key or domain, `EFAULT` out of bounds, `EACCES` for a
    /// missing right, `ENOMEM` when the region table is full.
    pub const fn errno(&self) -> i32 {
        use crate::error::errno;
        match self {
            Self::BadKey | Self::WrongPd => errno::EINVAL,
            Self::OutOfBounds => errno::EFAULT,
            Self::NotPermitted => errno::EACCES,
            Self::TooManyRegions => errno::ENOMEM,
        }
    }
}

impl fmt::Display for AccessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::BadKey => "no registered region has this key",
            Self::WrongPd => "the region belongs to another protection domain",
            Self::OutOfBounds => "the range is outside the registered region",
            Self::NotPermitted => "the region was not registered with the needed access right",
            Self::TooManyRegions => "the endpoint holds the most regions it can",
        })
    }
}

impl std::error::Error for AccessError {}

#[derive(Debug, Clone, Copy)]
struct Region {
    pd: Pd,
    addr: u64,
    len: u64,
    access: Access,
}

/// The table of registered regions of one endpoint.
///
/// A key is `slot << 8 | generation`; deregistering bumps the generation so a stale key never matches a region
/// registered later in the same slot.
#[derive(Debug, Default)]
pub(crate) struct MrTable {
    slots: Vec<(u8, Option<Region>)>,
    free: Vec<u32>,
}

/// Most regions one endpoint may hold (24 bits of slot in a 32-bit key).
pub const MAX_REGIONS: usize = 1 << 24;

impl MrTable {
    /// Registers `[addr, addr + len)` in domain `pd`.
    pub(crate) fn register(
        &mut self,
        pd: Pd,
        addr: u64,
        len: u64,
        access: Access,
    ) -> Result<MrKeys, AccessError> {
        if addr.checked_add(len).is_none() {
            return Err(AccessError::OutOfBounds);
        }
        let region = Region {
            pd,
            addr,
            len,
            access,
        };
        let slot = match self.free.pop() {
            Some(s) => s,
            None => {
                if self.slots.len() >= MAX_REGIONS {
                    return Err(AccessError::TooManyRegions);
                }
                self.slots.push((0, None));
                (self.slots.len() - 1) as u32
            }
        };
        let entry = &mut self.slots[slot as usize];
        entry.1 = Some(region);
        let key = (slot << 8) | u32::from(entry.0);
        Ok(MrKeys {
            lkey: key,
            rkey: key,
        })
    }

    /// Removes the region with this key.
    pub(crate) fn deregister(&mut self, key: u32) -> Result<(), AccessError> {
        let slot = key >> 8;
        let gen_ = key as u8;
        match self.slots.get_mut(slot as usize) {
            Some((g, region @ Some(_))) if *g == gen_ => {
                *region = None;
                *g = g.wrapping_add(1);
                self.free.push(slot);
                Ok(())
            }
            _ => Err(AccessError::BadKey),
        }
    }

    /// Checks that `[addr, addr + len)` lies in the region of `key`, in domain `pd`, with rights `need`.
    ///
    /// A zero-length access still needs a valid key and an address inside (or at the end of) the region.
    // spec: QP-PLACE-1
    #[inline]
    pub(crate) fn check(
        &self,
        key: u32,
        pd: Pd,
        addr: u64,
        len: u64,
        need: Access,
    ) -> Result<(), AccessError> {
        let slot = key >> 8;
        let gen_ = key as u8;
        let region = match self.slots.get(slot as usize) {
            Some((g, Some(r))) if *g == gen_ => r,
            _ => return Err(AccessError::BadKey),
        };
        if region.pd != pd {
            return Err(AccessError::WrongPd);
        }
        let end = addr.checked_add(len).ok_or(AccessError::OutOfBounds)?;
        if addr < region.addr || end > region.addr + region.len {
            return Err(AccessError::OutOfBounds);
        }
        if !region.access.contains(need) {
            return Err(AccessError::NotPermitted);
        }
        Ok(())
    }

    /// Number of live regions.
    pub(crate) fn len(&self) -> usize {
        self.slots.len() - self.free.len()
    }
}

/// The driver's memory: where payload comes from and where it is placed.
///
/// The engine calls these only for ranges it has checked against a registered region, so an implementation
/// over real process memory is sound as long as registered regions stay mapped while registered.
pub trait Memory {
    /// Copies `dst.len()` bytes starting at `addr` into `dst` (gathering a send's payload).
    fn read(&mut self, addr: u64, dst: &mut [u8]);
    /// Copies `src` to `addr` (placing received payload).
    fn write(&mut self, addr: u64, src: &[u8]);
    /// The `len` bytes at `addr`, lent in place: memory that can do this lets the engine leave a data packet's
    /// payload out of the packet buffer (zero-copy send; [`Transmit::payload`](crate::Transmit::payload) says
    /// where it is), so the payload is copied once, by the driver's send call. `None`, the default: the engine
    /// copies it with [`read`](Self::read).
    fn view(&self, _addr: u64, _len: usize) -> Option<&[u8]> {
        None
    }
}

/// Memory that stores nothing: reads give zeros, writes vanish. For benchmarks of the protocol cost alone and for
/// simulations that do not check payload.
#[derive(Debug, Default, Clone, Copy)]
pub struct NullMemory;

impl Memory for NullMemory {
    fn read(&mut self, _addr: u64, dst: &mut [u8]) {
        dst.fill(0);
    }
    fn write(&mut self, _addr: u64, _src: &[u8]) {}
}

/// A scatter/gather element: `len` bytes at `addr` in the region of `lkey`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sge {
    /// Start address.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Local key of the region holding it.
    pub lkey: u32,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_check_pd_bounds_access_and_generation() {
        let mut t = MrTable::default();
        let pd = Pd(1);
        let k = t.register(pd, 1000, 100, Access::REMOTE_WRITE).unwrap();
        assert_eq!(t.check(k.rkey, pd, 1000, 100, Access::REMOTE_WRITE), Ok(()));
        assert_eq!(t.check(k.rkey, pd, 1100, 0, Access::REMOTE_WRITE), Ok(()));
        assert_eq!(
            t.check(k.rkey, pd, 999, 1, Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(k.rkey, pd, 1050, 51, Access::REMOTE_WRITE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(k.rkey, pd, u64::MAX, 2, Access::NONE),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            t.check(k.rkey, Pd(2), 1000, 1, Access::NONE),
            Err(AccessError::WrongPd)
        );
        assert_eq!(
            t.check(k.rkey, pd, 1000, 1, Access::REMOTE_READ),
            Err(AccessError::NotPermitted)
        );
        assert_eq!(
            t.check(k.rkey ^ 0x100, pd, 1000, 1, Access::NONE),
            Err(AccessError::BadKey)
        );
        t.deregister(k.lkey).unwrap();
        assert_eq!(t.deregister(k.lkey), Err(AccessError::BadKey));
        let k2 = t.register(pd, 1000, 100, Access::REMOTE_WRITE).unwrap();
        assert_ne!(k2.rkey, k.rkey, "a reused slot gets a new generation");
        assert_eq!(
            t.check(k.rkey, pd, 1000, 1, Access::NONE),
            Err(AccessError::BadKey)
        );
        assert!(t.register(pd, u64::MAX, 2, Access::NONE).is_err());
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn access_ignores_unknown_bits() {
        let a = Access::from_bits(0x100000 | 2 | 1);
        assert!(a.contains(Access::REMOTE_WRITE | Access::LOCAL_WRITE));
        assert_eq!(a.bits(), 3);
        assert_eq!(format!("{a:?}"), "Access(LOCAL_WRITE|REMOTE_WRITE)");
    }
}
