//! `/proc/vmstat` (cluster 28, `mem.vmstat.*`) and the swap page counts of cluster 0
//! (`swap.pagesin`, `swap.pagesout`, `swap.in`, `swap.out`), which moved from
//! `/proc/stat` to `/proc/vmstat` in Linux 2.6.
//!
//! As pmdalinux 6.0.3: only the keys it knows are kept ([`fields`]); a key this kernel does
//! not write has no value; `pgscan_direct_total`, `pgscan_kswapd_total` and `pgsteal_total`
//! sum every known key with that prefix (0 when none); `nr_slab` (split in 2.6.18) and
//! `thp_split` (split in 4.5) are the sums of their parts when the kernel lacks them. While
//! `/proc/vmstat` exists, `swap.in`/`swap.out` answer "not supported by this version"
//! (the kernel stopped counting swap operations); without it, the four swap items come from
//! `/proc/stat`'s `page` and `swap` lines.
//!
//! Owns these two clusters' parsing only.

use super::{Ctx, Group, Metric};
use crate::namespace::{NsError, Value, Values};

/// The key each item of cluster 28 shows, by item number, as pmdalinux 6.0.3's metric
/// table points them (items 103 and 104 are crossed there: `balloon_deflate`'s PMID shows
/// the inflate count; kept so values match the reference).
const ITEMS: &[&str] = &[
    "nr_dirty",
    "nr_writeback",
    "nr_unstable",
    "nr_page_table_pages",
    "nr_mapped",
    "nr_slab",
    "pgpgin",
    "pgpgout",
    "pswpin",
    "pswpout",
    "pgalloc_high",
    "pgalloc_normal",
    "pgalloc_dma",
    "pgfree",
    "pgactivate",
    "pgdeactivate",
    "pgfault",
    "pgmajfault",
    "pgrefill_high",
    "pgrefill_normal",
    "pgrefill_dma",
    "pgsteal_high",
    "pgsteal_normal",
    "pgsteal_dma",
    "pgscan_kswapd_high",
    "pgscan_kswapd_normal",
    "pgscan_kswapd_dma",
    "pgscan_direct_high",
    "pgscan_direct_normal",
    "pgscan_direct_dma",
    "pginodesteal",
    "slabs_scanned",
    "kswapd_steal",
    "kswapd_inodesteal",
    "pageoutrun",
    "allocstall",
    "pgrotated",
    "nr_slab_reclaimable",
    "nr_slab_unreclaimable",
    "nr_anon_pages",
    "nr_bounce",
    "nr_file_pages",
    "nr_vmscan_write",
    "htlb_buddy_alloc_fail",
    "htlb_buddy_alloc_success",
    "nr_active_anon",
    "nr_active_file",
    "nr_free_pages",
    "nr_inactive_anon",
    "nr_inactive_file",
    "nr_isolated_anon",
    "nr_isolated_file",
    "nr_kernel_stack",
    "nr_mlock",
    "nr_shmem",
    "nr_unevictable",
    "nr_writeback_temp",
    "compact_blocks_moved",
    "compact_fail",
    "compact_pagemigrate_failed",
    "compact_pages_moved",
    "compact_stall",
    "compact_success",
    "pgalloc_dma32",
    "pgalloc_movable",
    "pgrefill_dma32",
    "pgrefill_movable",
    "pgscan_direct_dma32",
    "pgscan_direct_movable",
    "pgscan_kswapd_dma32",
    "pgscan_kswapd_movable",
    "pgsteal_dma32",
    "pgsteal_movable",
    "thp_fault_alloc",
    "thp_fault_fallback",
    "thp_collapse_alloc",
    "thp_collapse_alloc_failed",
    "thp_split",
    "unevictable_pgs_cleared",
    "unevictable_pgs_culled",
    "unevictable_pgs_mlocked",
    "unevictable_pgs_mlockfreed",
    "unevictable_pgs_munlocked",
    "unevictable_pgs_rescued",
    "unevictable_pgs_scanned",
    "unevictable_pgs_stranded",
    "zone_reclaim_failed",
    "kswapd_low_wmark_hit_quickly",
    "kswapd_high_wmark_hit_quickly",
    "kswapd_skip_congestion_wait",
    "nr_anon_transparent_hugepages",
    "nr_dirtied",
    "nr_dirty_background_threshold",
    "nr_dirty_threshold",
    "nr_written",
    "numa_foreign",
    "numa_hit",
    "numa_interleave",
    "numa_local",
    "numa_miss",
    "numa_other",
    "thp_zero_page_alloc",
    "thp_zero_page_alloc_failed",
    "balloon_inflate",
    "balloon_deflate",
    "balloon_migrate",
    "compact_daemon_wake",
    "compact_free_scanned",
    "compact_migrate_scanned",
    "drop_pagecache",
    "drop_slab",
    "nr_free_cma",
    "nr_pages_scanned",
    "nr_vmscan_immediate_reclaim",
    "numa_pages_migrated",
    "numa_pte_updates",
    "pglazyfreed",
    "pgmigrate_fail",
    "pgmigrate_success",
    "thp_deferred_split_page",
    "thp_split_page",
    "thp_split_page_failed",
    "thp_split_pmd",
    "workingset_activate",
    "workingset_nodereclaim",
    "workingset_refault",
    "compact_isolated",
    "nr_shmem_hugepages",
    "nr_shmem_pmdmapped",
    "nr_zone_inactive_anon",
    "nr_zone_active_anon",
    "nr_zone_inactive_file",
    "nr_zone_active_file",
    "nr_zone_unevictable",
    "nr_zone_write_pending",
    "nr_zspages",
    "thp_file_alloc",
    "thp_file_mapped",
    "pgsteal_kswapd_dma",
    "pgsteal_kswapd_dma32",
    "pgsteal_kswapd_normal",
    "pgsteal_kswapd_movable",
    "pgsteal_direct_dma",
    "pgsteal_direct_dma32",
    "pgsteal_direct_normal",
    "pgsteal_direct_movable",
    "pgscan_direct",
    "pgscan_direct_throttle",
    "pgscan_kswapd",
    "pgsteal_direct",
    "pgsteal_kswapd",
    "numa_huge_pte_updates",
    "numa_hint_faults",
    "numa_hint_faults_local",
    "allocstall_dma",
    "allocstall_dma32",
    "allocstall_high",
    "allocstall_movable",
    "allocstall_normal",
    "compact_daemon_free_scanned",
    "compact_daemon_migrate_scanned",
    "nr_file_hugepages",
    "nr_file_pmdmapped",
    "nr_foll_pin_acquired",
    "nr_foll_pin_released",
    "nr_kernel_misc_reclaimable",
    "oom_kill",
    "pgsteal_file",
    "swap_ra",
    "swap_ra_hit",
    "thp_fault_fallback_charge",
    "thp_split_pud",
    "thp_swpout",
    "thp_swpout_fallback",
    "workingset_nodes",
    "workingset_restore",
    "pgscan_direct_total",
    "pgscan_kswapd_total",
    "pgsteal_total",
];

