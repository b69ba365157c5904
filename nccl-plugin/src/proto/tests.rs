//! The rendezvous between a [`SendSide`] and a [`RecvSide`] over an in-process stand-in for two connected
//! QPs: WRITEs copy between registered buffers of this process (bounds and keys checked), WRITE_WITH_IMM
//! consumes a posted receive at the other side, completions are delivered when the test says so.
#![allow(
    unsafe_code,
    reason = "the stand-in transport copies between raw registered addresses"
)]

use std::collections::{BTreeMap, VecDeque};

use super::*;

/// Registered regions by key: (address, length).
#[derive(Default)]
struct Keys(BTreeMap<u32, (u64, usize)>);

impl Keys {
    fn reg(&mut self, key: u32, addr: u64, len: usize) {
        self.0.insert(key, (addr, len));
    }
    fn check(&self, key: u32, addr: u64, len: usize) {
        let (base, n) = self.0[&key];
        assert!(
            addr >= base && addr + len as u64 <= base + n as u64,
            "access outside region {key}"
        );
    }
}

/// Two connected sides with `qps` QPs; side 0 sends, side 1 receives.
struct Pair {
    s: SendSide,
    r: RecvSide,
    keys: Keys,
    /// Posted receives per side and QP.
    posted: [Vec<VecDeque<u64>>; 2],
    /// Completions waiting for delivery, per side.
    cq: [VecDeque<Done>; 2],
    /// Payload writes carried out so far.
    writes: usize,
}

const S_KEY: u32 = 1;
const R_KEY: u32 = 2;

impl Pair {
    fn new(qps: usize) -> Self {
        let sb = CtrlBlock::new(CTRL_BYTES);
        let rb = CtrlBlock::new(CTRL_BYTES);
        let mut keys = Keys::default();
        keys.reg(S_KEY, sb.addr(), sb.len());
        keys.reg(R_KEY, rb.addr(), rb.len());
        let sinfo = SenderInfo {
            qps: qps as u8,
            fifo_addr: sb.addr(),
            fifo_rkey: S_KEY,
        };
        let r = RecvSide::new(rb, R_KEY, sinfo);
        let rinfo = ReceiverInfo {
            sizes_addr: r.sizes_addr(),
            sizes_rkey: R_KEY,
        };
        let s = SendSide::new(qps, sb, S_KEY, rinfo);
        Self {
            s,
            r,
            keys,
            posted: [vec![VecDeque::new(); qps], vec![VecDeque::new(); qps]],
            cq: [VecDeque::new(), VecDeque::new()],
            writes: 0,
        }
    }

    /// Carries out every queued work request of both sides; completions are queued, not delivered.
    fn carry(&mut self) {
        self.carry_from(&[0, 1]);
    }

    /// Carries out the queued work requests of `side` only (the other side's thread has not run yet).
    fn carry_side(&mut self, side: usize) {
        self.carry_from(&[side]);
    }

    fn carry_from(&mut self, sides: &[usize]) {
        loop {
            let (side, op) = if let Some(op) = sides
                .contains(&0)
                .then(|| self.s.ops().pop_front())
                .flatten()
            {
                (0, op)
            } else if let Some(op) = sides
                .contains(&1)
                .then(|| self.r.ops().pop_front())
                .flatten()
            {
                (1, op)
            } else {
                return;
            };
            match op {
                Op::Recv { qp, wr_id } => self.posted[side][qp].push_back(wr_id),
                Op::Write {
                    qp,
                    wr_id,
                    local,
                    remote_addr,
                    rkey,
                    imm,
                    signaled,
                } => {
                    self.keys.check(rkey, remote_addr, local.len as usize);
                    self.keys.check(local.lkey, local.addr, local.len as usize);
                    // SAFETY: both ranges lie inside live registered buffers of this test (checked above).
                    unsafe {
                        std::ptr::copy(
                            local.addr as *const u8,
                            remote_addr as *mut u8,
                            local.len as usize,
                        );
                    }
                    self.writes += 1;
                    let ok = Done {
                        qp,
                        wr_id,
                        status: Ok(()),
                        recv: false,
                        byte_len: 0,
                        imm: None,
                    };
                    if signaled {
                        self.cq[side].push_back(ok);
                    }
                    if let Some(imm) = imm {
                        let peer = 1 - side;
                        // No RNR retry in this stand-in: a WRITE_WITH_IMM that finds no receive is a bug.
                        let rwr = self.posted[peer][qp]
                            .pop_front()
                            .expect("a receive is posted");
                        self.cq[peer].push_back(Done {
                            wr_id: rwr,
                            recv: true,
                            byte_len: local.len,
                            imm: Some(imm),
                            ..ok
                        });
                    }
                }
            }
        }
    }

