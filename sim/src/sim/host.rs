//! Hosts: the `mrc` endpoints, their memory model, QP pairs and the pump that drains them.

use super::*;
use crate::scenario::ScenarioError;

/// Host memory that stores nothing: reads record where a payload came from; writes check that the bytes
/// landed at the address they were read from (every transfer uses the same address at both ends), using
/// markers the simulator regenerates at delivery.
#[derive(Debug, Default)]
pub(super) struct PatMem {
    pub(super) read_addr: u64,
    pub(super) read_ptr: usize,
    pub(super) read_len: usize,
    pub(super) reads: u32,
    pub(super) written: u64,
    pub(super) errors: u64,
    pub(super) check: bool,
    /// Final bytes of WRITEs still to come: address → the byte that completes its packet's end marker.
    pub(super) final_bytes: std::collections::BTreeMap<u64, u8>,
}

impl Memory for PatMem {
    fn read(&mut self, addr: u64, dst: &mut [u8]) {
        if self.reads == 0 {
            self.read_addr = addr;
            self.read_ptr = dst.as_ptr() as usize;
        }
        self.read_len += dst.len();
        self.reads += 1;
    }
    fn write(&mut self, addr: u64, src: &[u8]) {
        self.written += src.len() as u64;
        if !self.check {
            return;
        }
        let n = src.len();
        if n == 1 {
            // A WRITE's final byte, placed apart and last (spec QP-PLACE-2): it must finish the marker its
            // packet's other bytes began.
            if let Some(want) = self.final_bytes.remove(&addr)
                && want != src[0]
            {
                self.errors += 1;
            }
            return;
        }
        if n < 8 {
            return;
        }
        let head = u64::from_le_bytes(src[..8].try_into().unwrap_or([0; 8]));
        let tail = u64::from_le_bytes(src[n - 8..].try_into().unwrap_or([0; 8]));
        if head != addr ^ SALT {
            self.errors += 1;
        } else if tail != (addr + n as u64 - 8) ^ SALT {
            // The last packet of a WRITE without its final byte: its end marker lacks that byte.
            let marker = ((addr + n as u64 - 7) ^ SALT).to_le_bytes();
            if src[n - 7..] == marker[..7] {
                self.final_bytes.insert(addr + n as u64, marker[7]);
            } else {
                self.errors += 1;
            }
        }
    }
}

/// Aligned so that the endpoint's first fields, which every packet reads, start a cache line.
#[repr(C, align(64))]
pub(super) struct Host {
    pub(super) ep: Endpoint,
    pub(super) mem: PatMem,
    pub(super) cq: CqId,
    pub(super) pd: Pd,
    /// Earliest pending timer event.
    pub(super) timer_at: u64,
    /// (local QPN, connection) sorted by QPN.
    pub(super) qps: Vec<(u32, u32)>,
}

/// A QP pair.
#[derive(Clone)]
pub(super) struct Conn {
    pub(super) src: u32,
    pub(super) dst: u32,
    pub(super) sq: u32,
    pub(super) rq: u32,
    /// Go-back-N receiver: next PSN accepted.
    pub(super) expect: u32,
    /// Transfers waiting for send-queue room.
    pub(super) backlog: Vec<u32>,
    pub(super) posted: u32,
}

impl Sim {
    pub(super) fn start(&mut self, x: u32) {
        let c = self.xconn[x as usize];
        self.times[x as usize].0 = self.now;
        self.conns[c as usize].backlog.push(x);
        self.post_backlog(c);
        let s = self.conns[c as usize].src;
        self.pump(s);
    }

    pub(super) fn post_backlog(&mut self, c: u32) {
        let now = Instant::from_nanos(self.now / 1000);
        let conn = &mut self.conns[c as usize];
        let (s, sq) = (conn.src, conn.sq);
        while conn.posted < MAX_WR && !conn.backlog.is_empty() {
            let x = conn.backlog.remove(0);
            let t = &self.xfers[x as usize];
            let addr = (u64::from(x) + 1) << 32;
            let len = t.bytes;
            let hs = &mut self.hosts[(s - self.host_base) as usize];
            let Ok(ks) = hs.ep.reg_mr(hs.pd, addr, len, Access::LOCAL_WRITE) else {
                self.c.failed_transfers += 1;
                continue;
            };
            let Some(rkey) = self.rkeys[x as usize] else {
                self.c.failed_transfers += 1;
                continue;
            };
            let sge = [Sge {
                addr,
                len: len as u32,
                lkey: ks.lkey,
            }];
            let wr = SendWr {
                wr_id: u64::from(x),
                op: SendOp::Write {
                    remote_addr: addr,
                    rkey,
                },
                sges: &sge,
                signaled: true,
                solicited: false,
            };
            if self.hosts[(s - self.host_base) as usize]
                .ep
                .post_send(sq, &wr, now)
                .is_err()
            {
                self.c.failed_transfers += 1;
                self.times[x as usize].1 = self.now;
                self.remaining -= 1;
                continue;
            }
            conn.posted += 1;
        }
    }

