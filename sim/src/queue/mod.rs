//! The event queue: a calendar on integer time, exact and deterministic.
//!
//! Simulated time never goes back, so a monotone priority queue is enough: a calendar (timing wheel) of
//! short slots, each a list of the events due in it in push order; the clock drains one slot at a time and
//! sorts only that slot's events. An event is stored once and never moved until its slot comes (a radix heap
//! moved each event through about five buckets and grew and copied their vectors as it went: with the tie
//! sort, 1,430 M instructions on a short bench against 1,140 M for this calendar and its sort).
//!
//! Ties at equal time pop in causal FIFO order (`Cause`): the event scheduled at the earlier simulated time
//! first, then the one whose scheduler was scheduled earlier, and so on four events back; then by the setup
//! event (failure action or transfer start) the event descends from, in setup order; then in the order its
//! scheduler pushed it; last by the event's key (the payload under a mask that leaves out hints, permuted per
//! time: `tie_key`). That is what insertion order means in a sequential FIFO queue (the event created
//! earlier goes first, and events created at the same instant follow their creators' order), but taken from
//! simulated times only: a partition of a parallel run (sim/par.rs) inserts events in another order than a
//! sequential run, and the cause and key are what both agree on, so every thread count gives the same run.
//! Neither a per-time permutation alone (a QP's packets get a new rank at every hop, so its paths' RTT
//! estimates spread and losses are found late) nor a fixed component order (the same inputs lose every tie)
//! matched the FIFO queue's results.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use crate::prefetch;

/// Where an event comes from: the time at which it was scheduled, the gaps back to the times at which its
/// scheduler, its scheduler's scheduler... were scheduled, the setup event at the root of that chain (its rank
/// in setup order), and the rank of the push among its scheduler's pushes. A function of simulated history
/// only; it travels with a packet handed to another partition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Cause {
    created: u64,
    up: Rank,
}

/// The order of an event among those at its time: a smaller rank pops first, as the earlier insertion did in
/// a FIFO queue. Gaps are `u32::MAX` minus the gap in ps (saturated at 4.3 ms), so that the event scheduled
/// longer ago sorts first; two of them to a word, so that ranks compare as three integers and an event takes
/// 40 bytes. Four scheduling times back (fid-slow-spine-1024's tail needed 4: with 1 or 2 its p99 or max FCT
/// slowdown broke its bound at some seeds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Rank {
    /// How long ago the event was scheduled (high half), and its scheduler (low half).
    near: u64,
    /// The gaps of the two schedulers before (high half nearer).
    far: u64,
    /// The rank of the chain's setup event (high half), and of the push among its scheduler's (low half).
    origin: u64,
}

const LOW: u64 = 0xFFFF_FFFF;

fn inverted_gap(from: u64, to: u64) -> u64 {
    u64::from(u32::MAX - to.saturating_sub(from).min(u64::from(u32::MAX)) as u32)
}

impl Rank {
    /// The rank of an event at `t` with cause `c`.
    #[inline]
    fn of(t: u64, c: Cause) -> Self {
        Rank {
            near: inverted_gap(c.created, t) << 32 | (c.up.near & LOW),
            ..c.up
        }
    }

    /// The rank (but for its age) of an event scheduled by the event of this rank: its gaps move one place
    /// back, the last falls off.
    #[inline]
    fn child(self, seq: u32) -> Self {
        Rank {
            near: self.near >> 32,
            far: self.near << 32 | self.far >> 32,
            origin: (self.origin & !LOW) | u64::from(seq),
        }
    }
}

/// A pending event: time in ps, rank among its time's events, payload.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Default)]
struct Ev {
    t: u64,
    rank: Rank,
    e: u64,
}

/// How far past an append an event list is fetched for writing: at 8,192 hosts the queue appends to lines last
/// touched a phase before (sim/phases.rs), and a store to a line not in cache waits for it, its followers behind.
const WRITE_AHEAD: usize = 4;

