//! The controller API (`mrc_ctl.h`): device limits, port administration, EV format profiles, EV profiles with
//! explicit EVs and their states (DENY included), CC profiles with NSCC parameters, EV events and endpoint
//! operations.
//!
//! Profiles are validated and stored per device (`State`, behind the device's lock); each update checks
//! everything before it writes, so a refused call changes nothing (EV operations excepted: they stop at the
//! first failing entry, as the API specifies). What the transport does with them — spraying over the explicit
//! EVs, skipping DENIED ones, running NSCC with the parameters — is stage 2 (`transport.rs`).

use std::collections::BTreeMap;
use std::ffi::{CStr, c_char, c_int};

use crate::abi::*;
use crate::context::{context, device_of, mrc_context};
use crate::cq::{CqKind, cq, mrc_cq};
use crate::device::{Device, limits};
use crate::ffi::{Error, FFI, non_null};
use crate::transport;

mod api;
mod cc;
mod ev;
mod fmt;
#[cfg(test)]
mod tests;

pub use api::*;

/// The kinds of profile a QP refers to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ProfileKind {
    Ev,
    Cc,
}

/// The one CC algorithm: UET 1.0 NSCC, the engine's `mrc::cc::nscc`.
const NSCC: &CStr = c"uet-1.0-nscc";

struct Algorithms([*const c_char; 2]);
// SAFETY: pointers to static, immutable C strings.
unsafe impl Sync for Algorithms {}
static ALGORITHMS: Algorithms = Algorithms([NSCC.as_ptr(), std::ptr::null()]);

fn state_name(s: u32) -> &'static str {
    match s {
        MRC_CTL_PROFILE_INIT => "INIT",
        MRC_CTL_PROFILE_OFFLINE => "OFFLINE",
        MRC_CTL_PROFILE_ONLINE => "ONLINE",
        _ => "an unknown state",
    }
}

/// A query's field array: writes the profile's field count to `count_out`, then the fields into `out` when it
/// has room for them all (E2BIG, naming the caller's `count_name`, when not).
fn copy_fields_out<T, O>(
    fields: &[T],
    out: &mut [O],
    count_out: &mut c_int,
    count_name: &str,
    put: impl Fn(&mut O, &T),
) -> Result<(), Error> {
    *count_out = c_int::try_from(fields.len()).unwrap_or(c_int::MAX);
    if out.len() < fields.len() {
        return Err(Error::new(
            libc::E2BIG,
            format!(
                "{count_name} {} is below the profile's {} fields",
                out.len(),
                fields.len()
            ),
        ));
    }
    for (o, f) in out.iter_mut().zip(fields) {
        put(o, f);
    }
    Ok(())
}

fn check_mask(name: &str, mask: c_int, all: c_int) -> Result<(), Error> {
    if mask & !all != 0 {
        return Err(Error::inval(format!(
            "{name} {mask:#x} has bits that name no attribute ({:#x})",
            mask & !all
        )));
    }
    Ok(())
}

fn vendor_zero(cfg: &[u8]) -> Result<(), Error> {
    if cfg.iter().any(|&b| b != 0) {
        return Err(Error::inval(
            "vendor_cfg is not all zero: libmrc defines no vendor configuration",
        ));
    }
    Ok(())
}

/// The part of a profile's attributes every profile kind has, and the bits of its mask that name them.
struct ProfileStep<'a> {
    /// "EV format", "EV" or "CC".
    kind: &'static str,
    id: u64,
    cur: u32,
    mask: c_int,
    /// The STATE, CUR_STATE and VENDOR_CFG bits of this kind's mask.
    bits: [c_int; 3],
    profile_state: u32,
    cur_profile_state: u32,
    vendor_cfg: &'a [u8],
}

