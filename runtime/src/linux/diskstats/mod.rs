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

use super::read::Root;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// What pmdalinux makes of a block device's kernel name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Disk,
    Partition,
    Dm,
    Md,
    Zram,
    /// A multipath map named by its WWID (`3600...`, 18 characters).
    Wwid,
}

/// One line of diskstats, in pmdalinux's field widths: the tick, queue and in-flight
/// figures are 32-bit there (`%u`), so they wrap at 2^32 as pmcd's do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Stats {
    rd_ios: u64,
    rd_merges: u64,
    rd_sectors: u64,
    rd_ticks: u32,
    wr_ios: u64,
    wr_merges: u64,
    wr_sectors: u64,
    wr_ticks: u32,
    in_flight: u32,
    io_ticks: u32,
    aveq: u32,
    ds_ios: u64,
    ds_merges: u64,
    ds_sectors: u64,
    ds_ticks: u32,
    fl_ios: u64,
    fl_ticks: u32,
    /// Kbyte, from /proc/partitions; 0 when unknown.
    nr_blocks: u64,
}

/// zram's own sysfs figures, `None` when its file is absent or short.
#[derive(Clone, Debug, Default)]
struct Zram {
    io: Option<[u64; 4]>,
    mm: Option<[u64; 8]>,
    bd: Option<[u64; 3]>,
    /// `disksize` in Kbyte.
    size: Option<u64>,
}

#[derive(Clone, Debug)]
struct Dev {
    kind: Kind,
    /// Kernel name (`sda`, `dm-0`, `md127`): where its sysfs files are.
    kname: String,
    /// Instance name: the kernel name, or a dm/md device's persistent name.
    name: String,
    stats: Stats,
    /// A disk's WWID (`hinv.map.scsi_id`), "unknown" when it has none.
    wwid: String,
    zram: Zram,
    /// md: pmdalinux's `disk.md.status` (mdadm's exit status, as `pclose` returns it).
    md_status: Option<i64>,
}

#[derive(Default)]
pub struct DiskStats {
    buf: String,
    root: Option<Root>,
    devs: Vec<Dev>,
    /// WWIDs in discovery order (disks' and multipath maps named by one).
    wwids: Vec<String>,
    /// Some line had the short 2.6.0-2.6.24 partition format: partitions lack merges and
    /// times (pmdalinux answers "wrong version" for them).
    short_partitions: bool,
    ok: bool,
}

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

fn digit_at_end(name: &str) -> bool {
    name.bytes().last().is_some_and(|b| b.is_ascii_digit())
}

/// `prefix` followed by a name without a `p` (a whole device, not `...p1`).
fn whole(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix).is_some_and(|r| !r.contains('p'))
}

fn is_cdrom(name: &str) -> bool {
    name.strip_prefix("sr")
        .is_some_and(|r| r.bytes().next().is_some_and(|b| b.is_ascii_digit()))
}

/// pmdalinux's partition test: names with a slash (`cciss/c0d0p1`) are partitions when
/// their trailing digits follow a `p` (or when they have none); others when they end in a
/// digit and are none of the numbered whole-device families.
fn is_partition(name: &str) -> bool {
    if name.contains('/') {
        let b = name.as_bytes();
        let mut p = b.len() - 1;
        while p > 0 && b[p].is_ascii_digit() {
            p -= 1;
        }
        return p == b.len() - 1 || b[p] == b'p';
    }
    digit_at_end(name)
        && !name.starts_with("loop")
        && !name.starts_with("ram")
        && !whole(name, "mmcblk")
        && !whole(name, "nvme")
        && !whole(name, "rbd")
        && !name.starts_with("zram")
        && !whole(name, "nbd")
        && !name.starts_with("md")
        && !name.starts_with("dm-")
        && !is_cdrom(name)
}

fn is_wwid(name: &str) -> bool {
    name.len() == 18 && matches!(name.as_bytes()[0], b'1' | b'2' | b'3')
}

fn is_disk(name: &str) -> bool {
    !name.starts_with("loop")
        && !name.starts_with("ram")
        && !is_cdrom(name)
        && !name.starts_with("zram")
        && !is_partition(name)
        && !name.contains("xvm")
        && !name.starts_with("dm-")
        && !name.starts_with("md")
        && !is_wwid(name)
}

/// Which family `name` belongs to, `None` for the ones pmdalinux ignores (loop, ram,
/// cdroms, xvm volumes).
fn kind_of(name: &str) -> Option<Kind> {
    Some(if name.starts_with("dm-") {
        Kind::Dm
    } else if name.starts_with("md") {
        Kind::Md
    } else if is_partition(name) {
        Kind::Partition
    } else if is_disk(name) {
        Kind::Disk
    } else if name.starts_with("zram") {
        Kind::Zram
    } else if is_wwid(name) {
        Kind::Wwid
    } else {
        return None;
    })
}