    /// Delivers the queued completions of `side`.
    fn deliver(&mut self, side: usize) {
        while let Some(d) = self.cq[side].pop_front() {
            if side == 0 {
                self.s.on_done(d);
            } else {
                self.r.on_done(d);
            }
        }
    }

    /// Carries and delivers until nothing moves.
    fn settle(&mut self) {
        for _ in 0..16 {
            self.carry();
            self.deliver(0);
            self.deliver(1);
        }
        self.carry();
    }
}

/// A registered buffer of the test.
struct Buf {
    v: Vec<u8>,
    key: u32,
}

impl Buf {
    fn new(p: &mut Pair, key: u32, len: usize, fill: u8) -> Self {
        let v = vec![fill; len.max(1)];
        p.keys.reg(key, v.as_ptr() as u64, v.len());
        Self { v, key }
    }
    fn sge(&self, len: usize) -> Sge {
        Sge {
            addr: self.v.as_ptr() as u64,
            len: len as u32,
            lkey: self.key,
        }
    }
    fn recv(&self, tag: i32) -> RecvBuf {
        RecvBuf {
            addr: self.v.as_ptr() as u64,
            size: self.v.len(),
            rkey: self.key,
            tag,
        }
    }
}

fn pattern(seed: u32, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| (seed.wrapping_mul(2_654_435_761) as usize ^ i.wrapping_mul(31)) as u8)
        .collect()
}

fn wait_send(p: &mut Pair, id: SendId) -> u32 {
    for _ in 0..8 {
        if let Some(n) = p.s.test(id).unwrap() {
            return n;
        }
        p.settle();
    }
    panic!("send {id} never completed");
}

fn wait_recv(p: &mut Pair, id: RecvId, sizes: &mut [u32]) {
    for _ in 0..8 {
        if p.r.test(id, sizes).unwrap() {
            return;
        }
        p.settle();
    }
    panic!("receive {} never completed", id.seq);
}

#[test]
fn a_send_lands_in_a_larger_receive_which_reports_the_sent_size() {
    let mut p = Pair::new(1);
    let src = Buf::new(&mut p, 10, 1000, 0);
    let dst = Buf::new(&mut p, 11, 4096, 0xEE);
    let data = pattern(1, 1000);
    // SAFETY: `src.v` is this test's buffer; no one else touches it now.
    unsafe { std::ptr::copy_nonoverlapping(data.as_ptr(), src.v.as_ptr() as *mut u8, 1000) };
    // Before the receive is announced the send is refused (NCCL's NULL request).
    assert_eq!(p.s.isend(src.sge(1000), 0).unwrap(), None);
    let rid =
        p.r.irecv(&[dst.recv(0)], false)
            .unwrap()
            .expect("slot free");
    let mut sizes = [0u32; 1];
    assert!(!p.r.test(rid, &mut sizes).unwrap());
    p.settle();
    let sid = p.s.isend(src.sge(1000), 0).unwrap().expect("CTS arrived");
    wait_recv(&mut p, rid, &mut sizes);
    assert_eq!(sizes, [1000]);
    assert_eq!(&dst.v[..1000], &data[..]);
    assert!(
        dst.v[1000..].iter().all(|&b| b == 0xEE),
        "nothing written past the send"
    );
    assert_eq!(wait_send(&mut p, sid), 1000);
    // A finished request is not outstanding any more.
    assert!(p.s.test(sid).is_err());
    assert!(p.r.test(rid, &mut sizes).is_err());
}

