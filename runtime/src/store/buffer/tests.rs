use super::chain::slot_of;
use super::form::Form;
use super::open::{Buf, MIN_SLOTS};
use super::*;

#[test]
fn write_read_gaps_and_overwrite() {
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 10, 100, 1.0, &pool).unwrap();
    c.write(121, 3.0, &pool).unwrap(); // rounds to 120
    c.write(104, 2.0, &pool).unwrap(); // rounds to 100: overwrite
    assert_eq!(c.span(), (10, 13));
    let mut out = vec![0.0; 4];
    c.copy_into(10, 14, &mut out);
    assert_eq!(out[0], 2.0);
    assert!(out[1].is_nan());
    assert_eq!(out[2], 3.0);
    assert!(out[3].is_nan());
}

#[test]
fn chain_spans_buffers_and_fills_gaps() {
    // Retention of an hour: the write at t=10 below is decades older than that.
    let pool = Pool::with_retention(8, 3600);
    let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
    for t in 1..1100 {
        c.write(t, t as f64, &pool).unwrap();
    }
    pass(&mut c, &pool);
    assert_eq!(c.buffer_count(), 3);
    // Far jump leaves a gap of blocks; a write into the gap creates a page there.
    c.write(5000, 5.0, &pool).unwrap();
    c.write(3000, 3.0, &pool).unwrap();
    let blocks: Vec<i32> = c.bufs().map(|b| b.block).collect();
    assert_eq!(blocks, vec![0, 1, 2, 5, 9]);
    let mut out = vec![0.0; 5001];
    c.copy_into(0, 5001, &mut out);
    assert_eq!(out[1099], 1099.0);
    assert!(out[1100].is_nan());
    assert_eq!(out[3000], 3.0);
    assert_eq!(out[5000], 5.0);
    // The pass returned the closed blocks' raw pages when it encoded them; one went to the
    // late write at 3000.
    let pooled = pool.len();
    assert_eq!(pooled, 1);
    assert_eq!(c.free_before(1024, &pool), (2, false));
    assert!(matches!(
        c.write(10, 1.0, &pool),
        Err(StoreError::TooOld { .. })
    ));
    // Closed buffers are encoded: freeing them returns no page.
    assert_eq!(pool.len(), pooled);
    assert_eq!(c.free_before(i64::MAX, &pool), (3, true));
    assert_eq!(c.release(&pool), 1);
    // Only block 5 (a late write's raw page, not yet encoded) held a page; the head holds
    // one value in a small array.
    assert_eq!(pool.len(), pooled + 1);
}

#[test]
fn the_grid_starts_at_the_first_write() {
    // cc-metric-store's `start` rule: a 60 s chain first written at 1000 has slots at
    // 1000 + 60k, and a time within half a step of one lands in it.
    let pool = Pool::new(4);
    let mut c = Chain::new(0, 60, 1000, 1.0, &pool).unwrap();
    assert_eq!(c.phase(), 1000 % 60);
    assert_eq!(c.time(c.span().0), 1000);
    c.write(1089, 2.0, &pool).unwrap(); // nearer 1060 than 1120
    c.write(1090, 3.0, &pool).unwrap(); // half a step: the later slot, as cc-metric-store
    assert_eq!(c.slot(1089), c.slot(1060));
    assert_eq!(c.slot(1090), c.slot(1120));
    assert_eq!(c.latest(), Some((1120, 3.0)));
    // Negative times and a phase keep the same arithmetic.
    let c = Chain::new(0, 30, -7, 0.0, &pool).unwrap();
    assert_eq!((c.phase(), c.time(c.span().0)), (23, -7));
}

