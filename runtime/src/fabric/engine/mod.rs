//! The per-epoch engine of one agent: for the ports it owns, from one [`Reading`] to rates,
//! error traps, change-threshold reports, clear requests and one rate histogram per counter.
//! Owns the previous values, the unreported changes and the thresholds; no I/O.
//!
//! State is column-wise (`[counter][port]`), each column in the narrowest word that holds its
//! counter (a 4-bit error counter in a byte), and the pass goes through the ports in blocks,
//! so a block's per-port facts (interval, flags) stay in L1 while each column streams; the
//! common case, an unchanged counter, costs two loads and a compare. The reading's columns
//! become the previous values by a swap, not a copy.
//!
//! Counters are tested a lane of 8 at a time. What a quiet lane needs besides "unchanged"
//! (its 8 ports read normally, none of its values near the top) is kept as one byte per lane,
//! so the fast path loads the two column sets and nothing else per counter.

use super::counters::{Class, CounterDesc, NA};
use super::histogram::{Histogram, bucket};
use super::rate::{Delta, bound, clear_level, delta};
use super::source::{Column, Reading, Word};

/// Ports per block of the pass: a 64-bit column is read in runs of 64 KB, long enough for the
/// prefetcher (1,024 measured 20 % slower); the block's scratch is 8192 × 13 bytes, in L2.
const BLOCK: usize = 8192;
/// `prev_ts` of a port with no previous reading.
const NO_TS: i64 = i64::MIN;
/// `prev_ts` of a port read in the last reading processed (at `Engine::last_ts`): most ports,
/// and they need no write per epoch.
const LAST: i64 = i64::MIN + 1;

const ST_OK: u8 = 0;
const ST_FLAGGED: u8 = 1;
const ST_FIRST: u8 = 2;
const ST_MISSING: u8 = 3;

/// A data, packet or congestion counter that changed by more than its change threshold since
/// it was last reported (or whose rate became unknowable while it changed).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Report {
    /// The port's slot in the engine (`Engine::ports()[slot]` is its id).
    pub slot: u32,
    pub counter: u8,
    /// The change since the last report, in output units (bytes for data); 0 when invalid.
    pub change: f64,
    /// This epoch's rate in output units per second; `None`: unknowable.
    pub rate: Option<f64>,
}

/// An error counter whose increase in the epoch reached its trap threshold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Trap {
    pub slot: u32,
    pub counter: u8,
    /// The increase (a lower bound when `at_least`: the counter saturated).
    pub increase: u64,
    pub at_least: bool,
    pub threshold: u64,
}

/// What one epoch produced.
#[derive(Clone, Debug, Default)]
pub struct Output {
    pub epoch: u64,
    pub ts_ns: i64,
    /// One per counter of the schema.
    pub hist: Vec<Histogram>,
    pub reports: Vec<Report>,
    pub traps: Vec<Trap>,
    /// (slot, counters to clear) for the source.
    pub clears: Vec<(u32, u32)>,
    pub ports_read: u32,
    pub ports_missing: u32,
}

impl Output {
    fn reset(&mut self, counters: usize) {
        self.hist.resize_with(counters, Histogram::default);
        for h in &mut self.hist {
            h.reset();
        }
        self.reports.clear();
        self.traps.clear();
        self.clears.clear();
        self.ports_read = 0;
        self.ports_missing = 0;
    }
}

/// Per-counter thresholds, in the counter's units.
#[derive(Clone, Debug, PartialEq)]
pub struct Thresholds {
    /// Error counters: trap when the increase in one epoch is at least this; 0: never.
    pub trap: Vec<u64>,
    /// Reported counters: report when the change since the last report exceeds this.
    pub change: Vec<u64>,
}

