//! `/proc/buddyinfo` (cluster 67, `mem.buddyinfo.*`): free blocks of each order per zone
//! per NUMA node. One instance per (zone, order, node), named `ZONE::orderK::nodeN` and
//! numbered in order of first appearance, as pmdalinux numbers them (its instance number
//! is its index); `total` is the free memory those blocks hold, in Kbyte.
//!
//! Owns this cluster's parsing and its instances' labels.

use super::indom::BUDDYINFO;
use super::rows::instance;
use super::{Ctx, Group, Metric};
use crate::namespace::{LabelsOf, Value, Values};

struct Buddy {
    name: String,
    zone: String,
    order: u32,
    pages: Option<u64>,
}

#[derive(Default)]
pub struct BuddyInfo {
    buf: String,
    /// Every instance seen since start, in order of first appearance (index = number).
    buddies: Vec<Buddy>,
    /// Orders per zone: the first line's count, fixed at first read as pmdalinux does.
    orders: Option<usize>,
}

impl BuddyInfo {
    fn parse(&mut self, text: &str) {
        for b in &mut self.buddies {
            b.pages = None;
        }
        for line in text.lines() {
            // "Node 0, zone   Normal   1351   7691 ..."
            let Some((node, rest)) = line.strip_prefix("Node ").and_then(|l| l.split_once(','))
            else {
                continue;
            };
            let Ok(node) = node.trim().parse::<u32>() else {
                continue;
            };
            let mut f = rest.split_ascii_whitespace();
            if f.next() != Some("zone") {
                continue;
            }
            let Some(zone) = f.next() else { continue };
            let counts: Vec<&str> = f.collect();
            let orders = *self.orders.get_or_insert(counts.len());
            for order in 0..orders {
                // strtoul: a missing or bad count is 0.
                let pages = counts.get(order).and_then(|c| c.parse().ok()).unwrap_or(0);
                let name = format!("{zone}::order{order}::node{node}");
                let new = || Buddy {
                    name: name.clone(),
                    zone: zone.to_string(),
                    order: order as u32,
                    pages: None,
                };
                if let Some(b) = instance(&mut self.buddies, &name, |b| &b.name, new) {
                    b.pages = Some(pages);
                }
            }
        }
    }
}

impl Group for BuddyInfo {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 67 && m.item <= 1
    }

    fn refresh(&mut self, ctx: &Ctx) {
        let mut buf = std::mem::take(&mut self.buf);
        match ctx.root.read("proc/buddyinfo", &mut buf) {
            Ok(text) => self.parse(text),
            Err(_) => self.buddies.iter_mut().for_each(|b| b.pages = None),
        }
        self.buf = buf;
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let shift = super::meminfo::page_size().trailing_zeros();
        for b in &self.buddies {
            let Some(pages) = b.pages else { continue };
            let v = if m.item == 0 {
                pages
            } else {
                ((pages << b.order) << shift) >> 10
            };
            out.push((b.name.clone(), Value::Uint(v)));
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        if indom != BUDDYINFO {
            return None;
        }
        self.buddies
            .iter()
            .position(|b| b.name == name)
            .map(|i| i as u32)
    }

    fn labels(&self, of: LabelsOf) -> Option<Vec<(String, serde_json::Value)>> {
        let LabelsOf::Instance(BUDDYINFO, name) = of else {
            return None;
        };
        let b = self.buddies.iter().find(|b| b.name == name)?;
        // pmdalinux takes the node with atoi("nodeN"), which is 0 on every node; kept so the
        // labels match the reference.
        Some(vec![
            ("numa_node".into(), 0.into()),
            ("zone".into(), b.zone.clone().into()),
            ("order".into(), b.order.into()),
        ])
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch_f64};
    use crate::namespace::{Agent, LabelsOf};

    /// Two nodes: node 0 with DMA, DMA32 and Normal, node 1 with Normal and Movable.
    const TWO_NODES: &str = "\
Node 0, zone      DMA      1      0      1      0      2      1      1      0      1      1      3 
Node 0, zone    DMA32   1234    567     89     10      5      4      3      2      1      0    752 
Node 0, zone   Normal  40000  20000  10000   5000   2500   1200    600    300    150     75     30 
Node 1, zone   Normal  41000  21000  11000   5100   2600   1300    700    400    250    175     40 
Node 1, zone  Movable      7      6      5      4      3      2      1      0      0      0      0 
";

    #[test]
    fn every_zone_order_and_node_is_an_instance() {
        let (_dir, mut a) = agent(&[("proc/buddyinfo", TWO_NODES)]);
        let pages = fetch_f64(&mut a, "mem.buddyinfo.pages");
        assert_eq!(pages.len(), 5 * 11);
        assert_eq!(pages[0], ("DMA::order0::node0".to_string(), 1.0));
        assert_eq!(pages[21], ("DMA32::order10::node0".to_string(), 752.0));
        assert_eq!(pages[33], ("Normal::order0::node1".to_string(), 41000.0));
        assert_eq!(pages[54], ("Movable::order10::node1".to_string(), 0.0));
        let total = fetch_f64(&mut a, "mem.buddyinfo.total");
        let kb = super::super::meminfo::page_size() as f64 / 1024.0;
        // order 3: 8 pages a block.
        assert_eq!(
            total[25],
            ("Normal::order3::node0".to_string(), 5000.0 * 8.0 * kb)
        );
        assert_eq!(
            a.instance_id(super::BUDDYINFO, "Normal::order0::node1"),
            Some(33)
        );
        let labels = a.labels(LabelsOf::Instance(
            super::BUDDYINFO,
            "Movable::order2::node1",
        ));
        assert_eq!(
            serde_json::to_string(&labels).unwrap(),
            r#"[["numa_node",0],["zone","Movable"],["order",2]]"#
        );
    }

    #[test]
    fn an_older_kernel_with_fewer_orders_and_junk_lines() {
        let (_dir, mut a) = agent(&[(
            "proc/buddyinfo",
            "Node 0, zone   Normal 5 4 3\nNode x, zone DMA 1 2 3\ngarbage\nNode 0, zone HighMem 9\n",
        )]);
        let pages = fetch_f64(&mut a, "mem.buddyinfo.pages");
        let want = [
            ("Normal::order0::node0", 5.0),
            ("Normal::order1::node0", 4.0),
            ("Normal::order2::node0", 3.0),
            ("HighMem::order0::node0", 9.0),
            ("HighMem::order1::node0", 0.0),
            ("HighMem::order2::node0", 0.0),
        ];
        assert_eq!(
            pages,
            want.iter()
                .map(|(n, v)| (n.to_string(), *v))
                .collect::<Vec<_>>()
        );
        let (_empty, mut a) = agent(&[]);
        assert!(fetch_f64(&mut a, "mem.buddyinfo.total").is_empty());
    }

    #[test]
    fn this_host_agrees_with_proc_buddyinfo() {
        let Ok(text) = std::fs::read_to_string("/proc/buddyinfo") else {
            return;
        };
        let lines = text.lines().filter(|l| l.starts_with("Node")).count();
        let orders = text.lines().next().unwrap().split_whitespace().count() - 4;
        let mut a = LinuxAgent::new();
        assert_eq!(
            fetch_f64(&mut a, "mem.buddyinfo.pages").len(),
            lines * orders
        );
    }
}