    pub(super) fn complete(&mut self, x: u32, ok: bool) {
        let xi = x as usize;
        if self.times[xi].1 != u64::MAX {
            return;
        }
        if !ok {
            self.c.failed_transfers += 1;
        }
        self.times[xi].1 = self.now;
        self.remaining -= 1;
        let c = self.xconn[xi];
        self.conns[c as usize].posted -= 1;
        if !self.conns[c as usize].backlog.is_empty() {
            self.post_backlog(c);
        }
        let fires = std::mem::take(&mut self.xfers[xi].fires);
        for &k in &fires {
            let k = k as usize;
            self.fired[k] += 1;
            let n = self.fired[k];
            let tr = &self.triggers[k];
            let start: &[u32] = match tr.kind {
                TriggerKind::Oneshot if n == 1 => &tr.targets,
                TriggerKind::Barrier(need) if n == need => &tr.targets,
                TriggerKind::Multishot => tr
                    .targets
                    .get(n as usize - 1)
                    .map_or(&[], std::slice::from_ref),
                _ => &[],
            };
            let start: Vec<u32> = start.to_vec();
            let delay = tr.delay_ps;
            for y in start {
                let at = (self.now + delay).max(self.xfers[y as usize].start_ps);
                self.push(at, ev(EV_START, y));
            }
        }
        self.xfers[xi].fires = fires;
    }

    pub(super) fn timer(&mut self, h: u32) {
        let host = &mut self.hosts[(h - self.host_base) as usize];
        if host.timer_at <= self.now {
            host.timer_at = u64::MAX;
        }
        let now = Instant::from_nanos(self.now / 1000);
        if host.ep.poll_timeout().is_some_and(|t| t <= now) {
            host.ep.handle_timeout(now);
        }
        self.pump(h);
    }

    /// Rebuilds packet `i`'s datagram into `rxbuf` (stored header, then placement markers where the payload
    /// was) and returns its length.
    pub(super) fn rebuild(&mut self, i: u32) -> usize {
        let p = &self.arena.pkts[i as usize];
        let n = p.dlen as usize;
        if p.big != NONE {
            let b = &self.arena.big[p.big as usize];
            self.rxbuf[..n].copy_from_slice(&b[..n]);
        } else {
            let k = n.min(HDR);
            self.rxbuf[..k].copy_from_slice(&p.hdr[..k]);
        }
        if p.plen >= 8 {
            let o = p.poff as usize;
            let l = p.plen as usize;
            self.rxbuf[o..o + 8].copy_from_slice(&(p.tag ^ SALT).to_le_bytes());
            self.rxbuf[o + l - 8..o + l]
                .copy_from_slice(&((p.tag + l as u64 - 8) ^ SALT).to_le_bytes());
        }
        n
    }

