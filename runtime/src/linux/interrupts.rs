//! `/proc/interrupts` (cluster 4) and `/proc/softirqs` (clusters 63 and 82): counts per
//! interrupt line (or softirq) per CPU, their totals per line and per CPU, and the kernel's
//! error and missed-interrupt counts.
//!
//! Both files have a header naming the online CPUs (`CPU0 CPU1 ...`), then one row per line:
//! a name ending in `:`, one count per header column, and for interrupts a description. As in
//! pmdalinux, a line is instance `NAME` and a count `NAME::cpuN`, where N is the column's CPU
//! as pmdalinux's column-to-CPU mapping finds it; the description, with whitespace squashed,
//! is the instance's `irqtext` label. A 1,152-CPU host's file is about 1 MB: rows are parsed
//! in place into one flat vector of counts reused across fetches.

use super::indom::{CPU, INTERRUPT, INTERRUPT_CPU, SOFTIRQ, SOFTIRQ_CPU};
use super::{Ctx, Group, Metric};
use crate::namespace::{LabelsOf, Value, Values};
use crate::util::strtoul;
use serde_json::json;

/// Most columns taken from a header: more CPUs than any Linux kernel supports
/// (CONFIG_NR_CPUS tops at 8,192), so a hostile header cannot size the tables without bound.
const MAX_COLUMNS: usize = 16_384;

/// One parsed file: header CPUs, rows of counts.
#[derive(Default)]
struct Table {
    buf: String,
    ok: bool,
    /// CPU number of each header column.
    header: Vec<u32>,
    /// pmdalinux's CPU for each column (its `column_to_cpuid`).
    cpu_of: Vec<u32>,
    /// True when `cpu_of` is the identity (all CPUs online): no two columns share a CPU.
    identity: bool,
    /// With offline CPUs two columns may map to one CPU, and pmdalinux keeps the last count
    /// under the one name: (row number + 1, index in `counts`) of each CPU's cell.
    seen: Vec<(usize, usize)>,
    /// Per row: (name, description, first index in `counts`, number of counts).
    rows: Vec<Row>,
    /// The rows' per-column counts, back to back.
    counts: Vec<(u32, u64)>,
    /// Sum over rows, by header column slot (`column_to_cpuid` folded).
    per_cpu: Vec<u64>,
    /// `ERR:` and `MIS:` rows (interrupts only), kept across refreshes as pmdalinux does.
    err: u64,
    mis: u64,
}

struct Row {
    name: String,
    text: String,
    start: usize,
    len: usize,
    total: u64,
}

impl Table {
    /// Reads and parses `rel` (`/proc/interrupts` when `interrupts`, else
    /// `/proc/softirqs`); unreadable: no rows, no values.
    fn refresh(&mut self, ctx: &Ctx, rel: &str, interrupts: bool) {
        if ctx.root.read(rel, &mut self.buf).is_ok() {
            self.parse(interrupts);
        } else {
            self.ok = false;
            self.rows.clear();
        }
    }

    /// pmdalinux's `column_to_cpuid`: the column itself when its header CPU has that number,
    /// else the column whose CPU has the column's number, else 0.
    fn map_columns(&mut self) {
        // Index of each CPU number's column, for CPU numbers below this bound.
        let mut pos = vec![u32::MAX; self.header.len().min(MAX_COLUMNS)];
        for (col, &cpu) in self.header.iter().enumerate() {
            if let Some(p) = pos.get_mut(cpu as usize)
                && *p == u32::MAX
            {
                *p = col as u32;
            }
        }
        self.cpu_of.clear();
        for (col, &cpu) in self.header.iter().enumerate() {
            let c = if cpu as usize == col {
                col as u32
            } else {
                pos.get(col)
                    .copied()
                    .filter(|&p| p != u32::MAX)
                    .unwrap_or(0)
            };
            self.cpu_of.push(c);
        }
        self.identity = self
            .cpu_of
            .iter()
            .enumerate()
            .all(|(i, &c)| c as usize == i);
        self.seen.clear();
        self.seen.resize(self.header.len(), (0, 0));
    }

