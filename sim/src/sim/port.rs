//! Ports and failures: queues, serialization, wires, arrivals, links going down and up.

use super::*;

impl Sim {
    /// Enqueues packet `i` at port `pi`: trimming, ECN and drops happen here.
    pub(super) fn enqueue(&mut self, pi: u32, i: u32) {
        let port = &self.ports[pi as usize];
        if port.down_refs > 0 {
            self.drop_pkt(i, Drop::Failure);
            return;
        }
        let p = &mut self.arena.pkts[i as usize];
        let high = p.class != CLASS_DATA || p.flags & (F_TRIM | F_TRIM_LAST) != 0;
        let mut to_high = high;
        if !high {
            let wire = u64::from(p.wire);
            if port.low_bytes + wire > port.buffer {
                if !port.trim {
                    self.drop_pkt(i, Drop::Overflow);
                    return;
                }
                if self.cfg.trim_tail {
                    self.swap_with_tail(pi, i);
                }
                let port = &self.ports[pi as usize];
                let p = &mut self.arena.pkts[i as usize];
                // Cut to a header and send it with priority (spec WIRE-ICRC-2 keeps the first 64 bytes).
                let keep = p.dlen.min(mrc::wire::TRIM_KEEP_LEN as u16);
                let new_wire = self.cfg.trimmed_bytes.min(p.wire);
                self.c.trimmed_pkts += 1;
                self.c.trimmed_bytes += u64::from(p.wire - new_wire);
                p.wire = new_wire;
                p.dlen = keep;
                p.plen = 0;
                p.flags |= if port.kind == PortKind::T0Down {
                    F_TRIM_LAST
                } else {
                    F_TRIM
                };
                to_high = true;
            } else if port.ecn && !self.cfg.ecn_dequeue && port.low_bytes > port.kmin {
                let occ = port.low_bytes;
                self.maybe_mark(pi, i, occ);
            }
        }
        let p = &self.arena.pkts[i as usize];
        let wire = u64::from(p.wire);
        let port = &mut self.ports[pi as usize];
        if to_high {
            if port.high_bytes + wire > port.hbuffer {
                self.drop_pkt(i, Drop::Overflow);
                return;
            }
            port.high_bytes += wire;
            let l = port.high;
            let l = self.list_push(l, i);
            self.ports[pi as usize].high = l;
        } else {
            port.low_bytes += wire;
            let l = port.low;
            let l = self.list_push(l, i);
            self.ports[pi as usize].low = l;
        }
        let port = &self.ports[pi as usize];
        let occ = port.low_bytes + port.high_bytes;
        let kind = port.kind as usize;
        let bin = (self.now / self.cfg.bin_ps) as usize;
        if self.queues.len() <= bin {
            self.queues.resize(bin + 1, [0; 6]);
        }
        let q = &mut self.queues[bin][kind];
        *q = (*q).max(occ);
        if self.ports[pi as usize].tx == NONE {
            self.start_tx(pi);
        }
    }

    /// With probability 1/2, the arriving packet `i` takes the place of the data queue's tail packet at port
    /// `pi`, and slot `i` then holds that tail packet, which the caller trims (NDP's and htsim's trimming
    /// queue). The packets swap slots, not links: the queue keeps its order and no list is walked. The arrival
    /// is marked as if it had joined the full queue.
    fn swap_with_tail(&mut self, pi: u32, i: u32) {
        let port = &mut self.ports[pi as usize];
        let t = port.low.tail;
        port.draws += 1;
        if t == NONE || draw(self.cfg.seed, pi, port.draws - 1) & 1 == 0 {
            return;
        }
        let (arriving, old) = (
            self.arena.pkts[i as usize].wire,
            self.arena.pkts[t as usize].wire,
        );
        self.arena.swap_contents(t, i);
        port.low_bytes = port.low_bytes - u64::from(old) + u64::from(arriving);
        if port.ecn && !self.cfg.ecn_dequeue {
            let occ = port.low_bytes;
            self.maybe_mark(pi, t, occ);
        }
    }

