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

    // ---- EV format profiles ------------------------------------------------------------------------

    fn check_fmt_fields(
        &self,
        mode: u32,
        fields: &[mrc_ctl_ev_fmt_field],
    ) -> Result<Vec<u8>, Error> {
        if fields.is_empty() || fields.len() > limits::EV_MAX_FIELDS {
            return Err(Error::inval(format!(
                "fmt_field_count {} is outside 1..={}",
                fields.len(),
                limits::EV_MAX_FIELDS
            )));
        }
        if let Some(i) = fields.iter().position(|f| f.width == 0) {
            return Err(Error::inval(format!("fmt_fields[{i}].width is 0")));
        }
        let total: u32 = fields.iter().map(|f| u32::from(f.width)).sum();
        let cap = match mode {
            MRC_CTL_EV_FMT_MODE_UDP => 16,
            MRC_CTL_EV_FMT_MODE_STEV => 32,
            _ => self.max_width,
        };
        if total > cap {
            return Err(Error::new(
                libc::E2BIG,
                format!("the format fields add up to {total} bits; this format carries {cap}"),
            ));
        }
        Ok(fields.iter().map(|f| f.width).collect())
    }

    /// `mrc_ctl_modify_ev_fmt_profile` once the arrays are decoded.
    pub(crate) fn modify_fmt(
        &mut self,
        id: u64,
        attr: &mrc_ctl_ev_fmt_profile_attr,
        mask: c_int,
        fields: &mut [mrc_ctl_ev_fmt_field],
        count_out: &mut c_int,
    ) -> Result<(), Error> {
        const ALL: c_int = MRC_CTL_EV_FMT_PROFILE_STATE
            | MRC_CTL_EV_FMT_PROFILE_CUR_STATE
            | MRC_CTL_EV_FMT_PROFILE_MODE
            | MRC_CTL_EV_FMT_PROFILE_OP
            | MRC_CTL_EV_FMT_VENDOR_CFG;
        check_mask("attr_mask", mask, ALL)?;
        let cur = self.fmt.get(&id).cloned().unwrap_or_default();
        let to = ProfileStep {
            kind: "EV format",
            id,
            cur: cur.state,
            mask,
            bits: [
                MRC_CTL_EV_FMT_PROFILE_STATE,
                MRC_CTL_EV_FMT_PROFILE_CUR_STATE,
                MRC_CTL_EV_FMT_VENDOR_CFG,
            ],
            profile_state: attr.profile_state,
            cur_profile_state: attr.cur_profile_state,
            vendor_cfg: &attr.vendor_cfg,
        }
        .check()?;
        let mut next = cur.clone();
        let configuring = mask & (MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP) != 0;
        init_configured_to_offline(cur.state, configuring, to)?;
        if mask & MRC_CTL_EV_FMT_PROFILE_MODE != 0 {
            if cur.state == MRC_CTL_PROFILE_ONLINE {
                return Err(Error::inval(
                    "the mode of an ONLINE EV format profile cannot change",
                ));
            }
            let m = attr.ev_fmt_mode;
            if m.count_ones() != 1 || m & self.fmt_modes == 0 {
                return Err(Error::inval(format!(
                    "ev_fmt_mode {m:#x} is not one mode the device carries (ev_fmt_mode_mask {:#x})",
                    self.fmt_modes
                )));
            }
            if next.mode != m {
                next.fields = None;
            }
            next.mode = m;
        }
        if mask & MRC_CTL_EV_FMT_PROFILE_OP != 0 {
            match attr.ev_fmt_op.op {
                MRC_CTL_EV_FMT_OP_MODIFY_FIELDS => {
                    if cur.state == MRC_CTL_PROFILE_ONLINE {
                        return Err(Error::inval(
                            "the fields of an ONLINE EV format profile cannot change",
                        ));
                    }
                    if next.mode == 0 {
                        return Err(Error::inval(
                            "set the mode (MRC_CTL_EV_FMT_PROFILE_MODE) first",
                        ));
                    }
                    next.fields = Some(self.check_fmt_fields(next.mode, fields)?);
                }
                MRC_CTL_EV_FMT_OP_QUERY_FIELDS => query_fmt_fields(&next, fields, count_out)?,
                op => {
                    return Err(Error::inval(format!(
                        "ev_fmt_op.op {op} is not an operation"
                    )));
                }
            }
        }
        match to {
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.state == MRC_CTL_PROFILE_INIT => {
                if next.mode == 0 {
                    return Err(Error::inval(
                        "INIT -> OFFLINE needs the mode (MRC_CTL_EV_FMT_PROFILE_MODE)",
                    ));
                }
                let configured = self
                    .fmt
                    .values()
                    .filter(|p| p.state != MRC_CTL_PROFILE_INIT)
                    .count();
                if configured >= limits::EV_MAX_FMT_PROFILES as usize {
                    return Err(Error::new(
                        libc::ENOSPC,
                        format!(
                            "{} EV format profiles are configured already (ev_max_fmt_profiles)",
                            limits::EV_MAX_FMT_PROFILES
                        ),
                    ));
                }
            }
            Some(MRC_CTL_PROFILE_ONLINE) if next.fields.is_none() => {
                return Err(Error::inval(
                    "OFFLINE -> ONLINE needs the format fields (MRC_CTL_EV_FMT_OP_MODIFY_FIELDS)",
                ));
            }
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.ev_users > 0 => {
                return Err(Error::new(
                    libc::EBUSY,
                    format!(
                        "{} ONLINE EV profile(s) use EV format profile {id}",
                        cur.ev_users
                    ),
                ));
            }
            _ => {}
        }
        if let Some(s) = to {
            next.state = s;
        }
        if next.state == MRC_CTL_PROFILE_INIT {
            self.fmt.remove(&id);
        } else {
            self.fmt.insert(id, next);
        }
        Ok(())
    }

    /// `mrc_ctl_query_ev_fmt_profile`.
    pub(crate) fn query_fmt(
        &self,
        id: u64,
        attr: &mut mrc_ctl_ev_fmt_profile_attr,
        mask: c_int,
        fields: &mut [mrc_ctl_ev_fmt_field],
        count_out: &mut c_int,
    ) -> Result<(), Error> {
        const ALL: c_int = MRC_CTL_EV_FMT_PROFILE_STATE
            | MRC_CTL_EV_FMT_PROFILE_CUR_STATE
            | MRC_CTL_EV_FMT_PROFILE_MODE
            | MRC_CTL_EV_FMT_PROFILE_OP
            | MRC_CTL_EV_FMT_VENDOR_CFG;
        check_mask("attr_mask", mask, ALL)?;
        let p = self.fmt.get(&id).cloned().unwrap_or_default();
        if mask & MRC_CTL_EV_FMT_PROFILE_OP != 0 {
            if attr.ev_fmt_op.op != MRC_CTL_EV_FMT_OP_QUERY_FIELDS {
                return Err(Error::inval(
                    "a query takes only MRC_CTL_EV_FMT_OP_QUERY_FIELDS",
                ));
            }
            query_fmt_fields(&p, fields, count_out)?;
        }
        if mask & (MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_CUR_STATE) != 0 {
            attr.profile_state = p.state;
            attr.cur_profile_state = p.state;
        }
        if mask & MRC_CTL_EV_FMT_PROFILE_MODE != 0 {
            attr.ev_fmt_mode = p.mode;
        }
        if mask & MRC_CTL_EV_FMT_VENDOR_CFG != 0 {
            attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
        }
        Ok(())
    }

    // ---- EV profiles --------------------------------------------------------------------------------

    /// Checks an EV against the profile's format and the device's ports.
    fn check_ev(&self, p: &EvProfile, ev: &mrc_ctl_ev, what: &str) -> Result<(), Error> {
        if unpopulated(ev) {
            return Err(Error::inval(format!("{what} is MRC_CTL_EV_UNPOPULATED")));
        }
        if ev.port == 0 || u32::from(ev.port) > self.planes {
            return Err(Error::inval(format!(
                "{what}.port {} is not a port of the device (1..={})",
                ev.port, self.planes
            )));
        }
        let fmt = p.fmt_id.and_then(|id| self.fmt.get(&id));
        if let Some(f) = fmt
            && matches!(f.mode, MRC_CTL_EV_FMT_MODE_UDP | MRC_CTL_EV_FMT_MODE_STEV)
        {
            let v = u32::from_ne_bytes([ev.val[0], ev.val[1], ev.val[2], ev.val[3]]);
            let w = f.width();
            if ev.val[4..].iter().any(|&b| b != 0) || (w < 32 && v >> w != 0) {
                return Err(Error::inval(format!(
                    "{what}.val is wider than the {w}-bit format of EV format profile {}",
                    p.fmt_id.unwrap_or_default()
                )));
            }
        }
        Ok(())
    }

    fn check_ev_fields(
        &self,
        p: &EvProfile,
        fields: &[mrc_ctl_ev_field],
    ) -> Result<Vec<mrc_ctl_ev_field>, Error> {
        if fields.is_empty() || fields.len() > limits::EV_MAX_FIELDS {
            return Err(Error::inval(format!(
                "field_count {} is outside 1..={}",
                fields.len(),
                limits::EV_MAX_FIELDS
            )));
        }
        let fmt = p.fmt_id.and_then(|id| self.fmt.get(&id));
        if let Some(f) = fmt.and_then(|f| f.fields.as_ref())
            && fields.len() > f.len()
        {
            return Err(Error::new(
                libc::E2BIG,
                format!("{} fields, but the EV format has {}", fields.len(), f.len()),
            ));
        }
        let mut total = 0u32;
        for (i, f) in fields.iter().enumerate() {
            let fits = |v: u32, bits: u32| bits >= 32 || v >> bits == 0;
            if f.width == 0 || f.width > 32 {
                return Err(Error::inval(format!(
                    "fields[{i}].width {} is outside 1..=32",
                    f.width
                )));
            }
            if !fits(f.init_val, f.width) || !fits(f.mask, f.width) {
                return Err(Error::inval(format!(
                    "fields[{i}]: init_val or mask has bits beyond its {}-bit width",
                    f.width
                )));
            }
            if !fits(f.max_val, f.mask.count_ones()) || f.min_val > f.max_val {
                return Err(Error::inval(format!(
                    "fields[{i}]: min_val..=max_val must fit the {} mask bits",
                    f.mask.count_ones()
                )));
            }
            total += f.width;
        }
        let limit = fmt.map_or(self.max_width, FmtProfile::width);
        if total > limit {
            return Err(Error::new(
                libc::E2BIG,
                format!("the fields add up to {total} bits; the EV format has {limit}"),
            ));
        }
        Ok(fields.to_vec())
    }

    /// `mrc_ctl_modify_ev_profile` once the arrays are decoded.
    pub(crate) fn modify_ev(
        &mut self,
        id: u64,
        attr: &mrc_ctl_ev_profile_attr,
        mask: c_int,
        ev_op: Option<EvOp<'_>>,
        fields_op: Option<FieldsOp<'_>>,
    ) -> Result<(), Error> {
        const ALL: c_int = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_CUR_STATE
            | MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE
            | MRC_CTL_EV_PROFILE_EVENT_MASK
            | MRC_CTL_EV_PROFILE_EV_OP
            | MRC_CTL_EV_PROFILE_EV_FIELDS_OP
            | MRC_CTL_EV_PROFILE_VENDOR_CFG;
        const CONFIG: c_int = MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE;
        check_mask("attr_mask", mask, ALL)?;
        if mask & MRC_CTL_EV_PROFILE_EV_OP != 0 && mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
            return Err(Error::inval(
                "MRC_CTL_EV_PROFILE_EV_OP and MRC_CTL_EV_PROFILE_EV_FIELDS_OP exclude each other",
            ));
        }
        let cur = self.ev.get(&id).cloned().unwrap_or_default();
        let to = ProfileStep {
            kind: "EV",
            id,
            cur: cur.state,
            mask,
            bits: [
                MRC_CTL_EV_PROFILE_STATE,
                MRC_CTL_EV_PROFILE_CUR_STATE,
                MRC_CTL_EV_PROFILE_VENDOR_CFG,
            ],
            profile_state: attr.profile_state,
            cur_profile_state: attr.cur_profile_state,
            vendor_cfg: &attr.vendor_cfg,
        }
        .check()?;
        if cur.state == MRC_CTL_PROFILE_INIT {
            let configuring = mask
                & (CONFIG | MRC_CTL_EV_PROFILE_EVENT_MASK | MRC_CTL_EV_PROFILE_EV_FIELDS_OP)
                != 0;
            init_configured_to_offline(cur.state, configuring, to)?;
            if mask & MRC_CTL_EV_PROFILE_EV_OP != 0 {
                return Err(Error::inval(
                    "EV operations need a configured (OFFLINE or ONLINE) profile",
                ));
            }
        }
        if cur.state == MRC_CTL_PROFILE_ONLINE && mask & CONFIG != 0 {
            return Err(Error::inval(
                "mode, format, count and min_active of an ONLINE EV profile cannot change (move it OFFLINE)",
            ));
        }
        let mut next = cur.clone();
        if mask & MRC_CTL_EV_PROFILE_MODE != 0 {
            match attr.ev_mode {
                MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP => next.mode = attr.ev_mode,
                MRC_CTL_EV_MODE_GEN => {
                    return Err(Error::inval(
                        "generated EVs (MRC_CTL_EV_MODE_GEN) are not supported; list them (MRC_CTL_EV_MODE_EXP)",
                    ));
                }
                m => return Err(Error::inval(format!("ev_mode {m:#x} is not one EV mode"))),
            }
        }
        if mask & MRC_CTL_EV_PROFILE_FMT_ID != 0 {
            let f = self.fmt.get(&attr.ev_fmt_profile_id);
            if f.is_none() {
                return Err(Error::inval(format!(
                    "EV format profile {} is not configured",
                    attr.ev_fmt_profile_id
                )));
            }
            next.fmt_id = Some(attr.ev_fmt_profile_id);
        }
        if mask & MRC_CTL_EV_PROFILE_COUNT != 0 {
            let n = attr.ev_count;
            if n == 0 || n > limits::EV_MAX_COUNT_PROFILE {
                return Err(Error::new(
                    libc::E2BIG,
                    format!(
                        "ev_count {n} is outside 1..={} (ev_max_count_profile)",
                        limits::EV_MAX_COUNT_PROFILE
                    ),
                ));
            }
            let others = self.ev_used() - cur.count;
            if others + n > limits::EV_MAX_COUNT {
                return Err(Error::new(
                    libc::ENOSPC,
                    format!(
                        "ev_count {n}: only {} of the device's {} EVs are free",
                        limits::EV_MAX_COUNT - others,
                        limits::EV_MAX_COUNT
                    ),
                ));
            }
            next.count = n;
            next.slots.resize(n as usize, UNPOPULATED);
        }
        if mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE != 0 {
            next.min_active = attr.ev_min_active;
        }
        if mask & MRC_CTL_EV_PROFILE_EVENT_MASK != 0 {
            let m = attr.ev_event_mask;
            let allowed = (MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) as c_int;
            if m & !allowed != 0 {
                return Err(Error::inval(format!(
                    "ev_event_mask {m:#x}: only MRC_CTL_EV_GOOD and MRC_CTL_EV_ASSUMED_BAD changes are reported"
                )));
            }
            next.event_mask = m;
        }
        if next.min_active > next.count {
            return Err(Error::inval(format!(
                "ev_min_active {} is above ev_count {}",
                next.min_active, next.count
            )));
        }
        if let Some(f) = fields_op {
            match f.op {
                MRC_CTL_EV_FIELDS_OP_MODIFY_FIELDS => {
                    next.fields = Some(self.check_ev_fields(&next, f.fields)?)
                }
                MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS => query_ev_fields(&next, f.fields, f.count_out)?,
                op => {
                    return Err(Error::inval(format!(
                        "ev_fields_op.op {op} is not an operation"
                    )));
                }
            }
        }
        // The EV operation goes entry by entry: what succeeded before a failing entry stays (with the
        // attributes of this call), and the state does not change.
        if let Some(op) = ev_op
            && let Err(e) = self.ev_operation(&mut next, op, true)
        {
            self.ev.insert(id, next);
            return Err(e);
        }
        // The state change is checked against the profile as it will be.
        match to {
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.state == MRC_CTL_PROFILE_INIT => {
                if next.mode == 0 {
                    return Err(Error::inval(
                        "INIT -> OFFLINE needs the mode (MRC_CTL_EV_PROFILE_MODE)",
                    ));
                }
                if next.mode == MRC_CTL_EV_MODE_EXP && (next.fmt_id.is_none() || next.count == 0) {
                    return Err(Error::inval(
                        "INIT -> OFFLINE of an explicit profile needs FMT_ID and COUNT",
                    ));
                }
                let configured = self
                    .ev
                    .values()
                    .filter(|p| p.state != MRC_CTL_PROFILE_INIT)
                    .count();
                if configured >= limits::EV_MAX_PROFILES as usize {
                    return Err(Error::new(
                        libc::ENOSPC,
                        format!(
                            "{} EV profiles are configured already (ev_max_profiles)",
                            limits::EV_MAX_PROFILES
                        ),
                    ));
                }
            }
            Some(MRC_CTL_PROFILE_ONLINE) if next.mode == MRC_CTL_EV_MODE_EXP => {
                if let Some(i) = next.slots.iter().position(|s| unpopulated(&s.ev)) {
                    return Err(Error::inval(format!(
                        "EV slot {i} is still MRC_CTL_EV_UNPOPULATED; replace every slot before ONLINE"
                    )));
                }
                let fmt_online = next
                    .fmt_id
                    .and_then(|f| self.fmt.get(&f))
                    .is_some_and(|f| f.state == MRC_CTL_PROFILE_ONLINE);
                if !fmt_online {
                    return Err(Error::inval(format!(
                        "EV format profile {} is not ONLINE",
                        next.fmt_id.unwrap_or_default()
                    )));
                }
            }
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.qp_users > 0 => {
                return Err(Error::new(
                    libc::EBUSY,
                    format!("{} QP(s) use EV profile {id}", cur.qp_users),
                ));
            }
            _ => {}
        }
        if let Some(s) = to {
            let fmt_of = |p: &EvProfile| p.fmt_id.filter(|_| p.mode == MRC_CTL_EV_MODE_EXP);
            if s == MRC_CTL_PROFILE_ONLINE
                && let Some(f) = fmt_of(&next).and_then(|f| self.fmt.get_mut(&f))
            {
                f.ev_users += 1;
            }
            if cur.state == MRC_CTL_PROFILE_ONLINE
                && let Some(f) = fmt_of(&cur).and_then(|f| self.fmt.get_mut(&f))
            {
                f.ev_users = f.ev_users.saturating_sub(1);
            }
            next.state = s;
        }
        if next.state == MRC_CTL_PROFILE_INIT {
            self.ev.remove(&id);
        } else {
            self.ev.insert(id, next);
        }
        Ok(())
    }

    /// Runs an EV operation on `p` (`modify`: whether changing operations are allowed).
    fn ev_operation(&self, p: &mut EvProfile, op: EvOp<'_>, modify: bool) -> Result<(), Error> {
        if p.mode != MRC_CTL_EV_MODE_EXP {
            return Err(Error::inval(
                "EV operations need an explicit (MRC_CTL_EV_MODE_EXP) profile",
            ));
        }
        let find = |p: &EvProfile, ev: &mrc_ctl_ev, all: bool| -> Vec<usize> {
            let mut hits = p
                .slots
                .iter()
                .enumerate()
                .filter(|(_, s)| s.ev == *ev)
                .map(|(i, _)| i);
            if all {
                hits.collect()
            } else {
                hits.next().into_iter().collect()
            }
        };
        match op.op {
            MRC_CTL_EV_OP_REPLACE_EV | MRC_CTL_EV_OP_MODIFY_EV_STATE if !modify => {
                Err(Error::inval(
                    "a query takes only MRC_CTL_EV_OP_QUERY_EV_STATE and MRC_CTL_EV_OP_QUERY_EV_ARRAY",
                ))
            }
            MRC_CTL_EV_OP_REPLACE_EV => {
                for (i, e) in op.entries.iter().enumerate() {
                    if e.flags & !MRC_CTL_EV_OP_F_ALL_COPIES != 0 {
                        return Err(Error::inval(format!(
                            "entries[{i}].flags {:#x} names no flag",
                            e.flags
                        )));
                    }
                    self.check_ev(p, &e.ev_new, &format!("entries[{i}].ev_new"))?;
                    // A zero state (what a zero-initialised entry holds) means GOOD.
                    let state = match e.state {
                        0 | MRC_CTL_EV_GOOD => MRC_CTL_EV_GOOD,
                        MRC_CTL_EV_DENIED => MRC_CTL_EV_DENIED,
                        s => {
                            return Err(Error::inval(format!(
                                "entries[{i}].state {s:#x}: a replacement starts GOOD or DENIED"
                            )));
                        }
                    };
                    let hits = find(p, &e.ev, e.flags & MRC_CTL_EV_OP_F_ALL_COPIES != 0);
                    if hits.is_empty() {
                        return Err(Error::new(
                            libc::ENOENT,
                            format!("entries[{i}].ev is not in the profile"),
                        ));
                    }
                    for h in hits {
                        p.slots[h] = Slot {
                            ev: e.ev_new,
                            state,
                        };
                    }
                }
                Ok(())
            }
            MRC_CTL_EV_OP_MODIFY_EV_STATE => {
                for (i, e) in op.entries.iter().enumerate() {
                    if e.flags & !MRC_CTL_EV_OP_F_ALL_COPIES != 0 {
                        return Err(Error::inval(format!(
                            "entries[{i}].flags {:#x} names no flag",
                            e.flags
                        )));
                    }
                    if !matches!(e.state, MRC_CTL_EV_GOOD | MRC_CTL_EV_DENIED) {
                        return Err(Error::inval(format!(
                            "entries[{i}].state {:#x}: a controller sets GOOD or DENIED (ASSUMED_BAD is the \
                             transport's verdict)",
                            e.state
                        )));
                    }
                    if unpopulated(&e.ev) {
                        return Err(Error::inval(format!(
                            "entries[{i}].ev is MRC_CTL_EV_UNPOPULATED"
                        )));
                    }
                    let hits = find(p, &e.ev, e.flags & MRC_CTL_EV_OP_F_ALL_COPIES != 0);
                    if hits.is_empty() {
                        return Err(Error::new(
                            libc::ENOENT,
                            format!("entries[{i}].ev is not in the profile"),
                        ));
                    }
                    for h in hits {
                        p.slots[h].state = e.state;
                    }
                }
                Ok(())
            }
            MRC_CTL_EV_OP_QUERY_EV_STATE => {
                for (i, e) in op.entries.iter_mut().enumerate() {
                    let hits = find(p, &e.ev, false);
                    let Some(&h) = hits.first() else {
                        return Err(Error::new(
                            libc::ENOENT,
                            format!("entries[{i}].ev is not in the profile"),
                        ));
                    };
                    e.state = p.slots[h].state;
                }
                Ok(())
            }
            MRC_CTL_EV_OP_QUERY_EV_ARRAY => {
                let n = p.slots.len();
                if op.entries.len() < n {
                    *op.count_out = c_int::try_from(n).unwrap_or(c_int::MAX);
                    return Err(Error::new(
                        libc::E2BIG,
                        format!(
                            "entry_count {} is below the profile's {n} EVs",
                            op.entries.len()
                        ),
                    ));
                }
                for (e, s) in op.entries.iter_mut().zip(&p.slots) {
                    e.ev = s.ev;
                    e.state = s.state;
                }
                *op.count_out = c_int::try_from(n).unwrap_or(c_int::MAX);
                Ok(())
            }
            o => Err(Error::inval(format!("ev_op.op {o} is not an operation"))),
        }
    }

    /// `mrc_ctl_query_ev_profile`.
    pub(crate) fn query_ev(
        &self,
        id: u64,
        attr: &mut mrc_ctl_ev_profile_attr,
        mask: c_int,
        ev_op: Option<EvOp<'_>>,
        fields_op: Option<FieldsOp<'_>>,
    ) -> Result<(), Error> {
        const ALL: c_int = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_CUR_STATE
            | MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE
            | MRC_CTL_EV_PROFILE_EVENT_MASK
            | MRC_CTL_EV_PROFILE_EV_OP
            | MRC_CTL_EV_PROFILE_EV_FIELDS_OP
            | MRC_CTL_EV_PROFILE_VENDOR_CFG;
        check_mask("attr_mask", mask, ALL)?;
        if mask & MRC_CTL_EV_PROFILE_EV_OP != 0 && mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
            return Err(Error::inval(
                "MRC_CTL_EV_PROFILE_EV_OP and MRC_CTL_EV_PROFILE_EV_FIELDS_OP exclude each other",
            ));
        }
        let mut p = self.ev.get(&id).cloned().unwrap_or_default();
        if let Some(op) = ev_op {
            self.ev_operation(&mut p, op, false)?;
        }
        if let Some(f) = fields_op {
            if f.op != MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS {
                return Err(Error::inval(
                    "a query takes only MRC_CTL_EV_FIELDS_OP_QUERY_FIELDS",
                ));
            }
            query_ev_fields(&p, f.fields, f.count_out)?;
        }
        if mask & (MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_CUR_STATE) != 0 {
            attr.profile_state = p.state;
            attr.cur_profile_state = p.state;
        }
        if mask & MRC_CTL_EV_PROFILE_MODE != 0 {
            attr.ev_mode = p.mode;
        }
        if mask & MRC_CTL_EV_PROFILE_FMT_ID != 0 {
            attr.ev_fmt_profile_id = p.fmt_id.unwrap_or(0);
        }
        if mask & MRC_CTL_EV_PROFILE_COUNT != 0 {
            attr.ev_count = p.count;
        }
        if mask & MRC_CTL_EV_PROFILE_MIN_ACTIVE != 0 {
            attr.ev_min_active = p.min_active;
        }
        if mask & MRC_CTL_EV_PROFILE_EVENT_MASK != 0 {
            attr.ev_event_mask = p.event_mask;
        }
        if mask & MRC_CTL_EV_PROFILE_VENDOR_CFG != 0 {
            attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
        }
        Ok(())
    }

    // ---- CC profiles --------------------------------------------------------------------------------

    /// `mrc_ctl_modify_cc_profile`; `algorithm` and `config` are the decoded pointers.
    pub(crate) fn modify_cc(
        &mut self,
        id: u64,
        attr: &mrc_ctl_cc_profile_attr,
        mask: c_int,
        algorithm: Option<&CStr>,
        config: Option<mrc_ctl_cc_nscc_cfg>,
    ) -> Result<(), Error> {
        const ALL: c_int = MRC_CTL_CC_PROFILE_STATE
            | MRC_CTL_CC_PROFILE_CUR_STATE
            | MRC_CTL_CC_PROFILE_ALGORITHM
            | MRC_CTL_CC_PROFILE_CONFIG
            | MRC_CTL_CC_PROFILE_VENDOR_CFG;
        check_mask("attr_mask", mask, ALL)?;
        let cur = self.cc.get(&id).cloned().unwrap_or_default();
        let to = ProfileStep {
            kind: "CC",
            id,
            cur: cur.state,
            mask,
            bits: [
                MRC_CTL_CC_PROFILE_STATE,
                MRC_CTL_CC_PROFILE_CUR_STATE,
                MRC_CTL_CC_PROFILE_VENDOR_CFG,
            ],
            profile_state: attr.profile_state,
            cur_profile_state: attr.cur_profile_state,
            vendor_cfg: &attr.vendor_cfg,
        }
        .check()?;
        let configuring = mask & (MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG) != 0;
        init_configured_to_offline(cur.state, configuring, to)?;
        let mut next = cur.clone();
        if mask & MRC_CTL_CC_PROFILE_ALGORITHM != 0 {
            if cur.state == MRC_CTL_PROFILE_ONLINE {
                return Err(Error::inval(
                    "the algorithm of an ONLINE CC profile cannot change",
                ));
            }
            let a = match algorithm {
                None => None,
                Some(a) if a == NSCC => Some(NSCC),
                Some(a) => {
                    return Err(Error::inval(format!(
                        "algorithm {:?} is not one of the device's (\"uet-1.0-nscc\")",
                        a.to_string_lossy()
                    )));
                }
            };
            if next.algorithm != Some(a) {
                next.config = None;
            }
            next.algorithm = Some(a);
        }
        if mask & MRC_CTL_CC_PROFILE_CONFIG != 0 {
            match (next.algorithm, config) {
                (Some(Some(_)), Some(c)) => next.config = Some(check_nscc(&c)?),
                (Some(Some(_)), None) => return Err(Error::inval("cc_config is NULL")),
                (Some(None), _) => {
                    return Err(Error::inval(
                        "the profile has no algorithm (NULL), so it takes no cc_config",
                    ));
                }
                (None, _) => {
                    return Err(Error::inval(
                        "set the algorithm (MRC_CTL_CC_PROFILE_ALGORITHM) first",
                    ));
                }
            }
        }
        match to {
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.state == MRC_CTL_PROFILE_INIT => {
                if next.algorithm.is_none() {
                    return Err(Error::inval(
                        "INIT -> OFFLINE needs the algorithm (MRC_CTL_CC_PROFILE_ALGORITHM)",
                    ));
                }
                let configured = self
                    .cc
                    .values()
                    .filter(|p| p.state != MRC_CTL_PROFILE_INIT)
                    .count();
                if configured >= limits::CC_MAX_PROFILES as usize {
                    return Err(Error::new(
                        libc::ENOSPC,
                        format!(
                            "{} CC profiles are configured already (cc_max_profiles)",
                            limits::CC_MAX_PROFILES
                        ),
                    ));
                }
            }
            Some(MRC_CTL_PROFILE_ONLINE)
                if matches!(next.algorithm, Some(Some(_))) && next.config.is_none() =>
            {
                return Err(Error::inval(
                    "OFFLINE -> ONLINE needs the configuration (MRC_CTL_CC_PROFILE_CONFIG)",
                ));
            }
            Some(MRC_CTL_PROFILE_OFFLINE) if cur.qp_users > 0 => {
                return Err(Error::new(
                    libc::EBUSY,
                    format!("{} QP(s) use CC profile {id}", cur.qp_users),
                ));
            }
            _ => {}
        }
        if let Some(s) = to {
            next.state = s;
        }
        if next.state == MRC_CTL_PROFILE_INIT {
            self.cc.remove(&id);
        } else {
            self.cc.insert(id, next);
        }
        Ok(())
    }

    /// `mrc_ctl_query_cc_profile`: returns the algorithm name and the configuration to copy out.
    pub(crate) fn query_cc(
        &self,
        id: u64,
        attr: &mut mrc_ctl_cc_profile_attr,
        mask: c_int,
    ) -> Result<Option<mrc_ctl_cc_nscc_cfg>, Error> {
        const ALL: c_int = MRC_CTL_CC_PROFILE_STATE
            | MRC_CTL_CC_PROFILE_CUR_STATE
            | MRC_CTL_CC_PROFILE_ALGORITHM
            | MRC_CTL_CC_PROFILE_CONFIG
            | MRC_CTL_CC_PROFILE_VENDOR_CFG;
        check_mask("attr_mask", mask, ALL)?;
        let p = self.cc.get(&id).cloned().unwrap_or_default();
        let config = if mask & MRC_CTL_CC_PROFILE_CONFIG != 0 {
            Some(
                p.config
                    .ok_or_else(|| Error::inval(format!("CC profile {id} has no configuration")))?,
            )
        } else {
            None
        };
        if mask & (MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CUR_STATE) != 0 {
            attr.profile_state = p.state;
            attr.cur_profile_state = p.state;
        }
        if mask & MRC_CTL_CC_PROFILE_ALGORITHM != 0 {
            attr.algorithm = p.algorithm.flatten().map_or(std::ptr::null(), CStr::as_ptr);
        }
        if mask & MRC_CTL_CC_PROFILE_VENDOR_CFG != 0 {
            attr.vendor_cfg = [0; MRC_CTL_MAX_VENDOR_CFG_SIZE];
        }
        Ok(config)
    }
}

