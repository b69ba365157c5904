//! One line per event on stderr, with the library's prefix, filtered by the library's environment variable
//! (`off`, `error`, `warn` (default), `info`, `debug`, `trace`). Writing never panics: a closed stderr is
//! ignored.

use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// Severity, most severe first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

/// One library's log: its line prefix, the variable that sets its level, and the level once read.
#[derive(Debug)]
pub struct Log {
    prefix: &'static str,
    env: &'static str,
    level: OnceLock<u8>,
    /// Keys of the messages [`first`](Self::first) has let through.
    said: Mutex<Vec<&'static str>>,
}

impl Log {
    /// A log whose lines start with `prefix:` and whose level `env` sets (read at the first message).
    pub const fn new(prefix: &'static str, env: &'static str) -> Self {
        Self {
            prefix,
            env,
            level: OnceLock::new(),
            said: Mutex::new(Vec::new()),
        }
    }

    /// `true` the first time `key` is asked for, `false` after: for a message a process should see once (a
    /// value that is accepted and ignored on every call).
    pub fn first(&self, key: &'static str) -> bool {
        let mut said = self
            .said
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if said.contains(&key) {
            return false;
        }
        said.push(key);
        true
    }

    /// The variable that sets the level.
    pub fn env(&self) -> &'static str {
        self.env
    }

    /// The level a value of the variable names; an unknown value is an error that names the variable.
    pub fn parse(&self, v: Option<&str>) -> Result<u8, String> {
        Ok(match v.map(str::trim) {
            None | Some("") => Level::Warn as u8,
            Some("off") | Some("0") => 0,
            Some("error") => Level::Error as u8,
            Some("warn") => Level::Warn as u8,
            Some("info") => Level::Info as u8,
            Some("debug") => Level::Debug as u8,
            Some("trace") => Level::Trace as u8,
            Some(other) => {
                return Err(format!(
                    "{}={other:?} is not a level; use off, error, warn, info, debug or trace",
                    self.env
                ));
            }
        })
    }

    fn level(&self) -> u8 {
        *self.level.get_or_init(|| {
            let raw = std::env::var(self.env).ok();
            self.parse(raw.as_deref()).unwrap_or_else(|e| {
                self.write(format_args!("{e}; using warn"));
                Level::Warn as u8
            })
        })
    }

    /// Whether messages at `l` are shown.
    pub fn enabled(&self, l: Level) -> bool {
        l as u8 <= self.level()
    }

    /// Writes one line, whatever the level.
    pub fn write(&self, args: std::fmt::Arguments<'_>) {
        let line = format!("{}: {args}\n", self.prefix);
        let _ = std::io::stderr().lock().write_all(line.as_bytes());
    }
}

/// `mrc_ffi::log!(&LOG, Warn, "...", args)`: one line in `LOG` if its level shows `Warn`. Each front end wraps it
/// in its own `log!` that names its log.
#[macro_export]
macro_rules! log {
    ($log:expr, $lvl:ident, $($arg:tt)*) => {{
        let log: &$crate::log::Log = $log;
        if log.enabled($crate::log::Level::$lvl) {
            log.write(format_args!($($arg)*));
        }
    }};
}

/// `mrc_ffi::log_once!(&LOG, "key", Warn, "...", args)`: as [`log!`], for the first message with this key only.
#[macro_export]
macro_rules! log_once {
    ($log:expr, $key:expr, $lvl:ident, $($arg:tt)*) => {{
        let log: &$crate::log::Log = $log;
        if log.enabled($crate::log::Level::$lvl) && log.first($key) {
            log.write(format_args!($($arg)*));
        }
    }};
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_parse_and_bad_values_name_the_variable() {
        let log = Log::new("test", "MRC_TEST_LOG");
        assert_eq!(log.parse(None), Ok(Level::Warn as u8));
        assert_eq!(log.parse(Some("off")), Ok(0));
        assert_eq!(log.parse(Some(" debug ")), Ok(Level::Debug as u8));
        assert_eq!(log.parse(Some("trace")), Ok(Level::Trace as u8));
        let e = log.parse(Some("loud")).unwrap_err();
        assert!(e.contains("MRC_TEST_LOG") && e.contains("warn"), "{e}");
    }

    #[test]
    fn first_is_true_once_per_key() {
        let log = Log::new("test", "MRC_TEST_LOG");
        assert!(log.first("a"));
        assert!(!log.first("a"));
        assert!(log.first("b"));
    }
}
