//! NCCL's send/receive semantics over RDMA WRITEs, sans-IO: the receiver announces each receive in a
//! clear-to-send (CTS) FIFO at the sender, the sender matches its sends against it by tag and writes the data
//! straight into the receive buffers. `spec/nccl.md` is the normative description; this module takes NCCL
//! calls and transport completions in and gives work requests ([`Op`]) out, so it is tested without a network.
//!
//! One connection has `qps` queue pairs; QP 0 also carries the CTS writes. Sequence numbers count receive
//! requests and wrap at 2^32; a slot is `seq % SLOTS`.

use std::collections::VecDeque;

use crate::ctrl::CtrlBlock;
use crate::ffi::Error;

/// Receive requests a comm may have outstanding (`NCCL_NET_MAX_REQUESTS`).
pub(crate) const SLOTS: usize = 32;
/// Receives one request may group (`maxRecvs`).
pub(crate) const MAX_RECVS: usize = 8;
/// Queue pairs one connection may stripe over.
pub(crate) const MAX_QPS: usize = 8;
/// Largest single transfer: `test` reports sizes as `int`.
pub(crate) const MAX_TRANSFER: usize = 1 << 30;
/// Stripes are cut at this alignment, so LL/LL128 lines never straddle two QPs.
const STRIPE_ALIGN: usize = 128;

/// One CTS entry on the wire (spec: NCCL-CTS-1).
const ENTRY: usize = 32;
const FIFO_SLOT: usize = ENTRY * MAX_RECVS;
const FIFO_BYTES: usize = FIFO_SLOT * SLOTS;
/// One size record: a `u64` per grouped receive (spec: NCCL-DATA-2).
const SIZES_SLOT: usize = 8 * MAX_RECVS;
const SIZES_BYTES: usize = SIZES_SLOT * SLOTS;
/// Where the size records start in a control block.
pub(crate) const SIZES_AT: usize = FIFO_BYTES;
/// Where the ready word lives in a control block, right after the size records (spec: NCCL-CONN-3).
const READY_AT: usize = FIFO_BYTES + SIZES_BYTES;
/// Bytes of each side's control block: FIFO (or CTS sources), size records (or their sources), the ready word.
pub(crate) const CTRL_BYTES: usize = READY_AT + 8;
/// The ready word's value: every byte non-zero, so a partly placed word never reads as ready.
const READY: u64 = u64::from_le_bytes([b'M', b'R', b'C', b'R', b'D', b'Y', PROTO_VERSION, 0xA5]);
/// Receive work requests kept posted per QP (twice the CTS or WRITE_WITH_IMM that can be outstanding).
const RECVS_POSTED: usize = 2 * SLOTS;

/// CTS flag: the receiver does not need a precise completion (NCCL's LL/LL128 hint, v9+).
const FLAG_OPTIONAL: u8 = 1;

/// `wr_id` kinds (top byte); the low 32 bits carry the sequence number.
const WR_DATA: u64 = 1 << 56;
const WR_CTS: u64 = 2 << 56;
const WR_RECV: u64 = 3 << 56;
const WR_READY: u64 = 4 << 56;

/// Version of the connection data and CTS format.
pub(crate) const PROTO_VERSION: u8 = 1;

/// A local buffer: address, length and the local key of its registration.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Sge {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) lkey: u32,
}

/// A work request for the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Op {
    /// RDMA WRITE (with immediate data when `imm` is set, which consumes a receive at the peer).
    Write {
        qp: usize,
        wr_id: u64,
        local: Sge,
        remote_addr: u64,
        rkey: u32,
        imm: Option<u32>,
        signaled: bool,
    },
    /// A receive with no buffer, consumed by the peer's WRITE_WITH_IMM.
    Recv { qp: usize, wr_id: u64 },
}

/// A completion from the transport.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Done {
    /// QP index within the connection.
    pub(crate) qp: usize,
    /// The work request's id.
    pub(crate) wr_id: u64,
    /// Completed successfully; otherwise the text says why.
    pub(crate) status: Result<(), &'static str>,
    /// A receive completion (a WRITE_WITH_IMM from the peer landed).
    pub(crate) recv: bool,
    /// Bytes the peer's WRITE_WITH_IMM carried.
    pub(crate) byte_len: u32,
    /// Its immediate data.
    pub(crate) imm: Option<u32>,
}

