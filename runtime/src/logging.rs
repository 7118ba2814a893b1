//! `logging` owns how wasmon logs: `tracing` events to stderr as text or as JSON lines, ANSI
//! colours only when stderr is a terminal, the level from `RUST_LOG`, else `[log] level`,
//! else `info`. It reads no other part's state; `main` calls [`init`] once, before anything
//! logs.

use std::io::IsTerminal;

use serde::Deserialize;
use tracing_subscriber::EnvFilter;

/// How log lines are written.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize, serde::Serialize, clap::ValueEnum,
)]
#[serde(rename_all = "kebab-case")]
pub enum LogFormat {
    /// Human-readable lines (what a terminal and `journalctl` show best).
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `target`, `message` and the event's
    /// fields at the top level), for log shippers.
    Json,
}

/// `[log]`: the daemon's own log (on stderr).
#[derive(Debug, Clone, PartialEq, Deserialize, serde::Serialize)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct LogConfig {
    /// A level (`error`, `warn`, `info`, `debug`, `trace`) or `tracing` filter directives
    /// (`info,wasmon::store=debug`). `RUST_LOG`, when set, takes precedence.
    #[serde(default = "default_level")]
    pub level: String,
    /// `text` or `json`; `wasmon --log-format` takes precedence.
    #[serde(default)]
    pub format: LogFormat,
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: default_level(),
            format: LogFormat::Text,
        }
    }
}

/// Levels a bare `[log] level` may name.
const LEVELS: &[&str] = &["off", "error", "warn", "info", "debug", "trace"];

fn default_level() -> String {
    "info".into()
}

impl LogConfig {
    /// Refuses a level that is not a valid filter, naming it.
    pub fn check(&self) -> Result<(), String> {
        let bad = |why: String| format!("log.level: {:?}: {why}", self.level);
        // `EnvFilter` takes a bare word as a target name ("loud" = everything from a module
        // `loud`): in config a bare word must be a level, targets are written `target=level`.
        for d in self
            .level
            .split(',')
            .map(str::trim)
            .filter(|d| !d.is_empty())
        {
            if !d.contains('=') && !LEVELS.contains(&d.to_ascii_lowercase().as_str()) {
                return Err(bad(format!(
                    "{d:?} is not a level ({}); a target is written target=level",
                    LEVELS.join(", ")
                )));
            }
        }
        EnvFilter::try_new(&self.level)
            .map(|_| ())
            .map_err(|e| bad(e.to_string()))
    }
}

/// Whether log lines may carry ANSI colour codes: only on a terminal, and never with
/// `NO_COLOR` set (<https://no-color.org>). Under systemd, in a pipe or a file: plain text.
pub fn colours() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// The filter: `RUST_LOG` if it is set and valid, else `level`, else `info`.
fn filter(level: &str) -> EnvFilter {
    if let Ok(f) = EnvFilter::try_from_default_env() {
        return f;
    }
    EnvFilter::try_new(level).unwrap_or_else(|_| EnvFilter::new("info"))
}

/// Installs the process's subscriber. Call once, first thing.
pub fn init(format: LogFormat, level: &str) {
    let builder = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(filter(level));
    match format {
        LogFormat::Text => builder.with_ansi(colours()).init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(false)
            .with_ansi(false)
            .init(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn levels_are_checked() {
        let ok = LogConfig {
            level: "warn,wasmon::store=debug".into(),
            ..LogConfig::default()
        };
        assert!(ok.check().is_ok());
        let bad = LogConfig {
            level: "loud".into(),
            ..LogConfig::default()
        };
        let e = bad.check().unwrap_err();
        assert!(e.contains("log.level") && e.contains("loud"), "{e}");
    }
}
