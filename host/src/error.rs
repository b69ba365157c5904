//! [`HostError`]: every failure of the host layer, with the errno a C front end returns for it.

use std::io;

use mrc::qp::ModifyError;
use mrc::{ConfigError, PostError, QpState};

use crate::bootstrap::DecodeError;

/// Why a host call failed. [`errno`](Self::errno) gives the code a verbs or C API returns; `Display` names the
/// cause in words for the log line.
#[derive(Debug)]
#[non_exhaustive]
pub enum HostError {
    /// The configuration (node file, profile, sizes) is wrong.
    Config(ConfigError),
    /// A socket or system call failed.
    Io(io::Error),
    /// An argument is out of range or names nothing (`EINVAL`).
    Invalid(String),
    /// The QP's state does not allow this (`EINVAL`, as verbs).
    BadState(QpState),
    /// A queue or table is full (`ENOMEM`): try again after completions.
    Full(&'static str),
    /// No such object (`ENOENT`): a destroyed QP, CQ or registration.
    NoSuchObject(&'static str),
    /// The engine refused a work request or a transition.
    Post(PostError),
    /// The engine refused a state transition.
    Modify(ModifyError),
    /// A blob or bootstrap datagram did not decode (`EPROTO`).
    Decode(DecodeError),
    /// The peer answered that no such listener exists (`ECONNREFUSED`).
    Refused,
    /// The peer did not answer in time (`ETIMEDOUT`).
    Timeout(String),
    /// The operation needs an extension this host or the peer lacks (`EOPNOTSUPP`).
    Unsupported(&'static str),
    /// The progress thread stopped on an error (`EIO`).
    Stopped,
    /// The object is in use in a way that forbids this (`EBUSY`): e.g. denying the last EV a live QP has.
    Busy(&'static str),
}

impl HostError {
    /// The errno a C API returns for this error (positive).
    pub fn errno(&self) -> i32 {
        match self {
            HostError::Config(_) | HostError::Invalid(_) | HostError::BadState(_) => libc::EINVAL,
            HostError::Io(e) => e.raw_os_error().unwrap_or(libc::EIO),
            HostError::Full(_) => libc::ENOMEM,
            HostError::NoSuchObject(_) => libc::ENOENT,
            HostError::Post(p) => match p {
                PostError::QueueFull | PostError::WimmCap => libc::ENOMEM,
                PostError::Unsupported => libc::EOPNOTSUPP,
                PostError::NoSuchQp => libc::ENOENT,
                _ => libc::EINVAL,
            },
            HostError::Modify(m) => match m {
                ModifyError::NoSuchQp => libc::ENOENT,
                _ => libc::EINVAL,
            },
            HostError::Decode(_) => libc::EPROTO,
            HostError::Refused => libc::ECONNREFUSED,
            HostError::Timeout(_) => libc::ETIMEDOUT,
            HostError::Unsupported(_) => libc::EOPNOTSUPP,
            HostError::Stopped => libc::EIO,
            HostError::Busy(_) => libc::EBUSY,
        }
    }
}

impl std::fmt::Display for HostError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            HostError::Config(e) => write!(f, "configuration: {e}"),
            HostError::Io(e) => write!(f, "system call: {e}"),
            HostError::Invalid(s) => write!(f, "invalid argument: {s}"),
            HostError::BadState(s) => {
                write!(f, "the QP is in state {s:?}, which does not allow this")
            }
            HostError::Full(what) => write!(f, "{what} is full; retry after completions"),
            HostError::NoSuchObject(what) => write!(f, "no such {what}"),
            HostError::Post(e) => write!(f, "work request refused: {e}"),
            HostError::Modify(e) => write!(f, "state transition refused: {e}"),
            HostError::Decode(e) => write!(f, "{e}"),
            HostError::Refused => write!(f, "the peer has no such listener (connection refused)"),
            HostError::Timeout(what) => write!(f, "the peer did not answer in time: {what}"),
            HostError::Unsupported(what) => write!(f, "not supported: {what}"),
            HostError::Stopped => write!(f, "the progress thread stopped on a socket error"),
            HostError::Busy(why) => write!(f, "busy: {why}"),
        }
    }
}

impl std::error::Error for HostError {}

impl From<ConfigError> for HostError {
    fn from(e: ConfigError) -> Self {
        HostError::Config(e)
    }
}

impl From<io::Error> for HostError {
    fn from(e: io::Error) -> Self {
        HostError::Io(e)
    }
}

impl From<PostError> for HostError {
    fn from(e: PostError) -> Self {
        HostError::Post(e)
    }
}

impl From<ModifyError> for HostError {
    fn from(e: ModifyError) -> Self {
        HostError::Modify(e)
    }
}

impl From<DecodeError> for HostError {
    fn from(e: DecodeError) -> Self {
        HostError::Decode(e)
    }
}

impl From<crate::driver::StartError> for HostError {
    fn from(e: crate::driver::StartError) -> Self {
        match e {
            crate::driver::StartError::Config(c) => HostError::Config(c),
            crate::driver::StartError::Io(i) => HostError::Io(i),
        }
    }
}
