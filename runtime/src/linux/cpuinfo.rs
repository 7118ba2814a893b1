//! `/proc/cpuinfo` (cluster 18, but for hinv.machine) and the CPU and node attributes of
//! `/sys/devices/system` (cluster 55): each CPU's clock, vendor, model, stepping, cache,
//! bogomips, flags and NUMA node; whether each CPU and node is online; thermal throttling and
//! frequency scaling counts.
//!
//! As pmdalinux: the CPU instances are `cpu0` .. `cpuN-1` for the host's N configured CPUs
//! (the `cpuN` directories of `/sys/devices/system/cpu`; else the processors of
//! /proc/cpuinfo), each CPU's node is the node directory holding a `cpuN` entry (node 0
//! without NUMA directories). Processor records of /proc/cpuinfo are taken in order; fields
//! seen before the first `processor` line, or after consecutive `processor` lines (arm64),
//! describe every CPU. The first line of each field wins, but for `cpu MHz`.

use super::indom::{CPU, NODE};
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Most CPUs an instance list takes: more than CONFIG_NR_CPUS allows.
const MAX_CPUS: u32 = 16_384;

/// One processor's fields (pmdalinux's `cpuinfo_t`).
#[derive(Clone, Default)]
struct Info {
    sapic: Option<String>,
    model_name: Option<String>,
    model: Option<String>,
    vendor: Option<String>,
    stepping: Option<String>,
    flags: Option<String>,
    cache: u32,
    cache_align: u32,
    bogomips: f32,
    clock: f32,
}

impl Info {
    /// pmdalinux's chain of prefix tests (case-insensitive, first match wins).
    fn take(&mut self, key: &str, val: &str) {
        let is = |p: &str| {
            key.len() >= p.len() && key.as_bytes()[..p.len()].eq_ignore_ascii_case(p.as_bytes())
        };
        let set = |slot: &mut Option<String>| *slot = Some(val.to_string());
        if self.sapic.is_none() && is("sapic") {
            set(&mut self.sapic)
        } else if self.model_name.is_none() && (is("model name") || is("hardware")) {
            set(&mut self.model_name)
        } else if self.model.is_none() && (is("model") || is("cpu model") || is("cpu variant")) {
            set(&mut self.model)
        } else if self.vendor.is_none() && (is("vendor") || is("cpu implementer")) {
            set(&mut self.vendor)
        } else if self.stepping.is_none() && (is("step") || is("revision") || is("cpu revision")) {
            set(&mut self.stepping)
        } else if self.flags.is_none() && is("flags") {
            set(&mut self.flags)
        } else if self.flags.is_none() && is("features") {
            self.flags = Some(val.trim().to_string())
        } else if self.cache == 0 && is("cache size") {
            self.cache = atoi(val) as u32
        } else if self.cache_align == 0 && is("cache_align") {
            self.cache_align = atoi(val) as u32
        } else if self.bogomips == 0.0 && is("bogo") {
            self.bogomips = atof(val)
        } else if is("cpu MHz") {
            self.clock = atof(val)
        } else if self.clock == 0.0 && is("cycle frequency") {
            let v = val.split(' ').next().unwrap_or("");
            self.clock = atof(v) / 1_000_000.0
        }
    }
}

/// C's atoi: leading whitespace, sign, digits; 0 when none.
fn atoi(s: &str) -> i64 {
    let s = s.trim_start();
    let (neg, d) = match s.strip_prefix('-') {
        Some(r) => (true, r),
        None => (false, s.strip_prefix('+').unwrap_or(s)),
    };
    let n = d.bytes().take_while(u8::is_ascii_digit).count();
    let v = d[..n].parse::<i64>().unwrap_or(0);
    if neg { -v } else { v }
}

/// C's atof for the decimal forms cpuinfo uses.
fn atof(s: &str) -> f32 {
    let s = s.trim_start();
    let n = s
        .char_indices()
        .take_while(|&(i, c)| c.is_ascii_digit() || c == '.' || (i == 0 && (c == '-' || c == '+')))
        .count();
    s[..n].parse().unwrap_or(0.0)
}

