//! The block-device group's metric values: which figure each item of clusters 0, 10, 54,
//! 59, 60, 86-89 and 92 shows, computed from the devices a refresh found, in pmdalinux's
//! units and widths (Kbyte from 512-byte sectors, the sums it adds in 32 bits).

use super::discover::{Dev, Found, Kind, scheduler};
use super::parse::Stats;
use crate::linux::Metric;
use crate::linux::read::Root;
use crate::namespace::{Value, Values};

/// The per-device figures every cluster shares, in cluster 10's item order.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum F {
    Read,
    Write,
    Total,
    BlkRead,
    BlkWrite,
    BlkTotal,
    ReadBytes,
    WriteBytes,
    TotalBytes,
    ReadMerge,
    WriteMerge,
    AvActive,
    Aveq,
    ReadRaw,
    WriteRaw,
    TotalRaw,
    Capacity,
    Discard,
    BlkDiscard,
    DiscardBytes,
    DiscardMerge,
    DiscardRaw,
    Flush,
    FlushRaw,
    Inflight,
}

const F_ORDER: [F; 25] = [
    F::Read,
    F::Write,
    F::Total,
    F::BlkRead,
    F::BlkWrite,
    F::BlkTotal,
    F::ReadBytes,
    F::WriteBytes,
    F::TotalBytes,
    F::ReadMerge,
    F::WriteMerge,
    F::AvActive,
    F::Aveq,
    F::ReadRaw,
    F::WriteRaw,
    F::TotalRaw,
    F::Capacity,
    F::Discard,
    F::BlkDiscard,
    F::DiscardBytes,
    F::DiscardMerge,
    F::DiscardRaw,
    F::Flush,
    F::FlushRaw,
    F::Inflight,
];

/// Per-disk items of cluster 0 (and of cluster 92, which reuses their numbers).
fn dev_item(item: u32) -> Option<F> {
    Some(match item {
        4 => F::Read,
        5 => F::Write,
        6 => F::BlkRead,
        7 => F::BlkWrite,
        28 => F::Total,
        36 => F::BlkTotal,
        38 => F::ReadBytes,
        39 => F::WriteBytes,
        40 => F::TotalBytes,
        46 => F::AvActive,
        47 => F::Aveq,
        49 => F::ReadMerge,
        50 => F::WriteMerge,
        72 => F::ReadRaw,
        73 => F::WriteRaw,
        79 => F::TotalRaw,
        87 => F::Capacity,
        88 => F::Discard,
        89 => F::BlkDiscard,
        90 => F::DiscardBytes,
        91 => F::DiscardMerge,
        92 => F::DiscardRaw,
        93 => F::Flush,
        94 => F::FlushRaw,
        95 => F::Inflight,
        _ => return None,
    })
}

/// `disk.all.*` items of cluster 0.
fn all_item(item: u32) -> Option<F> {
    Some(match item {
        24 => F::Read,
        25 => F::Write,
        26 => F::BlkRead,
        27 => F::BlkWrite,
        29 => F::Total,
        37 => F::BlkTotal,
        41 => F::ReadBytes,
        42 => F::WriteBytes,
        43 => F::TotalBytes,
        44 => F::AvActive,
        45 => F::Aveq,
        51 => F::ReadMerge,
        52 => F::WriteMerge,
        74 => F::ReadRaw,
        75 => F::WriteRaw,
        80 => F::TotalRaw,
        96 => F::Discard,
        97 => F::BlkDiscard,
        98 => F::DiscardBytes,
        99 => F::DiscardMerge,
        100 => F::DiscardRaw,
        101 => F::Flush,
        102 => F::FlushRaw,
        104 => F::Inflight,
        _ => return None,
    })
}

/// Clusters 54 and 59 (dm, md): cluster 10's order with the name map at 13.
fn dm_item(item: u32) -> Option<F> {
    match item {
        0..=12 => Some(F_ORDER[item as usize]),
        14..=25 => Some(F_ORDER[item as usize - 1]),
        _ => None,
    }
}

