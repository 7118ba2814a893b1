//! `/proc/swaps` (cluster 6, `swapdev.*`): one instance per swap device or file, named by
//! its path, with sizes in Kbyte as the kernel writes them (pmdalinux's 32-bit fields).
//!
//! Owns this cluster's parsing only.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

struct Dev {
    path: String,
    size: u32,
    used: u32,
    priority: i32,
}

#[derive(Default)]
pub struct Swaps {
    buf: String,
    devs: Vec<Dev>,
}

/// `%u`/`%d` as sscanf reads a field: the leading number, 0 when there is none.
fn num<T: std::str::FromStr + Default>(field: &str) -> T {
    let end = field
        .char_indices()
        .find(|&(i, c)| !(c.is_ascii_digit() || (i == 0 && (c == '-' || c == '+'))))
        .map_or(field.len(), |(i, _)| i);
    field[..end].parse().unwrap_or_default()
}

/// Lines `PATH TYPE SIZE USED PRIORITY` after the header; only paths (starting with `/`)
/// count, a repeated path counts once.
fn parse(text: &str, devs: &mut Vec<Dev>) {
    for line in text.lines() {
        if !line.starts_with('/') {
            continue;
        }
        let mut f = line.split([' ', '\t']).filter(|s| !s.is_empty());
        let (Some(path), Some(_ty), Some(size), Some(used), Some(prio)) =
            (f.next(), f.next(), f.next(), f.next(), f.next())
        else {
            continue;
        };
        if devs.iter().any(|d| d.path == path) {
            continue;
        }
        devs.push(Dev {
            path: path.to_string(),
            size: num(size),
            used: num(used),
            priority: num(prio),
        });
    }
}

impl Group for Swaps {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 6 && m.item <= 4
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.devs.clear();
        if let Ok(text) = ctx.root.read("proc/swaps", &mut self.buf) {
            parse(text, &mut self.devs);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        for d in &self.devs {
            let v = match m.item {
                0 => Value::Uint(d.size.wrapping_sub(d.used).into()),
                1 | 2 => Value::Uint(d.size.into()),
                3 => Value::Uint(0),
                _ => Value::Int(d.priority.into()),
            };
            out.push((d.path.clone(), v));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, fetch_f64};

    const SWAPS: &str = "\
Filename\t\t\t\tType\t\tSize\t\tUsed\t\tPriority
/dev/nvme0n1p3                          partition\t16777212\t1048576\t\t-2
/swapfile                               file\t\t2097148\t\t0\t\t10
/dev/zram0                              partition\t8388604\t\t123456\t\t100
/dev/zram0                              partition\t1\t\t1\t\t1
";

    #[test]
    fn one_instance_per_path_with_sizes_in_kbyte() {
        let (_dir, mut a) = agent(&[("proc/swaps", SWAPS)]);
        let names = ["/dev/nvme0n1p3", "/swapfile", "/dev/zram0"];
        let got = |a: &mut LinuxAgent, m| fetch_f64(a, m);
        let free = got(&mut a, "swapdev.free");
        assert_eq!(
            free,
            names
                .iter()
                .zip([15728636.0, 2097148.0, 8265148.0])
                .map(|(n, v)| (n.to_string(), v))
                .collect::<Vec<_>>()
        );
        let len: Vec<f64> = got(&mut a, "swapdev.length")
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(len, [16777212.0, 2097148.0, 8388604.0]);
        let max: Vec<f64> = got(&mut a, "swapdev.maxswap")
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(max, len);
        let v: Vec<f64> = got(&mut a, "swapdev.vlength")
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(v, [0.0; 3]);
        let p: Vec<f64> = got(&mut a, "swapdev.priority")
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(p, [-2.0, 10.0, 100.0]);
    }

    #[test]
    fn no_swap_and_no_file_mean_no_instances() {
        let (_dir, mut a) = agent(&[("proc/swaps", "Filename Type Size Used Priority\n")]);
        assert!(fetch_f64(&mut a, "swapdev.length").is_empty());
        let (_dir, mut a) = agent(&[("proc/swaps", "/dev/sda2 partition 100\n")]);
        assert!(fetch_f64(&mut a, "swapdev.length").is_empty());
        let (_dir, mut a) = agent(&[]);
        assert!(fetch_f64(&mut a, "swapdev.free").is_empty());
    }
}
