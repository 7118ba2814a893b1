//! `/proc/net/sockstat` and `sockstat6` (clusters 11 and 73, `network.sockstat.*`): lines
//! of a protocol then `name value` pairs (`TCP: inuse 7 orphan 0 tw 0 alloc 11 mem 11`).
//! Each metric names its (protocol, field); a field this kernel lacks has no value.
//!
//! Owns these two files only.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// (cluster, item, protocol, field) of every metric.
const FIELDS: &[(u32, u32, &str, &str)] = &[
    (11, 0, "TCP", "inuse"),
    (11, 3, "UDP", "inuse"),
    (11, 6, "RAW", "inuse"),
    (11, 8, "UDPLITE", "inuse"),
    (11, 9, "sockets", "used"),
    (11, 10, "TCP", "orphan"),
    (11, 11, "TCP", "tw"),
    (11, 12, "TCP", "alloc"),
    (11, 13, "TCP", "mem"),
    (11, 14, "UDP", "mem"),
    (11, 15, "FRAG", "inuse"),
    (11, 16, "FRAG", "memory"),
    (73, 0, "TCP6", "inuse"),
    (73, 1, "UDP6", "inuse"),
    (73, 2, "UDPLITE6", "inuse"),
    (73, 3, "RAW6", "inuse"),
    (73, 4, "FRAG6", "inuse"),
    (73, 5, "FRAG6", "memory"),
];

#[derive(Default)]
pub struct SockStat {
    buf: String,
    /// By row of [`FIELDS`].
    vals: Vec<Option<i64>>,
}

impl SockStat {
    fn parse(&mut self, cluster: u32) {
        for line in self.buf.lines() {
            let Some((proto, rest)) = line.split_once(':') else {
                continue;
            };
            let mut f = rest.split_ascii_whitespace();
            while let (Some(k), Some(v)) = (f.next(), f.next()) {
                if let Some(i) = FIELDS
                    .iter()
                    .position(|&(c, _, p, n)| c == cluster && p == proto && n == k)
                {
                    self.vals[i] = v.parse().ok();
                }
            }
        }
    }
}

impl Group for SockStat {
    fn answers(&self, m: &Metric) -> bool {
        FIELDS
            .iter()
            .any(|&(c, i, ..)| (c, i) == (m.cluster, m.item))
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.vals.clear();
        self.vals.resize(FIELDS.len(), None);
        for (cluster, rel) in [(11, "proc/net/sockstat"), (73, "proc/net/sockstat6")] {
            if ctx.root.read(rel, &mut self.buf).is_ok() {
                self.parse(cluster);
            }
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if let Some(i) = FIELDS
            .iter()
            .position(|&(c, i, ..)| (c, i) == (m.cluster, m.item))
            && let Some(Some(v)) = self.vals.get(i)
        {
            out.push((String::new(), Value::Int(*v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::agent;

    #[test]
    fn fields_by_protocol_and_name_old_and_new_kernels() {
        // An old kernel: no UDPLITE, no "mem" on UDP; sockstat6 absent.
        let old = "sockets: used 312\nTCP: inuse 20 orphan 1 tw 9 alloc 25 mem 3\nUDP: inuse 4\nRAW: inuse 0\nFRAG: inuse 0 memory 0\n";
        let (_dir, mut a) = agent(&[("proc/net/sockstat", old)]);
        a.expect(
            "network.sockstat.total 312
            network.sockstat.tcp.tw 9
            network.sockstat.tcp.mem 3
            network.sockstat.udp.inuse 4
            network.sockstat.udp.mem -
            network.sockstat.udplite.inuse -
            network.sockstat.tcp6.inuse -",
        );

        let new = "sockets: used 81\nTCP: inuse 7 orphan 0 tw 0 alloc 11 mem 11\nUDP: inuse 0 mem 2\nUDPLITE: inuse 0\nRAW: inuse 1\nFRAG: inuse 0 memory 0\n";
        let six = "TCP6: inuse 4\nUDP6: inuse 2\nUDPLITE6: inuse 0\nRAW6: inuse 0\nFRAG6: inuse 1 memory 1024\n";
        let (_dir, mut a) = agent(&[("proc/net/sockstat", new), ("proc/net/sockstat6", six)]);
        a.expect(
            "network.sockstat.udp.mem 2
            network.sockstat.raw.inuse 1
            network.sockstat.tcp6.inuse 4
            network.sockstat.frag6.memory 1024",
        );
    }
}
