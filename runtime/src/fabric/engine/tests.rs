use super::*;
use crate::fabric::counters::{IB_EXTENDED, IB_LEGACY, find};

const SEC: i64 = 1_000_000_000;

fn idx(name: &str) -> usize {
    find(&IB_EXTENDED, name).unwrap()
}

fn thresholds() -> Thresholds {
    Thresholds {
        trap: IB_EXTENDED
            .iter()
            .map(|c| if c.class == Class::Error { 10 } else { 0 })
            .collect(),
        change: IB_EXTENDED
            .iter()
            .map(|c| {
                if c.class == Class::Data {
                    1 << 20
                } else {
                    1000
                }
            })
            .collect(),
    }
}

/// An engine over `n` ports and a function filling its reading from a value table.
struct Rig {
    e: Engine,
    vals: Vec<Vec<u64>>,
    out: Output,
}

impl Rig {
    fn new(schema: &[CounterDesc], n: usize, can_clear: bool) -> Rig {
        let mut e = Engine::new(schema, thresholds(), can_clear);
        e.set_ports((0..n as u32).collect());
        Rig {
            e,
            vals: vec![vec![0; n]; schema.len()],
            out: Output::default(),
        }
    }

    fn epoch(&mut self, ts: i64, ok: impl Fn(usize) -> bool, cleared: impl Fn(usize) -> u32) {
        let vals = &self.vals;
        let r = self.e.reading_mut();
        r.ts_ns = ts;
        for i in 0..r.len() {
            r.ok[i] = ok(i);
            r.cleared[i] = cleared(i);
        }
        for (c, col) in vals.iter().enumerate() {
            for (i, v) in col.iter().enumerate() {
                r.set(c, i, *v);
            }
        }
        self.e.process(&mut self.out);
    }

    fn tick(&mut self, ts: i64) {
        self.epoch(ts, |_| true, |_| 0);
    }
}

#[test]
fn first_reading_is_a_baseline_then_rates_in_bytes() {
    let mut r = Rig::new(&IB_EXTENDED, 4, false);
    let d = idx("port_xmit_data");
    r.tick(SEC);
    assert_eq!(
        r.out.hist[d].total(),
        0,
        "a first reading is only a baseline"
    );
    assert!(r.out.reports.is_empty());
    // Port 2 sends 1,000,000 four-octet units in 2 s: 2,000,000 B/s.
    r.vals[d][2] = 1_000_000;
    r.tick(3 * SEC);
    assert_eq!(r.out.hist[d].zero, 3);
    assert_eq!(r.out.hist[d].counts[bucket(2_000_000.0)], 1);
    assert_eq!(
        r.out.reports,
        vec![Report {
            slot: 2,
            counter: d as u8,
            change: 4_000_000.0,
            rate: Some(2_000_000.0),
        }]
    );
    for h in &r.out.hist {
        assert_eq!(h.total(), 4);
    }
}

#[test]
fn a_quiet_port_sends_nothing() {
    let mut r = Rig::new(&IB_EXTENDED, 100, false);
    let d = idx("port_xmit_data");
    let p = idx("port_xmit_packets");
    r.tick(0);
    let mut reports = 0;
    for e in 1..=200 {
        // Management traffic: one 64-byte packet per port per epoch.
        for i in 0..100 {
            r.vals[d][i] += 16;
            r.vals[p][i] += 1;
        }
        r.tick(e * SEC);
        reports += r.out.reports.len();
        assert!(r.out.traps.is_empty());
    }
    // 200 epochs x 64 B stays below 1 MiB; 200 packets below 1000.
    assert_eq!(reports, 0);
    // Crossing the packet threshold reports once, with the accumulated change.
    for i in 0..100 {
        r.vals[p][i] += 900;
    }
    r.tick(201 * SEC);
    assert_eq!(r.out.reports.len(), 100);
    assert!(r.out.reports.iter().all(|x| x.change == 1100.0));
}