/// Lines of the next chunk of a slot's list fetched while the queue drains one.
const READ_AHEAD_LINES: usize = 4;

/// Events per chunk of a slot's list. A run by position (sim/window.rs) fills 4-ns slots with about a thousand
/// events each at 8,192 hosts and appends to them position by position: 32 rather than 8 to a chunk cut CPU per
/// event by 10% (`sim/cpu-per-event.sh 3`, one sitting: 324.6 -> 291.0 ns at 8K, 186.6 -> 168.1 at 1K).
const CHUNK: usize = 32;

/// A piece of a slot's list: events in push order, and the next chunk. Full but for the list's last, whose
/// length the list keeps.
#[derive(Debug, Clone, Copy)]
struct Chunk {
    evs: [Ev; CHUNK],
    next: u32,
}

/// A slot's list: its first and last chunk, and how many events the last holds. The length is kept here, with
/// the list, and not in the chunk: an append then touches only the line it writes (read from the chunk, it was
/// a second miss per append at 8,192 hosts, where the chunk a window appends to was written a window before).
#[derive(Debug, Clone, Copy)]
struct List {
    head: u32,
    tail: u32,
    tail_len: u32,
}

impl List {
    const EMPTY: List = List {
        head: NIL,
        tail: NIL,
        tail_len: 0,
    };

    /// How many events chunk `c` of this list holds.
    #[inline]
    fn len_of(&self, c: u32) -> usize {
        if c == self.tail {
            self.tail_len as usize
        } else {
            CHUNK
        }
    }
}

/// An event taken out of the queue before its turn ([`EventQueue::drain_before`]): its time, payload and what
/// orders it among events of equal time (as the queue would pop it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Due(Node);

impl Due {
    /// Its time in ps.
    #[inline]
    pub fn t(&self) -> u64 {
        self.0.t
    }

    /// Its payload.
    #[inline]
    pub fn e(&self) -> u64 {
        self.0.e
    }
}

/// An event of a drained slot, with its tie key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Node {
    t: u64,
    rank: Rank,
    tie: u64,
    e: u64,
}

/// The order of an event among those at time `t`: its key's high half (the simulator's event kind) first, then
/// its low half (the component) under a permutation that changes with the time, so that ties do not always
/// favour the lowest-numbered port or host (a fixed order would put the same flows last at every tie, as a
/// seeded one does not). A bijection for each `t`: equal tie keys mean equal keys.
pub fn tie_key(t: u64, key: u64) -> u64 {
    permuted(tie_hash(t), key)
}

