//! The endpoint learns of a QP timer that a packet starts also on its fast path (a data packet taken with
//! nothing else to collect): `poll_timeout` reports the delayed SACK that the first packet of a message arms at
//! the responder (spec REL-SACK-1), and the SACK goes out when it is due, not before; the packet that fills the
//! oldest hole is SACKed at once. A burst that starts a window files its RTO and tail probe even with no QP
//! timeout running to carry them (spec REL-LOSS-2, REL-TLP-1).

mod common;

use common::pair::{Side, connected};
use mrc::*;

const MTU: u32 = 256;
const LEN: u32 = 4 * MTU;

/// Two connected sides, `a` with a WRITE of `LEN` bytes to `b` posted at `sent_at`.
fn posted_write(cfg: &QpConfig, sent_at: Instant) -> (Side, Side) {
    let (mut a, b) = connected(cfg, LEN);
    let sge = [Sge {
        addr: a.addr,
        len: LEN,
        lkey: a.keys.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_addr: b.addr,
            rkey: b.keys.rkey,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    a.ep.post_send(a.qpn, &wr, sent_at).unwrap();
    (a, b)
}

fn delayed_sack_config() -> QpConfig {
    QpConfig {
        mtu: MTU,
        ev: EvConfig::with_planes(1, 4),
        sack_delay: Duration::from_micros(50),
        ..QpConfig::default()
    }
}

#[test]
fn the_delayed_sack_of_a_first_packet_reaches_poll_timeout() {
    let cfg = delayed_sack_config();
    let sent_at = Instant::from_nanos(1_000);
    let (mut a, mut b) = posted_write(&cfg, sent_at);
    let mut buf = vec![0u8; 2048];
    let t =
        a.ep.poll_transmit(sent_at, &mut buf, &mut a.mem)
            .expect("the first packet");
    let first = buf[..t.len].to_vec();

    let before_b = b.ep.poll_timeout();
    let meta = RecvMeta {
        peer: Some(PeerId(0)),
        port: 0,
        ecn_ce: false,
        trim: None,
    };
    let at = Instant::from_nanos(2_000);
    b.ep.handle_datagram(at, meta, &first, &mut b.mem);
    let sack_due = at + cfg.sack_delay;
    assert_eq!(
        b.ep.poll_timeout(),
        Some(sack_due.min(before_b.unwrap_or(Instant::MAX))),
        "the first packet of a message arms the delayed SACK (was {before_b:?})"
    );
    assert!(
        b.ep.poll_transmit(at, &mut buf, &mut b.mem).is_none(),
        "no SACK before its time"
    );
    b.ep.handle_timeout(sack_due);
    assert!(
        b.ep.poll_transmit(sack_due, &mut buf, &mut b.mem).is_some(),
        "the SACK when due"
    );
}

/// The packet that fills the oldest hole is SACKed at once (spec REL-SACK-1): the sender's time rule is judging
/// it, and a coalesced SACK (here 50 µs later) would count against its reorder allowance.
#[test]
fn the_packet_filling_the_oldest_hole_is_sacked_at_once() {
    let sent_at = Instant::from_nanos(1_000);
    let (mut a, mut b) = posted_write(&delayed_sack_config(), sent_at);
    let mut buf = vec![0u8; 2048];
    // The first three of the message's four packets (the last one carries A, which is SACKed at once anyway).
    let pkts: Vec<Vec<u8>> = (0..3)
        .map(|_| {
            let t =
                a.ep.poll_transmit(sent_at, &mut buf, &mut a.mem)
                    .expect("a data packet");
            buf[..t.len].to_vec()
        })
        .collect();
    let meta = RecvMeta {
        peer: Some(PeerId(0)),
        port: 0,
        ecn_ce: false,
        trim: None,
    };
    let mut deliver = |pkt: &[u8], at: Instant| {
        b.ep.handle_datagram(at, meta, pkt, &mut b.mem);
        let mut sacks = 0;
        while b.ep.poll_transmit(at, &mut buf, &mut b.mem).is_some() {
            sacks += 1;
        }
        sacks
    };
    let at = Instant::from_nanos(2_000);
    assert!(deliver(&pkts[1], at) > 0, "a hole appears: SACK at once");
    assert_eq!(
        deliver(&pkts[2], at + Duration::from_nanos(100)),
        0,
        "coalesced"
    );
    assert!(
        deliver(&pkts[0], at + Duration::from_nanos(200)) > 0,
        "the oldest hole is filled: SACK at once, not after sack_delay"
    );
}

#[test]
fn a_lost_burst_is_resent_with_no_qp_timeout_running() {
    let cfg = QpConfig {
        timeout: 0,
        ..delayed_sack_config()
    };
    let sent_at = Instant::from_nanos(1_000);
    let (mut a, _b) = posted_write(&cfg, sent_at);
    let mut buf = vec![0u8; 2048];
    let mut sent = 0;
    while a.ep.poll_transmit(sent_at, &mut buf, &mut a.mem).is_some() {
        sent += 1;
    }
    assert_eq!(
        sent,
        LEN / MTU,
        "the whole message in one burst, all of it lost"
    );
    let due =
        a.ep.poll_timeout()
            .expect("the burst's tail probe or RTO is filed: nothing else would ever wake the QP");
    assert!(
        due <= sent_at + cfg.rto_min(),
        "no later than the RTO: {due:?}"
    );
    a.ep.handle_timeout(due);
    assert!(
        a.ep.poll_transmit(due, &mut buf, &mut a.mem).is_some(),
        "the lost burst is probed or resent when the timer fires"
    );
}
