//! `/proc/stat` (cluster 0's CPU and kernel counters): CPU time for the whole host, per CPU
//! and per NUMA node (CPUs of `/sys/devices/system/node/nodeN/cpulist`), interrupts, context
//! switches, forks, running and blocked processes, boot time; and the CPU and node counts.
//!
//! CPU times are USER_HZ ticks in the file and milliseconds in PCP (`1000 * ticks / hz`);
//! `vuser` and `vnice` exclude guest time, which the kernel also counts in user and nice.

use super::indom::{CPU as CPU_INDOM, NODE as NODE_INDOM};
use super::read::numbers;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Clock ticks per second in /proc/stat: USER_HZ, 100 on every Linux architecture the daemon
/// targets (not the kernel's CONFIG_HZ); `kernel.all.hz` reports it.
const USER_HZ: u64 = 100;

/// The CPU columns of a `cpu` line, in the file's order.
#[derive(Clone, Copy, Default)]
struct Times([u64; 10]);

const USER: usize = 0;
const NICE: usize = 1;
const SYS: usize = 2;
const IDLE: usize = 3;
const WAIT: usize = 4;
const IRQ: usize = 5;
const SIRQ: usize = 6;
const STEAL: usize = 7;
const GUEST: usize = 8;
const GUEST_NICE: usize = 9;

impl Times {
    fn add(&mut self, o: &Times) {
        for (a, b) in self.0.iter_mut().zip(o.0) {
            *a = a.wrapping_add(b);
        }
    }

    /// The value of CPU-time item `item` (cluster 0's numbering of all, per-CPU and per-node
    /// items folded to one), in milliseconds.
    fn ms(&self, field: Field) -> u64 {
        let t = &self.0;
        let ticks = match field {
            Field::One(i) => t[i],
            Field::Intr => t[IRQ].wrapping_add(t[SIRQ]),
            Field::VUser => t[USER].saturating_sub(t[GUEST]),
            Field::VNice => t[NICE].saturating_sub(t[GUEST_NICE]),
        };
        ticks.saturating_mul(1000) / USER_HZ
    }
}

#[derive(Clone, Copy)]
enum Field {
    One(usize),
    Intr,
    VUser,
    VNice,
}

/// The 13 CPU fields, in the column order of [`ITEMS`].
const FIELDS: [Field; 13] = {
    use Field::*;
    [
        One(USER),
        One(NICE),
        One(SYS),
        One(IDLE),
        One(WAIT),
        Intr,
        One(SIRQ),
        One(IRQ),
        One(STEAL),
        One(GUEST),
        VUser,
        One(GUEST_NICE),
        VNice,
    ]
};

/// Cluster-0 items of each field of [`FIELDS`]: over all CPUs, per CPU, per node.
const ITEMS: [[u32; 13]; 3] = [
    [20, 21, 22, 23, 35, 34, 53, 54, 55, 60, 78, 81, 82],
    [0, 1, 2, 3, 30, 31, 56, 57, 58, 61, 76, 83, 84],
    [62, 63, 64, 65, 69, 66, 70, 71, 67, 68, 77, 85, 86],
];

/// Which CPU field a cluster-0 item is, and over what: 0 all, 1 per CPU, 2 per node.
fn cpu_item(item: u32) -> Option<(u8, Field)> {
    ITEMS.iter().enumerate().find_map(|(over, items)| {
        let f = items.iter().position(|&i| i == item)?;
        Some((over as u8, FIELDS[f]))
    })
}

/// What one refresh read.
#[derive(Default)]
pub struct Stat {
    buf: String,
    ok: bool,
    all: Times,
    /// (CPU number, times), in file order.
    cpus: Vec<(u32, Times)>,
    /// (node number, summed times of its CPUs).
    nodes: Vec<(u32, Times)>,
    intr: Option<u64>,
    ctxt: Option<u64>,
    btime: Option<u64>,
    processes: Option<u64>,
    running: Option<u64>,
    blocked: Option<u64>,
}

