//! A native agent for host metrics from /proc, under PCP's linux PMDA names and PMIDs
//! (domain 60): load average, CPU time (all and per CPU), memory, and network interface
//! counters.
//!
//! Its names are static, as in PCP: [`LINUX_PMNS`] is the pmns text to load into the
//! namespace, so lookups never reach the agent and local-mode traversal lists them. (The
//! per-host variety — CPUs, interfaces — lives in instances, not names.) The agent still
//! answers the namespace callbacks from the same table, so the lead may instead mount it
//! dynamically (`kernel 60:*:*` ...) without changing it.
//!
//! Each fetch reads every needed /proc file once, into a buffer reused across fetches, and
//! parses it in place. Owns only this agent; uses nothing of the namespace but its types.

use super::types::{
    Agent, Child, LabelsOf, MetricDesc, NsError, Pmid, Semantics, Value, ValueType, Values,
};

/// Values as read from /proc, before they take their metric's type.
type Raw = Vec<(String, f64)>;
use std::path::{Path, PathBuf};

/// PCP's domain for the linux PMDA.
pub const LINUX_DOMAIN: u32 = 60;

/// Instance domains (serials as in PCP's linux PMDA `indom.h`).
pub const CPU_INDOM: u32 = 0;
pub const LOADAVG_INDOM: u32 = 2;
pub const NET_DEV_INDOM: u32 = 3;

/// Clock ticks per second in /proc/stat: USER_HZ, 100 on every Linux architecture the daemon
/// targets (not the kernel's CONFIG_HZ).
const USER_HZ: f64 = 100.0;

/// The pmns text for the names below (merge it with the other pmns files).
pub const LINUX_PMNS: &str = "\
/* linux agent (domain 60): names and PMIDs as PCP's linux PMDA */
root { hinv kernel mem network }
hinv { ncpu 60:0:32 physmem 60:1:9 }
kernel { all percpu }
kernel.all { load 60:2:0 intr 60:0:12 pswitch 60:0:13 sysfork 60:0:14 runnable 60:2:2 nprocs 60:2:3 uptime 60:26:0 cpu }
kernel.all.cpu { user 60:0:20 nice 60:0:21 sys 60:0:22 idle 60:0:23 wait }
kernel.all.cpu.wait { total 60:0:35 }
kernel.percpu { cpu }
kernel.percpu.cpu { user 60:0:0 nice 60:0:1 sys 60:0:2 idle 60:0:3 wait }
kernel.percpu.cpu.wait { total 60:0:30 }
mem { physmem 60:1:0 freemem 60:1:10 util }
mem.util { used 60:1:1 free 60:1:2 shared 60:1:3 bufmem 60:1:4 cached 60:1:5 swapCached 60:1:13
    active 60:1:14 inactive 60:1:15 swapTotal 60:1:20 swapFree 60:1:21 dirty 60:1:22 slab 60:1:25
    available 60:1:58 }
network { interface }
network.interface { in out total }
network.interface.in { bytes 60:3:0 packets 60:3:1 errors 60:3:2 drops 60:3:3 }
network.interface.out { bytes 60:3:8 packets 60:3:9 errors 60:3:10 drops 60:3:11 }
network.interface.total { bytes 60:3:16 packets 60:3:17 }
";