/// What the sender tells the receiver at connection time (spec: NCCL-CONN-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct SenderInfo {
    pub(crate) qps: u8,
    pub(crate) fifo_addr: u64,
    pub(crate) fifo_rkey: u32,
}

/// What the receiver tells the sender at connection time (spec: NCCL-CONN-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ReceiverInfo {
    pub(crate) sizes_addr: u64,
    pub(crate) sizes_rkey: u32,
}

impl SenderInfo {
    pub(crate) const LEN: usize = 16;

    pub(crate) fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = PROTO_VERSION;
        b[1] = self.qps;
        b[4..8].copy_from_slice(&self.fifo_rkey.to_le_bytes());
        b[8..16].copy_from_slice(&self.fifo_addr.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, Error> {
        let b: &[u8; Self::LEN] = b
            .get(..Self::LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                Error::remote(format!(
                    "connection request carries {} bytes, expected 16",
                    b.len()
                ))
            })?;
        check_version(b[0])?;
        let qps = b[1];
        if !(1..=MAX_QPS as u8).contains(&qps) {
            return Err(Error::remote(format!(
                "peer asks for {qps} QPs per connection (1..={MAX_QPS})"
            )));
        }
        Ok(Self {
            qps,
            fifo_rkey: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            fifo_addr: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        })
    }
}

impl ReceiverInfo {
    pub(crate) const LEN: usize = 16;

    pub(crate) fn encode(&self) -> [u8; Self::LEN] {
        let mut b = [0u8; Self::LEN];
        b[0] = PROTO_VERSION;
        b[4..8].copy_from_slice(&self.sizes_rkey.to_le_bytes());
        b[8..16].copy_from_slice(&self.sizes_addr.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Result<Self, Error> {
        let b: &[u8; Self::LEN] = b
            .get(..Self::LEN)
            .and_then(|s| s.try_into().ok())
            .ok_or_else(|| {
                Error::remote(format!(
                    "connection reply carries {} bytes, expected 16",
                    b.len()
                ))
            })?;
        check_version(b[0])?;
        Ok(Self {
            sizes_rkey: u32::from_le_bytes(b[4..8].try_into().expect("4 bytes")),
            sizes_addr: u64::from_le_bytes(b[8..16].try_into().expect("8 bytes")),
        })
    }
}

fn check_version(v: u8) -> Result<(), Error> {
    if v == PROTO_VERSION {
        Ok(())
    } else {
        Err(Error::remote(format!(
            "peer speaks plugin protocol {v}, this library {PROTO_VERSION}: use the same libnccl-net-mrc.so on every node"
        )))
    }
}

/// One receive announced in the FIFO (spec: NCCL-CTS-1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Entry {
    addr: u64,
    rkey: u32,
    size: u32,
    tag: i32,
    seq: u32,
    nreqs: u8,
    flags: u8,
}

impl Entry {
    fn encode(&self) -> [u8; ENTRY] {
        let mut b = [0u8; ENTRY];
        b[0..8].copy_from_slice(&self.addr.to_le_bytes());
        b[8..12].copy_from_slice(&self.rkey.to_le_bytes());
        b[12..16].copy_from_slice(&self.size.to_le_bytes());
        b[16..20].copy_from_slice(&self.tag.to_le_bytes());
        b[20..24].copy_from_slice(&self.seq.to_le_bytes());
        b[24] = self.nreqs;
        b[25] = self.flags;
        b
    }

    fn decode(b: &[u8; ENTRY]) -> Self {
        let u32_at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().expect("4 bytes"));
        Self {
            addr: u64::from_le_bytes(b[0..8].try_into().expect("8 bytes")),
            rkey: u32_at(8),
            size: u32_at(12),
            tag: u32_at(16) as i32,
            seq: u32_at(20),
            nreqs: b[24],
            flags: b[25],
        }
    }
}

