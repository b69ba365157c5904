//! QP hints: the traffic pattern a group of QPs expects. Stored and reported; the transport reads them when
//! it sizes a QP's resources (stage 2).

#![allow(
    non_camel_case_types,
    reason = "the object types carry their C names (mrc.h)"
)]

use std::ffi::c_int;
use std::sync::Mutex;

use crate::abi::*;
use crate::context::{context, mrc_context};
use crate::device::limits;
use crate::ffi::{Error, FFI, non_null};
use crate::registry::{self, Kind, Object, Users};

/// A QP hint.
pub struct mrc_qp_hint {
    ctx: *const mrc_context,
    pub(crate) attr: Mutex<mrc_qp_hint_attr>,
    /// QPs using it.
    pub(crate) users: Users,
}

// SAFETY: only ever published from a Box by `mrc_create_qp_hint`.
unsafe impl Object for mrc_qp_hint {
    const KIND: Kind = Kind::QpHint;
}
// SAFETY: `ctx` points at the live parent context (it cannot go while the hint exists).
unsafe impl Send for mrc_qp_hint {}
// SAFETY: as above; the rest is Sync.
unsafe impl Sync for mrc_qp_hint {}

impl mrc_qp_hint {
    /// The context it belongs to.
    pub(crate) fn ctx(&self) -> &mrc_context {
        // SAFETY: a context with hints cannot be destroyed (`users`), so it outlives the hint.
        unsafe { &*self.ctx }
    }
}

/// The live hint behind `p`.
pub(crate) fn hint<'a>(p: *mut mrc_qp_hint, what: &str) -> Result<&'a mrc_qp_hint, Error> {
    // SAFETY: the registry check makes sure `p` is one of ours and live.
    unsafe { registry::get(p, what) }
}

const ALL: c_int = MRC_QP_HINT_NUM_QPS_PER_PEER
    | MRC_QP_HINT_NUM_SEND_PEERS
    | MRC_QP_HINT_NUM_REMOTE_RECV_PEERS
    | MRC_QP_HINT_VENDOR_CFG;

fn check_mask(mask: c_int) -> Result<(), Error> {
    if mask & !ALL != 0 {
        return Err(Error::inval(format!(
            "qp_hint_attr_mask {mask:#x} has bits that name no attribute ({:#x})",
            mask & !ALL
        )));
    }
    Ok(())
}

/// Copies the attributes in `mask` from `from` into `to`, checking them (counts are 0 = unknown, or positive).
pub(crate) fn apply(
    to: &mut mrc_qp_hint_attr,
    from: &mrc_qp_hint_attr,
    mask: c_int,
) -> Result<(), Error> {
    check_mask(mask)?;
    let mut next = *to;
    for (bit, name, v, slot) in [
        (
            MRC_QP_HINT_NUM_QPS_PER_PEER,
            "num_qps_per_peer",
            from.num_qps_per_peer,
            &mut next.num_qps_per_peer,
        ),
        (
            MRC_QP_HINT_NUM_SEND_PEERS,
            "num_send_peers",
            from.num_send_peers,
            &mut next.num_send_peers,
        ),
        (
            MRC_QP_HINT_NUM_REMOTE_RECV_PEERS,
            "num_remote_recv_peers",
            from.num_remote_recv_peers,
            &mut next.num_remote_recv_peers,
        ),
    ] {
        if mask & bit != 0 {
            if v < 0 {
                return Err(Error::inval(format!("{name} {v} is negative")));
            }
            *slot = v;
        }
    }
    if mask & MRC_QP_HINT_VENDOR_CFG != 0 && from.vendor_cfg.iter().any(|&b| b != 0) {
        return Err(Error::inval(
            "vendor_cfg is not all zero: libmrc defines no vendor configuration",
        ));
    }
    *to = next;
    Ok(())
}

