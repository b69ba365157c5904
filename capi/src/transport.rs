//! The seam to the transport: the only module that moves data or reads the network. libmrc's QPs and CQs are
//! verbs objects of mrc-verbs-shim, linked in (`ibv_qp`, `ibv_cq` on the application's verbs context and PD,
//! `mrc_verbs_shim::api`); the controller's calls go to their device's `mrc_host::Host` (its `control.rs`).
//!
//! **EVs.** An OCP EV is `{val, port}`; the engine's is one `u32` with the plane in its low `plane_bits` bits
//! (`plane_bits` = ⌈log2 planes⌉, as the engine numbers planes). libmrc maps
//! `engine = (value << plane_bits) | (port - 1)` where `value` is `val` read as a little-endian integer (its
//! low `32 - plane_bits` bits: all of a 16-bit UDP-mode EV), and back. capi/README.md ("EVs") says the rest.

use std::collections::BTreeMap;
use std::ffi::c_int;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use mrc::cc::{CcConfig, NsccConfig};
use mrc_ffi::verbs_abi::{ibv_comp_channel, ibv_cq, ibv_qp};
use mrc_verbs_shim::api as verbs;

use crate::abi::*;
use crate::cq::mrc_cq;
use crate::device::Device;
use crate::events::Sink;
use crate::ffi::Error;
use crate::qp::Settings;

/// A libmrc QP's verbs QP and what the controller calls need to find it.
struct Bound {
    vqp: usize,
    device: u32,
    plane_bits: u8,
    ev_profile: Option<u64>,
    /// The peer's GID once RTR named it.
    peer: Option<[u8; 16]>,
    /// The libmrc QP (0 until it is published) and its context's events, for asynchronous events.
    mqp: usize,
    sink: Arc<Sink>,
    /// The transport failed it (an `IBV_EVENT_QP_FATAL` came): it is in ERR whatever libmrc last set.
    failed: bool,
    /// The application moved it to ERR: the transport's report of that is no fatal event (verbs raises none).
    user_err: bool,
    /// Its explicit engine EVs, one per slot of its EV profile (empty without an EXP profile): REPLACE_EV on
    /// the profile swaps the QP's EV of the slot that changed.
    evs: Vec<u32>,
}

fn qps() -> MutexGuard<'static, BTreeMap<u32, Bound>> {
    static QPS: Mutex<BTreeMap<u32, Bound>> = Mutex::new(BTreeMap::new());
    QPS.lock().unwrap_or_else(|p| p.into_inner())
}

fn bound<T>(qpn: u32, f: impl FnOnce(&mut Bound) -> T) -> Result<T, Error> {
    qps()
        .get_mut(&qpn)
        .map(f)
        .ok_or_else(|| Error::inval(format!("QP {qpn:#x} has no transport QP")))
}

/// The engine's plane bits for `planes` planes.
pub(crate) fn plane_bits(planes: u32) -> u8 {
    planes
        .max(1)
        .saturating_sub(1)
        .checked_ilog2()
        .map_or(0, |b| b + 1) as u8
}

/// OCP EV → engine EV.
pub(crate) fn engine_ev(ev: &mrc_ctl_ev, bits: u8) -> u32 {
    let v = u32::from_le_bytes([ev.val[0], ev.val[1], ev.val[2], ev.val[3]]);
    let v = if bits == 0 { v } else { v & (u32::MAX >> bits) };
    v << bits | u32::from(ev.port.saturating_sub(1))
}

/// Engine EV → OCP EV.
pub(crate) fn ocp_ev(ev: u32, bits: u8) -> mrc_ctl_ev {
    let mut o = mrc_ctl_ev {
        port: ((ev & ((1u32 << bits) - 1)) + 1) as u8,
        ..Default::default()
    };
    o.val[..4].copy_from_slice(&(ev >> bits).to_le_bytes());
    o
}

