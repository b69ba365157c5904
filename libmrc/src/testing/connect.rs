//! Two QPs of two endpoints in one process connected in one step: what tests, the simulator and benchmarks do
//! instead of a bootstrap exchange.

use crate::endpoint::Endpoint;
use crate::qp::{ModifyError, PeerId, QpState};
use crate::time::Instant;

/// One side of an in-process QP pair for [`connect_pair`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct QpEnd {
    /// The QP, in INIT (see [`Endpoint::open_qp`](crate::Endpoint::open_qp)).
    pub qpn: u32,
    /// How this side's endpoint names the other endpoint (what its driver reports as the source of the other's
    /// datagrams).
    pub peer: PeerId,
    /// The first PSN this side sends (24 bits).
    pub sq_psn: u32,
}

/// Connects two QPs of two endpoints in the same process in one step (both INIT → RTR → RTS), as tests,
/// simulators and benchmarks do: each side gets the other's [`Endpoint::conn_info`](crate::Endpoint::conn_info) without a real exchange.
/// Either both sides end in RTS or, on error, neither QP moved.
pub fn connect_pair(
    now: Instant,
    a: &mut Endpoint,
    a_end: QpEnd,
    b: &mut Endpoint,
    b_end: QpEnd,
) -> Result<(), ModifyError> {
    let a_info = a
        .conn_info(a_end.qpn, a_end.sq_psn)
        .ok_or(ModifyError::NoSuchQp)?;
    let b_info = b
        .conn_info(b_end.qpn, b_end.sq_psn)
        .ok_or(ModifyError::NoSuchQp)?;
    // Check both before moving either, so that a failure leaves neither half-connected.
    for ep_qp in [(&*a, a_end.qpn), (&*b, b_end.qpn)] {
        match ep_qp.0.qp_state(ep_qp.1) {
            Some(QpState::Init) => {}
            Some(s) => return Err(ModifyError::BadTransition(s)),
            None => return Err(ModifyError::NoSuchQp),
        }
    }
    a.connect_qp(a_end.qpn, a_end.peer, &b_info, a_end.sq_psn, now)?;
    b.connect_qp(b_end.qpn, b_end.peer, &a_info, b_end.sq_psn, now)
}
