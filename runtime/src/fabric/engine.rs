//! The per-epoch engine of one agent: for the ports it owns, from one [`Reading`] to rates,
//! error traps, change-threshold reports, clear requests and one rate histogram per counter.
//! Owns the previous values, the unreported changes and the thresholds; no I/O.
//!
//! State is column-wise (`[counter][port]`) and the pass goes through the ports in blocks, so
//! a block's per-port facts (interval, flags) stay in L1 while each column streams; the
//! common case, an unchanged counter, costs two loads and a compare. The reading's columns
//! become the previous values by a swap, not a copy.
//!
//! Counters are tested a lane of 8 at a time. What a quiet lane needs besides "unchanged"
//! (its 8 ports read normally, none of its values near the top) is kept as one byte per lane,
//! so the fast path loads the two column sets and nothing else per counter.

use super::counters::{Class, CounterDesc, NA};
use super::histogram::{Histogram, bucket};
use super::rate::{Delta, bound, clear_level, delta};
use super::source::Reading;

/// Ports per block of the pass: each column is read in runs of 64 KB, long enough for the
/// prefetcher (1,024 measured 20 % slower); the block's scratch is 8192 × 13 bytes, in L2.
const BLOCK: usize = 8192;
/// `prev_ts` of a port with no previous reading.
const NO_TS: i64 = i64::MIN;

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
    prev: Vec<Vec<u64>>,
    prev_ts: Vec<i64>,
    /// Unreported change per reported counter (empty for error counters).
    pending: Vec<Vec<u64>>,
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
            prev: vec![Vec::new(); schema.len()],
            pending: vec![Vec::new(); schema.len()],
            schema: schema.to_vec(),
            ports: Vec::new(),
            prev_ts: Vec::new(),
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
        let remap = |src: &[u64], fill: u64| -> Vec<u64> {
            map.iter().map(|m| m.map_or(fill, |i| src[i])).collect()
        };
        for c in 0..self.schema.len() {
            self.prev[c] = remap(&self.prev[c], 0);
            if self.schema[c].class.reported() {
                self.pending[c] = remap(&self.pending[c], 0);
            }
        }
        self.prev_ts = map
            .iter()
            .map(|m| m.map_or(NO_TS, |i| self.prev_ts[i]))
            .collect();
        self.ports = ports;
        self.reading.resize(self.schema.len(), self.ports.len());
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
            p.fill(0);
        }
    }

    /// The reading the source fills next (sized to `ports()`; `ok` all false).
    pub fn reading_mut(&mut self) -> &mut Reading {
        let n = self.ports.len();
        self.reading.resize(self.schema.len(), n);
        &mut self.reading
    }

    /// Process the reading the source filled.
    pub fn process(&mut self, out: &mut Output) {
        out.reset(self.schema.len());
        out.epoch = self.reading.epoch;
        out.ts_ns = self.reading.ts_ns;
        let n = self.ports.len();
        let ts = self.reading.ts_ns;
        let mut start = 0;
        while start < n {
            let end = (start + BLOCK).min(n);
            let len = end - start;
            // Per port: its state, its interval, and its timestamp for the next epoch (read
            // here for the last time this epoch). Ports read together share one interval, so
            // the int-to-float conversion is done once per distinct previous timestamp.
            let (mut last_ts, mut last_dt) = (NO_TS, 0.0);
            let mut missing = 0;
            for i in start..end {
                let j = i - start;
                let pts = self.prev_ts[i];
                self.state[j] = if !self.reading.ok[i] {
                    missing += 1;
                    ST_MISSING
                } else {
                    self.prev_ts[i] = ts;
                    if pts == NO_TS || pts >= ts {
                        ST_FIRST
                    } else {
                        if pts != last_ts {
                            (last_ts, last_dt) = (pts, (ts - pts) as f64 * 1e-9);
                        }
                        self.dt[j] = last_dt;
                        if self.reading.cleared[i] | self.reading.reset[i] != 0 {
                            ST_FLAGGED
                        } else {
                            ST_OK
                        }
                    }
                };
            }
            out.ports_missing += missing;
            out.ports_read += len as u32 - missing;
            self.clear_mask[..len].fill(0);
            for (ok, lane) in self.lane_ok.iter_mut().zip(self.state[..len].chunks(LANES)) {
                // `ST_OK` is 0: eight states at once. A partial lane (the tail) is never "ok":
                // it always takes the slow path.
                *ok = u8::from(
                    <[u8; LANES]>::try_from(lane).is_ok_and(|s| u64::from_ne_bytes(s) == 0),
                );
            }
            for c in 0..self.schema.len() {
                self.column(c, start, end, out);
            }
            for (j, m) in self.clear_mask[..len].iter().enumerate() {
                if *m != 0 {
                    out.clears.push(((start + j) as u32, *m));
                }
            }
            start = end;
        }
        // This reading is the next epoch's previous one (missing ports copied their old
        // values into it in `column`).
        std::mem::swap(&mut self.prev, &mut self.reading.cols);
    }

    fn column(&mut self, c: usize, start: usize, end: usize, out: &mut Output) {
        let desc = self.schema[c];
        let max = desc.width.max();
        let bit = 1u32 << c;
        let clear_lvl = if self.can_clear && desc.width.saturates() {
            self.clear_at[c]
        } else {
            u64::MAX
        };
        let trap_at = self.thresholds.trap[c];
        let change_units = self.thresholds.change[c] / u64::from(desc.octets_per_unit.max(1));
        let cur = &mut self.reading.cols[c][start..end];
        let prev = &self.prev[c][start..end];
        let state = &self.state[..end - start];
        let lane_ok = &self.lane_ok;
        let lane_high = &mut self.lane_high[c][start / LANES..];
        let hist = &mut out.hist[c];
        // Below `quiet_below` an unchanged counter is neither stuck at its top nor due a clear.
        let quiet_below = max.min(clear_lvl);
        let mut zero = 0u64;
        let n = cur.len();
        let mut lane = 0;
        while lane < n {
            // A chunk of 8 lanes at once when all its lanes' flags say quiet: one memcmp
            // (libc's, vectorised for this CPU) and two flag words instead of 8 lane tests.
            if lane % CHUNK == 0 && lane + CHUNK <= n {
                let l = lane / LANES;
                let ok = u64::from_ne_bytes(lane_ok[l..l + CHUNK_LANES].try_into().unwrap());
                let high = u64::from_ne_bytes(lane_high[l..l + CHUNK_LANES].try_into().unwrap());
                if ok == ALL_OK && high == 0 && cur[lane..lane + CHUNK] == prev[lane..lane + CHUNK]
                {
                    zero += CHUNK as u64;
                    lane += CHUNK;
                    continue;
                }
            }
            let lane_end = (lane + LANES).min(n);
            let l = lane / LANES;
            // The counters of the lane that need a look; a partial lane (the tail) looks at all.
            let mut busy = if lane_end - lane == LANES {
                let (c, p) = (
                    cur[lane..lane_end].try_into().unwrap(),
                    prev[lane..lane_end].try_into().unwrap(),
                );
                if lane_ok[l] & !lane_high[l] & 1 != 0 && unchanged(c, p) {
                    zero += LANES as u64;
                    lane = lane_end;
                    continue;
                }
                let st = state[lane..lane_end].try_into().unwrap();
                needs_look(c, p, st, quiet_below)
            } else {
                (1u32 << (lane_end - lane)) - 1
            };
            zero += (lane_end - lane) as u64 - u64::from(busy.count_ones());
            while busy != 0 {
                let j = lane + busy.trailing_zeros() as usize;
                busy &= busy - 1;
                let (v, p, st) = (cur[j], prev[j], state[j]);
                if st == ST_OK && v == p && v < max {
                    zero += 1;
                    if v >= clear_lvl {
                        self.clear_mask[j] |= bit;
                    }
                    continue;
                }
                let i = start + j;
                match st {
                    ST_MISSING => {
                        hist.missing += 1;
                        cur[j] = p;
                        continue;
                    }
                    ST_FIRST => {
                        // A baseline, not an observation: a port that just changed owner is
                        // never counted twice in one epoch (its old owner may still count it).
                        if v != NA && v >= clear_lvl {
                            self.clear_mask[j] |= bit;
                        }
                        continue;
                    }
                    _ => {}
                }
                // Only a flagged port has flags: the common case reads no more per-port arrays
                // (1M ports' flags are 8 MB, a cache miss a look).
                let (cleared, reset) = if st == ST_FLAGGED {
                    (
                        self.reading.cleared[i] & bit != 0,
                        self.reading.reset[i] & bit != 0,
                    )
                } else {
                    (false, false)
                };
                let dt = self.dt[j];
                let d = delta(desc.width, p, v, cleared, reset, bound(desc.max_rate, dt));
                let rate = match d {
                    Delta::Known(0) => {
                        zero += 1;
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
                    if trap_at > 0 && inc >= trap_at {
                        out.traps.push(Trap {
                            slot: i as u32,
                            counter: c as u8,
                            increase: inc,
                            at_least: d.known().is_none(),
                            threshold: trap_at,
                        });
                    }
                } else {
                    let pend = &mut self.pending[c][i];
                    match d {
                        Delta::Known(x) => {
                            *pend = pend.saturating_add(x);
                            if *pend > change_units {
                                out.reports.push(Report {
                                    slot: i as u32,
                                    counter: c as u8,
                                    change: desc.to_output(*pend),
                                    rate,
                                });
                                *pend = 0;
                            }
                        }
                        Delta::Unknown { .. } if v != p || cleared => {
                            out.reports.push(Report {
                                slot: i as u32,
                                counter: c as u8,
                                change: 0.0,
                                rate: None,
                            });
                            *pend = 0;
                        }
                        Delta::Unknown { .. } => {}
                    }
                }
                if v != NA && v >= clear_lvl {
                    self.clear_mask[j] |= bit;
                }
            }
            // Missing ports put their old values back above: the lane as the next epoch sees it.
            lane_high[l] = u8::from(cur[lane..lane_end].iter().any(|v| *v >= quiet_below));
            lane = lane_end;
        }
        hist.zero += zero;
    }
}

