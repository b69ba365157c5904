//! Ports and endpoint packets: port state, PORT_STATUS and EV probes between endpoints, bounces and
//! unreachable reports.

use std::collections::BTreeSet;

use super::*;

impl Endpoint {
    /// A local port (plane) went down or came up (link state, or the datapath's fast failure signal). Every QP
    /// masks that plane's EVs at once, and every peer is told with a PORT_STATUS (spec PATH-PLANE-1).
    pub fn set_port_state(&mut self, now: Instant, port: u8, up: bool) {
        if port >= self.cfg.ports {
            return;
        }
        let bit = 1u32 << port;
        let was = self.ports_up;
        if up {
            self.ports_up |= bit;
        } else {
            self.ports_up &= !bit;
        }
        if was == self.ports_up {
            return;
        }
        for slot in 0..self.qps.len() {
            if let Some(qp) = self.qps[slot].as_mut() {
                qp.paths.set_local_port(usize::from(port), up);
                if !up {
                    // spec: PATH-PLANE-1
                    qp.presume_plane_lost(port);
                }
                self.after_qp(slot, now);
            }
        }
        self.queue_port_status(now);
    }

    /// Ports currently up (bit p = port p).
    pub fn ports_up(&self) -> u32 {
        self.ports_up
    }

    fn peers(&self) -> BTreeSet<PeerId> {
        self.qps.iter().flatten().filter_map(|q| q.peer).collect()
    }

    fn first_up_plane(&self) -> Option<u8> {
        (0..self.cfg.ports).find(|p| self.ports_up >> p & 1 == 1)
    }

    /// Queues a PORT_STATUS to every peer, and re-arms the repeat while a port is down (spec WIRE-EP-1).
    pub(super) fn queue_port_status(&mut self, now: Instant) {
        let all = if self.cfg.ports >= 32 {
            u32::MAX
        } else {
            (1u32 << self.cfg.ports) - 1
        };
        self.port_status_deadline = if self.ports_up != all {
            now + self.cfg.port_status_interval
        } else {
            Instant::MAX
        };
        let Some(plane) = self.first_up_plane() else {
            return;
        };
        for peer in self.peers() {
            self.queue_request(now, peer, plane, u32::from(plane), EpOp::PortStatus);
        }
    }

    /// Queues an endpoint request carrying our port mask; returns its id.
    fn queue_request(&mut self, now: Instant, peer: PeerId, plane: u8, ev: u32, op: EpOp) -> u32 {
        let mask = self.ports_up;
        self.queue_request_mask(now, peer, plane, ev, op, mask)
    }

    fn queue_request_mask(
        &mut self,
        now: Instant,
        peer: PeerId,
        plane: u8,
        ev: u32,
        op: EpOp,
        port_mask: u32,
    ) -> u32 {
        let req_id = self.next_req_id;
        self.next_req_id = self.next_req_id.wrapping_add(1);
        let auth = self.ep_key_for(peer);
        self.ep_out.push_back(EpOut {
            peer,
            plane,
            ev,
            auth,
            body: EpBody::Request(EpRequest {
                op,
                req_id,
                port_mask,
                ev,
                ts: Some(now.ts32()),
            }),
        });
        req_id
    }

    /// Sends an EV probe (connectionless, to the peer's endpoint) on `ev`; the answer arrives as
    /// [`Event::EvProbeReply`]. Returns the request id.
    pub fn send_ev_probe(&mut self, now: Instant, peer: PeerId, ev: u32, plane: u8) -> u32 {
        let req_id = self.queue_request(now, peer, plane, ev, EpOp::EvProbe);
        self.ev_probes.insert(req_id, (peer, ev, now));
        if self.ev_probes.len() > 4096 {
            self.ev_probes.pop_first();
        }
        req_id
    }

    /// Sends a PORT_STATUS to `peer` on `ev` that reports `mask` (bit p = our port p is up) instead of the
    /// ports' own state, as MRC's controller does (`MRC_CTL_EP_OP_PORT_STATUS_UPDATE`). The peer masks our
    /// planes the report calls down for its QPs to us (spec PATH-PLANE-1) until a probe of them is answered
    /// (PATH-PLANE-3), and answers; the answer arrives as [`Event::PortStatusReply`]. The endpoint's own reports
    /// (on every port change, and repeated while a local port is down) carry the real state again. Returns the
    /// request id.
    pub fn send_port_status(
        &mut self,
        now: Instant,
        peer: PeerId,
        ev: u32,
        plane: u8,
        mask: u32,
    ) -> u32 {
        let req_id = self.queue_request_mask(now, peer, plane, ev, EpOp::PortStatus, mask);
        self.port_reports.insert(req_id, (peer, ev, now));
        if self.port_reports.len() > 4096 {
            self.port_reports.pop_first();
        }
        req_id
    }

