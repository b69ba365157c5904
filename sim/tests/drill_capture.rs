//! Issue 26: flows.csv's per-flow drill-down adds up to the run's own totals and points at the failed plane;
//! a capture at a host and a link holds what crossed them in the window, with simulated timestamps, and
//! changes nothing in the run (same report with and without it, the same bytes twice).

mod common;

use std::path::Path;

use mrc_sim::capture::CaptureSpec;
use mrc_sim::scenario::{LinkRef, LinkTier};
use mrc_sim::{Scenario, run_scenario_captured};
use pcap_file::pcapng::blocks::interface_description::InterfaceDescriptionOption;
use pcap_file::pcapng::{Block, PcapNgReader};

/// plane-return-8host: 8 hosts, 8 planes; plane 3's T0-T1 links are silently down from 5 to 25 us.
/// plane-failure: 32 hosts, 8 planes; plane 3 silently down from 50 to 150 us of a ~300 us job.
fn scenario(name: &str) -> Scenario {
    let path = format!("{}/scenarios/{name}.toml", env!("CARGO_MANIFEST_DIR"));
    let mut s = Scenario::load(path.as_ref()).expect("scenario loads");
    s.run.baseline = false;
    s
}

#[test]
fn flows_csv_drill_down_adds_up_and_shows_the_failed_plane() {
    let s = scenario("plane-failure");
    let r = run_scenario_captured(&s, false, None, &mut |_, _| true).expect("runs");
    let tmp = common::scratch("drill");
    let dir = tmp.path();
    r.write(dir).unwrap();
    let text = std::fs::read_to_string(dir.join("flows.csv")).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| {
        header
            .iter()
            .position(|h| *h == name)
            .unwrap_or_else(|| panic!("no {name}"))
    };
    let rows: Vec<Vec<u64>> = lines
        .map(|l| {
            l.split(',')
                .map(|x| x.parse::<f64>().unwrap() as u64)
                .collect()
        })
        .collect();
    assert_eq!(rows.len(), r.run.times_us.len(), "a row per transfer");
    let sum = |name: &str| rows.iter().map(|r| r[col(name)]).sum::<u64>();
    let c = &r.run.counters;
    // One transfer per QP pair in a permutation: the columns add up to the run's totals.
    assert!(rows.iter().all(|r| r[col("qp_transfers")] == 1));
    let retx: u64 = r.run.plane_tx.iter().map(|p| p[1]).sum();
    assert!(retx > 0, "the outage cost retransmissions");
    assert_eq!(sum("retransmits"), retx);
    assert_eq!(sum("losses_rack"), c.losses_rack);
    assert_eq!(sum("losses_rto"), c.losses_rto);
    assert_eq!(sum("losses_plane"), c.losses_plane);
    assert_eq!(sum("rx_duplicates"), c.rx_duplicates);
    assert_eq!(sum("evs_retired"), c.ev_retirements);
    assert_eq!(sum("evs_restored"), c.ev_recoveries);
    let trims: u64 = r.run.plane_tx.iter().map(|p| p[2]).sum();
    assert_eq!(sum("trims"), trims);
    let bytes: u64 = (0..8).map(|p| sum(&format!("plane{p}_bytes"))).sum();
    assert_eq!(bytes, r.run.tx_payload_bytes);
    // Plane 3's T0-T1 links were down for a third of the job: every flow that crosses them (between leaves
    // of 8 hosts) sent less on it than on any other plane and lost packets with it; a flow inside a leaf
    // never noticed.
    let (inside, across): (Vec<&Vec<u64>>, Vec<&Vec<u64>>) = rows
        .iter()
        .partition(|r| r[col("src")] / 8 == r[col("dst")] / 8);
    assert!(!across.is_empty());
    for row in inside {
        assert_eq!(
            row[col("retransmits")] + row[col("evs_retired")],
            0,
            "{row:?}"
        );
    }
    for row in across {
        let p3 = row[col("plane3_bytes")];
        for p in [0, 1, 2, 4, 5, 6, 7] {
            assert!(p3 < row[col(&format!("plane{p}_bytes"))], "{row:?}");
        }
        assert!(
            row[col("losses_plane")] + row[col("losses_rack")] > 0,
            "{row:?}"
        );
        assert!(row[col("evs_retired")] > 0, "{row:?}");
    }
}