/// The stripe of `size` bytes that QP `q` of `qps` carries: (offset, length).
fn stripe(size: usize, q: usize, qps: usize) -> (usize, usize) {
    let chunk = size.div_ceil(qps).div_ceil(STRIPE_ALIGN) * STRIPE_ALIGN;
    let off = (q * chunk).min(size);
    (off, chunk.min(size - off))
}

fn failed(state: &Option<Error>) -> Result<(), Error> {
    match state {
        Some(e) => Err(e.clone()),
        None => Ok(()),
    }
}

/// The sending half of a connection.
#[derive(Debug)]
pub(crate) struct SendSide {
    qps: usize,
    block: CtrlBlock,
    lkey: u32,
    peer: ReceiverInfo,
    /// The receive sequence the next sends are matched against.
    head: u32,
    /// Which sequence's CTS each FIFO slot holds (set when its WRITE_WITH_IMM completed here).
    cts: [Option<u32>; SLOTS],
    /// The head slot's entries and the sends matched to them so far.
    matching: Option<Matching>,
    /// Slots written and waiting for their completions, indexed by `seq % (2 * SLOTS)`.
    flights: Vec<Flight>,
    reqs: Vec<SendReq>,
    free: Vec<u16>,
    ops: VecDeque<Op>,
    failure: Option<Error>,
}

#[derive(Debug, Clone, Copy)]
struct Matching {
    seq: u32,
    entries: [Entry; MAX_RECVS],
    n: usize,
    /// Per entry: the request and its local buffer.
    matched: [Option<(u16, Sge)>; MAX_RECVS],
    count: usize,
}

#[derive(Debug, Clone, Copy, Default)]
struct Flight {
    seq: u32,
    left: u8,
    reqs: [u16; MAX_RECVS],
    n: u8,
    active: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum SendReq {
    Free,
    Pending { size: u32 },
    Done { size: u32 },
}

/// A send request's handle within its comm.
pub(crate) type SendId = u16;

impl SendSide {
    /// A sender whose control block is `block`, registered as `lkey` (and remotely writable: the receiver
    /// writes its CTS entries there), connected to a receiver that described itself as `peer`.
    pub(crate) fn new(qps: usize, block: CtrlBlock, lkey: u32, peer: ReceiverInfo) -> Self {
        assert!((1..=MAX_QPS).contains(&qps) && block.len() >= CTRL_BYTES);
        let n = SLOTS * MAX_RECVS * 2;
        let mut s = Self {
            qps,
            block,
            lkey,
            peer,
            head: 0,
            cts: [None; SLOTS],
            matching: None,
            flights: vec![Flight::default(); 2 * SLOTS],
            reqs: vec![SendReq::Free; n],
            free: (0..n as u16).rev().collect(),
            ops: VecDeque::new(),
            failure: None,
        };
        for _ in 0..RECVS_POSTED {
            s.ops.push_back(Op::Recv {
                qp: 0,
                wr_id: WR_RECV,
            });
        }
        // After the receives (work requests are posted in order, a full queue stops the rest), tell the receiver
        // it may announce: its CTS writes then always find a receive posted here, with no RNR retry
        // (spec: NCCL-CONN-3).
        s.block.write(READY_AT, &READY.to_le_bytes());
        s.ops.push_back(Op::Write {
            qp: 0,
            wr_id: WR_READY,
            local: Sge {
                addr: s.block.addr() + READY_AT as u64,
                len: 8,
                lkey,
            },
            remote_addr: peer.sizes_addr + SIZES_BYTES as u64,
            rkey: peer.sizes_rkey,
            imm: None,
            signaled: false,
        });
        s
    }

    /// Work requests to post, oldest first.
    pub(crate) fn ops(&mut self) -> &mut VecDeque<Op> {
        &mut self.ops
    }

