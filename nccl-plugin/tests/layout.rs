//! The hand-written ABI types (`src/abi/`) against two references:
//! - the sizes and offsets measured with NCCL's own headers (`shared/design/verbs-nccl-abi.md` §4.2, copied
//!   here as numbers, since NCCL's headers are not available at test time);
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

/// The numbers measured with NCCL's headers (verbs-nccl-abi.md §4.2; x86_64).
#[test]
fn layouts_match_the_values_measured_with_nccls_headers() {
    let t = table();
    let off = |c: &str, f: &str| {
        find(&t, c)
            .1
            .iter()
            .find(|(n, _)| *n == f)
            .unwrap_or_else(|| panic!("{c}.{f}"))
            .1
    };
    // v8: 64 bytes; name, pciPath, guid, ptrSupport, regIsGlobal at 0, 8, 16, 24, 28; speed, port, latency at
    // 32, 36, 40; maxComms..netDeviceVersion at 44..56.
    assert_eq!(find(&t, "mrc_props_v8_t").0, 64);
    let v8 = [
        ("name", 0),
        ("pciPath", 8),
        ("guid", 16),
        ("ptrSupport", 24),
        ("regIsGlobal", 28),
        ("speed", 32),
        ("port", 36),
        ("latency", 40),
        ("maxComms", 44),
        ("maxRecvs", 48),
        ("netDeviceType", 52),
        ("netDeviceVersion", 56),
    ];
    for (f, o) in v8 {
        assert_eq!(off("mrc_props_v8_t", f), o, "v8 {f}");
    }
    // v9/v10 (104) and v11 (112): forceFlush 32; speed, port, latency 36, 40, 44; maxComms..netDeviceVersion
    // 48..60; vProps (20 bytes) 64; maxP2pBytes, maxCollBytes 88, 96; v11 maxMultiRequestSize 104.
    assert_eq!(find(&t, "mrc_props_v9_t").0, 104);
    assert_eq!(find(&t, "mrc_props_v11_t").0, 112);
    assert_eq!(find(&t, "mrc_vdev_v9_t").0, 20);
    for c in ["mrc_props_v9_t", "mrc_props_v11_t", "mrc_props_v12_t"] {
        let later = [
            ("name", 0),
            ("pciPath", 8),
            ("guid", 16),
            ("ptrSupport", 24),
            ("regIsGlobal", 28),
            ("forceFlush", 32),
            ("speed", 36),
            ("port", 40),
            ("latency", 44),
            ("maxComms", 48),
            ("maxRecvs", 52),
            ("netDeviceType", 56),
            ("netDeviceVersion", 60),
            ("vProps", 64),
        ];
        for (f, o) in later {
            assert_eq!(off(c, f), o, "{c} {f}");
        }
    }
    for c in ["mrc_props_v9_t", "mrc_props_v11_t"] {
        assert_eq!(off(c, "maxP2pBytes"), 88, "{c}");
        assert_eq!(off(c, "maxCollBytes"), 96, "{c}");
    }
    assert_eq!(off("mrc_props_v11_t", "maxMultiRequestSize"), 104);
    // v12 widens devs to 8 (36-byte vProps) and appends two int16 ids.
    assert_eq!(find(&t, "mrc_vdev_v12_t").0, 36);
    assert_eq!(off("mrc_props_v12_t", "maxP2pBytes"), 104);
    assert_eq!(off("mrc_props_v12_t", "railId"), 124);
    assert_eq!(off("mrc_props_v12_t", "planeId"), 126);
    assert_eq!(find(&t, "mrc_props_v12_t").0, 128);
    // Function tables, counting the name: v8 19 slots, v9/v10 20, v11 22 (v12 the same).
    assert_eq!(find(&t, "mrc_net_v8_t").0, 19 * 8);
    assert_eq!(find(&t, "mrc_net_v9_t").0, 20 * 8);
    assert_eq!(find(&t, "mrc_net_v10_t").0, 20 * 8);
    assert_eq!(find(&t, "mrc_net_v11_t").0, 22 * 8);
    assert_eq!(find(&t, "mrc_net_v12_t").0, 22 * 8);
    assert_eq!(find(&t, "mrc_comm_config_t").0, 4);
    assert_eq!(find(&t, "mrc_net_attr_t").0, 44);
    // The slot order after the name is the same in every version.
    for c in [
        "mrc_net_v8_t",
        "mrc_net_v9_t",
        "mrc_net_v10_t",
        "mrc_net_v11_t",
        "mrc_net_v12_t",
    ] {
        for (i, f) in [
            "name",
            "init",
            "devices",
            "getProperties",
            "listen",
            "connect",
            "accept",
            "regMr",
        ]
        .iter()
        .enumerate()
        {
            assert_eq!(off(c, f), i * 8, "{c} {f}");
        }
        assert_eq!(off(c, "irecvConsumed"), 18 * 8, "{c}");
    }
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
