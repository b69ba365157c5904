//! libmrc's log: one line per event on stderr, prefixed `libmrc:`, filtered by `MRC_CAPI_LOG` (`off`, `error`,
//! `warn` (default), `info`, `debug`, `trace`); see `mrc_ffi::log`.

pub(crate) static LOG: mrc_ffi::log::Log = mrc_ffi::log::Log::new("libmrc", "MRC_CAPI_LOG");

/// `log_once!("key", Warn, "...", args)`: as `log!`, the first time for this key only.
macro_rules! log_once {
    ($($arg:tt)*) => { mrc_ffi::log_once!(&$crate::log::LOG, $($arg)*) };
}
pub(crate) use log_once;
