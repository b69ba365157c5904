//! The seam to `mrc-host`: every transport call the plugin makes goes through this file, and it holds no
//! transport logic of its own. The host layer owns the progress thread, registered memory, the peer table, the
//! in-band bootstrap (listen/connect with application bytes) and QP bring-up; this file turns the plugin's
//! [`Settings`] into a `HostConfig`, the protocol's [`Op`]s into work requests and completions into [`Done`]s.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use mrc::{Access, Completion, SendOp, WcOpcode, WcStatus};
use mrc_host as mh;

use crate::config::{Cc, Settings};
use crate::ffi::Error;
use crate::log::info;
use crate::proto::{Done, Op, Sge};

/// `ENOMEM`: a QP's queue is full (verbs semantics of the host's `post_send`/`post_recv`).
const ENOMEM: i32 = 12;

/// A host-layer failure as NCCL sees it: `ncclSystemError` naming what was being done.
fn sys(what: &'static str) -> impl Fn(mh::HostError) -> Error {
    move |e| Error::system(format!("{what}: {e} (errno {})", e.errno()))
}

/// The host configuration the plugin's settings ask for (`README.md` lists the variables).
pub(crate) fn host_config(s: &Settings) -> Result<mh::HostConfig, Error> {
    let mut cfg = mh::HostConfig::loopback(s.planes);
    if let Some(path) = &s.node_config {
        cfg.node = mh::NodeConfig::load(path).map_err(|e| {
            Error::invalid(format!(
                "NCCL_MRC_NODE_CONFIG={}: {e}",
                path.to_string_lossy()
            ))
        })?;
        // Every rank of a node, and each of a rank's progress threads, binds the node's plane addresses:
        // ephemeral ports let them share them (peers learn the ports from the bootstrap).
        for p in &mut cfg.node.planes {
            p.addr.set_port(0);
        }
    }
    // NCCL's proxy thread polls `test` in a loop; the host's own thread moves the packets.
    cfg.progress = mh::ProgressMode::Thread;
    if let Some(evs) = s.evs {
        cfg.profile.evs_per_plane = evs;
    }
    // The host's profile is a fixed window unless a rate is given, which sizes NSCC for it.
    cfg.profile.rate_bps = match s.cc {
        Cc::Fixed => None,
        Cc::Nscc => Some(match s.rate_gbps {
            Some(g) => (g * 1e9) as u64,
            // No rate given: the `speed` property's share of one plane.
            None => {
                u64::try_from(s.speed()).unwrap_or(100_000) * 1_000_000 / s.planes.max(1) as u64
            }
        }),
    };
    cfg.bootstrap_timeout = Duration::from_millis(s.connect_timeout_ms);
    // NCCL_MRC_TIMEOUT / NCCL_MRC_RETRY_CNT, like NCCL_IB_TIMEOUT / NCCL_IB_RETRY_CNT: `retry_cnt` retries at the
    // timeout and no back-off, so a dead peer fails the QP (and NCCL's operation) after `retry_cnt + 1` timeouts.
    cfg.profile.ack_timeout = s.timeout;
    cfg.profile.retry_cnt = s.retry_cnt;
    cfg.profile.retry_backoff = 0;
    Ok(cfg)
}

/// How long a closed comm's QPs keep answering before they are destroyed. Destroying a QP drops what it still
/// owes the peer (the engine's `destroy_qp`, as in verbs), and the receiver's ACK of the last size record may
/// still be queued when NCCL closes the comm: the sender would retransmit into nothing and fail. Seconds cover
/// every retransmission an ACK could need; after them the QPs and CQs are freed, so closed comms do not pile
/// up against the host's QP limit.
const LINGER: Duration = Duration::from_secs(5);

/// The host and the links of closed comms waiting out [`LINGER`], shared with every [`Link`].
struct Shared {
    host: mh::Host,
    closing: Mutex<VecDeque<(Instant, mh::Link)>>,
}

