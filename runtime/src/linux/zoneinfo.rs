//! `/proc/zoneinfo` (clusters 68 and 70, `mem.zoneinfo.*`): per-zone watermarks, sizes and
//! page counts (instances `ZONE::nodeN`), the per-node counters newer kernels print under
//! "per-node stats" (instances `nodeN`), and each zone's `protection` array (instances
//! `ZONE::nodeN::lowmem_reservedK`). Values are pages shown in Kbyte.
//!
//! As pmdalinux 6.0.3: only the keys it parses count (`nr_free_pages` is not one, so it
//! never has a value); a key a kernel lacks has no value for that instance; a zone whose
//! `present` is 0 is hidden (no values), though its protection entries stay; instances are
//! numbered in order of first appearance, hidden ones included, as pmdalinux's cache does.
//!
//! Owns these clusters' parsing and their instances' labels.

use super::indom::{ZONEINFO, ZONEINFO_PROTECTION};
use super::rows::{MAX_INSTANCES, instance};
use super::{Ctx, Group, Metric};
use crate::namespace::{LabelsOf, Value, Values};

/// Items of cluster 68.
const ITEMS: usize = 68;

/// The item a zoneinfo key fills, as pmdalinux parses them.
fn item_of(key: &str) -> Option<usize> {
    Some(match key {
        "pages free" => 0,
        "min" => 1,
        "low" => 2,
        "high" => 3,
        "scanned" | "node_scanned" => 4,
        "spanned" => 5,
        "present" => 6,
        "managed" => 7,
        "nr_alloc_batch" => 9,
        "nr_inactive_anon" => 10,
        "nr_active_anon" => 11,
        "nr_inactive_file" => 12,
        "nr_active_file" => 13,
        "nr_unevictable" => 14,
        "nr_mlock" => 15,
        "nr_anon_pages" => 16,
        "nr_mapped" => 17,
        "nr_file_pages" => 18,
        "nr_dirty" => 19,
        "nr_writeback" => 20,
        "nr_slab_reclaimable" => 21,
        "nr_slab_unreclaimable" => 22,
        "nr_page_table_pages" => 23,
        "nr_kernel_stack" => 24,
        "nr_unstable" => 25,
        "nr_bounce" => 26,
        "nr_vmscan_write" => 27,
        "nr_vmscan_immediate_reclaim" => 28,
        "nr_writeback_temp" => 29,
        "nr_isolated_anon" => 30,
        "nr_isolated_file" => 31,
        "nr_shmem" => 32,
        "nr_dirtied" => 33,
        "nr_written" => 34,
        "numa_hit" => 35,
        "numa_miss" => 36,
        "numa_foreign" => 37,
        "numa_interleave" => 38,
        "numa_local" => 39,
        "numa_other" => 40,
        "workingset_refault" => 41,
        "workingset_activate" => 42,
        "workingset_nodereclaim" => 43,
        "nr_anon_transparent_hugepages" => 44,
        "nr_free_cma" => 45,
        "cma" => 46,
        "nr_swapcached" => 47,
        "nr_shmem_hugepages" => 48,
        "nr_shmem_pmdmapped" => 49,
        "nr_file_hugepages" => 50,
        "nr_file_pmdmapped" => 51,
        "nr_kernel_misc_reclaimable" => 52,
        "nr_foll_pin_acquired" => 53,
        "nr_foll_pin_released" => 54,
        "workingset_refault_anon" => 55,
        "workingset_refault_file" => 56,
        "workingset_activate_anon" => 57,
        "workingset_activate_file" => 58,
        "workingset_restore_anon" => 59,
        "workingset_restore_file" => 60,
        "nr_zspages" => 61,
        "nr_zone_inactive_file" => 62,
        "nr_zone_active_file" => 63,
        "nr_zone_inactive_anon" => 64,
        "nr_zone_active_anon" => 65,
        "nr_zone_unevictable" => 66,
        "nr_zone_write_pending" => 67,
        _ => return None,
    })
}

struct Zone {
    name: String,
    node: u32,
    /// "" for a node's per-node counters.
    zone: String,
    /// Pages by item; `None`: not in this kernel's file (or not seen this refresh).
    vals: [Option<u64>; ITEMS],
    /// In the last refresh and not hidden.
    live: bool,
}

struct Prot {
    name: String,
    node: u32,
    zone: String,
    lowmem: u32,
    pages: Option<u64>,
}

