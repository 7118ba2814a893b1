//! `/proc/net/softnet_stat` (cluster 57, `network.softnet.*`): a line per online CPU of hex
//! counters; columns 1-3 are processed, dropped and time squeezes, 9-11 CPU collisions,
//! RPS receives and flow-limit drops (older kernels stop after 9 or 10 columns: those
//! metrics then have no value, as pmdalinux decides it from the last line). Lines are the
//! online CPUs in order, so line N is the Nth `cpuN` of `/proc/stat`, named as the CPU
//! indom names them; the sums over CPUs are the singular metrics.
//!
//! Owns this file only (it reads `/proc/stat`'s CPU names, not its values).

use super::rows::Rows;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Columns (0-based) of items 0..=5 (and 6..=11 per CPU).
const COLUMNS: [usize; 6] = [0, 1, 2, 8, 9, 10];

/// Most CPUs taken from the file: far above any real host (see `read::MAX_ENTRIES`).
const MAX_CPUS: usize = 65_536;

#[derive(Default)]
pub struct SoftNet {
    buf: String,
    /// (CPU name, counters of [`COLUMNS`]).
    rows: Rows<6>,
    /// How many of [`COLUMNS`] the last line had.
    have: usize,
}

/// Names of the online CPUs from `/proc/stat`'s `cpuN` lines, in order.
fn online_cpus(stat: &str) -> Vec<String> {
    stat.lines()
        .filter_map(|l| l.split_ascii_whitespace().next())
        .filter(|n| {
            n.len() > 3 && n.starts_with("cpu") && n[3..].bytes().all(|b| b.is_ascii_digit())
        })
        .map(str::to_string)
        .collect()
}

impl Group for SoftNet {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 57 && m.item < 12
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.rows.reset(true);
        self.have = 0;
        let cpus = match ctx.root.read("proc/stat", &mut self.buf) {
            Ok(t) => online_cpus(t),
            Err(_) => Vec::new(),
        };
        let Ok(text) = ctx.root.read("proc/net/softnet_stat", &mut self.buf) else {
            return;
        };
        for (n, line) in text.lines().take(MAX_CPUS).enumerate() {
            let mut cols = [0u64; 11];
            let mut got = 0;
            for (slot, f) in cols.iter_mut().zip(line.split_ascii_whitespace()) {
                match u64::from_str_radix(f, 16) {
                    Ok(v) => *slot = v,
                    Err(_) => break,
                }
                got += 1;
            }
            if got == 0 {
                continue;
            }
            self.have = COLUMNS.iter().filter(|&&c| c < got).count();
            // Before column 9 nothing is trusted (pmdalinux: fewer than 9 fields, no flags).
            if got < 9 {
                self.have = 0;
            }
            let name = cpus.get(n).cloned().unwrap_or_else(|| format!("cpu{n}"));
            self.rows.push(name, COLUMNS.map(|c| cols[c]));
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let col = (m.item % 6) as usize;
        if col >= self.have || self.rows.is_empty() {
            return;
        }
        if m.item < 6 {
            out.push((String::new(), Value::Uint(self.rows.total(col))));
        } else {
            self.rows.column(col, out);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64, one};

    #[test]
    fn per_cpu_rows_follow_the_online_cpus_and_old_kernels_lack_columns() {
        // CPU 1 offline: lines are cpu0, cpu2, cpu3. A 6.x kernel's 13 columns.
        let stat = "cpu  1 2 3 4\ncpu0 1 2 3 4\ncpu2 1 2 3 4\ncpu3 1 2 3 4\nintr 5\n";
        let sn = "\
00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000003 00000004 00000005 00000000 00000000
000000ff 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000001 00000000 00000000 00000002
00000001 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000000 00000003
";
        let (_dir, mut a) = agent(&[("proc/stat", stat), ("proc/net/softnet_stat", sn)]);
        assert_eq!(
            one(&mut a, "network.softnet.processed"),
            Some(16.0 + 255.0 + 1.0)
        );
        assert_eq!(one(&mut a, "network.softnet.flow_limit_count"), Some(5.0));
        let p = fetch_f64(&mut a, "network.softnet.percpu.processed");
        assert_eq!(
            p,
            vec![
                ("cpu0".into(), 16.0),
                ("cpu2".into(), 255.0),
                ("cpu3".into(), 1.0)
            ]
        );
        assert_eq!(
            fetch_f64(&mut a, "network.softnet.percpu.received_rps")[1],
            ("cpu2".into(), 1.0)
        );

        // A 2.6.32 kernel: 10 columns, no flow limit.
        let old = "00000010 00000001 00000002 00000000 00000000 00000000 00000000 00000000 00000003 00000004\n";
        let (_dir, mut a) = agent(&[("proc/stat", "cpu0 1\n"), ("proc/net/softnet_stat", old)]);
        a.expect(
            "network.softnet.received_rps 4
            network.softnet.flow_limit_count -",
        );
        assert!(fetch_f64(&mut a, "network.softnet.percpu.flow_limit_count").is_empty());
    }
}