impl Shared {
    /// Queues a closed link and destroys those whose linger is over. Logs what the link's QPs counted: writes
    /// refused for want of a posted receive (RNR; spec NCCL-CONN-3 says there are none) and retransmits.
    fn retire(&self, link: mh::Link) {
        let (rnr, rexmit) = self.host.inspect(|dp| {
            link.qps()
                .iter()
                .filter_map(|q| dp.endpoint_ref().qp_stats(q.qpn()))
                .fold((0, 0), |(a, b), s| {
                    (a + s.rx_no_resource, b + s.tx_retransmits)
                })
        });
        info!(
            NET,
            "comm closed: {} QP(s), rnr {rnr} (writes refused for want of a receive), {rexmit} retransmit(s)",
            link.qps().len()
        );
        let mut q = self
            .closing
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        q.push_back((Instant::now(), link));
        while q.front().is_some_and(|(t, _)| t.elapsed() >= LINGER) {
            if let Some((_, l)) = q.pop_front() {
                self.destroy(&l);
            }
        }
    }

    fn destroy(&self, l: &mh::Link) {
        for qp in l.qps() {
            if let Err(e) = self.host.destroy_qp(qp) {
                info!(NET, "destroying QP {:#x} of a closed comm: {e}", qp.qpn());
            }
        }
        let (s, r) = (l.send_cq(), l.recv_cq());
        for cq in if s.id() == r.id() {
            vec![s]
        } else {
            vec![s, r]
        } {
            if let Err(e) = self.host.destroy_cq(cq) {
                info!(NET, "destroying CQ {} of a closed comm: {e}", cq.id());
            }
        }
    }
}

/// One host instance per process, shared by every NCCL communicator.
pub(crate) struct Host {
    shared: Arc<Shared>,
    /// The PD every link's QPs belong to: registrations are made there.
    pd: mrc::Pd,
    connect_timeout: Duration,
}

impl std::fmt::Debug for Host {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Host").finish_non_exhaustive()
    }
}

/// A registration: the keys work requests and peers name it by.
pub(crate) struct Mr {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
    mr: mh::Mr,
}

impl std::fmt::Debug for Mr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Mr")
            .field("lkey", &self.lkey)
            .field("rkey", &self.rkey)
            .finish()
    }
}

/// Waits for connection requests.
pub(crate) struct Listener {
    inner: mh::Listener,
    shared: Arc<Shared>,
}

/// A connection being set up by `connect`, with the deadline `NCCL_MRC_CONNECT_TIMEOUT_MS` gives it.
pub(crate) struct Connecting {
    inner: mh::Connecting,
    shared: Arc<Shared>,
    started: Instant,
    timeout: Duration,
}

/// A connected set of QPs toward one peer. Dropping it (closing the comm) hands it to the host to linger.
pub(crate) struct Link {
    link: Option<mh::Link>,
    shared: Arc<Shared>,
}

impl Drop for Link {
    fn drop(&mut self) {
        if let Some(l) = self.link.take() {
            self.shared.retire(l);
        }
    }
}

impl Host {
    /// Starts the host layer with the plugin's settings.
    pub(crate) fn open(s: &Settings) -> Result<Arc<Self>, Error> {
        let cfg = host_config(s)?;
        let host = mh::Host::start(cfg).map_err(sys("starting the MRC host layer"))?;
        let pd = host.default_pd();
        info!(
            INIT,
            "MRC host up: {} plane(s), {}",
            host.local().planes.len(),
            match s.cc {
                Cc::Fixed => "fixed-window CC",
                Cc::Nscc => "NSCC",
            }
        );
        Ok(Arc::new(Self {
            shared: Arc::new(Shared {
                host,
                closing: Mutex::new(VecDeque::new()),
            }),
            pd,
            connect_timeout: Duration::from_millis(s.connect_timeout_ms),
        }))
    }

    /// Starts listening; the blob (at most `handle::BLOB_MAX` bytes) tells a peer how to connect.
    pub(crate) fn listen(&self) -> Result<Listener, Error> {
        Ok(Listener {
            inner: self.shared.host.listen().map_err(sys("listen"))?,
            shared: Arc::clone(&self.shared),
        })
    }