#[derive(Default)]
pub struct ZoneInfo {
    buf: String,
    zones: Vec<Zone>,
    /// Indexes into `zones` in pmdalinux's numbering: a block's per-node entry is stored
    /// before its zone, both at the end of the block.
    order: Vec<usize>,
    prots: Vec<Prot>,
}

impl ZoneInfo {
    /// The index of instance `name`, added when new (`None` past [`MAX_INSTANCES`]).
    fn zone(&mut self, name: String, node: u32, zone: &str) -> Option<usize> {
        if let Some(i) = self.zones.iter().position(|z| z.name == name) {
            let z = &mut self.zones[i];
            z.vals = [None; ITEMS];
            return Some(i);
        }
        if self.zones.len() >= MAX_INSTANCES {
            return None;
        }
        self.zones.push(Zone {
            name,
            node,
            zone: zone.to_string(),
            vals: [None; ITEMS],
            live: false,
        });
        Some(self.zones.len() - 1)
    }

    fn register(&mut self, i: usize) {
        if !self.order.contains(&i) {
            self.order.push(i);
        }
    }

    /// `protection: (0, 2837, 15847, 15847, 15847)`.
    fn protection(&mut self, list: &str, node: u32, zone: &str, inst: &str) {
        let list = list.trim().trim_start_matches('(').trim_end_matches(')');
        for (lowmem, v) in list.split(',').enumerate() {
            let pages = v.trim().parse().unwrap_or(0);
            let name = format!("{inst}::lowmem_reserved{lowmem}");
            let new = || Prot {
                name: name.clone(),
                node,
                zone: zone.to_string(),
                lowmem: lowmem as u32,
                pages: None,
            };
            if let Some(p) = instance(&mut self.prots, &name, |p| &p.name, new) {
                p.pages = Some(pages);
            }
        }
    }

    fn parse(&mut self, text: &str) {
        let mut lines = text.lines().peekable();
        while let Some(line) = lines.next() {
            // "Node 0, zone   Normal"
            let Some((node, rest)) = line.strip_prefix("Node ").and_then(|l| l.split_once(','))
            else {
                continue;
            };
            let mut f = rest.split_ascii_whitespace();
            let (Ok(node), Some("zone"), Some(zone)) =
                (node.trim().parse::<u32>(), f.next(), f.next())
            else {
                continue;
            };
            let inst = format!("{zone}::node{node}");
            let Some(perzone) = self.zone(inst.clone(), node, zone) else {
                continue;
            };
            let mut at = perzone;
            let mut pernode = None;
            while let Some(line) = lines.next_if(|l| !l.starts_with("Node")) {
                if line.starts_with("  per-node stats") {
                    pernode = self.zone(format!("node{node}"), node, "");
                    at = pernode.unwrap_or(perzone);
                } else if line.starts_with("  pages ") {
                    at = perzone;
                }
                if let Some(list) = line.strip_prefix("        protection: (") {
                    self.protection(list, node, zone, &inst);
                    continue;
                }
                let t = line.trim_start();
                let (key, rest) = match t.strip_prefix("pages free") {
                    Some(r) => ("pages free", r),
                    None => t.split_once([' ', '\t']).unwrap_or((t, "")),
                };
                let (Some(item), Some(v)) = (
                    item_of(key),
                    rest.split_ascii_whitespace()
                        .next()
                        .and_then(|v| v.parse().ok()),
                ) else {
                    continue;
                };
                self.zones[at].vals[item] = Some(v);
            }
            if let Some(n) = pernode {
                self.zones[n].live = true;
                self.register(n);
            }
            self.register(perzone);
            let z = &mut self.zones[perzone];
            // A zone without pages (an empty Movable or Device zone) is hidden.
            z.live = z.vals[6].unwrap_or(0) != 0;
        }
    }
}

