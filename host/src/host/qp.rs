//! Queue pairs: the verbs-style transitions, creation, the state code the rings read, posting.

use super::config::QpRetry;
use super::cq::Cq;
use super::state::{
    Core, InlineArena, Inner, QpShared, RecvItem, ST_RESET, SendItem, lock, state_code, state_of,
};
use std::net::{Ipv6Addr, SocketAddrV6};
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};

use crossbeam_queue::ArrayQueue;

use mrc::{Access, Pd, PeerId, PostError, QpConfig, QpInit, QpState, SendOp, Sge, Transition};
use smallvec::SmallVec;

use crate::bootstrap::{Blob, BlobKind, QpHalf, random_key};
use crate::driver::{initial_psn, software_cc};
use crate::error::HostError;
use crate::plane::{PlaneIo, UdpPlanes};
use mrc::QpKeys;
use mrc::wire::AuthKey;

/// A peer as verbs names it: GID 0 (plane 0's address) and LID (its UDP port). The host asks the peer for its
/// other planes in band and remembers them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PeerAddr {
    /// Plane 0's address.
    pub plane0: Ipv6Addr,
    /// Plane 0's UDP port.
    pub port: u16,
}

/// One step of a QP's state machine, with what verbs gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum QpTransition {
    /// RESET → INIT (or INIT → INIT): the remote access granted.
    Init {
        /// `REMOTE_WRITE` and/or `REMOTE_READ`.
        access: Access,
    },
    /// INIT → RTR: the peer is known.
    Rtr {
        /// The peer's plane 0.
        peer: PeerAddr,
        /// The peer's QP.
        remote_qpn: u32,
        /// First PSN expected from the peer.
        rq_psn: u32,
        /// Path MTU in bytes (the profile's MTU is used; smaller values are accepted and ignored).
        mtu: u32,
    },
    /// RTR → RTS.
    Rts {
        /// First PSN this QP sends.
        sq_psn: u32,
        /// verbs' local ACK timeout exponent: 4.096 µs × 2^timeout, 0 infinite ([`QpRetry::from_verbs`]).
        timeout: u8,
        /// verbs' retry count: retries at that timeout before the QP fails with `RetryExcErr`.
        retry_cnt: u8,
        /// verbs' RNR retry count (accepted and ignored: receiver-not-ready NACKs share the retry count).
        rnr_retry: u8,
    },
    /// Any → ERROR: flush.
    Error,
    /// Any → RESET.
    Reset,
}

/// What [`Host::create_qp`](crate::Host::create_qp) needs.
#[derive(Debug, Clone, Copy)]
pub struct QpSpec<'a> {
    /// Protection domain.
    pub pd: Pd,
    /// Where send completions go.
    pub send_cq: &'a Cq,
    /// Where receive completions go.
    pub recv_cq: &'a Cq,
    /// Send queue depth (also the submission ring's).
    pub max_send_wr: u32,
    /// Receive queue depth.
    pub max_recv_wr: u32,
    /// Most scatter/gather elements per work request.
    pub max_sge: u32,
    /// Most bytes a work request may carry inline.
    pub max_inline: u32,
    /// Every send work request is signaled.
    pub sq_sig_all: bool,
}

impl<'a> QpSpec<'a> {
    /// Defaults (256-deep queues, 4 SGEs, no inline) for `pd` and one CQ for both directions.
    pub fn new(pd: Pd, cq: &'a Cq) -> Self {
        Self {
            pd,
            send_cq: cq,
            recv_cq: cq,
            max_send_wr: 256,
            max_recv_wr: 256,
            max_sge: 4,
            max_inline: 0,
            sq_sig_all: false,
        }
    }
}

/// A send work request.
#[derive(Debug, Clone, Copy)]
pub struct SendRequest<'a> {
    /// Returned in the completion.
    pub wr_id: u64,
    /// The operation.
    pub op: SendOp,
    /// Registered local buffers (ignored when `inline` is set).
    pub sges: &'a [Sge],
    /// Bytes copied now, at posting (at most the QP's `max_inline`); no key is needed.
    pub inline: Option<&'a [u8]>,
    /// Generate a completion.
    pub signaled: bool,
    /// Ask for a solicited event at the peer.
    pub solicited: bool,
    /// Wait for earlier READs (MRC orders a QP's operations anyway: accepted, no effect).
    pub fence: bool,
}

