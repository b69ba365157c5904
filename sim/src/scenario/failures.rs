//! Checking failures: ranges, times inside the run, only the fields each kind reads, and repairs that end
//! a failure the scenario names.

use super::check::{err, time_in};
use super::*;

impl FailureKind {
    /// The name used in scenario files.
    pub fn name(self) -> &'static str {
        match self {
            Self::LinkDown => "link_down",
            Self::LinkUp => "link_up",
            Self::LinkFlap => "link_flap",
            Self::SwitchDown => "switch_down",
            Self::SwitchUp => "switch_up",
            Self::PlaneDown => "plane_down",
            Self::NicPortDown => "nic_port_down",
            Self::LinkLoss => "link_loss",
            Self::LinkSlow => "link_slow",
        }
    }

    /// Whether it acts on links selected by a [`LinkRef`].
    pub fn on_links(self) -> bool {
        matches!(
            self,
            Self::LinkDown | Self::LinkUp | Self::LinkFlap | Self::LinkLoss | Self::LinkSlow
        )
    }
}

impl FailureCfg {
    /// Whether it takes down the NIC port of one named host (the hosts `affected_throughput_fraction` looks
    /// at).
    pub fn failed_nic_host(&self) -> Option<u32> {
        match (self.kind, self.host, self.link) {
            (FailureKind::NicPortDown, Some(h), _) => Some(h),
            (FailureKind::LinkDown | FailureKind::LinkFlap, _, Some(l))
                if l.tier == LinkTier::Host =>
            {
                l.host
            }
            _ => None,
        }
    }
}

impl Scenario {
    /// Checks one failure: ranges, times inside the run, and only the fields its kind reads.
    pub(super) fn check_failure(&self, at: &str, f: &FailureCfg) -> Result<(), ScenarioError> {
        let kind = f.kind.name();
        let limit = self.run.limit_us;
        time_in(&format!("{at}.at_us"), f.at_us, 0.0, MAX_TIME_US)?;
        if f.at_us >= limit {
            return Err(err(
                format!("{at}.at_us"),
                format!(
                    "{} us is not before the end of the run (run.limit_us = {limit}): the failure would \
                     never happen; fail earlier or raise limit_us",
                    f.at_us
                ),
            ));
        }
        if let Some(u) = f.until_us {
            time_in(&format!("{at}.until_us"), u, 0.0, MAX_TIME_US)?;
            if u <= f.at_us {
                return Err(err(
                    format!("{at}.until_us"),
                    format!("{u} us is not later than at_us = {} us", f.at_us),
                ));
            }
            if u > limit {
                return Err(err(
                    format!("{at}.until_us"),
                    format!(
                        "{u} us is after the end of the run (run.limit_us = {limit}): the repair would never \
                         happen; leave until_us out if it lasts to the end, or raise limit_us"
                    ),
                ));
            }
        }
        let given = [
            ("until_us", f.until_us.is_some()),
            ("link", f.link.is_some()),
            ("switch", f.switch.is_some()),
            ("plane", f.plane.is_some()),
            ("host", f.host.is_some()),
            ("period_us", f.period_us.is_some()),
            ("duty", f.duty.is_some()),
            ("rate", f.rate.is_some()),
            ("fraction", f.fraction.is_some()),
        ];
        let reads: &[&str] = match f.kind {
            FailureKind::LinkDown => &["until_us", "link"],
            FailureKind::LinkUp => &["link"],
            FailureKind::LinkFlap => &["until_us", "link", "period_us", "duty"],
            FailureKind::SwitchDown => &["until_us", "switch"],
            FailureKind::SwitchUp => &["switch"],
            FailureKind::PlaneDown => &["until_us", "plane"],
            FailureKind::NicPortDown => &["until_us", "plane", "host"],
            FailureKind::LinkLoss => &["until_us", "link", "rate"],
            FailureKind::LinkSlow => &["until_us", "link", "fraction"],
        };
        for (name, g) in given {
            if g && !reads.contains(&name) {
                return Err(err(
                    format!("{at}.{name}"),
                    format!(
                        "does not apply to kind = \"{kind}\" (it would be ignored); {}",
                        inapplicable_fix(f.kind, name)
                    ),
                ));
            }
        }
        let need = |ok: bool, field: &str, what: &str| {
            if ok {
                Ok(())
            } else {
                Err(err(format!("{at}.{field}"), what.to_string()))
            }
        };
        if f.kind.on_links() {
            match &f.link {
                None => need(
                    false,
                    "link",
                    "needs link = { tier = \"host\" | \"t0_t1\" | \"t1_t2\", ... }",
                )?,
                Some(r) => check_link_ref(&format!("{at}.link"), r, f.kind)?,
            }
        }
        match f.kind {
            FailureKind::LinkFlap => {
                need(
                    f.period_us
                        .is_some_and(|p| p.is_finite() && p > 0.0 && p <= MAX_TIME_US),
                    "period_us",
                    "needs a positive, finite period_us",
                )?;
                need(
                    f.duty.is_some_and(|d| d > 0.0 && d < 1.0),
                    "duty",
                    "needs duty in (0, 1): the fraction of each period the link is up",
                )?;
                let Some(u) = f.until_us else {
                    return need(
                        false,
                        "until_us",
                        "needs until_us: when flapping stops (the link stays up)",
                    );
                };
                let p = f.period_us.unwrap_or(0.0);
                if p > u - f.at_us {
                    return Err(err(
                        format!("{at}.period_us"),
                        format!(
                            "{p} us is longer than the flapping (until_us - at_us = {} us): the link would go \
                             down once; use kind = \"link_down\" with until_us for one outage",
                            u - f.at_us
                        ),
                    ));
                }
                Ok(())
            }
            FailureKind::SwitchDown | FailureKind::SwitchUp => match &f.switch {
                None => need(
                    false,
                    "switch",
                    "needs switch = { tier = 0 | 1 | 2, plane = P, index = I }",
                ),
                Some(r) => self.check_switch_ref(&format!("{at}.switch"), r),
            },
            FailureKind::PlaneDown => {
                need(f.plane.is_some(), "plane", "needs plane = P")?;
                self.check_plane(&format!("{at}.plane"), f.plane)
            }
            FailureKind::NicPortDown => {
                need(
                    f.plane.is_some(),
                    "plane",
                    "needs plane = P (the port's plane)",
                )?;
                need(f.host.is_some(), "host", "needs host = H")?;
                self.check_plane(&format!("{at}.plane"), f.plane)
            }
            FailureKind::LinkLoss => need(
                f.rate.is_some_and(|r| (0.0..=1.0).contains(&r)),
                "rate",
                "needs rate in [0, 1]",
            ),
            FailureKind::LinkSlow => need(
                f.fraction.is_some_and(|r| r > 0.0 && r <= 1.0),
                "fraction",
                "needs fraction in (0, 1]",
            ),
            FailureKind::LinkDown | FailureKind::LinkUp => Ok(()),
        }?;
        if let Some(l) = &f.link {
            self.check_plane(&format!("{at}.link.plane"), l.plane)?;
        }
        Ok(())
    }