/// Where a metric's value comes from.
#[derive(Clone, Copy, Debug, PartialEq)]
enum Src {
    Ncpu,
    /// /proc/stat cpu line field (0 user, 1 nice, 2 system, 3 idle, 4 iowait), in ms.
    AllCpu(usize),
    PerCpu(usize),
    /// /proc/stat single-number lines.
    Stat(&'static str),
    Load,
    /// /proc/loadavg 4th field: 0 runnable, 1 total.
    Procs(usize),
    Uptime,
    /// /proc/meminfo key, in kB, scaled by `1/div`.
    Mem(&'static str, f64),
    /// MemTotal - MemFree.
    MemUsed,
    /// /proc/net/dev column (0..8 receive, 8..16 transmit).
    Net(usize),
    NetTotal(usize, usize),
}

struct Def {
    name: &'static str,
    cluster: u32,
    item: u32,
    sem: Semantics,
    units: &'static str,
    indom: Option<u32>,
    help: &'static str,
    src: Src,
}

// A table row constructor: eight columns read better positionally than as a struct literal.
#[allow(clippy::too_many_arguments)]
const fn d(
    name: &'static str,
    cluster: u32,
    item: u32,
    sem: Semantics,
    units: &'static str,
    indom: Option<u32>,
    help: &'static str,
    src: Src,
) -> Def {
    Def {
        name,
        cluster,
        item,
        sem,
        units,
        indom,
        help,
        src,
    }
}

use Semantics::{Counter as C, Discrete as D, Instant as I};
const CPU: Option<u32> = Some(CPU_INDOM);
const NET: Option<u32> = Some(NET_DEV_INDOM);

#[rustfmt::skip]
static DEFS: &[Def] = &[
    d("hinv.ncpu", 0, 32, D, "", None, "number of CPUs in the system", Src::Ncpu),
    d("hinv.physmem", 1, 9, D, "Mbyte", None, "total system memory", Src::Mem("MemTotal", 1024.0)),
    d("kernel.all.load", 2, 0, I, "", Some(LOADAVG_INDOM), "1, 5 and 15 minute load average", Src::Load),
    d("kernel.all.intr", 0, 12, C, "count", None, "intrerrupt rate", Src::Stat("intr")),
    d("kernel.all.pswitch", 0, 13, C, "count", None, "context switches", Src::Stat("ctxt")),
    d("kernel.all.sysfork", 0, 14, C, "count", None, "fork() calls", Src::Stat("processes")),
    d("kernel.all.runnable", 2, 2, I, "", None, "runnable (on run queue) processes", Src::Procs(0)),
    d("kernel.all.nprocs", 2, 3, I, "", None, "total number of processes (lightweight)", Src::Procs(1)),
    d("kernel.all.uptime", 26, 0, I, "sec", None, "time the system has been up", Src::Uptime),
    d("kernel.all.cpu.user", 0, 20, C, "millisec", None, "total user CPU time for all CPUs", Src::AllCpu(0)),
    d("kernel.all.cpu.nice", 0, 21, C, "millisec", None, "total nice user CPU time for all CPUs", Src::AllCpu(1)),
    d("kernel.all.cpu.sys", 0, 22, C, "millisec", None, "total sys CPU time for all CPUs", Src::AllCpu(2)),
    d("kernel.all.cpu.idle", 0, 23, C, "millisec", None, "total idle CPU time for all CPUs", Src::AllCpu(3)),
    d("kernel.all.cpu.wait.total", 0, 35, C, "millisec", None, "total CPU time waiting for IO", Src::AllCpu(4)),
    d("kernel.percpu.cpu.user", 0, 0, C, "millisec", CPU, "percpu user CPU time", Src::PerCpu(0)),
    d("kernel.percpu.cpu.nice", 0, 1, C, "millisec", CPU, "percpu nice user CPU time", Src::PerCpu(1)),
    d("kernel.percpu.cpu.sys", 0, 2, C, "millisec", CPU, "percpu sys CPU time", Src::PerCpu(2)),
    d("kernel.percpu.cpu.idle", 0, 3, C, "millisec", CPU, "percpu idle CPU time", Src::PerCpu(3)),
    d("kernel.percpu.cpu.wait.total", 0, 30, C, "millisec", CPU, "percpu time spent waiting for IO", Src::PerCpu(4)),
    d("mem.physmem", 1, 0, D, "Kbyte", None, "total system memory metric reported by /proc/meminfo", Src::Mem("MemTotal", 1.0)),
    d("mem.freemem", 1, 10, I, "Kbyte", None, "free system memory", Src::Mem("MemFree", 1.0)),
    d("mem.util.used", 1, 1, I, "Kbyte", None, "used memory (MemTotal - MemFree)", Src::MemUsed),
    d("mem.util.free", 1, 2, I, "Kbyte", None, "free memory", Src::Mem("MemFree", 1.0)),
    d("mem.util.shared", 1, 3, I, "Kbyte", None, "shared memory", Src::Mem("Shmem", 1.0)),
    d("mem.util.bufmem", 1, 4, I, "Kbyte", None, "memory allocated for buffer_heads", Src::Mem("Buffers", 1.0)),
    d("mem.util.cached", 1, 5, I, "Kbyte", None, "page cache memory", Src::Mem("Cached", 1.0)),
    d("mem.util.swapCached", 1, 13, I, "Kbyte", None, "swapped memory still in the page cache", Src::Mem("SwapCached", 1.0)),
    d("mem.util.active", 1, 14, I, "Kbyte", None, "recently used memory", Src::Mem("Active", 1.0)),
    d("mem.util.inactive", 1, 15, I, "Kbyte", None, "memory not recently used", Src::Mem("Inactive", 1.0)),
    d("mem.util.swapTotal", 1, 20, I, "Kbyte", None, "total swap space", Src::Mem("SwapTotal", 1.0)),
    d("mem.util.swapFree", 1, 21, I, "Kbyte", None, "free swap space", Src::Mem("SwapFree", 1.0)),
    d("mem.util.dirty", 1, 22, I, "Kbyte", None, "memory waiting to be written to disk", Src::Mem("Dirty", 1.0)),
    d("mem.util.slab", 1, 25, I, "Kbyte", None, "kernel slab allocator memory", Src::Mem("Slab", 1.0)),
    d("mem.util.available", 1, 58, I, "Kbyte", None, "memory available for a new workload without swapping", Src::Mem("MemAvailable", 1.0)),
    d("network.interface.in.bytes", 3, 0, C, "byte", NET, "network recv read bytes", Src::Net(0)),
    d("network.interface.in.packets", 3, 1, C, "count", NET, "network recv read packets", Src::Net(1)),
    d("network.interface.in.errors", 3, 2, C, "count", NET, "network recv read errors", Src::Net(2)),
    d("network.interface.in.drops", 3, 3, C, "count", NET, "network recv read drops", Src::Net(3)),
    d("network.interface.out.bytes", 3, 8, C, "byte", NET, "network send bytes", Src::Net(8)),
    d("network.interface.out.packets", 3, 9, C, "count", NET, "network send packets", Src::Net(9)),
    d("network.interface.out.errors", 3, 10, C, "count", NET, "network send errors", Src::Net(10)),
    d("network.interface.out.drops", 3, 11, C, "count", NET, "network send drops", Src::Net(11)),
    d("network.interface.total.bytes", 3, 16, C, "byte", NET, "network total (in+out) bytes", Src::NetTotal(0, 8)),
    d("network.interface.total.packets", 3, 17, C, "count", NET, "network total (in+out) packets", Src::NetTotal(1, 9)),
];

fn pmid_of(def: &Def) -> Pmid {
    Pmid {
        domain: LINUX_DOMAIN,
        cluster: def.cluster,
        item: def.item,
    }
}

/// What one fetch read, each file at most once.
#[derive(Default)]
struct Snapshot {
    stat: Option<Stat>,
    meminfo: Option<[Option<f64>; MEM_KEYS.len()]>,
    loadavg: Option<[f64; 5]>,
    netdev: Option<Vec<(String, [f64; 16])>>,
    uptime: Option<f64>,
}

#[derive(Default)]
struct Stat {
    all: [f64; 5],
    percpu: Vec<(String, [f64; 5])>,
    singles: Vec<(&'static str, f64)>,
}

/// Host metrics from /proc (see the module doc).
pub struct LinuxAgent {
    root: PathBuf,
    buf: String,
}

impl Default for LinuxAgent {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxAgent {
    pub fn new() -> Self {
        Self::with_root("/")
    }

    /// Reads `<root>/proc/...` instead of `/proc` (tests, containers with the host's /proc
    /// mounted elsewhere).
    pub fn with_root(root: impl AsRef<Path>) -> Self {
        LinuxAgent {
            root: root.as_ref().to_path_buf(),
            buf: String::with_capacity(16 << 10),
        }
    }

    fn def(&self, id: Pmid) -> Option<&'static Def> {
        DEFS.iter().find(|d| pmid_of(d) == id)
    }

    /// Reads `proc/<rel>` into the reused buffer.
    fn read(&mut self, rel: &str) -> Result<&str, NsError> {
        use std::io::Read;
        self.buf.clear();
        let path = self.root.join("proc").join(rel);
        std::fs::File::open(&path)
            .and_then(|mut f| f.read_to_string(&mut self.buf))
            .map_err(|e| NsError::Other(format!("{}: {e}", path.display())))?;
        Ok(&self.buf)
    }

    fn value(&mut self, def: &Def, snap: &mut Snapshot) -> Result<Raw, NsError> {
        let one = |v: f64| Ok(vec![(String::new(), v)]);
        match def.src {
            Src::Ncpu => one(self.stat(snap)?.percpu.len() as f64),
            Src::AllCpu(i) => one(self.stat(snap)?.all[i]),
            Src::PerCpu(i) => Ok(self
                .stat(snap)?
                .percpu
                .iter()
                .map(|(n, v)| (n.clone(), v[i]))
                .collect()),
            Src::Stat(key) => {
                let v = self
                    .stat(snap)?
                    .singles
                    .iter()
                    .find(|(k, _)| *k == key)
                    .map(|(_, v)| *v);
                one(v.ok_or_else(|| NsError::Other(format!("/proc/stat has no {key} line")))?)
            }
            Src::Load => {
                let l = self.loadavg(snap)?;
                Ok(vec![
                    ("1 minute".into(), l[0]),
                    ("5 minute".into(), l[1]),
                    ("15 minute".into(), l[2]),
                ])
            }
            Src::Procs(i) => one(self.loadavg(snap)?[3 + i]),
            Src::Uptime => {
                if snap.uptime.is_none() {
                    let text = self.read("uptime")?;
                    let up = text
                        .split_ascii_whitespace()
                        .next()
                        .and_then(|s| s.parse::<f64>().ok());
                    snap.uptime =
                        Some(up.ok_or_else(|| NsError::Other("unreadable /proc/uptime".into()))?);
                }
                one(snap.uptime.unwrap_or_default().floor())
            }
            // Scaled down as PCP's linux PMDA does it, by a shift (`MemTotal >> 10`): truncated.
            Src::Mem(key, div) => one((self.mem(snap, key)? / div).trunc()),
            Src::MemUsed => one(self.mem(snap, "MemTotal")? - self.mem(snap, "MemFree")?),
            Src::Net(col) => Ok(self
                .netdev(snap)?
                .iter()
                .map(|(n, v)| (n.clone(), v[col]))
                .collect()),
            Src::NetTotal(a, b) => Ok(self
                .netdev(snap)?
                .iter()
                .map(|(n, v)| (n.clone(), v[a] + v[b]))
                .collect()),
        }
    }

    fn stat<'s>(&mut self, snap: &'s mut Snapshot) -> Result<&'s Stat, NsError> {
        if snap.stat.is_none() {
            snap.stat = Some(parse_stat(self.read("stat")?));
        }
        Ok(snap.stat.as_ref().expect("just filled"))
    }

    fn loadavg(&mut self, snap: &mut Snapshot) -> Result<[f64; 5], NsError> {
        if snap.loadavg.is_none() {
            let l = parse_loadavg(self.read("loadavg")?)
                .ok_or_else(|| NsError::Other("unreadable /proc/loadavg".into()))?;
            snap.loadavg = Some(l);
        }
        Ok(snap.loadavg.unwrap_or_default())
    }

    fn mem(&mut self, snap: &mut Snapshot, key: &str) -> Result<f64, NsError> {
        if snap.meminfo.is_none() {
            snap.meminfo = Some(parse_meminfo(self.read("meminfo")?));
        }
        let m = snap.meminfo.as_ref().expect("just filled");
        MEM_KEYS
            .iter()
            .position(|k| *k == key)
            .and_then(|i| m[i])
            .ok_or_else(|| NsError::Other(format!("/proc/meminfo has no {key}")))
    }

    fn netdev<'s>(&mut self, snap: &'s mut Snapshot) -> Result<&'s [(String, [f64; 16])], NsError> {
        if snap.netdev.is_none() {
            snap.netdev = Some(parse_netdev(self.read("net/dev")?));
        }
        Ok(snap.netdev.as_deref().expect("just filled"))
    }
}

