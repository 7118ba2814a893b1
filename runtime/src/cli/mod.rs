//! The command line: `wasmon run`, `wasmon transform`, `wasmon config`. Each subcommand is a
//! thin shell over the library; errors reach the user with their context chain.

use std::io::{BufRead, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clap::{Parser, Subcommand};

use crate::config::Config;

pub mod fabric;
pub mod fleet;
pub mod guest;
pub mod notify;
pub mod ns;
pub mod pmda;
use crate::host::{CallError, GuestConfig, Image, Runtime, TransformerWorld};
use crate::sample::{Line, Sample, parse_line, to_line};

#[derive(Parser, Debug)]
#[command(
    name = "wasmon",
    version,
    about = "A metrics collector whose plug-ins run as WebAssembly components"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
    /// Log lines as `text` or `json` (overrides `[log] format`).
    #[arg(long, global = true, value_enum)]
    pub log_format: Option<crate::logging::LogFormat>,
}

#[derive(Subcommand, Debug)]
pub enum Command {
    /// Run the daemon (on the embedded default config unless --config is given).
    Run {
        /// Configuration file (TOML); `wasmon config default` prints a starting point.
        #[arg(long)]
        config: Option<PathBuf>,
        /// HTTP listen address (overrides daemon.listen).
        #[arg(long)]
        listen: Option<SocketAddr>,
        /// State directory (overrides daemon.data-dir).
        #[arg(long)]
        data_dir: Option<PathBuf>,
    },
    /// Run one transformer guest over samples read as JSON lines from stdin; the output goes to
    /// stdout as JSON lines. `{"flush": true}` flushes; so does the end of input.
    Transform {
        /// A bundled guest's name, or a path to a .wasm component.
        #[arg(long)]
        guest: String,
        /// The guest's parameters: a YAML or JSON file.
        #[arg(long)]
        params: Option<PathBuf>,
        /// Deadline per call: wall time from the call's start to its return.
        #[arg(long, value_parser = crate::duration::parse, default_value = "100ms")]
        deadline: Duration,
        /// Memory cap of the guest.
        #[arg(long, value_parser = crate::util::parse_size, default_value = "64MiB")]
        memory: u64,
    },
    /// The metric namespace: lookup, name, children, traverse (PCP's pminfo habits).
    Ns {
        #[command(subcommand)]
        command: ns::NsCommand,
    },
    /// Fetch metrics (leaves, or everything below a non-leaf name) with their instances.
    Fetch {
        #[arg(required = true)]
        names: Vec<String>,
        #[command(flatten)]
        source: ns::Source,
    },
    /// Serve agents to a real pmcd as a daemon PMDA on stdin/stdout (a pmcd.conf line:
    /// `foo 44 pipe binary /usr/bin/wasmon pmda --pmns foo.pmns --agent 44=foo`).
    Pmda {
        #[command(flatten)]
        source: ns::Source,
    },
    /// Processes and threads, read in one pass over /proc.
    Ps(crate::procfs::PsArgs),
    /// Thresholds and notifications of a running daemon: add, ls, rm, watch.
    Notify(notify::NotifyArgs),
    /// The fabric hierarchy: simulate a fabric, status, owners, merged histograms.
    Fabric(fabric::FabricArgs),
    /// Publish guests to a fleet over NATS JetStream (signed, by group) and see where they run.
    Fleet(fleet::FleetArgs),
    /// Write, build and check guests in Rust, Python, JavaScript or C.
    Guest {
        #[command(subcommand)]
        command: guest::GuestCommand,
    },
    /// Print or check configuration.
    Config {
        #[command(subcommand)]
        command: ConfigCommand,
    },
}

#[derive(Subcommand, Debug)]
pub enum ConfigCommand {
    /// Print the embedded default configuration, documented field by field.
    Default {
        /// A configuration for a role instead: `clustercockpit` (a ClusterCockpit node).
        #[arg(long)]
        profile: Option<String>,
    },
    /// Check a configuration file and report the first problem by field name.
    Check { file: PathBuf },
}

/// Reads a params file: JSON, or YAML (chosen by extension; unknown extensions try both).
pub fn read_params(path: &Path) -> Result<String> {
    let text =
        std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
    let ext = path.extension().and_then(|e| e.to_str()).unwrap_or("");
    let value: serde_json::Value = match ext {
        "json" => serde_json::from_str(&text)
            .with_context(|| format!("{} is not valid JSON", path.display()))?,
        "yaml" | "yml" => serde_yaml::from_str(&text)
            .with_context(|| format!("{} is not valid YAML", path.display()))?,
        _ => serde_json::from_str(&text)
            .or_else(|_| serde_yaml::from_str(&text))
            .with_context(|| format!("{} is neither JSON nor YAML", path.display()))?,
    };
    if !value.is_object() && !value.is_null() {
        bail!(
            "{}: parameters must be a mapping, got {value}",
            path.display()
        );
    }
    Ok(value.to_string())
}

/// A cache of compiled guests for the CLI, under the user's cache directory.
pub(crate) fn cli_cache_dir() -> Option<PathBuf> {
    let base = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    Some(base.join("wasmon").join("components"))
}

/// Lines per guest call when input arrives faster than it is processed.
const CLI_BATCH: usize = 512;