/// A dm device's persistent name: sysfs's `dm/name`, else the block node in `/dev/mapper`
/// with its device number; `None`: pmdalinux skips the device.
fn dm_name(root: &Root, kname: &str, major: u32, minor: u32) -> Option<String> {
    if let Ok(n) = root.attr(&format!("sys/block/{kname}/dm/name")) {
        // pmdalinux takes the file's first line even when it is empty.
        return Some(n.lines().next().unwrap_or("").to_string());
    }
    use std::os::unix::fs::{FileTypeExt, MetadataExt};
    for entry in root.list("dev/mapper") {
        let Ok(meta) = std::fs::metadata(root.path(&format!("dev/mapper/{entry}"))) else {
            continue;
        };
        if meta.file_type().is_block_device() {
            let rdev = meta.rdev();
            if libc::major(rdev) == major && libc::minor(rdev) == minor {
                return Some(entry);
            }
        }
    }
    None
}

/// md devices' persistent names: `/dev/md/NAME -> ../mdN` links, numeric names skipped.
fn md_names(root: &Root) -> Vec<(String, String)> {
    root.list("dev/md")
        .into_iter()
        .filter(|n| !n.starts_with('.') && !n.starts_with(|c: char| c.is_ascii_digit()))
        .filter_map(|n| {
            let target = std::fs::read_link(root.path(&format!("dev/md/{n}"))).ok()?;
            let base = target.file_name()?.to_str()?.to_string();
            Some((base, n))
        })
        .collect()
}

/// Largest WWID file read: pmdalinux reads at most 1 KB of it.
const MAX_WWID: usize = 1024;

/// A disk's WWID as pmdalinux canonicalizes it (`naa.` -> `3`, `eui.` -> `2`, `t10.` ->
/// `1`), "unknown" when it has none.
fn scsi_id(root: &Root, kname: &str) -> String {
    let mut rel = format!("sys/block/{kname}/device/wwid");
    if !root.exists(&rel) {
        rel = format!("sys/block/{kname}/wwid");
    }
    let mut buf = String::new();
    let Ok(text) = root.read(&rel, &mut buf) else {
        return "unknown".into();
    };
    if text.is_empty() {
        return "unknown".into();
    }
    // pmdalinux drops the last byte read (the newline) and cuts at the last newline left.
    let mut end = text.len().min(MAX_WWID) - 1;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    let mut id = &text[..end];
    if let Some(nl) = id.rfind('\n') {
        id = &id[..nl];
    }
    for (prefix, digit) in [("t10.", '1'), ("eui.", '2'), ("naa.", '3')] {
        if let Some(rest) = id.strip_prefix(prefix) {
            return format!("{digit}{rest}");
        }
    }
    id.to_string()
}

/// The active scheduler (`[mq-deadline]`) of a disk's queue, or what the old kernels'
/// `iosched` directory implies, or "unknown".
fn scheduler(root: &Root, kname: &str) -> String {
    let mut buf = String::new();
    if let Ok(text) = root.read(&format!("sys/block/{kname}/queue/scheduler"), &mut buf) {
        let line = text.lines().next().unwrap_or("");
        return match (line.find('['), line.find(']')) {
            (Some(a), Some(b)) if a < b => line[a + 1..b].to_string(),
            _ => "unknown".into(),
        };
    }
    let q = format!("sys/block/{kname}/queue/iosched");
    for (file, name) in [
        ("quantum", "cfq"),
        ("fifo_batch", "deadline"),
        ("antic_expire", "anticipatory"),
    ] {
        if root.exists(&format!("{q}/{file}")) {
            return name.into();
        }
    }
    if root.exists(&q) {
        return "noop".into();
    }
    "unknown".into()
}

/// `N` unsigned numbers from a small sysfs file, `None` when fewer.
fn sysfs_numbers<const N: usize>(root: &Root, rel: &str) -> Option<[u64; N]> {
    let mut buf = String::new();
    let text = root.read(rel, &mut buf).ok()?;
    let mut out = [0u64; N];
    let mut it = text.split_ascii_whitespace();
    for slot in out.iter_mut() {
        *slot = it.next()?.parse().ok()?;
    }
    Some(out)
}

