//! uSID containers (spec §7, F3216): an IPv6 destination address that names a path as a 32-bit block and up
//! to six 16-bit uSIDs, consumed one per uN hop.

use core::fmt;
use std::net::Ipv6Addr;

/// uSIDs that fit after the 32-bit block.
pub const MAX_USIDS: usize = 6;

const BLOCK_SHIFT: u32 = 96;
const USID_BITS: u32 = 16;
/// The 96 bits after the block, where the uSIDs live.
const LIST_MASK: u128 = (1u128 << BLOCK_SHIFT) - 1;

/// Why a uSID list cannot form a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UsidError {
    /// More than [`MAX_USIDS`] uSIDs; carries the count.
    TooMany(usize),
    /// No uSID at all: a container names at least the destination host.
    Empty,
    /// The uSID at this index is 0, which would end the list early.
    ZeroUsid(usize),
}

impl fmt::Display for UsidError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            UsidError::TooMany(n) => write!(f, "{n} uSIDs, at most {MAX_USIDS} fit a container"),
            UsidError::Empty => f.write_str("empty uSID list"),
            UsidError::ZeroUsid(i) => write!(f, "uSID {i} is zero, which ends the list"),
        }
    }
}

impl std::error::Error for UsidError {}

// spec: WIRE-USID-1
/// A uSID container: block in the top 32 bits, then the uSIDs, the active one first, then zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct UsidContainer(u128);

impl UsidContainer {
    /// The container of `block` followed by `usids` (1..=6, none zero), zero-filled.
    pub fn new(block: u32, usids: &[u16]) -> Result<Self, UsidError> {
        if usids.is_empty() {
            return Err(UsidError::Empty);
        }
        if usids.len() > MAX_USIDS {
            return Err(UsidError::TooMany(usids.len()));
        }
        let mut bits = u128::from(block) << BLOCK_SHIFT;
        let mut shift = BLOCK_SHIFT;
        for (i, &u) in usids.iter().enumerate() {
            if u == 0 {
                return Err(UsidError::ZeroUsid(i));
            }
            shift -= USID_BITS;
            bits |= u128::from(u) << shift;
        }
        Ok(Self(bits))
    }

    /// The container of 128 address bits, as found on the wire.
    pub const fn from_bits(bits: u128) -> Self {
        Self(bits)
    }

    /// The 128 address bits.
    pub const fn bits(self) -> u128 {
        self.0
    }

    /// The 32-bit block (locator).
    pub fn block(self) -> u32 {
        (self.0 >> BLOCK_SHIFT) as u32
    }

    /// The uSID right after the block, which the next uN hop matches; `None` once the list is exhausted.
    pub fn active(self) -> Option<u16> {
        match (self.0 >> (BLOCK_SHIFT - USID_BITS)) as u16 {
            0 => None,
            u => Some(u),
        }
    }

    /// The uSIDs in path order, up to the first zero.
    pub fn usids(self) -> impl Iterator<Item = u16> {
        let list = self.0 & LIST_MASK;
        (1..=MAX_USIDS as u32)
            .map(move |i| (list >> (BLOCK_SHIFT - i * USID_BITS)) as u16)
            .take_while(|&u| u != 0)
    }

    // spec: WIRE-USID-2
    /// What a uN hop does: drop the active uSID, move the rest up by 16 bits, zero-fill; the block stays.
    pub fn shift(self) -> Self {
        let block = self.0 & !LIST_MASK;
        Self(block | ((self.0 << USID_BITS) & LIST_MASK))
    }

    /// The container as an IPv6 address.
    pub fn to_ipv6(self) -> Ipv6Addr {
        Ipv6Addr::from(self.0)
    }

    /// The container an IPv6 address holds.
    pub fn from_ipv6(a: Ipv6Addr) -> Self {
        Self(u128::from(a))
    }
}

impl From<UsidContainer> for Ipv6Addr {
    fn from(c: UsidContainer) -> Self {
        c.to_ipv6()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_and_shift() {
        let c = UsidContainer::new(0xfcbb_bb00, &[0x0100, 0x0200, 0x0300]).unwrap();
        assert_eq!(
            c.to_ipv6(),
            "fcbb:bb00:100:200:300::".parse::<Ipv6Addr>().unwrap()
        );
        assert_eq!(c.block(), 0xfcbb_bb00);
        assert_eq!(c.active(), Some(0x0100));
        assert_eq!(c.usids().collect::<Vec<_>>(), [0x0100, 0x0200, 0x0300]);
        let c1 = c.shift();
        assert_eq!(
            c1.to_ipv6(),
            "fcbb:bb00:200:300::".parse::<Ipv6Addr>().unwrap()
        );
        let c3 = c1.shift().shift();
        assert_eq!(c3.active(), None);
        assert_eq!(c3.usids().count(), 0);
        assert_eq!(c3.bits(), 0xfcbb_bb00u128 << 96);
        assert_eq!(c3.shift(), c3);
        assert_eq!(UsidContainer::from_ipv6(c.to_ipv6()), c);
    }

    #[test]
    fn full_container_and_errors() {
        let c = UsidContainer::new(1, &[1, 2, 3, 4, 5, 6]).unwrap();
        assert_eq!(c.bits() & 0xFFFF, 6);
        assert_eq!(c.usids().count(), 6);
        assert_eq!(UsidContainer::new(1, &[1; 7]), Err(UsidError::TooMany(7)));
        assert_eq!(UsidContainer::new(1, &[]), Err(UsidError::Empty));
        assert_eq!(
            UsidContainer::new(1, &[1, 0, 2]),
            Err(UsidError::ZeroUsid(1))
        );
        assert!(UsidError::ZeroUsid(1).to_string().contains("uSID 1"));
    }
}