#[test]
fn late_writes_go_where_their_time_belongs() {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64;
    let pool = Pool::with_retention(8, 86_400);
    let t0 = now - 3600;
    let mut c = Chain::new(0, 1, t0, 0.0, &pool).unwrap();
    // 1,000 older samples in time order after the newest: every one kept, in buffers
    // created before the head, blocks ascending.
    for i in 1..=1000 {
        c.write(t0 - i, -(i as f64), &pool).unwrap();
    }
    let blocks: Vec<i32> = c.bufs().map(|b| b.block).collect();
    assert!(blocks.windows(2).all(|w| w[0] < w[1]), "{blocks:?}");
    assert_eq!(c.samples(), 1001);
    // Re-sending is idempotent: same slot, same count.
    c.write(t0 - 500, -500.0, &pool).unwrap();
    assert_eq!(c.samples(), 1001);
    let mut out = vec![0.0; 1001];
    let k0 = c.slot(t0 - 1000);
    c.copy_into(k0, k0 + 1001, &mut out);
    assert_eq!(out[0], -1000.0);
    assert_eq!(out[500], -500.0);
    assert_eq!(out[1000], 0.0);
    // Older than retention: refused.
    assert!(matches!(
        c.write(now - 86_400 - 10, 1.0, &pool),
        Err(StoreError::TooOld { .. })
    ));
    // Without retention (0 = keep everything) nothing is too old.
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 10, 1_000_000, 0.0, &pool).unwrap();
    c.write(5, 1.0, &pool).unwrap();
    assert_eq!(c.buffer_count(), 2);
}

#[test]
fn headers_stay_small() {
    // The memory goal (bytes per sample including headers) depends on these.
    assert_eq!(std::mem::size_of::<Buf>(), 16);
    assert_eq!(std::mem::size_of::<Chain>(), 40);
}

#[test]
fn a_closed_buffer_entry_is_two_words() {
    // A short series holds one or two (its frozen part, a closed first block).
    assert_eq!(std::mem::size_of::<Closed>(), 16);
}

#[test]
fn fast_path_agrees_with_division() {
    // Steps with jitter around the rounding boundary, repeats, gaps and a buffer change.
    let pool = Pool::new(8);
    for freq in [1u16, 2, 7, 60] {
        let f = freq as i64;
        let mut c = Chain::new(0, freq, 5 * f, 0.0, &pool).unwrap();
        let mut expect = std::collections::BTreeMap::new();
        expect.insert(5, 0.0);
        let mut ts = 5 * f;
        for i in 1..1500i64 {
            ts += [f, f, 0, f + f / 2, f - f / 2, 2 * f][(i % 6) as usize];
            let t = ts + [0, f / 2, -(f / 2), (f - 1) / 2][(i % 4) as usize];
            c.write(t, i as f64, &pool).unwrap();
            expect.insert(slot_of(t, f, 0), i as f64);
        }
        let (k0, k1) = c.span();
        let mut out = vec![0.0; (k1 - k0) as usize];
        c.copy_into(k0, k1, &mut out);
        for (k, v) in out.iter().enumerate() {
            match expect.get(&(k0 + k as i64)) {
                Some(e) => assert_eq!(v, e, "freq {freq} slot {}", k0 + k as i64),
                None => assert!(v.is_nan()),
            }
        }
    }
}

#[test]
fn timestamps_beyond_the_block_range_are_refused() {
    let pool = Pool::new(1);
    let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
    assert!(matches!(
        c.write(i64::MAX, 1.0, &pool),
        Err(StoreError::TimestampOutOfRange { .. })
    ));
    assert!(Chain::new(0, 1, i64::MIN, 0.0, &pool).is_err());
}

#[test]
fn pool_pages_are_reset() {
    let pool = Pool::new(1);
    let mut p = pool.get();
    p[7] = 1.0;
    pool.put(p);
    let q = pool.get();
    assert!(q.iter().all(|v| v.is_nan()));
}

/// The background pass with the series' newest slot as "now" (not idle).
pub(super) fn pass(c: &mut Chain, pool: &Pool) {
    let now = c.time(c.span().1 - 1);
    c.compact(now, pool);
}

/// Writes `i / 2` at every slot `i` of `slots` (1 s steps).
fn write_halves(c: &mut Chain, slots: std::ops::Range<i64>, pool: &Pool) {
    for i in slots {
        c.write(i, i as f64 / 2.0, pool).unwrap();
    }
}

/// A chain of 1 s steps holding `i / 2` at every slot `i` of `slots`, after a background pass.
fn halves(slots: std::ops::Range<i64>, pool: &Pool) -> Chain {
    let mut c = Chain::new(0, 1, slots.start, slots.start as f64 / 2.0, pool).unwrap();
    write_halves(&mut c, slots.start + 1..slots.end, pool);
    pass(&mut c, pool);
    c
}

pub(super) fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