/// `wasmon transform`. Returns whether every input line was accepted.
pub fn transform(
    guest: &str,
    params: Option<&Path>,
    deadline: Duration,
    memory: u64,
) -> Result<bool> {
    let params = match params {
        Some(p) => read_params(p)?,
        None => "{}".to_string(),
    };
    let source = crate::guests::resolve(guest, None, Path::new(""))?;
    let runtime = Runtime::new(cli_cache_dir())?;
    let compiled = runtime.compile(&source.bytes, &source.origin.to_string())?;
    let mut cfg = GuestConfig::new(guest, &params);
    cfg.deadline = deadline;
    cfg.memory = memory;
    let mut instance = Image::<TransformerWorld>::load(&runtime, &compiled, cfg)?;

    // Lines are read on a thread of their own so a batch is handed to the guest as soon as
    // input pauses: interactive use sees output at once, bulk input goes in batches. A line
    // that is not UTF-8 is a bad line like any other, not the end of the input.
    let (tx, rx) = crossbeam_channel::bounded::<(usize, Result<String, String>)>(4 * CLI_BATCH);
    std::thread::spawn(move || {
        let mut stdin = std::io::stdin().lock();
        let mut buf = Vec::new();
        for n in 1.. {
            buf.clear();
            let line = match stdin.read_until(b'\n', &mut buf) {
                Ok(0) => return,
                Ok(_) => String::from_utf8(std::mem::take(&mut buf))
                    .map(|mut l| {
                        if l.ends_with('\n') {
                            l.pop();
                        }
                        l
                    })
                    .map_err(|e| format!("not UTF-8 (byte {})", e.utf8_error().valid_up_to() + 1)),
                Err(e) => Err(format!("reading stdin: {e}")),
            };
            if tx.send((n, line)).is_err() {
                return;
            }
        }
    });
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    let mut all_ok = true;
    let mut batch: Vec<Sample> = Vec::new();
    let mut first_line = 0;
    // Writes a call's output; a failed call is reported and makes the exit status 1.
    let mut emit = |r: Result<Vec<Sample>, CallError>, what: &str, out: &mut dyn Write| {
        match r {
            Ok(samples) => {
                for s in samples {
                    writeln!(out, "{}", to_line(&s))?;
                }
            }
            Err(e) => {
                all_ok = false;
                eprintln!("{what}: the guest failed: {e}");
            }
        }
        out.flush()?;
        anyhow::Ok(())
    };
    let mut bad_lines = false;
    loop {
        let next = if batch.is_empty() {
            rx.recv().ok()
        } else {
            rx.try_recv().ok()
        };
        let Some((n, line)) = next else {
            // Input paused (or ended): hand the guest what has arrived.
            if !batch.is_empty() {
                let r = instance.handle(&batch);
                emit(r, &format!("lines {first_line}-"), &mut out)?;
                batch.clear();
                continue;
            }
            break;
        };
        let line = match line {
            Ok(line) => line,
            Err(e) => {
                bad_lines = true;
                eprintln!("line {n}: {e}");
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let now = chrono::Utc::now().timestamp_nanos_opt().unwrap_or(0);
        match parse_line(&line, now) {
            Ok(Line::Sample(s)) => {
                if batch.is_empty() {
                    first_line = n;
                }
                batch.push(s);
                if batch.len() >= CLI_BATCH {
                    let r = instance.handle(&batch);
                    emit(r, &format!("lines {first_line}-{n}"), &mut out)?;
                    batch.clear();
                }
            }
            Ok(Line::Flush) => {
                if !batch.is_empty() {
                    let r = instance.handle(&batch);
                    emit(r, &format!("lines {first_line}-{n}"), &mut out)?;
                    batch.clear();
                }
                let r = instance.flush();
                emit(r, &format!("line {n} (flush)"), &mut out)?;
            }
            Err(e) => {
                bad_lines = true;
                eprintln!("line {n}: {e}");
            }
        }
    }
    let r = instance.flush();
    emit(r, "end of input (flush)", &mut out)?;
    report_lost_log_lines(guest, &instance.image().stats().log_lines_dropped);
    Ok(all_ok && !bad_lines)
}

/// Says once, at the end, how many of the guest's log lines the per-call cap kept from
/// stderr and why (the daemon counts the same in `/metrics`); silent when none were lost.
fn report_lost_log_lines(guest: &str, dropped: &crate::telemetry::Counter) {
    let lost = dropped.get();
    if lost > 0 {
        eprintln!(
            "{guest}: {lost} log line(s) not shown: one guest call may log at most {} lines \
             (its log, stdout and stderr together); the rest are counted and dropped \
             (wasmon_guest_log_lines_dropped_total in the daemon's /metrics)",
            crate::host::limits::MAX_LOG_LINES_PER_CALL
        );
    }
}

/// `wasmon config check FILE`: what `wasmon run` and a reload would refuse, including the
/// sinks' files (token, TLS), which start and reload read relative to the config's directory.
pub fn config_check(file: &Path) -> Result<()> {
    let c = Config::load(Some(file))?;
    let base = file.parent().unwrap_or(Path::new(""));
    for s in &c.sinks {
        s.check(Some(base))?;
        crate::sink::Transport::build(s, base)?;
        if let Some(g) = &s.guest {
            // The world is read from the component's WIT (no compile): a guest the fleet
            // publishes is checked when a daemon takes it.
            let what = || format!("sink {:?}: guest {g:?}", s.name);
            let src =
                crate::guests::resolve(g, Some(&c.daemon.guests_dir), base).with_context(what)?;
            let report = crate::host::check::inspect(&src.bytes).with_context(what)?;
            if report.world != Some(crate::host::check::WorldKind::Exporter) {
                anyhow::bail!(
                    "{}: {} is not an exporter: {}",
                    what(),
                    src.origin,
                    report
                        .world
                        .map_or("no world of wasmon:collector", |w| w.name())
                );
            }
        }
    }
    println!("{}: ok ({} pipelines)", file.display(), c.pipelines.len());
    Ok(())
}
