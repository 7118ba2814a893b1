//! What a reload keeps: the config the daemon reports as running after a reload (refused
//! parts keep their running version), and the compiled components kept in memory (those in
//! use and a few recent ones). Pure bookkeeping: it compiles and starts nothing.

use std::collections::HashMap;

use super::outcome::{PipelineOutcome, ReloadOutcome};
use crate::config::Config;
use crate::host::Compiled;

/// What a reload leaves running, as config: `new` where it was applied; for a refused pipeline
/// or refused agents, the running version (or nothing, if there was none); for settings read
/// only at start, the running values (named in `restart_required`).
pub(super) fn effective_config(
    running: &Config,
    new: Config,
    outcome: &mut ReloadOutcome,
) -> Config {
    let mut out = new;
    if outcome.agents_error.is_some() {
        out.agents = running.agents.clone();
        out.namespace = running.namespace.clone();
    }
    for (name, o) in &outcome.pipelines {
        if !matches!(o, PipelineOutcome::Rejected { .. }) {
            continue;
        }
        let old = running.pipelines.iter().find(|p| &p.name == name);
        match (out.pipelines.iter().position(|p| &p.name == name), old) {
            (Some(i), Some(old)) => out.pipelines[i] = old.clone(),
            (Some(i), None) => {
                out.pipelines.remove(i);
            }
            (None, _) => {}
        }
    }
    let mut keep = |what: &str, changed: bool| {
        if changed {
            outcome.restart_required.push(what.to_string());
        }
    };
    keep("[store]", running.store != out.store);
    keep("[api]", running.api != out.api);
    keep("[nats]", running.nats != out.nats);
    keep("[notify]", running.notify != out.notify);
    keep("[procfs]", running.procfs != out.procfs);
    keep("[fabric]", running.fabric != out.fabric);
    keep("[log]", running.log != out.log);
    keep("[fleet]", running.fleet != out.fleet);
    keep("daemon.listen", running.daemon.listen != out.daemon.listen);
    keep(
        "daemon.data-dir",
        running.daemon.data_dir != out.daemon.data_dir,
    );
    keep(
        "daemon.cluster",
        running.daemon.cluster != out.daemon.cluster,
    );
    out.store = running.store.clone();
    out.api = running.api.clone();
    out.nats = running.nats.clone();
    out.notify = running.notify.clone();
    out.procfs = running.procfs.clone();
    out.fabric = running.fabric.clone();
    out.log = running.log.clone();
    out.fleet = running.fleet.clone();
    out.daemon.listen = running.daemon.listen;
    out.daemon.data_dir = running.daemon.data_dir.clone();
    out.daemon.cluster = running.daemon.cluster.clone();
    out
}

/// Compiled components kept in memory: those in use plus the [`KEEP_UNUSED`] used most
/// recently, so that flipping between two versions of a guest does not recompile while a
/// stream of new versions cannot grow the daemon without bound. (The disk cache is pruned by
/// the same rule.)
#[derive(Default)]
pub(super) struct CompiledCache {
    entries: HashMap<String, (Compiled, u64)>,
    clock: u64,
}

/// Unused compiled components kept for a quick way back.
const KEEP_UNUSED: usize = 4;

impl CompiledCache {
    pub(super) fn get(&mut self, hash: &str) -> Option<Compiled> {
        self.clock += 1;
        let e = self.entries.get_mut(hash)?;
        e.1 = self.clock;
        Some(e.0.clone())
    }

    pub(super) fn insert(&mut self, hash: String, c: Compiled) {
        self.clock += 1;
        self.entries.insert(hash, (c, self.clock));
    }

    /// Drops all but the components in `used` and the most recently used others.
    pub(super) fn retain_used(&mut self, used: &[String]) {
        let mut unused: Vec<(u64, String)> = self
            .entries
            .iter()
            .filter(|(h, _)| !used.contains(h))
            .map(|(h, (_, t))| (*t, h.clone()))
            .collect();
        unused.sort_unstable_by(|a, b| b.cmp(a));
        for (_, h) in unused.into_iter().skip(KEEP_UNUSED) {
            self.entries.remove(&h);
        }
    }

    pub(super) fn kept(&self) -> impl Iterator<Item = &String> {
        self.entries.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::Runtime;

    #[test]
    fn the_compiled_cache_keeps_what_is_in_use_and_the_most_recent_others() {
        let rt = Runtime::new(None).unwrap();
        let bytes = std::fs::read(format!("{}/template.wasm", crate::BUILT_GUESTS_DIR)).unwrap();
        let c = rt.compile(&bytes, "template").unwrap();
        let mut cache = CompiledCache::default();
        for i in 0..10 {
            cache.insert(format!("h{i}"), c.clone());
        }
        cache.get("h0");
        cache.retain_used(&["h5".to_string()]);
        let mut kept: Vec<&String> = cache.kept().collect();
        kept.sort();
        // In use: h5. Most recent others: h0 (just read), h9, h8, h7.
        assert_eq!(kept, ["h0", "h5", "h7", "h8", "h9"]);
    }

    #[test]
    fn the_reported_config_is_the_running_one_where_a_reload_was_refused() {
        let running = Config::parse(
            "[[pipeline]]\nname = \"a\"\nflush-interval = \"1s\"\n[[pipeline]]\nname = \"b\"\n",
        )
        .unwrap();
        let new = Config::parse(
            "[daemon]\ncluster = \"other\"\n[[pipeline]]\nname = \"a\"\nflush-interval = \"2s\"\n\
             [[pipeline]]\nname = \"b\"\nflush-interval = \"3s\"\n[[pipeline]]\nname = \"c\"\n",
        )
        .unwrap();
        let mut outcome = ReloadOutcome::default();
        let refused = || PipelineOutcome::Rejected { error: "no".into() };
        outcome.pipelines.insert("a".into(), refused());
        outcome
            .pipelines
            .insert("b".into(), PipelineOutcome::Started);
        outcome.pipelines.insert("c".into(), refused());
        let effective = effective_config(&running, new, &mut outcome);
        let names: Vec<_> = effective
            .pipelines
            .iter()
            .map(|p| p.name.as_str())
            .collect();
        assert_eq!(names, ["a", "b"], "a refused new pipeline is not reported");
        assert_eq!(
            effective.pipelines[0], running.pipelines[0],
            "a refused one: the running version"
        );
        assert_eq!(
            effective.pipelines[1].flush_interval,
            Some(std::time::Duration::from_secs(3))
        );
        assert_eq!(effective.daemon.cluster, "local");
        assert_eq!(outcome.restart_required, ["daemon.cluster"]);
    }
}
