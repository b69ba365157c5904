//! The controller's calls on a host (MRC's `mrc_ctl.h`): explicit EV lists and congestion control per QP, EV
//! state changes, the EV-event queue, EV probes. The state they share with the progress loop is
//! [`Ctl`](crate::control::Ctl).

use std::os::fd::RawFd;
use std::sync::atomic::Ordering;
use std::time::{Duration as StdDuration, Instant as StdInstant};

use mrc::EvInfo;
use mrc::cc::CcConfig;
use mrc::{EvState, PeerId};

use crate::control::{Answer, EvEvent, ExplicitEvs};
use crate::error::HostError;
use crate::plane::PlaneIo;

use super::state::{Host, lock};

impl<P: PlaneIo> Host<P> {
    fn engine<R>(&self, f: impl FnOnce(&mut crate::Datapath<P>) -> R) -> R {
        self.with_datapath(|dp, _, _| f(dp))
    }

    /// Gives a QP still in RESET its EVs and/or its congestion control (MRC's EV and CC profiles arrive at
    /// RESET → INIT, after the QP exists). `None` keeps what the host's profile gave it.
    pub fn configure_qp(
        &self,
        qpn: u32,
        evs: Option<&ExplicitEvs>,
        cc: Option<CcConfig>,
    ) -> Result<(), HostError> {
        self.engine(|dp| {
            let ep = dp.endpoint();
            let mut cfg = ep
                .qp_config(qpn)
                .cloned()
                .ok_or(HostError::NoSuchObject("QP"))?;
            if let Some(e) = evs {
                let planes = cfg.ev.planes;
                let per_plane = e.evs.len() / usize::from(planes.max(1));
                let active = e.active_per_plane.min(per_plane as u16);
                if active == 0 {
                    return Err(HostError::Invalid(format!(
                        "{} EVs on {planes} planes: every plane needs at least one active EV",
                        e.evs.len()
                    )));
                }
                cfg.ev.plane_bits = e.plane_bits;
                cfg.ev.per_plane = active;
                cfg.ev.backup_per_plane = per_plane as u16 - active;
                cfg.ev.min_active_per_plane = cfg.ev.min_active_per_plane.clamp(1, active);
                cfg.ev.explicit = Some(e.evs.clone());
            }
            if let Some(mut cc) = cc {
                // NSCC counts in the QP's packets: its MTU is the QP's, whatever the caller's default said.
                if let CcConfig::Nscc(n) = &mut cc {
                    n.mtu = u64::from(cfg.mtu);
                }
                cfg.cc = cc;
            }
            ep.reconfigure_qp(qpn, cfg).map_err(HostError::Config)
        })
    }

    /// Denies an EV of a live QP (no packet leaves on it until it is allowed again) or allows it again. The
    /// change also shows as an [`EvEvent`] and, as any retirement, as
    /// [`AsyncEvent::PathRetired`](crate::AsyncEvent::PathRetired).
    /// Denying the last EV of a QP that is not denied yet is refused (`EBUSY`), as REPLACE_EV refuses to move
    /// the last EV of a plane: the QP would have no path left and fail (spec HOST-CTL-1).
    // spec: HOST-CTL-1
    pub fn set_ev_denied(&self, qpn: u32, ev: u32, denied: bool) -> Result<(), HostError> {
        let r = self.engine(|dp| {
            if denied {
                let infos = dp.endpoint_ref().ev_infos(qpn);
                let others_denied = infos
                    .iter()
                    .filter(|i| i.ev != ev)
                    .all(|i| i.state == EvState::Denied);
                let target_live = infos
                    .iter()
                    .any(|i| i.ev == ev && i.state != EvState::Denied);
                if target_live && others_denied {
                    return Err(HostError::Busy(
                        "the QP's last EV that is not denied (deny another first, or destroy the QP)",
                    ));
                }
            }
            let now = dp.now();
            dp.endpoint()
                .set_ev_denied(qpn, ev, denied, now)
                .map_err(|_| HostError::NoSuchObject("QP or EV"))
        });
        self.wake();
        r
    }

