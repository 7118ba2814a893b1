//! The wasmtime engine under wasmon's policy: epoch interruption driven by a ticker thread,
//! linkers with WASI (asynchronous, so a call waiting in WASI can be abandoned; capabilities
//! come from each guest's grants) and the `host` interface, and an on-disk cache of compiled
//! components keyed by content hash.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::JoinHandle;

use anyhow::{Context, Result};
use sha2::{Digest, Sha256};
use wasmtime::component::{Component, HasSelf, Linker};
use wasmtime::{Config, Engine};

use super::bindings;
use super::clock::Clock;
use super::limits::{ASYNC_STACK, EPOCH_TICK, MAX_WASM_STACK};
use super::state::State;

/// Shared by every guest of the daemon.
pub struct Runtime {
    engine: Engine,
    /// The engine's configuration: compiles run in a throwaway engine made from it.
    config: Config,
    transformer_linker: Linker<State>,
    agent_linker: Linker<State>,
    exporter_linker: Linker<State>,
    cache_dir: Option<PathBuf>,
    _ticker: Ticker,
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a plain OS thread (a tokio task would
/// stall under a spinning guest on a current-thread runtime) while a call runs, and counts the
/// ticks for the deadlines of calls waiting in host functions, so that both kinds of deadline
/// run on one clock (on a starved machine the ticker runs late, and both are equally lenient).
/// Parked while no call runs. Stops when dropped.
struct Ticker {
    clock: Arc<Clock>,
    thread: Option<JoinHandle<()>>,
}

impl Ticker {
    fn start(engine: Engine) -> Ticker {
        let clock = Arc::new(Clock {
            ticks: AtomicU64::new(0),
            running: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            ticker: OnceLock::new(),
        });
        let c = clock.clone();
        let thread = std::thread::Builder::new()
            .name("wasmon-epoch".into())
            .spawn(move || {
                while !c.stop.load(Ordering::Acquire) {
                    if c.running.load(Ordering::Acquire) == 0 {
                        std::thread::park();
                        continue;
                    }
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    c.ticks.fetch_add(1, Ordering::Release);
                }
            })
            .expect("spawning the epoch ticker thread");
        let _ = clock.ticker.set(thread.thread().clone());
        Ticker {
            clock,
            thread: Some(thread),
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.clock.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            t.thread().unpark();
            let _ = t.join();
        }
    }
}

/// A compiled component and the hash of the bytes it came from.
#[derive(Clone)]
pub struct Compiled {
    pub component: Component,
    /// Hex SHA-256 of the `.wasm` bytes: identifies a version of a guest.
    pub hash: String,
}

impl Runtime {
    /// `cache_dir`: where compiled components are kept across runs (`None`: no disk cache).
    pub fn new(cache_dir: Option<PathBuf>) -> Result<Arc<Runtime>> {
        let mut config = Config::new();
        config.epoch_interruption(true);
        // Component-model async is not used: synchronous calls are 2.5-4x cheaper without it.
        config.concurrency_support(false);
        config.wasm_component_model(true);
        // Infinite recursion traps that call, never the daemon; calls run on fibers of
        // `ASYNC_STACK` bytes so that they can be abandoned at their deadline (see `guest`).
        config.max_wasm_stack(MAX_WASM_STACK);
        config.async_stack_size(ASYNC_STACK);
        // `WASMON_PERFMAP=1`: guest code shows up by name in `perf` (writes /tmp/perf-PID.map).
        if std::env::var_os("WASMON_PERFMAP").is_some_and(|v| v == "1") {
            config.profiler(wasmtime::ProfilingStrategy::PerfMap);
        }
        let engine = Engine::new(&config)
            .map_err(anyhow::Error::from)
            .context("creating the wasmtime engine")?;

        // One linker per world: WASI and the granted directories, then the world's imports.
        let mut transformer_linker = wasi_linker(&engine)?;
        bindings::transformer::Transformer::add_to_linker::<_, HasSelf<State>>(
            &mut transformer_linker,
            |s| s,
        )?;
        let mut agent_linker = wasi_linker(&engine)?;
        bindings::agent::Agent::add_to_linker::<_, HasSelf<State>>(&mut agent_linker, |s| s)?;
        let mut exporter_linker = wasi_linker(&engine)?;
        bindings::exporter::Exporter::add_to_linker::<_, HasSelf<State>>(
            &mut exporter_linker,
            |s| s,
        )?;

        if let Some(dir) = &cache_dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("creating the component cache {}", dir.display()))?;
        }
        let ticker = Ticker::start(engine.clone());
        Ok(Arc::new(Runtime {
            engine,
            config,
            transformer_linker,
            agent_linker,
            exporter_linker,
            cache_dir,
            _ticker: ticker,
        }))
    }

    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The clock of every guest deadline.
    pub(crate) fn clock(&self) -> &Arc<Clock> {
        &self._ticker.clock
    }

    pub(crate) fn transformer_linker(&self) -> &Linker<State> {
        &self.transformer_linker
    }

    pub(crate) fn agent_linker(&self) -> &Linker<State> {
        &self.agent_linker
    }

    pub(crate) fn exporter_linker(&self) -> &Linker<State> {
        &self.exporter_linker
    }