impl ProfileStep<'_> {
    /// The checks every profile modification starts with: the caller's idea of the current state, vendor bytes
    /// all zero, the state change asked for (`None`: the state stays).
    fn check(&self) -> Result<Option<u32>, Error> {
        let [state, cur_state, vendor] = self.bits;
        if self.mask & cur_state != 0 && self.cur_profile_state != self.cur {
            return Err(Error::inval(format!(
                "cur_profile_state says {}, but {} profile {} is {}",
                state_name(self.cur_profile_state),
                self.kind,
                self.id,
                state_name(self.cur)
            )));
        }
        if self.mask & vendor != 0 {
            vendor_zero(self.vendor_cfg)?;
        }
        if self.mask & state != 0 {
            transition(self.kind, self.cur, self.profile_state)
        } else {
            Ok(None)
        }
    }
}

/// An INIT profile takes configuration only in the call that moves it to OFFLINE.
fn init_configured_to_offline(cur: u32, configuring: bool, to: Option<u32>) -> Result<(), Error> {
    if cur == MRC_CTL_PROFILE_INIT && configuring && to != Some(MRC_CTL_PROFILE_OFFLINE) {
        return Err(Error::inval(
            "an INIT profile is configured by moving it to OFFLINE in the same call",
        ));
    }
    Ok(())
}

/// Checks the requested state change against the profile life cycle; `None` if the state stays.
fn transition(kind: &str, cur: u32, to: u32) -> Result<Option<u32>, Error> {
    if to > MRC_CTL_PROFILE_ONLINE {
        return Err(Error::inval(format!(
            "profile_state {to} is not a profile state"
        )));
    }
    if to == cur {
        return Ok(None);
    }
    let ok = matches!(
        (cur, to),
        (MRC_CTL_PROFILE_INIT, MRC_CTL_PROFILE_OFFLINE)
            | (MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_ONLINE)
            | (MRC_CTL_PROFILE_OFFLINE, MRC_CTL_PROFILE_INIT)
            | (MRC_CTL_PROFILE_ONLINE, MRC_CTL_PROFILE_OFFLINE)
    );
    if !ok {
        return Err(Error::inval(format!(
            "{kind} profile: {} -> {} is not a valid transition (INIT -> OFFLINE -> ONLINE and back)",
            state_name(cur),
            state_name(to)
        )));
    }
    Ok(Some(to))
}

/// An EV format profile.
#[derive(Debug, Clone, Default, PartialEq)]
struct FmtProfile {
    state: u32,
    mode: u32,
    fields: Option<Vec<u8>>,
    /// ONLINE EV profiles that use it.
    ev_users: u32,
}

impl FmtProfile {
    fn width(&self) -> u32 {
        self.fields
            .as_ref()
            .map_or(0, |f| f.iter().map(|&w| u32::from(w)).sum())
    }
}

/// One slot of an explicit EV array.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Slot {
    ev: mrc_ctl_ev,
    state: u32,
}

const UNPOPULATED: Slot = Slot {
    ev: mrc_ctl_ev {
        val: [0; MRC_CTL_EV_MAX_BYTES],
        port: 0,
    },
    state: MRC_CTL_EV_UNKNOWN,
};

fn unpopulated(ev: &mrc_ctl_ev) -> bool {
    ev.port == 0 && ev.val.iter().all(|&b| b == 0)
}

/// What the transport reads of an EV profile: mode, `(EV, state)` per slot, min_active, event mask.
pub(crate) type EvProfileView = (u32, Vec<(mrc_ctl_ev, u32)>, u32, c_int);

/// An EV profile.
#[derive(Debug, Clone, PartialEq)]
struct EvProfile {
    state: u32,
    mode: u32,
    fmt_id: Option<u64>,
    count: u32,
    min_active: u32,
    event_mask: c_int,
    fields: Option<Vec<mrc_ctl_ev_field>>,
    slots: Vec<Slot>,
    /// QPs that use it.
    qp_users: u32,
}

impl Default for EvProfile {
    fn default() -> Self {
        Self {
            state: MRC_CTL_PROFILE_INIT,
            mode: 0,
            fmt_id: None,
            count: 0,
            min_active: 0,
            event_mask: 0,
            fields: None,
            slots: Vec::new(),
            qp_users: 0,
        }
    }
}

/// A CC profile.
#[derive(Debug, Clone, Default, PartialEq)]
struct CcProfile {
    state: u32,
    /// `Some(None)`: set to no congestion control; `None`: not set yet.
    algorithm: Option<Option<&'static CStr>>,
    config: Option<mrc_ctl_cc_nscc_cfg>,
    qp_users: u32,
}