    /// Puts EV `new` in the place of `old` in a live QP with explicit EVs (a controller's REPLACE_EV on the
    /// profile the QP uses): `new` starts GOOD with fresh counters on the plane its low bits name.
    pub fn replace_ev(&self, qpn: u32, old: u32, new: u32) -> Result<(), HostError> {
        let r = self.engine(|dp| {
            let now = dp.now();
            dp.endpoint().replace_ev(qpn, old, new, now)
        });
        self.wake();
        r.map_err(|_| {
            HostError::Invalid(format!(
                "QP {qpn:#x}: EV {old:#x} cannot become {new:#x} (unknown QP or EV, {new:#x} already the \
                 QP's, a generated EV set, or the last EV of its plane moving away)"
            ))
        })
    }

    /// The EVs of a QP with their states and counters (packets sent on each, probes, last RTT).
    pub fn ev_infos(&self, qpn: u32) -> Vec<EvInfo> {
        self.inspect(|dp| dp.endpoint_ref().ev_infos(qpn))
    }

    /// The low EV bits that hold the plane for a QP.
    pub fn plane_bits(&self, qpn: u32) -> Option<u8> {
        self.inspect(|dp| dp.endpoint_ref().qp_config(qpn).map(|c| c.ev.plane_bits))
    }

    /// The next EV state change of any QP.
    pub fn poll_ev_event(&self) -> Option<EvEvent> {
        let ctl = self.ctl();
        let mut q = lock(&ctl.events);
        let e = q.pop_front();
        if q.is_empty()
            && let Some(Some(fd)) = ctl.events_fd.get()
        {
            // Under the queue's lock, so an event pushed meanwhile signals after this drain.
            fd.drain();
        }
        e
    }

    /// A descriptor that is readable while EV events are queued (for a controller that waits in `poll`), or
    /// `None` if the system has no eventfd left.
    pub fn ev_event_fd(&self) -> Option<RawFd> {
        let ctl = self.ctl();
        let fd = ctl
            .events_fd
            .get_or_init(|| crate::socket::EventFd::new().ok())
            .as_ref()?;
        if !lock(&ctl.events).is_empty() {
            fd.signal();
        }
        Some(fd.fd())
    }

    /// EV events lost because the queue was full.
    pub fn ev_events_dropped(&self) -> u64 {
        self.ctl().dropped.load(Ordering::Relaxed)
    }

    /// Probes each of `evs` (engine EVs) toward the peer of QP `qpn` and waits up to `timeout` for the answers:
    /// the round-trip time per EV, `None` where none came back. The QP must be connected (RTR or later).
    pub fn probe_evs(
        &self,
        qpn: u32,
        evs: &[u32],
        timeout: StdDuration,
    ) -> Result<Vec<Option<StdDuration>>, HostError> {
        let peer = self.send_to_peer(qpn, evs, |ep, now, peer, ev, plane| {
            ep.send_ev_probe(now, peer, ev, plane);
        })?;
        self.collect(peer, evs, Answer::Probe, timeout)
    }

    /// Sends the peer of QP `qpn` one PORT_STATUS per `(ev, mask)` that reports `mask` (bit p = our plane p is
    /// up) as our ports' state, on that EV, and waits up to `timeout` for the answers: the round-trip time per
    /// request, `None` where none came back (a report that calls down the plane it travels on is dropped by
    /// the peer as forged). The peer masks the planes reported down for its QPs to us until the next report;
    /// the engine's own reports (on a port change, repeated while a local port is down) carry the real state.
    pub fn send_port_status(
        &self,
        qpn: u32,
        reports: &[(u32, u32)],
        timeout: StdDuration,
    ) -> Result<Vec<Option<StdDuration>>, HostError> {
        let evs: Vec<u32> = reports.iter().map(|r| r.0).collect();
        let mut masks = reports.iter().map(|r| r.1);
        let peer = self.send_to_peer(qpn, &evs, |ep, now, peer, ev, plane| {
            ep.send_port_status(now, peer, ev, plane, masks.next().unwrap_or(0));
        })?;
        self.collect(peer, &evs, Answer::PortStatus, timeout)
    }

