//! `/sys/kernel/mm/ksm/*` (cluster 69, `mem.ksm.*`): the kernel same-page merging daemon's
//! settings and page counts, one number per file.
//!
//! pmdalinux keeps the last numbers it read (zeros when the directory never existed); here a
//! file that is absent or not a number has no value, so a kernel without KSM shows none
//! rather than zeros that look like an idle daemon.
//!
//! Owns this cluster's parsing only.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// The file each item reads, by item number.
const FILES: [&str; 9] = [
    "full_scans",
    "merge_across_nodes",
    "pages_shared",
    "pages_sharing",
    "pages_to_scan",
    "pages_unshared",
    "pages_volatile",
    "run",
    "sleep_millisecs",
];

#[derive(Default)]
pub struct Ksm {
    buf: String,
    vals: [Option<u64>; 9],
}

/// A sysfs number as `strtoul` reads it: leading digits, 0 when there are none.
fn leading_number(text: &str) -> u64 {
    let t = text.trim_start();
    let end = t.find(|c: char| !c.is_ascii_digit()).unwrap_or(t.len());
    t[..end]
        .parse()
        .unwrap_or(if end == 0 { 0 } else { u64::MAX })
}

impl Group for Ksm {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 69 && (m.item as usize) < FILES.len()
    }

    fn refresh(&mut self, ctx: &Ctx) {
        for (file, val) in FILES.iter().zip(self.vals.iter_mut()) {
            *val = ctx
                .root
                .read(&format!("sys/kernel/mm/ksm/{file}"), &mut self.buf)
                .ok()
                .map(leading_number);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if let Some(Some(v)) = self.vals.get(m.item as usize) {
            out.push((String::new(), Value::Uint(*v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, one};

    #[test]
    fn each_file_is_one_metric_and_a_missing_file_is_no_value() {
        // An older kernel: no merge_across_nodes (before 3.9) nor pages_volatile's sibling
        // files of 5.x; a stray newline and a non-number.
        let (_dir, mut a) = agent(&[
            ("sys/kernel/mm/ksm/full_scans", "17\n"),
            ("sys/kernel/mm/ksm/pages_shared", "1024\n"),
            ("sys/kernel/mm/ksm/pages_sharing", "5120\n"),
            ("sys/kernel/mm/ksm/pages_to_scan", "100\n"),
            ("sys/kernel/mm/ksm/pages_unshared", "33\n"),
            ("sys/kernel/mm/ksm/pages_volatile", "garbage\n"),
            ("sys/kernel/mm/ksm/run", "1\n"),
            ("sys/kernel/mm/ksm/sleep_millisecs", "20\n"),
            ("sys/kernel/mm/ksm/max_page_sharing", "256\n"),
        ]);
        a.expect(
            "mem.ksm.full_scans 17
            mem.ksm.merge_across_nodes -
            mem.ksm.pages_shared 1024
            mem.ksm.pages_sharing 5120
            mem.ksm.pages_to_scan 100
            mem.ksm.pages_unshared 33
            mem.ksm.pages_volatile 0
            mem.ksm.run_state 1
            mem.ksm.sleep_time 20",
        );
        let (_empty, mut a) = agent(&[]);
        assert_eq!(one(&mut a, "mem.ksm.run_state"), None);
    }

    #[test]
    fn this_host_agrees_with_sysfs() {
        let Ok(text) = std::fs::read_to_string("/sys/kernel/mm/ksm/pages_to_scan") else {
            return;
        };
        let mut a = LinuxAgent::new();
        let want: f64 = text.trim().parse().unwrap();
        assert_eq!(one(&mut a, "mem.ksm.pages_to_scan"), Some(want));
    }
}