/// /proc/stat: `cpu  u n s i w ...`, `cpuN ...`, and single-number lines.
fn parse_stat(text: &str) -> Stat {
    let mut st = Stat::default();
    let ms = |f: &mut std::str::SplitAsciiWhitespace| -> [f64; 5] {
        let mut v = [0.0; 5];
        for slot in v.iter_mut() {
            *slot =
                f.next().and_then(|x| x.parse::<u64>().ok()).unwrap_or(0) as f64 * 1000.0 / USER_HZ;
        }
        v
    };
    for line in text.lines() {
        let mut f = line.split_ascii_whitespace();
        let Some(key) = f.next() else { continue };
        if key == "cpu" {
            st.all = ms(&mut f);
        } else if key.starts_with("cpu") {
            st.percpu.push((key.to_string(), ms(&mut f)));
        } else if let Some(k) = ["intr", "ctxt", "processes"]
            .into_iter()
            .find(|k| *k == key)
            && let Some(v) = f.next().and_then(|x| x.parse::<u64>().ok())
        {
            st.singles.push((k, v as f64));
        }
    }
    st
}

/// /proc/loadavg: `0.52 0.58 0.59 2/1234 5678` → [1, 5, 15 min, runnable, total].
fn parse_loadavg(text: &str) -> Option<[f64; 5]> {
    let mut f = text.split_ascii_whitespace();
    let (a, b, c) = (
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
        f.next()?.parse().ok()?,
    );
    let (run, total) = f.next()?.split_once('/')?;
    Some([a, b, c, run.parse().ok()?, total.parse().ok()?])
}