impl Stats {
    /// One device's figure (capacity aside).
    fn get(&self, f: F) -> u64 {
        let s = self;
        match f {
            F::Read => s.rd_ios,
            F::Write => s.wr_ios,
            F::Total => s.rd_ios.wrapping_add(s.wr_ios),
            F::BlkRead => s.rd_sectors,
            F::BlkWrite => s.wr_sectors,
            F::BlkTotal => s.rd_sectors.wrapping_add(s.wr_sectors),
            // 512-byte sectors to Kbyte.
            F::ReadBytes => s.rd_sectors / 2,
            F::WriteBytes => s.wr_sectors / 2,
            F::TotalBytes => s.rd_sectors.wrapping_add(s.wr_sectors) / 2,
            F::ReadMerge => s.rd_merges,
            F::WriteMerge => s.wr_merges,
            F::AvActive => s.io_ticks.into(),
            F::Aveq => s.aveq.into(),
            F::ReadRaw => s.rd_ticks.into(),
            F::WriteRaw => s.wr_ticks.into(),
            F::TotalRaw => s.rd_ticks.wrapping_add(s.wr_ticks).into(),
            F::Capacity => s.nr_blocks,
            F::Discard => s.ds_ios,
            F::BlkDiscard => s.ds_sectors,
            F::DiscardBytes => s.ds_sectors / 2,
            F::DiscardMerge => s.ds_merges,
            F::DiscardRaw => s.ds_ticks.into(),
            F::Flush => s.fl_ios,
            F::FlushRaw => s.fl_ticks.into(),
            F::Inflight => s.in_flight.into(),
        }
    }
}

fn kind_of_cluster(cluster: u32) -> Option<Kind> {
    Some(match cluster {
        10 => Kind::Partition,
        54 => Kind::Dm,
        59 | 60 => Kind::Md,
        86..=89 => Kind::Zram,
        _ => return None,
    })
}

/// True for the metrics of the group.
pub fn answers(m: &Metric) -> bool {
    match m.cluster {
        0 => {
            dev_item(m.item).is_some()
                || all_item(m.item).is_some()
                || matches!(m.item, 33 | 59 | 103)
        }
        10 | 54 | 59 | 60 | 86..=89 | 92 => true,
        _ => false,
    }
}

/// What a refresh leaves for the values: the devices, the root (schedulers are read when
/// asked), and whether partitions had the short 2.6.0-2.6.24 format (no merges or times).
pub struct Refreshed<'a> {
    pub found: &'a Found,
    pub root: Option<&'a Root>,
    pub short_partitions: bool,
}