fn query_fmt_fields(
    p: &FmtProfile,
    out: &mut [mrc_ctl_ev_fmt_field],
    count_out: &mut c_int,
) -> Result<(), Error> {
    let f = p.fields.as_deref().unwrap_or(&[]);
    *count_out = c_int::try_from(f.len()).unwrap_or(c_int::MAX);
    if out.len() < f.len() {
        return Err(Error::new(
            libc::E2BIG,
            format!(
                "fmt_field_count {} is below the profile's {} fields",
                out.len(),
                f.len()
            ),
        ));
    }
    for (o, &w) in out.iter_mut().zip(f) {
        o.width = w;
    }
    Ok(())
}

fn query_ev_fields(
    p: &EvProfile,
    out: &mut [mrc_ctl_ev_field],
    count_out: &mut c_int,
) -> Result<(), Error> {
    let f = p.fields.as_deref().unwrap_or(&[]);
    *count_out = c_int::try_from(f.len()).unwrap_or(c_int::MAX);
    if out.len() < f.len() {
        return Err(Error::new(
            libc::E2BIG,
            format!(
                "field_count {} is below the profile's {} fields",
                out.len(),
                f.len()
            ),
        ));
    }
    out[..f.len()].copy_from_slice(f);
    Ok(())
}

/// NSCC parameters a controller may set (the engine's `NsccConfig` takes them in stage 2).
fn check_nscc(c: &mrc_ctl_cc_nscc_cfg) -> Result<mrc_ctl_cc_nscc_cfg, Error> {
    let positive = [
        ("eta", c.eta),
        ("fi", c.fi),
        ("fi_scale", c.fi_scale),
        ("gamma", c.gamma),
    ];
    for (name, v) in positive {
        if !(v.is_finite() && v > 0.0) {
            return Err(Error::inval(format!(
                "NSCC {name} {v} is not a positive number"
            )));
        }
    }
    if !(c.max_md_jump.is_finite() && c.max_md_jump > 0.0 && c.max_md_jump <= 1.0) {
        return Err(Error::inval(format!(
            "NSCC max_md_jump {} is not a fraction of the window in (0, 1]",
            c.max_md_jump
        )));
    }
    if c.base_rtt == 0 || c.target_delay == 0 {
        return Err(Error::inval(
            "NSCC base_rtt and target_delay must be above 0 ns",
        ));
    }
    Ok(*c)
}

