//! The seam to the transport: the only module that will talk to the host layer (`mrc-host`, issue 11) through
//! mrc-verbs-shim's data path.
//!
//! **Stage 1.** The shim's data path is being built, so object lifecycles get local identifiers (QP numbers
//! from a per-device counter) and state changes are recorded without contacting a peer, while everything that
//! moves data or reads the network — posting, polling completions, EV events, EV probes — fails with
//! `EOPNOTSUPP` (the same value as `ENOTSUP`) and one log line naming the call. capi/README.md lists these
//! entry points under "Stage 2".

use std::ffi::c_int;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::abi::*;
use crate::cq::mrc_cq;
use crate::device::Device;
use crate::ffi::Error;
use crate::qp::Settings;

fn unavailable(what: &str) -> Error {
    Error::new(
        libc::EOPNOTSUPP,
        format!(
            "{what} needs the transport, which libmrc does not reach yet (stage 1: the verbs shim's data \
             path is not connected; see capi/README.md)"
        ),
    )
}

/// A QP number for a new QP. Stage 2 takes the engine's QPN from the host layer.
pub(crate) fn create_qp(_dev: &Device) -> Result<u32, Error> {
    static NEXT: AtomicU32 = AtomicU32::new(1);
    Ok(NEXT.fetch_add(1, Ordering::Relaxed) & 0x00ff_ffff)
}

/// A QP moved from state `from` to `to` with `s` (the peer at RTR, the timers at RTS). Stage 1 records it
/// only; stage 2 connects the QP to the peer at RTR.
pub(crate) fn modify_qp(_qpn: u32, _from: u32, _to: u32, _s: &Settings) -> Result<(), Error> {
    Ok(())
}

/// A QP was destroyed.
pub(crate) fn destroy_qp(_qpn: u32) {}

/// `mrc_post_send`.
pub(crate) fn post_send(_qpn: u32, _wr: *mut ibv_send_wr) -> Result<(), Error> {
    Err(unavailable("posting a send (RDMA WRITE)"))
}

/// `mrc_post_recv`.
pub(crate) fn post_recv(_qpn: u32, _wr: *mut ibv_recv_wr) -> Result<(), Error> {
    Err(unavailable("posting a receive"))
}

/// `mrc_poll_cq`.
pub(crate) fn poll_cq(_cq: &mrc_cq, _n: c_int, _wc: *mut ibv_wc) -> Result<c_int, Error> {
    Err(unavailable("polling completions"))
}

/// `mrc_ctl_poll_ev_event`.
pub(crate) fn poll_ev_event(_cq: &mrc_cq, _n: c_int) -> Result<Vec<mrc_ctl_ev_event>, Error> {
    Err(unavailable("polling EV events"))
}

/// `mrc_ctl_ep_batch_send_wait`: answers in arrival order.
pub(crate) fn ep_batch(
    _dev: &Device,
    _tc: u8,
    _op: mrc_ctl_ep_op_type,
    _reqs: &[mrc_ctl_ep_req],
    _timeout_ns: u32,
) -> Result<Vec<mrc_ctl_ep_rsp>, Error> {
    Err(unavailable("sending endpoint requests (EV probes)"))
}

/// Controller features that need the transport (EV events, EV probes); none in stage 1.
pub(crate) fn ctl_opt_caps() -> u32 {
    0
}