    /// The first error this side met, if any.
    pub(crate) fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// `isend`: `Ok(None)` when the matching receive has not been announced yet (NCCL retries later).
    pub(crate) fn isend(&mut self, data: Sge, tag: i32) -> Result<Option<SendId>, Error> {
        failed(&self.failure)?;
        let slot = self.head as usize % SLOTS;
        if self.cts[slot] != Some(self.head) {
            return Ok(None);
        }
        let m = match self.matching {
            Some(m) => m,
            None => self.load(slot)?,
        };
        // spec: NCCL-MATCH-1
        let Some(idx) = (0..m.n).find(|&i| m.matched[i].is_none() && m.entries[i].tag == tag)
        else {
            return Ok(None);
        };
        let posted = m.entries[idx].size;
        if data.len > posted {
            // spec: NCCL-MATCH-2
            return Err(Error::usage(format!(
                "send of {} bytes (tag {tag}) is larger than the {posted}-byte receive it matches",
                data.len
            )));
        }
        let Some(id) = self.free.pop() else {
            return Ok(None);
        };
        self.reqs[id as usize] = SendReq::Pending { size: data.len };
        let mut m = m;
        m.matched[idx] = Some((id, data));
        m.count += 1;
        if m.count == m.n {
            self.write_slot(&m);
            self.matching = None;
            self.cts[slot] = None;
            self.head = self.head.wrapping_add(1);
        } else {
            self.matching = Some(m);
        }
        Ok(Some(id))
    }

    /// Reads and checks the head slot's CTS entries.
    fn load(&mut self, slot: usize) -> Result<Matching, Error> {
        let mut entries = [Entry::default(); MAX_RECVS];
        let mut raw = [0u8; ENTRY];
        self.block.read(slot * FIFO_SLOT, &mut raw);
        let first = Entry::decode(&raw);
        let n = usize::from(first.nreqs);
        if !(1..=MAX_RECVS).contains(&n) {
            return Err(self.fail(Error::remote(format!(
                "peer announced a receive of {n} buffers"
            ))));
        }
        for (i, e) in entries.iter_mut().enumerate().take(n) {
            self.block.read(slot * FIFO_SLOT + i * ENTRY, &mut raw);
            *e = Entry::decode(&raw);
            if e.seq != self.head || usize::from(e.nreqs) != n {
                return Err(self.fail(Error::remote(format!(
                    "CTS entry {i} of receive {} is inconsistent (seq {}, {} buffers)",
                    self.head, e.seq, e.nreqs
                ))));
            }
        }
        let m = Matching {
            seq: self.head,
            entries,
            n,
            matched: [None; MAX_RECVS],
            count: 0,
        };
        self.matching = Some(m);
        Ok(m)
    }

    /// Writes every matched send of a slot, striped over the QPs, each QP ending with the size record
    /// (spec: NCCL-DATA-1, NCCL-DATA-2).
    fn write_slot(&mut self, m: &Matching) {
        let slot = m.seq as usize % SLOTS;
        let mut rec = [0u8; SIZES_SLOT];
        for i in 0..m.n {
            let (_, sge) = m.matched[i].expect("every entry matched");
            rec[i * 8..i * 8 + 8].copy_from_slice(&u64::from(sge.len).to_le_bytes());
        }
        let rec_off = FIFO_BYTES + slot * SIZES_SLOT;
        self.block.write(rec_off, &rec[..m.n * 8]);
        for q in 0..self.qps {
            for i in 0..m.n {
                let (_, sge) = m.matched[i].expect("every entry matched");
                let (off, len) = stripe(sge.len as usize, q, self.qps);
                if len == 0 {
                    continue;
                }
                self.ops.push_back(Op::Write {
                    qp: q,
                    wr_id: 0,
                    local: Sge {
                        addr: sge.addr + off as u64,
                        len: len as u32,
                        lkey: sge.lkey,
                    },
                    remote_addr: m.entries[i].addr + off as u64,
                    rkey: m.entries[i].rkey,
                    imm: None,
                    signaled: false,
                });
            }
            self.ops.push_back(Op::Write {
                qp: q,
                wr_id: WR_DATA | u64::from(m.seq),
                local: Sge {
                    addr: self.block.addr() + rec_off as u64,
                    len: (m.n * 8) as u32,
                    lkey: self.lkey,
                },
                remote_addr: self.peer.sizes_addr + (slot * SIZES_SLOT) as u64,
                rkey: self.peer.sizes_rkey,
                imm: Some(m.seq),
                signaled: true,
            });
        }
        let mut reqs = [0u16; MAX_RECVS];
        for (r, mt) in reqs.iter_mut().zip(&m.matched[..m.n]) {
            *r = mt.expect("every entry matched").0;
        }
        self.flights[m.seq as usize % (2 * SLOTS)] = Flight {
            seq: m.seq,
            left: self.qps as u8,
            reqs,
            n: m.n as u8,
            active: true,
        };
    }

