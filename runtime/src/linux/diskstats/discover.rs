//! Device discovery for the block-device group: which family a kernel name belongs to (as
//! pmdalinux sorts them), the persistent names of dm and md devices, disks' WWIDs and
//! schedulers, zram's own sysfs figures, and the list of devices one refresh found.
//!
//! Reads sysfs, `/dev` and `/proc/mdstat` under the root; the `/proc` line formats are
//! [`super::parse`]'s, the metrics [`super::values`]'.

use super::parse::{Stats, mdstat};
use crate::linux::Ctx;
use crate::linux::read::Root;

/// What pmdalinux makes of a block device's kernel name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Disk,
    Partition,
    Dm,
    Md,
    Zram,
    /// A multipath map named by its WWID (`3600...`, 18 characters).
    Wwid,
}

/// zram's own sysfs figures, `None` when its file is absent or short.
#[derive(Clone, Debug, Default)]
pub struct Zram {
    pub io: Option<[u64; 4]>,
    pub mm: Option<[u64; 8]>,
    pub bd: Option<[u64; 3]>,
    /// `disksize` in Kbyte.
    pub size: Option<u64>,
}

#[derive(Clone, Debug)]
pub struct Dev {
    pub kind: Kind,
    /// Kernel name (`sda`, `dm-0`, `md127`): where its sysfs files are.
    pub kname: String,
    /// Instance name: the kernel name, or a dm/md device's persistent name.
    pub name: String,
    pub stats: Stats,
    /// A disk's WWID (`hinv.map.scsi_id`), "unknown" when it has none.
    pub wwid: String,
    pub zram: Zram,
    /// md: pmdalinux's `disk.md.status` (mdadm's exit status, as `pclose` returns it).
    pub md_status: Option<i64>,
}

pub fn digit_at_end(name: &str) -> bool {
    name.bytes().last().is_some_and(|b| b.is_ascii_digit())
}

/// `prefix` followed by a name without a `p` (a whole device, not `...p1`).
pub fn whole(name: &str, prefix: &str) -> bool {
    name.strip_prefix(prefix).is_some_and(|r| !r.contains('p'))
}

pub fn is_cdrom(name: &str) -> bool {
    name.strip_prefix("sr")
        .is_some_and(|r| r.bytes().next().is_some_and(|b| b.is_ascii_digit()))
}

/// pmdalinux's partition test: names with a slash (`cciss/c0d0p1`) are partitions when
/// their trailing digits follow a `p` (or when they have none); others when they end in a
/// digit and are none of the numbered whole-device families.
pub fn is_partition(name: &str) -> bool {
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

pub fn is_wwid(name: &str) -> bool {
    name.len() == 18 && matches!(name.as_bytes()[0], b'1' | b'2' | b'3')
}

pub fn is_disk(name: &str) -> bool {
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
pub fn kind_of(name: &str) -> Option<Kind> {
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
pub fn dm_name(root: &Root, kname: &str, major: u32, minor: u32) -> Option<String> {
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
pub fn md_names(root: &Root) -> Vec<(String, String)> {
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
pub const MAX_WWID: usize = 1024;

/// A disk's WWID as pmdalinux canonicalizes it (`naa.` -> `3`, `eui.` -> `2`, `t10.` ->
/// `1`), "unknown" when it has none.
pub fn scsi_id(root: &Root, kname: &str) -> String {
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
pub fn scheduler(root: &Root, kname: &str) -> String {
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
pub fn sysfs_numbers<const N: usize>(root: &Root, rel: &str) -> Option<[u64; N]> {
    let mut buf = String::new();
    let text = root.read(rel, &mut buf).ok()?;
    let mut out = [0u64; N];
    let mut it = text.split_ascii_whitespace();
    for slot in out.iter_mut() {
        *slot = it.next()?.parse().ok()?;
    }
    Some(out)
}

/// The devices one refresh found, in discovery order, and the WWIDs among them (disks'
/// and multipath maps named by one), in discovery order too.
#[derive(Default)]
pub struct Found {
    pub devs: Vec<Dev>,
    pub wwids: Vec<String>,
}

impl Found {
    pub fn clear(&mut self) {
        self.devs.clear();
        self.wwids.clear();
    }

    /// The device named `kname` (kernel name) of this refresh, adding it when new;
    /// `None` when pmdalinux ignores it or the filter refuses it.
    pub fn device(&mut self, ctx: &Ctx, kname: &str, major: u32, minor: u32) -> Option<usize> {
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

    pub fn of(&self, kind: Kind) -> impl Iterator<Item = &Dev> {
        self.devs.iter().filter(move |d| d.kind == kind)
    }

    /// What the device list alone does not say: md arrays' persistent names and health,
    /// zram devices' own figures.
    pub fn describe(&mut self, root: &Root) {
        if self.devs.iter().any(|d| d.kind == Kind::Md) {
            let names = md_names(root);
            let mut buf = String::new();
            let health = root
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
                io: sysfs_numbers(root, &format!("{dir}/io_stat")),
                mm: sysfs_numbers(root, &format!("{dir}/mm_stat")),
                bd: sysfs_numbers(root, &format!("{dir}/bd_stat")),
                size: sysfs_numbers::<1>(root, &format!("{dir}/disksize")).map(|[b]| b >> 10),
            };
        }
    }
}
