//! `/proc/meminfo` (cluster 1): memory and swap use, in Kbyte as the file gives them (swap
//! sizes in bytes, `hinv.physmem` in Mbyte, huge page counts in pages and bytes), with
//! pmdalinux's derived figures (`used`, `other`, `cache_clean`). A key this kernel does not
//! write has no value.

use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// How an item is computed from the file's keys.
enum Src {
    /// The key's value, as the file gives it.
    Key(&'static str),
    /// The key's Kbyte value in bytes.
    Bytes(&'static str),
    /// MemTotal - MemFree.
    Used,
    /// MemTotal - MemFree - Cached - Buffers, at least 0.
    Other,
    /// Cached - Dirty - Writeback, at least 0.
    CacheClean,
    /// SwapTotal - SwapFree, in bytes.
    SwapUsed,
    /// MemTotal in Mbyte.
    PhysMb,
    /// The page size, in bytes.
    PageSize,
    /// A huge page count times Hugepagesize, in bytes.
    HugeBytes(&'static str),
    /// MemAvailable, or on kernels before 3.14, which lack it, the kernel's own estimate
    /// (see [`estimate_available`]).
    Available,
}

fn src(item: u32) -> Option<Src> {
    use Src::*;
    Some(match item {
        0 => Key("MemTotal"),
        1 => Used,
        2 => Key("MemFree"),
        3 => Key("MemShared"),
        4 => Key("Buffers"),
        5 => Key("Cached"),
        6 => Bytes("SwapTotal"),
        7 => SwapUsed,
        8 => Bytes("SwapFree"),
        9 => PhysMb,
        10 => Key("MemFree"),
        11 => PageSize,
        12 => Other,
        13 => Key("SwapCached"),
        14 => Key("Active"),
        15 => Key("Inactive"),
        16 => Key("HighTotal"),
        17 => Key("HighFree"),
        18 => Key("LowTotal"),
        19 => Key("LowFree"),
        20 => Key("SwapTotal"),
        21 => Key("SwapFree"),
        22 => Key("Dirty"),
        23 => Key("Writeback"),
        24 => Key("Mapped"),
        25 => Key("Slab"),
        26 => Key("Committed_AS"),
        27 => Key("PageTables"),
        28 => Key("ReverseMaps"),
        29 => CacheClean,
        30 => Key("AnonPages"),
        31 => Key("CommitLimit"),
        32 => Key("Bounce"),
        33 => Key("NFS_Unstable"),
        34 => Key("SReclaimable"),
        35 => Key("SUnreclaim"),
        36 => Key("Active(anon)"),
        37 => Key("Inactive(anon)"),
        38 => Key("Active(file)"),
        39 => Key("Inactive(file)"),
        40 => Key("Unevictable"),
        41 => Key("Mlocked"),
        42 => Key("Shmem"),
        43 => Key("KernelStack"),
        44 => Key("HugePages_Total"),
        45 => Key("HugePages_Free"),
        46 => Key("HugePages_Rsvd"),
        47 => Key("HugePages_Surp"),
        48 => Key("DirectMap4k"),
        49 => Key("DirectMap2M"),
        50 => Key("VmallocTotal"),
        51 => Key("VmallocUsed"),
        52 => Key("VmallocChunk"),
        53 => Key("MmapCopy"),
        54 => Key("Quicklists"),
        55 => Key("HardwareCorrupted"),
        56 => Key("AnonHugePages"),
        57 => Key("DirectMap1G"),
        58 => Available,
        59 => Bytes("Hugepagesize"),
        60 => HugeBytes("HugePages_Total"),
        61 => HugeBytes("HugePages_Free"),
        62 => HugeBytes("HugePages_Rsvd"),
        63 => HugeBytes("HugePages_Surp"),
        64 => Key("ShmemHugePages"),
        65 => Key("ShmemPmdMapped"),
        66 => Key("FileHugePages"),
        67 => Key("FilePmdMapped"),
        68 => Key("CmaTotal"),
        69 => Key("CmaFree"),
        _ => return None,
    })
}

#[derive(Default)]
pub struct MemInfo {
    buf: String,
    /// (key, value) in file order; a few dozen keys, so a scan beats a map.
    keys: Vec<(String, u64)>,
    /// MemAvailable estimated where the file lacks it.
    estimated: Option<u64>,
}

impl MemInfo {
    fn get(&self, key: &str) -> Option<u64> {
        self.keys.iter().find(|(k, _)| k == key).map(|(_, v)| *v)
    }
}

/// `Key:   123 kB` lines (values in kB, counts without a unit).
pub fn parse(text: &str, keys: &mut Vec<(String, u64)>) {
    for line in text.lines() {
        let Some((k, rest)) = line.split_once(':') else {
            continue;
        };
        if let Some(v) = rest
            .split_ascii_whitespace()
            .next()
            .and_then(|v| v.parse::<u64>().ok())
        {
            keys.push((k.trim().to_string(), v));
        }
    }
}

/// The sum of every zone's low watermark in /proc/zoneinfo, in pages (its `low` lines).
fn low_watermarks(text: &str) -> u64 {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_ascii_whitespace();
            (w.next() == Some("low")).then(|| w.next()?.parse::<u64>().ok())?
        })
        .fold(0, u64::saturating_add)
}

/// MemAvailable as kernels since 3.14 compute it (commit 34e431b0ae), in Kbyte, for older
/// kernels: free memory above the low watermarks, plus the page cache and reclaimable slab
/// that could be freed (each less the smaller of its half and the watermarks). pmdalinux
/// 6.0.3 estimates the same figure but subtracts the watermarks in bytes from Kbyte values,
/// which on a host with /proc/zoneinfo leaves 0; here the units agree.
fn estimate_available(m: &MemInfo, low_kb: u64) -> Option<u64> {
    let g = |k| m.get(k).map(i128::from);
    let low = i128::from(low_kb);
    let _ = g("MemTotal")?;
    let mut avail = g("MemFree")? - low;
    let cache = g("Active(file)")? + g("Inactive(file)")?;
    avail += cache - (cache / 2).min(low);
    let slab = g("SReclaimable")?;
    avail += slab - (slab / 2).min(low);
    Some(avail.clamp(0, i128::from(u64::MAX)) as u64)
}

/// The page size of this host (the root's files do not say; pmdalinux asks the kernel too).
pub(super) fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let n = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if n > 0 { n as u64 } else { 4096 }
}

