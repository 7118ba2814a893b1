//! `lustre`: a Lustre client's llite statistics per mounted file system and the node's LNet
//! totals, under pmdalustre's names and PMIDs (domain 134; llite in cluster 0 with one
//! instance per file system volume, LNet in cluster 1, singular).
//!
//! Where the files are: Lustre 2.12 and later keep them in debugfs
//! (`/sys/kernel/debug/lustre/llite/FS-SUPERBLOCK/stats`, `/sys/kernel/debug/lnet/stats`),
//! older ones in `/proc/fs/lustre/llite/` and `/proc/sys/lnet/`; as pmdalustre does, the
//! debugfs pair is used when both of its directories exist, else the procfs pair. No Lustre:
//! no instances and no LNet values, no error.
//!
//! As in pmdalustre, a file system's counters that its `stats` file does not list yet (Lustre
//! prints a counter only once it moved) are 0, and an llite directory counts only when its
//! name is `VOLUME-` and 16 hex digits. Unlike it, a counter line whose numbers do not parse
//! gives that counter no value (not a 0 that would read as a reset), an operation Lustre 2.14
//! and later times (`[usecs]` instead of `[regs]`) still gives its count, and a trailing
//! sum-of-squares field is allowed.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use wasmon_guest::agent::{Atom, Pmid, Semantics, Value, ValueSet, ValueType};
use wasmon_guest::names::{Catalog, Metric};
use wasmon_guest::sysfs;

pub const DOMAIN: u32 = 134;

/// Where Lustre 2.12 and later put the statistics, and where earlier releases did.
const DEBUGFS: (&str, &str) = ("/sys/kernel/debug/lustre/llite", "/sys/kernel/debug/lnet");
const PROCFS: (&str, &str) = ("/proc/fs/lustre/llite", "/proc/sys/lnet");

/// Counters with min, max and total besides the count (bytes, then pages), as (name, first
/// item): the four metrics are items `first..first + 4`.
const BYTE_STATS: &[(&str, u32)] = &[
    ("read_bytes", 3),
    ("write_bytes", 7),
    ("osc_read", 11),
    ("osc_write", 15),
];
const PAGE_STATS: &[(&str, u32)] = &[("brw_read", 19), ("brw_write", 23)];
/// Counters of calls only, from item 27 on in this order.
const REG_STATS: &[&str] = &[
    "dirty_pages_hits",
    "dirty_pages_misses",
    "ioctl",
    "open",
    "close",
    "mmap",
    "seek",
    "fsync",
    "readdir",
    "setattr",
    "truncate",
    "flock",
    "getattr",
    "create",
    "link",
    "unlink",
    "symlink",
    "mkdir",
    "rmdir",
    "mknod",
    "rename",
    "statfs",
    "alloc_inode",
    "setxattr",
    "getxattr",
    "getxattr_hits",
    "listxattr",
    "removexattr",
    "inode_permission",
];
const FIRST_REG: u32 = 27;
/// The LNet `stats` line's fields in order, items 1 to 11.
const LNET_FIELDS: usize = 11;

/// The indom of the per-file-system (llite, cluster 0) metrics; LNet's are singular.
const LLITE: Option<u32> = Some(0);

use Semantics::{Counter, Instant};
use ValueType::{Text, Uint32, Uint64};

/// The four metrics of a counter with min, max and total (bytes or pages).
macro_rules! sized {
    ($name:literal, $item:literal, $size:literal, $total:literal, $what:literal) => {
        [
            Metric::new(
                concat!("lustre.llite.", $name, ".count"),
                0,
                $item,
                Uint64,
                Counter,
                "count",
                LLITE,
                concat!(
                    "Calls counted as ",
                    $what,
                    " since the file system was mounted"
                ),
            ),
            Metric::new(
                concat!("lustre.llite.", $name, ".min"),
                0,
                $item + 1,
                Uint64,
                Instant,
                $size,
                LLITE,
                concat!("Smallest size of one of the calls counted as ", $what),
            ),
            Metric::new(
                concat!("lustre.llite.", $name, ".max"),
                0,
                $item + 2,
                Uint64,
                Instant,
                $size,
                LLITE,
                concat!("Largest size of one of the calls counted as ", $what),
            ),
            Metric::new(
                concat!("lustre.llite.", $name, ".total"),
                0,
                $item + 3,
                Uint64,
                Counter,
                $total,
                LLITE,
                concat!("Sum of the sizes of the calls counted as ", $what),
            ),
        ]
    };
}

/// A counter of calls only.
macro_rules! calls {
    ($name:literal, $item:literal) => {
        Metric::new(
            concat!("lustre.llite.", $name, ".count"),
            0,
            $item,
            Uint64,
            Counter,
            "count",
            LLITE,
            concat!(
                "Calls of the client's ",
                $name,
                " operation since the file system was mounted"
            ),
        )
    };
}