/// Unreported changes are kept in the narrowest word that holds the change threshold; a new
/// threshold of any size moves them to its word and loses none.
#[test]
fn unreported_changes_survive_thresholds_of_any_size() {
    let mut r = Rig::new(&IB_EXTENDED, 3, false);
    let p = idx("port_xmit_packets");
    let mut t = thresholds();
    let step = |r: &mut Rig, e: i64, add: u64| {
        r.vals[p][1] += add;
        r.tick(e * SEC);
        r.out.reports.iter().map(|x| x.change).collect::<Vec<_>>()
    };
    r.tick(0);
    // Threshold 1000 packets: a 16-bit word.
    assert!(step(&mut r, 1, 900).is_empty());
    t.change[p] = 10_000_000_000; // a 64-bit word
    r.e.set_thresholds(t.clone());
    // (Ten seconds: fewer packets a second than a port can send.)
    assert!(step(&mut r, 11, 5_000_000_000).is_empty());
    t.change[p] = 100_000; // a 32-bit word: 5,000,000,900 pending is kept as its top
    r.e.set_thresholds(t.clone());
    assert_eq!(step(&mut r, 12, 1), vec![(u32::MAX as u64 + 1) as f64]);
    t.change[p] = 1000;
    r.e.set_thresholds(t.clone());
    assert!(
        step(&mut r, 13, 1000).is_empty(),
        "1000 is not more than 1000"
    );
    assert_eq!(step(&mut r, 14, 1), vec![1001.0]);
}

#[test]
fn a_64_bit_wrap_gives_the_true_rate() {
    let mut r = Rig::new(&IB_EXTENDED, 1, false);
    let d = idx("port_rcv_data");
    r.vals[d][0] = u64::MAX - 99;
    r.tick(SEC);
    r.vals[d][0] = 900; // 1000 units later
    r.tick(2 * SEC);
    assert_eq!(r.out.hist[d].counts[bucket(4000.0)], 1);
    assert_eq!(r.out.hist[d].invalid, 0);
}

#[test]
fn a_reset_is_invalid_never_negative() {
    let mut r = Rig::new(&IB_EXTENDED, 1, false);
    let d = idx("port_rcv_data");
    r.vals[d][0] = 5_000_000_000_000;
    r.tick(SEC);
    r.vals[d][0] = 10;
    r.tick(2 * SEC);
    assert_eq!(r.out.hist[d].invalid, 1);
    assert_eq!(r.out.reports.len(), 1);
    assert_eq!(r.out.reports[0].rate, None);
    // And the next epoch is a valid rate from the new baseline.
    r.vals[d][0] = 20;
    r.tick(3 * SEC);
    assert_eq!(r.out.hist[d].counts[bucket(40.0)], 1);
}

#[test]
fn a_missed_epoch_spans_the_gap() {
    let mut r = Rig::new(&IB_EXTENDED, 2, false);
    let d = idx("port_xmit_data");
    r.tick(SEC);
    r.vals[d].fill(100); // both ports
    // Port 1 cannot be read this epoch.
    r.epoch(2 * SEC, |i| i == 0, |_| 0);
    assert_eq!(r.out.hist[d].missing, 1);
    assert_eq!(r.out.ports_missing, 1);
    r.vals[d].fill(200);
    r.tick(3 * SEC);
    // Port 0: 100 units in 1 s; port 1: 200 units over 2 s. Both 400 B/s.
    assert_eq!(r.out.hist[d].counts[bucket(400.0)], 2);
}

#[test]
fn error_traps_at_the_threshold_and_when_saturating() {
    let mut r = Rig::new(&IB_EXTENDED, 3, false);
    let sym = idx("symbol_error"); // 16-bit
    let lli = idx("local_link_integrity_errors"); // 4-bit
    r.tick(SEC);
    r.vals[sym][0] = 9; // below 10
    r.vals[sym][1] = 10; // at 10
    r.vals[lli][2] = 15; // saturated: at least 15
    r.tick(2 * SEC);
    let mut traps = r.out.traps.clone();
    traps.sort_by_key(|t| t.slot);
    assert_eq!(
        traps,
        vec![
            Trap {
                slot: 1,
                counter: sym as u8,
                increase: 10,
                at_least: false,
                threshold: 10
            },
            Trap {
                slot: 2,
                counter: lli as u8,
                increase: 15,
                at_least: true,
                threshold: 10
            },
        ]
    );
    assert_eq!(r.out.hist[lli].invalid, 1);
    // Stuck at the top: no new trap, still invalid.
    r.tick(3 * SEC);
    assert!(r.out.traps.iter().all(|t| t.counter as usize != lli));
    assert_eq!(r.out.hist[lli].invalid, 1);
}

