//! `/proc/loadavg` (cluster 2): the 1, 5 and 15 minute load averages, runnable and total
//! scheduling entities.

use super::Metric;
use super::indom::LOADAVG;
use super::whole::{Whole, WholeFile};
use crate::namespace::{Value, Values};

pub type LoadAvg = Whole<LoadAvgFile>;

pub struct LoadAvgFile;

impl WholeFile for LoadAvgFile {
    const CLUSTER: u32 = 2;
    const PATH: &'static str = "proc/loadavg";
    /// [1, 5, 15 min, runnable, total, last pid].
    type Parsed = [f64; 6];

    /// `0.52 0.58 0.59 2/1234 5678` → [1, 5, 15 min, runnable, total, last pid].
    fn parse(text: &str) -> Option<[f64; 6]> {
        let mut f = text.split_ascii_whitespace();
        let (a, b, c) = (
            f.next()?.parse().ok()?,
            f.next()?.parse().ok()?,
            f.next()?.parse().ok()?,
        );
        let (run, total) = f.next()?.split_once('/')?;
        let last = f.next()?.parse().ok()?;
        Some([a, b, c, run.parse().ok()?, total.parse().ok()?, last])
    }

    fn values(l: &[f64; 6], m: &Metric, out: &mut Values) {
        match m.item {
            0 => out.extend(
                [("1 minute", l[0]), ("5 minute", l[1]), ("15 minute", l[2])]
                    .map(|(n, v)| (n.to_string(), Value::Real(v))),
            ),
            1 => out.push((String::new(), Value::Real(l[5]))),
            2 => out.push((String::new(), Value::Real(l[3]))),
            3 => out.push((String::new(), Value::Real(l[4]))),
            _ => {}
        }
    }

    /// pmdalinux numbers the load averages by their minutes.
    fn instance_id(indom: u32, name: &str) -> Option<u32> {
        (indom == LOADAVG)
            .then(|| name.strip_suffix(" minute")?.parse().ok())
            .flatten()
    }
}
