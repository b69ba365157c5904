//! The verbs state machine of an RC QP: the transitions that exist, the attributes each one requires and takes
//! (the kernel's `qp_state_table` for `IB_QPT_RC`, checked as `ib_modify_qp_is_ok` does; IBTA vol. 1 §10.3.1,
//! table 93), and the errno a front end returns for a request that breaks them.
//!
//! States and attribute bits carry verbs' values (`enum ibv_qp_state`, `enum ibv_qp_attr_mask`), which
//! `mrc_ffi::verbs_abi` takes from here and checks against rdma-core's headers. The drain states (SQD, SQE) are
//! not supported: a request that names one is refused with `EOPNOTSUPP`. Attribute *values* (a port number, a
//! GID) are the front end's to check; this module rules on which attributes a step needs.

use std::fmt;

/// `enum ibv_qp_state`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(u32)]
pub enum State {
    /// `IBV_QPS_RESET`.
    Reset = 0,
    /// `IBV_QPS_INIT`.
    Init = 1,
    /// `IBV_QPS_RTR`: ready to receive.
    Rtr = 2,
    /// `IBV_QPS_RTS`: ready to send.
    Rts = 3,
    /// `IBV_QPS_SQD`: send queue drained (not supported).
    Sqd = 4,
    /// `IBV_QPS_SQE`: send queue error (not supported).
    Sqe = 5,
    /// `IBV_QPS_ERR`.
    Err = 6,
}

impl State {
    /// The state a verbs value names, if any.
    pub const fn from_verbs(v: u32) -> Option<State> {
        Some(match v {
            0 => State::Reset,
            1 => State::Init,
            2 => State::Rtr,
            3 => State::Rts,
            4 => State::Sqd,
            5 => State::Sqe,
            6 => State::Err,
            _ => return None,
        })
    }

    /// The verbs value.
    pub const fn to_verbs(self) -> u32 {
        self as u32
    }

    /// The name a log line uses ("RTR").
    pub const fn name(self) -> &'static str {
        match self {
            State::Reset => "RESET",
            State::Init => "INIT",
            State::Rtr => "RTR",
            State::Rts => "RTS",
            State::Sqd => "SQD",
            State::Sqe => "SQE",
            State::Err => "ERR",
        }
    }
}

/// The name of a verbs state value, for messages about values that may name none.
pub fn state_name(v: u32) -> &'static str {
    State::from_verbs(v).map_or("an unknown state", State::name)
}

/// `enum ibv_qp_attr_mask`: which fields of an `ibv_qp_attr` a modify sets.
pub mod attr {
    /// `IBV_QP_STATE`.
    pub const STATE: u32 = 1 << 0;
    /// `IBV_QP_CUR_STATE`.
    pub const CUR_STATE: u32 = 1 << 1;
    /// `IBV_QP_EN_SQD_ASYNC_NOTIFY`.
    pub const EN_SQD_ASYNC_NOTIFY: u32 = 1 << 2;
    /// `IBV_QP_ACCESS_FLAGS`.
    pub const ACCESS_FLAGS: u32 = 1 << 3;
    /// `IBV_QP_PKEY_INDEX`.
    pub const PKEY_INDEX: u32 = 1 << 4;
    /// `IBV_QP_PORT`.
    pub const PORT: u32 = 1 << 5;
    /// `IBV_QP_QKEY`.
    pub const QKEY: u32 = 1 << 6;
    /// `IBV_QP_AV`: the address vector (the peer).
    pub const AV: u32 = 1 << 7;
    /// `IBV_QP_PATH_MTU`.
    pub const PATH_MTU: u32 = 1 << 8;
    /// `IBV_QP_TIMEOUT`.
    pub const TIMEOUT: u32 = 1 << 9;
    /// `IBV_QP_RETRY_CNT`.
    pub const RETRY_CNT: u32 = 1 << 10;
    /// `IBV_QP_RNR_RETRY`.
    pub const RNR_RETRY: u32 = 1 << 11;
    /// `IBV_QP_RQ_PSN`.
    pub const RQ_PSN: u32 = 1 << 12;
    /// `IBV_QP_MAX_QP_RD_ATOMIC`.
    pub const MAX_QP_RD_ATOMIC: u32 = 1 << 13;
    /// `IBV_QP_ALT_PATH`.
    pub const ALT_PATH: u32 = 1 << 14;
    /// `IBV_QP_MIN_RNR_TIMER`.
    pub const MIN_RNR_TIMER: u32 = 1 << 15;
    /// `IBV_QP_SQ_PSN`.
    pub const SQ_PSN: u32 = 1 << 16;
    /// `IBV_QP_MAX_DEST_RD_ATOMIC`.
    pub const MAX_DEST_RD_ATOMIC: u32 = 1 << 17;
    /// `IBV_QP_PATH_MIG_STATE`.
    pub const PATH_MIG_STATE: u32 = 1 << 18;
    /// `IBV_QP_CAP`.
    pub const CAP: u32 = 1 << 19;
    /// `IBV_QP_DEST_QPN`.
    pub const DEST_QPN: u32 = 1 << 20;
    /// `IBV_QP_RATE_LIMIT`.
    pub const RATE_LIMIT: u32 = 1 << 25;