// ---- entry points --------------------------------------------------------------------------------------

/// A caller's array as a slice: `count` elements at `p` (NULL only with 0).
///
/// # Safety
/// `p` must point at `count` writable elements when not NULL (the header's contract).
unsafe fn array<'a, T>(p: *mut T, count: c_int, what: &str) -> Result<&'a mut [T], Error> {
    let n = usize::try_from(count)
        .map_err(|_| Error::inval(format!("{what} count {count} is negative")))?;
    if n == 0 {
        return Ok(&mut []);
    }
    if p.is_null() {
        return Err(Error::inval(format!("{what} is NULL with a count of {n}")));
    }
    // SAFETY: forwarded contract.
    Ok(unsafe { std::slice::from_raw_parts_mut(p, n) })
}

fn ctl_attr_for(d: &Device) -> mrc_ctl_device_attr {
    let used = d.ctl().ev_used();
    mrc_ctl_device_attr {
        mrc_ctl_protocol_version: MRC_CTL_PROTOCOL_VERSION_1,
        ev: mrc_ctl_device_attr_ev {
            ev_max_fmt_profiles: limits::EV_MAX_FMT_PROFILES,
            ev_max_profiles: limits::EV_MAX_PROFILES,
            ev_max_count: limits::EV_MAX_COUNT,
            ev_free_count: limits::EV_MAX_COUNT - used,
            ev_max_count_profile: limits::EV_MAX_COUNT_PROFILE,
            ev_count_align: 1,
            ev_max_width: d.ev_max_width(),
            ev_fmt_mode_mask: d.fmt_modes(),
            ev_mode_mask: MRC_CTL_EV_MODE_AUTO | MRC_CTL_EV_MODE_EXP,
            ev_op_max_entries: 0,
        },
        cc: mrc_ctl_device_attr_cc {
            cc_max_profiles: limits::CC_MAX_PROFILES,
            algorithms: ALGORITHMS.0.as_ptr(),
        },
        phy_port_mask: d.port_mask(),
        opt_attr: MRC_CTL_OPT_CAP_EV_PROFILE_MODIFY_ONLINE
            | MRC_CTL_OPT_CAP_CC_PROFILE_MODIFY_ONLINE
            | transport::ctl_opt_caps(),
    }
}

