//! Errors the engine's calls return, each with the `errno` a C API returns for it.
//!
//! The engine's own modules depend on this one and it on none of them, so that configuration, paths and
//! congestion control can all report a [`ConfigError`] without importing one another.

use core::fmt;

/// The Linux `errno` values the engine's errors map to ([`ConfigError::errno`] and the `errno()` of every other
/// error type): what a C API built on the engine returns, as verbs calls do.
pub mod errno {
    /// No such object (a stale or never-issued handle, in lookups that are not verbs calls).
    pub const ENOENT: i32 = 2;
    /// Argument list too long: more scatter/gather elements than the QP allows.
    pub const E2BIG: i32 = 7;
    /// Out of resources: a full work queue, every slot of a table taken (verbs returns it for a full queue).
    pub const ENOMEM: i32 = 12;
    /// Permission denied: a memory region lacks the right the operation needs.
    pub const EACCES: i32 = 13;
    /// Invalid argument: a bad handle, state, transition or configuration value.
    pub const EINVAL: i32 = 22;
    /// Bad address: a range outside its registered region, or one that overflows.
    pub const EFAULT: i32 = 14;
    /// The message is too long.
    pub const EMSGSIZE: i32 = 90;
    /// The operation needs an extension this endpoint or its peer lacks.
    pub const EOPNOTSUPP: i32 = 95;
}

/// A configuration error: which field is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path of the offending field, e.g. `qp.ev.per_plane`.
    pub field: &'static str,
    /// What is wrong and what would be accepted.
    pub problem: String,
    errno: i32,
}

impl ConfigError {
    /// An invalid value for `field` (`EINVAL`).
    pub fn new(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            field,
            problem: problem.into(),
            errno: errno::EINVAL,
        }
    }

    /// A valid request that a limit refuses, e.g. a table that is full (`ENOMEM`).
    pub fn exhausted(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            errno: errno::ENOMEM,
            ..Self::new(field, problem)
        }
    }

    /// The `errno` a C API returns for this error: `EINVAL`, or `ENOMEM` for a limit.
    pub const fn errno(&self) -> i32 {
        self.errno
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}

/// A QP, CQ, PD or region handle that names nothing (never issued, or already destroyed).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NoSuchObject;

impl NoSuchObject {
    /// The `errno` a C API returns: `EINVAL`, as verbs does for a bad handle.
    pub const fn errno(&self) -> i32 {
        errno::EINVAL
    }
}

impl fmt::Display for NoSuchObject {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("no such object")
    }
}

impl std::error::Error for NoSuchObject {}