#[test]
fn open_buffer_grows_with_its_samples() {
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 10, 0, 1.0, &pool).unwrap();
    assert_eq!(c.heap_bytes(), MIN_SLOTS * 8);
    for i in 1..5 {
        c.write(i * 10, i as f64, &pool).unwrap();
    }
    assert_eq!(c.heap_bytes(), 8 * 8);
    for i in 5..300 {
        c.write(i * 10, i as f64, &pool).unwrap();
    }
    // The writes alone keep the slots raw (a 4 KiB page by now).
    assert_eq!(c.heap_bytes(), BUFFER_CAP * 8);
    // The background pass freezes all but the last up to 16 slots into encoded pieces: 300
    // integers in far less than the 4 KiB page they took raw.
    pass(&mut c, &pool);
    assert!(c.heap_bytes() < 300 * 2, "{}", c.heap_bytes());
    assert_eq!(c.buffer_count(), 1);
    let mut out = vec![0.0; 300];
    c.copy_into(0, 300, &mut out);
    assert_eq!(out[0], 1.0);
    assert!((1..300).all(|i| out[i] == i as f64));
    // A write before the first slot of the open buffer moves its storage down.
    let mut c = Chain::new(0, 1, 100, 1.0, &pool).unwrap();
    c.write(101, 2.0, &pool).unwrap();
    c.write(90, 3.0, &pool).unwrap();
    let mut out = vec![0.0; 12];
    c.copy_into(90, 102, &mut out);
    assert_eq!((out[0], out[10], out[11]), (3.0, 1.0, 2.0));
    assert!(out[1..10].iter().all(|v| v.is_nan()));
    assert_eq!(c.heap_bytes(), 16 * 8);
}

#[test]
fn closed_buffers_are_encoded_and_read_back_exactly() {
    let pool = Pool::new(8);
    let n = 3 * BUFFER_CAP as i64 + 17;
    let value = |i: i64| match i % 97 {
        5 => f64::NAN,
        6 => -0.0,
        7 => f64::INFINITY,
        _ if (600..700).contains(&i) => f64::NAN,
        _ if i < 512 => 7.0,
        _ => 20.0 + (i % 50) as f64 / 100.0,
    };
    let mut c = Chain::new(0, 1, 0, value(0), &pool).unwrap();
    for i in 1..n {
        c.write(i, value(i), &pool).unwrap();
    }
    assert_eq!(c.buffer_count(), 4);
    pass(&mut c, &pool);
    // Far below 8 bytes a value: the first block is nearly constant, the rest two-decimal.
    assert!(c.heap_bytes() < 3 * 512 * 2 + 512, "{}", c.heap_bytes());
    let mut out = vec![0.0; n as usize + 10];
    c.copy_into(-5, n + 5, &mut out);
    for i in -5..n + 5 {
        let want = if (0..n).contains(&i) {
            value(i)
        } else {
            f64::NAN
        };
        assert!(same(out[(i + 5) as usize], want), "slot {i}");
    }
    // Ranges starting and ending inside closed buffers.
    let mut part = vec![0.0; 300];
    c.copy_into(400, 700, &mut part);
    assert!((0..300).all(|j| same(part[j], value(400 + j as i64))));
    let mut sum = vec![1.0; 300];
    c.add_into(400, 700, &mut sum);
    assert!((0..300).all(|j| same(sum[j], 1.0 + value(400 + j as i64))));
}

#[test]
fn a_constant_block_adds_without_decoding() {
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 1, 0, 2.5, &pool).unwrap();
    for i in 1..(BUFFER_CAP as i64 + 1) {
        c.write(i, 2.5, &pool).unwrap();
    }
    pass(&mut c, &pool);
    let (older, _) = c.parts();
    assert!(matches!(older[0].form(), Form::Packed(b) if codec::constant(b) == Some(2.5)));
    let mut out = vec![1.0; 10];
    c.add_into(100, 110, &mut out);
    assert!(out.iter().all(|v| *v == 3.5));
}

