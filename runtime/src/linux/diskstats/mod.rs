//! Block devices (clusters 0's disk items, 10, 54, 59, 60, 86-89, 92): `/proc/diskstats`
//! (`/proc/partitions` for capacities, and for the counters of kernels without diskstats),
//! sorted into disks, partitions, device-mapper and md devices and zram devices as
//! pmdalinux sorts them by kernel name; dm names from `/sys/block/dm-N/dm/name` (else the
//! block nodes of `/dev/mapper`), md names from `/dev/md` links, schedulers from
//! `/sys/block/DEV/queue/scheduler`, WWIDs from `/sys/block/DEV/device/wwid` (multipath
//! paths summed per WWID), zram's own `io_stat`/`mm_stat`/`bd_stat`/`disksize`, md health
//! from `/proc/mdstat`.
//!
//! Devices the `devices.disks` filter refuses (by kernel name) are not reported anywhere,
//! nor counted in `disk.all.*` or `hinv.ndisk`. Instances are numbered in discovery order.
//!
//! Owns the block-device metrics only; filesystems are [`super::filesys`]'s.

mod discover;
mod parse;
mod values;

use super::read::Root;
use super::{Ctx, Group, Metric};
use crate::namespace::Values;
use discover::Found;
use parse::{Stats, numbered, parse_counters};
use values::Refreshed;

#[cfg(test)]
use discover::{Kind, kind_of};

#[derive(Default)]
pub struct DiskStats {
    buf: String,
    root: Option<Root>,
    found: Found,
    /// Some line had the short 2.6.0-2.6.24 partition format: partitions lack merges and
    /// times (pmdalinux answers "wrong version" for them).
    short_partitions: bool,
    ok: bool,
}

impl DiskStats {
    /// `/proc/diskstats`: `major minor name counters...`; false when absent.
    fn read_diskstats(&mut self, ctx: &Ctx) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        // An unreadable file leaves `buf` empty: no lines.
        let ok = ctx.root.read("proc/diskstats", &mut buf).is_ok();
        for (ma, mi, mut it) in buf.lines().filter_map(numbered) {
            let Some(kname) = it.next() else { continue };
            let Some(i) = self.found.device(ctx, kname, ma, mi) else {
                continue;
            };
            let mut s = Stats::default();
            if parse_counters(it, &mut s) < 11 {
                self.short_partitions = true;
            }
            let d = &mut self.found.devs[i];
            s.nr_blocks = d.stats.nr_blocks;
            d.stats = s;
        }
        self.buf = buf;
        ok
    }

    /// `/proc/partitions`: `major minor #blocks name`, plus the 2.4 kernels' counters when
    /// there is no diskstats.
    fn read_partitions(&mut self, ctx: &Ctx, counters: bool) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        let ok = ctx.root.read("proc/partitions", &mut buf).is_ok();
        for (ma, mi, mut it) in buf.lines().filter_map(numbered) {
            let (Some(Ok(blocks)), Some(kname)) = (it.next().map(str::parse::<u64>), it.next())
            else {
                continue;
            };
            let Some(i) = self.found.device(ctx, kname, ma, mi) else {
                continue;
            };
            let d = &mut self.found.devs[i];
            if counters {
                parse_counters(it, &mut d.stats);
            }
            d.stats.nr_blocks = blocks;
        }
        self.buf = buf;
        ok
    }
}

impl Group for DiskStats {
    fn answers(&self, m: &Metric) -> bool {
        values::answers(m)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.found.clear();
        self.short_partitions = false;
        self.root = Some(ctx.root.clone());
        let have_diskstats = self.read_diskstats(ctx);
        let have_partitions = self.read_partitions(ctx, !have_diskstats);
        self.ok = have_diskstats || have_partitions;
        if self.ok {
            self.found.describe(ctx.root);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if !self.ok {
            return;
        }
        let r = Refreshed {
            found: &self.found,
            root: self.root.as_ref(),
            short_partitions: self.short_partitions,
        };
        r.values(m, out);
    }
}

#[cfg(test)]
mod tests;