    /// Marks packet `i` CE with the linear RED-like probability of occupancy `occ` at port `pi`.
    pub(super) fn maybe_mark(&mut self, pi: u32, i: u32, occ: u64) {
        let port = &self.ports[pi as usize];
        if occ <= port.kmin {
            return;
        }
        let mark = occ >= port.kmax || {
            let span = (port.kmax - port.kmin).max(1);
            let port = &mut self.ports[pi as usize];
            let x = draw(self.cfg.seed, pi, port.draws) % span;
            port.draws += 1;
            x < occ - port.kmin
        };
        let p = &mut self.arena.pkts[i as usize];
        if mark && p.flags & F_CE == 0 {
            p.flags |= F_CE;
            self.c.ecn_marked += 1;
        }
    }

    pub(super) fn start_tx(&mut self, pi: u32) {
        let port = &self.ports[pi as usize];
        let (l, i, high) = if port.high.head != NONE {
            let (l, i) = self.list_pop(port.high);
            (l, i, true)
        } else {
            let (l, i) = self.list_pop(port.low);
            (l, i, false)
        };
        if i == NONE {
            return;
        }
        let wire = u64::from(self.arena.pkts[i as usize].wire);
        let port = &mut self.ports[pi as usize];
        if high {
            port.high = l;
            port.high_bytes -= wire;
        } else {
            port.low = l;
            let occ = port.low_bytes;
            port.low_bytes -= wire;
            if self.cfg.ecn_dequeue && port.ecn && occ > port.kmin {
                self.maybe_mark(pi, i, occ);
            }
        }
        let port = &mut self.ports[pi as usize];
        port.tx = i;
        port.doomed = false;
        let t = self.now + ((wire * port.ps_per_byte_q16) >> 16);
        self.push(t, ev_pkt(EV_TXDONE, pi, i));
    }

    pub(super) fn tx_done(&mut self, pi: u32) {
        let port = &mut self.ports[pi as usize];
        let i = port.tx;
        if i == NONE {
            return;
        }
        port.tx = NONE;
        if port.doomed || port.down_refs > 0 {
            port.doomed = false;
            self.drop_pkt(i, Drop::Failure);
        } else if port.lossy && {
            port.draws += 1;
            let x = draw(self.cfg.seed, pi, port.draws - 1);
            ((x >> 11) as f64 / (1u64 << 53) as f64) < self.cold[pi as usize].loss
        } {
            self.drop_pkt(i, Drop::Loss);
        } else {
            let port = &self.ports[pi as usize];
            let arrive = self.now + port.latency_ps;
            self.arena.pkts[i as usize].arrive = arrive;
            if self.capture.as_ref().is_some_and(|c| c.wants_port(pi)) {
                self.capture_port(pi, i);
            }
            let port = &self.ports[pi as usize];
            if port.dest != par::LOCAL {
                let dest = port.dest;
                self.hand_over(dest, pi, i);
            } else {
                let l = port.wire;
                let l = self.list_push(l, i);
                self.ports[pi as usize].wire = l;
                // One arrival event per packet, pushed now: the arrival then never reads the next packet on
                // the wire (a cache miss per packet and hop in large fabrics) to schedule it.
                self.push(arrive, ev_pkt(EV_ARRIVE, pi, i));
            }
        }
        self.start_tx(pi);
        let port = &self.ports[pi as usize];
        if port.host != NONE {
            let host = port.host;
            if self.blocked[(host - self.host_base) as usize]
                && port.low_bytes + port.high_bytes < self.cfg.ready_bytes
            {
                self.pump(host);
            }
        }
    }

    pub(super) fn arrive(&mut self, pi: u32) {
        let port = &self.ports[pi as usize];
        let i = port.wire.head;
        if i == NONE || self.arena.pkts[i as usize].arrive > self.now {
            return; // a stale wake-up: the wire was flushed by a failure
        }
        let (l, _) = self.list_pop(port.wire);
        let port = &mut self.ports[pi as usize];
        port.wire = l;
        let port = &self.ports[pi as usize];
        let entered = self.arena.pkts[i as usize].arrive - port.latency_ps;
        if port.down_refs > 0 || entered < port.last_up {
            // Invariant: no packet crosses a failed link after its failure time.
            self.c.failed_link_crossings += 1;
            self.drop_pkt(i, Drop::Failure);
            return;
        }
        let to = port.to;
        if to < self.topo.hosts {
            self.host_rx(to, i);
        } else {
            let p = &self.arena.pkts[i as usize];
            let out = self.topo.forward_to(to, p.dloc, p.path);
            self.enqueue(out, i);
        }
    }

