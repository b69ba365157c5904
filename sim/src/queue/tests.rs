//! The queue against a binary heap, its tie order, its clock, and a window run group by group.

use super::*;
use rand_core::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// What `peek_ahead(d)` shows is what pops `d + 1` events later, while nothing is pushed in between; past
/// the drained slot it shows nothing.
#[test]
fn peek_ahead_shows_what_pops_later() {
    let mut q = EventQueue::new(u64::MAX);
    for (t, e) in [
        (500, 7),
        (300, 1),
        (300, 2),
        (400, 5),
        (301, 3),
        (302, 4),
        (900, 8),
    ] {
        q.push(t, e);
    }
    // The first slot (0..256 ps) is empty; 256..512 holds six events; 900 is in a later slot.
    assert_eq!(q.pop(), Some((300, 1)));
    let ahead: Vec<_> = (0..6).map(|d| q.peek_ahead(d)).collect();
    let mut popped = Vec::new();
    while popped.len() < 5 {
        popped.push(q.pop().map(|(_, e)| e));
    }
    assert_eq!(&ahead[..5], &popped[..]);
    assert_eq!(ahead[5], None, "the next slot is not drained yet");
    assert_eq!(q.peek_ahead(0), None);
    assert_eq!(q.pop(), Some((900, 8)));
}

/// Same order as a binary heap on (time, cause, key) under random monotone use, ties included (few keys
/// and causes, so equal times meet equal and unequal ranks often), with pushes at the current time
/// between pops.
#[test]
fn matches_a_binary_heap() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let mask = 0xFFFF;
    let mut q = EventQueue::new(mask);
    let mut h = BinaryHeap::new();
    let mut now = 0u64;
    for step in 0..200_000u64 {
        if rng.next_u64() % 3 != 0 || h.is_empty() {
            let dt = match rng.next_u64() % 4 {
                0 => 0,
                1 => rng.next_u64() % 100,
                2 => rng.next_u64() % 100_000,
                _ => rng.next_u64() % 10_000_000_000,
            };
            // The bits above the mask are a hint that must not order anything: distinct per event.
            let e = (step << 16) | (rng.next_u64() % 64);
            let mut c = q.cause();
            c.up.far = (c.up.far & !LOW) | (rng.next_u64() % 3);
            c.up.origin = (c.up.origin & LOW) | (rng.next_u64() % 2) << 32;
            q.push_caused(now + dt, e, c);
            let r = Rank::of(now + dt, c);
            h.push(Reverse((now + dt, r, tie_key(now + dt, e & mask), e)));
        } else {
            let Reverse((t, c, k, e)) = h.pop().unwrap();
            assert_eq!(q.next_time(), Some(t));
            let (qt, qe) = q.pop().unwrap();
            assert_eq!((qt, qe & mask, q.popped), (t, e & mask, c));
            assert_eq!(tie_key(t, qe & mask), k);
            // Equal ranks at equal time are the same event to the simulator: either may come first.
            if qe != e {
                let mut back: Vec<_> = h.drain().collect();
                let i = back.iter().position(|r| r.0.3 == qe).unwrap();
                back[i] = Reverse((t, c, k, e));
                h.extend(back);
            }
            now = t;
        }
        assert_eq!(q.len(), h.len());
    }
    while let Some(Reverse((t, _, k, _))) = h.pop() {
        assert_eq!(
            q.pop().map(|(t, e)| (t, tie_key(t, e & mask))),
            Some((t, k))
        );
    }
    assert!(q.is_empty() && q.pop().is_none());
}