/// Verbs CQ → its libmrc CQ and that CQ's context's events, for the channels' event relays and asynchronous
/// events.
fn cqs() -> MutexGuard<'static, BTreeMap<usize, (usize, Arc<Sink>)>> {
    static CQS: Mutex<BTreeMap<usize, (usize, Arc<Sink>)>> = Mutex::new(BTreeMap::new());
    CQS.lock().unwrap_or_else(|p| p.into_inner())
}

/// The libmrc CQ behind a verbs CQ, and where its context's events go.
pub(crate) fn cq_of(vcq: usize) -> Option<(usize, Arc<Sink>)> {
    cqs().get(&vcq).cloned()
}

/// The libmrc QP behind a verbs QP, and where its context's events go; `fatal` marks it failed.
pub(crate) fn qp_of(vqp: usize, fatal: bool) -> Option<(usize, Arc<Sink>)> {
    qps()
        .values_mut()
        .find(|b| b.vqp == vqp && b.mqp != 0 && !(fatal && b.user_err))
        .map(|b| {
            b.failed |= fatal;
            (b.mqp, b.sink.clone())
        })
}

/// Whether the transport failed the QP since it was last reset.
pub(crate) fn failed(qpn: u32) -> bool {
    qps().get(&qpn).is_some_and(|b| b.failed)
}

/// A verbs CQ for a work CQ (EV-event CQs have none: the controller queue feeds them), on the verbs channel
/// `vch` when the CQ has a completion channel.
pub(crate) fn create_cq(
    vctx: *mut ibv_context,
    cqe: u32,
    vch: *mut ibv_comp_channel,
) -> Result<*mut ibv_cq, Error> {
    verbs::create_cq(vctx, c_int::try_from(cqe).unwrap_or(c_int::MAX), vch)
}

/// The libmrc CQ `cq` was published with the verbs CQ `vcq`.
pub(crate) fn cq_created(vcq: *mut ibv_cq, cq: *mut mrc_cq, sink: Arc<Sink>) {
    if !vcq.is_null() {
        cqs().insert(vcq as usize, (cq as usize, sink));
    }
}

/// A verbs CQ fired (a channel's relay thread): its libmrc CQ signals its channel if armed.
pub(crate) fn cq_event(vcq: *mut ibv_cq) {
    let m = cqs();
    if let Some(&(p, _)) = m.get(&(vcq as usize))
        && let Ok(q) = crate::cq::cq(p as *mut mrc_cq, "cq")
    {
        // The verbs CQ fires only when armed, and honours solicited-only: count it as solicited here.
        q.notify(true);
    }
}

/// Destroys a CQ of [`create_cq`] (its libmrc CQ is being destroyed: no relay reaches it after this).
pub(crate) fn destroy_cq(vcq: *mut ibv_cq) {
    if !vcq.is_null() {
        cqs().remove(&(vcq as usize));
        let _ = verbs::destroy_cq(vcq);
    }
}

/// A verbs QP for a new MRC QP; returns its QPN (the engine's).
pub(crate) fn create_qp(
    dev: &Device,
    sink: Arc<Sink>,
    pd: *mut ibv_pd,
    send: &mrc_cq,
    recv: &mrc_cq,
    cap: &mut ibv_qp_cap,
    sq_sig_all: c_int,
) -> Result<u32, Error> {
    if send.vcq.is_null() || recv.vcq.is_null() {
        return Err(Error::new(
            libc::ENODEV,
            "the CQs have no transport CQ (a test context without a verbs device)",
        ));
    }
    let (vqp, qpn) = verbs::create_qp(pd, send.vcq, recv.vcq, cap, sq_sig_all != 0)?;
    qps().insert(
        qpn,
        Bound {
            vqp: vqp as usize,
            device: dev.info.device_index,
            plane_bits: plane_bits(dev.info.planes),
            ev_profile: None,
            peer: None,
            mqp: 0,
            sink,
            failed: false,
            user_err: false,
            evs: Vec::new(),
        },
    );
    Ok(qpn)
}