#[test]
fn the_receiver_announces_nothing_before_the_sender_posted_its_receives() {
    let mut p = Pair::new(2);
    let dst = Buf::new(&mut p, 70, 64, 0);
    let src = Buf::new(&mut p, 71, 64, 3);
    // The receiver runs first (accept returned, NCCL posts a receive at once): its own receives are posted,
    // but its CTS waits, since the sender has posted nothing it could land in.
    let rid = p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    p.carry_side(1);
    assert_eq!(p.writes, 0, "no CTS before the sender is ready");
    assert!(!p.r.is_ready());
    assert_eq!(p.posted[1][0].len(), RECVS_POSTED);
    assert_eq!(p.posted[1][1].len(), RECVS_POSTED);
    p.carry_side(1);
    assert_eq!(
        p.writes, 0,
        "still nothing: polling again does not release it"
    );
    // The sender's first round: every CTS receive, then the ready word.
    p.carry_side(0);
    assert_eq!(p.posted[0][0].len(), RECVS_POSTED);
    assert_eq!(p.writes, 1, "the ready word");
    p.carry_side(1);
    assert!(p.r.is_ready());
    assert_eq!(p.writes, 2, "the held CTS went out");
    p.settle();
    let sid = p.s.isend(src.sge(64), 0).unwrap().expect("announced");
    let mut sz = [0u32];
    wait_recv(&mut p, rid, &mut sz);
    assert_eq!(sz, [64]);
    assert!(dst.v.iter().all(|&b| b == 3));
    wait_send(&mut p, sid);
}

#[test]
fn a_torn_or_foreign_ready_word_does_not_release_announcements() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 72, 64, 0);
    p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    let rb = p.r.sizes_addr() + SIZES_BYTES as u64;
    for word in [READY & 0xFFFF_FFFF, READY ^ (1 << 56), u64::MAX] {
        // SAFETY: the ready word lies inside the receiver's control block, which this test owns.
        unsafe { std::ptr::write(rb as *mut u64, word) };
        p.carry_side(1);
        assert!(!p.r.is_ready(), "{word:#x} is not the ready word");
        assert_eq!(p.writes, 0);
    }
}

#[test]
fn grouped_receive_matches_sends_by_tag_in_any_order() {
    let mut p = Pair::new(2);
    let dsts: Vec<Buf> = (0..3).map(|i| Buf::new(&mut p, 20 + i, 8192, 0)).collect();
    let tags = [5, 7, 9];
    let lens = [3000usize, 0, 8192];
    let srcs: Vec<Buf> = (0..3)
        .map(|i| {
            let b = Buf::new(&mut p, 30 + i as u32, lens[i].max(1), 0);
            let d = pattern(i as u32 + 7, lens[i]);
            // SAFETY: this test's own buffer.
            unsafe { std::ptr::copy_nonoverlapping(d.as_ptr(), b.v.as_ptr() as *mut u8, lens[i]) };
            b
        })
        .collect();
    let bufs: Vec<RecvBuf> = dsts.iter().zip(tags).map(|(d, t)| d.recv(t)).collect();
    let rid = p.r.irecv(&bufs, false).unwrap().unwrap();
    p.settle();
    // A tag no buffer of the head receive has is not matched.
    assert_eq!(p.s.isend(srcs[0].sge(10), 8).unwrap(), None);
    let mut sends = Vec::new();
    let before = p.writes;
    for i in [2usize, 0, 1] {
        sends.push(
            p.s.isend(srcs[i].sge(lens[i]), tags[i])
                .unwrap()
                .expect("matched"),
        );
        p.carry();
        if i != 1 {
            // Nothing moves until every buffer of the group is matched.
            assert_eq!(p.writes, before);
        }
    }
    let mut sizes = [0u32; 3];
    wait_recv(&mut p, rid, &mut sizes);
    assert_eq!(sizes, [3000, 0, 8192]);
    for i in 0..3 {
        assert_eq!(
            &dsts[i].v[..lens[i]],
            &pattern(i as u32 + 7, lens[i])[..],
            "buffer {i}"
        );
    }
    for s in sends {
        wait_send(&mut p, s);
    }
}