    /// Slot of CPU instance `n` in `per_cpu` (pmdalinux's `column_to_cpuid(inst)`).
    fn slot(&self, n: u32) -> usize {
        let n = n as usize;
        if self.header.get(n).is_some_and(|&c| c as usize == n) {
            return n;
        }
        self.header
            .iter()
            .position(|&c| c as usize == n)
            .unwrap_or(0)
    }

    fn parse(&mut self, interrupts: bool) {
        let text = std::mem::take(&mut self.buf);
        self.header.clear();
        self.counts.clear();
        // Rows of the previous refresh are reused: names and descriptions keep their
        // allocations when the file's shape is unchanged (the usual case).
        let mut nrows = 0;
        self.ok = false;
        let mut lines = text.split_inclusive('\n');
        let Some(head) = lines.next() else {
            self.buf = text;
            self.rows.clear();
            return;
        };
        self.header.extend(
            head.split(|c: char| !c.is_ascii_digit())
                .filter(|w| !w.is_empty())
                .filter_map(|w| w.parse::<u32>().ok())
                .take(MAX_COLUMNS),
        );
        self.map_columns();
        self.per_cpu.clear();
        self.per_cpu.resize(self.header.len(), 0);
        for line in lines {
            if interrupts {
                if let Some(v) = counter_row(line, &["ERR:", "Err:", "BAD:"]) {
                    self.err = v;
                    continue;
                }
                if let Some(v) = counter_row(line, &["MIS:"]) {
                    self.mis = v;
                    continue;
                }
            }
            let Some((name, rest)) = split_name(line) else {
                continue;
            };
            let start = self.counts.len();
            let (total, text_at) = self.values(rest, nrows + 1);
            let len = self.counts.len() - start;
            let desc = &rest[text_at..];
            if nrows < self.rows.len() {
                let r = &mut self.rows[nrows];
                if r.name != name {
                    r.name.clear();
                    r.name.push_str(name);
                }
                squash_into(desc, &mut r.text);
                (r.start, r.len, r.total) = (start, len, total);
            } else {
                let mut t = String::new();
                squash_into(desc, &mut t);
                self.rows.push(Row {
                    name: name.to_string(),
                    text: t,
                    start,
                    len,
                    total,
                });
            }
            nrows += 1;
        }
        self.rows.truncate(nrows);
        self.ok = true;
        self.buf = text;
    }

    /// Parses one count per column as pmdalinux's `strtoul` loop does: a count not followed
    /// by whitespace is skipped, a column with no number where whitespace stands counts 0.
    /// Returns the row's total and where its description starts in `rest`.
    fn values(&mut self, rest: &str, row: usize) -> (u64, usize) {
        let b = rest.as_bytes();
        let mut s = 0;
        let mut end = 0;
        let mut total = 0u64;
        for col in 0..self.header.len() {
            let (value, after) = strtoul(&b[s..]);
            let e = b.len() - after.len();
            end = e;
            if !b.get(e).is_some_and(|c| c.is_ascii_whitespace()) {
                continue;
            }
            s = e;
            let cpu = self.cpu_of[col];
            if let Some(p) = self.per_cpu.get_mut(cpu as usize) {
                *p = p.wrapping_add(value);
            }
            if !self.identity
                && let Some(seen) = self.seen.get_mut(cpu as usize)
            {
                if seen.0 == row {
                    self.counts[seen.1].1 = value;
                    total = total.wrapping_add(value);
                    continue;
                }
                *seen = (row, self.counts.len());
            }
            self.counts.push((cpu, value));
            total = total.wrapping_add(value);
        }
        (total, end)
    }

    /// The table when its last refresh read and parsed the file.
    fn parsed(&self) -> Option<&Table> {
        self.ok.then_some(self)
    }

    fn row(&self, name: &str) -> Option<&Row> {
        self.rows.iter().find(|r| r.name == name)
    }