const fn lnet(
    name: &'static str,
    item: u32,
    wide: bool,
    semantics: Semantics,
    units: &'static str,
    help: &'static str,
) -> Metric {
    Metric::new(
        name,
        1,
        item,
        if wide { Uint64 } else { Uint32 },
        semantics,
        units,
        None,
        help,
    )
}

/// The call counters and the LNet metrics.
const REST: usize = 29 + LNET_FIELDS;

/// Volume and superblock, the six sized counters' 24 metrics, then `rest`, in PMID order.
const fn flatten(groups: [[Metric; 4]; 6], rest: [Metric; REST]) -> [Metric; 26 + REST] {
    let mut out = [rest[0]; 26 + REST];
    out[0] = Metric::new(
        "lustre.llite.volume",
        0,
        1,
        Text,
        Instant,
        "",
        LLITE,
        "Name of the Lustre file system (the instance's name)",
    );
    out[1] = Metric::new(
        "lustre.llite.superblock",
        0,
        2,
        Text,
        Instant,
        "",
        LLITE,
        "Client superblock address of the mount, in hex, as its llite directory names it",
    );
    let mut g = 0;
    while g < 6 {
        let mut i = 0;
        while i < 4 {
            out[2 + g * 4 + i] = groups[g][i];
            i += 1;
        }
        g += 1;
    }
    let mut r = 0;
    while r < REST {
        out[26 + r] = rest[r];
        r += 1;
    }
    out
}

const ALL: [Metric; 26 + REST] = flatten(
    [
        // Sizes in bytes; pages are counted (pmdalustre: min and max without a unit, the
        // total a count).
        sized!("read_bytes", 3, "byte", "byte", "reads"),
        sized!("write_bytes", 7, "byte", "byte", "writes"),
        sized!(
            "osc_read",
            11,
            "byte",
            "byte",
            "reads sent to object storage clients"
        ),
        sized!(
            "osc_write",
            15,
            "byte",
            "byte",
            "writes sent to object storage clients"
        ),
        sized!("brw_read", 19, "", "count", "bulk reads, in pages"),
        sized!("brw_write", 23, "", "count", "bulk writes, in pages"),
    ],
    [
        calls!("dirty_pages_hits", 27),
        calls!("dirty_pages_misses", 28),
        calls!("ioctl", 29),
        calls!("open", 30),
        calls!("close", 31),
        calls!("mmap", 32),
        calls!("seek", 33),
        calls!("fsync", 34),
        calls!("readdir", 35),
        calls!("setattr", 36),
        calls!("truncate", 37),
        calls!("flock", 38),
        calls!("getattr", 39),
        calls!("create", 40),
        calls!("link", 41),
        calls!("unlink", 42),
        calls!("symlink", 43),
        calls!("mkdir", 44),
        calls!("rmdir", 45),
        calls!("mknod", 46),
        calls!("rename", 47),
        calls!("statfs", 48),
        calls!("alloc_inode", 49),
        calls!("setxattr", 50),
        calls!("getxattr", 51),
        calls!("getxattr_hits", 52),
        calls!("listxattr", 53),
        calls!("removexattr", 54),
        calls!("inode_permission", 55),
        lnet(
            "lustre.lnet.msgs_alloc",
            1,
            false,
            Instant,
            "",
            "LNet messages allocated now",
        ),
        lnet(
            "lustre.lnet.msgs_max",
            2,
            false,
            Instant,
            "",
            "Most LNet messages allocated at once",
        ),
        lnet(
            "lustre.lnet.errors",
            3,
            false,
            Counter,
            "count",
            "LNet errors",
        ),
        lnet(
            "lustre.lnet.send_count",
            4,
            false,
            Counter,
            "count",
            "LNet messages sent",
        ),
        lnet(
            "lustre.lnet.recv_count",
            5,
            false,
            Counter,
            "count",
            "LNet messages received",
        ),
        lnet(
            "lustre.lnet.route_count",
            6,
            false,
            Counter,
            "count",
            "LNet messages routed through this node",
        ),
        lnet(
            "lustre.lnet.drop_count",
            7,
            false,
            Counter,
            "count",
            "LNet messages dropped",
        ),
        lnet(
            "lustre.lnet.send_length",
            8,
            true,
            Counter,
            "byte",
            "Bytes of the LNet messages sent",
        ),
        lnet(
            "lustre.lnet.recv_length",
            9,
            true,
            Counter,
            "byte",
            "Bytes of the LNet messages received",
        ),
        lnet(
            "lustre.lnet.route_length",
            10,
            true,
            Counter,
            "byte",
            "Bytes of the LNet messages routed through this node",
        ),
        lnet(
            "lustre.lnet.drop_length",
            11,
            true,
            Counter,
            "byte",
            "Bytes of the LNet messages dropped",
        ),
    ],
);