impl<P: PlaneIo> Inner<P> {
    pub(super) fn qp_config(&self, c: &Core<P>) -> QpConfig {
        let p = self.profile;
        QpConfig {
            icrc: p.icrc,
            // Verbs initiators keep as many READs outstanding as their send queue holds (perftest: up to 128),
            // and the engine does not hold back the ones beyond the responder's limit: with the default 16 the
            // rest are NACKed and retried until the QP timeout gives up on large READs (ib_read_bw -a, 4 MiB).
            max_read_dest: 256,
            timeout: p.ack_timeout,
            retry_linear: p.retry_cnt,
            retry_exp: p.retry_backoff,
            ev_burst: p.ev_burst.clamp(1, 64),
            sack_hold: mrc::time::Duration::from_nanos(p.sack_hold.as_nanos() as u64),
            ..c.dp.software_qp_config(
                p.mtu,
                p.evs_per_plane,
                software_cc(p.mtu, p.window_packets, p.rate_bps),
            )
        }
    }

    pub(super) fn create_qp_locked(
        self: &Arc<Self>,
        c: &mut Core<P>,
        spec: &QpSpec<'_>,
    ) -> Result<Qp<P>, HostError> {
        if c.qps.len() >= self.max_qps as usize {
            return Err(HostError::Full("the QP table"));
        }
        let max_send_wr = spec.max_send_wr.max(1);
        let max_recv_wr = spec.max_recv_wr.max(1);
        let mut init = QpInit::new(spec.pd, spec.send_cq.sh.id);
        init.recv_cq = spec.recv_cq.sh.id;
        init.max_send_wr = max_send_wr;
        init.max_recv_wr = max_recv_wr;
        init.max_sge = spec.max_sge.max(1);
        init.sq_sig_all = spec.sq_sig_all;
        init.config = self.qp_config(c);
        let mtu = init.config.mtu;
        let qpn = c.dp.endpoint().create_qp(init)?;
        let caps = c.dp.endpoint_ref().config().caps;
        if spec.max_inline > 0 {
            let slots = 2 * max_send_wr as usize + 1;
            let slot = spec.max_inline as usize;
            match c.dp.alloc_mr(spec.pd, slots * slot, Access::LOCAL_WRITE) {
                Ok((addr, keys)) => {
                    c.inline.insert(
                        qpn,
                        InlineArena {
                            addr,
                            lkey: keys.lkey,
                            slot,
                            slots,
                            next: 0,
                        },
                    );
                }
                Err(e) => {
                    let _ = c.dp.endpoint().destroy_qp(qpn);
                    return Err(e.into());
                }
            }
        }
        let sh = Arc::new(QpShared {
            qpn,
            psn: initial_psn(),
            key: random_key(),
            mtu,
            caps,
            sq: ArrayQueue::new(max_send_wr as usize),
            rq: ArrayQueue::new(max_recv_wr as usize),
            state: AtomicU8::new(ST_RESET),
            max_sge: spec.max_sge.max(1),
            max_inline: spec.max_inline,
            send_cq: Arc::clone(&spec.send_cq.sh),
            recv_cq: Arc::clone(&spec.recv_cq.sh),
        });
        c.qps.insert(qpn, Arc::clone(&sh));
        c.qp_list.push(Arc::clone(&sh));
        c.reshare();
        Ok(Qp {
            host: Arc::clone(self),
            sh,
        })
    }

    pub(super) fn modify_locked(
        &self,
        c: &mut Core<P>,
        sh: &QpShared,
        t: Transition,
    ) -> Result<(), HostError> {
        let now = c.dp.now();
        let r = c.dp.endpoint().modify_qp(sh.qpn, t, now);
        if let Some(s) = c.dp.endpoint_ref().qp_state(sh.qpn) {
            sh.state.store(state_code(s), Ordering::Release);
        }
        r.map_err(HostError::from)
    }

