//! A QP with `sack_hold` keeps the SACK owed to a lone message's A flag until it posts a send of its own, which
//! then carries the SACK out first, or until the hold ends; a second arrival SACKs at once; without the hold
//! the SACK goes at once (spec REL-SACK-1, REL-SACK-4).

mod common;

use common::pair::{Side, connected};
use mrc::wire::TrafficClass;
use mrc::*;

const MTU: u32 = 256;
const LEN: u32 = 64;
const HOLD: Duration = Duration::from_micros(30);

fn pair(hold: Duration) -> (Side, Side) {
    let cfg = QpConfig {
        mtu: MTU,
        ev: EvConfig::with_planes(1, 4),
        sack_hold: hold,
        ..QpConfig::default()
    };
    connected(&cfg, 4 * LEN)
}

/// Posts a one-packet WRITE from `from` into `to`'s region at `at` and returns the datagrams it sends.
fn write(from: &mut Side, to: &Side, wr_id: u64, at: Instant) -> Vec<(TrafficClass, Vec<u8>)> {
    let sge = [Sge {
        addr: from.addr,
        len: LEN,
        lkey: from.keys.lkey,
    }];
    let wr = SendWr {
        wr_id,
        op: SendOp::Write {
            remote_addr: to.addr,
            rkey: to.keys.rkey,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    from.ep.post_send(from.qpn, &wr, at).unwrap();
    drain(from, at)
}

fn drain(s: &mut Side, at: Instant) -> Vec<(TrafficClass, Vec<u8>)> {
    let mut buf = vec![0u8; 2048];
    let mut out = Vec::new();
    while let Some(t) = s.ep.poll_transmit(at, &mut buf, &mut s.mem) {
        out.push((t.class, buf[..t.len].to_vec()));
    }
    out
}

fn deliver(to: &mut Side, from_peer: u32, at: Instant, datagrams: &[(TrafficClass, Vec<u8>)]) {
    let meta = RecvMeta {
        peer: Some(PeerId(from_peer)),
        port: 0,
        ecn_ce: false,
        trim: None,
    };
    for (_, d) in datagrams {
        to.ep.handle_datagram(at, meta, d, &mut to.mem);
    }
}

fn completions(s: &mut Side) -> Vec<u64> {
    let mut wc = [Completion::default(); 8];
    let n = s.ep.poll_cq(s.cq, &mut wc);
    wc[..n].iter().map(|c| c.wr_id).collect()
}

fn us(n: u64) -> Instant {
    Instant::from_nanos(n * 1_000)
}

#[test]
fn the_answer_carries_the_held_sack_out_first() {
    let (mut a, mut b) = pair(HOLD);
    let ping = write(&mut a, &b, 1, us(1));
    assert_eq!(ping.len(), 1, "one data packet");
    deliver(&mut b, 0, us(2), &ping);
    assert!(
        drain(&mut b, us(2)).is_empty(),
        "the SACK waits for B's answer"
    );
    // B answers 5 µs later: the SACK leaves with the answer, ahead of it.
    let pong = write(&mut b, &a, 2, us(7));
    let classes: Vec<_> = pong.iter().map(|(c, _)| *c).collect();
    assert_eq!(classes, [TrafficClass::Control, TrafficClass::Data]);
    deliver(&mut a, 1, us(8), &pong);
    assert_eq!(
        completions(&mut a),
        [1],
        "A's WRITE completes with B's answer"
    );
}

#[test]
fn a_held_sack_goes_when_the_hold_ends() {
    let (mut a, mut b) = pair(HOLD);
    let ping = write(&mut a, &b, 1, us(1));
    deliver(&mut b, 0, us(2), &ping);
    let due = us(2) + HOLD;
    assert!(b.ep.poll_timeout().is_some_and(|t| t <= due));
    let early = Instant::from_nanos(due.as_nanos() - 1);
    b.ep.handle_timeout(early);
    assert!(drain(&mut b, early).is_empty());
    b.ep.handle_timeout(due);
    let sack = drain(&mut b, due);
    assert_eq!(sack.len(), 1, "the SACK when the hold ends");
    deliver(&mut a, 1, due, &sack);
    assert_eq!(completions(&mut a), [1]);
}

#[test]
fn a_second_arrival_sacks_at_once() {
    let (mut a, mut b) = pair(HOLD);
    let first = write(&mut a, &b, 1, us(1));
    let second = write(&mut a, &b, 2, us(1));
    deliver(&mut b, 0, us(2), &first);
    assert!(drain(&mut b, us(2)).is_empty());
    deliver(&mut b, 0, us(3), &second);
    let sack = drain(&mut b, us(3));
    assert!(
        !sack.is_empty(),
        "a stream is acknowledged as without the hold"
    );
    deliver(&mut a, 1, us(4), &sack);
    assert_eq!(completions(&mut a), [1, 2]);
}

#[test]
fn without_a_hold_the_sack_goes_at_once() {
    let (mut a, mut b) = pair(Duration::ZERO);
    let ping = write(&mut a, &b, 1, us(1));
    deliver(&mut b, 0, us(2), &ping);
    let sack = drain(&mut b, us(2));
    assert_eq!(sack.len(), 1);
    assert_eq!(sack[0].0, TrafficClass::Control);
    deliver(&mut a, 1, us(3), &sack);
    assert_eq!(completions(&mut a), [1]);
}