    /// Calls `send` for each EV toward the peer of a connected QP (under the engine lock); returns the peer.
    fn send_to_peer(
        &self,
        qpn: u32,
        evs: &[u32],
        mut send: impl FnMut(&mut mrc::Endpoint, mrc::Instant, PeerId, u32, u8),
    ) -> Result<PeerId, HostError> {
        let peer = self.engine(|dp| {
            let ep = dp.endpoint();
            let peer = ep
                .qp_peer(qpn)
                .ok_or(HostError::Invalid(format!("QP {qpn:#x} has no peer yet")))?;
            let bits = ep
                .qp_config(qpn)
                .map(|c| c.ev.plane_bits)
                .ok_or(HostError::NoSuchObject("QP"))?;
            let now = dp.now();
            let ep = dp.endpoint();
            for &ev in evs {
                let plane = (ev & ((1u32 << bits) - 1)) as u8;
                send(ep, now, peer, ev, plane);
            }
            Ok::<_, HostError>(peer)
        })?;
        self.wake();
        Ok(peer)
    }

    /// Waits up to `timeout` for one answer of `kind` from `peer` per EV of `evs`.
    fn collect(
        &self,
        peer: PeerId,
        evs: &[u32],
        kind: Answer,
        timeout: StdDuration,
    ) -> Result<Vec<Option<StdDuration>>, HostError> {
        let deadline = StdInstant::now() + timeout;
        let mut out = vec![None; evs.len()];
        loop {
            {
                let mut a = lock(&self.ctl().answers);
                a.retain(|&(p, ev, rtt, k)| {
                    if p != peer || k != kind {
                        return true;
                    }
                    match evs
                        .iter()
                        .zip(out.iter_mut())
                        .find(|(e, o)| **e == ev && o.is_none())
                    {
                        Some((_, o)) => {
                            *o = Some(rtt);
                            false
                        }
                        None => true,
                    }
                });
            }
            if out.iter().all(Option::is_some) || StdInstant::now() >= deadline {
                return Ok(out);
            }
            self.progress_wait(StdDuration::from_micros(200))?;
        }
    }
}

#[cfg(test)]
mod tests {
    //! Two hosts over loopback sockets (run under `flock /tmp/mrc-net.lock`).
    use super::*;
    use crate::{HostConfig, PeerAddr, ProgressMode, Qp, QpSpec, QpTransition, SendRequest};
    use mrc::{Access, Completion, QpState, SendOp, Sge, WcStatus};

    const LIMIT: StdDuration = StdDuration::from_secs(20);

    /// EV `i` of plane `p` with one plane bit.
    fn ev(i: u32, p: u32) -> u32 {
        i << 1 | p
    }

    fn evs() -> ExplicitEvs {
        ExplicitEvs {
            evs: vec![ev(100, 0), ev(101, 0), ev(200, 1), ev(201, 1)],
            plane_bits: 1,
            active_per_plane: 2,
        }
    }

    struct Pair {
        a: Host,
        b: Host,
        qa: Qp,
        qb: Qp,
        ca: crate::Cq,
        _cb: crate::Cq,
    }

    /// Two connected QPs; `a`'s uses the explicit EVs of [`evs`].
    fn pair() -> Pair {
        let mk = || {
            let mut cfg = HostConfig::loopback(2);
            cfg.progress = ProgressMode::Thread;
            Host::start(cfg).expect("loopback sockets")
        };
        let (a, b) = (mk(), mk());
        let ca = a.create_cq(1024).unwrap();
        let cb = b.create_cq(1024).unwrap();
        let qa = a.create_qp(QpSpec::new(a.default_pd(), &ca)).unwrap();
        let qb = b.create_qp(QpSpec::new(b.default_pd(), &cb)).unwrap();
        a.configure_qp(qa.qpn(), Some(&evs()), None).unwrap();
        let up = |q: &Qp, peer: &Host, remote: &Qp| {
            let l = peer.local();
            q.modify(QpTransition::Init {
                access: Access::REMOTE_WRITE,
            })
            .unwrap();
            q.modify(QpTransition::Rtr {
                peer: PeerAddr {
                    plane0: l.plane0,
                    port: l.port,
                },
                remote_qpn: remote.qpn(),
                rq_psn: remote.psn(),
                mtu: 4096,
            })
            .unwrap();
            q.modify(QpTransition::Rts {
                sq_psn: q.psn(),
                timeout: 14,
                retry_cnt: 7,
                rnr_retry: 7,
            })
            .unwrap();
            assert_eq!(q.state(), QpState::Rts);
        };
        up(&qa, &b, &qb);
        up(&qb, &a, &qa);
        Pair {
            a,
            b,
            qa,
            qb,
            ca,
            _cb: cb,
        }
    }