    pub(super) fn host_rx(&mut self, h: u32, i: u32) {
        let p = self.arena.pkts[i as usize];
        self.c.delivered_pkts += 1;
        self.c.delivered_bytes += u64::from(p.wire);
        let trimmed = p.flags & (F_TRIM | F_TRIM_LAST) != 0;
        let n = self.rebuild(i);
        if let Some(c) = &mut self.capture
            && c.wants_host(h)
        {
            c.at_host(
                self.now,
                h,
                Direction::In,
                &seen_of(&p, self.cfg.plane_bits, &self.rxbuf[..n]),
            );
        }
        self.release(i);
        if self.cfg.gbn && p.class == CLASS_DATA && !trimmed && n >= 12 {
            let qpn = u32::from_be_bytes([0, self.rxbuf[5], self.rxbuf[6], self.rxbuf[7]]);
            let psn = u32::from_be_bytes([0, self.rxbuf[9], self.rxbuf[10], self.rxbuf[11]]);
            let host = &self.hosts[(h - self.host_base) as usize];
            if let Ok(k) = host.qps.binary_search_by_key(&qpn, |x| x.0) {
                let c = host.qps[k].1 as usize;
                let d = psn.wrapping_sub(self.conns[c].expect) & 0xFF_FFFF;
                if d == 0 {
                    self.conns[c].expect = (self.conns[c].expect + 1) & 0xFF_FFFF;
                } else if d < 0x80_0000 {
                    // Ahead of the first hole: a go-back-N receiver throws it away.
                    self.c.gbn_discards += 1;
                    return;
                }
            }
        }
        let meta = RecvMeta {
            peer: Some(PeerId(p.src)),
            port: p.plane,
            ecn_ce: p.flags & F_CE != 0,
            trim: if p.flags & F_TRIM_LAST != 0 {
                Some(TrimMark::LastHop)
            } else if p.flags & F_TRIM != 0 {
                Some(TrimMark::Fabric)
            } else {
                None
            },
        };
        let now = Instant::from_nanos(self.now / 1000);
        let host = &mut self.hosts[(h - self.host_base) as usize];
        host.mem.written = 0;
        host.ep
            .handle_datagram(now, meta, &self.rxbuf[..n], &mut host.mem);
        let w = host.mem.written;
        if w > 0 {
            let bin = (self.now / self.cfg.bin_ps) as usize;
            if self.goodput.len() <= bin {
                self.goodput
                    .resize(bin + 1, vec![0; self.cfg.planes as usize]);
            }
            self.goodput[bin][p.plane as usize] += w;
            self.placed += w;
        }
        self.pump(h);
    }

    /// Drains a host's transmissions, completions and events, and re-arms its timer.
    pub(super) fn pump(&mut self, h: u32) {
        let now = Instant::from_nanos(self.now / 1000);
        let planes = self.cfg.planes;
        let base = h * planes;
        let mut buf = std::mem::take(&mut self.txbuf);
        loop {
            let mut mask = 0u32;
            let mut up = 0u32;
            for p in 0..planes {
                let port = &self.ports[(base + p) as usize];
                if port.down_refs == 0 {
                    up |= 1 << p;
                    if port.low_bytes + port.high_bytes < self.cfg.ready_bytes {
                        mask |= 1 << p;
                    }
                }
            }
            self.blocked[(h - self.host_base) as usize] = mask != up;
            let host = &mut self.hosts[(h - self.host_base) as usize];
            host.mem.reads = 0;
            host.mem.read_len = 0;
            let Some(t) = host.ep.poll_transmit_on(now, mask, &mut buf, &mut host.mem) else {
                break;
            };
            let (reads, raddr, rptr, rlen) = (
                host.mem.reads,
                host.mem.read_addr,
                host.mem.read_ptr,
                host.mem.read_len,
            );
            let i = self.alloc();
            let data = matches!(t.class, TrafficClass::Data | TrafficClass::DataRetx);
            let p = &mut self.arena.pkts[i as usize];
            p.src = h;
            p.dst = t.peer.0;
            p.dloc = self.topo.loc[t.peer.0 as usize];
            p.plane = t.plane;
            p.path = t.ev >> self.cfg.plane_bits;
            p.class = if data { CLASS_DATA } else { CLASS_CTRL };
            p.flags = 0;
            // `transport.mtu` is at most 65,000: a datagram's length fits 16 bits.
            debug_assert!(t.len <= usize::from(u16::MAX));
            p.dlen = t.len as u16;
            p.wire = t.len as u32 + self.cfg.overhead;
            p.big = NONE;
            p.plen = 0;
            p.poff = 0;
            let off = rptr.wrapping_sub(buf.as_ptr() as usize);
            if reads > 0 && off <= HDR && off + rlen <= t.len {
                p.tag = raddr;
                p.poff = off as u16;
                p.plen = rlen as u16;
                p.hdr[..off].copy_from_slice(&buf[..off]);
            } else if t.len <= HDR {
                p.hdr[..t.len].copy_from_slice(&buf[..t.len]);
            } else {
                let b = match self.arena.free_big.pop() {
                    Some(b) => b,
                    None => {
                        self.arena.big.push(Vec::new());
                        self.arena.big.len() as u32 - 1
                    }
                };
                let v = &mut self.arena.big[b as usize];
                v.clear();
                v.extend_from_slice(&buf[..t.len]);
                self.arena.pkts[i as usize].big = b;
            }
            if let Some(c) = &mut self.capture
                && c.wants_host(h)
            {
                let s = Seen {
                    src: h,
                    dst: t.peer.0,
                    plane: t.plane,
                    ev: t.ev,
                    data,
                    ce: false,
                    trimmed: None,
                    bytes: &buf[..t.len],
                };
                c.at_host(self.now, h, Direction::Out, &s);
            }
            let wire = u64::from(self.arena.pkts[i as usize].wire);
            self.c.injected_pkts += 1;
            self.c.injected_bytes += wire;
            let pi = base + u32::from(t.plane);
            if u32::from(t.plane) >= planes || t.peer.0 >= self.topo.hosts {
                self.drop_pkt(i, Drop::Failure);
                continue;
            }
            self.enqueue(pi, i);
        }
        self.txbuf = buf;
        // Completions and events.
        loop {
            let host = &mut self.hosts[(h - self.host_base) as usize];
            let n = host.ep.poll_cq(host.cq, &mut self.cqe);
            if n == 0 {
                break;
            }
            for k in 0..n {
                let c = self.cqe[k];
                if c.opcode == mrc::WcOpcode::RdmaWrite {
                    self.complete(c.wr_id as u32, c.status == mrc::WcStatus::Success);
                }
            }
        }
        let host = &mut self.hosts[(h - self.host_base) as usize];
        while let Some(e) = host.ep.poll_event() {
            match e {
                Event::EvChanged { change, .. } => {
                    if change.to == EvState::AssumedBad && change.from != EvState::AssumedBad {
                        self.c.ev_retirements += 1;
                    } else if change.from == EvState::AssumedBad && change.to == EvState::Good {
                        self.c.ev_recoveries += 1;
                    }
                }
                Event::QpError { .. } => self.c.qp_errors += 1,
                _ => {}
            }
        }
        if let Some(t) = host.ep.poll_timeout() {
            let ps = t.as_nanos().saturating_mul(1000);
            let ps = ps.max(self.now);
            if ps < host.timer_at {
                host.timer_at = ps;
                self.push(ps, ev(EV_TIMER, h));
            }
        }
    }
}