/// Counters tested at once on the fast path.
const LANES: usize = 8;
/// Lanes of the memcmp path: their flag bytes are read as one `u64`.
const CHUNK_LANES: usize = 8;
/// Counters of the memcmp path: 512 bytes of each column set (16 or 32 lanes measured slower).
const CHUNK: usize = CHUNK_LANES * LANES;
/// Eight `lane_ok` bytes of 1.
const ALL_OK: u64 = 0x0101_0101_0101_0101;

/// Whether `LANES` counters of a column are all unchanged: with the lane's flags (ports read
/// normally, no value near the top) the same question as [`needs_look`] `== 0`, reading only
/// the two column sets.
#[inline(always)]
fn unchanged(cur: &[u64; LANES], prev: &[u64; LANES]) -> bool {
    let mut changed = 0u64;
    for k in 0..LANES {
        changed |= cur[k] ^ prev[k];
    }
    changed == 0
}

/// Which of `LANES` counters of a column need more than "unchanged" (a bit each): a changed
/// value, a port not read normally, or a value at `quiet_below` or above. Computed without a
/// branch per counter; on a quiet fabric most lanes come out 0, and a lane with one busy port
/// costs one look, not eight.
#[inline(always)]
fn needs_look(
    cur: &[u64; LANES],
    prev: &[u64; LANES],
    state: &[u8; LANES],
    quiet_below: u64,
) -> u32 {
    let mut busy = 0u32;
    for k in 0..LANES {
        let b = (cur[k] != prev[k]) | (state[k] != ST_OK) | (cur[k] >= quiet_below);
        busy |= u32::from(b) << k;
    }
    busy
}

#[cfg(test)]
#[path = "engine_tests.rs"]
mod tests;