    fn sent_on(h: &Host, qpn: u32, e: u32) -> u64 {
        h.ev_infos(qpn)
            .iter()
            .find(|i| i.ev == e)
            .map(|i| i.stats.sent)
            .expect("the EV is the QP's")
    }

    fn wait_events(h: &Host, want: impl Fn(&[EvEvent]) -> bool) -> Vec<EvEvent> {
        let start = StdInstant::now();
        let mut got = Vec::new();
        while !want(&got) {
            assert!(start.elapsed() < LIMIT, "EV events so far: {got:?}");
            match h.poll_ev_event() {
                Some(e) => got.push(e),
                None => std::thread::sleep(StdDuration::from_millis(1)),
            }
        }
        got
    }

    #[test]
    fn explicit_evs_are_the_qps() {
        let p = pair();
        let mut got: Vec<u32> = p.a.ev_infos(p.qa.qpn()).iter().map(|i| i.ev).collect();
        got.sort_unstable();
        assert_eq!(got, evs().evs);
        assert_eq!(p.a.plane_bits(p.qa.qpn()), Some(1));
        // Only in RESET.
        let e =
            p.a.configure_qp(p.qa.qpn(), Some(&evs()), None)
                .unwrap_err();
        assert_eq!(e.errno(), libc::EINVAL);
        // Every plane needs an active EV.
        let q = p.a.create_qp(QpSpec::new(p.a.default_pd(), &p.ca)).unwrap();
        let none = ExplicitEvs {
            evs: vec![],
            plane_bits: 1,
            active_per_plane: 1,
        };
        assert!(p.a.configure_qp(q.qpn(), Some(&none), None).is_err());
        // NSCC per QP, in the engine's units.
        let nscc = mrc::cc::NsccConfig {
            base_rtt: StdDuration::from_micros(7),
            target_delay: StdDuration::from_micros(5),
            max_cwnd: Some(1 << 20),
            eta: 0.2,
            ..Default::default()
        };
        p.a.configure_qp(q.qpn(), None, Some(CcConfig::Nscc(nscc.clone())))
            .unwrap();
        // (Its MTU follows the QP's.)
        let (cc, mtu) = p.a.inspect(|dp| {
            let c = dp.endpoint_ref().qp_config(q.qpn()).unwrap();
            (c.cc.clone(), c.mtu)
        });
        assert_eq!(
            cc,
            CcConfig::Nscc(mrc::cc::NsccConfig {
                mtu: u64::from(mtu),
                ..nscc
            })
        );
        // A bad NSCC configuration is refused and changes nothing.
        let bad = mrc::cc::NsccConfig {
            max_md_jump: 2.0,
            ..Default::default()
        };
        assert!(
            p.a.configure_qp(q.qpn(), None, Some(CcConfig::Nscc(bad)))
                .is_err()
        );
        drop(p.qb);
    }

