//! The `host` target: two whole hosts, linked and writing to each other, under an off-path attacker's
//! fuzzer-chosen datagrams (`mrc_fuzz::host`, fuzz/src/host.rs): no panic, no link closed, no QP failed, every
//! WRITE complete and byte-exact.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: mrc_fuzz::host::Input| {
    mrc_fuzz::host::run(&input);
});
