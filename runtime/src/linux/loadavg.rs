//! `/proc/loadavg` (cluster 2): the 1, 5 and 15 minute load averages, runnable and total
//! scheduling entities.

use super::indom::LOADAVG;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

#[derive(Default)]
pub struct LoadAvg {
    buf: String,
    /// [1, 5, 15 min, runnable, total, last pid].
    now: Option<[f64; 6]>,
}

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

impl Group for LoadAvg {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 2
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.now = ctx
            .root
            .read("proc/loadavg", &mut self.buf)
            .ok()
            .and_then(parse);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some(l) = self.now else { return };
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
    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        (indom == LOADAVG)
            .then(|| name.strip_suffix(" minute")?.parse().ok())
            .flatten()
    }
}