#[test]
fn eight_outstanding_per_comm_across_many_rounds_and_three_qps() {
    let mut p = Pair::new(3);
    let depth = 8;
    let size = 70_000;
    let srcs: Vec<Buf> = (0..depth)
        .map(|i| Buf::new(&mut p, 100 + i as u32, size, 0))
        .collect();
    let dsts: Vec<Buf> = (0..depth)
        .map(|i| Buf::new(&mut p, 200 + i as u32, size, 0))
        .collect();
    let mut rng = 12345u32;
    for round in 0..40u32 {
        let mut rids = Vec::new();
        let mut sids = Vec::new();
        let mut lens = Vec::new();
        for i in 0..depth {
            rng = rng.wrapping_mul(1_103_515_245).wrapping_add(12345);
            let len = (rng as usize >> 8) % size;
            lens.push(len);
            let d = pattern(round * 8 + i as u32, len);
            // SAFETY: this test's own buffer.
            unsafe {
                std::ptr::copy_nonoverlapping(d.as_ptr(), srcs[i].v.as_ptr() as *mut u8, len)
            };
            rids.push(
                p.r.irecv(&[dsts[i].recv(1)], false)
                    .unwrap()
                    .expect("fewer than 32 outstanding"),
            );
        }
        p.settle();
        for i in 0..depth {
            sids.push(
                p.s.isend(srcs[i].sge(lens[i]), 1)
                    .unwrap()
                    .expect("announced"),
            );
        }
        for i in 0..depth {
            let mut sz = [0u32];
            wait_recv(&mut p, rids[i], &mut sz);
            assert_eq!(sz[0] as usize, lens[i]);
            assert_eq!(
                &dsts[i].v[..lens[i]],
                &pattern(round * 8 + i as u32, lens[i])[..]
            );
            assert_eq!(wait_send(&mut p, sids[i]) as usize, lens[i]);
        }
    }
}

#[test]
fn thirty_two_receives_fill_the_window_and_the_next_waits() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 40, 64, 0);
    let src = Buf::new(&mut p, 41, 64, 0);
    let rids: Vec<RecvId> = (0..SLOTS)
        .map(|_| p.r.irecv(&[dst.recv(3)], false).unwrap().unwrap())
        .collect();
    assert_eq!(
        p.r.irecv(&[dst.recv(3)], false).unwrap(),
        None,
        "33rd receive must wait"
    );
    p.settle();
    let sid = p.s.isend(src.sge(64), 3).unwrap().unwrap();
    let mut sz = [0u32];
    wait_recv(&mut p, rids[0], &mut sz);
    wait_send(&mut p, sid);
    assert!(
        p.r.irecv(&[dst.recv(3)], false).unwrap().is_some(),
        "slot 0 is free again"
    );
}

#[test]
fn optional_completion_finishes_at_cts_but_keeps_the_slot_until_the_data_landed() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 50, 256, 0);
    let src = Buf::new(&mut p, 51, 256, 9);
    let rid = p.r.irecv(&[dst.recv(0)], true).unwrap().unwrap();
    p.settle();
    let mut sz = [0u32];
    assert!(
        p.r.test(rid, &mut sz).unwrap(),
        "done once the CTS reached the sender"
    );
    assert_eq!(sz, [256], "the posted size, since no data has landed");
    // The slot is still in use: 31 more receives fit, the 32nd waits for this one's data.
    for _ in 1..SLOTS {
        assert!(p.r.irecv(&[dst.recv(0)], true).unwrap().is_some());
    }
    assert_eq!(p.r.irecv(&[dst.recv(0)], true).unwrap(), None);
    let sid = p.s.isend(src.sge(100), 0).unwrap().unwrap();
    p.settle();
    assert!(dst.v[..100].iter().all(|&b| b == 9));
    wait_send(&mut p, sid);
    assert!(p.r.irecv(&[dst.recv(0)], true).unwrap().is_some());
}