/// Most work requests posted per QP at once.
pub(super) const MAX_WR: u32 = 200;
pub(super) const PSN0: u32 = 0x10_0000;

/// The hosts, and one QP pair per ordered (source, destination) pair with transfers.
pub(super) struct Built {
    pub(super) hosts: Vec<Host>,
    pub(super) conns: Vec<Conn>,
    /// Each transfer's pair.
    pub(super) xconn: Vec<u32>,
}

fn setup_error(e: impl std::fmt::Display) -> ScenarioError {
    ScenarioError::new("transport", format!("QP setup failed: {e}"))
}

/// Builds the hosts and their QP pairs. Each host's endpoint, QPs and their tables are made together, host by
/// host, so that what one host's packets read lies together in memory (made pair by pair, a host's two QPs of
/// a permutation lay far apart, each beside another host's: a few per cent more CPU per event at 8,192 hosts,
/// sim/README.md).
pub(super) fn build_hosts(
    topo: &Topology,
    tr: &TransportCfg,
    xfers: &[Transfer],
    qcfg: &QpConfig,
    paths: u32,
    seed: u64,
) -> Result<Built, ScenarioError> {
    let Pairs {
        mut conns,
        cfgs,
        xconn,
    } = pairs(xfers, qcfg, paths, seed)?;
    // Each host's (pair, sending side?) in pair order: the order in which its QPs are opened and connected.
    let mut sides: Vec<Vec<(u32, bool)>> = vec![Vec::new(); topo.hosts as usize];
    for (c, conn) in conns.iter().enumerate() {
        sides[conn.src as usize].push((c as u32, true));
        sides[conn.dst as usize].push((c as u32, false));
    }
    let mut hosts = Vec::with_capacity(topo.hosts as usize);
    for own in &sides {
        let mut ep = Endpoint::new(EndpointConfig {
            ports: topo.shape.planes as u8,
            caps: Caps::MRC_1_0,
            ..EndpointConfig::default()
        })
        .map_err(|e| ScenarioError::new(e.field, e.problem))?;
        let pd = ep.alloc_pd();
        let cq = ep.create_cq(1024);
        let mut h = Host {
            ep,
            mem: PatMem {
                check: tr.check_placement,
                ..PatMem::default()
            },
            cq,
            pd,
            timer_at: u64::MAX,
            qps: Vec::with_capacity(own.len()),
        };
        for &(c, send) in own {
            let qpn = open(&mut h, &cfgs[c as usize]).map_err(setup_error)?;
            let conn = &mut conns[c as usize];
            *(if send { &mut conn.sq } else { &mut conn.rq }) = qpn;
            h.qps.push((qpn, c));
        }
        h.qps.sort_unstable();
        hosts.push(h);
    }
    // Connected host by host too, not pair by pair (`mrc::testing::connect_pair`): connecting makes the QP's
    // receive tracker, which every data packet reads.
    for (n, own) in sides.iter().enumerate() {
        for &(c, send) in own {
            let conn = &conns[c as usize];
            let (peer, qpn, peer_qpn) = if send {
                (conn.dst, conn.sq, conn.rq)
            } else {
                (conn.src, conn.rq, conn.sq)
            };
            let info = hosts[peer as usize]
                .ep
                .conn_info(peer_qpn, PSN0)
                .ok_or_else(|| setup_error("no such QP"))?;
            hosts[n]
                .ep
                .connect_qp(qpn, PeerId(peer), &info, PSN0, Instant::ZERO)
                .map_err(setup_error)?;
        }
    }
    Ok(Built {
        hosts,
        conns,
        xconn,
    })
}