impl Stat {
    fn parse(&mut self, text: &str) {
        self.cpus.clear();
        for line in text.lines() {
            let Some((key, rest)) = line.split_once(|c: char| c.is_ascii_whitespace()) else {
                continue;
            };
            let first = || rest.split_ascii_whitespace().next()?.parse::<u64>().ok();
            match key {
                "cpu" => self.all = times(rest),
                "intr" => self.intr = first(),
                "ctxt" => self.ctxt = first(),
                "btime" => self.btime = first(),
                "processes" => self.processes = first(),
                "procs_running" => self.running = first(),
                "procs_blocked" => self.blocked = first(),
                _ => {
                    if let Some(n) = key.strip_prefix("cpu").and_then(|n| n.parse().ok()) {
                        self.cpus.push((n, times(rest)));
                    }
                }
            }
        }
    }

    /// NUMA nodes and their CPUs; a host without /sys/devices/system/node is one node.
    fn nodes(&mut self, ctx: &Ctx) {
        self.nodes.clear();
        let mut found = false;
        for name in ctx.root.list("sys/devices/system/node") {
            let Some(n) = name
                .strip_prefix("node")
                .and_then(|n| n.parse::<u32>().ok())
            else {
                continue;
            };
            found = true;
            let mut sum = Times::default();
            if let Ok(list) = ctx
                .root
                .attr(&format!("sys/devices/system/node/{name}/cpulist"))
            {
                for cpu in cpu_list(&list) {
                    if let Some((_, t)) = self.cpus.iter().find(|(c, _)| *c == cpu) {
                        sum.add(t);
                    }
                }
            }
            self.nodes.push((n, sum));
        }
        if !found {
            let mut sum = Times::default();
            for (_, t) in &self.cpus {
                sum.add(t);
            }
            self.nodes.push((0, sum));
        }
        self.nodes.sort_by_key(|(n, _)| *n);
    }
}

fn times(rest: &str) -> Times {
    let mut t = Times::default();
    for (slot, v) in t.0.iter_mut().zip(numbers(rest)) {
        *slot = v;
    }
    t
}

/// A sysfs CPU list (`0-3,8,10-11`), bounded to what a CPU number can be.
pub fn cpu_list(text: &str) -> Vec<u32> {
    /// More CPUs than any Linux kernel supports (CONFIG_NR_CPUS tops at 8,192).
    const MAX_CPUS: u32 = 16_384;
    let mut out = Vec::new();
    for part in text.trim().split(',').filter(|p| !p.is_empty()) {
        let (a, b) = part.split_once('-').unwrap_or((part, part));
        if let (Ok(a), Ok(b)) = (a.trim().parse::<u32>(), b.trim().parse::<u32>()) {
            out.extend(a.min(MAX_CPUS)..=b.min(MAX_CPUS));
        }
    }
    out
}

impl Group for Stat {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 0 && (cpu_item(m.item).is_some() || matches!(m.item, 12..=17 | 19 | 32 | 48))
    }

    fn refresh(&mut self, ctx: &Ctx) {
        let mut buf = std::mem::take(&mut self.buf);
        *self = Stat::default();
        self.ok = ctx
            .root
            .read("proc/stat", &mut buf)
            .map(|t| self.parse(t))
            .is_ok();
        self.buf = buf;
        if self.ok {
            self.nodes(ctx);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if !self.ok {
            return;
        }
        let one = |out: &mut Values, v: Option<u64>| {
            if let Some(v) = v {
                out.push((String::new(), Value::Uint(v)));
            }
        };
        if let Some((over, field)) = cpu_item(m.item) {
            match over {
                0 => one(out, Some(self.all.ms(field))),
                1 => out.extend(
                    self.cpus
                        .iter()
                        .map(|(n, t)| (format!("cpu{n}"), Value::Uint(t.ms(field)))),
                ),
                _ => out.extend(
                    self.nodes
                        .iter()
                        .map(|(n, t)| (format!("node{n}"), Value::Uint(t.ms(field)))),
                ),
            }
            return;
        }
        match m.item {
            12 => one(out, self.intr),
            13 => one(out, self.ctxt),
            14 => one(out, self.processes),
            15 => one(out, self.running),
            16 => one(out, self.blocked),
            17 => one(out, self.btime),
            19 => one(out, Some(self.nodes.len() as u64)),
            32 => one(out, Some(self.cpus.len() as u64)),
            48 => one(out, Some(USER_HZ)),
            _ => {}
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        match indom {
            CPU_INDOM => name.strip_prefix("cpu")?.parse().ok(),
            NODE_INDOM => name.strip_prefix("node")?.parse().ok(),
            _ => None,
        }
    }
}