#[test]
fn cts_completion_after_the_data_still_frees_the_slot() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 60, 32, 0);
    let src = Buf::new(&mut p, 61, 32, 1);
    let rid = p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    p.carry();
    p.deliver(0); // the sender sees the CTS; the receiver has not yet seen its CTS write complete
    let sid = p.s.isend(src.sge(32), 0).unwrap().unwrap();
    p.carry();
    // Deliver the receiver's completions data-first: the CTS write completion is first in its queue, so
    // reorder them by hand.
    let mut q: Vec<Done> = p.cq[1].drain(..).collect();
    q.reverse();
    for d in q {
        p.r.on_done(d);
    }
    let mut sz = [0u32];
    wait_recv(&mut p, rid, &mut sz);
    wait_send(&mut p, sid);
    for _ in 0..SLOTS {
        assert!(
            p.r.irecv(&[dst.recv(0)], false).unwrap().is_some(),
            "every slot free"
        );
    }
}

#[test]
fn a_send_larger_than_its_receive_is_refused() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 70, 100, 0);
    let src = Buf::new(&mut p, 71, 200, 0);
    p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    p.settle();
    let e = p.s.isend(src.sge(200), 0).unwrap_err();
    assert_eq!(e.code, crate::abi::result::INVALID_USAGE);
}

#[test]
fn a_malformed_cts_fails_the_comm_with_a_remote_error() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 80, 100, 0);
    let src = Buf::new(&mut p, 81, 100, 0);
    p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    p.settle();
    // Corrupt the announced group size in the sender's FIFO.
    p.s.block.write(24, &[0]);
    assert_eq!(
        p.s.isend(src.sge(10), 0).unwrap_err().code,
        crate::abi::result::REMOTE_ERROR
    );
    assert!(p.s.failure().is_some());
    assert!(p.s.isend(src.sge(10), 0).is_err(), "the comm stays failed");
}

#[test]
fn a_failed_completion_fails_outstanding_requests() {
    let mut p = Pair::new(1);
    let dst = Buf::new(&mut p, 90, 100, 0);
    let rid = p.r.irecv(&[dst.recv(0)], false).unwrap().unwrap();
    p.r.on_done(Done {
        qp: 0,
        wr_id: 0,
        status: Err("retry count exceeded"),
        recv: false,
        byte_len: 0,
        imm: None,
    });
    let e = p.r.test(rid, &mut [0]).unwrap_err();
    assert_eq!(e.code, crate::abi::result::REMOTE_ERROR);
    assert!(e.why.contains("retry count exceeded"));
}

#[test]
fn a_stray_size_record_is_a_protocol_error() {
    let mut p = Pair::new(1);
    p.r.on_done(Done {
        qp: 0,
        wr_id: WR_RECV,
        status: Ok(()),
        recv: true,
        byte_len: 8,
        imm: Some(5),
    });
    assert!(p.r.failure().is_some());
}

#[test]
fn connection_data_round_trips_and_versions_must_match() {
    let s = SenderInfo {
        qps: 3,
        fifo_addr: 0x1234_5678_9abc,
        fifo_rkey: 77,
    };
    assert_eq!(SenderInfo::decode(&s.encode()).unwrap(), s);
    let r = ReceiverInfo {
        sizes_addr: 0xdead_beef,
        sizes_rkey: 9,
    };
    assert_eq!(ReceiverInfo::decode(&r.encode()).unwrap(), r);
    let mut b = s.encode();
    b[0] = 99;
    assert!(
        SenderInfo::decode(&b)
            .unwrap_err()
            .why
            .contains("protocol 99")
    );
    b = s.encode();
    b[1] = 0;
    assert!(SenderInfo::decode(&b).is_err());
    assert!(ReceiverInfo::decode(&[1, 2]).is_err());
}

#[test]
fn stripes_cover_every_byte_once_at_aligned_cuts() {
    for qps in 1..=MAX_QPS {
        for size in [0usize, 1, 127, 128, 129, 1000, 65_536, 1_000_001] {
            let mut next = 0;
            for q in 0..qps {
                let (off, len) = stripe(size, q, qps);
                if len > 0 {
                    assert_eq!(off, next);
                    assert_eq!(off % STRIPE_ALIGN, 0);
                }
                next = off + len;
            }
            assert_eq!(next, size, "qps {qps} size {size}");
        }
    }
}
