//! EV format profiles (`mrc_ctl_modify_ev_fmt_profile`, `mrc_ctl_query_ev_fmt_profile`): the fields an EV
//! of each mode has and their widths.

use super::*;

/// Every attribute bit of an EV format profile (modify and query take the same).
const FMT_ATTRS: c_int = MRC_CTL_EV_FMT_PROFILE_STATE
    | MRC_CTL_EV_FMT_PROFILE_CUR_STATE
    | MRC_CTL_EV_FMT_PROFILE_MODE
    | MRC_CTL_EV_FMT_PROFILE_OP
    | MRC_CTL_EV_FMT_VENDOR_CFG;

impl State {
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
        check_mask("attr_mask", mask, FMT_ATTRS)?;
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
        check_mask("attr_mask", mask, FMT_ATTRS)?;
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
}

fn query_fmt_fields(
    p: &FmtProfile,
    out: &mut [mrc_ctl_ev_fmt_field],
    count_out: &mut c_int,
) -> Result<(), Error> {
    let f = p.fields.as_deref().unwrap_or(&[]);
    copy_fields_out(f, out, count_out, "fmt_field_count", |o, &w| o.width = w)
}