pub struct Engine {
    schema: Vec<CounterDesc>,
    ports: Vec<u32>,
    /// The previous reading's columns and unreadable bits (the last reading, swapped in).
    prev: Vec<Column>,
    prev_na: Vec<u32>,
    /// Per port: when it was last read, `LAST` or `NO_TS`.
    prev_ts: Vec<i64>,
    /// When the last reading processed was taken.
    last_ts: i64,
    /// Unreported change per reported counter (empty for error counters), in the narrowest
    /// word that holds the counter's change threshold: a stored change never exceeds it (more
    /// is reported and reset to 0), and the 4 of 5 reported columns a quiet fabric changes are
    /// read and written in every epoch.
    pending: Vec<Column>,
    reading: Reading,
    thresholds: Thresholds,
    clear_at: Vec<u64>,
    can_clear: bool,
    dt: Vec<f64>,
    state: Vec<u8>,
    /// Per lane of the block: 1 when its 8 ports are all `ST_OK` (shared by the columns).
    lane_ok: Vec<u8>,
    /// Per column, per lane of all ports: 0 only when every previous value of the lane is
    /// below the column's `quiet_below`. An unchanged lane keeps its values, so the byte is
    /// recomputed only for the lanes the slow path saw.
    lane_high: Vec<Vec<u8>>,
    clear_mask: Vec<u32>,
}

impl Engine {
    pub fn new(schema: &[CounterDesc], thresholds: Thresholds, can_clear: bool) -> Engine {
        assert!(schema.len() <= 32, "clear masks hold 32 counters");
        assert_eq!(thresholds.trap.len(), schema.len());
        assert_eq!(thresholds.change.len(), schema.len());
        Engine {
            clear_at: schema.iter().map(|c| clear_level(c.width)).collect(),
            prev: schema.iter().map(|c| Column::new(c.width)).collect(),
            prev_na: Vec::new(),
            pending: (0..schema.len())
                .map(|c| Column::holding(change_units(&schema[c], &thresholds, c)))
                .collect(),
            schema: schema.to_vec(),
            ports: Vec::new(),
            prev_ts: Vec::new(),
            last_ts: NO_TS,
            reading: Reading::default(),
            thresholds,
            can_clear,
            dt: vec![0.0; BLOCK],
            state: vec![0; BLOCK],
            lane_ok: vec![0; BLOCK / LANES],
            lane_high: vec![Vec::new(); schema.len()],
            clear_mask: vec![0; BLOCK],
        }
    }

    pub fn schema(&self) -> &[CounterDesc] {
        &self.schema
    }

    /// The ports this engine reads, by slot.
    pub fn ports(&self) -> &[u32] {
        &self.ports
    }

    pub fn thresholds(&self) -> &Thresholds {
        &self.thresholds
    }

    pub fn set_thresholds(&mut self, t: Thresholds) {
        assert_eq!(t.trap.len(), self.schema.len());
        assert_eq!(t.change.len(), self.schema.len());
        self.thresholds = t;
        // A pending column whose threshold outgrew its word (or shrank below a smaller one)
        // moves to the word that holds the new one; a change above a smaller word's top is
        // kept as its top (more than the threshold: the next change reports).
        for c in 0..self.schema.len() {
            let old = &self.pending[c];
            let mut new = Column::holding(change_units(&self.schema[c], &self.thresholds, c));
            if self.schema[c].class.reported() && new.max() != old.max() {
                new.resize(old.len());
                for i in 0..old.len() {
                    new.set(i, old.get(i).min(new.max()));
                }
                self.pending[c] = new;
            }
        }
    }

    /// Change the set of ports. Ports kept keep their previous values and unreported
    /// changes; new ones start with no baseline (their first reading gives no rate).
    pub fn set_ports(&mut self, ports: Vec<u32>) {
        if ports == self.ports {
            return;
        }
        let old: std::collections::HashMap<u32, usize> = self
            .ports
            .iter()
            .enumerate()
            .map(|(i, p)| (*p, i))
            .collect();
        let map: Vec<Option<usize>> = ports.iter().map(|p| old.get(p).copied()).collect();
        for c in 0..self.schema.len() {
            self.prev[c] = self.prev[c].remap(&map);
            if self.schema[c].class.reported() {
                self.pending[c] = self.pending[c].remap(&map);
            }
        }
        self.prev_na = map
            .iter()
            .map(|m| m.map_or(0, |i| self.prev_na[i]))
            .collect();
        self.prev_ts = map
            .iter()
            .map(|m| m.map_or(NO_TS, |i| self.prev_ts[i]))
            .collect();
        self.ports = ports;
        self.reading.resize(&self.schema, self.ports.len());
        // Unknown until each lane has been through the slow path once.
        let lanes = self.ports.len().div_ceil(LANES);
        for h in &mut self.lane_high {
            h.clear();
            h.resize(lanes, 1);
        }
    }

