//! The stateful target: two connected endpoints driven by fuzzer-chosen datagrams (real ones delivered, dropped,
//! duplicated, reordered, mutated or trimmed, and forged ones of every kind), posts, registrations, port and
//! path changes, and time. See `mrc_fuzz` (fuzz/src/lib.rs) for what it asserts.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: mrc_fuzz::Input| {
    mrc_fuzz::run(&input);
});