/// The controller view of a device; fails for a verbs device that is not MRC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device(
    context: *mut ibv_context,
    ctl_attr: *mut mrc_ctl_device_attr,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_device", || {
        non_null(context, "context")?;
        non_null(ctl_attr, "ctl_attr")?;
        let d = device_of(context).ok_or_else(|| {
            Error::new(
                libc::EOPNOTSUPP,
                "context is not an MRC device (mrc-verbs-shim's devices are)",
            )
        })?;
        // SAFETY: non-NULL writable struct (the header's contract).
        unsafe { ctl_attr.write(ctl_attr_for(&d)) };
        Ok(())
    })
}

/// The controller view of a device, with `*supported` saying whether it is MRC.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_device_ex(
    context: *mut ibv_context,
    mcontext: *mut mrc_context,
    ctl_attr: *mut mrc_ctl_device_attr,
    supported: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_device_ex", || {
        non_null(context, "context")?;
        non_null(ctl_attr, "ctl_attr")?;
        non_null(supported, "supported")?;
        if !mcontext.is_null() && crate::context::context(mcontext)?.vctx != context {
            return Err(Error::inval(
                "mcontext was created on another verbs context",
            ));
        }
        let d = device_of(context);
        // SAFETY: non-NULL writable outputs (the header's contract).
        unsafe {
            match d {
                Some(d) => {
                    ctl_attr.write(ctl_attr_for(&d));
                    supported.write(1);
                }
                None => {
                    ctl_attr.write(std::mem::zeroed());
                    supported.write(0);
                }
            }
        }
        Ok(())
    })
}