/// Interface names, and per packet (interface, timestamp ns, captured bytes).
type Read = (Vec<String>, Vec<(u32, u64, Vec<u8>)>);

fn read(path: &Path) -> Read {
    let data = std::fs::read(path).unwrap();
    let mut r = PcapNgReader::new(&data[..]).expect("pcapng");
    let (mut ifaces, mut pkts) = (Vec::new(), Vec::new());
    while let Some(b) = r.next_block() {
        match b.expect("block") {
            Block::InterfaceDescription(i) => ifaces.push(
                i.options
                    .iter()
                    .find_map(|o| match o {
                        InterfaceDescriptionOption::IfName(n) => Some(n.to_string()),
                        _ => None,
                    })
                    .unwrap(),
            ),
            Block::EnhancedPacket(p) => pkts.push((
                p.interface_id,
                p.timestamp.as_nanos() as u64,
                p.data.into_owned(),
            )),
            _ => {}
        }
    }
    (ifaces, pkts)
}

#[test]
fn a_capture_holds_the_window_and_changes_nothing() {
    let s = scenario("plane-return-8host");
    let tmp = common::scratch("capture");
    let dir = tmp.path();
    let spec = |file: &str| CaptureSpec {
        path: dir.join(file),
        hosts: vec![0],
        links: vec![LinkRef {
            tier: LinkTier::T0T1,
            plane: Some(3),
            host: None,
            t0: Some(0),
            t1: Some(0),
            pod: None,
            t2: None,
            direction: None,
        }],
        from_us: 0.0,
        until_us: Some(60.0),
        snaplen: mrc_sim::capture::DEFAULT_SNAPLEN,
        max_bytes: 0,
    };
    let plain = run_scenario_captured(&s, false, None, &mut |_, _| true).unwrap();
    let a = run_scenario_captured(&s, false, Some(&spec("a.pcapng")), &mut |_, _| true).unwrap();
    let b = run_scenario_captured(&s, false, Some(&spec("b.pcapng")), &mut |_, _| true).unwrap();
    assert_eq!(plain.to_json(), a.to_json(), "capturing changed the run");
    let (fa, fb) = (
        std::fs::read(dir.join("a.pcapng")).unwrap(),
        std::fs::read(dir.join("b.pcapng")).unwrap(),
    );
    assert_eq!(fa, fb, "the same run, the same capture");
    assert_eq!(a.to_json(), b.to_json());
    let (ifaces, pkts) = read(&dir.join("a.pcapng"));
    let mut want: Vec<String> = (0..8).map(|p| format!("h0.p{p}")).collect();
    want.extend(["p3.t0-0-t1-0".to_string(), "p3.t1-0-t0-0".to_string()]);
    assert_eq!(ifaces, want);
    assert!(pkts.iter().all(|p| p.1 <= 60_000), "inside the window");
    // The link carried packets before 5 us and after 25 us, none while it was down.
    let link: Vec<u64> = pkts.iter().filter(|p| p.0 >= 8).map(|p| p.1).collect();
    assert!(link.iter().any(|&t| t < 5_000) && link.iter().any(|&t| t > 25_000));
    assert!(
        !link.iter().any(|&t| (5_000..25_000).contains(&t)),
        "sent over a dead link"
    );
    // Host 0 retransmitted what the outage swallowed (BTH.RTX), on the other planes.
    let rtx: Vec<&(u32, u64, Vec<u8>)> = pkts
        .iter()
        .filter(|p| p.0 < 8 && p.2.len() > 49 && p.2[40 + 8 + 1] & 0x40 != 0)
        .collect();
    assert!(!rtx.is_empty(), "no retransmission captured at host 0");
    assert!(rtx.iter().all(|p| p.0 != 3 || p.1 > 25_000));
}
