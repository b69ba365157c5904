//! Every verbs and rdma_cm function the supported clients import is exported by the shim, except the few that
//! are safe to leave to the real libraries (named below with the reason). The clients are BIND_NOW, so a
//! missing export would silently bind to the real libibverbs and crash inside it on our objects
//! (`verbs-nccl-abi.md` §1.3); this test fails first.

mod common;

use std::collections::BTreeSet;
use std::process::Command;

/// Imports left to the real libraries, and why that is safe.
const LEFT_TO_THE_REAL_LIBRARY: [(&str, &str); 14] = [
    ("ibv_wc_status_str", "turns a status number into a string"),
    (
        "ibv_read_sysfs_file",
        "reads a sysfs path; ours do not exist, so it fails cleanly",
    ),
    (
        "rdma_ack_cm_event",
        "needs an event, which no refused session produces",
    ),
    (
        "rdma_get_cm_event",
        "needs an event channel, which rdma_create_event_channel refuses",
    ),
    ("rdma_destroy_event_channel", "needs an event channel"),
    (
        "rdma_destroy_id",
        "needs a cm id, which rdma_create_id refuses",
    ),
    ("rdma_destroy_qp", "needs a cm id"),
    ("rdma_disconnect", "needs a cm id"),
    ("rdma_establish", "needs a cm id"),
    ("rdma_init_qp_attr", "needs a cm id"),
    ("rdma_reject", "needs a cm id"),
    ("rdma_set_option", "needs a cm id"),
    ("rdma_event_str", "turns an event number into a string"),
    (
        "rdma_freeaddrinfo",
        "frees what rdma_getaddrinfo returned, which it refuses",
    ),
];

const CLIENTS: [(&str, &str); 10] = [
    ("ibv_devices", "ibverbs-utils"),
    ("ibv_devinfo", "ibverbs-utils"),
    ("ibv_rc_pingpong", "ibverbs-utils"),
    ("ib_write_bw", "perftest"),
    ("ib_write_lat", "perftest"),
    ("ib_send_bw", "perftest"),
    ("ib_send_lat", "perftest"),
    ("ib_read_bw", "perftest"),
    ("ib_read_lat", "perftest"),
    ("rping", "rdmacm-utils"),
];

/// `(defined, undefined)` dynamic symbol names of an ELF file, without version suffixes.
fn dyn_syms(path: &std::path::Path) -> (BTreeSet<String>, BTreeSet<String>) {
    let o = Command::new("readelf")
        .args(["--dyn-syms", "-W"])
        .arg(path)
        .output()
        .unwrap_or_else(|e| panic!("cannot run readelf ({e}): install binutils"));
    assert!(o.status.success(), "readelf {}", path.display());
    let mut def = BTreeSet::new();
    let mut undef = BTreeSet::new();
    for line in String::from_utf8_lossy(&o.stdout).lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 8
            || !(f[7].starts_with("ibv_") || f[7].starts_with("_ibv_") || f[7].starts_with("rdma_"))
        {
            continue;
        }
        let name = f[7].split('@').next().unwrap().to_string();
        if f[6] == "UND" {
            undef.insert(name);
        } else if f[4] == "GLOBAL" {
            def.insert(name);
        }
    }
    (def, undef)
}

#[test]
fn every_client_import_is_interposed() {
    let (ours, _) = dyn_syms(&common::shim_lib());
    let left: BTreeSet<&str> = LEFT_TO_THE_REAL_LIBRARY.iter().map(|(n, _)| *n).collect();
    let mut missing = Vec::new();
    let mut seen = 0;
    for (client, pkg) in CLIENTS {
        let (_, imports) = dyn_syms(&common::tool(client, pkg));
        for i in imports {
            seen += 1;
            if !ours.contains(&i) && !left.contains(i.as_str()) {
                missing.push(format!("{client}: {i}"));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "imports the shim does not export:\n{}",
        missing.join("\n")
    );
    assert!(seen > 200, "only {seen} imports read");
    // The list of exceptions must not hide something the shim now exports.
    for n in &left {
        assert!(
            !ours.contains(*n),
            "{n} is exported; drop it from the exceptions"
        );
    }
}