    /// Forget every baseline and unreported change ("clear all: start fresh").
    pub fn start_fresh(&mut self) {
        self.prev_ts.fill(NO_TS);
        for p in &mut self.pending {
            p.zero();
        }
    }

    /// The reading the source fills next (sized to `ports()`; `ok` all false).
    pub fn reading_mut(&mut self) -> &mut Reading {
        let n = self.ports.len();
        self.reading.resize(&self.schema, n);
        &mut self.reading
    }

    /// Process the reading the source filled.
    pub fn process(&mut self, out: &mut Output) {
        out.reset(self.schema.len());
        out.epoch = self.reading.epoch;
        out.ts_ns = self.reading.ts_ns;
        let n = self.ports.len();
        let ts = self.reading.ts_ns;
        // The interval of every port read in the last reading and in this one.
        let common_dt =
            (self.last_ts != NO_TS && self.last_ts < ts).then(|| seconds(self.last_ts, ts));
        let mut start = 0;
        while start < n {
            let end = (start + BLOCK).min(n);
            let len = end - start;
            out.ports_missing += self.prelude(start, end, common_dt);
            self.clear_mask[..len].fill(0);
            for c in 0..self.schema.len() {
                self.column(c, start, end, out);
            }
            // Clears are rare: eight masks tested at once.
            for (k, lane) in self.clear_mask[..len].chunks(LANES).enumerate() {
                if lane.iter().fold(0, |a, m| a | m) != 0 {
                    for (j, m) in lane.iter().enumerate() {
                        if *m != 0 {
                            out.clears.push(((start + k * LANES + j) as u32, *m));
                        }
                    }
                }
            }
            start = end;
        }
        out.ports_read = n as u32 - out.ports_missing;
        // This reading is the next epoch's previous one (missing ports copied their old
        // values into it in `column`).
        std::mem::swap(&mut self.prev, &mut self.reading.cols);
        std::mem::swap(&mut self.prev_na, &mut self.reading.na);
        self.last_ts = ts;
    }

    /// Per port of the block `start..end`: its state, its interval (`dt`), its timestamp for
    /// the next epoch, and per lane whether all its ports are `ST_OK` (`lane_ok`). Returns
    /// the ports missing.
    ///
    /// A lane of 8 ports read normally in the last reading and in this one, with no flags,
    /// is decided at once (the common case: no branch per port, and `prev_ts` keeps its
    /// `LAST`, so it is not written).
    fn prelude(&mut self, start: usize, end: usize, common_dt: Option<f64>) -> u32 {
        let r = &mut self.reading;
        let mut missing = 0;
        let mut last = (NO_TS, 0.0);
        for (l, lo) in (start..end).step_by(LANES).enumerate() {
            let hi = (lo + LANES).min(end);
            let j = lo - start;
            if let Some(dt) = common_dt
                && hi - lo == LANES
                && quiet_ports(
                    lane(&r.ok, lo),
                    lane(&self.prev_ts, lo),
                    [
                        lane(&r.cleared, lo),
                        lane(&r.reset, lo),
                        lane(&r.na, lo),
                        lane(&self.prev_na, lo),
                    ],
                )
            {
                self.state[j..j + LANES].fill(ST_OK);
                self.dt[j..j + LANES].fill(dt);
                self.lane_ok[l] = 1;
                continue;
            }
            for i in lo..hi {
                let j = i - start;
                let pts = match self.prev_ts[i] {
                    LAST => self.last_ts,
                    t => t,
                };
                self.state[j] = if !r.ok[i] {
                    missing += 1;
                    // Its old values stay (copied back in `column`), unreadable ones too, and
                    // its time is no longer the last reading's.
                    r.na[i] = self.prev_na[i];
                    self.prev_ts[i] = pts;
                    ST_MISSING
                } else {
                    self.prev_ts[i] = LAST;
                    if pts == NO_TS || pts >= r.ts_ns {
                        ST_FIRST
                    } else {
                        // Ports read together share one interval: converted once.
                        if pts != last.0 {
                            last = (pts, seconds(pts, r.ts_ns));
                        }
                        self.dt[j] = last.1;
                        if r.cleared[i] | r.reset[i] | r.na[i] | self.prev_na[i] != 0 {
                            ST_FLAGGED
                        } else {
                            ST_OK
                        }
                    }
                };
            }
            // A partial lane (the tail) is never "ok": it always takes the slow path.
            self.lane_ok[l] =
                u8::from(hi - lo == LANES && self.state[j..j + LANES].iter().all(|s| *s == ST_OK));
        }
        missing
    }