/// The controller API revisions implemented. NULL outputs are skipped.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_version(
    current_version: *mut u32,
    last_supported_version: *mut u32,
    vendor_version: *mut u32,
    last_supported_vendor_version: *mut u32,
) {
    FFI.void("mrc_ctl_query_version", || {
        for (p, v) in [
            (current_version, MRC_CTL_API_CURRENT_VERSION),
            (last_supported_version, mrc_api_ver(1, 0, 0)),
            (vendor_version, MRC_CTL_VENDOR_API_CURRENT_VERSION),
            (
                last_supported_vendor_version,
                MRC_CTL_VENDOR_API_CURRENT_VERSION,
            ),
        ] {
            if !p.is_null() {
                // SAFETY: non-NULL writable u32 (the header's contract).
                unsafe { p.write(v) };
            }
        }
        Ok(())
    })
}

/// A port's administrative state.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_port(
    mctx: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_port", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        check_mask("attr_mask", attr_mask, MRC_CTL_PORT_ADMIN_STATE)?;
        let ctl = c.dev.ctl();
        let i = ctl.port_index(port_num)?;
        if attr_mask & MRC_CTL_PORT_ADMIN_STATE != 0 {
            // SAFETY: non-NULL writable struct (the header's contract).
            unsafe { (*attr).port_admin_state = ctl.ports[i] };
        }
        Ok(())
    })
}

/// Enables or disables a port (an MRC plane). Stage 1 records it; the transport applies it in stage 2.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_port(
    mctx: *mut mrc_context,
    port_num: u8,
    attr: *mut mrc_ctl_port_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_port", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        check_mask("attr_mask", attr_mask, MRC_CTL_PORT_ADMIN_STATE)?;
        // SAFETY: non-NULL readable struct (the header's contract).
        let a = unsafe { attr.read() };
        let mut ctl = c.dev.ctl();
        let i = ctl.port_index(port_num)?;
        if attr_mask & MRC_CTL_PORT_ADMIN_STATE != 0 {
            if a.port_admin_state > MRC_CTL_PORT_ADMIN_ENABLED {
                return Err(Error::inval(format!(
                    "port_admin_state {} is neither DISABLED nor ENABLED",
                    a.port_admin_state
                )));
            }
            ctl.ports[i] = a.port_admin_state;
            drop(ctl);
            transport::set_port(c.vctx, i, a.port_admin_state == MRC_CTL_PORT_ADMIN_ENABLED)?;
        }
        Ok(())
    })
}

/// Configures an EV format profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_fmt_profile(
    mctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_ev_fmt_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let mut count = a.ev_fmt_op.fmt_field_count;
        let fields = if attr_mask & MRC_CTL_EV_FMT_PROFILE_OP != 0 {
            // SAFETY: the caller's array of `fmt_field_count` fields.
            unsafe { array(a.ev_fmt_op.fmt_fields, count, "ev_fmt_op.fmt_fields") }?
        } else {
            &mut []
        };
        let r = c
            .dev
            .ctl()
            .modify_fmt(ev_fmt_profile_id, a, attr_mask, fields, &mut count);
        a.ev_fmt_op.fmt_field_count = count;
        r
    })
}

/// Reads an EV format profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_fmt_profile(
    mctx: *mut mrc_context,
    ev_fmt_profile_id: u64,
    attr: *mut mrc_ctl_ev_fmt_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_ev_fmt_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let mut count = a.ev_fmt_op.fmt_field_count;
        let fields = if attr_mask & MRC_CTL_EV_FMT_PROFILE_OP != 0 {
            // SAFETY: the caller's array of `fmt_field_count` fields.
            unsafe { array(a.ev_fmt_op.fmt_fields, count, "ev_fmt_op.fmt_fields") }?
        } else {
            &mut []
        };
        let r = c
            .dev
            .ctl()
            .query_fmt(ev_fmt_profile_id, a, attr_mask, fields, &mut count);
        a.ev_fmt_op.fmt_field_count = count;
        r
    })
}

/// Runs `f` with the EV and field operations of `a` decoded; writes the counts back.
fn with_ev_ops(
    a: &mut mrc_ctl_ev_profile_attr,
    mask: c_int,
    f: impl FnOnce(
        &mrc_ctl_ev_profile_attr,
        Option<EvOp<'_>>,
        Option<FieldsOp<'_>>,
    ) -> Result<(), Error>,
) -> Result<(), Error> {
    let mut entry_count = a.ev_op.entry_count;
    let mut field_count = a.ev_fields_op.field_count;
    let ev_op = if mask & MRC_CTL_EV_PROFILE_EV_OP != 0 {
        if limits_exceeded(entry_count) {
            return Err(Error::new(
                libc::E2BIG,
                format!("ev_op.entry_count {entry_count} is too large"),
            ));
        }
        Some(EvOp {
            op: a.ev_op.op,
            // SAFETY: the caller's array of `entry_count` entries.
            entries: unsafe { array(a.ev_op.entries, entry_count, "ev_op.entries") }?,
            count_out: &mut entry_count,
        })
    } else {
        None
    };
    let fields_op = if mask & MRC_CTL_EV_PROFILE_EV_FIELDS_OP != 0 {
        Some(FieldsOp {
            op: a.ev_fields_op.op,
            // SAFETY: the caller's array of `field_count` fields.
            fields: unsafe { array(a.ev_fields_op.fields, field_count, "ev_fields_op.fields") }?,
            count_out: &mut field_count,
        })
    } else {
        None
    };
    let r = f(a, ev_op, fields_op);
    a.ev_op.entry_count = entry_count;
    a.ev_fields_op.field_count = field_count;
    r
}

/// More entries than any profile holds twice over: surely a garbage count.
fn limits_exceeded(n: c_int) -> bool {
    i64::from(n) > 2 * i64::from(limits::EV_MAX_COUNT)
}

