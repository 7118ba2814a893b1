//! `/proc/uptime` (cluster 26): seconds since boot, and idle seconds summed over CPUs.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

#[derive(Default)]
pub struct Uptime {
    buf: String,
    now: Option<(f64, f64)>,
}

impl Group for Uptime {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 26
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.now = ctx
            .root
            .read("proc/uptime", &mut self.buf)
            .ok()
            .and_then(|t| {
                let mut f = t.split_ascii_whitespace().map(|x| x.parse::<f64>().ok());
                Some((f.next()??, f.next()??))
            });
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let Some((up, idle)) = self.now else { return };
        let v = match m.item {
            0 => up,
            1 => idle,
            _ => return,
        };
        out.push((String::new(), Value::Real(v)));
    }
}
