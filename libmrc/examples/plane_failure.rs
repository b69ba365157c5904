//! Moves data over a deterministic in-memory 8-plane network while one plane fails and comes back, and prints
//! what the transport did: goodput over time, per-plane packets, retransmits, trims, losses and EV states.
//!
//! A writes 256 MiB to B while C writes 128 MiB to B, so B's ports congest and trim. Plane 3 dies silently
//! (no port signal: only the transport's own loss detection notices) at 1 ms and returns at 3 ms.
//!
//! Run: `cargo run --release --example plane_failure [seed]`

use mrc::testing::{Fault, Net, NetConfig, PlaneConfig};
use mrc::*;

const PLANES: u8 = 8;
const FAILED: u8 = 3;
const CHUNK: u32 = 4 << 20;

/// Posts `chunks` WRITEs of `CHUNK` bytes; returns (source address, destination address, bytes).
fn post_writes(net: &mut Net, from: usize, to: usize, qpn: u32, chunks: u32) -> (u64, u64, u64) {
    let len = u64::from(CHUNK) * u64::from(chunks);
    let (src, ks) = net.alloc_mr(from, len, Access::NONE);
    let (dst, kd) = net.alloc_mr(to, len, Access::REMOTE_WRITE);
    net.nodes[from]
        .mem
        .fill_pattern(src, len as usize, from as u64);
    let now = net.now();
    for i in 0..u64::from(chunks) {
        let off = i * u64::from(CHUNK);
        let sge = [Sge {
            addr: src + off,
            len: CHUNK,
            lkey: ks.lkey,
        }];
        let wr = SendWr {
            wr_id: i,
            op: SendOp::Write {
                remote_addr: dst + off,
                rkey: kd.rkey,
            },
            sges: &sge,
            signaled: true,
            solicited: false,
        };
        net.nodes[from].ep.post_send(qpn, &wr, now).expect("post");
    }
    (src, dst, len)
}

fn ev_counts(net: &Net, node: usize, qpn: u32, plane: Option<u8>) -> (usize, usize, usize) {
    let mut c = (0, 0, 0);
    for e in net.nodes[node].ep.ev_infos(qpn) {
        if plane.is_some_and(|p| p != e.plane) {
            continue;
        }
        match e.state {
            EvState::Good => c.0 += 1,
            EvState::Skip => c.1 += 1,
            EvState::AssumedBad => c.2 += 1,
            _ => {}
        }
    }
    c
}