/// The libmrc QP of `qpn` was published: asynchronous events may name it from now on.
pub(crate) fn qp_published(qpn: u32, mqp: *mut mrc_qp) {
    let _ = bound(qpn, |b| b.mqp = mqp as usize);
}

/// The EV and CC profiles reach the QP at RESET → INIT; returns its explicit engine EVs (slot order).
fn configure(dev: &Device, vqp: *mut ibv_qp, bits: u8, s: &Settings) -> Result<Vec<u32>, Error> {
    let ctl = dev.ctl();
    let mut evs = Vec::new();
    let mut denied = Vec::new();
    let mut per_plane = 0u16;
    if let Some(id) = s.ev_profile
        && let Some((mode, slots, _min_active, _mask)) = ctl.ev_profile(id)
        && mode == MRC_CTL_EV_MODE_EXP
    {
        let mut counts = BTreeMap::new();
        for (ev, state) in &slots {
            let e = engine_ev(ev, bits);
            evs.push(e);
            *counts.entry(ev.port).or_insert(0u16) += 1;
            if *state == MRC_CTL_EV_DENIED {
                denied.push(e);
            }
        }
        let planes = dev.info.planes as usize;
        per_plane = counts.values().copied().min().unwrap_or(0);
        if counts.len() != planes || counts.values().any(|&n| n != per_plane) {
            return Err(Error::inval(format!(
                "EV profile {id:#x}: every port (1..={planes}) needs the same number of EVs (the engine spreads a \
                 QP over all planes); counts per port: {counts:?}"
            )));
        }
    }
    let cc = s.cc_profile.and_then(|id| ctl.cc_nscc(id)).map(|c| {
        CcConfig::Nscc(NsccConfig {
            base_rtt: Duration::from_nanos(u64::from(c.base_rtt)),
            target_delay: Duration::from_nanos(u64::from(c.target_delay)),
            max_cwnd: (c.max_cwnd > 0).then_some(u64::from(c.max_cwnd)),
            eta: f64::from(c.eta),
            fi: f64::from(c.fi) * f64::from(c.fi_scale),
            gamma: f64::from(c.gamma),
            max_md_jump: f64::from(c.max_md_jump),
            qa_enabled: c.disable_qa == 0,
            ..Default::default()
        })
    });
    drop(ctl);
    if evs.is_empty() && cc.is_none() {
        return Ok(evs);
    }
    let (h, qpn) = verbs::qp_host(vqp)?;
    let explicit = (!evs.is_empty()).then(|| mrc_host::ExplicitEvs {
        evs: evs.clone(),
        plane_bits: bits,
        active_per_plane: per_plane,
    });
    h.configure_qp(qpn, explicit.as_ref(), cc)
        .map_err(host_err("configuring the QP's EVs and congestion control"))?;
    for e in denied {
        h.set_ev_denied(qpn, e, true)
            .map_err(host_err("denying the EV"))?;
    }
    Ok(evs)
}

