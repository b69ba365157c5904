//! Errors the engine's calls return, each with the `errno` a C API returns for it.
//!
//! The engine's own modules depend on this one and it on none of them, so that configuration, paths and
//! congestion control can all report a [`ConfigError`] without importing one another.

use core::fmt;

/// A configuration error: which field is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigError {
    /// Dotted path of the offending field, e.g. `qp.ev.per_plane`.
    pub field: &'static str,
    /// What is wrong and what would be accepted.
    pub problem: String,
}

impl ConfigError {
    /// An error for `field`.
    pub fn new(field: &'static str, problem: impl Into<String>) -> Self {
        Self {
            field,
            problem: problem.into(),
        }
    }
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.problem)
    }
}

impl std::error::Error for ConfigError {}
