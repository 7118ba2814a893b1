//! `/proc/slabinfo` (cluster 20, `mem.slabinfo.*`): kernel slab caches, one instance per
//! cache (whitespace inside a name becomes `_`, as pmdalinux writes it), in the layouts of
//! slabinfo versions 1.0, 1.1 and 2.0/2.1, with each version's missing fields having no
//! value.
//!
//! The file is readable by root only on most kernels: then every slab metric has no value
//! and one line is logged, once, saying why; nothing else is affected.
//!
//! Owns this cluster's parsing only.

use super::read::ReadError;
use super::{Ctx, Group, Metric};
use crate::namespace::{Value, Values};

/// Most caches kept: a large host has a few hundred; bounds what a hostile file can add.
const MAX_CACHES: usize = 65_536;

#[derive(Default, Clone)]
struct Cache {
    name: String,
    active_objs: u64,
    total_objs: u64,
    object_size: u32,
    active_slabs: u32,
    total_slabs: u32,
    pages_per_slab: u32,
    objects_per_slab: u32,
    total_size: u64,
}

#[derive(Default)]
pub struct SlabInfo {
    buf: String,
    caches: Vec<Cache>,
    /// major * 10 + minor of the file's format; 0 when unreadable or unknown.
    version: u32,
    /// The "not readable" line was logged.
    told: bool,
}