/// Creates a QP hint.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_create_qp_hint(
    mrc_ctx: *mut mrc_context,
    init_attr: *mut mrc_qp_hint_init_attr,
) -> *mut mrc_qp_hint {
    FFI.ptr("mrc_create_qp_hint", || {
        let c = context(mrc_ctx)?;
        non_null(init_attr, "init_attr")?;
        // SAFETY: non-NULL; the header makes it a readable `mrc_qp_hint_init_attr`.
        let given = unsafe { init_attr.read() }.attr;
        let mut attr = mrc_qp_hint_attr::default();
        apply(&mut attr, &given, ALL)?;
        if c.hints.count() >= limits::MAX_QP_HINT as usize {
            return Err(Error::new(
                libc::ENOMEM,
                format!(
                    "the context already has {} QP hints (max_qp_hint)",
                    limits::MAX_QP_HINT
                ),
            ));
        }
        c.hints.add();
        c.users.add();
        Ok(registry::publish(Box::new(mrc_qp_hint {
            ctx: c,
            attr: Mutex::new(attr),
            users: Users::default(),
        })))
    })
}

/// Destroys a QP hint; `EBUSY` while QPs use it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_destroy_qp_hint(qp_hint: *mut mrc_qp_hint) -> c_int {
    FFI.minus_one("mrc_destroy_qp_hint", || {
        // SAFETY: the caller does not use the hint while destroying it.
        let h = unsafe {
            registry::destroy(qp_hint, "qp_hint", |h: &mrc_qp_hint| {
                h.users.idle("QP hint")
            })
        }?;
        h.ctx().hints.sub();
        h.ctx().users.sub();
        Ok(())
    })
}

/// Reads the attributes in the mask.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_query_qp_hint(
    qp_hint: *mut mrc_qp_hint,
    qp_hint_attr: *mut mrc_qp_hint_attr,
    qp_hint_attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_query_qp_hint", || {
        let h = hint(qp_hint, "qp_hint")?;
        non_null(qp_hint_attr, "qp_hint_attr")?;
        check_mask(qp_hint_attr_mask)?;
        let cur = *h.attr.lock().unwrap_or_else(|p| p.into_inner());
        // SAFETY: non-NULL; the header makes it a writable `mrc_qp_hint_attr`.
        let out = unsafe { &mut *qp_hint_attr };
        let m = qp_hint_attr_mask;
        if m & MRC_QP_HINT_NUM_QPS_PER_PEER != 0 {
            out.num_qps_per_peer = cur.num_qps_per_peer;
        }
        if m & MRC_QP_HINT_NUM_SEND_PEERS != 0 {
            out.num_send_peers = cur.num_send_peers;
        }
        if m & MRC_QP_HINT_NUM_REMOTE_RECV_PEERS != 0 {
            out.num_remote_recv_peers = cur.num_remote_recv_peers;
        }
        if m & MRC_QP_HINT_VENDOR_CFG != 0 {
            out.vendor_cfg = cur.vendor_cfg;
        }
        Ok(())
    })
}

/// Changes the attributes in the mask (all or none).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_modify_qp_hint(
    qp_hint: *mut mrc_qp_hint,
    qp_hint_attr: *mut mrc_qp_hint_attr,
    qp_hint_attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_modify_qp_hint", || {
        let h = hint(qp_hint, "qp_hint")?;
        non_null(qp_hint_attr, "qp_hint_attr")?;
        // SAFETY: non-NULL; the header makes it a readable `mrc_qp_hint_attr`.
        let given = unsafe { qp_hint_attr.read() };
        apply(
            &mut h.attr.lock().unwrap_or_else(|p| p.into_inner()),
            &given,
            qp_hint_attr_mask,
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_changes_are_checked_and_all_or_nothing() {
        let mut a = mrc_qp_hint_attr::default();
        let mut g = mrc_qp_hint_attr {
            num_qps_per_peer: 2,
            num_send_peers: 8,
            num_remote_recv_peers: -1,
            ..Default::default()
        };
        let e = apply(&mut a, &g, ALL).unwrap_err();
        assert!(e.why().contains("num_remote_recv_peers -1"), "{}", e.why());
        assert_eq!(a, mrc_qp_hint_attr::default(), "nothing applied");
        apply(
            &mut a,
            &g,
            MRC_QP_HINT_NUM_QPS_PER_PEER | MRC_QP_HINT_NUM_SEND_PEERS,
        )
        .unwrap();
        assert_eq!((a.num_qps_per_peer, a.num_send_peers), (2, 8));
        g.vendor_cfg[3] = 1;
        assert_eq!(
            apply(&mut a, &g, MRC_QP_HINT_VENDOR_CFG).unwrap_err().errno,
            libc::EINVAL
        );
        assert_eq!(apply(&mut a, &g, 1 << 5).unwrap_err().errno, libc::EINVAL);
    }
}
