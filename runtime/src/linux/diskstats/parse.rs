//! The block-device group's text parsers: a `/proc/diskstats` or `/proc/partitions` line's
//! device numbers and counters, in pmdalinux's field widths, and `/proc/mdstat`'s array
//! health. Functions of text only: no file access, no metrics.

use std::str::SplitAsciiWhitespace;

/// One line of diskstats, in pmdalinux's field widths: the tick, queue and in-flight
/// figures are 32-bit there (`%u`), so they wrap at 2^32 as pmcd's do.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub rd_ios: u64,
    pub rd_merges: u64,
    pub rd_sectors: u64,
    pub rd_ticks: u32,
    pub wr_ios: u64,
    pub wr_merges: u64,
    pub wr_sectors: u64,
    pub wr_ticks: u32,
    pub in_flight: u32,
    pub io_ticks: u32,
    pub aveq: u32,
    pub ds_ios: u64,
    pub ds_merges: u64,
    pub ds_sectors: u64,
    pub ds_ticks: u32,
    pub fl_ios: u64,
    pub fl_ticks: u32,
    /// Kbyte, from /proc/partitions; 0 when unknown.
    pub nr_blocks: u64,
}

/// A `/proc/diskstats` or `/proc/partitions` line's device numbers and the fields after
/// them; `None` for headings (pmdalinux skips lines not starting with a blank) and for
/// numbers that do not parse.
pub fn numbered(line: &str) -> Option<(u32, u32, SplitAsciiWhitespace<'_>)> {
    if !line.starts_with(' ') {
        return None;
    }
    let mut it = line.split_ascii_whitespace();
    let major = it.next()?.parse().ok()?;
    let minor = it.next()?.parse().ok()?;
    Some((major, minor, it))
}

/// The health of each md array in `/proc/mdstat`, as pmdalinux reports `mdadm --detail
/// --test`'s exit status (through `pclose`, so shifted by 8): 0 healthy, 1<<8 degraded
/// (a member missing: `[2/1] [U_]`), 4<<8 not running (inactive).
pub fn mdstat(text: &str) -> Vec<(String, i64)> {
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
pub fn parse_counters<'a>(fields: impl Iterator<Item = &'a str>, s: &mut Stats) -> usize {
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