/// Causal FIFO whatever the keys and setup order: at a tie the event scheduled earlier pops first (the
/// child of the last root, though it has the first setup rank), and of two scheduled at the same instant,
/// the one whose scheduler popped first (roots at equal time pop in setup order); a cause handed to
/// another queue orders there as it did here.
#[test]
fn ties_pop_in_causal_fifo_order() {
    for keys in [[20, 10, 5], [5, 10, 20]] {
        let mut q = EventQueue::new(u64::MAX);
        let mut far = EventQueue::new(u64::MAX);
        q.push_root(100, 1, 2);
        q.push_root(100, 2, 1);
        q.push_root(300, 3, 0);
        let mut causes = Vec::new();
        for (root, key) in [2, 1, 3].into_iter().zip(keys) {
            assert_eq!(q.pop().map(|(_, e)| e), Some(root));
            q.push(1_000, key);
            causes.push((q.cause(), key));
        }
        for &(c, key) in causes.iter().rev() {
            far.push_caused(1_000, key, c);
        }
        for q in [&mut q, &mut far] {
            assert_eq!((0..3).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(), keys);
        }
    }
}

/// `pop_before` leaves later events where they are and does not move the clock past `end`, so an event
/// pushed afterwards between `end` and them (a parallel run's delivery) keeps its own time.
#[test]
fn pop_before_keeps_the_clock() {
    let mut q = EventQueue::new(u64::MAX);
    q.push(1_000, 1);
    q.push(5_000, 2);
    assert_eq!(q.pop_before(2_000), Some((1_000, 1)));
    assert_eq!(q.pop_before(2_000), None);
    assert_eq!(q.next_time(), Some(5_000));
    q.push(3_000, 3);
    assert_eq!(q.pop(), Some((3_000, 3)));
    assert_eq!(q.pop(), Some((5_000, 2)));
    // Ties of one cause pop by tie key, whatever the order of insertion, also when pushed at the current
    // time; pushes of one event pop in push order.
    let order = |t: u64, a: u64, b: u64| {
        if tie_key(t, a) < tie_key(t, b) {
            [a, b]
        } else {
            [b, a]
        }
    };
    let c = q.cause();
    for (a, b) in [(9, 4), (4, 9)] {
        q.push_caused(5_000, a, c);
        q.push_caused(5_000, b, c);
    }
    let [x, y] = order(5_000, 4, 9);
    assert_eq!(
        (0..4).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(),
        [x, x, y, y]
    );
    for e in [9, 4, 7] {
        q.push(5_000, e);
    }
    assert_eq!(
        (0..3).map(|_| q.pop().unwrap().1).collect::<Vec<_>>(),
        [9, 4, 7]
    );
}

/// The insertion sort gives a full sort's order, in order, nearly in order (a few far out of place, or
/// every run of equal major keys backwards) and in reverse (the fallback).
#[test]
fn sorts_nearly_sorted_input() {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(3);
    let node = |k: u64| Node {
        t: k / 64,
        rank: Rank {
            near: k / 16,
            far: k / 4 % 2,
            origin: k % 4,
        },
        tie: k % 3,
        e: k,
    };
    for n in [0, 1, 2, 50, 5_000] {
        let nodes: Vec<Node> = (0..n).map(|k| node(k * 7_919 % n.max(1))).collect();
        let mut sorted: Vec<u32> = (0..n as u32).collect();
        sorted.sort_unstable_by_key(|&i| nodes[i as usize].key());
        let mut few = sorted.clone();
        for _ in 0..n / 20 {
            let (i, j) = (rng.next_u64() % n, rng.next_u64() % n);
            few.swap(i as usize, j as usize);
        }
        let mut shuffled = sorted.clone();
        for i in (1..shuffled.len()).rev() {
            shuffled.swap(i, (rng.next_u64() % (i as u64 + 1)) as usize);
        }
        let reversed: Vec<u32> = sorted.iter().rev().copied().collect();
        // Each run of equal major keys backwards: all out of place among their own (the common case).
        let mut groups = sorted.clone();
        groups
            .chunk_by_mut(|&a, &b| nodes[a as usize].major() == nodes[b as usize].major())
            .for_each(|g| g.reverse());
        for mut v in [sorted.clone(), few, shuffled, reversed, groups] {
            sort_nearly_sorted(&mut v, &nodes);
            assert_eq!(v, sorted);
        }
    }
}