/// The /proc/meminfo keys the table uses (parsing keeps only these: no per-key allocation).
const MEM_KEYS: [&str; 13] = [
    "MemTotal",
    "MemFree",
    "MemAvailable",
    "Buffers",
    "Cached",
    "SwapCached",
    "Active",
    "Inactive",
    "SwapTotal",
    "SwapFree",
    "Dirty",
    "Shmem",
    "Slab",
];

/// /proc/meminfo: `Key:   123 kB` (values in kB), for the keys in [`MEM_KEYS`].
fn parse_meminfo(text: &str) -> [Option<f64>; MEM_KEYS.len()] {
    let mut out = [None; MEM_KEYS.len()];
    for line in text.lines() {
        let Some((k, rest)) = line.split_once(':') else {
            continue;
        };
        if let Some(i) = MEM_KEYS.iter().position(|m| *m == k)
            && let Some(v) = rest
                .split_ascii_whitespace()
                .next()
                .and_then(|v| v.parse::<u64>().ok())
        {
            out[i] = Some(v as f64);
        }
    }
    out
}

/// /proc/net/dev: two header lines, then `  name: 16 numbers`.
fn parse_netdev(text: &str) -> Vec<(String, [f64; 16])> {
    text.lines()
        .skip(2)
        .filter_map(|l| {
            let (name, rest) = l.split_once(':')?;
            let mut v = [0.0; 16];
            for (slot, x) in v.iter_mut().zip(rest.split_ascii_whitespace()) {
                *slot = x.parse::<u64>().ok()? as f64;
            }
            Some((name.trim().to_string(), v))
        })
        .collect()
}