    // ---- failures ------------------------------------------------------------------------------------------

    pub(super) fn set_link(&mut self, up_port: u32, down: bool) {
        let rev = self.topo.ports[up_port as usize].rev;
        let mut changed = false;
        for pi in [up_port, rev] {
            let port = &mut self.ports[pi as usize];
            let was = port.down_refs > 0;
            if down {
                port.down_refs += 1;
            } else {
                port.down_refs = port.down_refs.saturating_sub(1);
            }
            let is = port.down_refs > 0;
            if was == is {
                continue;
            }
            changed = true;
            if is {
                // Everything queued or on the wire is lost; the packet being serialized too.
                if port.tx != NONE {
                    port.doomed = true;
                }
                for which in 0..3 {
                    let port = &mut self.ports[pi as usize];
                    let l = match which {
                        0 => std::mem::replace(&mut port.low, List::EMPTY),
                        1 => std::mem::replace(&mut port.high, List::EMPTY),
                        _ => std::mem::replace(&mut port.wire, List::EMPTY),
                    };
                    let mut cur = l.head;
                    while cur != NONE {
                        let next = self.arena.pkts[cur as usize].next;
                        self.drop_pkt(cur, Drop::Flushed);
                        cur = next;
                    }
                }
                let port = &mut self.ports[pi as usize];
                port.low_bytes = 0;
                port.high_bytes = 0;
                self.cold[pi as usize].last_down = Some(self.now);
            } else {
                port.last_up = self.now;
            }
        }
        // A host link is a NIC port: the NIC sees the carrier change at once.
        let p = self.topo.ports[up_port as usize];
        if changed && p.kind == PortKind::HostUp && self.is_local_host(p.from) {
            let now = Instant::from_nanos(self.now / 1000);
            let h = p.from;
            self.hosts[(h - self.host_base) as usize]
                .ep
                .set_port_state(now, p.plane, !down);
            self.pump(h);
        }
    }

    /// Applies failure action `idx`. Every partition applies it to its copy of every port it names (a copy
    /// it does not own holds no packets, so only the owner's flush drops any); the time of the last failure
    /// moves before any flush, so a packet lost at the instant of a failure is never a lasting loss.
    pub(super) fn action(&mut self, idx: usize) {
        if self.takes_down[idx] {
            self.last_down_at = Some(self.now);
        }
        let a = std::mem::replace(
            &mut self.actions[idx].1,
            Action::Loss {
                ports: Vec::new(),
                rate: 0.0,
            },
        );
        match &a {
            Action::Links { ports, down } => {
                for &p in ports {
                    self.set_link(p, *down);
                }
            }
            Action::Loss { ports, rate } => {
                for &p in ports {
                    self.cold[p as usize].loss = *rate;
                    self.ports[p as usize].lossy = *rate > 0.0;
                }
            }
            Action::Slow { ports, fraction } => {
                for &p in ports {
                    let cold = self.cold[p as usize];
                    let port = &mut self.ports[p as usize];
                    port.ps_per_byte_q16 =
                        q16(((cold.base_rate_bps as f64) * fraction).max(1.0) as u64);
                    if self.cfg.scale_slowed_buffer && port.kind != PortKind::HostUp {
                        let b = ((cold.base_buffer as f64 * fraction.min(1.0)) as u64)
                            .max(2 * self.cfg.ready_bytes);
                        port.buffer = b;
                        port.kmin = (b as f64 * self.cfg.kmin_frac) as u64;
                        port.kmax = (b as f64 * self.cfg.kmax_frac) as u64;
                    }
                }
            }
        }
        self.actions[idx].1 = a;
    }
}
