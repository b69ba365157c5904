//! The hand-written ABI types (`src/abi/`) against two references:
//! - the sizes and offsets measured with NCCL's own headers: `tests/nccl_headers.txt`, the recorded output of
//!   `tests/c/nccl_headers_probe.c` compiled against a named NCCL release (NCCL's headers are not available at
//!   test time; the probe measures them again wherever they are);
//! - `include/nccl_net_mrc.h`, the C rendering of the same ABI, compiled into a probe that prints every size
//!   and offset the Rust side is checked with (so neither side can drift alone).

use std::mem::{offset_of, size_of};
use std::process::Command;

use nccl_net_mrc::abi::{v8, v9, v10, v11, v12, *};

/// (Rust field, C field, Rust offset).
type Fields = Vec<(&'static str, &'static str, usize)>;

macro_rules! fields {
    ($t:ty { $($r:ident => $c:literal),* $(,)? }) => {
        <Fields>::from([$((stringify!($r), $c, offset_of!($t, $r))),*])
    };
}

struct Struct {
    c: &'static str,
    size: usize,
    fields: Fields,
}

/// The slots every function table has, plus `extra`.
macro_rules! slots {
    ($t:ty $(, $r:ident => $c:literal)*) => {{
        let mut f = fields!($t {
            name => "name", init => "init", devices => "devices", getProperties => "get_properties",
            listen => "listen", connect => "connect", accept => "accept", regMr => "reg_mr",
            regMrDmaBuf => "reg_mr_dmabuf", deregMr => "dereg_mr", isend => "isend", irecv => "irecv",
            iflush => "iflush", test => "test", closeSend => "close_send", closeRecv => "close_recv",
            closeListen => "close_listen", getDeviceMr => "get_device_mr", irecvConsumed => "irecv_consumed",
        });
        f.extend(fields!($t { $($r => $c),* }));
        f
    }};
}

/// The fields every properties struct has, plus `extra`.
macro_rules! props {
    ($t:ty $(, $r:ident => $c:literal)*) => {{
        let mut f = fields!($t {
            name => "name", pciPath => "pci_path", guid => "guid", ptrSupport => "ptr_support",
            regIsGlobal => "reg_is_global", speed => "speed", port => "port", latency => "latency",
            maxComms => "max_comms", maxRecvs => "max_recvs", netDeviceType => "device_type",
            netDeviceVersion => "device_version",
        });
        f.extend(fields!($t { $($r => $c),* }));
        f
    }};
}

fn table() -> Vec<Struct> {
    macro_rules! s {
        ($c:literal, $t:ty, $f:expr) => {
            Struct {
                c: $c,
                size: size_of::<$t>(),
                fields: $f,
            }
        };
    }
    vec![
        s!(
            "mrc_props_v8_t",
            v8::ncclNetProperties_v8_t,
            props!(v8::ncclNetProperties_v8_t)
        ),
        s!(
            "mrc_props_v9_t",
            v9::ncclNetProperties_v9_t,
            props!(v9::ncclNetProperties_v9_t, forceFlush => "force_flush", vProps => "vprops",
                maxP2pBytes => "max_p2p_bytes", maxCollBytes => "max_coll_bytes")
        ),
        s!(
            "mrc_props_v11_t",
            v11::ncclNetProperties_v11_t,
            props!(v11::ncclNetProperties_v11_t, forceFlush => "force_flush", vProps => "vprops",
                maxP2pBytes => "max_p2p_bytes", maxCollBytes => "max_coll_bytes",
                maxMultiRequestSize => "max_multi_request")
        ),
        s!(
            "mrc_props_v12_t",
            v12::ncclNetProperties_v12_t,
            props!(v12::ncclNetProperties_v12_t, forceFlush => "force_flush", vProps => "vprops",
                maxP2pBytes => "max_p2p_bytes", maxCollBytes => "max_coll_bytes",
                maxMultiRequestSize => "max_multi_request", railId => "rail_id", planeId => "plane_id")
        ),
        s!(
            "mrc_comm_config_t",
            ncclNetCommConfig_t,
            fields!(ncclNetCommConfig_t { trafficClass => "traffic_class" })
        ),
        s!(
            "mrc_vdev_v9_t",
            ncclNetVDeviceProps_v9_t,
            fields!(ncclNetVDeviceProps_v9_t { ndevs => "ndevs", devs => "devs" })
        ),
        s!(
            "mrc_vdev_v12_t",
            ncclNetVDeviceProps_v12_t,
            fields!(ncclNetVDeviceProps_v12_t { ndevs => "ndevs", devs => "devs" })
        ),
        s!(
            "mrc_net_attr_t",
            ncclNetAttr_v11_t,
            fields!(ncclNetAttr_v11_t {
                sendCommAttr => "send", recvCommAttr => "recv", op => "op", algo => "algo", proto => "proto",
            })
        ),
        s!("mrc_net_v8_t", v8::ncclNet_v8_t, slots!(v8::ncclNet_v8_t)),
        s!(
            "mrc_net_v9_t",
            v9::ncclNet_v9_t,
            slots!(v9::ncclNet_v9_t, makeVDevice => "make_vdevice")
        ),
        s!(
            "mrc_net_v10_t",
            v10::ncclNet_v10_t,
            slots!(v10::ncclNet_v10_t, makeVDevice => "make_vdevice")
        ),
        s!(
            "mrc_net_v11_t",
            v11::ncclNet_v11_t,
            slots!(v11::ncclNet_v11_t, makeVDevice => "make_vdevice", finalize => "finalize",
                setNetAttr => "set_net_attr")
        ),
        s!(
            "mrc_net_v12_t",
            v12::ncclNet_v12_t,
            slots!(v12::ncclNet_v12_t, makeVDevice => "make_vdevice", finalize => "finalize",
                setNetAttr => "set_net_attr")
        ),
    ]
}