/// Frequency scaling of one CPU (pmdalinux's `freq`), each `None` when not found.
#[derive(Default, Clone, Copy)]
struct Freq {
    count: Option<u64>,
    time: Option<u64>,
    max: Option<u64>,
    min: Option<u64>,
    /// scaling_cur_freq in MHz (hinv.cpu.clock's fallback).
    scale: Option<f32>,
}

#[derive(Default)]
pub struct CpuInfo {
    buf: String,
    /// CPU numbers of the instance domain, ascending.
    cpus: Vec<u32>,
    /// Node of each CPU, by position in `cpus`.
    node_of: Vec<u32>,
    /// Node numbers, ascending.
    nodes: Vec<u32>,
    /// /proc/cpuinfo's records by CPU position; `None` when it has no record for it.
    info: Vec<Option<Info>>,
    /// Whether /proc/cpuinfo was read.
    ok: bool,
}

impl CpuInfo {
    fn topology(&mut self, ctx: &Ctx, processors: usize) {
        let numbered = |names: Vec<String>, prefix: &str| -> Vec<u32> {
            let mut v: Vec<u32> = names
                .iter()
                .filter_map(|n| n.strip_prefix(prefix)?.parse().ok())
                .filter(|&n| n < MAX_CPUS)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        };
        let configured = numbered(ctx.root.list("sys/devices/system/cpu"), "cpu");
        // No /proc/cpuinfo and no sysfs CPUs (a root that is not a Linux tree): no CPUs.
        let n = if configured.is_empty() {
            processors as u32
        } else {
            configured.len() as u32
        };
        // pmdalinux numbers CPUs 0..N-1 for its N configured CPUs.
        self.cpus = (0..n.min(MAX_CPUS)).collect();
        self.node_of = vec![0; self.cpus.len()];
        self.nodes = numbered(ctx.root.list("sys/devices/system/node"), "node");
        if self.nodes.is_empty() && !self.cpus.is_empty() {
            self.nodes.push(0);
            return;
        }
        for &node in &self.nodes {
            for cpu in numbered(
                ctx.root
                    .list(&format!("sys/devices/system/node/node{node}")),
                "cpu",
            ) {
                if let Some(slot) = self.node_of.get_mut(cpu as usize) {
                    *slot = node;
                }
            }
        }
    }

    /// Parses /proc/cpuinfo into per-processor records; returns how many processors.
    fn parse(&mut self, text: &str) -> usize {
        let mut records: Vec<Info> = Vec::new();
        let mut saved = Info::default();
        let mut dups = false;
        let mut previous_processor = false;
        let mut current: Option<usize> = None;
        for line in text.lines() {
            let Some(colon) = line.find(':') else {
                continue;
            };
            let val = line.get(colon + 2..).unwrap_or("");
            if line.starts_with("processor") {
                if previous_processor {
                    dups = true;
                }
                previous_processor = true;
                records.push(Info::default());
                current = Some(records.len() - 1);
                continue;
            }
            previous_processor = false;
            if dups || current.is_none() {
                dups = true;
                saved.take(line, val);
            } else if let Some(i) = current {
                records[i].take(line, val);
            }
        }
        let n = records.len();
        self.info = if dups {
            vec![Some(saved); self.cpus.len().max(n)]
        } else {
            records.into_iter().map(Some).collect()
        };
        n
    }

    fn info(&self, pos: usize) -> Info {
        self.info.get(pos).cloned().flatten().unwrap_or_default()
    }

