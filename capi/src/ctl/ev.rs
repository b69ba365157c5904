//! EV profiles: explicit EVs in a format profile's layout, their states (DENY included), the EV operations and
//! the field ranges of generated EVs.

use super::*;

/// Every attribute bit of an EV profile (modify and query take the same).
const EV_ATTRS: c_int = MRC_CTL_EV_PROFILE_STATE
    | MRC_CTL_EV_PROFILE_CUR_STATE
    | MRC_CTL_EV_PROFILE_MODE
    | MRC_CTL_EV_PROFILE_FMT_ID
    | MRC_CTL_EV_PROFILE_COUNT
    | MRC_CTL_EV_PROFILE_MIN_ACTIVE
    | MRC_CTL_EV_PROFILE_EVENT_MASK
    | MRC_CTL_EV_PROFILE_EV_OP
    | MRC_CTL_EV_PROFILE_EV_FIELDS_OP
    | MRC_CTL_EV_PROFILE_VENDOR_CFG;

impl State {
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
        const CONFIG: c_int = MRC_CTL_EV_PROFILE_MODE
            | MRC_CTL_EV_PROFILE_FMT_ID
            | MRC_CTL_EV_PROFILE_COUNT
            | MRC_CTL_EV_PROFILE_MIN_ACTIVE;
        check_mask("attr_mask", mask, EV_ATTRS)?;
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
        self.apply_ev_config(&mut next, &cur, attr, mask)?;
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
        self.check_ev_step(id, &cur, &next, to)?;
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

    /// The configuration attributes of `mrc_ctl_modify_ev_profile` (mode, format, count, min_active, event mask)
    /// applied to `next`, each checked.
    fn apply_ev_config(
        &self,
        next: &mut EvProfile,
        cur: &EvProfile,
        attr: &mrc_ctl_ev_profile_attr,
        mask: c_int,
    ) -> Result<(), Error> {
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
        Ok(())
    }

    /// Whether profile `id` may move from `cur` to state `to` as `next` will be.
    fn check_ev_step(
        &self,
        id: u64,
        cur: &EvProfile,
        next: &EvProfile,
        to: Option<u32>,
    ) -> Result<(), Error> {
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
        check_mask("attr_mask", mask, EV_ATTRS)?;
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
}

fn query_ev_fields(
    p: &EvProfile,
    out: &mut [mrc_ctl_ev_field],
    count_out: &mut c_int,
) -> Result<(), Error> {
    let f = p.fields.as_deref().unwrap_or(&[]);
    copy_fields_out(f, out, count_out, "field_count", |o, &v| *o = v)
}
