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

impl Pkt {
    /// A free slot.
    const EMPTY: Self = Self {
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
        self.arena.pkts.push(Pkt::EMPTY);
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
        self.arena.push(l, i)
    }

    pub(super) fn list_pop(&mut self, l: List) -> (List, u32) {
        self.arena.pop(l)
    }
}

impl Arena {
    /// Appends packet `i` to list `l`; returns the list.
    fn push(&mut self, l: List, i: u32) -> List {
        self.pkts[i as usize].next = NONE;
        if l.tail == NONE {
            List { head: i, tail: i }
        } else {
            self.pkts[l.tail as usize].next = i;
            List {
                head: l.head,
                tail: i,
            }
        }
    }

    /// Takes the head of list `l` (`NONE` when empty); returns the list and it.
    fn pop(&mut self, l: List) -> (List, u32) {
        let i = l.head;
        if i == NONE {
            return (l, NONE);
        }
        let next = self.pkts[i as usize].next;
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

    /// Exchanges the contents of slots `a` and `b`; the list links stay with the slots, so each slot keeps its
    /// place in whatever list it is on.
    pub(super) fn swap_contents(&mut self, a: u32, b: u32) {
        let links = (self.pkts[a as usize].next, self.pkts[b as usize].next);
        self.pkts.swap(a as usize, b as usize);
        self.pkts[a as usize].next = links.0;
        self.pkts[b as usize].next = links.1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn arena(n: u32) -> Arena {
        let mut a = Arena::default();
        for k in 0..n {
            a.pkts.push(Pkt {
                tag: u64::from(k),
                ..Pkt::EMPTY
            });
        }
        a
    }

    /// A queue's tail swapped with a packet off another list (the trim victim swap, port.rs) keeps the queue
    /// whole: the tail still ends it, whatever link the other packet carried.
    #[test]
    fn swapping_a_tail_with_a_packet_of_another_list_keeps_both_lists() {
        let mut a = arena(6);
        let (mut queue, mut wire) = (List::EMPTY, List::EMPTY);
        for i in [0, 1, 2] {
            queue = a.push(queue, i);
        }
        for i in [3, 4, 5] {
            wire = a.push(wire, i);
        }
        // Packet 3 leaves the wire (its link to 4 stays behind in its slot) and takes the tail's place.
        let (w, arrived) = a.pop(wire);
        wire = w;
        a.swap_contents(queue.tail, arrived);
        let mut tags = Vec::new();
        while queue.head != NONE {
            let (q, i) = a.pop(queue);
            queue = q;
            tags.push(a.pkts[i as usize].tag);
        }
        assert_eq!(
            tags,
            [0, 1, 3],
            "the queue: its first two, then the arrival in the tail's slot"
        );
        assert_eq!(
            a.pkts[arrived as usize].tag, 2,
            "the old tail's contents went to the arrival's slot"
        );
        assert_eq!(a.pop(wire).1, 4);
    }
}