    /// Every bit with its name (without the `IBV_QP_` prefix).
    pub const NAMES: [(u32, &str); 22] = [
        (STATE, "STATE"),
        (CUR_STATE, "CUR_STATE"),
        (EN_SQD_ASYNC_NOTIFY, "EN_SQD_ASYNC_NOTIFY"),
        (ACCESS_FLAGS, "ACCESS_FLAGS"),
        (PKEY_INDEX, "PKEY_INDEX"),
        (PORT, "PORT"),
        (QKEY, "QKEY"),
        (AV, "AV"),
        (PATH_MTU, "PATH_MTU"),
        (TIMEOUT, "TIMEOUT"),
        (RETRY_CNT, "RETRY_CNT"),
        (RNR_RETRY, "RNR_RETRY"),
        (RQ_PSN, "RQ_PSN"),
        (MAX_QP_RD_ATOMIC, "MAX_QP_RD_ATOMIC"),
        (ALT_PATH, "ALT_PATH"),
        (MIN_RNR_TIMER, "MIN_RNR_TIMER"),
        (SQ_PSN, "SQ_PSN"),
        (MAX_DEST_RD_ATOMIC, "MAX_DEST_RD_ATOMIC"),
        (PATH_MIG_STATE, "PATH_MIG_STATE"),
        (CAP, "CAP"),
        (DEST_QPN, "DEST_QPN"),
        (RATE_LIMIT, "RATE_LIMIT"),
    ];

    /// `mask` in words: "IBV_QP_AV|IBV_QP_DEST_QPN", unnamed bits in hex at the end.
    pub fn names(mask: u32) -> String {
        let mut v: Vec<String> = NAMES
            .iter()
            .filter(|(b, _)| mask & b != 0)
            .map(|(_, n)| format!("IBV_QP_{n}"))
            .collect();
        let unknown = mask & !NAMES.iter().fold(0, |a, (b, _)| a | b);
        if unknown != 0 {
            v.push(format!("{unknown:#x}"));
        }
        v.join("|")
    }
}

/// The attributes a transition must have and the ones it may have (`IBV_QP_STATE` aside, which every request
/// to another state carries).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rule {
    /// Attributes the step needs.
    pub required: u32,
    /// Attributes the step takes besides the required ones.
    pub optional: u32,
}

/// The rule for `from -> to` on an RC QP, or `None` when verbs has no such transition or it involves a drain
/// state (SQD, SQE), which MRC QPs do not have.
pub const fn rule(from: State, to: State) -> Option<Rule> {
    use State::*;
    use attr::*;
    let (required, optional) = match (from, to) {
        (_, Reset) => (0, 0),
        (Reset, Err) => return None,
        (_, Err) => (0, 0),
        (Reset, Init) => (PKEY_INDEX | PORT | ACCESS_FLAGS, 0),
        (Init, Init) => (0, PKEY_INDEX | PORT | ACCESS_FLAGS),
        (Init, Rtr) => (
            AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER,
            ALT_PATH | ACCESS_FLAGS | PKEY_INDEX,
        ),
        (Rtr, Rts) => (
            SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC,
            CUR_STATE | ALT_PATH | ACCESS_FLAGS | MIN_RNR_TIMER | PATH_MIG_STATE,
        ),
        (Rts, Rts) => (
            0,
            CUR_STATE | ACCESS_FLAGS | ALT_PATH | PATH_MIG_STATE | MIN_RNR_TIMER,
        ),
        _ => return None,
    };
    Some(Rule { required, optional })
}

/// One modify request: what its mask sets and what its attribute's two state fields say.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Request {
    /// The `ibv_qp_attr_mask`.
    pub mask: u32,
    /// `qp_state`, read when `mask` has [`attr::STATE`].
    pub qp_state: u32,
    /// `cur_qp_state`, read when `mask` has [`attr::CUR_STATE`].
    pub cur_qp_state: u32,
}

/// Why a modify request breaks the state machine.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refusal {
    /// Not a transition, a missing or an extra attribute, a wrong `cur_qp_state` (`EINVAL`, as verbs).
    Invalid(String),
    /// The step names a state MRC QPs do not have (`EOPNOTSUPP`).
    Unsupported(&'static str),
}

