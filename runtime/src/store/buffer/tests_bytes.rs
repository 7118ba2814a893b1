//! What a series costs in bytes: no page for a short series, the newest value of an idle one
//! inside its open buffer, one closed buffer inline in the chain, a raw tail's room.

use super::tests::{pass, same};
use super::*;

#[test]
fn a_short_series_closing_its_block_draws_no_page() {
    // 20 values across a block's end (a thread that ran for 20 s): the block closes on the
    // write path with its 12 raw slots, and the pass encodes them; no 4 KiB page is drawn
    // (before, one was, and the pool kept it).
    let pool = Pool::new(8);
    let value = |t: i64| (t % 7) as f64 * 0.5;
    let mut c = Chain::new(0, 1, 500, value(500), &pool).unwrap();
    for t in 501..520 {
        c.write(t, value(t), &pool).unwrap();
    }
    assert_eq!(c.buffer_count(), 2);
    let raw = c.heap_bytes();
    assert!(raw < 512, "{raw}");
    let mut out = vec![0.0; 22];
    c.copy_into(499, 521, &mut out);
    let want = |t: i64| {
        if (500..520).contains(&t) {
            value(t)
        } else {
            f64::NAN
        }
    };
    assert!((499..521).all(|t| same(out[(t - 499) as usize], want(t))));
    c.compact(10_000, &pool);
    assert_eq!(pool.len(), 0, "no page drawn");
    assert!(c.heap_bytes() < raw, "{} >= {raw}", c.heap_bytes());
    c.copy_into(499, 521, &mut out);
    assert!((499..521).all(|t| same(out[(t - 499) as usize], want(t))));
    // A late write into the closed tail lands too.
    c.write(505, -1.0, &pool).unwrap();
    let mut sum = vec![0.0; 22];
    c.add_into(499, 521, &mut sum);
    assert_eq!(sum[6], -1.0);
    assert!(same(sum[0], f64::NAN) && sum[1] == value(500));
    assert_eq!(c.release(&pool), 2);
}

#[test]
fn an_idle_series_keeps_its_newest_value_without_an_allocation() {
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 10, 0, 0.0, &pool).unwrap();
    for i in 1..40 {
        c.write(i * 10, i as f64 * 0.5, &pool).unwrap();
    }
    // Not written for longer than `IDLE_AFTER`: all but the newest slot frozen, and that one
    // held in the open buffer itself.
    c.compact(390 + IDLE_AFTER + 1, &pool);
    assert_eq!(c.parts().1.values(), &[19.5]);
    assert_eq!(c.parts().1.heap_bytes(), 0);
    assert_eq!(c.latest(), Some((390, 19.5)));
    // Overwritten in place, then written on: the slots move to the heap again.
    c.write(390, -1.0, &pool).unwrap();
    assert_eq!(c.latest(), Some((390, -1.0)));
    for i in 40..45 {
        c.write(i * 10, i as f64, &pool).unwrap();
    }
    assert!(c.parts().1.heap_bytes() > 0);
    let mut out = vec![0.0; 46];
    c.copy_into(0, 46, &mut out);
    let want = |i: usize| match i {
        39 => -1.0,
        40..45 => i as f64,
        45 => f64::NAN,
        _ => i as f64 * 0.5,
    };
    assert!((0..46).all(|i| same(out[i], want(i))), "{out:?}");
    // A gap written after the idle pass lands too (the one slot grows to hold it).
    c.compact(440 + IDLE_AFTER + 1, &pool);
    c.write(470, 7.0, &pool).unwrap();
    let mut out = vec![0.0; 4];
    c.copy_into(44, 48, &mut out);
    assert!(same(out[0], 44.0) && out[1].is_nan() && out[2].is_nan() && out[3] == 7.0);
}