    /// The key endpoint packets to `peer` are tagged with: that of the first keyed, connected QP to it, named by
    /// the peer's QPN (spec SEC-AUTH-2). `None` when no QP to `peer` has keys.
    fn ep_key_for(&self, peer: PeerId) -> Option<(u32, AuthKey)> {
        self.qps.iter().flatten().find_map(|q| match &q.auth {
            Some(k) if q.peer == Some(peer) && matches!(q.state, QpState::Rtr | QpState::Rts) => {
                Some((q.remote_qpn, k.tx))
            }
            _ => None,
        })
    }

    /// Whether an endpoint packet from `peer` may act: when any QP to `peer` has keys, it must carry a tag of
    /// one of them, named by its PSN field; then the answer is tagged with that QP's key. `Err` when it may not.
    // spec: SEC-AUTH-2
    fn ep_proof(
        &self,
        peer: PeerId,
        named: u32,
        tag: Option<AuthTag>,
        data: &[u8],
    ) -> Result<Option<(u32, AuthKey)>, ()> {
        let keyed = self
            .qps
            .iter()
            .flatten()
            .any(|q| q.peer == Some(peer) && q.auth.is_some());
        if !keyed {
            return Ok(None);
        }
        let q = self.qp(named).filter(|q| q.peer == Some(peer)).ok_or(())?;
        match (&q.auth, tag) {
            (Some(k), Some(t)) if t.proves(&k.rx, data) => Ok(Some((q.remote_qpn, k.tx))),
            _ => Err(()),
        }
    }

    pub(super) fn handle_endpoint_packet(&mut self, now: Instant, meta: RecvMeta, data: &[u8]) {
        let opts = ParseOptions {
            verify_icrc: true,
            trimmed: false,
        };
        let (pkt, tag) = match Packet::parse_auth(data, opts) {
            Ok(p) => p,
            Err(e) => {
                count_wire_error(&mut self.stats, e);
                return;
            }
        };
        let Some(peer) = meta.peer else {
            // Endpoint packets act on the sender's QPs; an unknown sender gets nothing.
            self.stats.rx_wrong_peer += 1;
            return;
        };
        let Ok(auth) = self.ep_proof(peer, pkt.bth.psn, tag, data) else {
            self.stats.rx_bad_auth += 1;
            return;
        };
        match pkt.body {
            Body::EpRequest(r) => {
                // A peer sends its port report from a port that is up, which reaches us on the same plane: a
                // report that says the port it came through is down is forged, and would mask every plane.
                // spec: SEC-PEER-2
                if r.op == EpOp::PortStatus && r.port_mask >> (meta.port % 32) & 1 == 0 {
                    self.stats.rx_bad_port_status += 1;
                    return;
                }
                self.stats.rx_ep_requests += 1;
                if r.op == EpOp::PortStatus {
                    for slot in 0..self.qps.len() {
                        if let Some(qp) = self.qps[slot].as_mut()
                            && qp.peer == Some(peer)
                        {
                            let down = qp.paths.set_remote_ports(r.port_mask);
                            // spec: PATH-PLANE-1
                            for plane in (0..32u8).filter(|p| down >> p & 1 == 1) {
                                qp.presume_plane_lost(plane);
                            }
                            self.after_qp(slot, now);
                        }
                    }
                    self.push_event(Event::PortStatus {
                        peer,
                        mask: r.port_mask,
                    });
                }
                if matches!(r.op, EpOp::Unknown(_)) {
                    return;
                }
                let mut plane = meta.port;
                if self.ports_up >> plane & 1 == 0 {
                    plane = self.first_up_plane().unwrap_or(plane);
                }
                self.ep_out.push_back(EpOut {
                    peer,
                    plane,
                    ev: r.ev,
                    auth,
                    body: EpBody::Response(EpResponse {
                        op: r.op,
                        rx_port: meta.port,
                        req_id: r.req_id,
                        ev: r.ev,
                        ts_echo: r.ts.unwrap_or(0),
                    }),
                });
            }
            Body::EpResponse(r) => {
                self.stats.rx_ep_responses += 1;
                if r.op == EpOp::PortStatus
                    && let Some(&(p, ev, sent)) = self.port_reports.get(&r.req_id)
                    && p == peer
                    && ev == r.ev
                {
                    self.port_reports.remove(&r.req_id);
                    self.push_event(Event::PortStatusReply {
                        peer,
                        ev,
                        rtt: now - sent,
                        rx_port: r.rx_port,
                    });
                }
                if r.op == EpOp::EvProbe
                    && let Some((p, ev, sent)) = self.ev_probes.remove(&r.req_id)
                    && p == peer
                    && ev == r.ev
                {
                    self.push_event(Event::EvProbeReply {
                        peer,
                        ev,
                        rtt: now - sent,
                        rx_port: r.rx_port,
                    });
                }
            }
            _ => self.stats.rx_malformed += 1,
        }
    }