    /// Starts connecting `qps` QPs to the listener described by `blob`, sending `app` with the request.
    pub(crate) fn connect(&self, blob: &[u8], qps: usize, app: &[u8]) -> Result<Connecting, Error> {
        let inner = self
            .shared
            .host
            .connect(blob, qps, app)
            .map_err(sys("connect"))?;
        Ok(Connecting {
            inner,
            shared: Arc::clone(&self.shared),
            started: Instant::now(),
            timeout: self.connect_timeout,
        })
    }

    /// Registers `len` bytes at `addr` of this process's memory; `remote_write` lets peers WRITE there.
    ///
    /// The caller keeps `[addr, addr + len)` allocated until [`Host::dereg_mr`]: NCCL's `regMr` contract (its
    /// buffers outlive their registrations) and the control blocks' (a comm deregisters its block before
    /// freeing it).
    pub(crate) fn reg_mr(&self, addr: u64, len: usize, remote_write: bool) -> Result<Mr, Error> {
        let access = if remote_write {
            Access::LOCAL_WRITE.union(Access::REMOTE_WRITE)
        } else {
            Access::LOCAL_WRITE
        };
        #[allow(
            unsafe_code,
            reason = "registration hands process memory to the transport"
        )]
        // SAFETY: per this function's contract the range stays valid until `dereg_mr`; the engine checks keys,
        // bounds and access before any byte moves.
        let mr = unsafe {
            self.shared
                .host
                .reg_mr(self.pd, addr as *mut u8, len, access)
        }
        .map_err(sys("reg_mr"))?;
        Ok(Mr {
            lkey: mr.lkey,
            rkey: mr.rkey,
            mr,
        })
    }

    /// Drops a registration (a failure is logged: NCCL's deregMr has nothing to undo).
    pub(crate) fn dereg_mr(&self, mr: &Mr) {
        if let Err(e) = self.shared.host.dereg_mr(&mr.mr) {
            info!(NET, "dereg_mr of lkey {:#x}: {e}", mr.lkey);
        }
    }
}

impl Listener {
    /// What a connector needs to reach this listener.
    pub(crate) fn blob(&self) -> Vec<u8> {
        self.inner.blob()
    }

    /// A connection request accepted, answered with `reply`: the link and the connector's app data.
    pub(crate) fn poll_accept(&mut self, reply: &[u8]) -> Result<Option<(Link, Vec<u8>)>, Error> {
        Ok(self
            .inner
            .poll_accept(reply)
            .map_err(sys("accept"))?
            .map(|(l, app)| (Link::new(l, &self.shared), app)))
    }
}

impl Connecting {
    /// The link and the listener's reply once the peer answered.
    pub(crate) fn poll(&mut self) -> Result<Option<(Link, Vec<u8>)>, Error> {
        match self.inner.poll().map_err(sys("connect"))? {
            Some((l, reply)) => Ok(Some((Link::new(l, &self.shared), reply))),
            None if self.started.elapsed() > self.timeout => Err(Error::remote(format!(
                "connect: no answer from the listener within {} ms (NCCL_MRC_CONNECT_TIMEOUT_MS)",
                self.timeout.as_millis()
            ))),
            None => Ok(None),
        }
    }
}

/// The text a failed completion is reported with.
fn status_text(s: WcStatus) -> &'static str {
    match s {
        WcStatus::Success => "success",
        WcStatus::LocLenErr => "local length error",
        WcStatus::LocQpOpErr => "local QP error",
        WcStatus::LocProtErr => "local protection error (key, bounds or access)",
        WcStatus::WrFlushErr => "flushed: the QP is in the error state",
        WcStatus::RemInvReqErr => "the peer rejected the request",
        WcStatus::RemAccessErr => "the peer refused the key, bounds or access",
        WcStatus::RemOpErr => "the peer hit an operational error",
        WcStatus::RetryExcErr => "retries exhausted: the peer or every path is gone",
        WcStatus::RnrRetryExcErr => "the peer had no receive posted (RNR retries exhausted)",
        _ => "a transport error",
    }
}

impl Link {
    fn new(link: mh::Link, shared: &Arc<Shared>) -> Self {
        Self {
            link: Some(link),
            shared: Arc::clone(shared),
        }
    }