    fn freq(&self, ctx: &CtxLite, cpu: u32) -> Freq {
        let base = format!("sys/devices/system/cpu/cpu{cpu}/cpufreq");
        let mut f = Freq::default();
        let mut buf = String::new();
        if let Ok(text) = ctx
            .root
            .read(&format!("{base}/stats/time_in_state"), &mut buf)
        {
            let (mut max, mut min, mut hits, mut total) = (0u64, 0u64, 0u64, 0u64);
            let mut nums = text.split_ascii_whitespace();
            while let (Some(a), Some(b)) = (nums.next(), nums.next()) {
                let (Ok(freq), Ok(count)) = (a.parse::<u64>(), b.parse::<u64>()) else {
                    break;
                };
                let freq = freq / 1000;
                total = total.wrapping_add(freq.wrapping_mul(count));
                hits = hits.wrapping_add(count);
                max = max.max(freq);
                if min == 0 || freq < min {
                    min = freq;
                }
            }
            f.count = Some(total);
            f.time = Some(hits);
            f.max = Some(max);
            f.min = Some(min);
        } else {
            f.max = ctx
                .root
                .number(&format!("{base}/cpuinfo_max_freq"))
                .map(|v| v / 1000);
            f.min = ctx
                .root
                .number(&format!("{base}/cpuinfo_min_freq"))
                .map(|v| v / 1000);
            if let Some(cur) = ctx.root.number(&format!("{base}/scaling_cur_freq")) {
                f.count = Some(cur / 1000);
            }
        }
        if let Some(cur) = ctx.root.number(&format!("{base}/scaling_cur_freq")) {
            f.scale = Some(cur as f32 / 1000.0);
        }
        f
    }
}

/// The root, kept for the per-CPU sysfs attributes read at fetch time.
struct CtxLite {
    root: super::Root,
}

/// How many `cpuN` lines /proc/stat has (0 without the file).
fn stat_cpus(ctx: &Ctx) -> usize {
    let mut buf = String::new();
    ctx.root.read("proc/stat", &mut buf).map_or(0, |text| {
        text.lines()
            .filter(|l| {
                l.strip_prefix("cpu")
                    .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
            })
            .count()
    })
}

/// `/proc/cpuinfo` and the /sys/devices/system attributes of its CPUs.
#[derive(Default)]
pub struct CpuSys {
    cpu: CpuInfo,
    root: Option<CtxLite>,
}