/// A QP moved from state `from` to `to` with `s`: the verbs QP follows (RTR names the peer as verbs does, by
/// GID 0 and LID).
pub(crate) fn modify_qp(
    dev: &Device,
    qpn: u32,
    from: u32,
    to: u32,
    s: &Settings,
) -> Result<(), Error> {
    let (vqp, bits) = bound(qpn, |b| (b.vqp as *mut ibv_qp, b.plane_bits))?;
    let mut a = ibv_qp_attr {
        qp_state: to,
        ..Default::default()
    };
    let mut evs = None;
    let mask = match to {
        IBV_QPS_INIT => {
            if from == IBV_QPS_RESET {
                evs = Some(configure(dev, vqp, bits, s)?);
            }
            a.pkey_index = 0;
            a.port_num = 1;
            a.qp_access_flags = s.access;
            IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS
        }
        IBV_QPS_RTR if from == IBV_QPS_INIT => {
            a.path_mtu = s.path_mtu;
            a.dest_qp_num = s.dest_qpn;
            a.rq_psn = s.rq_psn;
            a.ah_attr = s.ah;
            a.max_dest_rd_atomic = 1;
            a.min_rnr_timer = 12;
            IBV_QP_STATE
                | IBV_QP_AV
                | IBV_QP_PATH_MTU
                | IBV_QP_DEST_QPN
                | IBV_QP_RQ_PSN
                | IBV_QP_MAX_DEST_RD_ATOMIC
                | IBV_QP_MIN_RNR_TIMER
        }
        IBV_QPS_RTS if from == IBV_QPS_RTR => {
            a.sq_psn = s.sq_psn;
            a.timeout = s.mrc.timeout;
            a.retry_cnt = s.mrc.retry.linear_cnt.min(7);
            a.rnr_retry = 7;
            a.max_rd_atomic = 1;
            IBV_QP_STATE
                | IBV_QP_SQ_PSN
                | IBV_QP_TIMEOUT
                | IBV_QP_RETRY_CNT
                | IBV_QP_RNR_RETRY
                | IBV_QP_MAX_QP_RD_ATOMIC
        }
        // RTR → RTR, RTS → RTS: only MRC attributes changed, which the engine takes at creation.
        IBV_QPS_RTR | IBV_QPS_RTS => return Ok(()),
        _ => IBV_QP_STATE,
    };
    // Before the transport moves it: its report of the move may be routed at once.
    let user_err = to == IBV_QPS_ERR;
    if user_err {
        bound(qpn, |b| b.user_err = true)?;
    }
    if let Err(e) = verbs::modify_qp(vqp, &a, mask) {
        if user_err {
            bound(qpn, |b| b.user_err = false)?;
        }
        return Err(e);
    }
    bound(qpn, |b| {
        if to == IBV_QPS_RTR {
            b.peer = Some(s.ah.grh.dgid.raw);
        }
        if to == IBV_QPS_RESET {
            b.peer = None;
            b.failed = false;
            b.user_err = false;
        }
        if to == IBV_QPS_INIT && from == IBV_QPS_RESET {
            b.ev_profile = s.ev_profile;
        }
        if let Some(e) = evs {
            b.evs = e;
        }
    })?;
    Ok(())
}

/// A QP was destroyed.
pub(crate) fn destroy_qp(qpn: u32) {
    if let Some(b) = qps().remove(&qpn) {
        let _ = verbs::destroy_qp(b.vqp as *mut ibv_qp);
    }
}

fn verbs_result(rc: c_int, what: &str) -> Result<(), Error> {
    match rc {
        0 => Ok(()),
        e => Err(Error::new(e, format!("{what} refused by the transport"))),
    }
}

/// `mrc_post_send`: verbs' `ibv_post_send` (`bad` names the first request not posted).
pub(crate) fn post_send(
    qpn: u32,
    wr: *mut ibv_send_wr,
    bad: *mut *mut ibv_send_wr,
) -> Result<(), Error> {
    let vqp = bound(qpn, |b| b.vqp as *mut ibv_qp)?;
    // SAFETY: the work requests and `bad` are the application's (mrc_post_send's contract).
    verbs_result(unsafe { verbs::post_send(vqp, wr, bad) }, "posting a send")
}

/// `mrc_post_recv`.
pub(crate) fn post_recv(
    qpn: u32,
    wr: *mut ibv_recv_wr,
    bad: *mut *mut ibv_recv_wr,
) -> Result<(), Error> {
    let vqp = bound(qpn, |b| b.vqp as *mut ibv_qp)?;
    // SAFETY: as in `post_send`.
    verbs_result(
        unsafe { verbs::post_recv(vqp, wr, bad) },
        "posting a receive",
    )
}

/// `mrc_poll_cq`.
pub(crate) fn poll_cq(cq: &mrc_cq, n: c_int, wc: *mut ibv_wc) -> Result<c_int, Error> {
    if cq.vcq.is_null() {
        return Err(Error::new(
            libc::EOPNOTSUPP,
            "the CQ has no transport CQ (a test context without a verbs device)",
        ));
    }
    // SAFETY: `wc` holds `n` entries (mrc_poll_cq's contract).
    unsafe { verbs::poll_cq(cq.vcq, n, wc) }
}

