//! The daemon's side of `[fleet]`: what the fleet task may ask of it ([`GuestHost`]) — which
//! worlds a guest name is used as, compiling into the daemon's cache, applying the running
//! config again through the ordinary reload path, and the counters of the stages, agents and
//! guest sinks' exporters that run a version — and, at start, sending a refused fleet version
//! back to the one before it. Owns no state: the fleet's is `fleet`'s, the running parts' are
//! the daemon's.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;

use super::Daemon;
use super::outcome::{PipelineOutcome, ReloadOutcome};
use crate::config::Config;
use crate::fleet::{GuestHost, Usage};
use crate::guests::{Origin, Source};
use crate::host::GuestStats;
use crate::host::check::WorldKind;

/// The worlds `config` uses `guest` as: a pipeline stage, an agent, a guest sink's exporter.
fn worlds_using(config: &Config, guest: &str) -> Vec<WorldKind> {
    let stage = config
        .pipelines
        .iter()
        .any(|p| p.transformers.iter().any(|t| t.guest == guest));
    let agent = config
        .agents
        .iter()
        .any(|a| a.guest.as_deref() == Some(guest));
    let exporter = config
        .sinks
        .iter()
        .any(|s| s.guest.as_deref() == Some(guest));
    [
        (stage, WorldKind::Transformer),
        (agent, WorldKind::Agent),
        (exporter, WorldKind::Exporter),
    ]
    .into_iter()
    .filter_map(|(used, w)| used.then_some(w))
    .collect()
}

/// The error of each part that names `guest` and was refused in `outcome`.
fn refusals_of(config: &Config, outcome: &ReloadOutcome, guest: &str) -> Vec<String> {
    let worlds = worlds_using(config, guest);
    let mut out = Vec::new();
    for p in &config.pipelines {
        if !p.transformers.iter().any(|t| t.guest == guest) {
            continue;
        }
        if let Some(PipelineOutcome::Rejected { error }) = outcome.pipelines.get(&p.name) {
            out.push(format!("pipeline {:?}: {error}", p.name));
        }
    }
    if let Some(e) = &outcome.agents_error
        && worlds.contains(&WorldKind::Agent)
    {
        out.push(e.clone());
    }
    // A guest sink's exporter that fails to load refuses the whole reload.
    if let Some(e) = &outcome.config_error
        && worlds.contains(&WorldKind::Exporter)
    {
        out.push(e.clone());
    }
    out
}

/// An image's counters added to `u`: every failed call (trap, deadline, memory, output).
fn add_image_counters(u: &mut Usage, s: &GuestStats) {
    u.calls += s.calls.get();
    u.failures +=
        s.traps.get() + s.deadline_hits.get() + s.memory_refusals.get() + s.output_refusals.get();
    u.quarantines += s.quarantines.get();
}

impl Daemon {
    /// Starts the fleet task (when `[fleet]` is set).
    pub(super) fn spawn_fleet(
        self: &Arc<Self>,
        shutdown: &CancellationToken,
    ) -> Option<tokio::task::JoinHandle<()>> {
        let fleet = self.fleet()?.clone();
        let host: Arc<dyn GuestHost> = self.clone();
        Some(crate::fleet::spawn(fleet, host, shutdown.clone()))
    }

    /// After a refused first apply: fleet versions used by refused parts go back to the
    /// version before them. Returns whether any did.
    pub(super) fn revert_refused_fleet_guests(
        &self,
        config: &Config,
        outcome: &ReloadOutcome,
    ) -> bool {
        let Some(fleet) = self.fleet() else {
            return false;
        };
        let mut names: Vec<&str> = config
            .pipelines
            .iter()
            .flat_map(|p| p.transformers.iter().map(|t| t.guest.as_str()))
            .chain(config.agents.iter().filter_map(|a| a.guest.as_deref()))
            .chain(config.sinks.iter().filter_map(|s| s.guest.as_deref()))
            .collect();
        names.sort();
        names.dedup();
        let mut any = false;
        for guest in names {
            let errors = refusals_of(config, outcome, guest);
            if !errors.is_empty() && fleet.revert_at_start(guest, &errors.join("; ")) {
                any = true;
            }
        }
        any
    }
}

impl GuestHost for Daemon {
    fn uses(&self, guest: &str) -> Vec<WorldKind> {
        worlds_using(&self.config(), guest)
    }

    fn compile(&self, bytes: &[u8], what: &str) -> Result<(), String> {
        let source = Source {
            bytes: bytes.to_vec(),
            origin: Origin::Fleet(what.to_string(), String::new()),
        };
        Daemon::compile(self, &source)
            .map(|_| ())
            .map_err(|e| format!("{e:#}"))
    }

    fn reapply(&self, guest: &str) -> Result<(), String> {
        let _one_at_a_time = self.reload_lock();
        let config = self.config();
        let outcome = self.apply_again(config.clone());
        outcome.log();
        let errors = refusals_of(&config, &outcome, guest);
        if errors.is_empty() {
            Ok(())
        } else {
            Err(errors.join("; "))
        }
    }

    fn usage(&self, guest: &str, hash: Option<&str>) -> Usage {
        let mut u = Usage::default();
        for p in &self.config().pipelines {
            let Some(running) = self.pipeline(&p.name) else {
                continue;
            };
            let stages = running.stages();
            for (i, t) in p.transformers.iter().enumerate() {
                if t.guest != guest {
                    continue;
                }
                if let Some(s) = stages.get(i).filter(|s| hash.is_none_or(|h| s.hash == h)) {
                    u.calls += s.calls;
                    u.failures += s.failures;
                    u.quarantines += s.quarantines;
                    u.quarantined_now |= s.quarantined;
                }
            }
        }
        // Agents: by the counters of their image. Whether one is in quarantine right now is
        // its instance's, behind the agent's lock (a call may hold it up to its deadline), so
        // the quarantine counter alone judges an agent: it moves when the quarantine starts.
        let running = self.agent_usage();
        for a in &self.config().agents {
            if a.guest.as_deref() != Some(guest) {
                continue;
            }
            let domain = super::polls::agent_domain(a);
            let Some((_, _, s)) = running
                .iter()
                .find(|(d, h, _)| *d == domain && hash.is_none_or(|x| x == h))
            else {
                continue;
            };
            add_image_counters(&mut u, s);
        }
        // Guest sinks' exporters: by their image's counters, like agents (the instance is
        // behind the lock its sender holds for a whole call), found by the identity of the
        // exporter each sink runs now.
        for s in &self.config().sinks {
            if s.guest.as_deref() != Some(guest) {
                continue;
            }
            let Some(identity) = self
                .sinks()
                .get(&s.name)
                .and_then(|f| f.exporter_identity())
            else {
                continue;
            };
            let Some((h, st)) = self.exporters.get(&s.name, &identity) else {
                continue;
            };
            if hash.is_some_and(|x| x != h) {
                continue;
            }
            add_image_counters(&mut u, &st);
        }
        u
    }
}