    /// Brings `sh` from RESET or INIT to RTS toward `remote` of `peer`.
    pub(super) fn connect_locked(
        &self,
        c: &mut Core<P>,
        sh: &QpShared,
        peer: PeerId,
        remote: &QpHalf,
    ) -> Result<(), HostError> {
        if sh.state.load(Ordering::Acquire) == ST_RESET {
            self.modify_locked(
                c,
                sh,
                Transition::Init {
                    access: Access::REMOTE_WRITE | Access::REMOTE_READ,
                },
            )?;
        }
        // INIT → RTR → RTS is the engine's one-step `connect_qp`; it reads the peer's QPN, PSN and caps.
        let now = c.dp.now();
        let mut info =
            c.dp.endpoint_ref()
                .conn_info(sh.qpn, sh.psn)
                .ok_or(HostError::NoSuchObject("QP"))?;
        info.qpn = remote.qpn;
        info.psn = remote.psn;
        info.caps = remote.caps;
        // spec: SEC-AUTH-1
        let keys = QpKeys {
            tx: AuthKey::new(remote.key),
            rx: AuthKey::new(sh.key),
        };
        c.dp.endpoint().set_qp_keys(sh.qpn, Some(keys))?;
        let r = c.dp.endpoint().connect_qp(sh.qpn, peer, &info, sh.psn, now);
        if let Some(s) = c.dp.endpoint_ref().qp_state(sh.qpn) {
            sh.state.store(state_code(s), Ordering::Release);
        }
        r.map_err(HostError::from)
    }
}

pub(super) fn set_retry<P: PlaneIo>(
    c: &mut Core<P>,
    qpn: u32,
    r: QpRetry,
) -> Result<(), HostError> {
    c.dp.endpoint()
        .set_qp_retry(qpn, r.ack_timeout, r.retry_cnt, r.retry_backoff)
        .map_err(HostError::from)
}

/// A queue pair. Posting goes through a lock-free submission ring that the progress loop drains.
pub struct Qp<P: PlaneIo = UdpPlanes> {
    pub(super) host: Arc<Inner<P>>,
    pub(super) sh: Arc<QpShared>,
}

impl<P: PlaneIo> Clone for Qp<P> {
    fn clone(&self) -> Self {
        Qp {
            host: Arc::clone(&self.host),
            sh: Arc::clone(&self.sh),
        }
    }
}

impl<P: PlaneIo> std::fmt::Debug for Qp<P> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Qp")
            .field("qpn", &self.sh.qpn)
            .field("state", &self.state())
            .finish()
    }
}

impl<P: PlaneIo> Qp<P> {
    /// The QP's number.
    pub fn qpn(&self) -> u32 {
        self.sh.qpn
    }

    /// The first PSN this QP sends (what a verbs program passes as `sq_psn`, and the peer as `rq_psn`).
    pub fn psn(&self) -> u32 {
        self.sh.psn
    }

    /// The state (as of the last transition or progress round).
    pub fn state(&self) -> QpState {
        state_of(self.sh.state.load(Ordering::Acquire))
    }

    /// One verbs-style transition. RTR resolves the peer's planes in band (asking `plane0:port` once; the answer
    /// is cached), which may take a round trip.
    pub fn modify(&self, t: QpTransition) -> Result<(), HostError> {
        let i = &self.host;
        let mut retry = None;
        let t = match t {
            QpTransition::Init { access } => Transition::Init { access },
            QpTransition::Rtr {
                peer,
                remote_qpn,
                rq_psn,
                mtu: _,
            } => {
                let peer = i.resolve(SocketAddrV6::new(peer.plane0, peer.port, 0, 0), 0)?;
                Transition::Rtr {
                    peer,
                    remote_qpn,
                    rq_psn,
                    remote_caps: self.sh.caps,
                }
            }
            QpTransition::Rts {
                sq_psn,
                timeout,
                retry_cnt,
                ..
            } => {
                retry = Some(QpRetry::from_verbs(timeout, retry_cnt));
                Transition::Rts { sq_psn }
            }
            QpTransition::Error => Transition::Error,
            QpTransition::Reset => Transition::Reset,
        };
        let reset = matches!(t, Transition::Reset);
        let mut c = lock(&i.core);
        let mut r = i.modify_locked(&mut c, &self.sh, t);
        if let (Ok(()), Some(q)) = (&r, retry) {
            r = set_retry(&mut c, self.sh.qpn, q);
        }
        if reset {
            c.stalled.remove(&self.sh.qpn);
            while self.sh.sq.pop().is_some() {}
            while self.sh.rq.pop().is_some() {}
        }
        drop(c);
        i.kick();
        r
    }