    /// The link; only Drop takes it, so every other caller finds it (an error rather than a panic otherwise).
    fn get(&self) -> Result<&mh::Link, Error> {
        self.link
            .as_ref()
            .ok_or_else(|| Error::internal("the link is already retired"))
    }

    /// QPs in this link.
    pub(crate) fn qps(&self) -> usize {
        self.link.as_ref().map_or(0, |l| l.qps().len())
    }

    fn qp(&self, i: usize) -> Result<&mh::Qp, Error> {
        self.get()?.qps().get(i).ok_or_else(|| {
            Error::internal(format!("QP index {i} outside a link of {}", self.qps()))
        })
    }

    /// Posts one work request; `Ok(false)` when the QP's queue is full (try again later).
    pub(crate) fn post(&self, op: &Op) -> Result<bool, Error> {
        let r = match *op {
            Op::Write {
                qp,
                wr_id,
                local,
                remote_addr,
                rkey,
                imm,
                signaled,
            } => {
                let sge = to_sge(local);
                let sges: &[mrc::Sge] = if local.len == 0 {
                    &[]
                } else {
                    std::slice::from_ref(&sge)
                };
                self.qp(qp)?.post_send(&mh::SendRequest {
                    wr_id,
                    op: match imm {
                        Some(imm) => SendOp::WriteImm {
                            remote_addr,
                            rkey,
                            imm,
                        },
                        None => SendOp::Write { remote_addr, rkey },
                    },
                    sges,
                    inline: None,
                    signaled,
                    solicited: false,
                    fence: false,
                })
            }
            Op::Recv { qp, wr_id } => self.qp(qp)?.post_recv(wr_id, &[]),
        };
        match r {
            Ok(()) => Ok(true),
            Err(e) if e.errno() == ENOMEM => Ok(false),
            Err(e) => Err(sys("post")(e)),
        }
    }

    /// Appends the completions that arrived since the last call.
    pub(crate) fn poll(&self, out: &mut Vec<Done>) -> Result<(), Error> {
        let mut wc = [Completion::default(); 64];
        let link = self.get()?;
        let (send, recv) = (link.send_cq(), link.recv_cq());
        for cq in [send, recv] {
            loop {
                let n = cq.poll(&mut wc);
                for c in &wc[..n] {
                    out.push(self.done(c)?);
                }
                if n < wc.len() {
                    break;
                }
            }
            if send.id() == recv.id() {
                break;
            }
        }
        Ok(())
    }

    fn done(&self, c: &Completion) -> Result<Done, Error> {
        // Completions name a QP by number, the protocol by its index in the link.
        let qp = self.get()?.qp_index(c.qpn).ok_or_else(|| {
            Error::internal(format!("completion of QP {} outside this link", c.qpn))
        })?;
        Ok(Done {
            qp,
            wr_id: c.wr_id,
            status: match c.status {
                WcStatus::Success => Ok(()),
                s => Err(status_text(s)),
            },
            recv: matches!(c.opcode, WcOpcode::Recv | WcOpcode::RecvRdmaWithImm),
            byte_len: c.byte_len,
            imm: c.imm,
        })
    }
}

fn to_sge(s: Sge) -> mrc::Sge {
    mrc::Sge {
        addr: s.addr,
        len: s.len,
        lkey: s.lkey,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// NCCL_MRC_TIMEOUT and NCCL_MRC_RETRY_CNT reach every QP the host creates.
    #[test]
    fn timeout_and_retry_count_reach_the_qp_profile() {
        let s = Settings {
            timeout: 12,
            retry_cnt: 2,
            ..Settings::default()
        };
        let p = host_config(&s).unwrap().profile;
        assert_eq!(
            p.retry(),
            mh::QpRetry {
                ack_timeout: 12,
                retry_cnt: 2,
                retry_backoff: 0
            }
        );
        // The defaults: 1.07 s, 7 retries, as NCCL_IB_TIMEOUT=20 / NCCL_IB_RETRY_CNT=7 (in 1.024 µs units).
        let d = host_config(&Settings::default()).unwrap().profile.retry();
        assert_eq!((d.ack_timeout, d.retry_cnt, d.retry_backoff), (20, 7, 0));
    }
}
