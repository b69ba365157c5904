//! One line per event on stderr, prefixed `libmrc:`, filtered by `MRC_CAPI_LOG` (`off`, `error`, `warn`
//! (default), `info`, `debug`).
//!
//! libmrc lives inside someone else's process, so it never installs a global logger; it writes straight to
//! stderr and never panics doing so.

use std::io::Write;
use std::sync::OnceLock;

/// Severity, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Level {
    #[allow(dead_code, reason = "accepted in MRC_CAPI_LOG")]
    Error = 1,
    Warn = 2,
    Info = 3,
    #[allow(dead_code, reason = "accepted in MRC_CAPI_LOG")]
    Debug = 4,
}

/// The environment variable that sets the level.
pub(crate) const LOG_ENV: &str = "MRC_CAPI_LOG";

static LEVEL: OnceLock<u8> = OnceLock::new();

fn parse(v: Option<&str>) -> Result<u8, String> {
    Ok(match v.map(str::trim) {
        None | Some("") => Level::Warn as u8,
        Some("off") | Some("0") => 0,
        Some("error") => Level::Error as u8,
        Some("warn") => Level::Warn as u8,
        Some("info") => Level::Info as u8,
        Some("debug") => Level::Debug as u8,
        Some(other) => {
            return Err(format!(
                "{LOG_ENV}={other:?} is not a level; use off, error, warn, info or debug"
            ));
        }
    })
}

fn level() -> u8 {
    *LEVEL.get_or_init(|| {
        let raw = std::env::var(LOG_ENV).ok();
        parse(raw.as_deref()).unwrap_or_else(|e| {
            write(format_args!("{e}; using warn"));
            Level::Warn as u8
        })
    })
}

/// Whether messages at `l` are shown.
pub(crate) fn enabled(l: Level) -> bool {
    l as u8 <= level()
}

/// Writes one line, ignoring a closed stderr.
pub(crate) fn write(args: std::fmt::Arguments<'_>) {
    let line = format!("libmrc: {args}\n");
    let _ = std::io::stderr().lock().write_all(line.as_bytes());
}

/// `log!(Warn, "...", args)`: one line if the level is enabled.
macro_rules! log {
    ($lvl:ident, $($arg:tt)*) => {
        if $crate::log::enabled($crate::log::Level::$lvl) {
            $crate::log::write(format_args!($($arg)*));
        }
    };
}
pub(crate) use log;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_bad_values_name_the_variable() {
        assert_eq!(parse(None), Ok(Level::Warn as u8));
        assert_eq!(parse(Some("off")), Ok(0));
        assert_eq!(parse(Some("debug")), Ok(Level::Debug as u8));
        let e = parse(Some("loud")).unwrap_err();
        assert!(e.contains(LOG_ENV) && e.contains("warn"), "{e}");
    }
}