    /// `NAME::cpuN` → the row and the count's CPU.
    fn cell(&self, inst: &str) -> Option<(&Row, u32)> {
        let (name, cpu) = inst.split_once("::cpu")?;
        let cpu: u32 = cpu.parse().ok()?;
        let r = self.row(name)?;
        self.counts[r.start..r.start + r.len]
            .iter()
            .any(|(c, _)| *c == cpu)
            .then_some((r, cpu))
    }

    /// The labels of the cell `NAME::cpuN`: its CPU, then `row`'s labels of its row.
    fn cell_labels(&self, inst: &str, row: impl Fn(&Row) -> Labels) -> Option<Labels> {
        let (r, cpu) = self.cell(inst)?;
        let mut labels = vec![("cpu".into(), json!(cpu))];
        labels.extend(row(r));
        Some(labels)
    }

    fn per_row(&self, out: &mut Values, u32_only: bool) {
        let mut name = String::new();
        for r in &self.rows {
            for &(cpu, v) in &self.counts[r.start..r.start + r.len] {
                name.clear();
                use std::fmt::Write;
                let _ = write!(name, "{}::cpu{cpu}", r.name);
                let v = if u32_only { v as u32 as u64 } else { v };
                out.push((name.clone(), Value::Uint(v)));
            }
        }
    }

    fn totals(&self, out: &mut Values) {
        out.extend(
            self.rows
                .iter()
                .map(|r| (r.name.clone(), Value::Uint(r.total))),
        );
    }

    /// Per-CPU sums, for each CPU of the header.
    fn per_cpu(&self, out: &mut Values) {
        for &n in &self.header {
            if let Some(v) = self.per_cpu.get(self.slot(n)) {
                out.push((format!("cpu{n}"), Value::Uint(*v)));
            }
        }
    }
}

/// `ERR: 12` style rows (pmdalinux's `sscanf(line, "ERR: %u")`).
fn counter_row(line: &str, keys: &[&str]) -> Option<u64> {
    let rest = keys.iter().find_map(|k| line.strip_prefix(k))?;
    let rest = rest.trim_start();
    let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
    rest[..digits].parse::<u64>().ok().map(|v| v as u32 as u64)
}

/// The row's name (its first word without a final `:` or `_`) and what follows the name.
fn split_name(line: &str) -> Option<(&str, &str)> {
    let t = line.trim_start();
    let end = t.find(|c: char| c.is_ascii_whitespace()).unwrap_or(t.len());
    if end == 0 {
        return None;
    }
    let word = &t[..end];
    let name = word
        .strip_suffix(':')
        .or_else(|| word.strip_suffix('_'))
        .unwrap_or(word);
    // Values start one past the name's end (past the dropped `:` or the separator).
    let rest = t.get(name.len() + 1..).unwrap_or("");
    Some((name, rest))
}

/// The description as pmdalinux's `label_reformat` leaves it: words joined by one space.
fn squash_into(text: &str, out: &mut String) {
    out.clear();
    for (i, w) in text.split_ascii_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        out.push_str(w);
    }
}

/// An instance's labels: (name, value) pairs.
type Labels = Vec<(String, serde_json::Value)>;

/// An interrupt line's labels: its name and description.
fn irq_labels(r: &Row) -> Labels {
    vec![
        ("irq".into(), json!(r.name)),
        ("irqtext".into(), json!(r.text)),
    ]
}

/// `/proc/interrupts`: cluster 4.
#[derive(Default)]
pub struct Interrupts(Table);

impl Group for Interrupts {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 4
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.0.refresh(ctx, "proc/interrupts", true);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(t) = self.0.parsed() else { return };
        match m.item {
            0 => t.totals(out),
            1 => t.per_row(out, true),
            2 => out.push((String::new(), Value::Uint(t.mis))),
            3 => out.push((String::new(), Value::Uint(t.err))),
            4 => t.per_cpu(out),
            _ => {}
        }
    }

    fn labels(&self, of: LabelsOf) -> Option<Labels> {
        let t = &self.0;
        match of {
            LabelsOf::Instance(INTERRUPT, name) => Some(irq_labels(t.row(name)?)),
            LabelsOf::Instance(INTERRUPT_CPU, inst) => t.cell_labels(inst, irq_labels),
            _ => None,
        }
    }
}