    #[test]
    fn deny_mid_transfer_stops_packets_on_the_ev() {
        let p = pair();
        let (a, qpn) = (&p.a, p.qa.qpn());
        const MSG: usize = 256 * 1024;
        const MSGS: usize = 32;
        let src: Vec<u8> = (0..MSG).map(|i| (i * 13 + 7) as u8).collect();
        let mut dst = vec![0u8; MSG];
        // SAFETY: both buffers outlive their registrations (deregistered before they drop).
        let (ms, md) = unsafe {
            (
                a.reg_mr(
                    a.default_pd(),
                    src.as_ptr().cast_mut(),
                    MSG,
                    Access::LOCAL_WRITE,
                )
                .unwrap(),
                p.b.reg_mr(
                    p.b.default_pd(),
                    dst.as_mut_ptr(),
                    MSG,
                    Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                )
                .unwrap(),
            )
        };
        let sge = [Sge {
            addr: ms.addr,
            len: MSG as u32,
            lkey: ms.lkey,
        }];
        let denied = ev(100, 0);
        let mut at_deny = None;
        let mut done = 0;
        let mut posted = 0;
        let start = StdInstant::now();
        let mut out = [Completion::default(); 16];
        while done < MSGS {
            assert!(start.elapsed() < LIMIT, "{done} of {MSGS} WRITEs completed");
            while posted < MSGS && posted - done < 8 {
                p.qa.post_send(&SendRequest {
                    wr_id: posted as u64,
                    op: SendOp::Write {
                        remote_addr: md.addr,
                        rkey: md.rkey,
                    },
                    sges: &sge,
                    inline: None,
                    signaled: true,
                    solicited: false,
                    fence: false,
                })
                .unwrap();
                posted += 1;
            }
            let n = p.ca.poll(&mut out);
            for c in &out[..n] {
                assert_eq!(c.status, WcStatus::Success);
            }
            done += n;
            if at_deny.is_none() && done >= MSGS / 4 {
                assert!(sent_on(a, qpn, denied) > 0, "the EV carried packets before");
                a.set_ev_denied(qpn, denied, true).unwrap();
                at_deny = Some(sent_on(a, qpn, denied));
            }
            std::thread::yield_now();
        }
        let at_deny = at_deny.unwrap();
        assert_eq!(sent_on(a, qpn, denied), at_deny, "no packet after DENY");
        assert!(sent_on(a, qpn, ev(101, 0)) > 0);
        let info = a.ev_infos(qpn);
        let i = info.iter().find(|i| i.ev == denied).unwrap();
        assert_eq!(i.state, EvState::Denied);
        // A preempted run may have timed a packet on it out first (an ASSUMED_BAD event before this one).
        let denied_event = |e: &&EvEvent| e.ev == denied && e.to == EvState::Denied;
        let evs = wait_events(a, |g| g.iter().any(|e| denied_event(&e)));
        let e = evs.iter().find(denied_event).unwrap();
        assert_eq!((e.qpn, e.plane), (qpn, 0));
        // Allowed again: it carries packets again.
        a.set_ev_denied(qpn, denied, false).unwrap();
        wait_events(a, |g| {
            g.iter().any(|e| e.ev == denied && e.to == EvState::Good)
        });
        assert!(a.set_ev_denied(qpn, ev(999, 0), true).is_err());
        a.dereg_mr(&ms).unwrap();
        p.b.dereg_mr(&md).unwrap();
        assert_eq!(dst, src);
    }

    #[test]
    fn a_dead_plane_raises_ev_events() {
        let p = pair();
        let qpn = p.qa.qpn();
        p.a.set_port(1, false).unwrap();
        let got = wait_events(&p.a, |g| {
            [ev(200, 1), ev(201, 1)]
                .iter()
                .all(|&x| g.iter().any(|e| e.ev == x))
        });
        for e in got.iter().filter(|e| e.plane == 1) {
            assert_eq!(e.qpn, qpn);
            assert_eq!(e.to, EvState::AssumedBad, "{e:?}");
        }
        assert!(got.iter().all(|e| e.plane == 1), "{got:?}");
    }

    #[test]
    fn a_replaced_ev_carries_the_traffic_of_the_old_one() {
        let p = pair();
        let (a, qpn) = (&p.a, p.qa.qpn());
        let (old, new) = (ev(101, 0), ev(150, 0));
        a.replace_ev(qpn, old, new).unwrap();
        let mut got: Vec<u32> = a.ev_infos(qpn).iter().map(|i| i.ev).collect();
        got.sort_unstable();
        assert_eq!(got, vec![ev(100, 0), new, ev(200, 1), ev(201, 1)]);
        // Traffic on it: 64 WRITEs spread over every active EV.
        writes(a, &p.qa, &p.ca, &p.b, 64);
        assert!(sent_on(a, qpn, new) > 0, "the new EV carried packets");
        // Refused: the old one is gone.
        assert!(a.replace_ev(qpn, old, ev(151, 0)).is_err());
    }