/// pmdalinux's "no value" mark for a key the file lacked (`-1` in its u64 fields). The
/// derived sums add it as pmdalinux does (wrapping), so they match the reference even then.
const NONE: u64 = u64::MAX;

#[derive(Default)]
pub struct VmStat {
    buf: String,
    /// By index in [`fields`]; [`NONE`] when absent.
    vals: Vec<u64>,
    scan_direct: u64,
    scan_kswapd: u64,
    steal: u64,
    /// The last refresh read `/proc/vmstat`.
    have: bool,
    /// pmdalinux's `_pm_have_proc_vmstat`: set once the file was seen, never cleared.
    seen: bool,
    /// Without `/proc/vmstat`: `/proc/stat`'s `page` and `swap` pairs (`None`: no /proc/stat).
    stat: Option<[u64; 4]>,
}

/// The sums pmdalinux computes rather than reads.
const SUMS: [&str; 3] = [
    "pgscan_direct_total",
    "pgscan_kswapd_total",
    "pgsteal_total",
];

/// The keys pmdalinux 6.0.3 reads (its `vmstat_fields`: every key of [`ITEMS`] but the
/// [`SUMS`]), sorted once for a binary search per line.
fn fields() -> &'static [&'static str] {
    static FIELDS: std::sync::LazyLock<Vec<&str>> = std::sync::LazyLock::new(|| {
        let mut f: Vec<&str> = ITEMS
            .iter()
            .copied()
            .filter(|k| !SUMS.contains(k))
            .collect();
        f.sort_unstable();
        f
    });
    &FIELDS
}

fn field(key: &str) -> Option<usize> {
    fields().binary_search(&key).ok()
}

/// The first run of digits in `rest` (pmdalinux skips to the first digit, then `%llu`).
fn first_number(rest: &str) -> Option<u64> {
    let start = rest.find(|c: char| c.is_ascii_digit())?;
    let digits = &rest[start..];
    let end = digits
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(digits.len());
    // strtoull saturates on overflow.
    Some(digits[..end].parse().unwrap_or(u64::MAX))
}

