//! Cache prefetch hints: the simulator knows which state the next events read (its queue says), and at
//! thousands of hosts that state is a miss per read unless fetched ahead.

/// Starts fetching the first line of `v[i]` (nothing when `i` is out of range): an arrival or an end of
/// serialization reads its port and then its packet, misses in a row at 8K hosts unless fetched ahead.
#[inline]
pub(crate) fn prefetch<T>(v: &[T], i: usize) {
    prefetch_line(v, i, 0);
}

/// Starts fetching cache line `k` of `v[i]` (nothing when `i` is out of range).
#[inline]
pub(crate) fn prefetch_line<T>(v: &[T], i: usize, k: usize) {
    if let Some(p) = v.get(i) {
        line((p as *const T).cast::<u8>().wrapping_add(64 * k));
    }
}

/// Starts fetching the line at `p` for writing (x86 `prefetchw`): a store to a line not in cache waits for it,
/// and enough such stores in a row fill the store buffer.
#[inline(always)]
pub(crate) fn line_for_write<T>(p: *const T) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: as in `line`: a hint, never a fault; `prefetchw` runs as a no-op where the CPU lacks it.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_ET0 }>(p.cast::<i8>());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}

#[inline(always)]
fn line(p: *const u8) {
    #[cfg(target_arch = "x86_64")]
    // SAFETY: a prefetch is only a hint to the cache: it reads nothing into the program and never faults, at any
    // address; `_mm_prefetch` needs SSE, which every x86_64 CPU has.
    unsafe {
        core::arch::x86_64::_mm_prefetch::<{ core::arch::x86_64::_MM_HINT_T0 }>(p.cast());
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = p;
}