pub static METRICS: &[Metric] = &ALL;

/// One mounted file system's counters: item -> value (absent: not a number in the file).
struct Mount {
    superblock: String,
    counters: BTreeMap<u32, u64>,
}

/// The `VOLUME-SUPERBLOCK` of an llite directory name, when it is one (pmdalustre's
/// `^(\w+)-([a-f0-9]{16})$`).
fn mount_name(entry: &str) -> Option<(&str, &str)> {
    let (volume, superblock) = entry.rsplit_once('-')?;
    let word = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let ok = !volume.is_empty()
        && volume.chars().all(word)
        && superblock.len() == 16
        && superblock
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    ok.then_some((volume, superblock))
}

/// The numbers of one `stats` line after its name: (count, [min, max, sum] when sized).
fn counter_line(rest: &str) -> Option<(u64, Option<[u64; 3]>)> {
    let mut words = rest.split_whitespace();
    let count = words.next()?.parse().ok()?;
    if words.next()? != "samples" {
        return None;
    }
    let unit = words.next()?;
    if !(unit.starts_with('[') && unit.ends_with(']')) {
        return None;
    }
    let nums: Vec<&str> = words.collect();
    if nums.is_empty() {
        return Some((count, None));
    }
    // min, max, sum, and Lustre's optional sum of squares.
    if nums.len() < 3 || nums.len() > 4 {
        return None;
    }
    let n = |i: usize| nums[i].parse::<u64>().ok();
    Some((count, Some([n(0)?, n(1)?, n(2)?])))
}

/// Parses an llite `stats` file: every counter, with pmdalustre's 0 for those not listed and
/// none for a line that does not parse.
fn parse_stats(text: &str, superblock: &str) -> Mount {
    let mut counters = BTreeMap::new();
    for &(_, first) in BYTE_STATS.iter().chain(PAGE_STATS) {
        for item in first..first + 4 {
            counters.insert(item, 0);
        }
    }
    for item in FIRST_REG..FIRST_REG + REG_STATS.len() as u32 {
        counters.insert(item, 0);
    }
    for line in text.lines() {
        let Some((name, rest)) = line.trim().split_once(char::is_whitespace) else {
            continue;
        };
        let sized = BYTE_STATS
            .iter()
            .chain(PAGE_STATS)
            .find(|(n, _)| *n == name)
            .map(|&(_, first)| first);
        let reg = REG_STATS
            .iter()
            .position(|n| *n == name)
            .map(|i| FIRST_REG + i as u32);
        let parsed = counter_line(rest);
        match (sized, reg, parsed) {
            (Some(first), _, Some((count, Some([min, max, sum])))) => {
                for (i, v) in [count, min, max, sum].into_iter().enumerate() {
                    counters.insert(first + i as u32, v);
                }
            }
            (Some(first), _, _) => {
                for item in first..first + 4 {
                    counters.remove(&item);
                }
            }
            (None, Some(item), Some((count, _))) => {
                counters.insert(item, count);
            }
            (None, Some(item), None) => {
                counters.remove(&item);
            }
            (None, None, _) => {}
        }
    }
    Mount {
        superblock: superblock.to_string(),
        counters,
    }
}

pub struct Lustre {
    catalog: Catalog,
    root: PathBuf,
}

/// What one fetch reads: the mounts by volume, and the LNet line's fields.
struct Snapshot {
    mounts: BTreeMap<String, Mount>,
    lnet: Option<Vec<u64>>,
}

impl Lustre {
    pub fn at(root: &Path) -> Lustre {
        Lustre {
            catalog: Catalog::new(DOMAIN, METRICS),
            root: root.to_path_buf(),
        }
    }

    /// The llite and LNet directories this node has (debugfs when both of its exist).
    fn dirs(&self) -> (PathBuf, PathBuf) {
        let pick = |(llite, lnet): (&str, &str)| {
            (
                sysfs::under(&self.root, llite),
                sysfs::under(&self.root, lnet),
            )
        };
        let debugfs = pick(DEBUGFS);
        if sysfs::is_dir(&debugfs.0) && sysfs::is_dir(&debugfs.1) {
            debugfs
        } else {
            pick(PROCFS)
        }
    }

