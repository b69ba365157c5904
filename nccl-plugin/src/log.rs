//! Logging through NCCL's logger (the function `init` hands over), so plugin lines obey `NCCL_DEBUG` and
//! `NCCL_DEBUG_SUBSYS` and land where NCCL's own do. Before `init`, or when NCCL passed no logger, warnings go
//! to stderr and the rest is dropped.

use std::ffi::{CString, c_int, c_ulong};
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::abi::{level, ncclDebugLogger_t};

/// The logger as an address (0: none); NCCL passes the same function at every `init`.
static LOGGER: AtomicUsize = AtomicUsize::new(0);

/// Remembers NCCL's logger.
pub(crate) fn set_logger(log: ncclDebugLogger_t) {
    if let Some(f) = log {
        LOGGER.store(f as usize, Ordering::Release);
    }
}

fn logger() -> ncclDebugLogger_t {
    let a = LOGGER.load(Ordering::Acquire);
    if a == 0 {
        return None;
    }
    // SAFETY: a non-zero value was stored by `set_logger` from a function pointer of exactly this type.
    Some(unsafe {
        std::mem::transmute::<
            usize,
            unsafe extern "C" fn(
                c_int,
                c_ulong,
                *const std::ffi::c_char,
                c_int,
                *const std::ffi::c_char,
                ...
            ),
        >(a)
    })
}

/// Emits one line (`NET/MRC : …`) at `lvl` under subsystem bits `sys`; `file` ends with a NUL.
pub(crate) fn emit(
    lvl: c_int,
    sys: c_ulong,
    file: &'static str,
    line: u32,
    args: std::fmt::Arguments<'_>,
) {
    let msg = format!("NET/MRC : {args}");
    match logger() {
        Some(f) => {
            let c = CString::new(msg.replace('\0', " ")).expect("NULs replaced");
            // SAFETY: NCCL's logger is a printf-style function; "%s" with one NUL-terminated string matches the
            // format, and `file` ends with the NUL `concat!` put there.
            unsafe {
                f(
                    lvl,
                    sys,
                    file.as_ptr().cast(),
                    line as c_int,
                    c"%s".as_ptr(),
                    c.as_ptr(),
                )
            };
        }
        None if lvl == level::WARN => eprintln!("{msg}"),
        None => {}
    }
}

/// `warning!("…")`: a warning under `NCCL_NET`.
macro_rules! warning {
    ($($arg:tt)*) => {
        $crate::log::emit(
            $crate::abi::level::WARN,
            $crate::abi::subsys::NET,
            concat!(file!(), "\0"),
            line!(),
            format_args!($($arg)*),
        )
    };
}

/// `info!(SUBSYS, "…")`: an informational line under `NCCL_INIT` or `NCCL_NET`.
macro_rules! info {
    ($sys:ident, $($arg:tt)*) => {
        $crate::log::emit(
            $crate::abi::level::INFO,
            $crate::abi::subsys::$sys,
            concat!(file!(), "\0"),
            line!(),
            format_args!($($arg)*),
        )
    };
}

pub(crate) use {info, warning};