/// The QP pairs before their QPs are made (QPNs 0), each pair's QP configuration and each transfer's pair.
struct Pairs {
    conns: Vec<Conn>,
    cfgs: Vec<QpConfig>,
    xconn: Vec<u32>,
}

/// One pair per ordered (source, destination) pair with transfers, in that order.
fn pairs(
    xfers: &[Transfer],
    qcfg: &QpConfig,
    paths: u32,
    seed: u64,
) -> Result<Pairs, ScenarioError> {
    let mut sorted: Vec<(u32, u32, u32)> = xfers
        .iter()
        .enumerate()
        .map(|(i, t)| (t.src, t.dst, i as u32))
        .collect();
    sorted.sort_unstable();
    let mut conns: Vec<Conn> = Vec::new();
    let mut cfgs: Vec<QpConfig> = Vec::new();
    let mut xconn = vec![0u32; xfers.len()];
    let mut ev_rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x4556_5321);
    for &(s, d, i) in &sorted {
        if conns.last().is_none_or(|c| (c.src, c.dst) != (s, d)) {
            if s == d {
                return Err(setup_error("a QP pair joins two different hosts"));
            }
            // Each QP starts its EVs at its own random path index, so QPs spread over all T1s/T2s.
            let mut cfg = qcfg.clone();
            cfg.ev.first_index = (ev_rng.next_u64() % u64::from(paths.max(1))) as u32;
            cfgs.push(cfg);
            conns.push(Conn {
                src: s,
                dst: d,
                sq: 0,
                rq: 0,
                expect: PSN0,
                backlog: Vec::new(),
                posted: 0,
            });
        }
        xconn[i as usize] = conns.len() as u32 - 1;
    }
    Ok(Pairs { conns, cfgs, xconn })
}

/// Opens a QP in INIT on host `h` with configuration `cfg`; returns its QPN.
fn open(h: &mut Host, cfg: &QpConfig) -> Result<u32, mrc::ConfigError> {
    let mut init = QpInit::new(h.pd, h.cq);
    init.config = cfg.clone();
    init.max_send_wr = MAX_WR;
    init.max_recv_wr = 1;
    init.max_sge = 1;
    h.ep.open_qp(init, Access::REMOTE_WRITE, Instant::ZERO)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placement check catches bytes written at another address than they were read from.
    #[test]
    fn placement_markers_catch_misplacement() {
        let mut m = PatMem {
            check: true,
            ..PatMem::default()
        };
        let addr = 5u64 << 32;
        let mut buf = vec![0u8; 64];
        buf[..8].copy_from_slice(&(addr ^ SALT).to_le_bytes());
        buf[56..].copy_from_slice(&((addr + 56) ^ SALT).to_le_bytes());
        m.write(addr, &buf);
        assert_eq!((m.errors, m.written), (0, 64));
        m.write(addr + 8, &buf);
        assert_eq!(m.errors, 1);
        m.write(addr, &buf[..32]);
        assert_eq!(m.errors, 2);
        // A WRITE's final byte placed apart (spec QP-PLACE-2): the rest first, then the byte that completes
        // the end marker; a wrong byte there is caught.
        m.write(addr, &buf[..63]);
        m.write(addr + 63, &buf[63..]);
        assert_eq!(m.errors, 2);
        m.write(addr, &buf[..63]);
        m.write(addr + 63, &[!buf[63]]);
        assert_eq!(m.errors, 3);
    }
}