#[test]
fn a_late_write_into_a_closed_buffer_lands_and_is_encoded_again() {
    let pool = Pool::new(8);
    let mut c = halves(0..1100, &pool);
    let before = c.heap_bytes();
    c.write(10, -1.25, &pool).unwrap();
    c.write(700, 99.0, &pool).unwrap();
    assert!(c.heap_bytes() > before, "the block is open (raw) now");
    let mut out = vec![0.0; 1100];
    c.copy_into(0, 1100, &mut out);
    assert_eq!(
        (out[10], out[700], out[11], out[701]),
        (-1.25, 99.0, 5.5, 350.5)
    );
    // The next pass encodes the written-to ones again.
    write_halves(&mut c, 1100..1600, &pool);
    pass(&mut c, &pool);
    assert!(
        c.heap_bytes() < before + 2 * 4096,
        "{} vs {before}",
        c.heap_bytes()
    );
    let (older, _) = c.parts();
    assert!(older.iter().all(|b| matches!(b.form(), Form::Packed(_))));
    c.copy_into(0, 1100, &mut out);
    assert_eq!(
        (out[10], out[700], out[11], out[701]),
        (-1.25, 99.0, 5.5, 350.5)
    );
}

#[test]
fn precision_rounds_encoded_slots_only() {
    let pool = Pool::new(8).with_precision(vec![3]);
    let value = |i: i64| 1000.0 / (7.0 + i as f64 * 0.001);
    let mut c = Chain::new(0, 1, 0, value(0), &pool).unwrap();
    for i in 1..600 {
        c.write(i, value(i), &pool).unwrap();
    }
    pass(&mut c, &pool);
    let mut out = vec![0.0; 600];
    c.copy_into(0, 600, &mut out);
    // The closed buffer and the open block's frozen pieces hold three significant digits;
    // the raw tail (the newest values, up to `FREEZE`) every bit.
    assert_eq!(out[0], 143.0);
    assert_eq!(out[511], codec::round_to_digits(value(511), 3));
    assert_eq!(out[512], codec::round_to_digits(value(512), 3));
    assert_eq!(out[591], codec::round_to_digits(value(591), 3));
    assert_eq!(out[599].to_bits(), value(599).to_bits());
    assert_ne!(out[599], codec::round_to_digits(value(599), 3));
    let closed = &c.parts().0[0];
    assert!(closed.heap_bytes() < 512 + 64, "{}", closed.heap_bytes());
    // Another metric id is lossless.
    let mut c = Chain::new(1, 1, 0, value(0), &pool).unwrap();
    for i in 1..600 {
        c.write(i, value(i), &pool).unwrap();
    }
    c.copy_into(0, 600, &mut out);
    assert!((0..600).all(|i| out[i].to_bits() == value(i as i64).to_bits()));
}

#[test]
fn a_short_series_is_frozen_in_pieces_and_reads_back_exactly() {
    // 288 values (a day at 5 min) never close a block: before pieces they stayed raw.
    let pool = Pool::new(8);
    let value = |i: i64| match i % 41 {
        7 => f64::NAN,
        9 => 1.0 / 3.0,
        _ => 20.0 + (i % 17) as f64 / 4.0,
    };
    let mut c = Chain::new(0, 300, 0, value(0), &pool).unwrap();
    for i in 1..288 {
        c.write(i * 300, value(i), &pool).unwrap();
        pass(&mut c, &pool);
    }
    assert_eq!((c.buffer_count(), c.samples()), (1, 288));
    // Raw: 2,304 bytes (a 4 KiB page before the open buffer grew); now pieces and a tail
    // of up to 32 raw slots.
    assert!(c.heap_bytes() < 288 * 3, "{}", c.heap_bytes());
    assert_eq!(pool.len(), 0, "no page taken");
    let mut out = vec![0.0; 300];
    c.copy_into(-5, 295, &mut out);
    for i in -5..295 {
        let want = if (0..288).contains(&i) {
            value(i)
        } else {
            f64::NAN
        };
        assert!(same(out[(i + 5) as usize], want), "slot {i}");
    }
    // Ranges inside and across pieces and the tail.
    for (a, b) in [
        (0, 32),
        (31, 33),
        (100, 101),
        (127, 129),
        (250, 288),
        (5, 280),
    ] {
        let mut part = vec![0.0; (b - a) as usize];
        c.copy_into(a, b, &mut part);
        assert!(
            (a..b).all(|i| same(part[(i - a) as usize], value(i))),
            "{a}..{b}"
        );
        let mut sum = vec![1.0; (b - a) as usize];
        c.add_into(a, b, &mut sum);
        assert!(
            (a..b).all(|i| same(sum[(i - a) as usize], 1.0 + value(i))),
            "{a}..{b}"
        );
    }
    // The newest value and the one before it, also right after a freeze (a tail of one).
    let n = c.newest().unwrap();
    assert_eq!((n.ts, n.previous), (287 * 300, Some(286 * 300)));
    let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
    for i in 1..=32 {
        c.write(i, i as f64, &pool).unwrap();
    }
    c.compact(1000, &pool);
    assert_eq!(
        c.parts().1.values().len(),
        1,
        "idle: all but the newest frozen"
    );
    let n = c.newest().unwrap();
    assert_eq!((n.ts, n.value, n.previous), (32, 32.0, Some(31)));
    assert_eq!(c.latest(), Some((32, 32.0)));
}