impl Refreshed<'_> {
    /// `disk.wwid.*`: the disks that are paths to `wwid`, summed as pmdalinux sums them.
    fn wwid_value(&self, wwid: &str, item: u32) -> Option<Value> {
        let paths: Vec<&Dev> = self
            .found
            .of(Kind::Disk)
            .filter(|d| d.wwid == wwid)
            .collect();
        let root = self.root?;
        match item {
            3 => {
                let names: Vec<&str> = paths.iter().map(|d| d.name.as_str()).collect();
                return (!names.is_empty()).then(|| Value::Text(names.join(" ")));
            }
            59 => {
                return paths.last().map(|d| Value::Text(scheduler(root, &d.kname)));
            }
            _ => {}
        }
        let f = dev_item(item)?;
        if f == F::Capacity && paths.iter().any(|d| d.stats.nr_blocks == 0) {
            return None;
        }
        if f == F::DiscardBytes {
            // pmdalinux assigns rather than adds here: the last path's.
            return Some(Value::Uint(
                paths.last().map_or(0, |d| d.stats.get(f) as u32 as u64),
            ));
        }
        // pmdalinux adds these in 32 bits.
        let narrow = matches!(
            f,
            F::AvActive
                | F::Aveq
                | F::ReadRaw
                | F::WriteRaw
                | F::TotalRaw
                | F::Discard
                | F::BlkDiscard
                | F::DiscardMerge
                | F::DiscardRaw
                | F::Flush
                | F::FlushRaw
        );
        let sum = paths
            .iter()
            .fold(0u64, |a, d| a.wrapping_add(d.stats.get(f)));
        Some(Value::Uint(if narrow { sum as u32 as u64 } else { sum }))
    }
    pub fn values(&self, m: &Metric, out: &mut Values) {
        let (c, item) = (m.cluster, m.item);
        let per = |kind: Kind, f: &dyn Fn(&Dev) -> Option<Value>, out: &mut Values| {
            out.extend(
                self.found
                    .of(kind)
                    .filter_map(|d| Some((d.name.clone(), f(d)?))),
            );
        };
        let num = |f: F, d: &Dev| -> Option<Value> {
            if f == F::Capacity && d.stats.nr_blocks == 0 {
                return None;
            }
            Some(Value::Uint(d.stats.get(f)))
        };
        match c {
            0 => {
                if item == 33 {
                    out.push((
                        String::new(),
                        Value::Uint(self.found.of(Kind::Disk).count() as u64),
                    ));
                } else if item == 59 {
                    let Some(root) = self.root else { return };
                    per(
                        Kind::Disk,
                        &|d| Some(Value::Text(scheduler(root, &d.kname))),
                        out,
                    );
                } else if item == 103 {
                    per(Kind::Disk, &|d| Some(Value::Text(d.wwid.clone())), out);
                } else if let Some(f) = dev_item(item) {
                    per(Kind::Disk, &|d| num(f, d), out);
                } else if let Some(f) = all_item(item) {
                    let sum = self
                        .found
                        .of(Kind::Disk)
                        .fold(0u64, |a, d| a.wrapping_add(d.stats.get(f)));
                    // The two tick sums pmdalinux adds in 32 bits.
                    let sum = if matches!(f, F::DiscardRaw | F::FlushRaw) {
                        sum as u32 as u64
                    } else {
                        sum
                    };
                    out.push((String::new(), Value::Uint(sum)));
                }
            }
            10 | 86 => {
                let kind = kind_of_cluster(c).unwrap_or(Kind::Partition);
                let Some(&f) = F_ORDER.get(item as usize) else {
                    return;
                };
                if (9..=15).contains(&item) && self.short_partitions {
                    return;
                }
                if c == 86 && f == F::Capacity {
                    per(
                        kind,
                        &|d| Some(Value::Uint(d.zram.size.unwrap_or(d.stats.nr_blocks))),
                        out,
                    );
                } else {
                    per(kind, &|d| num(f, d), out);
                }
            }
            54 | 59 => {
                let kind = kind_of_cluster(c).unwrap_or(Kind::Dm);
                if item == 13 {
                    per(kind, &|d| Some(Value::Text(d.kname.clone())), out);
                } else if let Some(f) = dm_item(item) {
                    // pmdalinux stores these three in 32 bits for dm and md.
                    let narrow = matches!(f, F::ReadBytes | F::WriteBytes | F::TotalBytes);
                    per(
                        kind,
                        &|d| {
                            let v = num(f, d)?;
                            Some(match v {
                                Value::Uint(x) if narrow => Value::Uint(x as u32 as u64),
                                v => v,
                            })
                        },
                        out,
                    );
                }
            }
            60 => per(Kind::Md, &|d| d.md_status.map(Value::Int), out),
            87 => per(
                Kind::Zram,
                &|d| Some(Value::Uint(*d.zram.io?.get(item as usize)?)),
                out,
            ),
            88 => per(
                Kind::Zram,
                &|d| {
                    let x = *d.zram.mm?.get(item as usize)?;
                    // Bytes to Kbyte; page counts (4 KB) to Kbyte.
                    Some(Value::Uint(if item < 5 { x >> 10 } else { x << 2 }))
                },
                out,
            ),
            89 => per(
                Kind::Zram,
                &|d| Some(Value::Uint(*d.zram.bd?.get(item as usize)? << 2)),
                out,
            ),
            92 => {
                for w in &self.found.wwids {
                    if let Some(v) = self.wwid_value(w, item) {
                        out.push((w.clone(), v));
                    }
                }
            }
            _ => {}
        }
    }
}
