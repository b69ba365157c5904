//! Unmodified rdma-core and perftest binaries under `LD_PRELOAD`: `ibv_devices` and `ibv_devinfo -v` list the
//! virtual device with an ACTIVE Ethernet port and GID 0 = the node's address; configuration errors name the
//! variable; rdma_cm users (perftest `-R`, rping) fail with a log line naming the refused call, not a crash.

mod common;

use std::os::unix::process::ExitStatusExt;
use std::process::{Command, Output};

use common::{preload, text, tool};

fn run(name: &str, pkg: &str, args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut c = Command::new("timeout");
    c.arg("30").arg(tool(name, pkg)).args(args);
    preload(&mut c, env)
}

#[test]
fn ibv_devices_lists_the_device() {
    let o = run("ibv_devices", "ibverbs-utils", &[], &[]);
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let line = out
        .lines()
        .find(|l| l.trim_start().starts_with("mrc0"))
        .unwrap_or_else(|| panic!("no mrc0 in:\n{out}"));
    // A 16-digit node GUID, locally administered (02…).
    let guid = line.split_whitespace().nth(1).unwrap();
    assert!(guid.len() == 16 && guid.starts_with("02"), "{line}");
}

#[test]
fn ibv_devinfo_shows_an_active_roce_port() {
    let o = run(
        "ibv_devinfo",
        "ibverbs-utils",
        &["-v"],
        &[("MRC_SHIM_PLANES", "2")],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    let squeezed: String = out.split_whitespace().collect::<Vec<_>>().join(" ");
    for want in [
        "hca_id: mrc0",
        "phys_port_cnt: 1",
        "state: PORT_ACTIVE (4)",
        "link_layer: Ethernet",
        "phys_state: LINK_UP (5)",
        "active_mtu: 4096 (5)",
        // A loopback node: its port folded into an IPv4-mapped GID (README "Addressing").
        "GID[ 0]: ::ffff:127.0.",
        "max_qp_rd_atom: 16",
        "atomic_cap: ATOMIC_NONE (0)",
    ] {
        assert!(squeezed.contains(want), "no {want:?} in:\n{out}");
    }
}

#[test]
fn one_device_per_node_file_and_config_errors_name_the_variable() {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"));
    let mut files = Vec::new();
    for i in 0..2 {
        let f = dir.join(format!("tools-node{i}.toml"));
        std::fs::write(
            &f,
            "[[plane]]\naddr = \"::1\"\nport = 0\n[[plane]]\naddr = \"::1\"\nport = 0\n",
        )
        .unwrap();
        files.push(f.display().to_string());
    }
    let nodes = files.join(",");
    let o = run(
        "ibv_devinfo",
        "ibverbs-utils",
        &[],
        &[("MRC_SHIM_NODE", &nodes)],
    );
    let (out, err) = text(&o);
    assert!(o.status.success(), "{out}{err}");
    assert!(
        out.contains("hca_id:\tmrc0") && out.contains("hca_id:\tmrc1"),
        "{out}"
    );

    let o = run(
        "ibv_devices",
        "ibverbs-utils",
        &[],
        &[("MRC_SHIM_PLANES", "99")],
    );
    let (out, err) = text(&o);
    assert!(
        !out.contains("mrc0"),
        "a misconfigured shim presented a device:\n{out}"
    );
    assert!(
        err.contains("MRC_SHIM_PLANES=\"99\": use a number of loopback planes in 1..=16"),
        "{err}"
    );

    let o = run(
        "ibv_devices",
        "ibverbs-utils",
        &[],
        &[("MRC_SHIM_NODE", "/nonexistent/h0.toml")],
    );
    let (_, err) = text(&o);
    assert!(
        err.contains("MRC_SHIM_NODE: node file /nonexistent/h0.toml"),
        "{err}"
    );
}

#[test]
fn rdma_cm_users_fail_with_a_line_naming_the_call() {
    for (name, pkg, args) in [
        ("ib_write_bw", "perftest", &["-R", "-d", "mrc0"][..]),
        (
            "ib_send_lat",
            "perftest",
            &["-R", "-d", "mrc0", "127.0.0.1"][..],
        ),
        ("rping", "rdmacm-utils", &["-s", "-a", "127.0.0.1"][..]),
    ] {
        let o = run(name, pkg, args, &[]);
        let (out, err) = text(&o);
        assert!(
            o.status.signal().is_none(),
            "{name} crashed: {:?}\n{out}{err}",
            o.status
        );
        assert!(
            !o.status.success(),
            "{name} succeeded without rdma_cm?\n{out}{err}"
        );
        assert_ne!(o.status.code(), Some(124), "{name} hung");
        assert!(
            err.contains(
                "rdma_create_event_channel: rdma_cm (the RDMA connection manager) is not supported"
            ),
            "{name}: {err}"
        );
    }
}