    fn check_plane(&self, field: &str, plane: Option<u8>) -> Result<(), ScenarioError> {
        match plane {
            Some(p) if p >= self.topology.planes => Err(err(
                field,
                format!(
                    "plane {p} does not exist: topology.planes = {}, so use 0..={}",
                    self.topology.planes,
                    self.topology.planes.saturating_sub(1)
                ),
            )),
            _ => Ok(()),
        }
    }

    fn check_switch_ref(&self, field: &str, r: &SwitchRef) -> Result<(), ScenarioError> {
        if r.tier > 2 {
            return Err(err(
                format!("{field}.tier"),
                format!("{}; use 0 (T0), 1 (T1) or 2 (T2)", r.tier),
            ));
        }
        if r.plane.is_none() && self.topology.planes > 1 {
            return Err(err(
                format!("{field}.plane"),
                format!(
                    "which plane? the fabric has {} planes; give plane = P",
                    self.topology.planes
                ),
            ));
        }
        self.check_plane(&format!("{field}.plane"), r.plane)?;
        match (self.topology.kind, r.tier, r.pod) {
            (TopoKind::TwoTier, 2, _) => Err(err(
                format!("{field}.tier"),
                "tier 2 exists only in three-tier fabrics; use 0 (T0) or 1 (T1)",
            )),
            (TopoKind::TwoTier, _, Some(_)) => Err(err(
                format!("{field}.pod"),
                "does not apply to a two-tier fabric (it has no pods); leave it out",
            )),
            (TopoKind::ThreeTier, _, None) => Err(err(
                format!("{field}.pod"),
                if r.tier == 2 {
                    "a T2 needs pod = its T1 position (0..t1)"
                } else {
                    "a T0 or T1 of a three-tier fabric needs pod = P"
                },
            )),
            _ => Ok(()),
        }
    }
}