fn main() {
    let seed: u64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(1);
    let plane = PlaneConfig::default();
    let mut net = Net::new(NetConfig::uniform(PLANES, plane.clone(), seed));
    let (a, b, c) = (
        net.add_node(Caps::ALL),
        net.add_node(Caps::ALL),
        net.add_node(Caps::ALL),
    );
    let cfg = QpConfig {
        ev: EvConfig::with_planes(PLANES, 16),
        ..QpConfig::default()
    };
    let (qa, qb) = net.connect(a, b, &cfg);
    let (qc, qcb) = net.connect(c, b, &cfg);
    let (a_src, a_dst, a_bytes) = post_writes(&mut net, a, b, qa, 64);
    let (c_src, c_dst, c_bytes) = post_writes(&mut net, c, b, qc, 32);
    let t0 = net.now();
    let fail = t0 + Duration::from_millis(1);
    let back = t0 + Duration::from_millis(3);
    net.schedule(fail, Fault::PlaneDown(FAILED));
    net.schedule(back, Fault::PlaneUp(FAILED));

    println!(
        "MRC over an in-memory {PLANES}-plane network ({} Gbit/s per plane, {:?} one way, seed {seed})",
        plane.rate_bps / 1_000_000_000,
        plane.delay
    );
    println!(
        "A->B {} MiB and C->B {} MiB of WRITEs; plane {FAILED} fails silently at 1.0 ms and returns at 3.0 ms\n",
        a_bytes >> 20,
        c_bytes >> 20
    );
    println!(
        "  time (ms)   A->B Gbit/s  C->B Gbit/s   A's packets on plane {FAILED}   A's EVs good/skip/bad"
    );
    println!("              (placed at B, per 0.5 ms)");

    let bin = Duration::from_micros(500);
    let cq_a = net.nodes[a].cq;
    let cq_c = net.nodes[c].cq;
    let mut wc = [Completion {
        wr_id: 0,
        status: WcStatus::Success,
        opcode: WcOpcode::RdmaWrite,
        byte_len: 0,
        imm: None,
        qpn: 0,
    }; 64];
    let (mut done_a, mut done_c) = (0u32, 0u32);
    let (mut end_a, mut end_c) = (None, None);
    let mut last = (0u64, 0u64, 0u64);
    let mut t = t0;
    while done_a < 64 || done_c < 32 {
        t += bin;
        net.run_until(t, |n| {
            for (node, cq, done, end, want) in [
                (a, cq_a, &mut done_a, &mut end_a, 64),
                (c, cq_c, &mut done_c, &mut end_c, 32),
            ] {
                let k = n.nodes[node].ep.poll_cq(cq, &mut wc);
                for w in &wc[..k] {
                    assert_eq!(w.status, WcStatus::Success, "{w:?}");
                }
                *done += k as u32;
                if *done == want && end.is_none() {
                    *end = Some(n.now());
                }
            }
            false
        });
        // Goodput as B sees it: bytes placed per QP.
        let ra = net.nodes[b].ep.qp_stats(qb).unwrap().rx_data_bytes;
        let rc = net.nodes[b].ep.qp_stats(qcb).unwrap().rx_data_bytes;
        let pf = net.nodes[a]
            .ep
            .plane_stats(qa, usize::from(FAILED))
            .unwrap()
            .tx_packets;
        let gbps = |bytes: u64| bytes as f64 * 8.0 / bin.as_nanos() as f64;
        let (g, s, bad) = ev_counts(&net, a, qa, None);
        println!(
            "  {:4.1}-{:4.1}   {:10.0}   {:10.0}   {:20}   {g:3}/{s}/{bad}",
            (t - t0 - bin).as_secs_f64() * 1e3,
            (t - t0).as_secs_f64() * 1e3,
            gbps(ra - last.0),
            gbps(rc - last.1),
            pf - last.2
        );
        last = (ra, rc, pf);
        if t - t0 > Duration::from_secs(1) {
            panic!("transfers did not finish");
        }
    }

    print_planes(&net, a, qa);
    let sa = net.nodes[a].ep.qp_stats(qa).unwrap();
    let sb = net.nodes[b].ep.qp_stats(qb).unwrap();
    let dur_a = end_a.unwrap() - t0;
    let dur_c = end_c.unwrap() - t0;
    let gbps = |bytes: u64, d: Duration| bytes as f64 * 8.0 / d.as_nanos() as f64;
    println!(
        "\nA->B: {} MiB in {:.2} ms = {:.0} Gbit/s goodput; C->B: {} MiB in {:.2} ms = {:.0} Gbit/s",
        a_bytes >> 20,
        dur_a.as_secs_f64() * 1e3,
        gbps(a_bytes, dur_a),
        c_bytes >> 20,
        dur_c.as_secs_f64() * 1e3,
        gbps(c_bytes, dur_c)
    );
    println!(
        "A->B: {} data packets, {} retransmits ({:.2}%), {} trim NACKs, {} losses by time ({} by RTO), {} ECN marks",
        sa.tx_data_packets,
        sa.tx_retransmits,
        100.0 * sa.tx_retransmits as f64 / sa.tx_data_packets as f64,
        sa.rx_trim_nacks,
        sa.losses_rack,
        sa.losses_rto,
        sa.ecn_marks
    );
    println!(
        "A->B: {} EV retirements, {} restorations, {} probes; B placed {} MiB with {} duplicates dropped",
        sa.ev_retirements,
        sa.ev_restorations,
        sa.tx_probes,
        sb.rx_data_bytes >> 20,
        sb.rx_duplicates
    );
    let same = |from: usize, src: u64, dst: u64, len: u64| {
        net.nodes[from].mem.slice(src, len as usize) == net.nodes[b].mem.slice(dst, len as usize)
    };
    assert!(same(a, a_src, a_dst, a_bytes) && same(c, c_src, c_dst, c_bytes));
    println!("Data at B verified byte for byte against both sources.");
}

/// The per-plane counters of `qpn` at `node`.
fn print_planes(net: &Net, node: usize, qpn: u32) {
    println!("\nA->B QP, per plane:");
    println!(
        "  plane   packets   MiB sent   retransmits   trims   losses   EV good/skip/bad   plane retirements"
    );
    for p in 0..PLANES {
        let ps = net.nodes[node].ep.plane_stats(qpn, usize::from(p)).unwrap();
        let (g, s, bad) = ev_counts(net, node, qpn, Some(p));
        println!(
            "  {p:5}   {:7}   {:8.1}   {:11}   {:5}   {:6}   {:>16}   {:17}",
            ps.tx_packets,
            ps.tx_bytes as f64 / (1 << 20) as f64,
            ps.retransmits,
            ps.trims,
            ps.losses,
            format!("{g}/{s}/{bad}"),
            ps.plane_retirements
        );
    }
}