impl Refusal {
    /// The errno a verbs or C API returns (positive).
    pub fn errno(&self) -> i32 {
        match self {
            Refusal::Invalid(_) => libc::EINVAL,
            Refusal::Unsupported(_) => libc::EOPNOTSUPP,
        }
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::Invalid(why) => f.write_str(why),
            Refusal::Unsupported(why) => f.write_str(why),
        }
    }
}

impl std::error::Error for Refusal {}

/// Checks one modify request against a QP in state `cur` (a verbs value); returns the state it moves to.
///
/// `not_required` lists attributes a front end's API does not require even where verbs does (libmrc's OCP API
/// takes over the port and the timers, so its programs leave them out); they stay allowed where verbs takes
/// them. The verbs shim passes 0.
pub fn check(cur: u32, req: Request, not_required: u32) -> Result<State, Refusal> {
    if req.mask & attr::CUR_STATE != 0 && req.cur_qp_state != cur {
        return Err(Refusal::Invalid(format!(
            "cur_qp_state says {} but the QP is in {}",
            state_name(req.cur_qp_state),
            state_name(cur)
        )));
    }
    let to_raw = if req.mask & attr::STATE != 0 {
        req.qp_state
    } else {
        cur
    };
    let step = || format!("{} -> {}", state_name(cur), state_name(to_raw));
    let (Some(from), Some(to)) = (State::from_verbs(cur), State::from_verbs(to_raw)) else {
        return Err(Refusal::Invalid(format!(
            "{} is not a valid transition",
            step()
        )));
    };
    if matches!(to, State::Sqd | State::Sqe) || matches!(from, State::Sqd | State::Sqe) {
        return Err(Refusal::Unsupported(
            "the SQD/SQE states (send queue drain) are not supported",
        ));
    }
    let Some(rule) = rule(from, to) else {
        return Err(Refusal::Invalid(format!(
            "{} is not a valid transition",
            step()
        )));
    };
    let required = rule.required & !not_required;
    if req.mask & required != required {
        return Err(Refusal::Invalid(format!(
            "{} needs {}",
            step(),
            attr::names(required & !req.mask)
        )));
    }
    let extra = req.mask & !(rule.required | rule.optional | attr::STATE);
    if extra != 0 {
        return Err(Refusal::Invalid(format!(
            "{} does not take {}",
            step(),
            attr::names(extra)
        )));
    }
    Ok(to)
}

#[cfg(test)]
mod tests {
    use super::attr::*;
    use super::*;

    const RTR: u32 = AV | PATH_MTU | DEST_QPN | RQ_PSN | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER;
    const RTS: u32 = SQ_PSN | TIMEOUT | RETRY_CNT | RNR_RETRY | MAX_QP_RD_ATOMIC;

    fn to(st: State, mask: u32) -> Request {
        Request {
            mask: STATE | mask,
            qp_state: st.to_verbs(),
            cur_qp_state: 0,
        }
    }

    #[test]
    fn a_qp_walks_reset_init_rtr_rts_with_the_kernel_masks() {
        let init = PKEY_INDEX | PORT | ACCESS_FLAGS;
        assert_eq!(check(0, to(State::Init, init), 0), Ok(State::Init));
        assert_eq!(check(1, to(State::Init, ACCESS_FLAGS), 0), Ok(State::Init));
        assert_eq!(check(1, to(State::Rtr, RTR), 0), Ok(State::Rtr));
        assert_eq!(check(2, to(State::Rts, RTS), 0), Ok(State::Rts));
        assert_eq!(check(3, to(State::Rts, MIN_RNR_TIMER), 0), Ok(State::Rts));
        // No STATE bit: a modify of the current state.
        let same = Request {
            mask: ACCESS_FLAGS,
            qp_state: 0,
            cur_qp_state: 0,
        };
        assert_eq!(check(3, same, 0), Ok(State::Rts));
        for from in [State::Init, State::Rtr, State::Rts, State::Err] {
            assert_eq!(check(from.to_verbs(), to(State::Err, 0), 0), Ok(State::Err));
            assert_eq!(
                check(from.to_verbs(), to(State::Reset, 0), 0),
                Ok(State::Reset)
            );
        }
    }

    #[test]
    fn each_required_attribute_is_named_when_missing() {
        for (from, st, mask) in [
            (State::Reset, State::Init, PKEY_INDEX | PORT | ACCESS_FLAGS),
            (State::Init, State::Rtr, RTR),
            (State::Rtr, State::Rts, RTS),
        ] {
            for (bit, name) in NAMES.iter().filter(|(b, _)| mask & b != 0) {
                let e = check(from.to_verbs(), to(st, mask & !bit), 0).unwrap_err();
                assert_eq!(e.errno(), libc::EINVAL);
                let want = format!("{} -> {} needs IBV_QP_{name}", from.name(), st.name());
                assert_eq!(e.to_string(), want);
            }
        }
    }