    pub(super) fn poll_endpoint_out(&mut self, buf: &mut [u8]) -> Option<Transmit> {
        let o = self.ep_out.pop_front()?;
        let (opcode, body) = match o.body {
            EpBody::Request(r) => (Opcode::EpRequest, Body::EpRequest(r)),
            EpBody::Response(r) => (Opcode::EpResponse, Body::EpResponse(r)),
        };
        let pkt = Packet {
            bth: Bth {
                opcode,
                se: false,
                rtx: false,
                pkey: crate::wire::DEFAULT_PKEY,
                dest_qp: EP_QPN,
                ack_req: false,
                // spec: SEC-AUTH-2
                psn: o.auth.map_or(0, |(qpn, _)| qpn),
            },
            body,
        };
        let mut n = pkt.emit_header(buf).ok()?;
        if let Some((_, key)) = &o.auth {
            n = key.seal_headers(buf, n).ok()?;
        }
        let len = crate::wire::seal(buf, n).ok()?;
        Some(Transmit {
            peer: o.peer,
            ev: o.ev,
            plane: o.plane,
            class: TrafficClass::Control,
            len,
            qpn: EP_QPN,
            payload: None,
        })
    }

    /// A datagram this endpoint sent to `peer` bounced: the network (an ICMP unreachable read from the socket's
    /// error queue) or the local stack (a send error) gave it back. `datagram` is its UDP payload as quoted,
    /// from its first byte; only its headers are read, so a quote cut short after them is enough. The EV the
    /// headers name as the one it travelled on is retired at once in every QP to `peer`, instead of after a
    /// loss timeout (spec PATH-BOUNCE-1); that EV is returned. The datapath thus needs no packet parsing of
    /// its own: it only maps the bounced destination address to the peer.
    ///
    /// A quote that does not parse, names no EV (a transport ACK), or is addressed to no QP connected to
    /// `peer` is ignored and counted: an off-path sender forging ICMP errors must know a QPN to retire paths.
    // spec: PATH-BOUNCE-1
    pub fn handle_bounce(&mut self, now: Instant, peer: PeerId, datagram: &[u8]) -> Option<u32> {
        let ev = match Packet::parse_prefix_auth(datagram) {
            Ok((p, tag)) => {
                let ev = match p.body {
                    Body::Data(d) => Some(d.meth.ev),
                    Body::Probe(p) => Some(p.ev),
                    Body::Sack(s) => Some(s.ev),
                    Body::Nack(n) => Some(n.ev),
                    Body::EpRequest(r) => Some(r.ev),
                    Body::EpResponse(r) => Some(r.ev),
                    Body::Ack(_) => None,
                };
                // A keyed connection's packets carry our own tag: a quote without it is not ours.
                // spec: SEC-AUTH-3
                let ours = |q: &Qp| match &q.auth {
                    None => true,
                    Some(k) => tag.is_some_and(|t| t.proves(&k.tx, datagram)),
                };
                let to_peer = |q: &&Qp| q.peer == Some(peer);
                let keyed_peer = self
                    .qps
                    .iter()
                    .flatten()
                    .filter(to_peer)
                    .any(|q| q.auth.is_some());
                let (dest, named) = (p.bth.dest_qp, p.bth.psn);
                let connected = self.qps.iter().flatten().filter(to_peer).any(|q| {
                    if dest != EP_QPN {
                        q.remote_qpn == dest && ours(q)
                    } else {
                        !keyed_peer || (q.remote_qpn == named && q.auth.is_some() && ours(q))
                    }
                });
                ev.filter(|_| connected)
            }
            Err(_) => None,
        };
        let Some(ev) = ev else {
            self.stats.bounces_ignored += 1;
            return None;
        };
        self.stats.bounces += 1;
        self.report_unreachable(now, peer, ev);
        Some(ev)
    }

    /// The datapath learned otherwise (with the EV in hand) that the path `ev` to `peer` is broken: retire that
    /// EV in every QP to that peer at once. [`handle_bounce`](Self::handle_bounce) does this from the bounced
    /// bytes.
    pub fn report_unreachable(&mut self, now: Instant, peer: PeerId, ev: u32) {
        for slot in 0..self.qps.len() {
            if let Some(qp) = self.qps[slot].as_mut()
                && qp.peer == Some(peer)
                && let Some(idx) = qp.paths.find(ev)
            {
                qp.paths.on_unreachable(idx, now);
                qp.collect_ev_changes();
                self.after_qp(slot, now);
            }
        }
    }
}