    /// A completion of this side's QPs.
    pub(crate) fn on_done(&mut self, d: Done) {
        if self.failure.is_some() {
            return;
        }
        if let Err(why) = d.status {
            self.fail(Error::remote(format!("QP {} failed: {why}", d.qp)));
            return;
        }
        if d.recv {
            // A CTS landed in the FIFO (spec: NCCL-CTS-2).
            let Some(seq) = d.imm else {
                self.fail(Error::remote(
                    "a write without a sequence number consumed a CTS receive",
                ));
                return;
            };
            if seq.wrapping_sub(self.head) as usize >= SLOTS {
                self.fail(Error::remote(format!(
                    "CTS for receive {seq} outside the window starting at {}",
                    self.head
                )));
                return;
            }
            self.cts[seq as usize % SLOTS] = Some(seq);
            self.ops.push_back(Op::Recv {
                qp: d.qp,
                wr_id: WR_RECV,
            });
            return;
        }
        if d.wr_id & (0xff << 56) == WR_DATA {
            let seq = d.wr_id as u32;
            let f = &mut self.flights[seq as usize % (2 * SLOTS)];
            if f.active && f.seq == seq {
                f.left -= 1;
                if f.left == 0 {
                    f.active = false;
                    let f = *f;
                    for &r in &f.reqs[..usize::from(f.n)] {
                        if let SendReq::Pending { size } = self.reqs[r as usize] {
                            self.reqs[r as usize] = SendReq::Done { size };
                        }
                    }
                }
            }
        }
    }

    /// `test` of a send: `Some(size)` once done (the request is then freed).
    pub(crate) fn test(&mut self, id: SendId) -> Result<Option<u32>, Error> {
        match self.reqs.get(id as usize) {
            Some(SendReq::Done { size }) => {
                let size = *size;
                self.reqs[id as usize] = SendReq::Free;
                self.free.push(id);
                Ok(Some(size))
            }
            Some(SendReq::Pending { .. }) => {
                failed(&self.failure)?;
                Ok(None)
            }
            _ => Err(Error::usage(format!(
                "send request {id} is not outstanding"
            ))),
        }
    }

    fn fail(&mut self, e: Error) -> Error {
        if self.failure.is_none() {
            self.failure = Some(e.clone());
        }
        e
    }
}

/// The receiving half of a connection.
#[derive(Debug)]
pub(crate) struct RecvSide {
    qps: usize,
    block: CtrlBlock,
    lkey: u32,
    peer: SenderInfo,
    next: u32,
    slots: [RecvSlot; SLOTS],
    ops: VecDeque<Op>,
    /// The sender's ready word has landed (spec: NCCL-CONN-3); until then CTS writes wait in `held`.
    ready: bool,
    held: VecDeque<Op>,
    failure: Option<Error>,
}

#[derive(Debug, Clone, Copy, Default)]
struct RecvSlot {
    seq: u32,
    n: u8,
    posted: [u32; MAX_RECVS],
    sizes: [u32; MAX_RECVS],
    optional: bool,
    cts_done: bool,
    /// Size records (one per QP) that have landed.
    records: u8,
    /// In use: from `irecv` until the data landed and `test` reported it.
    busy: bool,
    reported: bool,
}

/// A receive request's handle within its comm: the slot and the sequence it was posted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvId {
    pub(crate) slot: u8,
    pub(crate) seq: u32,
}

