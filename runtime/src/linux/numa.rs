//! NUMA memory (cluster 36, `mem.numa.*`): each node's `meminfo` (Kbyte, huge pages in
//! pages and bytes) and `numastat` allocation counters under `/sys/devices/system/node/nodeN`.
//! Instances are the nodes (`nodeN`, numbered N).
//!
//! `mem.numa.max_bandwidth` comes from pmdalinux's optional `bandwidth.conf`, which this agent
//! has no counterpart of: it has no value, as on a host where that file is not set up.
//!
//! Owns this cluster's parsing only.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Most nodes read: Linux's MAX_NUMNODES is at most 1,024.
const MAX_NODES: usize = 1024;

/// The node `meminfo` key of items 0..=31 (and, in pages, of 39..=41).
const MEMINFO: [&str; 32] = [
    "MemTotal:",
    "MemFree:",
    "MemUsed:",
    "Active:",
    "Inactive:",
    "Active(anon):",
    "Inactive(anon):",
    "Active(file):",
    "Inactive(file):",
    "HighTotal:",
    "HighFree:",
    "LowTotal:",
    "LowFree:",
    "Unevictable:",
    "Mlocked:",
    "Dirty:",
    "Writeback:",
    "FilePages:",
    "Mapped:",
    "AnonPages:",
    "Shmem:",
    "KernelStack:",
    "PageTables:",
    "NFS_Unstable:",
    "Bounce:",
    "WritebackTmp:",
    "Slab:",
    "SReclaimable:",
    "SUnreclaim:",
    "HugePages_Total:",
    "HugePages_Free:",
    "HugePages_Surp:",
];

/// The `numastat` key of items 32..=37.
const NUMASTAT: [&str; 6] = [
    "numa_hit",
    "numa_miss",
    "numa_foreign",
    "interleave_hit",
    "local_node",
    "other_node",
];

struct Node {
    name: String,
    mem: [Option<u64>; 32],
    stat: [Option<u64>; 6],
}

#[derive(Default)]
pub struct Numa {
    buf: String,
    nodes: Vec<Node>,
    /// `/proc/meminfo`'s Hugepagesize, Kbyte (the byte items need it).
    hugepage_kb: Option<u64>,
}