#[test]
fn saturating_counters_are_cleared_at_three_quarters_and_the_clear_is_exact() {
    let mut r = Rig::new(&IB_LEGACY, 2, true);
    let d = find(&IB_LEGACY, "port_xmit_data").unwrap();
    let lli = find(&IB_LEGACY, "local_link_integrity_errors").unwrap();
    r.tick(SEC);
    r.vals[d][0] = 3_300_000_000; // above 75 % of 2^32
    r.vals[d][1] = 3_000_000_000; // below
    r.vals[lli][1] = 12; // 75 % of 15
    r.tick(2 * SEC);
    let mut clears = r.out.clears.clone();
    clears.sort();
    assert_eq!(clears, vec![(0, 1 << d), (1, 1 << lli)]);
    // The source cleared port 0's data counter; 1000 units since.
    r.vals[d][0] = 1000;
    r.epoch(3 * SEC, |_| true, |i| if i == 0 { 1 << d } else { 0 });
    assert_eq!(r.out.hist[d].invalid, 0);
    assert_eq!(r.out.hist[d].counts[bucket(4000.0)], 1);
    // Without the acknowledgement the same drop is an out-of-band clear: invalid.
    let mut r2 = Rig::new(&IB_LEGACY, 1, true);
    r2.tick(SEC);
    r2.vals[d][0] = 3_300_000_000;
    r2.tick(2 * SEC);
    r2.vals[d][0] = 1000;
    r2.tick(3 * SEC);
    assert_eq!(r2.out.hist[d].invalid, 1);
}

#[test]
fn no_clears_where_the_source_cannot_clear() {
    let mut r = Rig::new(&IB_LEGACY, 1, false);
    let d = find(&IB_LEGACY, "port_xmit_data").unwrap();
    r.tick(SEC);
    r.vals[d][0] = 4_000_000_000;
    r.tick(2 * SEC);
    assert!(r.out.clears.is_empty());
}

#[test]
fn unavailable_counters_are_invalid() {
    let mut r = Rig::new(&IB_EXTENDED, 1, false);
    let sym = idx("symbol_error");
    r.vals[sym][0] = NA;
    r.tick(SEC);
    assert_eq!(r.out.hist[sym].total(), 0);
    r.tick(2 * SEC);
    assert_eq!(r.out.hist[sym].invalid, 1);
    assert!(r.out.traps.is_empty());
}

#[test]
fn changing_the_port_set_keeps_baselines() {
    let mut r = Rig::new(&IB_EXTENDED, 3, false);
    let d = idx("port_xmit_data");
    r.vals[d] = vec![10, 20, 30];
    r.tick(SEC);
    // Keep ports 1 and 2, add port 7.
    r.e.set_ports(vec![1, 2, 7]);
    r.vals[d] = vec![21, 31, 1000];
    r.tick(2 * SEC);
    assert_eq!(r.out.hist[d].counts[bucket(4.0)], 2);
    assert_eq!(r.out.hist[d].total(), 2, "port 7 is new: a baseline");
    r.e.start_fresh();
    r.tick(3 * SEC);
    assert_eq!(r.out.hist[d].total(), 0);
}

#[test]
fn every_port_is_one_observation_per_counter() {
    let n = 5000;
    let mut r = Rig::new(&IB_EXTENDED, n, true);
    r.tick(SEC);
    for (c, col) in r.vals.iter_mut().enumerate() {
        for (i, v) in col.iter_mut().enumerate() {
            *v = ((i * 7 + c * 13) % 11) as u64;
        }
    }
    r.epoch(2 * SEC, |i| i % 10 != 0, |_| 0);
    for h in &r.out.hist {
        assert_eq!(h.total(), n as u64);
        assert_eq!(h.missing, 500);
    }
}

/// The fast path tests counters a chunk or a lane at a time: whatever happens on one port must
/// come out the same wherever that port sits among quiet ones (first, middle or last of a
/// lane or a chunk, or in the tail after the last full lane) as on a port of its own. Both
/// tables: their counters are kept in words of 8 to 64 bits, whose chunks hold 64 to 512
/// ports.
#[test]
fn a_port_gives_the_same_output_in_every_lane_position() {
    for schema in [&IB_LEGACY, &IB_EXTENDED] {
        same_output_in_every_lane_position(schema);
    }
    // The same in the x86-64 baseline build of the pass, where the CPU has AVX2.
    BASELINE.set(true);
    for schema in [&IB_LEGACY, &IB_EXTENDED] {
        same_output_in_every_lane_position(schema);
    }
}

