//! Load-to-use latency of this machine's memory by working-set size: a pointer chase over one random cycle
//! through a buffer of 64-byte lines, so that each load depends on the last and no prefetcher can guess the
//! next. sim/README.md ("Speed and scale") uses it to tell why CPU per event grows with the fabric: the same
//! misses per event cost more once the state a window sweeps outgrows the nearer caches.
//!
//!     cargo run --release -p mrc-sim --example mem_latency [MIB...]
//!
//! Default sizes 1, 4, 16, 64, 256 MiB; the heap is whatever the allocator gives (4 KiB pages here, unlike
//! `mrc-sim`'s 2 MiB ones), so the larger sizes include TLB misses.

use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::time::Instant;

const LINE: usize = 8; // u64s per 64-byte line

fn main() {
    let sizes: Vec<usize> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let sizes = if sizes.is_empty() {
        vec![1, 4, 16, 64, 256]
    } else {
        sizes
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(1);
    for mib in sizes {
        let lines = (mib << 20) / 64;
        // One cycle through every line, in random order.
        let mut order: Vec<usize> = (0..lines).collect();
        for i in (1..lines).rev() {
            let j = (rng.next_u64() % (i as u64 + 1)) as usize;
            order.swap(i, j);
        }
        let mut next = vec![0u64; lines * LINE];
        for k in 0..lines {
            next[order[k] * LINE] = (order[(k + 1) % lines] * LINE) as u64;
        }
        let mut p = 0usize;
        for _ in 0..lines {
            p = next[p] as usize;
        }
        let loads = 20_000_000;
        let t = Instant::now();
        for _ in 0..loads {
            p = next[p] as usize;
        }
        let ns = t.elapsed().as_nanos() as f64 / f64::from(loads);
        println!("{mib:>6} MiB  {ns:6.1} ns per dependent load  ({})", p & 1);
    }
}
