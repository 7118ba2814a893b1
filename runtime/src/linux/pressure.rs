//! `/proc/pressure/{cpu,memory,io,irq}` (clusters 83, 84, 85, 93): pressure stall
//! information, the share of time tasks stalled over the last 10 s, 1 and 5 min (instances
//! "10 second", "1 minute", "5 minute", numbered 10, 60, 300 as pmdalinux numbers them) and
//! the total stall time in microseconds.
//!
//! As pmdalinux reads them: `cpu` gives its `some` line, `memory` and `io` their `some` then
//! `full` lines, `irq` its `full` line, each expected in that order; a kernel without PSI
//! (before 4.20, or booted with `psi=0`) lacks the files and the metrics have no value.

use super::indom::PRESSUREAVG;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// One `some` or `full` line: averages over 10 s, 60 s, 300 s and the total.
#[derive(Clone, Copy, Default)]
struct Line {
    avg: [f32; 3],
    total: u64,
}

/// Files, the lines pmdalinux reads from each in order, and their cluster.
const FILES: [(&str, &[&str], u32); 4] = [
    ("proc/pressure/cpu", &["some"], 83),
    ("proc/pressure/memory", &["some", "full"], 84),
    ("proc/pressure/io", &["some", "full"], 85),
    ("proc/pressure/irq", &["full"], 93),
];

#[derive(Default)]
pub struct Pressure {
    buf: String,
    /// By file (order of [`FILES`]), by line read: `None` when it could not be read.
    now: [[Option<Line>; 2]; 4],
}

/// `some avg10=0.00 avg60=0.00 avg300=0.00 total=0` with the given kind.
fn parse_line(line: &str, kind: &str) -> Option<Line> {
    let mut f = line.strip_prefix(kind)?.split_ascii_whitespace();
    let mut field = |key: &str| f.next()?.strip_prefix(key);
    let a: f32 = field("avg10=")?.parse().ok()?;
    let b: f32 = field("avg60=")?.parse().ok()?;
    let c: f32 = field("avg300=")?.parse().ok()?;
    let total = field("total=")?.parse().ok()?;
    Some(Line {
        avg: [a, b, c],
        total,
    })
}

impl Group for Pressure {
    fn answers(&self, m: &Metric) -> bool {
        FILES.iter().any(|f| f.2 == m.cluster)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        for (i, (rel, kinds, _)) in FILES.iter().enumerate() {
            self.now[i] = [None, None];
            let Ok(text) = ctx.root.read(rel, &mut self.buf) else {
                continue;
            };
            // pmdalinux scans its lines in sequence and stops at the first that does not
            // match: a `full` line is read only after its `some` line.
            let mut lines = text.lines();
            for (k, kind) in kinds.iter().enumerate() {
                match lines.next().and_then(|l| parse_line(l, kind)) {
                    Some(l) => self.now[i][k] = Some(l),
                    None => break,
                }
            }
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(file) = FILES.iter().position(|f| f.2 == m.cluster) else {
            return;
        };
        // Items: even the averages, odd the total, of the file's first then second line.
        let Some(line) = self.now[file].get(m.item as usize / 2).copied().flatten() else {
            return;
        };
        if m.item.is_multiple_of(2) {
            out.extend(
                ["10 second", "1 minute", "5 minute"]
                    .iter()
                    .zip(line.avg)
                    .map(|(n, v)| (n.to_string(), Value::Real(f64::from(v)))),
            );
        } else {
            out.push((String::new(), Value::Uint(line.total)));
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        if indom != PRESSUREAVG {
            return None;
        }
        match name {
            "10 second" => Some(10),
            "1 minute" => Some(60),
            "5 minute" => Some(300),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch, fetch_f64, one};
    use crate::namespace::Agent;

    #[test]
    fn some_and_full_lines_of_each_file() {
        let (_dir, mut a) = agent(&[
            (
                "proc/pressure/cpu",
                "some avg10=82.04 avg60=79.69 avg300=75.87 total=1847763279\n\
                 full avg10=0.00 avg60=0.00 avg300=0.00 total=0\n",
            ),
            (
                "proc/pressure/io",
                "some avg10=0.48 avg60=0.46 avg300=0.62 total=35347606\n\
                 full avg10=0.10 avg60=0.20 avg300=0.30 total=3772456\n",
            ),
            (
                "proc/pressure/irq",
                "full avg10=1.00 avg60=2.00 avg300=3.00 total=99\n",
            ),
        ]);
        let cpu = fetch_f64(&mut a, "kernel.all.pressure.cpu.some.avg");
        assert_eq!(cpu[0].0, "10 second");
        assert!((cpu[0].1 - 82.04).abs() < 1e-4 && (cpu[2].1 - 75.87).abs() < 1e-4);
        a.expect(
            "kernel.all.pressure.cpu.some.total 1847763279
            kernel.all.pressure.io.full.total 3772456",
        );
        assert_eq!(
            fetch_f64(&mut a, "kernel.all.pressure.io.full.avg")[1].0,
            "1 minute"
        );
        assert_eq!(
            one(&mut a, "kernel.all.pressure.irq.full.total"),
            Some(99.0)
        );
        // No memory file (an old kernel): its metrics only have no value.
        assert!(fetch(&mut a, "kernel.all.pressure.memory.some.avg").is_empty());
        assert_eq!(one(&mut a, "kernel.all.pressure.memory.full.total"), None);
        assert_eq!(a.instance_id(super::PRESSUREAVG, "5 minute"), Some(300));
    }

    #[test]
    fn a_malformed_some_line_hides_the_full_line_too() {
        let (_dir, mut a) = agent(&[(
            "proc/pressure/memory",
            "some avg10=x avg60=0 avg300=0 total=1\nfull avg10=0 avg60=0 avg300=0 total=5\n",
        )]);
        a.expect(
            "kernel.all.pressure.memory.some.total -
            kernel.all.pressure.memory.full.total -",
        );
    }
}