/// The health of each md array in `/proc/mdstat`, as pmdalinux reports `mdadm --detail
/// --test`'s exit status (through `pclose`, so shifted by 8): 0 healthy, 1<<8 degraded
/// (a member missing: `[2/1] [U_]`), 4<<8 not running (inactive).
fn mdstat(text: &str) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = Vec::new();
    for line in text.lines() {
        if let Some((name, rest)) = line.split_once(" : ") {
            let name = name.trim();
            if name.starts_with("md") {
                let status = if rest.starts_with("inactive") {
                    4 << 8
                } else {
                    0
                };
                out.push((name.to_string(), status));
            }
            continue;
        }
        // The status line under an array: "... [2/1] [U_]".
        let Some(last) = out.last_mut() else { continue };
        if let Some(map) = line.trim_end().rsplit(' ').next()
            && map.starts_with('[')
            && map.ends_with(']')
            && map.contains('_')
        {
            last.1 = last.1.max(1 << 8);
        }
    }
    out
}

/// The diskstats counters after the name: 4 (2.6.0-2.6.24 partitions), 11 (to 4.18), 15
/// (discards, to 5.4) or 17 (flushes).
fn parse_counters<'a>(fields: impl Iterator<Item = &'a str>, s: &mut Stats) -> usize {
    let mut v = [0u64; 17];
    let mut n = 0;
    for (slot, x) in v.iter_mut().zip(fields) {
        match x.parse::<u64>() {
            Ok(x) => *slot = x,
            Err(_) => break,
        }
        n += 1;
    }
    // The 32-bit fields wrap as `%u` stores them.
    let lo = |x: u64| x as u32;
    if n < 11 {
        // Short form: reads, read sectors, writes, write sectors (32-bit); the tick field
        // keeps what the long parse put there (the write sectors), as pmdalinux's does.
        *s = Stats {
            rd_ios: lo(v[0]).into(),
            rd_sectors: lo(v[1]).into(),
            rd_ticks: lo(v[3]),
            wr_ios: lo(v[2]).into(),
            wr_sectors: lo(v[3]).into(),
            ..Stats::default()
        };
        return n;
    }
    *s = Stats {
        rd_ios: v[0],
        rd_merges: v[1],
        rd_sectors: v[2],
        rd_ticks: lo(v[3]),
        wr_ios: v[4],
        wr_merges: v[5],
        wr_sectors: v[6],
        wr_ticks: lo(v[7]),
        in_flight: lo(v[8]),
        io_ticks: lo(v[9]),
        aveq: lo(v[10]),
        ..Stats::default()
    };
    if n >= 15 {
        s.ds_ios = v[11];
        s.ds_merges = v[12];
        s.ds_sectors = v[13];
        s.ds_ticks = lo(v[14]);
    }
    if n >= 17 {
        s.fl_ios = v[15];
        s.fl_ticks = lo(v[16]);
    }
    n
}

impl DiskStats {
    /// The device named `kname` (kernel name) of this refresh, adding it when new;
    /// `None` when pmdalinux ignores it or the filter refuses it.
    fn device(&mut self, ctx: &Ctx, kname: &str, major: u32, minor: u32) -> Option<usize> {
        if let Some(i) = self.devs.iter().position(|d| d.kname == kname) {
            return Some(i);
        }
        if !ctx.devices.disks.admits(kname) {
            return None;
        }
        let kind = kind_of(kname)?;
        let name = match kind {
            Kind::Dm => dm_name(ctx.root, kname, major, minor)?,
            _ => kname.to_string(),
        };
        let wwid = if kind == Kind::Disk {
            scsi_id(ctx.root, kname)
        } else {
            String::new()
        };
        if kind == Kind::Disk && wwid != "unknown" && !self.wwids.contains(&wwid) {
            self.wwids.push(wwid.clone());
        }
        if kind == Kind::Wwid && !self.wwids.iter().any(|w| w == kname) {
            self.wwids.push(kname.to_string());
        }
        self.devs.push(Dev {
            kind,
            kname: kname.to_string(),
            name,
            stats: Stats::default(),
            wwid,
            zram: Zram::default(),
            md_status: None,
        });
        Some(self.devs.len() - 1)
    }