/// The engine's transient SKIP counts as GOOD; a state a newer engine adds reads as not usable.
fn ocp_state(s: mrc::EvState) -> u32 {
    match s {
        mrc::EvState::Good | mrc::EvState::Skip => MRC_CTL_EV_GOOD,
        mrc::EvState::Denied => MRC_CTL_EV_DENIED,
        _ => MRC_CTL_EV_ASSUMED_BAD,
    }
}

/// Turns a host error into libmrc's, saying what failed.
fn host_err(what: &'static str) -> impl FnOnce(mrc_host::HostError) -> Error {
    move |e| Error::new(e.errno(), format!("{what}: {e}"))
}

/// RTTs as OCP reports them: nanoseconds, 0 where no answer came (an answer is at least 1 ns).
fn rtt_ns(rtts: Vec<Option<Duration>>) -> Vec<u64> {
    rtts.into_iter()
        .map(|d| {
            d.map_or(0, |d| {
                u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1)
            })
        })
        .collect()
}

/// The host's EV state changes as OCP EV events: those of libmrc's QPs on `dev` (GOOD, ASSUMED_BAD, DENIED;
/// the engine's transient SKIP counts as GOOD, so GOOD ↔ SKIP raises nothing), filtered by the QP's profile's
/// `ev_event_mask` when set. `drop_count` is left 0 (the CQ fills it in).
pub(crate) fn ev_events(dev: &Device, got: &[mrc_host::EvEvent]) -> Vec<mrc_ctl_ev_event> {
    let mut out = Vec::new();
    let q = qps();
    for e in got {
        let Some(b) = q.get(&e.qpn) else { continue };
        if b.device != dev.info.device_index {
            continue;
        }
        let (from, to) = (ocp_state(e.from), ocp_state(e.to));
        if from == to {
            continue;
        }
        let mask = b
            .ev_profile
            .and_then(|id| dev.ctl().ev_profile(id))
            .map_or(0, |p| p.3);
        if mask != 0 && (mask as u32) & to == 0 {
            continue;
        }
        out.push(mrc_ctl_ev_event {
            profile_id: b.ev_profile.unwrap_or(0),
            ev: ocp_ev(e.ev, b.plane_bits),
            drop_count: 0,
            state: to,
        });
    }
    out
}

/// `mrc_ctl_ep_batch_send_wait`: EV probes or PORT_STATUS reports toward the peers of libmrc's connected QPs (a
/// request's `dgid` names the peer, `req_ev` the path), answers in arrival order (by RTT).
pub(crate) fn ep_batch(
    dev: &Device,
    _tc: u8,
    op: mrc_ctl_ep_op_type,
    reqs: &[mrc_ctl_ep_req],
    timeout_ns: u32,
) -> Result<Vec<mrc_ctl_ep_rsp>, Error> {
    // Group the requests by the QP that reaches their peer.
    let mut groups: BTreeMap<usize, (u8, Vec<usize>)> = BTreeMap::new();
    {
        let q = qps();
        for (i, r) in reqs.iter().enumerate() {
            let b = q
                .values()
                .find(|b| b.device == dev.info.device_index && b.peer == Some(r.dgid.raw))
                .ok_or_else(|| {
                    Error::inval(format!(
                        "req[{i}].dgid: no connected QP of this device reaches that peer"
                    ))
                })?;
            groups
                .entry(b.vqp)
                .or_insert((b.plane_bits, Vec::new()))
                .1
                .push(i);
        }
    }
    let mut answers = Vec::new();
    let timeout = Duration::from_nanos(u64::from(timeout_ns));
    for (vqp, (bits, idx)) in groups {
        let (h, qpn) = verbs::qp_host(vqp as *mut ibv_qp)?;
        let evs: Vec<u32> = idx
            .iter()
            .map(|&i| engine_ev(&reqs[i].req_ev, bits))
            .collect();
        let rtts = if op == MRC_CTL_EP_OP_PORT_STATUS_UPDATE {
            // OCP's mask is 1-based (bit N = port N), the engine's 0-based (bit p = plane p).
            let reports: Vec<(u32, u32)> = idx
                .iter()
                .zip(&evs)
                // SAFETY: the union's only member, plain data.
                .map(|(&i, &e)| (e, unsafe { reqs[i].op.port_status_update.port_status } >> 1))
                .collect();
            h.send_port_status(qpn, &reports, timeout)
                .map_err(host_err("sending port status"))?
        } else {
            h.probe_evs(qpn, &evs, timeout)
                .map_err(host_err("probing EVs"))?
        };
        let rtts = rtt_ns(rtts);
        for (&i, &rtt) in idx.iter().zip(&rtts) {
            if rtt > 0 {
                answers.push(mrc_ctl_ep_rsp {
                    req_id: reqs[i].req_id,
                    port: reqs[i].req_ev.port,
                    rtt: u32::try_from(rtt).unwrap_or(u32::MAX),
                    adj_svc_time: 0,
                });
            }
        }
    }
    answers.sort_by_key(|a| a.rtt);
    Ok(answers)
}