#[test]
fn late_writes_into_the_frozen_part_land_and_close_exactly() {
    let pool = Pool::new(8);
    let mut c = halves(10..300, &pool);
    // Into a frozen piece, before the block's first slot, and an overwrite in the tail.
    c.write(100, -1.0, &pool).unwrap();
    c.write(3, -2.0, &pool).unwrap();
    c.write(299, -3.0, &pool).unwrap();
    // Appends go on after the frozen part was opened.
    write_halves(&mut c, 300..400, &pool);
    let want = |i: i64| match i {
        3 => -2.0,
        100 => -1.0,
        299 => -3.0,
        10..400 => i as f64 / 2.0,
        _ => f64::NAN,
    };
    let check = |c: &Chain| {
        let mut out = vec![0.0; 400];
        c.copy_into(0, 400, &mut out);
        for i in 0..400 {
            assert!(same(out[i as usize], want(i)), "slot {i}");
        }
    };
    check(&c);
    assert_eq!(c.buffer_count(), 1);
    assert_eq!(c.span(), (3, 400));
    // Closing the block and the next pass encode frozen part and tail as one buffer.
    c.write(600, 1.0, &pool).unwrap();
    check(&c);
    pass(&mut c, &pool);
    let (older, _) = c.parts();
    assert_eq!(older.len(), 1);
    assert!(matches!(older[0].form(), Form::Packed(_)));
    assert_eq!((older[0].lo, older[0].hi), (3, 400));
    check(&c);
}

#[test]
fn a_restored_open_block_is_frozen_but_its_tail() {
    // What a snapshot's open block becomes: pieces and a raw tail of up to 32, as if appended.
    let pool = Pool::new(8);
    let values: Vec<f64> = (0..300).map(|i| i as f64 * 0.5).collect();
    let mut c = Chain::from_parts(0, 1, 0, Vec::new(), 0, 5, &values, &pool).unwrap();
    assert_eq!(c.parts().1.values().len(), 12);
    assert_eq!((c.buffer_count(), c.span()), (1, (5, 305)));
    assert!(c.heap_bytes() < 300 * 2, "{}", c.heap_bytes());
    let mut out = vec![0.0; 300];
    c.copy_into(5, 305, &mut out);
    assert_eq!(out, values);
    // Appends go on from the tail.
    c.write(305, 1.0, &pool).unwrap();
    assert_eq!(c.latest(), Some((305, 1.0)));
    // Out-of-order blocks are refused.
    let closed = Closed::packed(3, 0, 1, vec![3].into_boxed_slice());
    assert!(Chain::from_parts(0, 1, 0, vec![closed], 2, 0, &values, &pool).is_none());
}