    /// Compiles `bytes` (a component), or loads it from the cache when these exact bytes were
    /// compiled before by a compatible engine. Bad bytes are an error naming `what`.
    pub fn compile(&self, bytes: &[u8], what: &str) -> Result<Compiled> {
        let hash = hex::encode(Sha256::digest(bytes));
        let cached = self
            .cache_dir
            .as_ref()
            .map(|dir| self.cache_path(dir, &hash));
        if let Some(path) = &cached
            && path.exists()
            && let Some(component) = self.load_cached(path)
        {
            return Ok(Compiled { component, hash });
        }
        // Cranelift keeps its compilation contexts (tens of MB of tables and arenas, per
        // thread) in the engine for the next compile. The daemon compiles at start and reload
        // only, so it compiles in a throwaway engine of the same configuration and loads the
        // result into its own.
        let compiled = Engine::new(&self.config)
            .and_then(|compiler| compiler.precompile_component(bytes))
            .map_err(anyhow::Error::from)
            .with_context(|| format!("{what} is not a valid WebAssembly component"))?;
        if let Some(path) = &cached {
            // Loaded from the file, as a restart would: the code is then file-backed (shared,
            // reclaimable) pages rather than an anonymous copy (first start, idle RSS of the
            // default config, release build: 41-42 -> 38 MB).
            match store_cached(path, &compiled) {
                Ok(()) => {
                    if let Some(component) = self.load_cached(path) {
                        return Ok(Compiled { component, hash });
                    }
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "cannot cache compiled component")
                }
            }
        }
        // SAFETY: the bytes were just produced by `precompile_component` of an engine with the
        // same configuration as `self.engine`.
        let component = unsafe { Component::deserialize(&self.engine, &compiled) }
            .map_err(anyhow::Error::from)
            .with_context(|| format!("loading the compiled {what}"))?;
        Ok(Compiled { component, hash })
    }

    /// A compiled component from the disk cache; `None` (and a warning) when it is unusable.
    fn load_cached(&self, path: &Path) -> Option<Component> {
        // SAFETY: the file was written by `precompile_component` of an engine with the same
        // compatibility hash (it is part of the file name) and is never modified in place: it
        // is written to a temporary file and renamed.
        unsafe { Component::deserialize_file(&self.engine, path) }
            .inspect_err(|e| {
                tracing::warn!(path = %path.display(), error = %e, "dropping unusable cached component")
            })
            .ok()
    }

    /// Removes the cached compilations of every component but those whose hash is in `keep`
    /// (the daemon keeps the components in use and a few recent ones), so that the disk cache
    /// stays as bounded as the daemon's memory.
    pub fn prune_cache(&self, keep: &[&String]) {
        let Some(dir) = &self.cache_dir else { return };
        let Ok(entries) = std::fs::read_dir(dir) else {
            return;
        };
        for e in entries.filter_map(|e| e.ok()) {
            let name = e.file_name();
            let Some(name) = name.to_str() else { continue };
            let Some((hash, _)) = name.strip_suffix(".cwasm").and_then(|n| n.split_once('-'))
            else {
                continue;
            };
            if !keep.iter().any(|k| k.as_str() == hash) {
                match std::fs::remove_file(e.path()) {
                    Ok(()) => tracing::debug!(file = name, "pruned a cached compiled component"),
                    Err(err) => {
                        tracing::warn!(file = name, error = %err, "cannot prune a cached component")
                    }
                }
            }
        }
    }

    fn cache_path(&self, dir: &Path, hash: &str) -> PathBuf {
        use std::hash::{Hash, Hasher};
        let mut h = std::collections::hash_map::DefaultHasher::new();
        self.engine.precompile_compatibility_hash().hash(&mut h);
        dir.join(format!("{hash}-{:016x}.cwasm", h.finish()))
    }
}

/// A linker with WASI (preview 2) and the host's directory grants, the imports every world has.
fn wasi_linker(engine: &Engine) -> Result<Linker<State>> {
    let mut linker = Linker::new(engine);
    wasmtime_wasi::p2::add_to_linker_async(&mut linker)?;
    super::dirs::add_to_linker(&mut linker)?;
    Ok(linker)
}

fn store_cached(path: &Path, bytes: &[u8]) -> Result<()> {
    let dir = path.parent().context("cache path has no parent")?;
    let mut tmp = tempfile::NamedTempFile::new_in(dir)?;
    std::io::Write::write_all(&mut tmp, bytes)?;
    tmp.persist(path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn built(name: &str) -> Vec<u8> {
        std::fs::read(format!("{}/{name}.wasm", crate::BUILT_GUESTS_DIR)).unwrap()
    }

    #[test]
    fn the_clock_ticks_only_while_a_call_runs() {
        let rt = Runtime::new(None).unwrap();
        let clock = rt.clock();
        std::thread::sleep(EPOCH_TICK * 10);
        assert_eq!(clock.now(), 0, "an idle ticker ticked");
        {
            let _a = clock.running();
            let _b = clock.running();
            std::thread::sleep(EPOCH_TICK * 20);
        }
        let after = clock.now();
        assert!(after >= 1, "no tick while a call ran");
        std::thread::sleep(EPOCH_TICK * 10);
        // The tick under way when the last call ended may still land.
        assert!(clock.now() <= after + 1, "ticking went on after the calls");
    }

    #[test]
    fn the_disk_cache_keeps_only_what_it_is_told_to() {
        let dir = tempfile::tempdir().unwrap();
        let rt = Runtime::new(Some(dir.path().to_path_buf())).unwrap();
        let a = rt.compile(&built("template"), "template").unwrap();
        let b = rt.compile(&built("testing"), "testing").unwrap();
        let files = || std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(files(), 2);
        rt.prune_cache(&[&a.hash]);
        assert_eq!(files(), 1);
        // The kept one still loads from the cache; the pruned one compiles again.
        assert_eq!(
            rt.compile(&built("template"), "template").unwrap().hash,
            a.hash
        );
        assert_eq!(
            rt.compile(&built("testing"), "testing").unwrap().hash,
            b.hash
        );
        assert_eq!(files(), 2);
    }
}
