//! The bytes that pass through `ibv_post_send` under the shim, checked by a program of our own
//! (`tests/c/bytes.c`): WRITEs of 1 byte to 2 MiB (inline ones too), each with its own bytes and place, land
//! byte-exact inside a region fenced by guard bytes; READs bring back exactly what was written. perftest never
//! checks payload, and `ibv_rc_pingpong -c` (tests/datapath.rs) looks at one byte per page only.
//! Run under `flock /tmp/mrc-net.lock` (loopback sockets).

mod common;

use std::process::Command;

#[test]
fn writes_and_reads_through_the_shim_are_byte_exact() {
    let exe = common::compile_c("bytes.c", &["-libverbs"]);
    let o = common::preload(&mut Command::new(&exe), &[("MRC_SHIM_PLANES", "4")]);
    let (out, err) = common::text(&o);
    println!("{out}");
    assert!(
        o.status.code() == Some(0),
        "bytes.c exited with {:?}:\n{out}\n{err}",
        o.status
    );
    for check in [
        "ok connect",
        "ok writes_complete",
        "ok write_bytes_exact",
        "ok write_guards",
        "ok reads_complete",
        "ok read_bytes_exact",
        "ok read_guards",
        "ok read_slice",
        "0 failures",
    ] {
        assert!(out.contains(check), "no {check:?} in:\n{out}");
    }
}