/// An EV operation, decoded from `ev_op`.
pub(crate) struct EvOp<'a> {
    pub(crate) op: u32,
    pub(crate) entries: &'a mut [mrc_ctl_ev_op_entry],
    /// The caller's `entry_count` (written back by QUERY_EV_ARRAY).
    pub(crate) count_out: &'a mut c_int,
}

/// An EV field operation, decoded from `ev_fields_op`.
pub(crate) struct FieldsOp<'a> {
    pub(crate) op: u32,
    pub(crate) fields: &'a mut [mrc_ctl_ev_field],
    pub(crate) count_out: &'a mut c_int,
}

/// The controller state of one device.
#[derive(Debug)]
pub(crate) struct State {
    planes: u32,
    fmt_modes: u32,
    max_width: u32,
    /// Administrative state per port (plane), from port 1.
    ports: Vec<u32>,
    fmt: BTreeMap<u64, FmtProfile>,
    ev: BTreeMap<u64, EvProfile>,
    cc: BTreeMap<u64, CcProfile>,
}

impl State {
    pub(crate) fn new(planes: u32, fmt_modes: u32, max_width: u32) -> Self {
        Self {
            planes,
            fmt_modes,
            max_width,
            ports: vec![MRC_CTL_PORT_ADMIN_ENABLED; planes as usize],
            fmt: BTreeMap::new(),
            ev: BTreeMap::new(),
            cc: BTreeMap::new(),
        }
    }

    /// What the transport needs of an EV profile: its mode, its explicit EVs with their states (EXP), the
    /// floor of active EVs and the event mask.
    pub(crate) fn ev_profile(&self, id: u64) -> Option<EvProfileView> {
        let p = self.ev.get(&id)?;
        Some((
            p.mode,
            p.slots.iter().map(|s| (s.ev, s.state)).collect(),
            p.min_active,
            p.event_mask,
        ))
    }

    /// A CC profile's NSCC configuration; `None` for no congestion control or no such profile.
    pub(crate) fn cc_nscc(&self, id: u64) -> Option<mrc_ctl_cc_nscc_cfg> {
        self.cc.get(&id)?.config
    }

    /// EVs held by all profiles.
    fn ev_used(&self) -> u32 {
        self.ev.values().map(|p| p.count).sum()
    }

    /// Takes a QP reference on an ONLINE profile.
    pub(crate) fn hold(&mut self, kind: ProfileKind, id: u64) -> Result<(), Error> {
        let (state, users) = match kind {
            ProfileKind::Ev => self.ev.get_mut(&id).map(|p| (p.state, &mut p.qp_users)),
            ProfileKind::Cc => self.cc.get_mut(&id).map(|p| (p.state, &mut p.qp_users)),
        }
        .unzip();
        if state != Some(MRC_CTL_PROFILE_ONLINE) {
            return Err(Error::inval(format!(
                "{} profile {id} is {}, not ONLINE (a controller sets it up with mrc_ctl.h)",
                if kind == ProfileKind::Ev { "EV" } else { "CC" },
                state_name(state.unwrap_or(MRC_CTL_PROFILE_INIT))
            )));
        }
        if let Some(u) = users {
            *u += 1;
        }
        Ok(())
    }

    /// Drops a reference taken with [`State::hold`].
    pub(crate) fn release(&mut self, kind: ProfileKind, id: u64) {
        let users = match kind {
            ProfileKind::Ev => self.ev.get_mut(&id).map(|p| &mut p.qp_users),
            ProfileKind::Cc => self.cc.get_mut(&id).map(|p| &mut p.qp_users),
        };
        if let Some(u) = users {
            *u = u.saturating_sub(1);
        }
    }

    fn port_index(&self, port: u8) -> Result<usize, Error> {
        if port == 0 || u32::from(port) > self.planes {
            return Err(Error::inval(format!(
                "port_num {port} is not a port of the device (1..={}, one per MRC plane)",
                self.planes
            )));
        }
        Ok(usize::from(port - 1))
    }
}