impl VmStat {
    fn parse(&mut self, text: &str) {
        for line in text.lines() {
            let Some((key, rest)) = line.split_once(' ') else {
                continue;
            };
            let Some(i) = field(key) else { continue };
            let Some(v) = first_number(rest) else {
                continue;
            };
            self.vals[i] = v;
            if key.starts_with("pgsteal_") {
                self.steal = self.steal.wrapping_add(v);
            } else if key.starts_with("pgscan_kswapd") {
                self.scan_kswapd = self.scan_kswapd.wrapping_add(v);
            } else if key.starts_with("pgscan_direct") {
                self.scan_direct = self.scan_direct.wrapping_add(v);
            }
        }
        let get = |vals: &[u64], k: &str| field(k).map_or(NONE, |i| vals[i]);
        for (whole, a, b) in [
            ("nr_slab", "nr_slab_reclaimable", "nr_slab_unreclaimable"),
            ("thp_split", "thp_split_page", "thp_split_page_failed"),
        ] {
            if let Some(i) = field(whole).filter(|&i| self.vals[i] == NONE) {
                self.vals[i] = get(&self.vals, a).wrapping_add(get(&self.vals, b));
            }
        }
    }

    fn key(&self, name: &str) -> Option<u64> {
        match name {
            "pgscan_direct_total" => Some(self.scan_direct),
            "pgscan_kswapd_total" => Some(self.scan_kswapd),
            "pgsteal_total" => Some(self.steal),
            _ => Some(self.vals[field(name)?]).filter(|&v| v != NONE),
        }
    }
}

/// `/proc/stat`'s `page IN OUT` and `swap IN OUT` lines (Linux 2.4), 0 when absent.
fn stat_pairs(text: &str) -> [u64; 4] {
    let mut out = [0u64; 4];
    for line in text.lines() {
        let (at, rest) = if let Some(r) = line.strip_prefix("page ") {
            (0, r)
        } else if let Some(r) = line.strip_prefix("swap ") {
            (2, r)
        } else {
            continue;
        };
        let mut it = rest.split_ascii_whitespace();
        if let (Some(a), Some(b)) = (it.next(), it.next())
            && let (Ok(a), Ok(b)) = (a.parse::<u32>(), b.parse::<u32>())
        {
            out[at] = a.into();
            out[at + 1] = b.into();
        }
    }
    out
}

fn is_swap_item(m: &Metric) -> bool {
    m.cluster == 0 && (8..=11).contains(&m.item)
}

impl Group for VmStat {
    fn answers(&self, m: &Metric) -> bool {
        (m.cluster == 28 && (m.item as usize) < ITEMS.len()) || is_swap_item(m)
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.vals.clear();
        self.vals.resize(fields().len(), NONE);
        (self.scan_direct, self.scan_kswapd, self.steal) = (0, 0, 0);
        self.stat = None;
        let mut buf = std::mem::take(&mut self.buf);
        self.have = ctx
            .root
            .read("proc/vmstat", &mut buf)
            .map(|t| self.parse(t))
            .is_ok();
        self.seen |= self.have || ctx.root.exists("proc/vmstat");
        if !self.seen {
            self.stat = ctx.root.read("proc/stat", &mut buf).ok().map(stat_pairs);
        }
        self.buf = buf;
    }

