//! `cpusys`: what a node's CPUs tell in files PCP's linux PMDA does not read: each CPU's line
//! of `/proc/schedstat` (time spent running and waiting to run), its current frequency from
//! cpufreq's `scaling_cur_freq`, and where it sits in its core (`topology/core_cpus_list`,
//! `physical_package_id`). Names of its own (domain 181, unassigned in PCP's stdpmid), one
//! instance per CPU (`cpu0`, as `kernel.percpu.*` names them). cc-metric-collector's
//! `schedstat` and `cpufreq` collectors read the same files.
//!
//! A file that is absent or not a number (a CPU without cpufreq, a kernel without schedstat)
//! gives that CPU no value for that metric, nothing else; a schedstat line that does not
//! parse is skipped.

use std::path::{Path, PathBuf};

use wasmon_guest::agent::{Atom, Pmid, Semantics, Value, ValueSet, ValueType};
use wasmon_guest::names::{Catalog, Metric};
use wasmon_guest::sysfs;

pub const DOMAIN: u32 = 181;
const SCHEDSTAT: &str = "/proc/schedstat";
const CPUS: &str = "/sys/devices/system/cpu";

/// `/proc/schedstat` is one line per CPU and per scheduling domain: a few hundred bytes per
/// CPU. 4 MiB holds several thousand CPUs; a larger file is not schedstat.
const MAX_SCHEDSTAT: u64 = 4 << 20;

/// CPUs read per fetch: more than any machine has; past it a hostile tree is cut off.
const MAX_CPUS: usize = 8192;

use Semantics::{Counter, Discrete, Instant};
use ValueType::Uint64;

/// The CPU indom: every metric is per CPU.
const CPU: Option<u32> = Some(0);

#[rustfmt::skip]
pub static METRICS: &[Metric] = &[
    Metric::new("cpusys.schedstat.running", 0, 0, Uint64, Counter, "nanosec", CPU, "Time the CPU spent running tasks (schedstat's rq_cpu_time)"),
    Metric::new("cpusys.schedstat.waiting", 0, 1, Uint64, Counter, "nanosec", CPU, "Time tasks spent runnable on this CPU's run queue, waiting for it (schedstat's run_delay)"),
    Metric::new("cpusys.schedstat.timeslices", 0, 2, Uint64, Counter, "count", CPU, "Time slices the CPU ran (schedstat's pcount)"),
    Metric::new("cpusys.freq.scaling_cur", 0, 3, Uint64, Instant, "", CPU, "The CPU's current frequency as cpufreq reports it (scaling_cur_freq), in kHz"),
    Metric::new("cpusys.topology.core_first", 0, 4, Uint64, Discrete, "", CPU, "1 when the CPU is the first of its core's hardware threads (core_cpus_list), else 0"),
    Metric::new("cpusys.topology.package", 0, 5, Uint64, Discrete, "", CPU, "The socket the CPU is on (physical_package_id)"),
];

/// schedstat's three time figures of each `cpuN` line (fields 7, 8, 9 after the name, in
/// version 15's order).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sched {
    pub running: u64,
    pub waiting: u64,
    pub timeslices: u64,
}

/// The `cpuN` lines of a schedstat text, in order; lines that do not parse are skipped.
pub fn parse_schedstat(text: &str) -> Vec<(String, Sched)> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let name = w.next()?;
            let n = name.strip_prefix("cpu")?;
            if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            let f: Vec<u64> = w.map(|x| x.parse().ok()).collect::<Option<_>>()?;
            (f.len() >= 9).then(|| {
                (
                    name.to_string(),
                    Sched {
                        running: f[6],
                        waiting: f[7],
                        timeslices: f[8],
                    },
                )
            })
        })
        .take(MAX_CPUS)
        .collect()
}

/// The first CPU of a kernel CPU list (`0,64`, `2-3`); `None` when it does not parse.
pub fn first_of_list(text: &str) -> Option<u64> {
    let first = text.trim().split(',').next()?;
    first.split('-').next()?.trim().parse().ok()
}

pub struct CpuSys {
    catalog: Catalog,
    root: PathBuf,
}

impl CpuSys {
    pub fn at(root: &Path) -> CpuSys {
        CpuSys {
            catalog: Catalog::new(DOMAIN, METRICS),
            root: root.to_path_buf(),
        }
    }

    /// `cpuN` directories, in CPU order.
    fn cpus(&self) -> Vec<(u64, PathBuf)> {
        let base = sysfs::under(&self.root, CPUS);
        let mut cpus: Vec<(u64, PathBuf)> = sysfs::list(&base)
            .into_iter()
            .filter_map(|n| {
                let id = n.strip_prefix("cpu")?.parse().ok()?;
                Some((id, base.join(&n)))
            })
            .take(MAX_CPUS)
            .collect();
        cpus.sort();
        cpus
    }

    fn schedstat(&self) -> Vec<(String, Sched)> {
        let path = sysfs::under(&self.root, SCHEDSTAT);
        match sysfs::read_bytes(&path, MAX_SCHEDSTAT) {
            Ok(bytes) => parse_schedstat(&String::from_utf8_lossy(&bytes)),
            Err(_) => Vec::new(),
        }
    }

    fn values(&self, item: u32, sched: &mut Option<Vec<(String, Sched)>>) -> Vec<Value> {
        match item {
            0..=2 => sched
                .get_or_insert_with(|| self.schedstat())
                .iter()
                .map(|(cpu, s)| {
                    let v = [s.running, s.waiting, s.timeslices][item as usize];
                    Value::new(cpu.clone(), Atom::Uint(v))
                })
                .collect(),
            _ => self
                .cpus()
                .into_iter()
                .filter_map(|(id, dir)| {
                    let v = match item {
                        3 => sysfs::read_u64(&dir.join("cpufreq/scaling_cur_freq")).ok()?,
                        4 => {
                            let list =
                                sysfs::read_line(&dir.join("topology/core_cpus_list")).ok()?;
                            u64::from(first_of_list(&list)? == id)
                        }
                        _ => sysfs::read_u64(&dir.join("topology/physical_package_id")).ok()?,
                    };
                    Some(Value::new(format!("cpu{id}"), Atom::Uint(v)))
                })
                .collect(),
        }
    }

    pub fn fetch_ids(&self, ids: &[Pmid]) -> Vec<ValueSet> {
        let mut sched = None;
        self.catalog
            .value_sets(ids, |m| self.values(m.item, &mut sched))
    }
}

wasmon_guest::tree_agent!(CpuSys);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_cpu_lines_and_cpu_lists() {
        let text = "version 15\ntimestamp 4299\ncpu0 0 0 10 2 5 3 123456789 98765 42\n\
                    domain0 00000003 1 2 3\ncpu1 0 0 1 x 1 1 1 1 1\ncpu2 0 0\n\
                    cpu3 0 0 0 0 0 0 7 8 9 10\n";
        assert_eq!(
            parse_schedstat(text),
            vec![
                (
                    "cpu0".into(),
                    Sched {
                        running: 123456789,
                        waiting: 98765,
                        timeslices: 42
                    }
                ),
                (
                    "cpu3".into(),
                    Sched {
                        running: 7,
                        waiting: 8,
                        timeslices: 9
                    }
                ),
            ]
        );
        assert_eq!(first_of_list("0,64\n"), Some(0));
        assert_eq!(first_of_list("2-3"), Some(2));
        assert_eq!(first_of_list("x"), None);
    }
}
