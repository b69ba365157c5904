//! The logger the harness hands to `init` (NCCL's `ncclDebugLogger_t`): lines are kept for the tests to
//! inspect and echoed to stderr when `MRC_HARNESS_LOG=1`.

use std::ffi::{CStr, c_char, c_int, c_ulong};
use std::sync::Mutex;

/// One logged line: NCCL level (2 warn, 3 info) and text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Line {
    pub level: c_int,
    pub flags: c_ulong,
    pub text: String,
}

static LINES: Mutex<Vec<Line>> = Mutex::new(Vec::new());

unsafe extern "C" {
    /// `c/logger.c`: formats and calls [`mrc_harness_log_sink`].
    fn mrc_harness_logger(
        level: c_int,
        flags: c_ulong,
        file: *const c_char,
        line: c_int,
        fmt: *const c_char,
        ...
    );
}

/// The logger to pass to `init`.
pub fn logger() -> unsafe extern "C" fn(c_int, c_ulong, *const c_char, c_int, *const c_char, ...) {
    mrc_harness_logger
}

/// Called by `c/logger.c` with the formatted line.
///
/// # Safety
/// `msg` is a NUL-terminated string.
#[unsafe(no_mangle)]
pub unsafe extern "C" fn mrc_harness_log_sink(
    level: c_int,
    flags: c_ulong,
    _file: *const c_char,
    _line: c_int,
    msg: *const c_char,
) {
    if msg.is_null() {
        return;
    }
    // SAFETY: per the contract.
    let text = unsafe { CStr::from_ptr(msg) }
        .to_string_lossy()
        .into_owned();
    if std::env::var_os("MRC_HARNESS_LOG").is_some_and(|v| v == "1") {
        eprintln!("[plugin level {level}] {text}");
    }
    LINES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(Line { level, flags, text });
}

/// Every line logged so far.
pub fn lines() -> Vec<Line> {
    LINES
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}
