//! Placement order: a WRITE's final byte is written last, whatever order its packets arrive in
//! (spec QP-PLACE-2), so a target spinning on the last byte of its buffer (perftest `ib_write_lat`) sees the
//! whole message when that byte changes.

use mrc::testing::{QpEnd, connect_pair};
use mrc::*;

const BASE: u64 = 0x10_0000;
const MTU: u32 = 256;
const PACKETS: usize = 6;
const LEN: u32 = MTU * PACKETS as u32 - 17;

/// Byte-addressed memory starting at `BASE` that logs every write and notes, each time the message's final
/// byte is written, whether every other byte of the message was already in place.
#[derive(Default)]
struct Spy {
    bytes: Vec<u8>,
    placed: Vec<bool>,
    writes: Vec<(u64, usize)>,
    /// For each write touching the final byte: were all other bytes placed before it?
    final_writes: Vec<bool>,
}

impl Spy {
    fn new(len: usize) -> Self {
        Self {
            bytes: vec![0; len],
            placed: vec![false; len],
            ..Self::default()
        }
    }
}

impl Memory for Spy {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        let at = (addr - BASE) as usize;
        dst.copy_from_slice(&self.bytes[at..at + dst.len()]);
    }
    fn write(&mut self, addr: u64, src: &[u8]) {
        let at = (addr - BASE) as usize;
        let last = LEN as usize - 1;
        if (at..at + src.len()).contains(&last) {
            let others = self.placed[..last]
                .iter()
                .enumerate()
                .all(|(i, &p)| p || (at..at + src.len()).contains(&i));
            self.final_writes.push(others && src.len() == 1);
        }
        self.bytes[at..at + src.len()].copy_from_slice(src);
        self.placed[at..at + src.len()].fill(true);
        self.writes.push((addr, src.len()));
    }
}

struct Side {
    ep: Endpoint,
    qpn: u32,
    keys: MrKeys,
}

fn side() -> Side {
    let mut ep = Endpoint::new(EndpointConfig {
        ports: 1,
        ..EndpointConfig::default()
    })
    .unwrap();
    let pd = ep.alloc_pd();
    let cq = ep.create_cq(16);
    let keys = ep
        .reg_mr(
            pd,
            BASE,
            u64::from(LEN),
            Access::LOCAL_WRITE | Access::REMOTE_WRITE,
        )
        .unwrap();
    let mut init = QpInit::new(pd, cq);
    init.config = QpConfig {
        mtu: MTU,
        ev: EvConfig::with_planes(1, 4),
        ..QpConfig::default()
    };
    let qpn = ep
        .open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)
        .unwrap();
    Side { ep, qpn, keys }
}

/// A writes one `LEN`-byte message to B; returns B and the message's packets as A sent them, plus A's source.
fn setup() -> (Side, Vec<Vec<u8>>, Vec<u8>) {
    let (mut a, mut b) = (side(), side());
    let end = |s: &Side, peer| QpEnd {
        qpn: s.qpn,
        peer: PeerId(peer),
        sq_psn: 0xFF_FFFE,
    };
    let (ea, eb) = (end(&a, 1), end(&b, 0));
    connect_pair(Instant::ZERO, &mut a.ep, ea, &mut b.ep, eb).unwrap();
    let mut src = Spy::new(LEN as usize);
    for (i, x) in src.bytes.iter_mut().enumerate() {
        *x = (i * 7 + 1) as u8 | 1;
    }
    let sge = [Sge {
        addr: BASE,
        len: LEN,
        lkey: a.keys.lkey,
    }];
    let wr = SendWr {
        wr_id: 1,
        op: SendOp::Write {
            remote_addr: BASE,
            rkey: b.keys.rkey,
        },
        sges: &sge,
        signaled: true,
        solicited: false,
    };
    a.ep.post_send(a.qpn, &wr, Instant::ZERO).unwrap();
    let mut buf = vec![0u8; 2048];
    let mut packets = Vec::new();
    while let Some(t) = a.ep.poll_transmit(Instant::ZERO, &mut buf, &mut src) {
        packets.push(buf[..t.len].to_vec());
    }
    assert_eq!(packets.len(), PACKETS, "the whole message leaves at once");
    (b, packets, src.bytes)
}

fn deliver(b: &mut Side, mem: &mut Spy, packets: &[Vec<u8>], order: &[usize]) {
    let meta = RecvMeta {
        peer: Some(PeerId(0)),
        port: 0,
        ecn_ce: false,
        trim: None,
    };
    for (k, &i) in order.iter().enumerate() {
        let now = Instant::from_nanos(1_000 * (k as u64 + 1));
        b.ep.handle_datagram(now, meta, &packets[i], mem);
    }
}

/// Every arrival order of interest (in order, reversed, last first, last in the middle, each rotation): the
/// final byte is written exactly once, alone, and only when every other byte is already placed.
#[test]
fn the_final_byte_of_a_write_is_placed_last_in_any_arrival_order() {
    let last = PACKETS - 1;
    let mut orders: Vec<Vec<usize>> = vec![
        (0..PACKETS).collect(),
        (0..PACKETS).rev().collect(),
        std::iter::once(last).chain(0..last).collect(),
        vec![0, 1, last, 3, 2, 4],
    ];
    for r in 1..PACKETS {
        orders.push((0..PACKETS).map(|i| (i + r) % PACKETS).collect());
    }
    for order in &orders {
        let (mut b, packets, src) = setup();
        let mut mem = Spy::new(LEN as usize);
        deliver(&mut b, &mut mem, &packets, order);
        assert_eq!(mem.bytes, src, "order {order:?}: the message arrived whole");
        assert_eq!(
            mem.final_writes,
            [true],
            "order {order:?}: the final byte is written once, alone, after all others"
        );
        assert_eq!(
            mem.writes.last(),
            Some(&(BASE + u64::from(LEN) - 1, 1)),
            "order {order:?}: and it is the last write"
        );
        assert_eq!(b.ep.qp_stats(b.qpn).unwrap().rx_data_bytes, u64::from(LEN));
    }
}

/// A final byte held for a hole is never written once its region is gone: the packets that would fill the hole
/// are refused, and the byte stays held.
#[test]
fn a_held_final_byte_is_not_written_into_a_region_deregistered_meanwhile() {
    let (mut b, packets, _) = setup();
    let mut mem = Spy::new(LEN as usize);
    let last = PACKETS - 1;
    deliver(&mut b, &mut mem, &packets, &[last]);
    assert!(
        mem.final_writes.is_empty(),
        "held while the rest is missing"
    );
    let errors = b.ep.qp_stats(b.qpn).unwrap().rx_access_errors;
    b.ep.dereg_mr(b.keys.lkey).unwrap();
    // The region is gone: the other packets are refused, and the held byte goes nowhere.
    deliver(&mut b, &mut mem, &packets, &(0..last).collect::<Vec<_>>());
    assert!(mem.final_writes.is_empty());
    assert!(b.ep.qp_stats(b.qpn).unwrap().rx_access_errors > errors);
}
