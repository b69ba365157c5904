//! CC profiles: the one algorithm (UET NSCC) and its parameters.

use super::*;

impl State {
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