/// Configures an EV profile, or runs an EV operation on it.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_ev_profile(
    mctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_ev_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let r = with_ev_ops(a, attr_mask, |a, op, f| {
            c.dev.ctl().modify_ev(ev_profile_id, a, attr_mask, op, f)
        });
        // EV states (DENY) reach the live QPs that use the profile, also those an operation that stopped at a
        // bad entry changed before it.
        let synced = transport::ev_profile_changed(&c.dev, ev_profile_id);
        r.and(synced)
    })
}

/// Reads an EV profile, its EV array or EV states.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_ev_profile(
    mctx: *mut mrc_context,
    ev_profile_id: u64,
    attr: *mut mrc_ctl_ev_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_ev_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        let mut out = *a;
        let r = with_ev_ops(a, attr_mask, |_, op, f| {
            c.dev
                .ctl()
                .query_ev(ev_profile_id, &mut out, attr_mask, op, f)
        });
        // Keep the counts `with_ev_ops` wrote back; take the queried scalars.
        out.ev_op = a.ev_op;
        out.ev_fields_op = a.ev_fields_op;
        *a = out;
        r
    })
}

/// Configures a CC profile.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_modify_cc_profile(
    mctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_modify_cc_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL readable struct (the header's contract).
        let a = unsafe { attr.read() };
        let algorithm = if attr_mask & MRC_CTL_CC_PROFILE_ALGORITHM != 0 && !a.algorithm.is_null() {
            // SAFETY: a non-NULL algorithm is a NUL-terminated string (the header's contract).
            Some(unsafe { CStr::from_ptr(a.algorithm) })
        } else {
            None
        };
        let config = if attr_mask & MRC_CTL_CC_PROFILE_CONFIG != 0 && !a.cc_config.is_null() {
            // SAFETY: with NSCC, cc_config points at a `struct mrc_ctl_cc_nscc_cfg` (the header's contract);
            // read unaligned since it is the caller's memory.
            Some(unsafe { a.cc_config.cast::<mrc_ctl_cc_nscc_cfg>().read_unaligned() })
        } else {
            None
        };
        c.dev
            .ctl()
            .modify_cc(cc_profile_id, &a, attr_mask, algorithm, config)
    })
}

/// Reads a CC profile; with CONFIG, `cc_config` must point at a `struct mrc_ctl_cc_nscc_cfg` to fill.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_query_cc_profile(
    mctx: *mut mrc_context,
    cc_profile_id: u64,
    attr: *mut mrc_ctl_cc_profile_attr,
    attr_mask: c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_query_cc_profile", || {
        let c = context(mctx)?;
        non_null(attr, "attr")?;
        // SAFETY: non-NULL writable struct (the header's contract).
        let a = unsafe { &mut *attr };
        if attr_mask & MRC_CTL_CC_PROFILE_CONFIG != 0 {
            non_null(a.cc_config, "cc_config")?;
        }
        let mut out = *a;
        let config = c.dev.ctl().query_cc(cc_profile_id, &mut out, attr_mask)?;
        if let Some(cfg) = config {
            // SAFETY: non-NULL (checked above) and, by this call's contract, a writable NSCC config.
            unsafe {
                a.cc_config
                    .cast::<mrc_ctl_cc_nscc_cfg>()
                    .cast_mut()
                    .write_unaligned(cfg)
            };
        }
        out.cc_config = a.cc_config;
        *a = out;
        Ok(())
    })
}

/// Polls EV events (through the transport); returns the count or a negative errno value.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_poll_ev_event(
    ev_cq: *mut mrc_cq,
    num_entries: c_int,
    ev_event: *mut mrc_ctl_ev_event,
) -> c_int {
    FFI.neg_errno("mrc_ctl_poll_ev_event", || {
        let q = cq(ev_cq, "ev_cq")?;
        if q.kind != CqKind::EvEvents {
            return Err(Error::inval(
                "ev_cq is a work-completion CQ; create it with mrc_ctl_create_ev_event_cq",
            ));
        }
        if num_entries < 0 {
            return Err(Error::inval(format!(
                "num_entries {num_entries} is negative"
            )));
        }
        if num_entries > 0 {
            non_null(ev_event, "ev_event")?;
        }
        let events = crate::cq::take_ev_events(q, num_entries as usize);
        // The 1.0.1 layout: stage 2 picks the 1.0.0 one for programs built against it.
        for (i, e) in events.iter().enumerate() {
            // SAFETY: the caller's array holds `num_entries` events.
            unsafe { ev_event.add(i).write(*e) };
        }
        Ok(c_int::try_from(events.len().min(num_entries as usize)).unwrap_or(0))
    })
}