    /// Counter `c` of the block `start..end`, in the column's own word.
    fn column(&mut self, c: usize, start: usize, end: usize, out: &mut Output) {
        let desc = self.schema[c];
        let clear_lvl = if self.can_clear && desc.width.saturates() {
            self.clear_at[c]
        } else {
            u64::MAX
        };
        let mut pass = Pass {
            c,
            desc,
            max: desc.width.max(),
            clear_lvl,
            // Below it an unchanged counter is neither stuck at its top nor due a clear.
            quiet_below: desc.width.max().min(clear_lvl),
            trap_at: self.thresholds.trap[c],
            change_units: change_units(&desc, &self.thresholds, c),
            start,
            state: &self.state[..end - start],
            dt: &self.dt,
            lane_ok: &self.lane_ok,
            lane_high: &mut self.lane_high[c][start / LANES..],
            cleared: &self.reading.cleared,
            reset: &self.reading.reset,
            na: &self.reading.na,
            prev_na: &self.prev_na,
            pending: &mut self.pending[c],
            clear_mask: &mut self.clear_mask,
            out,
        };
        let (cur, prev) = (&mut self.reading.cols[c], &self.prev[c]);
        match (cur, prev) {
            (Column::U8(v), Column::U8(p)) => pass.run(&mut v[start..end], &p[start..end]),
            (Column::U16(v), Column::U16(p)) => pass.run(&mut v[start..end], &p[start..end]),
            (Column::U32(v), Column::U32(p)) => pass.run(&mut v[start..end], &p[start..end]),
            (Column::U64(v), Column::U64(p)) => pass.run(&mut v[start..end], &p[start..end]),
            _ => unreachable!("a counter's columns share its word"),
        }
    }
}

/// One column of one block: what [`Engine::column`] lends the pass.
struct Pass<'a> {
    c: usize,
    desc: CounterDesc,
    max: u64,
    clear_lvl: u64,
    quiet_below: u64,
    trap_at: u64,
    change_units: u64,
    /// The block's first port.
    start: usize,
    /// Per port of the block.
    state: &'a [u8],
    dt: &'a [f64],
    lane_ok: &'a [u8],
    /// From the block's first lane on.
    lane_high: &'a mut [u8],
    /// Per port of all ports.
    cleared: &'a [u32],
    reset: &'a [u32],
    na: &'a [u32],
    prev_na: &'a [u32],
    pending: &'a mut Column,
    clear_mask: &'a mut [u32],
    out: &'a mut Output,
}