/// `/proc/softirqs`: clusters 63 (per CPU) and 82 (totals).
#[derive(Default)]
pub struct SoftIrqs(Table);

impl Group for SoftIrqs {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 63 || m.cluster == 82
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.0.refresh(ctx, "proc/softirqs", false);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(t) = self.0.parsed() else { return };
        match (m.cluster, m.item) {
            (82, 0) => t.totals(out),
            (63, 0) => t.per_row(out, true),
            (63, 1) => t.per_cpu(out),
            _ => {}
        }
    }

    fn labels(&self, of: LabelsOf) -> Option<Labels> {
        match of {
            LabelsOf::Instance(SOFTIRQ_CPU, inst) => self
                .0
                .cell_labels(inst, |r| vec![("softirq".into(), json!(r.name))]),
            // The CPU indom's labels are stat's; the softirq indom has none per instance.
            LabelsOf::Instance(SOFTIRQ | CPU, _) => None,
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch, fetch_f64};
    use super::*;
    use crate::namespace::Agent;

    const TWO: &str = "           CPU0       CPU1       \n\
  0:         36          0   IO-APIC   2-edge      timer\n\
  8:          0          1   IO-APIC   8-edge      rtc0\n\
NMI:          5          7   Non-maskable interrupts\n\
LOC:    1266155    1281581   Local timer interrupts\n\
ERR:          3\n\
MIS:          2\n\
PIN:          0          0   Posted-interrupt notification event\n";

    #[test]
    fn lines_cpus_totals_and_labels_as_pmdalinux_names_them() {
        let (_dir, mut a) = agent(&[("proc/interrupts", TWO)]);
        let tot = fetch_f64(&mut a, "kernel.all.interrupts.total");
        let names: Vec<&str> = tot.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["0", "8", "NMI", "LOC", "PIN"]);
        assert_eq!(tot[3].1, 2547736.0);
        let per = fetch_f64(&mut a, "kernel.percpu.interrupts");
        assert_eq!(per.len(), 10);
        assert_eq!(per[0], ("0::cpu0".into(), 36.0));
        assert_eq!(per[3], ("8::cpu1".into(), 1.0));
        assert_eq!(
            fetch_f64(&mut a, "kernel.percpu.intr"),
            [("cpu0".into(), 1266196.0), ("cpu1".into(), 1281589.0)]
        );
        assert_eq!(
            fetch_f64(&mut a, "kernel.all.interrupts.errors"),
            [(String::new(), 3.0)]
        );
        assert_eq!(
            fetch_f64(&mut a, "kernel.all.interrupts.missed"),
            [(String::new(), 2.0)]
        );
        let l = a.labels(LabelsOf::Instance(INTERRUPT, "0"));
        assert_eq!(
            l,
            [
                ("irq".to_string(), json!("0")),
                ("irqtext".to_string(), json!("IO-APIC 2-edge timer"))
            ]
        );
        let l = a.labels(LabelsOf::Instance(INTERRUPT_CPU, "LOC::cpu1"));
        assert_eq!(l[0], ("cpu".to_string(), json!(1)));
        assert_eq!(
            l[2],
            ("irqtext".to_string(), json!("Local timer interrupts"))
        );
    }

    #[test]
    fn offline_cpus_are_named_by_pmdalinux_column_mapping() {
        // CPU1 offline: column 1 holds CPU2, which pmdalinux's mapping calls cpu1's slot.
        let text = "     CPU0 CPU2 CPU3\n  5:  1  2  3  edge x\n";
        let (_dir, mut a) = agent(&[("proc/interrupts", text)]);
        let per = fetch_f64(&mut a, "kernel.percpu.interrupts");
        assert_eq!(per, [("5::cpu0".into(), 2.0), ("5::cpu1".into(), 3.0)]);
        assert_eq!(fetch_f64(&mut a, "kernel.all.interrupts.total")[0].1, 6.0);
    }

    #[test]
    fn short_rows_and_garbage_cost_nothing_else() {
        let text = "  CPU0 CPU1\n  1:  7\n junk: x y\n\n  2: 1 2 z\n";
        let (_dir, mut a) = agent(&[("proc/interrupts", text)]);
        let tot = fetch_f64(&mut a, "kernel.all.interrupts.total");
        assert_eq!(
            tot,
            [("1".into(), 7.0), ("junk".into(), 0.0), ("2".into(), 3.0)]
        );
        // A missing file: no values, no error.
        let (_dir, mut a) = agent(&[]);
        assert!(fetch(&mut a, "kernel.all.interrupts.total").is_empty());
        assert!(fetch(&mut a, "kernel.percpu.sirq").is_empty());
    }

    #[test]
    fn softirqs_per_cpu_and_totals() {
        let text = "                    CPU0       CPU1       \n\
          HI:          0          1\n\
       TIMER:     149035     118548\n";
        let (_dir, mut a) = agent(&[("proc/softirqs", text)]);
        assert_eq!(
            fetch_f64(&mut a, "kernel.all.softirqs.total"),
            [("HI".into(), 1.0), ("TIMER".into(), 267583.0)]
        );
        assert_eq!(
            fetch_f64(&mut a, "kernel.percpu.softirqs")[3].0,
            "TIMER::cpu1"
        );
        assert_eq!(
            fetch_f64(&mut a, "kernel.percpu.sirq"),
            [("cpu0".into(), 149035.0), ("cpu1".into(), 118549.0)]
        );
        let l = a.labels(LabelsOf::Instance(SOFTIRQ_CPU, "TIMER::cpu1"));
        assert_eq!(
            l,
            [
                ("cpu".to_string(), json!(1)),
                ("softirq".to_string(), json!("TIMER"))
            ]
        );
    }

    /// A 1,152-CPU host's /proc/interrupts (about 1 MB).
    pub fn big_interrupts(cpus: usize, lines: usize) -> String {
        use std::fmt::Write;
        let mut s = String::from("      ");
        for c in 0..cpus {
            let _ = write!(s, "CPU{c:<7} ");
        }
        s.push('\n');
        for l in 0..lines {
            let _ = write!(s, "{l:>4}:");
            for c in 0..cpus {
                let _ = write!(s, " {:>10}", (l * 7 + c) % 1000);
            }
            s.push_str("  IR-PCI-MSI 1234-edge      nvme0q1\n");
        }
        s
    }

    #[test]
    fn a_1152_cpu_file_parses_whole() {
        let text = big_interrupts(1152, 90);
        assert!(text.len() > 1_000_000);
        let (_dir, mut a) = agent(&[("proc/interrupts", &text)]);
        let per = fetch(&mut a, "kernel.percpu.interrupts");
        assert_eq!(per.len(), 1152 * 90);
        assert_eq!(per.last().unwrap().0, "89::cpu1151");
        let intr = fetch_f64(&mut a, "kernel.percpu.intr");
        assert_eq!(intr.len(), 1152);
        let want: usize = (0..90).map(|l| (l * 7 + 1151) % 1000).sum();
        assert_eq!(intr[1151], ("cpu1151".into(), want as f64));
        // Refreshing again reuses the rows and gives the same answer.
        assert_eq!(fetch(&mut a, "kernel.percpu.interrupts").len(), 1152 * 90);
    }

    #[test]
    fn this_machines_files_parse() {
        let mut a = LinuxAgent::new();
        if std::path::Path::new("/proc/interrupts").exists() {
            let n = std::fs::read_to_string("/proc/stat")
                .unwrap()
                .lines()
                .filter(|l| l.starts_with("cpu") && !l.starts_with("cpu "))
                .count();
            assert_eq!(fetch(&mut a, "kernel.percpu.intr").len(), n);
            assert!(
                fetch_f64(&mut a, "kernel.all.interrupts.total")
                    .iter()
                    .any(|(n, _)| n == "LOC" || n == "0")
            );
        }
        if std::path::Path::new("/proc/softirqs").exists() {
            assert!(
                fetch(&mut a, "kernel.all.softirqs.total")
                    .iter()
                    .any(|(n, _)| n == "TIMER")
            );
        }
    }
}