/// A `link_up` or `switch_up` must end an earlier open-ended `link_down` or `switch_down` of the same links
/// or switch; otherwise it changes nothing (or ends a failure it does not name).
pub(super) fn check_repairs(field: &str, failures: &[FailureCfg]) -> Result<(), ScenarioError> {
    for (i, up) in failures.iter().enumerate() {
        let opens = |down: &FailureCfg| {
            down.at_us < up.at_us
                && down.until_us.is_none()
                && match up.kind {
                    FailureKind::LinkUp => {
                        down.kind == FailureKind::LinkDown && down.link == up.link
                    }
                    FailureKind::SwitchUp => {
                        down.kind == FailureKind::SwitchDown && down.switch == up.switch
                    }
                    _ => false,
                }
        };
        if matches!(up.kind, FailureKind::LinkUp | FailureKind::SwitchUp)
            && !failures.iter().any(opens)
        {
            let (what, down) = if up.kind == FailureKind::LinkUp {
                ("link", "link_down")
            } else {
                ("switch", "switch_down")
            };
            return Err(err(
                format!("{field}[{i}].{what}"),
                format!(
                    "nothing to bring up: no earlier {down} without until_us selects the same {what}; \
                     repeat the {down}'s {what} exactly, or give that {down} an until_us instead"
                ),
            ));
        }
    }
    Ok(())
}

/// What to write instead of a failure field its kind would ignore.
fn inapplicable_fix(kind: FailureKind, field: &str) -> String {
    let links = kind.on_links();
    match field {
        "plane" if links => {
            "select the plane inside the link: link = { tier = \"t0_t1\", plane = P }".into()
        }
        "plane" => {
            "give the plane inside the switch: switch = { tier = T, plane = P, index = I }".into()
        }
        "host" if links => {
            "select the host inside the link: link = { tier = \"host\", host = H }".into()
        }
        "host" => "a plane failure takes down every switch of the plane; for one host's port use \
                   kind = \"nic_port_down\" with host = H and plane = P"
            .into(),
        "link" => "it fails a switch, a plane or a NIC port; for links use kind = \"link_down\", \
                   \"link_flap\", \"link_loss\" or \"link_slow\""
            .into(),
        "switch" => "for a switch use kind = \"switch_down\" or \"switch_up\"".into(),
        "until_us" => format!(
            "{} has no end; give until_us on the {} it ends instead",
            kind.name(),
            if kind == FailureKind::LinkUp {
                "link_down"
            } else {
                "switch_down"
            }
        ),
        "period_us" | "duty" => "periodic failures are kind = \"link_flap\"".into(),
        "rate" => "random loss is kind = \"link_loss\"".into(),
        "fraction" => "a slowed link is kind = \"link_slow\"".into(),
        _ => "leave it out".into(),
    }
}

/// Which fields of a link selection each tier reads (a field another tier reads would be ignored).
fn check_link_ref(field: &str, r: &LinkRef, kind: FailureKind) -> Result<(), ScenarioError> {
    let tier = r.tier.name();
    let given = [
        ("host", r.host.is_some()),
        ("t0", r.t0.is_some()),
        ("t1", r.t1.is_some()),
        ("pod", r.pod.is_some()),
        ("t2", r.t2.is_some()),
    ];
    let reads: &[&str] = match r.tier {
        LinkTier::Host => &["host", "t0", "pod"],
        LinkTier::T0T1 => &["t0", "t1", "pod"],
        LinkTier::T1T2 => &["t1", "pod", "t2"],
    };
    for (name, g) in given {
        if g && !reads.contains(&name) {
            let fix = match (r.tier, name) {
                (_, "host") => {
                    "a host's links are tier = \"host\"; to select the T0-T1 links of its leaf \
                                use t0 = host / hosts_per_t0"
                        .to_string()
                }
                (LinkTier::Host, _) => {
                    "host links are selected by host, t0 (the leaf) and pod".to_string()
                }
                (LinkTier::T0T1, _) => "T0-T1 links are selected by t0, t1 and pod".to_string(),
                (LinkTier::T1T2, _) => "T1-T2 links are selected by t1, t2 and pod".to_string(),
            };
            return Err(err(
                format!("{field}.{name}"),
                format!("does not apply to tier = \"{tier}\" (it would be ignored); {fix}"),
            ));
        }
    }
    if r.direction.is_some() && !matches!(kind, FailureKind::LinkLoss | FailureKind::LinkSlow) {
        return Err(err(
            format!("{field}.direction"),
            format!(
                "does not apply to kind = \"{}\" (it would be ignored): a link goes down in both \
                 directions; direction is for link_loss and link_slow",
                kind.name()
            ),
        ));
    }
    Ok(())
}