    fn snapshot(&self, llite_wanted: bool, lnet_wanted: bool) -> Snapshot {
        let (llite, lnet_dir) = self.dirs();
        let mut mounts = BTreeMap::new();
        if llite_wanted {
            for entry in sysfs::list(&llite) {
                let Some((volume, superblock)) = mount_name(&entry) else {
                    continue;
                };
                // A mount whose stats cannot be read (gone, too large) is left out.
                let Ok(text) = sysfs::read_text(&llite.join(&entry).join("stats")) else {
                    continue;
                };
                // One instance per volume, as pmdalustre keys them: of two mounts of one
                // file system, the later name wins.
                mounts.insert(volume.to_string(), parse_stats(&text, superblock));
            }
        }
        let lnet = lnet_wanted
            .then(|| sysfs::read_text(&lnet_dir.join("stats")).ok())
            .flatten()
            .and_then(|text| {
                let fields: Vec<u64> = text
                    .split_whitespace()
                    .map(|w| w.parse().ok())
                    .collect::<Option<_>>()?;
                (fields.len() >= LNET_FIELDS).then_some(fields)
            });
        Snapshot { mounts, lnet }
    }

    pub fn fetch_ids(&self, ids: &[Pmid]) -> Vec<ValueSet> {
        let metrics: Vec<Option<&Metric>> = ids.iter().map(|&id| self.catalog.metric(id)).collect();
        let wants = |c: u32| metrics.iter().flatten().any(|m| m.cluster == c);
        let snap = self.snapshot(wants(0), wants(1));
        self.catalog.value_sets(ids, |m| {
            if m.cluster == 1 {
                return snap
                    .lnet
                    .as_ref()
                    .map(|f| vec![Value::new("", Atom::Uint(f[m.item as usize - 1]))])
                    .unwrap_or_default();
            }
            snap.mounts
                .iter()
                .filter_map(|(volume, mount)| {
                    let atom = match m.item {
                        1 => Atom::Text(volume.clone()),
                        2 => Atom::Text(mount.superblock.clone()),
                        item => Atom::Uint(*mount.counters.get(&item)?),
                    };
                    Some(Value::new(volume.clone(), atom))
                })
                .collect()
        })
    }
}

wasmon_guest::tree_agent!(Lustre);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pmids_are_pmdalustres() {
        let c = Catalog::new(DOMAIN, METRICS);
        let id = |n: &str| c.names().lookup(n).unwrap();
        let p = |cluster, item| Pmid {
            domain: 134,
            cluster,
            item,
        };
        assert_eq!(id("lustre.llite.volume"), p(0, 1));
        assert_eq!(id("lustre.llite.read_bytes.count"), p(0, 3));
        assert_eq!(id("lustre.llite.osc_write.total"), p(0, 18));
        assert_eq!(id("lustre.llite.brw_read.count"), p(0, 19));
        assert_eq!(id("lustre.llite.brw_write.total"), p(0, 26));
        assert_eq!(id("lustre.llite.dirty_pages_hits.count"), p(0, 27));
        assert_eq!(id("lustre.llite.inode_permission.count"), p(0, 55));
        assert_eq!(id("lustre.lnet.recv_length"), p(1, 9));
        assert_eq!(id("lustre.lnet.drop_length"), p(1, 11));
        assert_eq!(METRICS.len(), 66);
        // Every name once, every PMID once.
        let mut pmids: Vec<(u32, u32)> = METRICS.iter().map(|m| (m.cluster, m.item)).collect();
        pmids.sort();
        pmids.dedup();
        assert_eq!(pmids.len(), METRICS.len());
        for (i, name) in REG_STATS.iter().enumerate() {
            assert_eq!(
                id(&format!("lustre.llite.{name}.count")),
                p(0, FIRST_REG + i as u32)
            );
        }
        for &(name, first) in BYTE_STATS.iter().chain(PAGE_STATS) {
            assert_eq!(id(&format!("lustre.llite.{name}.count")), p(0, first));
        }
    }

    #[test]
    fn directory_names_and_lines() {
        assert_eq!(
            mount_name("lustre-ffff880378305c00"),
            Some(("lustre", "ffff880378305c00"))
        );
        assert_eq!(mount_name("lustre-ffff880378305c0"), None);
        assert_eq!(mount_name("lus-tre-ffff880378305c00"), None);
        assert_eq!(mount_name("lustre-FFFF880378305C00"), None);
        assert_eq!(mount_name("-ffff880378305c00"), None);
        assert_eq!(
            counter_line("34 samples [bytes] 0 59 1003"),
            Some((34, Some([0, 59, 1003])))
        );
        assert_eq!(
            counter_line("34 samples [bytes] 0 59 1003 3481"),
            Some((34, Some([0, 59, 1003])))
        );
        assert_eq!(counter_line("33 samples [regs]"), Some((33, None)));
        assert_eq!(
            counter_line("33 samples [usecs] 4 90 1200"),
            Some((33, Some([4, 90, 1200])))
        );
        assert_eq!(counter_line("lots samples [regs]"), None);
        assert_eq!(counter_line("3 samples [bytes] 1 x 3"), None);
        assert_eq!(counter_line("3 samples bytes"), None);
    }
}