    #[test]
    fn attributes_a_step_does_not_take_are_refused() {
        let e = check(1, to(State::Rtr, RTR | SQ_PSN), 0).unwrap_err();
        assert_eq!(
            e,
            Refusal::Invalid("INIT -> RTR does not take IBV_QP_SQ_PSN".into())
        );
        // Verbs' RTS timers are RTR -> RTS attributes, not RTS -> RTS ones.
        assert!(check(3, to(State::Rts, TIMEOUT), 0).is_err());
        // CUR_STATE is taken only where the kernel takes it.
        let cur = Request {
            cur_qp_state: 0,
            ..to(State::Init, PKEY_INDEX | PORT | ACCESS_FLAGS | CUR_STATE)
        };
        assert!(
            check(0, cur, 0)
                .unwrap_err()
                .to_string()
                .contains("CUR_STATE")
        );
        let e = check(1, to(State::Init, 1 << 30), 0).unwrap_err();
        assert!(e.to_string().ends_with("does not take 0x40000000"), "{e}");
    }

    #[test]
    fn steps_verbs_lacks_are_invalid_and_drain_states_unsupported() {
        for (from, st) in [
            (State::Reset, State::Rtr),
            (State::Reset, State::Rts),
            (State::Reset, State::Err),
            (State::Init, State::Rts),
            (State::Rtr, State::Rtr),
            (State::Rtr, State::Init),
            (State::Rts, State::Init),
            (State::Err, State::Init),
        ] {
            let e = check(from.to_verbs(), to(st, 0), 0).unwrap_err();
            assert_eq!(
                e.to_string(),
                format!("{} -> {} is not a valid transition", from.name(), st.name())
            );
            assert_eq!(rule(from, st), None);
        }
        let e = check(
            0,
            Request {
                qp_state: 9,
                ..to(State::Init, 0)
            },
            0,
        )
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "RESET -> an unknown state is not a valid transition"
        );
        for (from, st) in [
            (State::Rts, State::Sqd),
            (State::Sqd, State::Rts),
            (State::Rts, State::Sqe),
        ] {
            assert_eq!(
                check(from.to_verbs(), to(st, 0), 0).unwrap_err().errno(),
                libc::EOPNOTSUPP
            );
        }
    }

    #[test]
    fn a_wrong_cur_qp_state_is_named() {
        let r = Request {
            cur_qp_state: State::Rts.to_verbs(),
            ..to(State::Rts, RTS | CUR_STATE)
        };
        let e = check(State::Rtr.to_verbs(), r, 0).unwrap_err();
        assert_eq!(e.to_string(), "cur_qp_state says RTS but the QP is in RTR");
        let ok = Request {
            cur_qp_state: State::Rtr.to_verbs(),
            ..r
        };
        assert_eq!(check(State::Rtr.to_verbs(), ok, 0), Ok(State::Rts));
    }

    /// libmrc's OCP programs leave out the port, the RD-atomic depths and the timers; still allowed, not needed.
    #[test]
    fn not_required_attributes_may_be_left_out_but_stay_allowed() {
        let ocp = PKEY_INDEX | PORT | ACCESS_FLAGS | MAX_DEST_RD_ATOMIC | MIN_RNR_TIMER | RTS;
        let ocp = ocp & !SQ_PSN;
        assert_eq!(check(0, to(State::Init, 0), ocp), Ok(State::Init));
        assert_eq!(
            check(1, to(State::Rtr, AV | PATH_MTU | DEST_QPN | RQ_PSN), ocp),
            Ok(State::Rtr)
        );
        assert_eq!(
            check(2, to(State::Rts, SQ_PSN | TIMEOUT), ocp),
            Ok(State::Rts)
        );
        assert!(
            check(2, to(State::Rts, 0), ocp)
                .unwrap_err()
                .to_string()
                .contains("IBV_QP_SQ_PSN")
        );
        // Leniency on what is required does not make an attribute allowed where verbs refuses it.
        assert!(check(0, to(State::Init, TIMEOUT), ocp).is_err());
    }

    #[test]
    fn names_cover_every_bit_and_say_unknown_ones_in_hex() {
        assert_eq!(names(AV | DEST_QPN), "IBV_QP_AV|IBV_QP_DEST_QPN");
        assert_eq!(names(STATE | (1 << 30)), "IBV_QP_STATE|0x40000000");
        assert_eq!(NAMES.iter().fold(0, |a, (b, _)| a | b).count_ones(), 22);
        for v in 0..7 {
            assert_eq!(State::from_verbs(v).map(State::to_verbs), Some(v));
        }
        assert_eq!(state_name(7), "an unknown state");
    }
}