/// Sends endpoint requests (EV probes) and waits for the answers (through the transport).
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_ctl_ep_batch_send_wait(
    mctx: *mut mrc_context,
    req_tc: u8,
    op_type: mrc_ctl_ep_op_type,
    req: *mut mrc_ctl_ep_req,
    num_req: c_int,
    rsp_timeout: u32,
    rsp: *mut mrc_ctl_ep_rsp,
    num_rsp: *mut c_int,
) -> c_int {
    FFI.minus_one("mrc_ctl_ep_batch_send_wait", || {
        let c = context(mctx)?;
        non_null(num_rsp, "num_rsp")?;
        // SAFETY: non-NULL writable int (the header's contract).
        unsafe { num_rsp.write(0) };
        if !matches!(
            op_type,
            MRC_CTL_EP_OP_EV_PROBE | MRC_CTL_EP_OP_PORT_STATUS_UPDATE
        ) {
            return Err(Error::inval(format!(
                "op_type {op_type} is not an endpoint operation"
            )));
        }
        if num_req < 1 {
            return Err(Error::inval(format!("num_req {num_req} is below 1")));
        }
        non_null(rsp, "rsp")?;
        if req_tc > 63 {
            return Err(Error::inval(format!(
                "req_tc {req_tc} is not a DSCP value (0..=63)"
            )));
        }
        // SAFETY: the caller's array of `num_req` requests.
        let reqs: &[mrc_ctl_ep_req] = unsafe { array(req, num_req, "req") }?;
        for (i, r) in reqs.iter().enumerate() {
            if r.ev_fmt_mode & c.dev.fmt_modes() == 0 || r.ev_fmt_mode.count_ones() != 1 {
                return Err(Error::inval(format!(
                    "req[{i}].ev_fmt_mode {:#x} is not a mode the device carries",
                    r.ev_fmt_mode
                )));
            }
            if !c.dev.has_port(u32::from(r.req_ev.port)) {
                return Err(Error::inval(format!(
                    "req[{i}].req_ev.port {} is not a port of the device",
                    r.req_ev.port
                )));
            }
            if op_type == MRC_CTL_EP_OP_PORT_STATUS_UPDATE {
                // SAFETY: the union's only member, plain data.
                let st = unsafe { r.op.port_status_update.port_status };
                if st == 0 || st & !c.dev.port_mask() != 0 {
                    return Err(Error::inval(format!(
                        "req[{i}].op.port_status_update.port_status {st:#x}: name the device's ports that \
                         are up (bits {:#x}), at least one",
                        c.dev.port_mask()
                    )));
                }
                if st >> r.req_ev.port & 1 == 0 {
                    return Err(Error::inval(format!(
                        "req[{i}]: the report travels on port {} but calls it down (the peer drops such a \
                         report as forged)",
                        r.req_ev.port
                    )));
                }
            }
        }
        let answers = transport::ep_batch(&c.dev, req_tc, op_type, reqs, rsp_timeout)?;
        let n = answers.len().min(reqs.len());
        for (i, a) in answers.iter().take(n).enumerate() {
            // SAFETY: `rsp` is sized for `num_req` responses (the header's contract).
            unsafe { rsp.add(i).write(*a) };
        }
        // SAFETY: as above.
        unsafe { num_rsp.write(c_int::try_from(n).unwrap_or(0)) };
        if n < reqs.len() {
            return Err(Error::new(
                libc::ETIMEDOUT,
                format!("{n} of {} answers arrived", reqs.len()),
            ));
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn udp_device() -> State {
        State::new(4, MRC_CTL_EV_FMT_MODE_UDP, 16)
    }

    fn stev(v: u32, port: u8) -> mrc_ctl_ev {
        let mut ev = mrc_ctl_ev {
            port,
            ..Default::default()
        };
        ev.val[..4].copy_from_slice(&v.to_ne_bytes());
        ev
    }

    fn fmt_online(s: &mut State, id: u64, widths: &[u8]) {
        let mut f: Vec<mrc_ctl_ev_fmt_field> = widths
            .iter()
            .map(|&width| mrc_ctl_ev_fmt_field { width })
            .collect();
        let mut n = f.len() as c_int;
        let a = mrc_ctl_ev_fmt_profile_attr {
            profile_state: MRC_CTL_PROFILE_OFFLINE,
            ev_fmt_mode: MRC_CTL_EV_FMT_MODE_UDP,
            ..Default::default()
        };
        let mut a = a;
        a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
        s.modify_fmt(
            id,
            &a,
            MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE | MRC_CTL_EV_FMT_PROFILE_OP,
            &mut f,
            &mut n,
        )
        .unwrap();
        a.profile_state = MRC_CTL_PROFILE_ONLINE;
        s.modify_fmt(id, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
            .unwrap();
    }

    fn ev_attr(state: u32) -> mrc_ctl_ev_profile_attr {
        mrc_ctl_ev_profile_attr {
            profile_state: state,
            ..Default::default()
        }
    }

    /// Runs one EV operation through `modify_ev` (or `query_ev`) and returns the entries and the count.
    fn op(
        s: &mut State,
        id: u64,
        op: u32,
        mut entries: Vec<mrc_ctl_ev_op_entry>,
        query: bool,
    ) -> (Result<(), Error>, Vec<mrc_ctl_ev_op_entry>, c_int) {
        let mut count = entries.len() as c_int;
        let o = EvOp {
            op,
            entries: &mut entries,
            count_out: &mut count,
        };
        let r = if query {
            s.query_ev(id, &mut ev_attr(0), MRC_CTL_EV_PROFILE_EV_OP, Some(o), None)
        } else {
            s.modify_ev(id, &ev_attr(0), MRC_CTL_EV_PROFILE_EV_OP, Some(o), None)
        };
        (r, entries, count)
    }

    fn entry(ev: mrc_ctl_ev, ev_new: mrc_ctl_ev, state: u32) -> mrc_ctl_ev_op_entry {
        mrc_ctl_ev_op_entry {
            ev,
            ev_new,
            state,
            flags: 0,
        }
    }

    #[test]
    fn format_profiles_follow_the_life_cycle_and_the_device_limits() {
        let mut s = udp_device();
        let mut n = 0;
        let mut a = mrc_ctl_ev_fmt_profile_attr {
            profile_state: MRC_CTL_PROFILE_OFFLINE,
            ev_fmt_mode: MRC_CTL_EV_FMT_MODE_STEV,
            ..Default::default()
        };
        let both = MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE;
        let e = s.modify_fmt(13, &a, both, &mut [], &mut n).unwrap_err();
        assert!(
            e.why().contains("not one mode the device carries"),
            "{}",
            e.why()
        );
        a.ev_fmt_mode = MRC_CTL_EV_FMT_MODE_UDP;
        a.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_MODIFY_FIELDS;
        let mut wide = [
            mrc_ctl_ev_fmt_field { width: 12 },
            mrc_ctl_ev_fmt_field { width: 8 },
        ];
        let e = s
            .modify_fmt(13, &a, both | MRC_CTL_EV_FMT_PROFILE_OP, &mut wide, &mut n)
            .unwrap_err();
        assert_eq!(e.errno, libc::E2BIG, "20 bits do not fit a UDP source port");
        assert!(!s.fmt.contains_key(&13), "a refused call changes nothing");
        // OFFLINE without fields cannot go ONLINE.
        s.modify_fmt(13, &a, both, &mut [], &mut n).unwrap();
        a.profile_state = MRC_CTL_PROFILE_ONLINE;
        assert!(
            s.modify_fmt(13, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
                .unwrap_err()
                .why()
                .contains("needs the format fields")
        );
        fmt_online(&mut s, 14, &[8, 8]);
        let mut q = mrc_ctl_ev_fmt_profile_attr::default();
        let mut one = [mrc_ctl_ev_fmt_field::default()];
        q.ev_fmt_op.op = MRC_CTL_EV_FMT_OP_QUERY_FIELDS;
        let e = s
            .query_fmt(14, &mut q, MRC_CTL_EV_FMT_PROFILE_OP, &mut one, &mut n)
            .unwrap_err();
        assert_eq!(
            (e.errno, n),
            (libc::E2BIG, 2),
            "E2BIG reports the size needed"
        );
        let mut two = [mrc_ctl_ev_fmt_field::default(); 2];
        s.query_fmt(
            14,
            &mut q,
            MRC_CTL_EV_FMT_PROFILE_OP | MRC_CTL_EV_FMT_PROFILE_STATE | MRC_CTL_EV_FMT_PROFILE_MODE,
            &mut two,
            &mut n,
        )
        .unwrap();
        assert_eq!(
            (q.profile_state, q.ev_fmt_mode, two[0].width, two[1].width),
            (MRC_CTL_PROFILE_ONLINE, MRC_CTL_EV_FMT_MODE_UDP, 8, 8)
        );
        // ONLINE -> INIT skips OFFLINE.
        a.profile_state = MRC_CTL_PROFILE_INIT;
        assert!(
            s.modify_fmt(14, &a, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
                .unwrap_err()
                .why()
                .contains("not a valid transition")
        );
    }

    #[test]
    fn explicit_ev_profile_is_filled_put_online_and_evs_are_denied() {
        let mut s = udp_device();
        fmt_online(&mut s, 13, &[8, 8]);
        let mut a = ev_attr(MRC_CTL_PROFILE_OFFLINE);
        a.ev_mode = MRC_CTL_EV_MODE_EXP;
        a.ev_fmt_profile_id = 13;
        a.ev_count = 4;
        a.ev_min_active = 1;
        a.ev_event_mask = (MRC_CTL_EV_GOOD | MRC_CTL_EV_ASSUMED_BAD) as c_int;
        let cfg = MRC_CTL_EV_PROFILE_STATE
            | MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE
            | MRC_CTL_EV_PROFILE_EVENT_MASK;
        s.modify_ev(1, &a, cfg, None, None).unwrap();
        // Unpopulated slots keep it from going ONLINE.
        let online = ev_attr(MRC_CTL_PROFILE_ONLINE);
        let e = s
            .modify_ev(1, &online, MRC_CTL_EV_PROFILE_STATE, None, None)
            .unwrap_err();
        assert!(
            e.why().contains("slot 0 is still MRC_CTL_EV_UNPOPULATED"),
            "{}",
            e.why()
        );
        // A port that is no plane, and a value wider than the 16-bit format, are refused.
        let unpop = mrc_ctl_ev::default();
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_REPLACE_EV,
            vec![entry(unpop, stev(1, 5), 0)],
            false,
        );
        assert!(r.unwrap_err().why().contains("port 5"));
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_REPLACE_EV,
            vec![entry(unpop, stev(1 << 16, 1), 0)],
            false,
        );
        assert!(
            r.unwrap_err()
                .why()
                .contains("wider than the 16-bit format")
        );
        let evs: Vec<mrc_ctl_ev> = (0..4u32).map(|i| stev((i << 8) | i, i as u8 + 1)).collect();
        let fill = evs.iter().map(|&e| entry(unpop, e, 0)).collect();
        let (r, ..) = op(&mut s, 1, MRC_CTL_EV_OP_REPLACE_EV, fill, false);
        r.unwrap();
        s.modify_ev(1, &online, MRC_CTL_EV_PROFILE_STATE, None, None)
            .unwrap();
        // The format is in use now.
        let mut n = 0;
        let off = mrc_ctl_ev_fmt_profile_attr {
            profile_state: MRC_CTL_PROFILE_OFFLINE,
            ..Default::default()
        };
        assert_eq!(
            s.modify_fmt(13, &off, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
                .unwrap_err()
                .errno,
            libc::EBUSY
        );

        // DENY one EV: its state changes, the others stay GOOD.
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_MODIFY_EV_STATE,
            vec![entry(evs[2], unpop, MRC_CTL_EV_DENIED)],
            false,
        );
        r.unwrap();
        let (r, got, _) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_QUERY_EV_STATE,
            vec![entry(evs[2], unpop, 0), entry(evs[1], unpop, 0)],
            true,
        );
        r.unwrap();
        assert_eq!(
            (got[0].state, got[1].state),
            (MRC_CTL_EV_DENIED, MRC_CTL_EV_GOOD)
        );
        // The controller cannot declare ASSUMED_BAD (the transport's verdict).
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_MODIFY_EV_STATE,
            vec![entry(evs[0], unpop, MRC_CTL_EV_ASSUMED_BAD)],
            false,
        );
        assert!(
            r.unwrap_err()
                .why()
                .contains("ASSUMED_BAD is the transport's verdict")
        );
        // Entries apply in order up to the first failure.
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_MODIFY_EV_STATE,
            vec![
                entry(evs[0], unpop, MRC_CTL_EV_DENIED),
                entry(stev(99, 1), unpop, MRC_CTL_EV_DENIED),
            ],
            false,
        );
        assert_eq!(r.unwrap_err().errno, libc::ENOENT);
        // The array: too short reports the size; then every EV and its state.
        let (r, _, cnt) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_QUERY_EV_ARRAY,
            vec![Default::default(); 2],
            true,
        );
        assert_eq!((r.unwrap_err().errno, cnt), (libc::E2BIG, 4));
        let (r, all, cnt) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_QUERY_EV_ARRAY,
            vec![Default::default(); 4],
            true,
        );
        r.unwrap();
        assert_eq!(cnt, 4);
        assert_eq!(all.iter().map(|e| e.ev).collect::<Vec<_>>(), evs);
        assert_eq!(
            all.iter().map(|e| e.state).collect::<Vec<_>>(),
            [
                MRC_CTL_EV_DENIED,
                MRC_CTL_EV_GOOD,
                MRC_CTL_EV_DENIED,
                MRC_CTL_EV_GOOD
            ]
        );
        // A query cannot modify.
        let (r, ..) = op(
            &mut s,
            1,
            MRC_CTL_EV_OP_MODIFY_EV_STATE,
            vec![entry(evs[1], unpop, MRC_CTL_EV_DENIED)],
            true,
        );
        assert_eq!(r.unwrap_err().errno, libc::EINVAL);

        // QPs pin the profile ONLINE.
        s.hold(ProfileKind::Ev, 1).unwrap();
        let offline = ev_attr(MRC_CTL_PROFILE_OFFLINE);
        assert_eq!(
            s.modify_ev(1, &offline, MRC_CTL_EV_PROFILE_STATE, None, None)
                .unwrap_err()
                .errno,
            libc::EBUSY
        );
        s.release(ProfileKind::Ev, 1);
        s.modify_ev(1, &offline, MRC_CTL_EV_PROFILE_STATE, None, None)
            .unwrap();
        assert!(
            s.hold(ProfileKind::Ev, 1)
                .unwrap_err()
                .why()
                .contains("OFFLINE, not ONLINE")
        );
        s.modify_ev(
            1,
            &ev_attr(MRC_CTL_PROFILE_INIT),
            MRC_CTL_EV_PROFILE_STATE,
            None,
            None,
        )
        .unwrap();
        assert!(
            s.ev.is_empty() && s.ev_used() == 0,
            "INIT forgets the profile and frees its EVs"
        );
        s.modify_fmt(13, &off, MRC_CTL_EV_FMT_PROFILE_STATE, &mut [], &mut n)
            .unwrap();
    }

    #[test]
    fn ev_profile_attribute_rules() {
        let mut s = udp_device();
        let mut a = ev_attr(MRC_CTL_PROFILE_OFFLINE);
        a.ev_mode = MRC_CTL_EV_MODE_GEN;
        let m = MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE;
        assert!(
            s.modify_ev(2, &a, m, None, None)
                .unwrap_err()
                .why()
                .contains("MRC_CTL_EV_MODE_GEN")
        );
        a.ev_mode = MRC_CTL_EV_MODE_EXP;
        assert!(
            s.modify_ev(2, &a, m, None, None)
                .unwrap_err()
                .why()
                .contains("needs FMT_ID and COUNT")
        );
        a.ev_mode = MRC_CTL_EV_MODE_AUTO;
        s.modify_ev(2, &a, m, None, None).unwrap();
        let (r, ..) = op(&mut s, 2, MRC_CTL_EV_OP_QUERY_EV_ARRAY, vec![], true);
        assert!(r.unwrap_err().why().contains("explicit"));
        a.ev_count = limits::EV_MAX_COUNT_PROFILE + 1;
        assert_eq!(
            s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_COUNT, None, None)
                .unwrap_err()
                .errno,
            libc::E2BIG
        );
        a.ev_event_mask = MRC_CTL_EV_DENIED as c_int;
        assert!(
            s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_EVENT_MASK, None, None)
                .unwrap_err()
                .why()
                .contains("only MRC_CTL_EV_GOOD")
        );
        let both = MRC_CTL_EV_PROFILE_EV_OP | MRC_CTL_EV_PROFILE_EV_FIELDS_OP;
        assert!(
            s.modify_ev(2, &a, both, None, None)
                .unwrap_err()
                .why()
                .contains("exclude each other")
        );
        a.cur_profile_state = MRC_CTL_PROFILE_ONLINE;
        assert!(
            s.modify_ev(2, &a, MRC_CTL_EV_PROFILE_CUR_STATE, None, None)
                .unwrap_err()
                .why()
                .contains("cur_profile_state says ONLINE")
        );
        // An AUTO profile goes ONLINE without EVs.
        s.modify_ev(
            2,
            &ev_attr(MRC_CTL_PROFILE_ONLINE),
            MRC_CTL_EV_PROFILE_STATE,
            None,
            None,
        )
        .unwrap();
        let mut q = ev_attr(0);
        s.query_ev(
            2,
            &mut q,
            MRC_CTL_EV_PROFILE_STATE | MRC_CTL_EV_PROFILE_MODE,
            None,
            None,
        )
        .unwrap();
        assert_eq!(
            (q.profile_state, q.cur_profile_state, q.ev_mode),
            (
                MRC_CTL_PROFILE_ONLINE,
                MRC_CTL_PROFILE_ONLINE,
                MRC_CTL_EV_MODE_AUTO
            )
        );
    }

    fn nscc() -> mrc_ctl_cc_nscc_cfg {
        mrc_ctl_cc_nscc_cfg {
            base_rtt: 10_000,
            target_delay: 7_500,
            eta: 0.15,
            fi: 1.0,
            fi_scale: 1.0,
            gamma: 1.0,
            max_md_jump: 0.5,
            max_cwnd: 1 << 20,
            ..Default::default()
        }
    }

    #[test]
    fn cc_profiles_take_nscc_parameters() {
        let mut s = udp_device();
        let a = mrc_ctl_cc_profile_attr {
            profile_state: MRC_CTL_PROFILE_OFFLINE,
            ..Default::default()
        };
        let sa = MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM;
        let e = s.modify_cc(3, &a, sa, Some(c"dctcp"), None).unwrap_err();
        assert!(
            e.why().contains("\"dctcp\" is not one of the device's"),
            "{}",
            e.why()
        );
        s.modify_cc(3, &a, sa, Some(NSCC), None).unwrap();
        let online = mrc_ctl_cc_profile_attr {
            profile_state: MRC_CTL_PROFILE_ONLINE,
            ..Default::default()
        };
        assert!(
            s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_STATE, None, None)
                .unwrap_err()
                .why()
                .contains("needs the configuration")
        );
        let bad = mrc_ctl_cc_nscc_cfg {
            max_md_jump: 2.0,
            ..nscc()
        };
        assert!(
            s.modify_cc(3, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(bad))
                .unwrap_err()
                .why()
                .contains("max_md_jump")
        );
        let nan = mrc_ctl_cc_nscc_cfg {
            eta: f32::NAN,
            ..nscc()
        };
        assert!(
            s.modify_cc(3, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(nan))
                .unwrap_err()
                .why()
                .contains("eta")
        );
        s.modify_cc(
            3,
            &online,
            MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_CONFIG,
            None,
            Some(nscc()),
        )
        .unwrap();
        // ONLINE: the configuration may change (MODIFY_ONLINE), the algorithm may not.
        let tuned = mrc_ctl_cc_nscc_cfg {
            gamma: 0.8,
            ..nscc()
        };
        s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_CONFIG, None, Some(tuned))
            .unwrap();
        assert!(
            s.modify_cc(3, &online, MRC_CTL_CC_PROFILE_ALGORITHM, Some(NSCC), None)
                .is_err()
        );
        let mut q = mrc_ctl_cc_profile_attr::default();
        let cfg = s
            .query_cc(
                3,
                &mut q,
                MRC_CTL_CC_PROFILE_STATE | MRC_CTL_CC_PROFILE_ALGORITHM | MRC_CTL_CC_PROFILE_CONFIG,
            )
            .unwrap();
        assert_eq!(cfg, Some(tuned));
        assert_eq!(q.profile_state, MRC_CTL_PROFILE_ONLINE);
        // SAFETY: the algorithm is one of the static names.
        assert_eq!(unsafe { CStr::from_ptr(q.algorithm) }, NSCC);
        // A profile without congestion control takes no configuration and goes ONLINE as it is.
        s.modify_cc(4, &a, sa, None, None).unwrap();
        assert!(
            s.modify_cc(4, &a, MRC_CTL_CC_PROFILE_CONFIG, None, Some(nscc()))
                .is_err()
        );
        s.modify_cc(4, &online, MRC_CTL_CC_PROFILE_STATE, None, None)
            .unwrap();
        s.hold(ProfileKind::Cc, 4).unwrap();
        let off = mrc_ctl_cc_profile_attr {
            profile_state: MRC_CTL_PROFILE_OFFLINE,
            ..Default::default()
        };
        assert_eq!(
            s.modify_cc(4, &off, MRC_CTL_CC_PROFILE_STATE, None, None)
                .unwrap_err()
                .errno,
            libc::EBUSY
        );
    }

    #[test]
    fn ports_are_the_planes() {
        let s = udp_device();
        assert_eq!(s.port_index(1).unwrap(), 0);
        assert_eq!(s.port_index(4).unwrap(), 3);
        assert_eq!(s.port_index(0).unwrap_err().errno, libc::EINVAL);
        assert!(s.port_index(5).unwrap_err().why().contains("1..=4"));
    }
}