/// The first number after `key` on `line` (as pmdalinux: the first digit after the key).
/// The key must start a word: `Mapped:` is not the tail of `ShmemPmdMapped:` or
/// `FilePmdMapped:` (PCP after 6.0.3 lists those longer keys before `Mapped:` in its table,
/// so that its substring search never takes them for it; 6.0.3 answers their 0).
fn after(line: &str, key: &str) -> Option<u64> {
    let start = line.match_indices(key).find_map(|(i, _)| {
        let word = i == 0 || line.as_bytes()[i - 1].is_ascii_whitespace();
        word.then_some(i)
    })?;
    let rest = &line[start + key.len()..];
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let digits = &rest[start..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// Fills `out` from `Node 0 MemTotal:  123 kB` (meminfo) or `numa_hit 123` (numastat)
/// lines; the first key of the list a line holds wins.
fn scan<const N: usize>(text: &str, keys: &[&str; N], out: &mut [Option<u64>; N]) {
    for line in text.lines() {
        for (i, k) in keys.iter().enumerate() {
            if let Some(v) = after(line, k) {
                out[i] = Some(v);
                break;
            }
        }
    }
}

impl Group for Numa {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 36 && m.item <= 41
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.nodes.clear();
        let mut numbers: Vec<u32> = ctx
            .root
            .list("sys/devices/system/node")
            .iter()
            .filter_map(|n| n.strip_prefix("node")?.parse().ok())
            .collect();
        numbers.sort_unstable();
        numbers.truncate(MAX_NODES);
        for n in numbers {
            let mut node = Node {
                name: format!("node{n}"),
                mem: [None; 32],
                stat: [None; 6],
            };
            let dir = format!("sys/devices/system/node/node{n}");
            if let Ok(text) = ctx.root.read(&format!("{dir}/meminfo"), &mut self.buf) {
                scan(text, &MEMINFO, &mut node.mem);
            }
            if let Ok(text) = ctx.root.read(&format!("{dir}/numastat"), &mut self.buf) {
                scan(text, &NUMASTAT, &mut node.stat);
            }
            self.nodes.push(node);
        }
        self.hugepage_kb = None;
        if !self.nodes.is_empty()
            && let Ok(text) = ctx.root.read("proc/meminfo", &mut self.buf)
        {
            self.hugepage_kb = text
                .lines()
                .find_map(|l| super::read::u64_after(l, "Hugepagesize:"));
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let item = m.item as usize;
        for n in &self.nodes {
            let v = match item {
                0..=31 => n.mem[item],
                32..=37 => n.stat[item - 32],
                39..=41 => self
                    .hugepage_kb
                    .and_then(|kb| Some(n.mem[item - 10]?.wrapping_mul(kb << 10))),
                _ => None,
            };
            if let Some(v) = v {
                out.push((n.name.clone(), Value::Uint(v)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch_f64};

    fn meminfo(node: u32, total: u64, free: u64) -> String {
        format!(
            "Node {node} MemTotal:       {total} kB\nNode {node} MemFree:        {free} kB\n\
             Node {node} MemUsed:        {} kB\nNode {node} Active:          1000 kB\n\
             Node {node} Inactive:        2000 kB\nNode {node} Active(anon):     300 kB\n\
             Node {node} HugePages_Total:    {}\nNode {node} HugePages_Free:     1\n\
             Node {node} HugePages_Surp:     0\n",
            total - free,
            4 + node
        )
    }

    #[test]
    fn two_nodes_with_meminfo_numastat_and_huge_pages_in_bytes() {
        let m0 = meminfo(0, 16_000_000, 1_000_000);
        let m1 = meminfo(1, 16_500_000, 2_000_000);
        let (_dir, mut a) = agent(&[
            ("sys/devices/system/node/node0/meminfo", &m0),
            ("sys/devices/system/node/node1/meminfo", &m1),
            (
                "sys/devices/system/node/node0/numastat",
                "numa_hit 100\nnuma_miss 2\nnuma_foreign 3\ninterleave_hit 4\nlocal_node 90\nother_node 10\n",
            ),
            // An old kernel's node without a numastat file.
            ("sys/devices/system/node/possible", "0-1\n"),
            (
                "proc/meminfo",
                "MemTotal: 32500000 kB\nHugepagesize:       2048 kB\n",
            ),
        ]);
        let n = |v: &[(&str, f64)]| {
            v.iter()
                .map(|(n, x)| (n.to_string(), *x))
                .collect::<Vec<_>>()
        };
        assert_eq!(
            fetch_f64(&mut a, "mem.numa.util.free"),
            n(&[("node0", 1e6), ("node1", 2e6)])
        );
        assert_eq!(
            fetch_f64(&mut a, "mem.numa.util.used"),
            n(&[("node0", 15e6), ("node1", 14.5e6)])
        );
        // "Active:" is not "Active(anon):".
        assert_eq!(fetch_f64(&mut a, "mem.numa.util.active")[0].1, 1000.0);
        assert_eq!(fetch_f64(&mut a, "mem.numa.util.active_anon")[0].1, 300.0);
        assert!(fetch_f64(&mut a, "mem.numa.util.highTotal").is_empty());
        assert_eq!(
            fetch_f64(&mut a, "mem.numa.util.hugepagesTotalBytes"),
            n(&[
                ("node0", 4.0 * 2048.0 * 1024.0),
                ("node1", 5.0 * 2048.0 * 1024.0)
            ])
        );
        assert_eq!(
            fetch_f64(&mut a, "mem.numa.alloc.other_node"),
            n(&[("node0", 10.0)])
        );
        assert!(fetch_f64(&mut a, "mem.numa.max_bandwidth").is_empty());
    }

    #[test]
    fn no_sysfs_nodes_means_no_values() {
        let (_dir, mut a) = agent(&[("proc/meminfo", "Hugepagesize: 2048 kB\n")]);
        assert!(fetch_f64(&mut a, "mem.numa.util.total").is_empty());
        assert!(fetch_f64(&mut a, "mem.numa.util.hugepagesFreeBytes").is_empty());
    }

    #[test]
    fn this_host_agrees_with_sysfs() {
        let Ok(text) = std::fs::read_to_string("/sys/devices/system/node/node0/meminfo") else {
            return;
        };
        let want: f64 = text
            .lines()
            .find_map(|l| l.split_once("MemTotal:"))
            .map(|(_, r)| r.split_whitespace().next().unwrap().parse().unwrap())
            .unwrap();
        let mut a = LinuxAgent::new();
        let got = fetch_f64(&mut a, "mem.numa.util.total");
        assert_eq!(got[0], ("node0".to_string(), want));
    }
}