impl Pass<'_> {
    /// The pass compiled for AVX2 where the CPU has it (a 64-bit compare of a lane is two
    /// instructions there, six in the x86-64 baseline: 7 % of the epoch), else for the
    /// baseline.
    fn run<W: Word>(&mut self, cur: &mut [W], prev: &[W]) {
        #[cfg(target_arch = "x86_64")]
        if avx2() {
            // SAFETY: the CPU has AVX2, checked just above.
            return unsafe { self.run_avx2(cur, prev) };
        }
        self.run_any(cur, prev)
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    fn run_avx2<W: Word>(&mut self, cur: &mut [W], prev: &[W]) {
        self.run_any(cur, prev)
    }

    #[inline(always)]
    fn run_any<W: Word>(&mut self, cur: &mut [W], prev: &[W]) {
        let c = self.c;
        let desc = self.desc;
        let (max, clear_lvl) = (self.max, self.clear_lvl);
        let bit = 1u32 << c;
        let quiet_below = W::narrow(self.quiet_below);
        let state = self.state;
        let lane_ok = self.lane_ok;
        let hist = &mut self.out.hist[c];
        // Counters the slow path found anything but "zero" for; the rest are zero.
        let mut not_zero = 0u64;
        let (mut last_dt, mut last_bound) = (f64::NAN, 0);
        let n = cur.len();
        let chunk = CHUNK_BYTES / size_of::<W>();
        let mut lane = 0;
        while lane < n {
            // A chunk of 512 bytes of each column set at once when all its lanes' flags say
            // quiet: one memcmp (libc's, vectorised for this CPU) instead of a test per lane.
            if lane % chunk == 0 && lane + chunk <= n {
                let l = lane / LANES;
                let lanes = l..l + chunk / LANES;
                if quiet(&lane_ok[lanes.clone()], &self.lane_high[lanes])
                    && cur[lane..lane + chunk] == prev[lane..lane + chunk]
                {
                    lane += chunk;
                    continue;
                }
            }
            let lane_end = (lane + LANES).min(n);
            let l = lane / LANES;
            // The counters of the lane that need a look; a partial lane (the tail) looks at all.
            let mut busy = if lane_end - lane == LANES {
                let (cl, pl) = (
                    cur[lane..lane_end].try_into().unwrap(),
                    prev[lane..lane_end].try_into().unwrap(),
                );
                if lane_ok[l] & !self.lane_high[l] & 1 != 0 && unchanged(cl, pl) {
                    lane = lane_end;
                    continue;
                }
                let st = state[lane..lane_end].try_into().unwrap();
                needs_look(cl, pl, st, quiet_below)
            } else {
                (1u32 << (lane_end - lane)) - 1
            };
            while busy != 0 {
                let j = lane + busy.trailing_zeros() as usize;
                busy &= busy - 1;
                let st = state[j];
                let (v, p): (u64, u64) = (cur[j].into(), prev[j].into());
                if st == ST_OK && v == p && v < max {
                    if v >= clear_lvl {
                        self.clear_mask[j] |= bit;
                    }
                    continue;
                }
                let i = self.start + j;
                not_zero += 1;
                match st {
                    ST_MISSING => {
                        hist.missing += 1;
                        cur[j] = prev[j];
                        continue;
                    }
                    ST_FIRST => {
                        // A baseline, not an observation: a port that just changed owner is
                        // never counted twice in one epoch (its old owner may still count it).
                        if self.na[i] & bit == 0 && v >= clear_lvl {
                            self.clear_mask[j] |= bit;
                        }
                        continue;
                    }
                    _ => {}
                }
                // Only a flagged port has flags: the common case reads no more per-port arrays
                // (1M ports' flags are 4 MB each, a cache miss a look).
                let (cleared, reset, v, p) = if st == ST_FLAGGED {
                    let na = |m: &[u32], x: u64| if m[i] & bit != 0 { NA } else { x };
                    (
                        self.cleared[i] & bit != 0,
                        self.reset[i] & bit != 0,
                        na(self.na, v),
                        na(self.prev_na, p),
                    )
                } else {
                    (false, false, v, p)
                };
                let dt = self.dt[j];
                if dt != last_dt {
                    // Ports read together share an interval, so this is mostly once a column.
                    (last_dt, last_bound) = (dt, bound(desc.max_rate, dt));
                }
                let d = delta(desc.width, p, v, cleared, reset, last_bound);
                let rate = match d {
                    Delta::Known(0) => {
                        not_zero -= 1;
                        Some(0.0)
                    }
                    Delta::Known(x) => {
                        let r = desc.to_output(x) / dt;
                        hist.counts[bucket(r)] += 1;
                        Some(r)
                    }
                    Delta::Unknown { .. } => {
                        hist.invalid += 1;
                        None
                    }
                };
                if desc.class == Class::Error {
                    let inc = d.lower_bound();
                    if self.trap_at > 0 && inc >= self.trap_at {
                        self.out.traps.push(Trap {
                            slot: i as u32,
                            counter: c as u8,
                            increase: inc,
                            at_least: d.known().is_none(),
                            threshold: self.trap_at,
                        });
                    }
                } else {
                    match d {
                        Delta::Known(x) => {
                            let pend = self.pending.get(i).saturating_add(x);
                            if pend > self.change_units {
                                self.out.reports.push(Report {
                                    slot: i as u32,
                                    counter: c as u8,
                                    change: desc.to_output(pend),
                                    rate,
                                });
                                self.pending.set(i, 0);
                            } else {
                                self.pending.set(i, pend);
                            }
                        }
                        Delta::Unknown { .. } if v != p || cleared => {
                            self.out.reports.push(Report {
                                slot: i as u32,
                                counter: c as u8,
                                change: 0.0,
                                rate: None,
                            });
                            self.pending.set(i, 0);
                        }
                        Delta::Unknown { .. } => {}
                    }
                }
                if v != NA && v >= clear_lvl {
                    self.clear_mask[j] |= bit;
                }
            }
            // Missing ports put their old values back above: the lane as the next epoch sees it.
            self.lane_high[l] = u8::from(cur[lane..lane_end].iter().any(|v| *v >= quiet_below));
            lane = lane_end;
        }
        self.out.hist[c].zero += n as u64 - not_zero;
    }
}

