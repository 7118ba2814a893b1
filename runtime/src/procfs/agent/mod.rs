//! The native `proc` agent (PCP domain 3): PCP's proc PMDA's `proc.*` metrics (psinfo, memory,
//! id, io, schedstat, smaps, fd, runq, namespaces, autogroup, control) with pmdaproc's names,
//! PMIDs, types, instance domain (serial 9: one instance per process, numbered by pid and named
//! `PID command` with the pid zero-padded to six digits), semantics and units, and values
//! computed as pmdaproc computes them (times in ms from clock ticks, memory in Kbyte, and its
//! known quirks where PCP's clients see them; see the table's help).
//!
//! A fetch is one pass over ROOT/proc ([`pass`]) reading, per process, only the files the
//! requested metrics need; the values of every requested metric come from that pass. Owns
//! only this agent; it uses the namespace's types and the procfs reader, nothing else.

mod files;
mod pass;
mod table;
mod values;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod tests_kept;

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::namespace::{Agent, Child, LabelsOf, MetricDesc, NsError, Pmid, Values, children_of};
use crate::procfs::ProcReader;

use files::IdNames;
use pass::{Need, Pass, Proc};
use table::{CL_AUTOGROUP, DEFS, Def, def_of, need_of, pmid_of};
use values::Fetched;

pub use files::pid_of_instance;
pub use table::{PROC_DOMAIN, PROC_INDOM, PROC_PMNS};

/// The proc agent (see the module doc).
pub struct ProcAgent {
    root: PathBuf,
    pass: Pass,
    ids: IdNames,
    procs: Vec<Proc>,
}

impl Default for ProcAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl ProcAgent {
    pub fn new() -> Self {
        Self::with_root("/")
    }

    /// Reads `<root>/proc/...` (and the name tables under `<root>/etc`) instead of `/proc`:
    /// captured trees in tests, a host's /proc mounted elsewhere in a container.
    pub fn with_root(root: impl AsRef<Path>) -> Self {
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        Self::with_threads(root, threads)
    }

    /// Reads with at most `threads` threads per fetch (1: on the calling thread only; the
    /// default is one per CPU, at most 4).
    pub fn with_threads(root: impl AsRef<Path>, threads: usize) -> Self {
        let root = root.as_ref().to_path_buf();
        ProcAgent {
            pass: Pass::with_workers(ProcReader::with_root(root.join("proc")), threads),
            ids: IdNames::new(&root),
            root,
            procs: Vec::new(),
        }
    }

    /// Processes the last fetch left out because they ended while it read them.
    pub fn skipped(&self) -> u32 {
        self.pass.skipped
    }

    /// Files kept open now from one fetch to the next (see `pass::KEEP`).
    pub fn kept_files(&self) -> usize {
        self.pass.kept_files()
    }

    /// Passes over /proc so far.
    pub fn passes(&self) -> u64 {
        self.pass.passes
    }

    fn read_small(&self, rel: &str) -> Option<String> {
        use std::io::Read;
        let mut s = String::new();
        std::fs::File::open(self.root.join(rel))
            .ok()?
            .take(1 << 20)
            .read_to_string(&mut s)
            .ok()?;
        Some(s)
    }
}

impl Agent for ProcAgent {
    fn lookup_name(&mut self, name: &str) -> Result<Pmid, NsError> {
        if let Some(def) = DEFS.iter().find(|d| d.name == name) {
            return Ok(pmid_of(def));
        }
        let below = format!("{name}.");
        if DEFS.iter().any(|d| d.name.starts_with(&below)) {
            Err(NsError::NonLeaf)
        } else {
            Err(NsError::UnknownName)
        }
    }

    fn names_of(&mut self, id: Pmid) -> Result<Vec<String>, NsError> {
        def_of(id)
            .map(|d| vec![d.name.to_string()])
            .ok_or(NsError::UnknownPmid)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        let out = children_of(DEFS.iter().map(|d| d.name), name);
        if out.is_empty() && !DEFS.iter().any(|d| d.name == name) {
            return Err(NsError::UnknownName);
        }
        Ok(out)
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let def = def_of(id).ok_or(NsError::UnknownPmid)?;
        Ok(MetricDesc {
            id,
            semantics: def.sem,
            units: def.units.to_string(),
            indom: def.per_proc.then_some(PROC_INDOM),
            help: def.help.to_string(),
            value_type: def.ty,
        })
    }

    fn label_name(&self) -> Option<String> {
        Some("proc".into())
    }

    /// As pmdaproc labels them: each process instance with its pid.
    fn labels(&mut self, of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        match of {
            LabelsOf::Instance(PROC_INDOM, name) => pid_of_instance(name)
                .map(|pid| vec![("pid".into(), pid.into())])
                .unwrap_or_default(),
            _ => Vec::new(),
        }
    }

    /// Processes are numbered by pid.
    fn instance_id(&mut self, indom: u32, name: &str) -> Option<u32> {
        (indom == PROC_INDOM)
            .then(|| pid_of_instance(name))
            .flatten()
    }

    /// Every process now (one pass reading only `stat`, and the command line of new ones).
    fn instances(&mut self, indom: u32) -> Option<Vec<String>> {
        if indom != PROC_INDOM {
            return None;
        }
        let mut procs = std::mem::take(&mut self.procs);
        let listed = self.pass.run(Need::default(), &mut procs);
        let names = listed.ok().map(|()| {
            procs
                .iter()
                .filter_map(|p| Some(p.names.as_ref()?.inst.clone()))
                .collect()
        });
        self.procs = procs;
        names
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        let defs: Vec<Option<&'static Def>> = ids.iter().map(|&id| def_of(id)).collect();
        let mut need = Need::default();
        for def in defs.iter().flatten() {
            need_of(def, &mut need);
        }
        let mut procs = std::mem::take(&mut self.procs);
        let listed = self.pass.run(need, &mut procs);
        if need.has(Need::NAMES) {
            self.ids.refresh();
        }
        let wants_autogroup = defs.iter().flatten().any(|d| d.cluster == CL_AUTOGROUP);
        let mut f = Fetched {
            hz: self.pass.reader.clk_tck(),
            page_kb: self.pass.reader.page_size() / 1024,
            ids: &self.ids,
            root: &self.root,
            autogroup_enabled: wants_autogroup
                && self
                    .read_small("proc/sys/kernel/sched_autogroup_enabled")
                    .is_some_and(|s| s.trim() == "1"),
            drivers: if need.has(Need::TTY) {
                self.read_small("proc/tty/drivers")
                    .map(|s| files::parse_tty_drivers(s.as_bytes()))
                    .unwrap_or_default()
            } else {
                Vec::new()
            },
            ttys: HashMap::new(),
            procs,
        };
        let out = ids
            .iter()
            .zip(&defs)
            .map(|(&id, def)| {
                let r = match (def, &listed) {
                    (None, _) => Err(NsError::UnknownPmid),
                    (Some(_), Err(e)) => Err(NsError::Other(e.to_string())),
                    (Some(def), Ok(())) if def.per_proc => {
                        let procs = std::mem::take(&mut f.procs);
                        let vals = procs
                            .iter()
                            .filter_map(|p| {
                                let v = f.value(def, p)?;
                                Some((p.names.as_ref()?.inst.clone(), v))
                            })
                            .collect();
                        f.procs = procs;
                        Ok(vals)
                    }
                    (Some(def), Ok(())) => Ok(f
                        .single(def)
                        .map(|v| vec![(String::new(), v)])
                        .unwrap_or_default()),
                };
                (id, r)
            })
            .collect();
        self.procs = f.procs;
        out
    }
}