impl Agent for LinuxAgent {
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
        self.def(id)
            .map(|d| vec![d.name.to_string()])
            .ok_or(NsError::UnknownPmid)
    }

    fn children(&mut self, name: &str) -> Result<Vec<Child>, NsError> {
        let below = if name.is_empty() {
            String::new()
        } else {
            format!("{name}.")
        };
        let mut out: Vec<Child> = Vec::new();
        for def in DEFS {
            if let Some(rest) = def.name.strip_prefix(below.as_str()) {
                let (first, leaf) = rest
                    .split_once('.')
                    .map_or((rest, true), |(f, _)| (f, false));
                if !out.iter().any(|c| c.name == first) {
                    out.push(Child {
                        name: first.to_string(),
                        leaf,
                    });
                }
            }
        }
        if out.is_empty() && !DEFS.iter().any(|d| d.name == name) {
            return Err(NsError::UnknownName);
        }
        Ok(out)
    }

    fn describe(&mut self, id: Pmid) -> Result<MetricDesc, NsError> {
        let def = self.def(id).ok_or(NsError::UnknownPmid)?;
        Ok(MetricDesc {
            id,
            semantics: def.sem,
            units: def.units.to_string(),
            indom: def.indom,
            help: def.help.to_string(),
            value_type: value_type(def),
        })
    }

    fn label_name(&self) -> Option<String> {
        Some("linux".into())
    }

    /// As PCP's linux PMDA labels them (`linux_labelInDom`, `linux_labelItem`,
    /// `linux_labelCallBack`): the per-CPU and per-interface indoms
    /// (`{"device_type":"cpu","indom_name":"per cpu"}`), their instances (`{"cpu":3}`,
    /// `{"interface":"eth0"}`), and the whole-system CPU times (`{"device_type":"cpu"}`).
    fn labels(&mut self, of: LabelsOf) -> Vec<(String, serde_json::Value)> {
        let kind = |indom| match indom {
            CPU_INDOM => Some(("cpu", "per cpu")),
            NET_DEV_INDOM => Some(("interface", "per interface")),
            _ => None,
        };
        match of {
            // kernel.all.cpu.{user,nice,sys,idle} (items 20-23) and wait.total (35).
            LabelsOf::Item(id) if id.cluster == 0 && matches!(id.item, 20..=23 | 35) => {
                vec![("device_type".into(), "cpu".into())]
            }
            LabelsOf::Item(_) => Vec::new(),
            LabelsOf::Indom(indom) => kind(indom).map_or_else(Vec::new, |(device, per)| {
                vec![
                    ("device_type".into(), device.into()),
                    ("indom_name".into(), per.into()),
                ]
            }),
            LabelsOf::Instance(CPU_INDOM, name) => name
                .strip_prefix("cpu")
                .and_then(|n| n.parse::<u32>().ok())
                .map(|n| vec![("cpu".into(), n.into())])
                .unwrap_or_default(),
            LabelsOf::Instance(NET_DEV_INDOM, name) => vec![("interface".into(), name.into())],
            LabelsOf::Instance(..) => Vec::new(),
        }
    }

    /// PCP's linux PMDA numbers CPUs by their number and load averages by their minutes;
    /// network interfaces it numbers in discovery order (left to the server).
    fn instance_id(&mut self, indom: u32, name: &str) -> Option<u32> {
        match indom {
            CPU_INDOM => name.strip_prefix("cpu")?.parse().ok(),
            LOADAVG_INDOM => name.strip_suffix(" minute")?.parse().ok(),
            _ => None,
        }
    }

    fn fetch(&mut self, ids: &[Pmid]) -> Vec<(Pmid, Result<Values, NsError>)> {
        let mut snap = Snapshot::default();
        ids.iter()
            .map(|id| {
                let r = match self.def(*id) {
                    Some(def) => self.value(def, &mut snap).map(|raw| {
                        let ty = value_type(def);
                        raw.into_iter()
                            .filter_map(|(n, v)| Some((n, Value::Real(v).conform(ty)?)))
                            .collect()
                    }),
                    None => Err(NsError::UnknownPmid),
                };
                (*id, r)
            })
            .collect()
    }
}

/// As PCP's linux PMDA declares them (checked against pmcd 6.0.3 by `tests/all/pcp`).
fn value_type(def: &Def) -> ValueType {
    match def.src {
        Src::Load => ValueType::Float,
        Src::Uptime => ValueType::Double,
        Src::Ncpu | Src::Procs(_) => ValueType::U32,
        Src::Mem(_, div) if div != 1.0 => ValueType::U32,
        _ => ValueType::U64,
    }
}

#[cfg(test)]
#[path = "linux_tests.rs"]
mod tests;