/// The per-time part of `tie_key`.
#[inline]
fn tie_hash(t: u64) -> u32 {
    let mut h = t.wrapping_add(0x9E37_79B9_7F4A_7C15);
    h = (h ^ (h >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    h ^= h >> 31;
    h as u32
}

#[inline]
fn permuted(h: u32, key: u64) -> u64 {
    let lo = (key as u32 ^ h).wrapping_mul(0x9E37_79B1);
    (key & !LOW) | u64::from(lo)
}

/// Slot width: 2^SHIFT ps (256 ps: narrow enough that a slot seldom holds two times; 1 ns slots held two or
/// more in a third of bench-leafspine-1024-perm's, 128 ps in 2%, for the same instruction count as 256).
const SHIFT: u32 = 8;

/// Slots in the wheel: it holds events up to 2^24 ps (16.8 µs) ahead of its first slot; later ones (long
/// timers, 0.3% of the bench's events) wait in `far` (most are 10 ns to 2 µs ahead: serializations and link
/// latencies).
const SLOTS: u64 = 1 << 16;
const NIL: u32 = u32::MAX;

/// Bytes a queue holds however few events it has: its slots' lists and the bitmap of those in use (the memory
/// estimate counts them, src/plan.rs).
pub const WHEEL_BYTES: u64 = SLOTS * size_of::<List>() as u64 + Bitmap::bytes(SLOTS);

/// The event queue: a calendar of 256-ps slots (4 ns in a run by position, sim/window.rs).
///
/// An event goes once into the list of its time's slot (no moves, no comparisons at push); a slot is drained
/// into `drained` when the clock reaches it and sorted there, nearly sorted already because events are pushed
/// in about their causal order. A slot's list is a chain of chunks of `CHUNK` events from one pool, so no
/// allocation grows or moves as the queue's shape changes, and a drain reads whole chunks (one event per
/// slab node was a cache miss per event at 8,192 hosts).
#[derive(Debug)]
pub struct EventQueue {
    /// Slot width: 2^shift ps.
    shift: u32,
    /// Events of drained slots.
    drained: Vec<Node>,
    /// Their order (indices into `drained`) from `head` on (those before it popped).
    now: Vec<u32>,
    head: usize,
    /// Slot lists by slot number modulo `SLOTS`, for slots `cur..cur + SLOTS`.
    lists: Vec<List>,
    /// Which lists are not empty.
    occupied: Bitmap,
    /// The first slot not drained yet.
    cur: u64,
    chunks: Vec<Chunk>,
    /// Free chunks, the last freed last (a stack apart from the chunks: taking one reads no cold chunk).
    free: Vec<u32>,
    /// Events past the wheel's end, moved into the wheel as `cur` moves.
    far: BinaryHeap<Reverse<Ev>>,
    /// Events pushed into slots already drained, in pop order, in two lanes ([`set_late_lane`]).
    ///
    /// [`set_late_lane`]: Self::set_late_lane
    late: [VecDeque<Node>; 2],
    /// The payload bits (mask, value) of the events of the second lane.
    lane: (u64, u64),
    /// Time of the event popped last.
    last: u64,
    /// The rank of the event popped last (what an event scheduled now descends from).
    popped: Rank,
    /// Pushes (and handed-over causes) since the last pop.
    seq: u32,
    len: usize,
    /// The bits of a payload that order events at equal time.
    key_mask: u64,
}

impl Default for EventQueue {
    fn default() -> Self {
        Self::new(u64::MAX)
    }
}

impl Ord for Node {
    fn cmp(&self, o: &Self) -> std::cmp::Ordering {
        self.key().cmp(&o.key())
    }
}

impl PartialOrd for Node {
    fn partial_cmp(&self, o: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(o))
    }
}

impl Node {
    /// What `push_late` inserts to make room: a constant, so that no event is copied out of the stack.
    const ZERO: Node = Node {
        t: 0,
        rank: Rank {
            near: 0,
            far: 0,
            origin: 0,
        },
        tie: 0,
        e: 0,
    };

    /// What orders events pushed at one instant by parents alike in all but the oldest gap: time, the age and
    /// the three gaps a child keeps. Pushes come in their parents' pop order, which sorts by this first.
    #[inline]
    fn major(&self) -> (u64, u64, u64) {
        (self.t, self.rank.near, self.rank.far)
    }

    /// The rest of the order: setup event, push rank, tie key, payload.
    #[inline]
    fn minor(&self) -> (u64, u64, u64) {
        (self.rank.origin, self.tie, self.e)
    }

    /// The full order: time, rank, tie key, payload.
    #[inline]
    fn key(&self) -> ((u64, u64, u64), (u64, u64, u64)) {
        (self.major(), self.minor())
    }

    /// `ev` with its tie key, `h` being `tie_hash(ev.t)`.
    #[inline(always)]
    fn of(ev: Ev, h: u32, key_mask: u64) -> Self {
        Node {
            t: ev.t,
            rank: ev.rank,
            tie: permuted(h, ev.e & key_mask),
            e: ev.e,
        }
    }
}

/// Sorts the nodes `v` by their `key`, fast when they are nearly sorted already: events reach the current
/// time in about their order (a sequential run pushes them in time order, and an event's pushes follow its
/// own order), so an insertion sort (binary search, one move per event out of place) is cheap; one that would
/// move too many (a partition's handed-over events) falls back to a full sort. Nearly all that is out of
/// place in a sequential run is so among events of equal `major` (siblings' setup events in the order of the
/// gap they dropped), so it is searched for among those by `minor` alone. Nodes, not events, move: 4 bytes.
fn sort_nearly_sorted(v: &mut [u32], nodes: &[Node]) {
    let at = |i: u32| &nodes[i as usize];
    let mut budget = 32 * v.len() + 256;
    // v[group..i] share a major key.
    let mut group = 0;
    for i in 1..v.len() {
        let x = v[i];
        let (nx, mx, my) = (at(x), at(x).major(), at(v[i - 1]).major());
        let j = if mx == my {
            if nx.minor() >= at(v[i - 1]).minor() {
                continue;
            }
            group + v[group..i - 1].partition_point(|&y| at(y).minor() <= nx.minor())
        } else if mx > my {
            group = i;
            continue;
        } else {
            v[..i - 1].partition_point(|&y| at(y).key() <= nx.key())
        };
        if i - j > budget {
            // Equal keys are equal events, so a stable sort gives the same order; it finds the sorted runs that a
            // slot's pushes come in (at 8,192 hosts a slot can hold 5,000 events in lockstep, which this takes): 9%
            // fewer instructions for a short scale-8192-perm than the unstable sort.
            v.sort_by_key(|&y| at(y).key());
            return;
        }
        budget -= i - j;
        v.copy_within(j..i, j + 1);
        v[j] = x;
        if mx != my {
            let last = at(v[i]).major();
            group = i - v[..i]
                .iter()
                .rev()
                .take_while(|&&y| at(y).major() == last)
                .count();
        }
    }
}

/// One bit per slot, with a summary word per 4,096 slots for the search.
#[derive(Debug)]
struct Bitmap {
    words: Vec<u64>,
    summary: Vec<u64>,
}

impl Bitmap {
    fn new(bits: u64) -> Self {
        Self {
            words: vec![0; (bits / 64) as usize],
            summary: vec![0; (bits / 4096) as usize],
        }
    }

    /// What [`new`](Self::new)`(bits)` allocates.
    const fn bytes(bits: u64) -> u64 {
        (bits / 64 + bits / 4096) * 8
    }

    #[inline]
    fn set(&mut self, i: usize) {
        self.words[i / 64] |= 1 << (i % 64);
        self.summary[i / 4096] |= 1 << (i / 64 % 64);
    }

    #[inline]
    fn clear(&mut self, i: usize) {
        let w = &mut self.words[i / 64];
        *w &= !(1 << (i % 64));
        if *w == 0 {
            self.summary[i / 4096] &= !(1 << (i / 64 % 64));
        }
    }

    /// The first set bit at `from` or after.
    fn first_from(&self, from: usize) -> Option<usize> {
        let w = from / 64;
        let bits = *self.words.get(w)? & (u64::MAX << (from % 64));
        if bits != 0 {
            return Some(w * 64 + bits.trailing_zeros() as usize);
        }
        let next = w + 1;
        let mut s = next / 64;
        let mut mask = u64::MAX.checked_shl((next % 64) as u32).unwrap_or(0);
        while let Some(&sum) = self.summary.get(s) {
            let m = sum & mask;
            if m != 0 {
                let w = s * 64 + m.trailing_zeros() as usize;
                return Some(w * 64 + self.words[w].trailing_zeros() as usize);
            }
            s += 1;
            mask = u64::MAX;
        }
        None
    }
}

impl EventQueue {
    /// An empty queue at time 0; events at equal time pop by cause, then in the order of `payload & key_mask`.
    pub fn new(key_mask: u64) -> Self {
        Self::with_slot_shift(key_mask, SHIFT)
    }

    /// An empty queue whose slots are 2^`shift` ps wide. Only speed depends on the width: a run by position
    /// (sim/window.rs) sorts no slot, and wide slots keep the lists it appends to few.
    pub fn with_slot_shift(key_mask: u64, shift: u32) -> Self {
        Self {
            shift,
            drained: Vec::new(),
            now: Vec::new(),
            head: 0,
            lists: vec![List::EMPTY; SLOTS as usize],
            occupied: Bitmap::new(SLOTS),
            cur: 0,
            chunks: Vec::new(),
            free: Vec::new(),
            far: BinaryHeap::new(),
            late: [VecDeque::new(), VecDeque::new()],
            lane: (0, 1),
            last: 0,
            popped: Rank::default(),
            seq: 0,
            len: 0,
            key_mask,
        }
    }

    /// Its slot width, log2 ps.
    pub fn shift(&self) -> u32 {
        self.shift
    }

    /// The start of the slot that holds time `t`.
    pub fn slot_start(&self, t: u64) -> u64 {
        t >> self.shift << self.shift
    }

    /// Pending events.
    pub fn len(&self) -> usize {
        self.len
    }

    /// No pending events.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The cause of the next event scheduled by the event popped last.
    #[inline]
    pub fn cause(&mut self) -> Cause {
        self.seq += 1;
        Cause {
            created: self.last,
            up: self.popped.child(self.seq),
        }
    }

    /// Adds event `e` at time `t`, scheduled now by the event popped last; a time before that event's is
    /// taken as its time.
    #[inline]
    pub fn push(&mut self, t: u64, e: u64) {
        let c = self.cause();
        self.push_caused(t, e, c);
    }

    /// Adds event `e`, known before the run, at time `t`: the root of its descendants' causes, `root` its
    /// rank among such events (every partition must give an event the same).
    pub fn push_root(&mut self, t: u64, e: u64, root: u32) {
        let mut c = Cause::default();
        c.up.origin = u64::from(root) << 32;
        self.push_caused(t, e, c);
    }

    /// Adds event `e` at time `t` with the cause it got where it was scheduled (another partition).
    ///
    /// Always inlined, and so are `append` and `push_late`: otherwise the event went through the stack, and
    /// its copy into the queue (wide loads of narrow stores, which cannot forward) waited until every earlier
    /// store had reached the cache, at 8,192 hosts many of them misses (perf: 30 ns per event in this function
    /// alone; `sim/cpu-per-event.sh 3`, one sitting: 8K 238.2 -> 229.9 ns per event, 1K 147.4 -> 137.9).
    #[inline(always)]
    pub fn push_caused(&mut self, t: u64, e: u64, cause: Cause) {
        let t = t.max(self.last);
        let ev = Ev {
            t,
            rank: Rank::of(t, cause),
            e,
        };
        self.len += 1;
        let s = t >> self.shift;
        if s < self.cur {
            self.push_late(ev);
        } else if s - self.cur < SLOTS {
            self.append(s, ev);
        } else {
            self.far.push(Reverse(ev));
        }
    }

    /// Appends `ev` to slot `s`'s list.
    #[inline(always)]
    fn append(&mut self, s: u64, ev: Ev) {
        let i = (s % SLOTS) as usize;
        let list = &mut self.lists[i];
        if (list.tail_len as usize) < CHUNK
            && let Some(c) = self.chunks.get_mut(list.tail as usize)
        {
            c.evs[list.tail_len as usize] = ev;
            list.tail_len += 1;
            prefetch::line_for_write(
                c.evs
                    .as_ptr()
                    .wrapping_add(list.tail_len as usize + WRITE_AHEAD),
            );
            return;
        }
        let c = match self.free.pop() {
            Some(c) => {
                if let Some(&n) = self.free.last()
                    && let Some(next) = self.chunks.get(n as usize)
                {
                    prefetch::line_for_write(next.evs.as_ptr());
                }
                let to = &mut self.chunks[c as usize];
                to.evs[0] = ev;
                to.next = NIL;
                c
            }
            None => {
                let mut chunk = Chunk {
                    evs: [Ev::default(); CHUNK],
                    next: NIL,
                };
                chunk.evs[0] = ev;
                self.chunks.push(chunk);
                (self.chunks.len() - 1) as u32
            }
        };
        let list = &mut self.lists[i];
        if list.tail == NIL {
            *list = List {
                head: c,
                tail: c,
                tail_len: 1,
            };
            self.occupied.set(i);
        } else {
            self.chunks[list.tail as usize].next = c;
            list.tail = c;
            list.tail_len = 1;
        }
    }

    /// Adds an event to a slot already drained: a time before the slot the wheel is at. Rare in time order
    /// (most events are scheduled further ahead than the slot's end); in a window run by position
    /// (sim/window.rs), every event scheduled inside the window.
    #[inline(always)]
    fn push_late(&mut self, ev: Ev) {
        let node = Node::of(ev, tie_hash(ev.t), self.key_mask);
        let key = node.key();
        let late = &mut self.late[usize::from(ev.e & self.lane.0 == self.lane.1)];
        // Pushed in about time order (from events that pop in time order): at or near the back, most often at
        // it (a lane of arrivals always). Else the search is written out so that the event stays in registers:
        // `partition_point` takes it by reference.
        if late.back().is_none_or(|b| b.key() <= key) {
            late.push_back(node);
            return;
        }
        let (mut lo, mut hi) = (0, late.len());
        while lo < hi {
            let mid = (lo + hi) / 2;
            if late[mid].key() <= key {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if lo == late.len() {
            late.push_back(node);
        } else {
            // `insert` takes its value through memory as well: make room with a constant, then store the event.
            late.insert(lo, Node::ZERO);
            late[lo] = node;
        }
    }

    /// Events whose payload has `value` under `mask` go to a lane of late events of their own: in a window of
    /// two lookaheads (sim/phases.rs), arrivals scheduled a link's latency ahead are half of what a group pushes
    /// late and come in time order; among them, each end of serialization went in the middle, moving a
    /// thousand events (at 1,024 hosts, 8% of the run in `memmove`).
    pub fn set_late_lane(&mut self, mask: u64, value: u64) {
        debug_assert!(self.late.iter().all(VecDeque::is_empty));
        self.lane = (mask, value);
    }

    /// The first late event, and its lane.
    #[inline]
    fn late_front(&self) -> Option<(Node, usize)> {
        match (self.late[0].front(), self.late[1].front()) {
            (Some(&a), Some(&b)) => Some(if b < a { (b, 1) } else { (a, 0) }),
            (Some(&a), None) => Some((a, 0)),
            (None, Some(&b)) => Some((b, 1)),
            (None, None) => None,
        }
    }

    /// Time of the next event, without moving the queue's clock (a parallel run may still push events
    /// earlier than it, but not earlier than the last one popped).
    pub fn next_time(&self) -> Option<u64> {
        let late = self.late_front().map(|(n, _)| n.t);
        if let Some(&n) = self.now.get(self.head) {
            return Some(late.map_or(self.drained[n as usize].t, |l| {
                l.min(self.drained[n as usize].t)
            }));
        }
        if late.is_some() {
            return late;
        }
        match self.next_slot() {
            Some(s) => {
                let list = self.lists[(s % SLOTS) as usize];
                let mut c = list.head;
                let mut min = u64::MAX;
                while c != NIL {
                    let chunk = &self.chunks[c as usize];
                    min = chunk.evs[..list.len_of(c)]
                        .iter()
                        .fold(min, |m, ev| m.min(ev.t));
                    c = chunk.next;
                }
                Some(min)
            }
            None => self.far.peek().map(|r| r.0.t),
        }
    }

    /// The first slot from `cur` on with events in the wheel.
    #[inline]
    fn next_slot(&self) -> Option<u64> {
        let from = (self.cur % SLOTS) as usize;
        let i = self
            .occupied
            .first_from(from)
            .or_else(|| self.occupied.first_from(0))?;
        Some(self.cur + (i as u64).wrapping_sub(from as u64) % SLOTS)
    }

    /// Removes the next event: (time, payload).
    #[inline]
    pub fn pop(&mut self) -> Option<(u64, u64)> {
        self.pop_before(u64::MAX)
    }

    /// Removes the next event if its time is before `end`: (time, payload).
    #[inline]
    pub fn pop_before(&mut self, end: u64) -> Option<(u64, u64)> {
        let (n, late) = self.next_before(end)?;
        self.remove_next(late);
        self.resume(&Due(n));
        Some((n.t, n.e))
    }

    /// Removes the event `next_drained` named: the front of the late events or of the drained slot.
    #[inline]
    fn remove_next(&mut self, late: Option<usize>) {
        if let Some(lane) = late {
            self.late[lane].pop_front();
        } else {
            self.head += 1;
        }
        self.len -= 1;
    }

    /// Makes `d` the event popped last: the one that events pushed from now on descend from.
    #[inline]
    pub fn resume(&mut self, d: &Due) {
        self.last = d.0.t;
        self.popped = d.0.rank;
        self.seq = 0;
    }

    /// Takes every event before `cut` (a slot's start, [`slot_start`](Self::slot_start)) out of the queue into
    /// `groups`, each into the group `group` names for its payload, in no set order: each slot's events in push
    /// order, not sorted (the caller sorts each group). Events are made current with
    /// [`resume`](Self::resume) as they run; what they push before `cut` is late, handed out by
    /// [`pop_late`](Self::pop_late).
    ///
    /// The queue pushes each event into its group itself, from registers: handed to a caller's closure, an
    /// event went through memory and its copy waited for every earlier store (see `push_caused`; 15 ns per
    /// event at 8,192 hosts).
    #[inline(always)]
    pub fn drain_before(
        &mut self,
        cut: u64,
        mut group: impl FnMut(u64) -> usize,
        groups: &mut [Vec<Due>],
    ) {
        while let Some((n, late)) = self.next_drained(cut) {
            self.remove_next(late);
            groups[group(n.e)].push(Due(n));
        }
        while let Some(s) = self.slot_before(cut) {
            let mut taken = 0;
            self.take_slot(s, |n| {
                taken += 1;
                let g = &mut groups[group(n.e)];
                g.push(Due(n));
                prefetch::line_for_write(g.as_ptr().wrapping_add(g.len() + WRITE_AHEAD));
            });
            self.len -= taken;
        }
        // Every slot before `cut` is empty now: what is pushed before `cut` is late, and `pop_late` hands it
        // to the group that pushed it (left in the wheel, it would run after every group: the same order
        // within each group, but away from the state it reads).
        self.cur = self.cur.max(cut >> self.shift);
        self.bring_near();
    }

    /// After [`drain_before`](Self::drain_before)`(cut)`: the next event pushed late, if it pops before `d` (or
    /// with no `d`, if it is before `cut`), made the current event.
    #[inline]
    pub fn pop_late(&mut self, d: Option<&Due>, cut: u64) -> Option<(u64, u64)> {
        let (n, lane) = self.late_front()?;
        if !d.map_or(n.t < cut, |d| n < d.0) {
            return None;
        }
        self.remove_next(Some(lane));
        self.resume(&Due(n));
        Some((n.t, n.e))
    }

    /// The next event of a drained slot or pushed late, if before `end`; and its lane if it is a late one.
    #[inline]
    fn next_drained(&self, end: u64) -> Option<(Node, Option<usize>)> {
        let drained = self.now.get(self.head).map(|&n| self.drained[n as usize]);
        let it = match (drained, self.late_front()) {
            (Some(a), Some((b, lane))) if b < a => (b, Some(lane)),
            (Some(a), _) => (a, None),
            (None, Some((b, lane))) => (b, Some(lane)),
            (None, None) => return None,
        };
        (it.0.t < end).then_some(it)
    }

    /// The next event if its time is before `end`, draining its slot if need be, and its lane if it was pushed
    /// late. Late events are in slots before the wheel's, so before any event still in the wheel.
    #[inline]
    fn next_before(&mut self, end: u64) -> Option<(Node, Option<usize>)> {
        if self.head == self.now.len()
            && self.late.iter().all(VecDeque::is_empty)
            && !self.refill(end)
        {
            return None;
        }
        self.next_drained(end)
    }

    /// The payload of the late event `d` places after the next one in the next one's lane, what to fetch ahead
    /// (see [`peek_ahead`](Self::peek_ahead)): events of the other lane may pop in between.
    #[inline]
    pub fn peek_late(&self, d: usize) -> Option<u64> {
        let lane = self.late_front().map_or(0, |(_, lane)| lane);
        self.late[lane].get(d).map(|n| n.e)
    }

    /// The payload of the event `d` places after the next one, when the slot being drained holds it: what a
    /// caller may start fetching early (events at the same time may still be pushed ahead of it).
    #[inline]
    pub fn peek_ahead(&self, d: usize) -> Option<u64> {
        let n = *self.now.get(self.head + d)?;
        Some(self.drained[n as usize].e)
    }

    /// Drains the next slot into `now` if it starts before `end` (else leaves everything where it is).
    fn refill(&mut self, end: u64) -> bool {
        let Some(s) = self.slot_before(end) else {
            return false;
        };
        self.now.clear();
        self.head = 0;
        let mut drained = std::mem::take(&mut self.drained);
        drained.clear();
        let mut in_time_order = true;
        self.take_slot(s, |n| {
            in_time_order &= drained.last().is_none_or(|p| p.t <= n.t);
            drained.push(n);
        });
        self.drained = drained;
        self.now.extend(0..self.drained.len() as u32);
        if !in_time_order {
            // A slot's events of different times come in push order: grouped by time (stable, so each
            // time's events keep their nearly causal order), they are nearly sorted again.
            let drained = &self.drained;
            self.now.sort_by_key(|&n| drained[n as usize].t);
        }
        sort_nearly_sorted(&mut self.now, &self.drained);
        true
    }

    /// The next slot with events that starts before `end`: the wheel's, or when the wheel is empty the first far
    /// event's, the wheel moved on to reach it (only then: moved on sooner, it would take what is pushed before
    /// that event for late events).
    fn slot_before(&mut self, end: u64) -> Option<u64> {
        let s = match self.next_slot() {
            Some(s) => s,
            None => {
                let &Reverse(Ev { t, .. }) = self.far.peek().filter(|r| r.0.t < end)?;
                self.cur = self.cur.max(((t >> self.shift) + 1).saturating_sub(SLOTS));
                self.bring_near();
                t >> self.shift
            }
        };
        (s << self.shift < end).then_some(s)
    }

    /// Empties slot `s` (the wheel's next), handing `f` its events in push order with their tie keys, and moves
    /// the wheel past it.
    #[inline(always)]
    fn take_slot(&mut self, s: u64, mut f: impl FnMut(Node)) {
        let i = (s % SLOTS) as usize;
        let list = std::mem::replace(&mut self.lists[i], List::EMPTY);
        let mut c = list.head;
        self.occupied.clear(i);
        // A slot's events mostly share a time: its hash once per run of equal times.
        let mut hashed = (u64::MAX, 0);
        while c != NIL {
            let chunk = &self.chunks[c as usize];
            for k in 0..READ_AHEAD_LINES {
                prefetch::prefetch_line(&self.chunks, chunk.next as usize, k);
            }
            for ev in &chunk.evs[..list.len_of(c)] {
                if ev.t != hashed.0 {
                    hashed = (ev.t, tie_hash(ev.t));
                }
                f(Node::of(*ev, hashed.1, self.key_mask));
            }
            self.free.push(c);
            c = chunk.next;
        }
        self.cur = s + 1;
        self.bring_near();
    }

    /// Moves the far events that the wheel now reaches into it.
    #[inline]
    fn bring_near(&mut self) {
        while let Some(&Reverse(ev)) = self.far.peek() {
            if (ev.t >> self.shift) - self.cur >= SLOTS {
                break;
            }
            self.far.pop();
            self.append(ev.t >> self.shift, ev);
        }
    }
}

#[cfg(test)]
mod tests;