    /// Connects this QP to the QP a peer's [`blob`](Self::blob) describes: RESET/INIT → RTR → RTS in one step.
    pub fn connect(&self, remote: &Blob) -> Result<(), HostError> {
        let i = &self.host;
        let BlobKind::Qp { qpn, psn, caps, .. } = remote.kind else {
            return Err(HostError::Invalid(
                "the blob names a listener, not a QP".into(),
            ));
        };
        let dest = i.bootstrap_dest(&lock(&i.core), remote);
        let peer = i.resolve_at(remote.plane0, dest)?;
        let mut c = lock(&i.core);
        let half = QpHalf {
            qpn,
            psn,
            caps,
            key: remote.key,
        };
        let r = i.connect_locked(&mut c, &self.sh, peer, &half);
        drop(c);
        i.kick();
        r
    }

    /// Changes this QP's local-ACK timeout and retry counts, in any state (they apply from the next time the
    /// QP timeout is armed). `EINVAL` for a timeout above 31.
    pub fn set_retry(&self, retry: QpRetry) -> Result<(), HostError> {
        set_retry(&mut lock(&self.host.core), self.sh.qpn, retry)
    }

    /// This QP's local-ACK timeout and retry counts, as the engine has them.
    pub fn retry(&self) -> Option<QpRetry> {
        let c = lock(&self.host.core);
        c.dp.endpoint_ref().qp_config(self.sh.qpn).map(|q| QpRetry {
            ack_timeout: q.timeout,
            retry_cnt: q.retry_linear,
            retry_backoff: q.retry_exp,
        })
    }

    /// What a peer needs to connect to this QP (≤ 128 bytes once encoded).
    pub fn blob(&self) -> Blob {
        self.host.blob(
            BlobKind::Qp {
                qpn: self.sh.qpn,
                psn: self.sh.psn,
                caps: self.sh.caps,
                mtu: self.sh.mtu,
            },
            self.sh.key,
        )
    }

    /// Posts a send work request without waiting for the engine. Queue full → `ENOMEM`; QP in RESET, INIT or
    /// RTR → `EINVAL` (verbs semantics). Errors the engine finds later (keys, bounds) come back as completions
    /// with an error status, as from a NIC.
    pub fn post_send(&self, wr: &SendRequest<'_>) -> Result<(), HostError> {
        let s = self.state();
        if matches!(s, QpState::Reset | QpState::Init | QpState::Rtr) {
            return Err(HostError::BadState(s));
        }
        let inline = match wr.inline {
            Some(b) => {
                if b.len() > self.sh.max_inline as usize {
                    return Err(HostError::Invalid(format!(
                        "{} inline bytes; the QP allows {}",
                        b.len(),
                        self.sh.max_inline
                    )));
                }
                Some(Box::<[u8]>::from(b))
            }
            None => {
                if wr.sges.len() > self.sh.max_sge as usize {
                    return Err(HostError::Post(PostError::TooManySge));
                }
                None
            }
        };
        let item = SendItem {
            wr_id: wr.wr_id,
            op: wr.op,
            sges: if inline.is_some() {
                SmallVec::new()
            } else {
                SmallVec::from_slice(wr.sges)
            },
            inline,
            signaled: wr.signaled,
            solicited: wr.solicited,
        };
        self.sh
            .sq
            .push(item)
            .map_err(|_| HostError::Full("the send queue"))?;
        self.host.kick();
        Ok(())
    }

    /// Posts a receive (an empty `sges` takes a WRITE_WITH_IMM's notification only).
    pub fn post_recv(&self, wr_id: u64, sges: &[Sge]) -> Result<(), HostError> {
        let s = self.state();
        if s == QpState::Reset {
            return Err(HostError::BadState(s));
        }
        if sges.len() > self.sh.max_sge as usize {
            return Err(HostError::Post(PostError::TooManySge));
        }
        self.sh
            .rq
            .push(RecvItem {
                wr_id,
                sges: SmallVec::from_slice(sges),
            })
            .map_err(|_| HostError::Full("the receive queue"))?;
        self.host.kick();
        Ok(())
    }
}