    fn error(&self, m: &Metric) -> Option<NsError> {
        (self.seen && m.cluster == 0 && matches!(m.item, 10 | 11)).then_some(NsError::AppVersion)
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let v = if is_swap_item(m) {
            if self.seen {
                // pmdalinux stores the u64 into a u32 atom: a missing key shows as 2^32-1.
                let key = if m.item == 8 { "pswpin" } else { "pswpout" };
                let v = field(key).map_or(NONE, |i| self.vals.get(i).copied().unwrap_or(NONE));
                (m.item < 10).then_some(v & u64::from(u32::MAX))
            } else {
                // page in/out are items 10/11, swap in/out items 8/9.
                let at = match m.item {
                    8 => 2,
                    9 => 3,
                    10 => 0,
                    _ => 1,
                };
                self.stat.map(|s| s[at])
            }
        } else if self.have {
            ITEMS.get(m.item as usize).and_then(|k| self.key(k))
        } else {
            None
        };
        if let Some(v) = v {
            out.push((String::new(), Value::Uint(v)));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::LinuxAgent;
    use super::super::testing::{agent, one};
    use crate::namespace::{Agent, NsError};

    /// A 2.6.32-era file: zone-split steal and scan counters, `nr_slab` already split in
    /// two, no THP (2.6.38), workingset or compaction-daemon keys.
    const OLD: &str = "\
nr_free_pages 1000
nr_slab_reclaimable 300
nr_slab_unreclaimable 200
nr_dirty 12
pgpgin 5000
pgpgout 6000
pswpin 7
pswpout 9
pgsteal_dma 1
pgsteal_dma32 2
pgsteal_normal 3
pgsteal_movable 4
pgscan_kswapd_dma 10
pgscan_kswapd_dma32 20
pgscan_kswapd_normal 30
pgscan_direct_dma 100
pgscan_direct_normal 200
kswapd_steal 77
";

    /// A 6.x file: no zone-split steal/scan counters, `thp_split_page` and friends, keys
    /// pmdalinux 6.0.3 does not know (`pgsteal_anon`, `nr_free_pages_blocks`) and one with a
    /// value beyond u32.
    const NEW: &str = "\
nr_free_pages 1284200
nr_free_pages_blocks 939008
nr_slab_reclaimable 158476
nr_slab_unreclaimable 29940
pswpin 8589934593
pswpout 0
pgsteal_kswapd 40
pgsteal_direct 2
pgsteal_khugepaged 0
pgsteal_anon 1000000
pgsteal_file 42
pgscan_kswapd 50
pgscan_direct 5
pgscan_direct_throttle 1
thp_split_page 3
thp_split_page_failed 1
balloon_inflate 11
balloon_deflate 22
workingset_refault_file 76
";

    #[test]
    fn an_old_kernel_sums_zone_counters_and_lacks_new_keys() {
        let (_dir, mut a) = agent(&[("proc/vmstat", OLD)]);
        a.expect(
            "mem.vmstat.nr_free_pages 1000
            mem.vmstat.nr_slab 500
            mem.vmstat.pgsteal_total 10
            mem.vmstat.pgscan_kswapd_total 60
            mem.vmstat.pgscan_direct_total 300
            mem.vmstat.kswapd_steal 77
            # Keys this kernel does not write: no value, not 0.
            mem.vmstat.thp_fault_alloc -
            mem.vmstat.workingset_refault -
            swap.pagesin 7
            swap.pagesout 9",
        );
        for name in ["swap.in", "swap.out"] {
            let id = a.lookup_name(name).unwrap();
            assert_eq!(a.fetch(&[id])[0].1, Err(NsError::AppVersion), "{name}");
        }
    }

    #[test]
    fn a_new_kernel_with_keys_pmdalinux_does_not_know() {
        let (_dir, mut a) = agent(&[("proc/vmstat", NEW)]);
        a.expect(
            "mem.vmstat.nr_slab 188416
            mem.vmstat.thp_split 4
            # pgsteal_anon is not a 6.0.3 key, so it is not summed; pgsteal_file is.
            mem.vmstat.pgsteal_total 84
            mem.vmstat.pgscan_kswapd_total 50
            mem.vmstat.pgscan_direct_total 6
            # 6.0.3's table crosses these two PMIDs; the names follow the PMIDs.
            mem.vmstat.balloon_deflate 11
            mem.vmstat.balloon_inflate 22
            # swap.pagesin is 32 bits wide, as pmdalinux's atom.
            swap.pagesin 1
            mem.vmstat.pswpin 8589934593",
        );
    }

    #[test]
    fn without_proc_vmstat_swap_counts_come_from_proc_stat() {
        let (_dir, mut a) = agent(&[(
            "proc/stat",
            "cpu  1 2 3 4\npage 5543 12345\nswap 1 2\nintr 1\n",
        )]);
        a.expect(
            "swap.pagesin 1
            swap.pagesout 2
            swap.in 5543
            swap.out 12345
            mem.vmstat.pgpgin -",
        );
        let (_dir, mut a) = agent(&[]);
        a.expect(
            "swap.in -
            mem.vmstat.nr_dirty -",
        );
    }

    #[test]
    fn this_host_agrees_with_proc_vmstat() {
        let Ok(text) = std::fs::read_to_string("/proc/vmstat") else {
            return;
        };
        let get = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k)?.strip_prefix(' ')?.parse::<f64>().ok())
        };
        let mut a = LinuxAgent::new();
        // Counters that move rarely between two reads.
        assert_eq!(one(&mut a, "mem.vmstat.pswpin"), get("pswpin"));
        assert_eq!(one(&mut a, "mem.vmstat.oom_kill"), get("oom_kill"));
        assert!(one(&mut a, "mem.vmstat.pgfault").unwrap() >= get("pgfault").unwrap());
    }
}
