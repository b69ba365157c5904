//! The shim's log: one line per event on stderr, prefixed `mrc-verbs-shim:`, filtered by `MRC_SHIM_LOG`
//! (`off`, `error`, `warn` (default), `info`, `debug`, `trace`); see `mrc_ffi::log`.

pub(crate) static LOG: mrc_ffi::log::Log = mrc_ffi::log::Log::new("mrc-verbs-shim", "MRC_SHIM_LOG");

/// `log!(Warn, "...", args)`: one line if the level is enabled.
macro_rules! log {
    ($($arg:tt)*) => { mrc_ffi::log!(&$crate::log::LOG, $($arg)*) };
}
pub(crate) use log;