    /// `/proc/diskstats`: `major minor name counters...`; false when absent.
    fn read_diskstats(&mut self, ctx: &Ctx) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        let ok = match ctx.root.read("proc/diskstats", &mut buf) {
            Ok(text) => {
                for line in text.lines() {
                    // pmdalinux skips lines not starting with a blank (headings).
                    if !line.starts_with(' ') {
                        continue;
                    }
                    let mut it = line.split_ascii_whitespace();
                    let (Some(ma), Some(mi), Some(kname)) = (it.next(), it.next(), it.next())
                    else {
                        continue;
                    };
                    let (Ok(ma), Ok(mi)) = (ma.parse::<u32>(), mi.parse::<u32>()) else {
                        continue;
                    };
                    let Some(i) = self.device(ctx, kname, ma, mi) else {
                        continue;
                    };
                    let mut s = Stats::default();
                    if parse_counters(it, &mut s) < 11 {
                        self.short_partitions = true;
                    }
                    s.nr_blocks = self.devs[i].stats.nr_blocks;
                    self.devs[i].stats = s;
                }
                true
            }
            Err(_) => false,
        };
        self.buf = buf;
        ok
    }

    /// `/proc/partitions`: `major minor #blocks name`, plus the 2.4 kernels' counters when
    /// there is no diskstats.
    fn read_partitions(&mut self, ctx: &Ctx, counters: bool) -> bool {
        let mut buf = std::mem::take(&mut self.buf);
        let ok = match ctx.root.read("proc/partitions", &mut buf) {
            Ok(text) => {
                for line in text.lines() {
                    if !line.starts_with(' ') {
                        continue;
                    }
                    let mut it = line.split_ascii_whitespace();
                    let (Some(ma), Some(mi), Some(blocks), Some(kname)) =
                        (it.next(), it.next(), it.next(), it.next())
                    else {
                        continue;
                    };
                    let (Ok(ma), Ok(mi), Ok(blocks)) =
                        (ma.parse::<u32>(), mi.parse::<u32>(), blocks.parse::<u64>())
                    else {
                        continue;
                    };
                    let Some(i) = self.device(ctx, kname, ma, mi) else {
                        continue;
                    };
                    if counters {
                        let mut s = Stats::default();
                        parse_counters(it, &mut s);
                        self.devs[i].stats = s;
                    }
                    self.devs[i].stats.nr_blocks = blocks;
                }
                true
            }
            Err(_) => false,
        };
        self.buf = buf;
        ok
    }

    fn of(&self, kind: Kind) -> impl Iterator<Item = &Dev> {
        self.devs.iter().filter(move |d| d.kind == kind)
    }

    /// `disk.wwid.*`: the disks that are paths to `wwid`, summed as pmdalinux sums them.
    fn wwid_value(&self, wwid: &str, item: u32) -> Option<Value> {
        let paths: Vec<&Dev> = self.of(Kind::Disk).filter(|d| d.wwid == wwid).collect();
        let root = self.root.as_ref()?;
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

impl Group for DiskStats {
    fn answers(&self, m: &Metric) -> bool {
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

    fn refresh(&mut self, ctx: &Ctx) {
        self.devs.clear();
        self.wwids.clear();
        self.short_partitions = false;
        self.root = Some(ctx.root.clone());
        let have_diskstats = self.read_diskstats(ctx);
        let have_partitions = self.read_partitions(ctx, !have_diskstats);
        self.ok = have_diskstats || have_partitions;
        if !self.ok {
            return;
        }
        if self.devs.iter().any(|d| d.kind == Kind::Md) {
            let names = md_names(ctx.root);
            let mut buf = String::new();
            let health = ctx
                .root
                .read("proc/mdstat", &mut buf)
                .map(mdstat)
                .unwrap_or_default();
            for d in self.devs.iter_mut().filter(|d| d.kind == Kind::Md) {
                if let Some((_, n)) = names.iter().find(|(k, _)| *k == d.kname) {
                    d.name = n.clone();
                }
                d.md_status = health.iter().find(|(k, _)| *k == d.kname).map(|h| h.1);
            }
        }
        for d in self.devs.iter_mut().filter(|d| d.kind == Kind::Zram) {
            let dir = format!("sys/block/{}", d.kname);
            d.zram = Zram {
                io: sysfs_numbers(ctx.root, &format!("{dir}/io_stat")),
                mm: sysfs_numbers(ctx.root, &format!("{dir}/mm_stat")),
                bd: sysfs_numbers(ctx.root, &format!("{dir}/bd_stat")),
                size: sysfs_numbers::<1>(ctx.root, &format!("{dir}/disksize")).map(|[b]| b >> 10),
            };
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        if !self.ok {
            return;
        }
        let (c, item) = (m.cluster, m.item);
        let per = |kind: Kind, f: &dyn Fn(&Dev) -> Option<Value>, out: &mut Values| {
            out.extend(self.of(kind).filter_map(|d| Some((d.name.clone(), f(d)?))));
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
                        Value::Uint(self.of(Kind::Disk).count() as u64),
                    ));
                } else if item == 59 {
                    let Some(root) = &self.root else { return };
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
                for w in &self.wwids {
                    if let Some(v) = self.wwid_value(w, item) {
                        out.push((w.clone(), v));
                    }
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests;