thread_local! {
    /// Use the baseline build of the pass on this thread.
    pub(super) static BASELINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

fn same_output_in_every_lane_position(schema: &[CounterDesc]) {
    let data = 0;
    let (errs, e8, e4) = (
        idx("symbol_error"),
        idx("link_error_recovery"),
        idx("local_link_integrity_errors"),
    );
    let top = schema[3].width.max();
    let clear_at = clear_level(schema[1].width);
    let clear8 = clear_level(schema[e8].width);
    // Per epoch: (values of counters 0, 1, errs, 3, e8 and e4 on the port, read ok,
    // cleared mask).
    #[rustfmt::skip]
    let story: [([u64; 6], bool, u32); 9] = [
        ([0, 0, 0, 0, 0, 0], true, 0),
        // A change, a clear due, traps; e4 at its top.
        ([1000, clear_at, 20, 0, 5, 15], true, 0),
        // Unchanged, still due a clear; e4 stuck.
        ([1000, clear_at, 20, 0, 5, 15], true, 0),
        // Not read.
        ([5000, clear_at, 20, 0, 9, 15], false, 0),
        // Cleared as asked; 3 at its top; e8 due a clear, e4 cleared out of band.
        ([300, 0, 20, top, clear8, 0], true, 0b11),
        // Stuck at the top; e4 unreadable.
        ([300, 0, 20, top, clear8, NA], true, 0),
        // Cleared out of band; 3 below its top again; e8 unreadable too.
        ([200, 0, 25, top - 1, NA, NA], true, 0),
        // Readable again.
        ([200, 0, 25, top - 1, 7, 2], true, 0),
        ([200, 0, 25, top - 1, 7, 2], true, 0),
    ];
    let cols = [data, 1, errs, 3, e8, e4];
    let run = |n: usize, at: usize| -> Vec<Output> {
        let mut r = Rig::new(schema, n, true);
        let mut outs = Vec::new();
        for (e, (vals, ok, cleared)) in story.iter().enumerate() {
            for (k, c) in cols.iter().enumerate() {
                r.vals[*c][at] = vals[k];
            }
            r.epoch(
                e as i64 * SEC,
                |i| i != at || *ok,
                |i| if i == at { *cleared } else { 0 },
            );
            outs.push(r.out.clone());
        }
        outs
    };
    let alone = run(1, 0);
    let mut cases: Vec<(usize, usize)> = [0, 3, 7, 8, 15, 24, 28].map(|at| (29, at)).into();
    // Chunks of 512 bytes (the memcmp path) hold 64 to 512 ports: 1,100 ports are two chunks
    // of 512 and a tail of 76 (9 lanes and 4 ports).
    cases.extend(
        [
            0, 7, 8, 63, 64, 127, 128, 255, 256, 511, 512, 700, 1023, 1024, 1095, 1096, 1099,
        ]
        .map(|at| (1100, at)),
    );
    for (n, at) in cases {
        for (e, (mut got, want)) in run(n, at).into_iter().zip(&alone).enumerate() {
            let quiet = if e == 0 { 0 } else { n as u64 - 1 };
            for h in &mut got.hist {
                h.zero -= quiet;
            }
            for r in &mut got.reports {
                assert_eq!(r.slot as usize, at);
                r.slot = 0;
            }
            for t in &mut got.traps {
                assert_eq!(t.slot as usize, at);
                t.slot = 0;
            }
            for c in &mut got.clears {
                assert_eq!(
                    c.0 as usize, at,
                    "only the port in the story is due a clear"
                );
                c.0 = 0;
            }
            let ctx = format!("port {at} of {n}, epoch {e}");
            assert_eq!(got.hist, want.hist, "{ctx}");
            assert_eq!(got.reports, want.reports, "{ctx}");
            assert_eq!(got.traps, want.traps, "{ctx}");
            assert_eq!(got.clears, want.clears, "{ctx}");
            assert_eq!(
                got.ports_read,
                want.ports_read + quiet as u32 + (e == 0) as u32 * (n as u32 - 1),
                "{ctx}"
            );
        }
    }
    // The story did reach every path it was written for.
    let all = |f: &dyn Fn(&Output) -> bool| alone.iter().any(f);
    assert!(all(&|o| !o.reports.is_empty()));
    assert!(all(&|o| o.traps.iter().any(|t| t.counter as usize == e8)));
    assert!(all(&|o| o.traps.iter().any(|t| t.at_least)));
    assert!(all(&|o| o.clears.iter().any(|c| c.1 & (1 << e8) != 0)));
    assert!(all(&|o| o.hist.iter().any(|h| h.missing > 0)));
    assert!(all(&|o| o.hist[e4].invalid > 0));
}
