//! `/proc/uptime` (cluster 26): seconds since boot, and idle seconds summed over CPUs.

use super::Metric;
use super::whole::{Whole, WholeFile};
use crate::namespace::{Value, Values};

pub type Uptime = Whole<UptimeFile>;

pub struct UptimeFile;

impl WholeFile for UptimeFile {
    const CLUSTER: u32 = 26;
    const PATH: &'static str = "proc/uptime";
    /// (seconds up, idle seconds).
    type Parsed = (f64, f64);

    fn parse(text: &str) -> Option<(f64, f64)> {
        let mut f = text.split_ascii_whitespace().map(|x| x.parse::<f64>().ok());
        Some((f.next()??, f.next()??))
    }

    fn values(&(up, idle): &(f64, f64), m: &Metric, out: &mut Values) {
        let v = match m.item {
            0 => up,
            1 => idle,
            _ => return,
        };
        out.push((String::new(), Value::Real(v)));
    }
}