impl Group for CpuSys {
    fn answers(&self, m: &Metric) -> bool {
        (m.cluster == 18 && m.item != 7) || (m.cluster == 55 && m.item <= 9)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        let mut buf = std::mem::take(&mut self.cpu.buf);
        let mut processors = match ctx.root.read("proc/cpuinfo", &mut buf) {
            Ok(text) => text.lines().filter(|l| l.starts_with("processor")).count(),
            Err(_) => 0,
        };
        if processors == 0 && !buf.is_empty() {
            // Uniprocessor formats without `processor` lines (Alpha, 32-bit PowerMac) describe
            // every CPU in one record; where sysfs lists no CPUs either, /proc/stat's CPU
            // lines count them (pmdalinux has the configured count; never fewer than one).
            processors = stat_cpus(ctx).max(1);
        }
        self.cpu.topology(ctx, processors);
        self.cpu.ok = processors > 0 || !buf.is_empty();
        if self.cpu.ok {
            self.cpu.parse(&buf);
        } else {
            self.cpu.info.clear();
        }
        self.cpu.buf = buf;
        self.root = Some(CtxLite {
            root: ctx.root.clone(),
        });
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(ctx) = &self.root else { return };
        let c = &self.cpu;
        let root = &ctx.root;
        if m.cluster == 55 && m.item == 1 {
            for &n in &c.nodes {
                let v = online(root, &format!("sys/devices/system/node/node{n}/online"));
                out.push((format!("node{n}"), Value::Uint(v)));
            }
            return;
        }
        for (pos, &cpu) in c.cpus.iter().enumerate() {
            let name = format!("cpu{cpu}");
            let v = if m.cluster == 55 {
                let base = format!("sys/devices/system/cpu/cpu{cpu}");
                let throttle = |kind: &str, what: &str| {
                    Some(Value::Uint(
                        root.number(&format!("{base}/thermal_throttle/{kind}_throttle_{what}"))
                            .unwrap_or(0),
                    ))
                };
                match m.item {
                    0 => Some(Value::Uint(online(root, &format!("{base}/online")))),
                    2 => throttle("core", "count"),
                    3 => throttle("core", "total_time_ms"),
                    4 => throttle("package", "count"),
                    5 => throttle("package", "total_time_ms"),
                    6..=9 => {
                        let f = c.freq(ctx, cpu);
                        let v = match m.item {
                            6 => f.count,
                            7 => f.time,
                            8 => f.max.map(|v| v as u32 as u64),
                            _ => f.min.map(|v| v as u32 as u64),
                        };
                        v.map(Value::Uint)
                    }
                    _ => None,
                }
            } else {
                if !c.ok {
                    return;
                }
                let i = c.info(pos);
                let text =
                    |s: Option<String>| Some(Value::Text(s.unwrap_or_else(|| "unknown".into())));
                match m.item {
                    0 if i.clock != 0.0 => Some(Value::Real(f64::from(i.clock))),
                    0 => c
                        .freq(ctx, cpu)
                        .scale
                        .filter(|s| *s != 0.0)
                        .map(|s| Value::Real(f64::from(s))),
                    1 => text(i.vendor),
                    2 => text(i.model.or(i.model_name)),
                    3 => text(i.stepping),
                    4 => (i.cache != 0).then_some(Value::Uint(u64::from(i.cache))),
                    5 => (i.bogomips != 0.0).then(|| Value::Real(f64::from(i.bogomips))),
                    6 => Some(Value::Uint(u64::from(cpu))),
                    8 => Some(Value::Uint(u64::from(c.node_of[pos]))),
                    9 => text(i.model_name.or(i.model)),
                    10 => text(i.flags),
                    11 => (i.cache_align != 0).then_some(Value::Uint(u64::from(i.cache_align))),
                    _ => None,
                }
            };
            if let Some(v) = v {
                out.push((name, v));
            }
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        match indom {
            CPU => name.strip_prefix("cpu")?.parse().ok(),
            NODE => name.strip_prefix("node")?.parse().ok(),
            _ => None,
        }
    }
}

/// A sysfs `online` attribute; 1 when absent or unreadable (CPU 0 often has none).
fn online(root: &super::Root, rel: &str) -> u64 {
    root.attr(rel)
        .ok()
        .and_then(|t| t.split_ascii_whitespace().next()?.parse::<u32>().ok())
        .map_or(1, u64::from)
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch, fetch_f64};
    use crate::namespace::Value;

    const X86: &str = "processor\t: 0\nvendor_id\t: GenuineIntel\ncpu family\t: 6\n\
model\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\nstepping\t: 4\n\
cpu MHz\t\t: 2100.000\ncache size\t: 22528 KB\nflags\t\t: fpu vme de\nbogomips\t: 4200.00\n\
cache_alignment\t: 64\n\n\
processor\t: 1\nvendor_id\t: GenuineIntel\nmodel\t\t: 85\nmodel name\t: Intel(R) Xeon(R) Gold 6130 CPU @ 2.10GHz\n\
stepping\t: 4\ncpu MHz\t\t: 1000.000\ncache size\t: 22528 KB\nflags\t\t: fpu vme de\nbogomips\t: 4200.00\n\
cache_alignment\t: 64\n\n";

