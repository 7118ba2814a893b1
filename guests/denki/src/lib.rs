//! `denki`: RAPL energy per powercap zone, as PCP's pmdadenki names it: `denki.rapl.sysfs`
//! (domain 156, PMID 156.0.0), a counter of whole joules per zone. Zones are the
//! `/sys/class/powercap/intel-rapl:P` packages and their `intel-rapl:P:D` subzones; the
//! instance is the zone's `name` (`package-0`, `core`, `dram`), prefixed with `P-` when the
//! machine has more than one package, as pmdadenki does.
//!
//! Current kernels make `energy_uj` readable by root only: a zone whose counter may not be
//! read has no value, and the agent logs that once (not at every fetch); it is no error.

use std::path::{Path, PathBuf};

use wasmon_guest::agent::{Atom, NsError, Pmid, Semantics, Value, ValueSet, ValueType};
use wasmon_guest::names::{Catalog, Metric};
use wasmon_guest::sysfs;

pub const DOMAIN: u32 = 156;
const CLASS: &str = "/sys/class/powercap";
const ZONE_PREFIX: &str = "intel-rapl:";

/// `energy_uj` counts microjoules; pmdadenki reports whole joules.
const MICROJOULES_PER_JOULE: u64 = 1_000_000;

pub static METRICS: &[Metric] = &[Metric::new(
    "denki.rapl.sysfs",
    0,
    0,
    ValueType::Uint64,
    Semantics::Counter,
    "",
    Some(0),
    "Energy each RAPL zone (package, cores, uncore, DRAM) has used, in joules, from powercap's energy_uj",
)];

pub struct Denki {
    catalog: Catalog,
    root: PathBuf,
    /// Whether the "root only" line was logged already.
    told_denied: bool,
}

/// One zone: its instance name and directory.
fn zones(class: &Path) -> Vec<(String, PathBuf)> {
    let entries: Vec<String> = sysfs::list(class)
        .into_iter()
        .filter(|n| n.starts_with(ZONE_PREFIX))
        .collect();
    let packages = entries
        .iter()
        .filter(|n| n.matches(':').count() == 1)
        .count();
    entries
        .into_iter()
        .filter_map(|entry| {
            let dir = class.join(&entry);
            let name = sysfs::read_line(&dir.join("name")).ok()?;
            let package = entry[ZONE_PREFIX.len()..].split(':').next()?.to_string();
            let instance = if packages > 1 {
                format!("{package}-{name}")
            } else {
                name
            };
            Some((instance, dir))
        })
        .collect()
}

impl Denki {
    pub fn at(root: &Path) -> Denki {
        Denki {
            catalog: Catalog::new(DOMAIN, METRICS),
            root: root.to_path_buf(),
            told_denied: false,
        }
    }

    /// Joules per zone; zones whose counter cannot be read are left out.
    pub fn energy(&mut self) -> Vec<Value> {
        let mut out = Vec::new();
        for (instance, dir) in zones(&sysfs::under(&self.root, CLASS)) {
            match sysfs::read_u64(&dir.join("energy_uj")) {
                Ok(uj) => out.push(Value::new(instance, Atom::Uint(uj / MICROJOULES_PER_JOULE))),
                Err(e) if e.is_denied() => {
                    if !self.told_denied {
                        self.told_denied = true;
                        wasmon_guest::info!(
                            "denki.rapl.sysfs: {}/energy_uj may be read by root only; zones like it have no value",
                            dir.display()
                        );
                    }
                }
                Err(_) => {}
            }
        }
        out
    }

    pub fn fetch_ids(&mut self, ids: &[Pmid]) -> Vec<ValueSet> {
        ids.iter()
            .map(|&id| ValueSet {
                id,
                values: match self.catalog.metric(id) {
                    Some(_) => Ok(self.energy()),
                    None => Err(NsError::UnknownPmid),
                },
            })
            .collect()
    }
}

wasmon_guest::tree_agent!(Denki);