    /// WRITEs of `n` × 64 KiB from `q` (completing on `cq`) into `dst`'s memory on `to`.
    fn writes(from: &Host, q: &Qp, cq: &crate::Cq, to: &Host, n: usize) {
        const MSG: usize = 64 * 1024;
        let src = vec![9u8; MSG];
        let mut dst = vec![0u8; MSG];
        // SAFETY: both buffers outlive their registrations (deregistered before they drop).
        let (ms, md) = unsafe {
            (
                from.reg_mr(
                    from.default_pd(),
                    src.as_ptr().cast_mut(),
                    MSG,
                    Access::LOCAL_WRITE,
                )
                .unwrap(),
                to.reg_mr(
                    to.default_pd(),
                    dst.as_mut_ptr(),
                    MSG,
                    Access::LOCAL_WRITE | Access::REMOTE_WRITE,
                )
                .unwrap(),
            )
        };
        let sge = [Sge {
            addr: ms.addr,
            len: MSG as u32,
            lkey: ms.lkey,
        }];
        let start = StdInstant::now();
        let mut out = [Completion::default(); 16];
        let (mut posted, mut done) = (0, 0);
        while done < n {
            assert!(start.elapsed() < LIMIT, "{done} of {n} WRITEs completed");
            while posted < n && posted - done < 8 {
                q.post_send(&SendRequest {
                    wr_id: posted as u64,
                    op: SendOp::Write {
                        remote_addr: md.addr,
                        rkey: md.rkey,
                    },
                    sges: &sge,
                    inline: None,
                    signaled: true,
                    solicited: false,
                    fence: false,
                })
                .unwrap();
                posted += 1;
            }
            let k = cq.poll(&mut out);
            assert!(out[..k].iter().all(|c| c.status == WcStatus::Success));
            done += k;
            std::thread::yield_now();
        }
        from.dereg_mr(&ms).unwrap();
        to.dereg_mr(&md).unwrap();
        assert_eq!(dst, src);
    }

    #[test]
    fn a_port_status_report_masks_the_planes_it_calls_down_at_the_peer() {
        let p = pair();
        // b's QP (generated EVs) sends to a on both planes.
        let qb = p.qb.qpn();
        let plane_sent = |h: &Host, plane: u8| -> u64 {
            h.ev_infos(qb)
                .iter()
                .filter(|i| i.plane == plane)
                .map(|i| i.stats.sent)
                .sum()
        };
        writes(&p.b, &p.qb, &p._cb, &p.a, 16);
        assert!(plane_sent(&p.b, 1) > 0, "plane 1 carried packets before");
        // a reports plane 1 down, on plane 0: answered, with an RTT.
        let rtts =
            p.a.send_port_status(p.qa.qpn(), &[(ev(100, 0), 0b01)], LIMIT)
                .unwrap();
        let rtt = rtts[0].expect("the report was answered");
        assert!(rtt > StdDuration::ZERO && rtt < LIMIT, "{rtt:?}");
        // b masks plane 1, probes it, and since it delivers, sends on it again: a report's mask lasts until a
        // probe answers (spec PATH-PLANE-3), so a stale or forged one cannot take a plane away for good.
        let before = plane_sent(&p.b, 1);
        writes(&p.b, &p.qb, &p._cb, &p.a, 16);
        assert!(
            plane_sent(&p.b, 1) > before,
            "a plane that answers its probes is back in service"
        );
        // A report that calls down the plane it travels on is dropped as forged: no answer.
        let r =
            p.a.send_port_status(
                p.qa.qpn(),
                &[(ev(200, 1), 0b01)],
                StdDuration::from_millis(300),
            )
            .unwrap();
        assert_eq!(r, vec![None]);
        // Both planes up again: plane 1 carries packets again.
        let r =
            p.a.send_port_status(p.qa.qpn(), &[(ev(100, 0), 0b11)], LIMIT)
                .unwrap();
        assert!(r[0].is_some());
        writes(&p.b, &p.qb, &p._cb, &p.a, 16);
        assert!(plane_sent(&p.b, 1) > before, "plane 1 is used again");
    }

    #[test]
    fn probes_answer_with_an_rtt_per_ev() {
        let p = pair();
        let evs = evs().evs;
        let rtts = p.a.probe_evs(p.qa.qpn(), &evs, LIMIT).unwrap();
        assert_eq!(rtts.len(), evs.len());
        for (e, r) in evs.iter().zip(&rtts) {
            let r = r.unwrap_or_else(|| panic!("no answer on EV {e:#x}"));
            assert!(r > StdDuration::ZERO && r < LIMIT, "EV {e:#x}: {r:?}");
        }
        // Not connected: no peer to probe.
        let q = p.a.create_qp(QpSpec::new(p.a.default_pd(), &p.ca)).unwrap();
        assert!(p.a.probe_evs(q.qpn(), &evs, LIMIT).is_err());
    }
}