    fn texts(a: &mut LinuxAgent, name: &str) -> Vec<(String, String)> {
        fetch(a, name)
            .into_iter()
            .filter_map(|(n, v)| match v {
                Value::Text(s) => Some((n, s)),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn x86_records_on_two_numa_nodes() {
        let (_dir, mut a) = agent(&[
            ("proc/cpuinfo", X86),
            ("sys/devices/system/cpu/cpu0/topology/x", ""),
            ("sys/devices/system/cpu/cpu1/online", "1\n"),
            ("sys/devices/system/node/node0/cpu0/x", ""),
            ("sys/devices/system/node/node1/cpu1/x", ""),
            ("sys/devices/system/node/node1/online", "0\n"),
            (
                "sys/devices/system/cpu/cpu1/cpufreq/stats/time_in_state",
                "2100000 10\n1000000 30\n",
            ),
            (
                "sys/devices/system/cpu/cpu0/thermal_throttle/core_throttle_count",
                "7\n",
            ),
        ]);
        assert_eq!(
            fetch_f64(&mut a, "hinv.cpu.clock"),
            [("cpu0".into(), 2100.0), ("cpu1".into(), 1000.0)]
        );
        assert_eq!(texts(&mut a, "hinv.cpu.vendor")[1].1, "GenuineIntel");
        assert_eq!(texts(&mut a, "hinv.cpu.model")[0].1, "85");
        assert!(
            texts(&mut a, "hinv.cpu.model_name")[0]
                .1
                .starts_with("Intel(R) Xeon")
        );
        assert_eq!(fetch_f64(&mut a, "hinv.cpu.cache")[0].1, 22528.0);
        assert_eq!(fetch_f64(&mut a, "hinv.cpu.cache_alignment")[1].1, 64.0);
        a.expect(
            "hinv.map.cpu_node cpu0=0 cpu1=1
            hinv.node.online node0=1 node1=0",
        );
        assert_eq!(fetch_f64(&mut a, "hinv.cpu.online").len(), 2);
        a.expect(
            "hinv.cpu.thermal_throttle.core.count cpu0=7 cpu1=0
            # time_in_state: MHz x ticks summed, ticks summed, max and min MHz.
            hinv.cpu.frequency_scaling.count cpu1=51000",
        );
        assert_eq!(
            fetch_f64(&mut a, "hinv.cpu.frequency_scaling.time")[0].1,
            40.0
        );
        assert_eq!(
            fetch_f64(&mut a, "hinv.cpu.frequency_scaling.max")[0].1,
            2100.0
        );
        assert_eq!(
            fetch_f64(&mut a, "hinv.cpu.frequency_scaling.min")[0].1,
            1000.0
        );
    }

    #[test]
    fn arm64_fields_after_the_processor_lines_describe_every_cpu() {
        let text = "processor\t: 0\nprocessor\t: 1\nprocessor\t: 2\n\
Features\t: fp asimd evtstrm  \nCPU implementer\t: 0x41\nCPU variant\t: 0x0\n\
CPU revision\t: 3\nBogoMIPS\t: 100.00\n";
        let (_dir, mut a) = agent(&[("proc/cpuinfo", text)]);
        let flags = texts(&mut a, "hinv.cpu.flags");
        assert_eq!(flags.len(), 3);
        assert_eq!(flags[2].1, "fp asimd evtstrm");
        assert_eq!(texts(&mut a, "hinv.cpu.vendor")[0].1, "0x41");
        assert_eq!(texts(&mut a, "hinv.cpu.model")[1].1, "0x0");
        assert_eq!(texts(&mut a, "hinv.cpu.stepping")[1].1, "3");
        // No cache size and no clock: no value rather than 0.
        assert!(fetch(&mut a, "hinv.cpu.cache").is_empty());
        assert!(fetch(&mut a, "hinv.cpu.clock").is_empty());
        assert_eq!(fetch_f64(&mut a, "hinv.cpu.bogomips")[0].1, 100.0);
        // One node without NUMA directories.
        assert_eq!(
            fetch_f64(&mut a, "hinv.node.online"),
            [("node0".into(), 1.0)]
        );
    }

    #[test]
    fn this_machines_cpus() {
        let mut a = LinuxAgent::new();
        let n = std::fs::read_to_string("/proc/cpuinfo")
            .unwrap()
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count();
        assert!(texts(&mut a, "hinv.cpu.vendor").len() >= n);
        assert_eq!(
            fetch_f64(&mut a, "hinv.map.cpu_num")[0],
            ("cpu0".into(), 0.0)
        );
    }
}