#[test]
fn writes_and_background_passes_in_any_order_read_back_exactly() {
    // A model (slot -> value) against the chain: appends, overwrites, gaps, late writes into
    // closed and frozen parts, block jumps, interleaved with passes that find the series
    // written or idle. Every read must match the model bit for bit.
    let mut rng = crate::util::TestRng(0x5eed_1234_abcd_0001);
    for round in 0..40 {
        let pool = Pool::new(64);
        let step = [1i64, 10, 60][round % 3];
        let mut model = std::collections::BTreeMap::<i64, f64>::new();
        let value = |rng: &mut crate::util::TestRng| match rng.below(10) {
            0 => f64::NAN,
            1 => -0.0,
            2 => f64::from_bits(rng.next()),
            3 => 7.0,
            _ => (rng.below(100_000) as f64) / 100.0,
        };
        let v0 = value(&mut rng);
        let mut c = Chain::new(0, step as u16, 0, v0, &pool).unwrap();
        model.insert(0, v0);
        let mut k = 0i64;
        for _ in 0..3000 {
            let v = value(&mut rng);
            let slot = match rng.below(100) {
                0..=79 => {
                    k += 1;
                    k
                }
                80..=84 => k,
                85..=89 => {
                    k += 1 + rng.below(40) as i64;
                    k
                }
                90..=94 => (k - rng.below(700) as i64).max(0),
                95 => {
                    k += 600 + rng.below(900) as i64;
                    k
                }
                _ => {
                    let now = c.time(k) + if rng.below(3) == 0 { 10_000 } else { 0 };
                    c.compact(now, &pool);
                    continue;
                }
            };
            c.write(slot * step, v, &pool).unwrap();
            model.insert(slot, v);
        }
        for now in [c.time(k), c.time(k) + 100_000] {
            c.compact(now, &pool);
            let mut out = vec![0.0; (k + 20) as usize];
            c.copy_into(-10, k + 10, &mut out);
            for s in -10..k + 10 {
                let want = model.get(&s).copied().unwrap_or(f64::NAN);
                assert!(
                    same(out[(s + 10) as usize], want),
                    "round {round}, slot {s}"
                );
            }
            let newest = model.iter().rev().find(|(_, v)| !v.is_nan());
            assert_eq!(
                c.latest().map(|(t, v)| (t, v.to_bits())),
                newest.map(|(s, v)| (s * step, v.to_bits()))
            );
        }
    }
}

/// Adding a chain's slots onto sums (`add_into`, with its in-place and constant shortcuts:
/// +0.0 runs skipped, constant blocks and pieces filled) gives what copying them out and
/// adding does, bit for bit: runs of +0.0, -0.0, NaN, infinities, subnormals, constants and
/// noise, in closed blocks, frozen pieces and the open tail, onto sums of every kind but
/// -0.0 (which no sum started at +0.0 holds).
#[test]
fn added_slots_equal_copied_slots_added() {
    let mut rng = crate::util::TestRng(0xADD5_0000_0000_0001);
    let kinds = |rng: &mut crate::util::TestRng, k: usize| match k {
        0 => 0.0,
        1 => -0.0,
        2 => f64::NAN,
        3 => [f64::INFINITY, f64::NEG_INFINITY][rng.below(2)],
        4 => f64::from_bits(1 + rng.below(1 << 20) as u64) * [1.0, -1.0][rng.below(2)],
        5 => 2.5,
        6 => f64::from_bits(rng.next()),
        _ => rng.below(1000) as f64 / 4.0,
    };
    let sums = [
        0.0,
        1.5,
        -3.0,
        f64::NAN,
        f64::INFINITY,
        f64::MIN_POSITIVE / 4.0,
        1e300,
    ];
    for round in 0..30 {
        let pool = Pool::new(64);
        let mut c = Chain::new(0, 1, 0, 0.0, &pool).unwrap();
        let mut k = 0i64;
        while k < 1800 {
            // A run of one kind (or of noise mixing them), then maybe a pass.
            let (kind, len) = (rng.below(9), 1 + rng.below(300) as i64);
            let constant = kinds(&mut rng, kind);
            for _ in 0..len {
                k += 1;
                let v = if kind == 8 {
                    let k = rng.below(8);
                    kinds(&mut rng, k)
                } else {
                    constant
                };
                c.write(k, v, &pool).unwrap();
            }
            if rng.below(3) == 0 {
                let idle = if rng.below(4) == 0 { 10_000 } else { 0 };
                c.compact(k + idle, &pool);
            }
        }
        if round % 2 == 0 {
            c.compact(k, &pool);
        }
        for _ in 0..40 {
            let a = rng.below(k as usize + 20) as i64 - 10;
            let b = a + rng.below(700) as i64;
            let mut copied = vec![0.0; (b - a) as usize];
            c.copy_into(a, b, &mut copied);
            let start: Vec<f64> = (a..b).map(|_| sums[rng.below(sums.len())]).collect();
            let mut added = start.clone();
            c.add_into(a, b, &mut added);
            for (i, ((s, x), got)) in start.iter().zip(&copied).zip(&added).enumerate() {
                let want = s + x;
                assert!(
                    got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                    "round {round}, slots {a}..{b}, slot {}: {s} + {x} = {want}, added {got}",
                    a + i as i64
                );
            }
        }
    }
}