/// pmdalinux's name rule: before the first digit, the last whitespace before a letter (and
/// anything between them) becomes `_`, so "fake cache (DMA)" is one token,
/// "fake_cache__DMA)". A name holding a digit before its space does not fit any layout.
fn underscore_names(line: &str) -> String {
    let mut out: Vec<u8> = line.as_bytes().to_vec();
    let mut w: Option<usize> = None;
    for p in 0..out.len() {
        let c = out[p];
        if c.is_ascii_whitespace() {
            w = Some(p);
        } else if c.is_ascii_digit() {
            break;
        } else if c.is_ascii_alphabetic()
            && let Some(start) = w.take()
        {
            out[start..p].fill(b'_');
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn version(header: &str) -> u32 {
    let Some(rest) = header.split_once("slabinfo - version:").map(|(_, r)| r) else {
        return 0;
    };
    let mut it = rest.trim().split('.');
    let major: u32 = it.next().and_then(|x| x.parse().ok()).unwrap_or(0);
    let minor: u32 = it.next().and_then(|x| x.trim().parse().ok()).unwrap_or(0);
    major * 10 + minor
}

/// One cache line in the layout of `version`; `None` when it does not fit (pmdalinux then
/// stops reading the file).
fn parse_line(line: &str, version: u32, shift: u32) -> Option<Cache> {
    let line = underscore_names(line);
    let f: Vec<&str> = line.split_ascii_whitespace().collect();
    let u64_at = |i: usize| f.get(i)?.parse::<u64>().ok();
    let u32_at = |i: usize| f.get(i)?.parse::<u32>().ok();
    let mut c = Cache {
        name: f.first()?.to_string(),
        active_objs: u64_at(1)?,
        total_objs: u64_at(2)?,
        ..Cache::default()
    };
    match version {
        10 => {}
        11 => {
            c.object_size = u32_at(3)?;
            c.active_slabs = u32_at(4)?;
            c.total_slabs = u32_at(5)?;
            c.pages_per_slab = u32_at(6)?;
            c.total_size = (u64::from(c.pages_per_slab) * u64::from(c.active_slabs)) << shift;
        }
        20 | 21 => {
            // name active num objsize objperslab pagesperslab : tunables a b c : slabdata x y z
            c.object_size = u32_at(3)?;
            c.objects_per_slab = u32_at(4)?;
            c.pages_per_slab = u32_at(5)?;
            if f.get(6) != Some(&":") || f.get(11) != Some(&":") {
                return None;
            }
            c.active_slabs = u32_at(13)?;
            c.total_slabs = u32_at(14)?;
            c.total_size = ((u64::from(c.pages_per_slab).wrapping_mul(c.active_objs)) << shift)
                .checked_div(u64::from(c.objects_per_slab))
                .unwrap_or(0);
        }
        _ => return None,
    }
    Some(c)
}

impl SlabInfo {
    fn parse(&mut self, text: &str) {
        let mut lines = text.lines();
        let Some(header) = lines.next() else { return };
        self.version = version(header);
        let shift = super::meminfo::page_size().trailing_zeros();
        for line in lines {
            if line.starts_with('#') {
                continue;
            }
            let Some(c) = parse_line(line, self.version, shift) else {
                break;
            };
            if self.caches.iter().any(|x| x.name == c.name) {
                continue;
            }
            if self.caches.len() >= MAX_CACHES {
                break;
            }
            self.caches.push(c);
        }
    }
}

impl Group for SlabInfo {
    fn answers(&self, m: &Metric) -> bool {
        m.cluster == 20 && m.item <= 7
    }

    fn refresh(&mut self, ctx: &Ctx) {
        self.caches.clear();
        self.version = 0;
        let mut buf = std::mem::take(&mut self.buf);
        match ctx.root.read("proc/slabinfo", &mut buf) {
            Ok(text) => self.parse(text),
            Err(e @ ReadError::Denied(_)) if !self.told => {
                self.told = true;
                tracing::info!("linux agent: {e}: mem.slabinfo.* have no values (root only)");
            }
            Err(_) => {}
        }
        self.buf = buf;
    }

    fn values(&self, m: &Metric, out: &mut Values) {
        let v = self.version;
        for c in &self.caches {
            let value = match m.item {
                0 => Some(c.active_objs),
                1 => Some(c.total_objs),
                2 if v >= 11 => Some(c.object_size.into()),
                3 if v >= 11 => Some(c.active_slabs.into()),
                4 if v != 11 => Some(c.total_slabs.into()),
                5 if v >= 11 => Some(c.pages_per_slab.into()),
                6 if v == 20 || v == 21 => Some(c.objects_per_slab.into()),
                7 if v >= 11 => Some(c.total_size),
                _ => None,
            };
            if let Some(x) = value {
                out.push((c.name.clone(), Value::Uint(x)));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::testing::{agent, fetch_f64};

    const V21: &str = "\
slabinfo - version: 2.1
# name            <active_objs> <num_objs> <objsize> <objperslab> <pagesperslab> : tunables <limit> <batchcount> <sharedfactor> : slabdata <active_slabs> <num_slabs> <sharedavail>
ext4_inode_cache   12000  12600   1080   30    8 : tunables    0    0    0 : slabdata    420    420      0
kmalloc-rcl-8k         0      0   8192    4    8 : tunables    0    0    0 : slabdata      0      0      0
fake cache (DMA)     100    128     64   64    1 : tunables  120   60    8 : slabdata      2      2      0
";

    #[test]
    fn version_2_1_with_a_name_holding_a_space() {
        let (_dir, mut a) = agent(&[("proc/slabinfo", V21)]);
        let active = fetch_f64(&mut a, "mem.slabinfo.objects.active");
        let names: Vec<&str> = active.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            ["ext4_inode_cache", "kmalloc-rcl-8k", "fake_cache__DMA)"]
        );
        assert_eq!(active[0].1, 12000.0);
        let page = super::super::meminfo::page_size() as f64;
        for (metric, want) in [
            ("objects.total", [12600.0, 0.0, 128.0]),
            ("objects.size", [1080.0, 8192.0, 64.0]),
            ("slabs.active", [420.0, 0.0, 2.0]),
            ("slabs.total", [420.0, 0.0, 2.0]),
            ("slabs.pages_per_slab", [8.0, 8.0, 1.0]),
            ("slabs.objects_per_slab", [30.0, 4.0, 64.0]),
            (
                "slabs.total_size",
                [8.0 * 12000.0 * page / 30.0, 0.0, 100.0 * page / 64.0],
            ),
        ] {
            let got = fetch_f64(&mut a, &format!("mem.slabinfo.{metric}"));
            assert_eq!(
                got.iter().map(|x| x.1).collect::<Vec<_>>(),
                want,
                "{metric}"
            );
        }
    }

    #[test]
    fn version_1_1_lacks_objects_per_slab_and_total_slabs() {
        let (_dir, mut a) = agent(&[(
            "proc/slabinfo",
            "slabinfo - version: 1.1\nkmem_cache 59 78 100 2 2 1\nbad line\nlater 1 1 1 1 1 1\n",
        )]);
        let page = super::super::meminfo::page_size() as f64;
        assert_eq!(
            fetch_f64(&mut a, "mem.slabinfo.slabs.total_size"),
            [("kmem_cache".to_string(), 2.0 * page)]
        );
        assert!(fetch_f64(&mut a, "mem.slabinfo.slabs.total").is_empty());
        assert!(fetch_f64(&mut a, "mem.slabinfo.slabs.objects_per_slab").is_empty());
        // An unknown version: no values at all.
        let (_dir, mut a) = agent(&[("proc/slabinfo", "slabinfo - version: 3.0\nx 1 2 3\n")]);
        assert!(fetch_f64(&mut a, "mem.slabinfo.objects.active").is_empty());
    }
}
