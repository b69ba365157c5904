//! Loss detection on a loaded host: a fault-free 64 MiB WRITE burst over loopback sockets, with two threads
//! spinning on every core as `stress --cpu 2` does, changes no EV's state. CPU starvation delays datagrams
//! and acknowledgements but loses none; retiring a path for it would take a working path out of service.
//! Run under `flock /tmp/mrc-net.lock` (real sockets).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

use mrc::{Access, Completion, SendOp, Sge, WcStatus};
use mrc_host::{AsyncEvent, Host, HostConfig, SendRequest};

mod common;

use common::{LIMIT, link};

const TOTAL: usize = 64 << 20;
const CHUNK: usize = 1 << 20;

/// Spins on `n` threads until the returned flag is set (what `stress --cpu n` does with processes).
fn stress(n: usize) -> (Arc<AtomicBool>, Vec<std::thread::JoinHandle<()>>) {
    let stop = Arc::new(AtomicBool::new(false));
    let threads = (0..n)
        .map(|_| {
            let stop = Arc::clone(&stop);
            std::thread::spawn(move || {
                let mut x = 1.0f64;
                while !stop.load(Ordering::Relaxed) {
                    for _ in 0..10_000 {
                        x = std::hint::black_box(x.sqrt() + 1.0);
                    }
                }
            })
        })
        .collect();
    (stop, threads)
}

/// A peer whose progress thread does not run for an RTO makes the sender's packets time out on every plane at
/// once; before spec PATH-EV-8 each such loss blamed its path, and every EV was retired and restored in about a
/// third of runs on a 2-core VM (`losses_rto` 64). With it, 26 of 26 runs changed no EV state, four of them with
/// 65-131 packets resent after an RTO.
#[test]
fn a_64_mib_write_burst_on_a_loaded_host_changes_no_ev_state() {
    // The shim's and mrc-perf's plane count, defaults otherwise.
    let (a, b) = (
        Host::start(HostConfig::loopback(8)).expect("loopback sockets"),
        Host::start(HostConfig::loopback(8)).expect("loopback sockets"),
    );
    let (la, _lb) = link(&a, &b, 1);
    let src = a
        .alloc_buffer(a.default_pd(), TOTAL, Access::LOCAL_WRITE)
        .unwrap();
    let dst = b
        .alloc_buffer(
            b.default_pd(),
            TOTAL,
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let data: Vec<u8> = (0..TOTAL as u32)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect();
    a.write_buffer(&src, 0, &data).unwrap();
    // The controller's EV-event queue sees every EV state change (not only retirements).
    let _ = (a.ev_event_fd(), b.ev_event_fd());

    let (stop, spinners) = stress(2);
    let qp = &la.qps()[0];
    let chunks = TOTAL / CHUNK;
    let (mut posted, mut done) = (0, 0);
    let mut out = [Completion::default(); 16];
    let start = Instant::now();
    while done < chunks {
        assert!(start.elapsed() < LIMIT * 4, "the burst did not finish");
        while posted < chunks && posted - done < 32 {
            let sge = [Sge {
                addr: src.addr + (posted * CHUNK) as u64,
                len: CHUNK as u32,
                lkey: src.lkey,
            }];
            qp.post_send(&SendRequest {
                wr_id: posted as u64,
                op: SendOp::Write {
                    remote_addr: dst.addr + (posted * CHUNK) as u64,
                    rkey: dst.rkey,
                },
                sges: &sge,
                inline: None,
                signaled: true,
                solicited: false,
                fence: false,
            })
            .unwrap();
            posted += 1;
        }
        let n = la.send_cq().poll(&mut out);
        for c in &out[..n] {
            assert_eq!(c.status, WcStatus::Success, "{c:?}");
        }
        done += n;
        if n == 0 {
            std::thread::yield_now();
        }
    }
    let elapsed = start.elapsed();
    stop.store(true, Ordering::Relaxed);
    for t in spinners {
        t.join().unwrap();
    }
    let mut landed = vec![0u8; TOTAL];
    b.read_buffer(&dst, 0, &mut landed).unwrap();
    assert!(landed == data, "the bytes that landed differ");

    let mut changes = Vec::new();
    for h in [&a, &b] {
        changes.extend(std::iter::from_fn(|| h.poll_ev_event()));
    }
    let paths: Vec<AsyncEvent> = [&a, &b]
        .iter()
        .flat_map(|h| std::iter::from_fn(|| h.poll_event()))
        .filter(|e| {
            matches!(
                e,
                AsyncEvent::PathRetired { .. } | AsyncEvent::PathRestored { .. }
            )
        })
        .collect();
    let s = a.stats();
    println!(
        "64 MiB in {elapsed:?} under 2 spinning threads: {} EV state changes, {} path events, {} datagrams, \
         {} retransmitted",
        changes.len(),
        paths.len(),
        s.datapath.tx_datagrams,
        a.inspect(|dp| dp
            .endpoint_ref()
            .qp_stats(qp.qpn())
            .map_or(0, |q| q.tx_retransmits)),
    );
    let stats = a.inspect(|dp| dp.endpoint_ref().qp_stats(qp.qpn()));
    assert!(
        changes.is_empty() && paths.is_empty(),
        "EV state changes without a path fault: {} changes, {} path events; {stats:?}",
        changes.len(),
        paths.len()
    );
}