/// Whether the CPU has AVX2 (tests can ask for the baseline build on this thread).
#[cfg(target_arch = "x86_64")]
fn avx2() -> bool {
    #[cfg(test)]
    if tests::BASELINE.get() {
        return false;
    }
    std::is_x86_feature_detected!("avx2")
}

/// The interval from `from` to `to` (ns), in seconds.
fn seconds(from: i64, to: i64) -> f64 {
    (to - from) as f64 * 1e-9
}

/// A counter's change threshold in its own units (4-octet words for InfiniBand data).
fn change_units(desc: &CounterDesc, t: &Thresholds, c: usize) -> u64 {
    t.change[c] / u64::from(desc.octets_per_unit.max(1))
}

/// Counters tested at once on the fast path.
const LANES: usize = 8;
/// Bytes of each column set compared by one memcmp: 64 ports of a 64-bit counter, 512 of an
/// 8-bit one (for a 64-bit counter, 1,024 and 2,048 bytes measured no better).
const CHUNK_BYTES: usize = 512;
/// Eight `lane_ok` bytes of 1.
const ALL_OK: u64 = 0x0101_0101_0101_0101;

/// Whether a run of lanes is all quiet by its flags (ports read normally, no value near the
/// top), eight lanes a word.
#[inline(always)]
fn quiet(lane_ok: &[u8], lane_high: &[u8]) -> bool {
    let word = |b: &[u8]| u64::from_ne_bytes(b.try_into().unwrap());
    lane_ok
        .chunks_exact(8)
        .zip(lane_high.chunks_exact(8))
        .all(|(ok, high)| word(ok) == ALL_OK && word(high) == 0)
}

/// The lane of `LANES` values from `lo` (a full lane).
#[inline(always)]
fn lane<T>(v: &[T], lo: usize) -> &[T; LANES] {
    v[lo..lo + LANES].try_into().unwrap()
}

/// Whether a lane of ports was read normally now and in the last reading, with no flags:
/// without a branch per port.
#[inline(always)]
fn quiet_ports(ok: &[bool; LANES], prev_ts: &[i64; LANES], flags: [&[u32; LANES]; 4]) -> bool {
    let (mut all_ok, mut ts, mut fl) = (true, 0, 0);
    for k in 0..LANES {
        all_ok &= ok[k];
        ts |= prev_ts[k] ^ LAST;
        fl |= flags[0][k] | flags[1][k] | flags[2][k] | flags[3][k];
    }
    all_ok & (ts == 0) & (fl == 0)
}

/// Whether `LANES` counters of a column are all unchanged: with the lane's flags (ports read
/// normally, no value near the top) the same question as [`needs_look`] `== 0`, reading only
/// the two column sets.
#[inline(always)]
fn unchanged<W: Word>(cur: &[W; LANES], prev: &[W; LANES]) -> bool {
    let mut changed = W::ZERO;
    for k in 0..LANES {
        changed = changed | (cur[k] ^ prev[k]);
    }
    changed == W::ZERO
}

/// Which of `LANES` counters of a column need more than "unchanged" (a bit each): a changed
/// value, a port not read normally, or a value at `quiet_below` or above. Computed without a
/// branch per counter; on a quiet fabric most lanes come out 0, and a lane with one busy port
/// costs one look, not eight.
#[inline(always)]
fn needs_look<W: Word>(
    cur: &[W; LANES],
    prev: &[W; LANES],
    state: &[u8; LANES],
    quiet_below: W,
) -> u32 {
    let mut busy = 0u32;
    for k in 0..LANES {
        let b = (cur[k] != prev[k]) | (state[k] != ST_OK) | (cur[k] >= quiet_below);
        busy |= u32::from(b) << k;
    }
    busy
}

#[cfg(test)]
mod tests;