fn find(t: &[Struct], c: &str) -> (usize, Vec<(&'static str, usize)>) {
    let s = t.iter().find(|s| s.c == c).expect("struct in table");
    (s.size, s.fields.iter().map(|f| (f.0, f.2)).collect())
}

/// The Rust type (by its C name in `include/nccl_net_mrc.h`) that mirrors an NCCL type.
fn ours(nccl: &str) -> &'static str {
    match nccl {
        "ncclNetProperties_v8_t" => "mrc_props_v8_t",
        "ncclNetProperties_v9_t" | "ncclNetProperties_v10_t" => "mrc_props_v9_t",
        "ncclNetProperties_v11_t" => "mrc_props_v11_t",
        "ncclNetProperties_v12_t" => "mrc_props_v12_t",
        "ncclNetVDeviceProps_v9_t" => "mrc_vdev_v9_t",
        "ncclNetVDeviceProps_v12_t" => "mrc_vdev_v12_t",
        "ncclNetCommConfig_v10_t" => "mrc_comm_config_t",
        "ncclNetAttr_v11_t" => "mrc_net_attr_t",
        "ncclNet_v8_t" => "mrc_net_v8_t",
        "ncclNet_v9_t" => "mrc_net_v9_t",
        "ncclNet_v10_t" => "mrc_net_v10_t",
        "ncclNet_v11_t" => "mrc_net_v11_t",
        "ncclNet_v12_t" => "mrc_net_v12_t",
        _ => panic!("tests/nccl_headers.txt names {nccl}, which no Rust type mirrors"),
    }
}

/// Every size and offset in `tests/nccl_headers.txt` (what `tests/c/nccl_headers_probe.c` printed when compiled
/// against NCCL's own headers; the file says which release) equals the Rust type's.
#[test]
fn layouts_match_the_values_measured_with_nccls_headers() {
    let t = table();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/nccl_headers.txt");
    let text = std::fs::read_to_string(path).unwrap();
    let mut checked = 0;
    for line in text
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let (key, value) = line
            .rsplit_once(' ')
            .unwrap_or_else(|| panic!("{path}: {line:?}"));
        let value: usize = value.parse().unwrap_or_else(|_| panic!("{path}: {line:?}"));
        if let Some(nccl) = key.strip_suffix(" size") {
            assert_eq!(find(&t, ours(nccl)).0, value, "sizeof {nccl}");
        } else {
            let (nccl, field) = key
                .split_once('.')
                .unwrap_or_else(|| panic!("{path}: {line:?}"));
            let off = find(&t, ours(nccl))
                .1
                .into_iter()
                .find(|(n, _)| *n == field)
                .unwrap_or_else(|| panic!("{nccl}.{field}: no such field in {}", ours(nccl)))
                .1;
            assert_eq!(off, value, "offset of {nccl}.{field}");
        }
        checked += 1;
    }
    assert!(checked >= 190, "only {checked} sizes and offsets in {path}");
}

/// Every size and offset of the Rust types equals what C computes for `include/nccl_net_mrc.h`.
#[test]
fn layouts_match_the_committed_c_header() {
    let t = table();
    let dir = std::env::temp_dir().join(format!("mrc-nccl-layout-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut c = String::from(
        "#include <stdio.h>\n#include <stddef.h>\n#include \"nccl_net_mrc.h\"\nint main(void){\n",
    );
    for s in &t {
        c += &format!("printf(\"{0} size %zu\\n\", sizeof({0}));\n", s.c);
        for (_, cf, _) in &s.fields {
            c += &format!("printf(\"{0} {1} %zu\\n\", offsetof({0}, {1}));\n", s.c, cf);
        }
    }
    c += "return 0;}\n";
    let src = dir.join("probe.c");
    std::fs::write(&src, c).unwrap();
    let exe = dir.join("probe");
    let include = concat!(env!("CARGO_MANIFEST_DIR"), "/include");
    let cc = std::env::var("CC").unwrap_or_else(|_| "cc".into());
    let out = Command::new(&cc)
        .args(["-std=c11", "-Wall", "-Werror", "-I", include, "-o"])
        .arg(&exe)
        .arg(&src)
        .output()
        .unwrap_or_else(|e| panic!("run {cc} (a C compiler is needed for this test): {e}"));
    assert!(
        out.status.success(),
        "compile probe: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = Command::new(&exe).output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    let got = |key: &str| -> usize {
        text.lines()
            .find_map(|l| l.strip_prefix(key).and_then(|r| r.strip_prefix(' ')))
            .unwrap_or_else(|| panic!("probe printed no {key}"))
            .trim()
            .parse()
            .unwrap()
    };
    let mut checked = 0;
    for s in &t {
        assert_eq!(got(&format!("{} size", s.c)), s.size, "sizeof {}", s.c);
        for (rf, cf, off) in &s.fields {
            assert_eq!(
                got(&format!("{} {}", s.c, cf)),
                *off,
                "{}.{cf} (Rust {rf})",
                s.c
            );
            checked += 1;
        }
    }
    assert!(checked > 150, "only {checked} fields compared");
    let _ = std::fs::remove_dir_all(&dir);
}