#[test]
fn a_chain_holds_one_closed_buffer_inline_and_more_on_the_heap() {
    // Every count of closed buffers a chain goes through (0, 1 inline, 2-4 on the heap, back
    // to 1 and 0 as retention frees them) reads the same values, and only a heap slice
    // counts its entries' bytes.
    let pool = Pool::with_retention(8, 1 << 20);
    let value = |i: i64| match i % 7 {
        0 => f64::NAN,
        1 => -0.0,
        2 => f64::from_bits(1), // a subnormal
        3 => f64::NEG_INFINITY,
        _ => i as f64 * 0.1,
    };
    let mut c = Chain::new(0, 1, 0, value(0), &pool).unwrap();
    let check = |c: &Chain, upto: i64| {
        let (lo, _) = c.span();
        let mut out = vec![0.0; (upto - lo) as usize];
        c.copy_into(lo, upto, &mut out);
        for (j, v) in out.iter().enumerate() {
            let i = lo + j as i64;
            assert!(same(*v, value(i)), "slot {i}: {v} != {}", value(i));
        }
    };
    let mut t = 1;
    // One frozen part only: inline.
    while t < 100 {
        c.write(t, value(t), &pool).unwrap();
        t += 1;
    }
    pass(&mut c, &pool);
    assert_eq!((c.parts().0.len(), c.buffer_count()), (0, 1));
    assert_eq!(c.slice_bytes(), 0, "one frozen part: inline");
    check(&c, t);
    // Up to three closed blocks and a frozen part: a heap slice.
    for n in 1..=3 {
        while t < n * 512 + 100 {
            c.write(t, value(t), &pool).unwrap();
            t += 1;
        }
        pass(&mut c, &pool);
        assert_eq!(c.parts().0.len(), n as usize);
        check(&c, t);
    }
    assert_eq!(c.slice_bytes(), 4 * std::mem::size_of::<Closed>());
    // Retention frees them one by one, down to the frozen part alone.
    for n in (0..3).rev() {
        c.free_before(c.time((3 - n) * 512), &pool);
        assert_eq!(c.parts().0.len(), n as usize);
        check(&c, t);
    }
    assert_eq!(c.slice_bytes(), 0, "the frozen part alone again: inline");
    // The idle pass keeps it inline; a late write into the frozen part lands.
    c.compact(t + IDLE_AFTER + 10, &pool);
    check(&c, t);
    assert_eq!(c.slice_bytes(), 0);
    c.write(3 * 512 + 7, 5.0, &pool).unwrap();
    let mut out = [0.0];
    c.copy_into(3 * 512 + 7, 3 * 512 + 8, &mut out);
    assert_eq!(out[0], 5.0);
    assert_eq!(c.release(&pool), 1);
}

#[test]
fn a_tail_keeps_room_only_within_its_power_of_two() {
    // A 10 s series leaving 10 raw slots after a pass: room for a minute's 6-7 writes would
    // round 17 up to 32 slots; the tail keeps 16, and writes past them grow it.
    let pool = Pool::new(8);
    let mut c = Chain::new(0, 10, 0, 0.0, &pool).unwrap();
    for i in 1..26 {
        c.write(i * 10, i as f64 * 0.5, &pool).unwrap();
    }
    pass(&mut c, &pool);
    assert_eq!(c.parts().1.values().len(), 10);
    assert_eq!(c.parts().1.heap_bytes(), 16 * 8);
    // A tail of 2: room within 8 slots.
    for i in 26..34 {
        c.write(i * 10, i as f64 * 0.5, &pool).unwrap();
    }
    pass(&mut c, &pool);
    assert_eq!(c.parts().1.values().len(), 2);
    assert_eq!(c.parts().1.heap_bytes(), 8 * 8);
    for i in 34..60 {
        c.write(i * 10, i as f64 * 0.5, &pool).unwrap();
    }
    assert!(c.parts().1.heap_bytes() >= 28 * 8);
    let mut out = vec![0.0; 61];
    c.copy_into(0, 61, &mut out);
    assert!((0..60).all(|i| out[i] == i as f64 * 0.5) && out[60].is_nan());
}