/// A window drained, grouped and run group by group (each group merged with what it schedules inside the
/// window, `pop_late`), then its rest in time order, gives every group the order one queue pops it in, as
/// long as no group schedules into another inside the window (sim/window.rs relies on it), with one lane of
/// late events or two (`set_late_lane`, here by the bit above the group's). Groups run in reverse, so that nothing
/// passes by accident of order.
#[test]
fn a_window_run_group_by_group_pops_each_group_in_queue_order() {
    for lanes in [false, true] {
        window_by_group(lanes);
    }
}

fn window_by_group(lanes: bool) {
    const G: u64 = 4;
    const CHILD: u64 = 1 << 40;
    let end = 30_000;
    let group = |e: u64| ((e & !CHILD) % G) as usize;
    // An event that is not a child schedules one in its group, inside the window or after it.
    let child = |t: u64, e: u64| (e & CHILD == 0).then(|| (t + 1 + e % 5_000, e | CHILD));
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(7);
    let roots: Vec<(u64, u64)> = (0..400)
        .map(|i| (rng.next_u64() % 40_000, i * G + rng.next_u64() % G))
        .collect();
    let queue = || {
        let mut q = EventQueue::new(u64::MAX);
        for (k, &(t, e)) in roots.iter().enumerate() {
            q.push_root(t, e, k as u32);
        }
        q
    };
    let mut want = vec![Vec::new(); G as usize];
    let mut q = queue();
    while let Some((t, e)) = q.pop_before(end) {
        want[group(e)].push((t, e));
        if let Some((ct, ce)) = child(t, e) {
            q.push(ct, ce);
        }
    }
    let mut got = vec![Vec::new(); G as usize];
    let mut q = queue();
    if lanes {
        q.set_late_lane(G, G);
    }
    let cut = q.slot_start(end);
    let mut due = vec![Vec::new(); G as usize];
    q.drain_before(cut, group, &mut due);
    let mut run = |q: &mut EventQueue, t: u64, e: u64| {
        got[group(e)].push((t, e));
        if let Some((ct, ce)) = child(t, e) {
            q.push(ct, ce);
        }
    };
    for v in due.iter_mut().rev() {
        v.sort();
        for d in v.iter() {
            while let Some((t, e)) = q.pop_late(Some(d), cut) {
                run(&mut q, t, e);
            }
            q.resume(d);
            run(&mut q, d.t(), d.e());
        }
        while let Some((t, e)) = q.pop_late(None, cut) {
            run(&mut q, t, e);
        }
    }
    while let Some((t, e)) = q.pop_before(end) {
        run(&mut q, t, e);
    }
    assert!(want.iter().all(|g| g.len() > 100));
    assert_eq!(got, want);
}

/// An event beyond the wheel's reach pops at its time, also when the wheel never empties on the way there
/// (a chain of events 100 ns apart keeps it busy).
#[test]
fn far_events_come_back_in_time() {
    let mut q = EventQueue::new(u64::MAX);
    let far = SLOTS << SHIFT << 2;
    q.push(far, 7);
    q.push(0, 1);
    let mut popped = Vec::new();
    while let Some((t, e)) = q.pop() {
        popped.push((t, e));
        if e == 1 && t < 2 * far {
            q.push(t + 100_000, 1);
        }
    }
    assert!(popped.contains(&(far, 7)));
    assert!(popped.windows(2).all(|w| w[0].0 <= w[1].0));
}

/// The kind (high half) orders first; among components the order changes with the time, so no component
/// comes first at every tie.
#[test]
fn ties_are_permuted_by_time() {
    assert!(tie_key(7, 1 << 61) > tie_key(7, 0xFFFF_FFFF));
    let first = |t: u64| (0..8u64).min_by_key(|&c| tie_key(t, c)).unwrap();
    let firsts: std::collections::BTreeSet<u64> = (0..64).map(first).collect();
    assert!(firsts.len() >= 4, "{firsts:?}");
}
