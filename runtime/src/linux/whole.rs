//! Groups of one file read whole and parsed at each refresh, one cluster's metrics answered
//! from the parse (`/proc/loadavg`, `/proc/uptime`, `/proc/locks`): each file says only its
//! cluster, path, parser and values ([`WholeFile`]); [`Whole`] is the group.

use super::{Ctx, Group, Metric};
use crate::namespace::Values;

/// A file of one cluster, parsed whole.
pub trait WholeFile {
    const CLUSTER: u32;
    /// Under the root.
    const PATH: &'static str;
    type Parsed: Send;
    /// `None` for a malformed file: no values.
    fn parse(text: &str) -> Option<Self::Parsed>;
    /// The values of `m`, one of the cluster's metrics.
    fn values(now: &Self::Parsed, m: &Metric, out: &mut Values);
    /// As [`Group::instance_id`].
    fn instance_id(_indom: u32, _name: &str) -> Option<u32> {
        None
    }
}

/// The group of a [`WholeFile`]: its read buffer and the last refresh's parse (`None`: the
/// file was absent, unreadable or malformed).
pub struct Whole<F: WholeFile> {
    buf: String,
    now: Option<F::Parsed>,
}

impl<F: WholeFile> Default for Whole<F> {
    fn default() -> Self {
        Whole {
            buf: String::new(),
            now: None,
        }
    }
}

impl<F: WholeFile> Group for Whole<F> {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == F::CLUSTER
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.now = ctx
            .root
            .read(F::PATH, &mut self.buf)
            .ok()
            .and_then(F::parse);
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if let Some(now) = &self.now {
            F::values(now, m, out);
        }
    }

    fn instance_id(&self, indom: u32, name: &str) -> Option<u32> {
        F::instance_id(indom, name)
    }
}
