//! `mmv`: PCP's mmv PMDA (domain 70) as a wasmon agent. Instrumented programs write Memory
//! Mapped Values files into a directory (libpcp_mmv, or any MMV writer); the daemon grants that
//! directory to this guest read-only (`grants.mapped = [{ name = "mmv", host = "/var/tmp/mmv" }]`)
//! and the agent names every metric of every file below its dynamic root:
//!
//! ```text
//! <root>.<file>.<metric name in the file>     e.g. mmv.myapp.requests.total = 70:<cluster>:<item>
//! ```
//!
//! Parameters (JSON object): `dir`, the granted directory's name (default `"mmv"`), and `root`,
//! the dynamic subtree's name (default `"mmv"`).
//!
//! How names, PMIDs and failures work is in `pmda.rs` and `files.rs`; the file format in
//! `format.rs`. Differences from pmdammv: file names are always a name level (the
//! `MMV_FLAG_NOPREFIX` flag, which would put a file's metrics directly below the root, is
//! ignored so that files cannot clash); `MMV_FLAG_PROCESS` is ignored (a guest cannot see
//! whether the writer's pid still runs, so a dead writer's last values stay visible until its
//! file is removed); there are no `mmv.control.*` metrics; and a file without a cluster in
//! its header gets one hashed from its name, so it keeps its PMIDs across restarts.

pub mod files;
pub mod format;
pub mod pmda;

use wasmon_guest::Params;
use wasmon_guest::agent::{Agent, Child, MetricDesc, NsError, Pmid, ValueSet, mapped};

use files::Files;
use pmda::Mmv;

/// The agent's parameters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// The granted directory's name (`grants.mapped[].name`).
    pub dir: String,
    /// The dynamic subtree the agent answers for.
    pub root: String,
}

impl Config {
    pub fn from_params(params: &Params) -> Result<Config, String> {
        let mut cfg = Config {
            dir: "mmv".into(),
            root: "mmv".into(),
        };
        for (k, v) in params {
            let slot = match k.as_str() {
                "dir" => &mut cfg.dir,
                "root" => &mut cfg.root,
                _ => return Err(format!("unknown parameter {k:?} (known: dir, root)")),
            };
            *slot = v
                .as_str()
                .ok_or_else(|| format!("parameter {k:?} must be a string, got {v}"))?
                .to_string();
        }
        if cfg.dir.is_empty() {
            return Err("parameter \"dir\" must not be empty".into());
        }
        if !files::valid_root(&cfg.root) {
            return Err(format!(
                "parameter \"root\" ({:?}) must be a metric name: dot-separated letters, digits and '_', starting with a letter",
                cfg.root
            ));
        }
        Ok(cfg)
    }
}

/// The granted directory, through the host's `mapped` interface. Files are opened afresh at
/// each call: a writer that restarts replaces its file, and an old mapping would keep showing
/// the old one.
pub struct MappedDir(String);

/// The host copies out at most this much per `read`.
const READ_CHUNK: u64 = 8 << 20;

impl Files for MappedDir {
    fn list(&mut self) -> Result<Vec<String>, String> {
        mapped::list_files(&self.0)
    }

    fn read(&mut self, name: &str, len: u64) -> Result<(u64, Vec<u8>), String> {
        let file = mapped::open(&self.0, name)?;
        let size = file.size();
        let want = len.min(size);
        let mut out = Vec::with_capacity(usize::try_from(want).unwrap_or(0));
        while (out.len() as u64) < want {
            let at = out.len() as u64;
            let chunk = file.read(at, (want - at).min(READ_CHUNK));
            if chunk.is_empty() {
                break; // truncated since it was opened: the parser will say so
            }
            out.extend_from_slice(&chunk);
        }
        Ok((size, out))
    }
}

/// The exported agent.
pub struct MmvAgent(Mmv<MappedDir>);

impl Agent for MmvAgent {
    fn configure(params: &Params) -> Result<Self, String> {
        let cfg = Config::from_params(params)?;
        let granted = mapped::dirs();
        if !granted.contains(&cfg.dir) {
            return Err(format!(
                "parameter \"dir\": directory {:?} is not granted to this agent (granted: {granted:?}); add it to grants.mapped",
                cfg.dir
            ));
        }
        Ok(MmvAgent(Mmv::new(MappedDir(cfg.dir), &cfg.root)))
    }

    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        self.0.lookup_name(name)
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        self.0.names_of(id)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        self.0.children(name)
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        self.0.describe(id)
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        self.0.fetch(ids)
    }
}

wasmon_guest::export_agent!(MmvAgent);

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_pcp;
#[cfg(test)]
mod testwriter;