impl Group for MemInfo {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 1 && src(m.item).is_some()
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.keys.clear();
        self.estimated = None;
        if let Ok(text) = ctx.root.read("proc/meminfo", &mut self.buf) {
            parse(text, &mut self.keys);
        }
        if !self.keys.is_empty() && self.get("MemAvailable").is_none() {
            let low = ctx
                .root
                .read("proc/zoneinfo", &mut self.buf)
                .map_or(0, low_watermarks);
            let low_kb = low.saturating_mul(page_size() >> 10);
            self.estimated = estimate_available(self, low_kb);
        }
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let g = |k| self.get(k);
        let v = match src(m.item) {
            Some(Src::Key(k)) => g(k),
            Some(Src::Bytes(k)) => g(k).map(|v| v << 10),
            Some(Src::Used) => g("MemTotal")
                .zip(g("MemFree"))
                .map(|(t, f)| t.saturating_sub(f)),
            Some(Src::Other) => (|| {
                let used = g("MemTotal")?.saturating_sub(g("MemFree")?);
                Some(
                    used.saturating_sub(g("Cached")?)
                        .saturating_sub(g("Buffers")?),
                )
            })(),
            Some(Src::CacheClean) => (|| {
                Some(
                    g("Cached")?
                        .saturating_sub(g("Dirty")?)
                        .saturating_sub(g("Writeback")?),
                )
            })(),
            Some(Src::SwapUsed) => g("SwapTotal")
                .zip(g("SwapFree"))
                .map(|(t, f)| t.saturating_sub(f) << 10),
            Some(Src::PhysMb) => g("MemTotal").map(|v| v >> 10),
            Some(Src::PageSize) => (!self.keys.is_empty()).then(page_size),
            Some(Src::HugeBytes(k)) => g(k)
                .zip(g("Hugepagesize"))
                .map(|(n, size)| n.wrapping_mul(size << 10)),
            Some(Src::Available) => g("MemAvailable").or(self.estimated),
            None => None,
        };
        if let Some(v) = v {
            out.push((String::new(), Value::Uint(v)));
        }
    }
}
