//! `/sys/kernel` (cluster 35, items 0 and 1): the udev event sequence number
//! (`uevent_seqnum`) and, per NUMA node, the sum of the Normal zone's unusable free space
//! indices (`debug/extfrag/unusable_index`, readable by root only). Cluster 35's other items
//! (zswap, balloon drivers) belong to the memory groups.

use super::indom::NODE;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

#[derive(Default)]
pub struct SysfsKernel {
    buf: String,
    seqnum: Option<u64>,
    /// (node, summed index), in file order.
    extfrag: Vec<(u32, f32)>,
}

/// `Node 0, zone   Normal 0.000 0.000 ...` → (0, sum) for Normal zones.
fn extfrag(text: &str, out: &mut Vec<(u32, f32)>) {
    out.clear();
    for line in text.lines() {
        let Some(rest) = line.get(5..) else { continue };
        let mut f = rest.split_ascii_whitespace();
        let Some(node) = f
            .next()
            .and_then(|n| n.strip_suffix(','))
            .and_then(|n| n.parse().ok())
        else {
            continue;
        };
        let (Some(_), Some("Normal")) = (f.next(), f.next()) else {
            continue;
        };
        // At most 16 orders, as pmdalinux scans; at least one.
        let vals: Vec<f32> = f.take(16).map_while(|x| x.parse().ok()).collect();
        if vals.is_empty() {
            continue;
        }
        let sum = vals.iter().sum();
        match out.iter_mut().find(|(n, _)| *n == node) {
            Some(e) => e.1 = sum,
            None => out.push((node, sum)),
        }
    }
}

impl Group for SysfsKernel {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 35 && m.item <= 1
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.seqnum = ctx.root.attr("sys/kernel/uevent_seqnum").ok().map(|t| {
            let d = t.bytes().take_while(u8::is_ascii_digit).count();
            t[..d].parse().unwrap_or(0)
        });
        match ctx
            .root
            .read("sys/kernel/debug/extfrag/unusable_index", &mut self.buf)
        {
            Ok(text) => extfrag(text, &mut self.extfrag),
            Err(_) => self.extfrag.clear(),
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        match m.item {
            0 => out.extend(self.seqnum.map(|v| (String::new(), Value::Uint(v)))),
            1 => out.extend(
                self.extfrag
                    .iter()
                    .map(|(n, v)| (format!("node{n}"), Value::Real(f64::from(*v)))),
            ),
            _ => {}
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        (indom == NODE)
            .then(|| name.strip_prefix("node")?.parse().ok())
            .flatten()
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64, one};

    #[test]
    fn seqnum_and_normal_zone_fragmentation_per_node() {
        let (_dir, mut a) = agent(&[
            ("sys/kernel/uevent_seqnum", "4242\n"),
            (
                "sys/kernel/debug/extfrag/unusable_index",
                "Node 0, zone      DMA 0.000 0.000 0.000\n\
                 Node 0, zone   Normal 0.000 0.250 0.500\n\
                 Node 1, zone   Normal 0.100 0.100\n",
            ),
        ]);
        assert_eq!(one(&mut a, "sysfs.kernel.uevent_seqnum"), Some(4242.0));
        let f = fetch_f64(&mut a, "sysfs.kernel.debug.extfrag_unusable");
        assert_eq!(f.len(), 2);
        assert_eq!(f[0].0, "node0");
        assert!((f[0].1 - 0.75).abs() < 1e-6 && (f[1].1 - 0.2).abs() < 1e-6);
        let (_dir, mut a) = agent(&[]);
        assert_eq!(one(&mut a, "sysfs.kernel.uevent_seqnum"), None);
    }
}
