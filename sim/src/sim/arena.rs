//! Packet slots and the FIFO lists (port queues, wires) that link them.

use super::*;

#[derive(Clone, Copy, Default)]
pub(super) struct List {
    pub(super) head: u32,
    pub(super) tail: u32,
}

impl List {
    pub(super) const EMPTY: Self = Self {
        head: NONE,
        tail: NONE,
    };
}

/// Packet slots (linked into FIFO lists through `Pkt::next`) and the side store of long control packets.
#[derive(Default)]
pub(super) struct Arena {
    pub(super) pkts: Vec<Pkt>,
    pub(super) free: Vec<u32>,
    pub(super) big: Vec<Vec<u8>>,
    pub(super) free_big: Vec<u32>,
}

impl Sim {
    pub(super) fn alloc(&mut self) -> u32 {
        if let Some(i) = self.arena.free.pop() {
            return i;
        }
        self.arena.pkts.push(Pkt {
            hdr: [0; HDR],
            tag: 0,
            arrive: 0,
            src: 0,
            dst: 0,
            path: 0,
            dloc: (0, 0, 0),
            dlen: 0,
            poff: 0,
            plen: 0,
            wire: 0,
            big: NONE,
            plane: 0,
            class: 0,
            flags: 0,
            next: NONE,
        });
        self.arena.pkts.len() as u32 - 1
    }

    pub(super) fn release(&mut self, i: u32) {
        let b = self.arena.pkts[i as usize].big;
        if b != NONE {
            self.arena.free_big.push(b);
            self.arena.pkts[i as usize].big = NONE;
        }
        self.arena.free.push(i);
    }

    pub(super) fn drop_pkt(&mut self, i: u32, why: Drop) {
        let p = &self.arena.pkts[i as usize];
        self.c.dropped_bytes += u64::from(p.wire);
        match why {
            Drop::Failure => {
                self.c.dropped_failure_pkts += 1;
                if p.class == CLASS_DATA
                    && p.flags & (F_TRIM | F_TRIM_LAST) == 0
                    && self
                        .last_down_at
                        .is_some_and(|t| self.now > t + self.cfg.settle_ps)
                {
                    self.c.lasting_data_drops += 1;
                }
            }
            Drop::Flushed => self.c.dropped_failure_pkts += 1,
            Drop::Loss => self.c.dropped_loss_pkts += 1,
            Drop::Overflow => self.c.dropped_overflow_pkts += 1,
        }
        self.release(i);
    }

    pub(super) fn list_push(&mut self, l: List, i: u32) -> List {
        self.arena.pkts[i as usize].next = NONE;
        if l.tail == NONE {
            List { head: i, tail: i }
        } else {
            self.arena.pkts[l.tail as usize].next = i;
            List {
                head: l.head,
                tail: i,
            }
        }
    }

    pub(super) fn list_pop(&mut self, l: List) -> (List, u32) {
        let i = l.head;
        if i == NONE {
            return (l, NONE);
        }
        let next = self.arena.pkts[i as usize].next;
        let l = if next == NONE {
            List::EMPTY
        } else {
            List {
                head: next,
                tail: l.tail,
            }
        };
        (l, i)
    }
}