/// One buffer of a grouped receive.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct RecvBuf {
    pub(crate) addr: u64,
    pub(crate) size: usize,
    pub(crate) rkey: u32,
    pub(crate) tag: i32,
}

impl RecvSide {
    /// A receiver whose control block is `block`, registered as `lkey` (and remotely writable: the sender
    /// writes size records there), connected to a sender that described itself as `peer`.
    pub(crate) fn new(block: CtrlBlock, lkey: u32, peer: SenderInfo) -> Self {
        let qps = usize::from(peer.qps).clamp(1, MAX_QPS);
        assert!(block.len() >= CTRL_BYTES);
        let mut ops = VecDeque::new();
        for q in 0..qps {
            for _ in 0..RECVS_POSTED {
                ops.push_back(Op::Recv {
                    qp: q,
                    wr_id: WR_RECV,
                });
            }
        }
        Self {
            qps,
            block,
            lkey,
            peer,
            next: 0,
            slots: [RecvSlot::default(); SLOTS],
            ops,
            ready: false,
            held: VecDeque::new(),
            failure: None,
        }
    }

    /// QPs the connection stripes over (as the sender asked).
    pub(crate) fn qps(&self) -> usize {
        self.qps
    }

    /// Where the sender writes size records.
    #[cfg(test)]
    pub(crate) fn sizes_addr(&self) -> u64 {
        self.block.addr() + FIFO_BYTES as u64
    }

    /// Work requests to post, oldest first. Announcements wait until the sender said it is ready.
    pub(crate) fn ops(&mut self) -> &mut VecDeque<Op> {
        if !self.ready && self.block.read_u64_landing(READY_AT) == READY {
            self.ready = true;
            self.ops.append(&mut self.held);
        }
        &mut self.ops
    }

    /// Whether the sender's ready word has been seen (announcements flow).
    #[cfg(test)]
    pub(crate) fn is_ready(&self) -> bool {
        self.ready
    }

    /// The first error this side met, if any.
    pub(crate) fn failure(&self) -> Option<&Error> {
        self.failure.as_ref()
    }

    /// `irecv` of `bufs.len()` grouped buffers; `Ok(None)` when the slot is still in use (NCCL retries).
    /// `optional`: NCCL's hint that the data carries its own completion flags.
    pub(crate) fn irecv(
        &mut self,
        bufs: &[RecvBuf],
        optional: bool,
    ) -> Result<Option<RecvId>, Error> {
        failed(&self.failure)?;
        if bufs.is_empty() || bufs.len() > MAX_RECVS {
            return Err(Error::invalid(format!(
                "irecv of {} buffers (1..={MAX_RECVS})",
                bufs.len()
            )));
        }
        let slot = self.next as usize % SLOTS;
        if self.slots[slot].busy {
            return Ok(None);
        }
        let seq = self.next;
        let mut s = RecvSlot {
            seq,
            n: bufs.len() as u8,
            optional,
            busy: true,
            ..RecvSlot::default()
        };
        for (i, b) in bufs.iter().enumerate() {
            // A receive may be larger than any send; announce at most what a send can be.
            let size = b.size.min(MAX_TRANSFER) as u32;
            s.posted[i] = size;
            let e = Entry {
                addr: b.addr,
                rkey: b.rkey,
                size,
                tag: b.tag,
                seq,
                nreqs: bufs.len() as u8,
                flags: if optional { FLAG_OPTIONAL } else { 0 },
            };
            self.block.write(slot * FIFO_SLOT + i * ENTRY, &e.encode());
        }
        self.slots[slot] = s;
        // spec: NCCL-CTS-1, NCCL-CONN-3
        let q = if self.ready {
            &mut self.ops
        } else {
            &mut self.held
        };
        q.push_back(Op::Write {
            qp: 0,
            wr_id: WR_CTS | u64::from(seq),
            local: Sge {
                addr: self.block.addr() + (slot * FIFO_SLOT) as u64,
                len: (bufs.len() * ENTRY) as u32,
                lkey: self.lkey,
            },
            remote_addr: self.peer.fifo_addr + (slot * FIFO_SLOT) as u64,
            rkey: self.peer.fifo_rkey,
            imm: Some(seq),
            signaled: true,
        });
        self.next = seq.wrapping_add(1);
        Ok(Some(RecvId {
            slot: slot as u8,
            seq,
        }))
    }

