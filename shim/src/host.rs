//! The seam to the host layer (`mrc-host`, issue 11): the only module that talks to the transport.
//!
//! The verbs objects hold the handles defined here; every call that needs the transport (registering memory,
//! creating a CQ or QP, moving a QP through its states, posting, polling) goes through [`HostDevice`].
//!
//! **Stage 1.** mrc-host has not published its API yet (`/work/wt/notes/host-api.md`), so this module hands
//! out identifiers only: keys, CQ and QP numbers. Verbs-level checks (arguments, states, attribute masks) happen
//! in the object modules before any call lands here. What needs a transport (connecting at RTR, posting
//! work) fails with `ENOTCONN` and one log line. The shim's own needs from the host are in
//! `/work/wt/notes/shim-needs-from-host.md`.

use std::ffi::c_int;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::{ibv_qp_cap, ibv_sge, ibv_wc};
use crate::config::DeviceConfig;
use crate::ffi::Error;

/// The host-layer instance of one device, shared by every context opened on it.
#[derive(Debug)]
pub(crate) struct HostDevice {
    next_id: AtomicU32,
    /// Plane 0's UDP port (the port's LID).
    port: u16,
}

/// A protection domain.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostPd(
    #[allow(dead_code, reason = "stage 2 passes it to mrc-host")] pub(crate) u32,
);

/// A registered region's keys.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostMr {
    pub(crate) lkey: u32,
    pub(crate) rkey: u32,
}

/// A completion queue.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostCq(pub(crate) u32);

/// A queue pair; `qpn` is what the peer names at RTR.
#[derive(Debug, Clone, Copy)]
pub(crate) struct HostQp {
    pub(crate) qpn: u32,
}

/// A state change, with what verbs gives for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Transition {
    /// RESET → INIT (or INIT → INIT): the remote access granted.
    Init { access: c_int },
    /// INIT → RTR: the peer as the verbs exchange names it.
    Rtr {
        gid: [u8; 16],
        lid: u16,
        dest_qpn: u32,
        rq_psn: u32,
        /// Path MTU in bytes.
        mtu: u32,
    },
    /// RTR → RTS.
    Rts {
        sq_psn: u32,
        timeout: u8,
        retry_cnt: u8,
        rnr_retry: u8,
    },
    /// Any → ERR: flush.
    Error,
    /// Any → RESET.
    Reset,
}

/// What a send work request does: the engine's own operations (one vocabulary from verbs to the wire).
pub(crate) use mrc::SendOp;

/// A send work request, checked by the shim (opcode, sge count, inline size).
#[allow(
    dead_code,
    reason = "stage 1: the fields are read by mrc-host calls in stage 2"
)]
#[derive(Debug, Clone, Copy)]
pub(crate) struct SendRequest<'a> {
    pub(crate) wr_id: u64,
    pub(crate) op: SendOp,
    /// Registered buffers, or with `inline` the bytes to copy now (their keys are not checked).
    pub(crate) sges: &'a [ibv_sge],
    pub(crate) inline: bool,
    pub(crate) signaled: bool,
    pub(crate) solicited: bool,
    pub(crate) fence: bool,
}

fn no_transport(what: &str) -> Error {
    Error::new(
        libc::ENOTCONN,
        format!("{what} needs the MRC transport, which this build does not have yet (stage 1)"),
    )
}

impl HostDevice {
    /// Opens (or joins) the device's host instance.
    pub(crate) fn open(cfg: &DeviceConfig) -> Result<Arc<Self>, Error> {
        Ok(Arc::new(Self {
            next_id: AtomicU32::new(1),
            port: cfg.port(),
        }))
    }

    fn id(&self) -> u32 {
        self.next_id.fetch_add(1, Ordering::Relaxed)
    }

    /// Plane 0's UDP port.
    pub(crate) fn port(&self) -> u16 {
        self.port
    }

    pub(crate) fn alloc_pd(&self) -> Result<HostPd, Error> {
        Ok(HostPd(self.id()))
    }

    pub(crate) fn dealloc_pd(&self, _pd: HostPd) {}

    pub(crate) fn reg_mr(
        &self,
        _pd: HostPd,
        _addr: u64,
        _len: usize,
        _access: c_int,
    ) -> Result<HostMr, Error> {
        let k = self.id();
        Ok(HostMr { lkey: k, rkey: k })
    }

    pub(crate) fn dereg_mr(&self, _mr: HostMr) {}

    pub(crate) fn create_cq(&self, _depth: u32) -> Result<HostCq, Error> {
        Ok(HostCq(self.id()))
    }

    pub(crate) fn destroy_cq(&self, _cq: HostCq) {}

    /// Moves up to `out.len()` completions into `out`.
    pub(crate) fn poll_cq(&self, _cq: HostCq, _out: &mut [ibv_wc]) -> usize {
        0
    }

    pub(crate) fn create_qp(
        &self,
        _pd: HostPd,
        _send_cq: HostCq,
        _recv_cq: HostCq,
        _cap: &ibv_qp_cap,
        _sq_sig_all: bool,
    ) -> Result<HostQp, Error> {
        Ok(HostQp {
            qpn: 0x100 + self.id(),
        })
    }

    pub(crate) fn destroy_qp(&self, _qp: HostQp) {}

    pub(crate) fn modify_qp(&self, _qp: HostQp, t: Transition) -> Result<(), Error> {
        match t {
            Transition::Rtr { .. } | Transition::Rts { .. } => Err(no_transport("connecting a QP")),
            Transition::Init { .. } | Transition::Error | Transition::Reset => Ok(()),
        }
    }

    pub(crate) fn post_send(&self, _qp: HostQp, _wr: &SendRequest<'_>) -> Result<(), Error> {
        Err(no_transport("posting a send"))
    }

    pub(crate) fn post_recv(
        &self,
        _qp: HostQp,
        _wr_id: u64,
        _sges: &[ibv_sge],
    ) -> Result<(), Error> {
        Err(no_transport("posting a receive"))
    }
}
