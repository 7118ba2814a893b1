//! Logging from a guest: through the host's `log` import inside wasm, to stderr natively (so
//! that transformer logic can be unit-tested and benchmarked as a plain Rust library).

/// Severity of a log line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Level {
    Trace,
    Debug,
    Info,
    Warn,
    Error,
}

/// Sends one log line to the host, attributed to this guest.
pub fn log(level: Level, message: &str) {
    #[cfg(target_arch = "wasm32")]
    {
        use crate::transformer::bindings::wasmon::collector::{host, types};
        let level = match level {
            Level::Trace => types::Level::Trace,
            Level::Debug => types::Level::Debug,
            Level::Info => types::Level::Info,
            Level::Warn => types::Level::Warn,
            Level::Error => types::Level::Error,
        };
        host::log(level, message);
    }
    #[cfg(not(target_arch = "wasm32"))]
    {
        if level as u8 >= Level::Warn as u8 {
            eprintln!("{level:?}: {message}");
        }
    }
}

/// `warn!("...", args)`: a warning to the host's log.
#[macro_export]
macro_rules! warn {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Warn, &format!($($arg)*)) };
}

/// `info!("...", args)`.
#[macro_export]
macro_rules! info {
    ($($arg:tt)*) => { $crate::log::log($crate::log::Level::Info, &format!($($arg)*)) };
}