    /// A completion of this side's QPs.
    pub(crate) fn on_done(&mut self, d: Done) {
        if self.failure.is_some() {
            return;
        }
        if let Err(why) = d.status {
            self.fail(Error::remote(format!("QP {} failed: {why}", d.qp)));
            return;
        }
        if !d.recv {
            if d.wr_id & (0xff << 56) == WR_CTS {
                let seq = d.wr_id as u32;
                let s = &mut self.slots[seq as usize % SLOTS];
                if s.busy && s.seq == seq {
                    s.cts_done = true;
                    if s.reported && s.records as usize == self.qps {
                        s.busy = false;
                    }
                }
            }
            return;
        }
        // A size record landed: all data of that slot on this QP is in place (spec: NCCL-DATA-2).
        self.ops.push_back(Op::Recv {
            qp: d.qp,
            wr_id: WR_RECV,
        });
        let Some(seq) = d.imm else {
            self.fail(Error::remote(
                "a write without a sequence number consumed a receive",
            ));
            return;
        };
        let slot = seq as usize % SLOTS;
        let s = self.slots[slot];
        if !s.busy
            || s.seq != seq
            || s.records as usize >= self.qps
            || d.byte_len != u32::from(s.n) * 8
        {
            self.fail(Error::remote(format!(
                "unexpected size record for receive {seq} ({} bytes)",
                d.byte_len
            )));
            return;
        }
        let mut s = s;
        s.records += 1;
        if s.records as usize == self.qps {
            let mut rec = [0u8; SIZES_SLOT];
            self.block.read(
                FIFO_BYTES + slot * SIZES_SLOT,
                &mut rec[..usize::from(s.n) * 8],
            );
            for i in 0..usize::from(s.n) {
                let size = u64::from_le_bytes(rec[i * 8..i * 8 + 8].try_into().expect("8 bytes"));
                if size > u64::from(s.posted[i]) {
                    self.fail(Error::remote(format!(
                        "peer reports {size} bytes for a {}-byte receive",
                        s.posted[i]
                    )));
                    return;
                }
                s.sizes[i] = size as u32;
            }
            if s.reported && s.cts_done {
                s.busy = false;
            }
        }
        self.slots[slot] = s;
    }

    /// `test` of a receive: once done, the received size of each grouped buffer is written to `sizes` and
    /// `true` returned. An optional-completion receive is done once its CTS reached the sender; it then
    /// reports the posted sizes unless the data had already landed (spec: NCCL-HINT-1).
    pub(crate) fn test(&mut self, id: RecvId, sizes: &mut [u32]) -> Result<bool, Error> {
        let s = self
            .slots
            .get_mut(usize::from(id.slot))
            .filter(|s| s.busy && !s.reported && s.seq == id.seq)
            .ok_or_else(|| {
                Error::usage(format!("receive request {} is not outstanding", id.seq))
            })?;
        let landed = s.records as usize == self.qps;
        let done = landed || (s.optional && s.cts_done);
        if !done {
            failed(&self.failure)?;
            return Ok(false);
        }
        let n = usize::from(s.n);
        let from = if landed { &s.sizes } else { &s.posted };
        for (o, v) in sizes.iter_mut().zip(&from[..n]) {
            *o = *v;
        }
        s.reported = true;
        if landed && s.cts_done {
            s.busy = false;
        }
        Ok(true)
    }

    /// Buffers the receive `id` groups.
    pub(crate) fn count(&self, id: RecvId) -> usize {
        self.slots
            .get(usize::from(id.slot))
            .map_or(0, |s| usize::from(s.n))
    }

    fn fail(&mut self, e: Error) {
        if self.failure.is_none() {
            self.failure = Some(e);
        }
    }
}

#[cfg(test)]
mod tests;