impl Group for ZoneInfo {
    fn answers(&self, m: &Metric) -> bool {
        (m.cluster == 68 && (m.item as usize) < ITEMS) || (m.cluster == 70 && m.item == 0)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        for z in &mut self.zones {
            z.live = false;
        }
        for p in &mut self.prots {
            p.pages = None;
        }
        let mut buf = std::mem::take(&mut self.buf);
        if let Ok(text) = ctx.root.read("proc/zoneinfo", &mut buf) {
            self.parse(text);
        }
        self.buf = buf;
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let page = super::meminfo::page_size();
        let kb = |pages: u64| pages.wrapping_mul(page) / 1024;
        if m.cluster == 70 {
            for p in &self.prots {
                if let Some(v) = p.pages {
                    out.push((p.name.clone(), Value::Uint(kb(v))));
                }
            }
            return;
        }
        for z in self
            .order
            .iter()
            .map(|&i| &self.zones[i])
            .filter(|z| z.live)
        {
            if let Some(v) = z.vals[m.item as usize] {
                out.push((z.name.clone(), Value::Uint(kb(v))));
            }
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        let i = match indom {
            ZONEINFO => self.order.iter().position(|&i| self.zones[i].name == name),
            ZONEINFO_PROTECTION => self.prots.iter().position(|p| p.name == name),
            _ => None,
        };
        i.map(|i| i as u32)
    }

    fn labels(&self, of: LabelsOf) -> Option<Vec<(String, serde_json::Value)>> {
        match of {
            LabelsOf::Instance(ZONEINFO, name) => {
                let z = self.zones.iter().find(|z| z.name == name)?;
                let mut out = vec![("numa_node".into(), z.node.into())];
                if !z.zone.is_empty() {
                    out.push(("zone".into(), z.zone.clone().into()));
                }
                Some(out)
            }
            LabelsOf::Instance(ZONEINFO_PROTECTION, name) => {
                let p = self.prots.iter().find(|p| p.name == name)?;
                Some(vec![
                    ("numa_node".into(), p.node.into()),
                    ("zone".into(), p.zone.clone().into()),
                    ("lowmem_reserved".into(), p.lowmem.into()),
                ])
            }
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch_f64};
    use super::{ZONEINFO, ZONEINFO_PROTECTION};
    use crate::namespace::{Agent, LabelsOf};

    /// One zone block in a 5.x kernel's shape; `pernode` adds the node's counters first.
    fn zone(node: u32, name: &str, free: u64, present: u64, pernode: bool) -> String {
        let mut s = format!("Node {node}, zone {name:>8}\n");
        if pernode {
            s += &format!(
                "  per-node stats\n      nr_inactive_anon {}\n      nr_active_anon 44\n      \
                 nr_dirtied 900\n      workingset_nodes 7\n",
                1000 + node
            );
        }
        s += &format!(
            "  pages free     {free}\n        boost    0\n        min      10\n        low      \
             20\n        high     30\n        spanned  {present}\n        present  {present}\n        \
             managed  {present}\n        cma      0\n        protection: (0, 2837, 15847, 15847)\n      \
             nr_free_pages {free}\n      nr_zone_inactive_anon 5\n      numa_hit     {}\n  \
             pagesets\n    cpu: 0\n              count: 1\n              high:  6\n  \
             node_unreclaimable:  0\n  start_pfn:           1\n",
            free * 2
        );
        s
    }

    #[test]
    fn two_nodes_four_zones_per_node_stats_and_protection() {
        let mut text = String::new();
        for node in 0..2 {
            text += &zone(node, "DMA", 3968, 3999, true);
            text += &zone(node, "DMA32", 500_000, 700_000, false);
            text += &zone(node, "Normal", 7_000_000, 8_000_000, false);
            text += &zone(node, "Movable", 0, 0, false);
        }
        let (_dir, mut a) = agent(&[("proc/zoneinfo", &text)]);
        let kb = super::super::meminfo::page_size() as f64 / 1024.0;
        let free = fetch_f64(&mut a, "mem.zoneinfo.free");
        let names: Vec<&str> = free.iter().map(|(n, _)| n.as_str()).collect();
        // The empty Movable zones are hidden; per-node entries have no watermarks.
        assert_eq!(
            names,
            [
                "DMA::node0",
                "DMA32::node0",
                "Normal::node0",
                "DMA::node1",
                "DMA32::node1",
                "Normal::node1"
            ]
        );
        assert_eq!(free[2].1, 7_000_000.0 * kb);
        let anon = fetch_f64(&mut a, "mem.zoneinfo.nr_inactive_anon");
        assert_eq!(
            anon,
            [
                ("node0".to_string(), 1000.0 * kb),
                ("node1".to_string(), 1001.0 * kb)
            ]
        );
        let hit = fetch_f64(&mut a, "mem.zoneinfo.numa_hit");
        assert_eq!(hit[5], ("Normal::node1".to_string(), 14_000_000.0 * kb));
        // Not parsed by pmdalinux, so never a value.
        assert!(fetch_f64(&mut a, "mem.zoneinfo.nr_free_pages").is_empty());
        // An old key this kernel lacks.
        assert!(fetch_f64(&mut a, "mem.zoneinfo.nr_alloc_batch").is_empty());
        // pmdalinux's numbering: each block's node entry, then its zone; hidden ones count.
        assert_eq!(a.instance_id(ZONEINFO, "node0"), Some(0));
        assert_eq!(a.instance_id(ZONEINFO, "DMA::node0"), Some(1));
        assert_eq!(a.instance_id(ZONEINFO, "Movable::node0"), Some(4));
        assert_eq!(a.instance_id(ZONEINFO, "node1"), Some(5));
        let prot = fetch_f64(&mut a, "mem.zoneinfo.protection");
        assert_eq!(prot.len(), 2 * 4 * 4);
        assert_eq!(
            prot[2],
            ("DMA::node0::lowmem_reserved2".to_string(), 15847.0 * kb)
        );
        assert_eq!(prot[31].0, "Movable::node1::lowmem_reserved3");
        let l = |a: &mut LinuxAgent, indom, n| {
            serde_json::to_string(&a.labels(LabelsOf::Instance(indom, n))).unwrap()
        };
        assert_eq!(
            l(&mut a, ZONEINFO, "Normal::node1"),
            r#"[["numa_node",1],["zone","Normal"]]"#
        );
        assert_eq!(l(&mut a, ZONEINFO, "node1"), r#"[["numa_node",1]]"#);
        assert_eq!(
            l(
                &mut a,
                ZONEINFO_PROTECTION,
                "DMA32::node1::lowmem_reserved1"
            ),
            r#"[["numa_node",1],["zone","DMA32"],["lowmem_reserved",1]]"#
        );
    }

    /// A 3.10 kernel on a 4-node host: per-zone counters only (no per-node section),
    /// `scanned` and `nr_alloc_batch` present.
    #[test]
    fn an_old_four_node_host_without_per_node_stats() {
        let mut text = String::new();
        for node in 0..4 {
            text += &format!(
                "Node {node}, zone   Normal\n  pages free     {}\n        min      11\n        \
                 low      13\n        high     16\n        scanned  5\n        spanned  \
                 4194304\n        present  4194304\n        managed  4100000\n    \
                 nr_free_pages {}\n    nr_alloc_batch 63\n    nr_inactive_anon 9\n        \
                 protection: (0, 0, 0, 0)\n  pagesets\n",
                100 + node,
                100 + node
            );
        }
        let (dir, mut a) = agent(&[("proc/zoneinfo", &text)]);
        let kb = super::super::meminfo::page_size() as f64 / 1024.0;
        let free = fetch_f64(&mut a, "mem.zoneinfo.free");
        assert_eq!(free.len(), 4);
        assert_eq!(free[3], ("Normal::node3".to_string(), 103.0 * kb));
        let batch = fetch_f64(&mut a, "mem.zoneinfo.nr_alloc_batch");
        assert_eq!(batch[0], ("Normal::node0".to_string(), 63.0 * kb));
        assert_eq!(fetch_f64(&mut a, "mem.zoneinfo.scanned").len(), 4);
        assert!(fetch_f64(&mut a, "mem.zoneinfo.nr_zone_inactive_anon").is_empty());
        assert_eq!(fetch_f64(&mut a, "mem.zoneinfo.protection").len(), 16);
        // The file vanishing leaves no values, then they come back with the same numbers.
        std::fs::remove_file(dir.path().join("proc/zoneinfo")).unwrap();
        assert!(fetch_f64(&mut a, "mem.zoneinfo.free").is_empty());
        assert!(fetch_f64(&mut a, "mem.zoneinfo.protection").is_empty());
        assert_eq!(a.instance_id(ZONEINFO, "Normal::node3"), Some(3));
    }

    #[test]
    fn this_host_agrees_with_proc_zoneinfo() {
        let Ok(text) = std::fs::read_to_string("/proc/zoneinfo") else {
            return;
        };
        let mut a = LinuxAgent::new();
        let kb = super::super::meminfo::page_size() as f64 / 1024.0;
        let spanned = fetch_f64(&mut a, "mem.zoneinfo.spanned");
        for (name, v) in spanned {
            let (zone, node) = name.split_once("::node").unwrap();
            let head = format!("Node {node}, zone {zone:>8}");
            let block = text
                .split("Node ")
                .find(|b| format!("Node {b}").starts_with(&head));
            let want: f64 = block
                .unwrap()
                .lines()
                .find_map(|l| l.trim().strip_prefix("spanned"))
                .unwrap()
                .trim()
                .parse()
                .unwrap();
            assert_eq!(v, want * kb, "{name}");
        }
    }
}