/// An EV profile changed: the live QPs that use it follow. A slot whose EV was replaced (REPLACE_EV) swaps the
/// QP's EV of that slot (`Host::replace_ev`: the new EV starts GOOD with fresh counters on its port's plane);
/// then each slot's DENIED / GOOD state reaches the QP. A QP that cannot take a replacement (the new EV is
/// already one of its EVs, or the old one was its plane's last) keeps its old EV, and the call fails with the
/// reason after the profile changed.
pub(crate) fn ev_profile_changed(dev: &Device, id: u64) -> Result<(), Error> {
    let Some((mode, slots, _, _)) = dev.ctl().ev_profile(id) else {
        return Ok(());
    };
    if mode != MRC_CTL_EV_MODE_EXP {
        return Ok(());
    }
    let mut first_err = Ok(());
    let mut q = qps();
    for b in q
        .values_mut()
        .filter(|b| b.device == dev.info.device_index && b.ev_profile == Some(id))
    {
        let Ok((h, qpn)) = verbs::qp_host(b.vqp as *mut ibv_qp) else {
            continue;
        };
        if b.evs.len() == slots.len() {
            for (k, (ev, _)) in slots.iter().enumerate() {
                let e = engine_ev(ev, b.plane_bits);
                if e == b.evs[k] {
                    continue;
                }
                match h
                    .replace_ev(qpn, b.evs[k], e)
                    .map_err(host_err("replacing the EV"))
                {
                    Ok(()) => b.evs[k] = e,
                    Err(err) => {
                        if first_err.is_ok() {
                            first_err = Err(err);
                        }
                    }
                }
            }
        }
        for (ev, state) in &slots {
            let e = engine_ev(ev, b.plane_bits);
            let _ = h.set_ev_denied(qpn, e, *state == MRC_CTL_EV_DENIED);
        }
    }
    first_err
}

/// A port's admin state reached the host (a disabled plane carries nothing).
/// A port's admin state reached the host (a disabled plane carries nothing); a unit test's context (no verbs
/// context) has no host.
pub(crate) fn set_port(vctx: *mut ibv_context, index: usize, up: bool) -> Result<(), Error> {
    if vctx.is_null() {
        return Ok(());
    }
    verbs::context_host(vctx)?
        .set_port(u8::try_from(index).unwrap_or(u8::MAX), up)
        .map_err(host_err("setting the port state"))
}

/// Controller features the transport adds: EV events and EV probes.
pub(crate) fn ctl_opt_caps() -> u32 {
    MRC_CTL_OPT_CAP_EV_EVENT
        | MRC_CTL_OPT_CAP_EV_EVENT_PRECISE_DROP_CNT
        | MRC_CTL_OPT_CAP_EP_OP_EV_PROBE
}
