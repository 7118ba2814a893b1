//! Property tests of the codec: encode → decode is the identity (bit for bit, NaN as the
//! canonical NaN) on random and real-shaped values, and arbitrary bytes decode or fail without
//! panicking. A small xorshift generator stands in for a property-testing crate: the cases are
//! reproducible from the seed printed on failure.

use super::*;

use crate::util::TestRng as Rng;

/// Values that stress the forms: specials, subnormals, decimals, integers, raw bits.
fn value(r: &mut Rng, kind: usize) -> f64 {
    match kind {
        0 => [
            0.0,
            -0.0,
            f64::INFINITY,
            f64::NEG_INFINITY,
            f64::NAN,
            f64::MIN_POSITIVE,
            5e-324,
            -5e-324,
            f64::MAX,
            f64::MIN,
            f64::EPSILON,
            1.0,
        ][r.below(12)],
        1 => f64::from_bits(r.next()),
        2 => (r.below(2_000_000) as f64 - 1_000_000.0) / 100.0,
        3 => r.below(1 << 40) as f64,
        4 => f64::from_bits(r.below(1 << 52) as u64), // subnormal
        5 => ((r.below(100_000) as f64) * 0.001 + 1e6).mul_add(1.0, 0.0),
        6 => -(r.below(1000) as f64) / 7.0,
        _ => rate(r),
    }
}

/// A counter's rate as collectors compute it: an increase over the difference of two epoch
/// timestamps held as f64 (the ratio form's values), at a 1 s to 5 min interval.
fn rate(r: &mut Rng) -> f64 {
    let step = [1.0, 10.0, 60.0, 300.0][r.below(4)];
    let t1 = 1_100_000_000.0 + r.below(900_000_000) as f64 + r.below(1_000_000) as f64 * 1e-6;
    let t2 = t1 + step + (r.below(4000) as f64 - 2000.0) * 1e-6;
    let bits = r.below(40);
    let n = r.below(1 << bits) as f64 - if r.below(8) == 0 { 5.0 } else { 0.0 };
    n / (t2 - t1)
}

fn same(a: f64, b: f64) -> bool {
    (a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits()
}

fn round_trip(v: &[f64]) {
    let mut enc = Vec::new();
    encode(v, &mut enc);
    let mut out = vec![0.0; v.len()];
    decode(&enc, &mut out).unwrap_or_else(|e| panic!("{e}: {v:?}"));
    for (i, (a, b)) in v.iter().zip(&out).enumerate() {
        assert!(
            same(*a, *b),
            "slot {i}: {a:e} ({:#x}) came back {b:e}",
            a.to_bits()
        );
    }
    // Every part of the buffer decodes alone to the same slots.
    let n = v.len();
    for (a, b) in [
        (0, n),
        (0, n / 2),
        (n / 3, n),
        (n / 4, n / 4 + 1),
        (n / 2, n / 2),
        (1, n.saturating_sub(1).max(1)),
        // Across and on the unpacking's groups of 64.
        (63, 130),
        (64, 128),
        (n.saturating_sub(65), n),
    ] {
        if a > b || b > n {
            continue;
        }
        let mut part = vec![0.0; b - a];
        decode_range(&enc, n, a, &mut part).unwrap_or_else(|e| panic!("{e}: {a}..{b}"));
        for (i, x) in part.iter().enumerate() {
            assert!(same(*x, out[a + i]), "range {a}..{b} slot {}", a + i);
        }
        adds_as_decoded(&enc, n, a, &out[a..b]);
    }
    // A constant block's value is what each slot decodes to.
    if let Some(c) = constant(&enc) {
        assert!(out.iter().all(|x| same(*x, c)));
    }
}

/// The in-place sum (`add_range`) against decoding then adding, bit for bit, onto sums that
/// stress the addition (specials, subnormals, large magnitudes); when it declines, `out` is
/// untouched. Whether it added in place.
fn adds_as_decoded(enc: &[u8], n: usize, a: usize, decoded: &[f64]) -> bool {
    let onto = [
        0.0,
        -0.0,
        1.5,
        -1e300,
        f64::INFINITY,
        5e-324,
        f64::NAN,
        1e16,
        -3.25,
    ];
    let base: Vec<f64> = (0..decoded.len())
        .map(|i| onto[(a + i) % onto.len()])
        .collect();
    let mut sum = base.clone();
    let added = add_range(enc, n, a, &mut sum).unwrap_or_else(|e| panic!("{e}: add from {a}"));
    for (i, x) in sum.iter().enumerate() {
        let want = if added { base[i] + decoded[i] } else { base[i] };
        assert!(
            same(*x, want),
            "add from {a}, slot {}: {x:e} != {want:e}",
            a + i
        );
    }
    added
}

#[test]
fn gapless_blocks_add_in_place_as_decoded() {
    // Blocks without gaps of every kind (with a sprinkle of others, so some have
    // exceptions): most add in place, all as decoding then adding.
    let (mut blocks, mut in_place) = (0, 0);
    for seed in 1..=1500u64 {
        let mut r = Rng(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) | 1);
        let n = 1 + r.below(512);
        let main = r.below(8);
        let v: Vec<f64> = (0..n)
            .map(|_| {
                let k = if r.below(64) == 0 { r.below(7) } else { main };
                let x = value(&mut r, k);
                if x.is_nan() { 0.5 } else { x }
            })
            .collect();
        let mut enc = Vec::new();
        encode(&v, &mut enc);
        round_trip(&v);
        blocks += 1;
        let a = r.below(n);
        let b = a + r.below(n - a + 1);
        let mut out = vec![0.0; n];
        decode(&enc, &mut out).unwrap();
        if adds_as_decoded(&enc, n, a, &out[a..b]) {
            in_place += 1;
        }
    }
    assert!(
        in_place * 2 > blocks,
        "{in_place} of {blocks} added in place"
    );
}

#[test]
fn random_blocks_round_trip_bit_for_bit() {
    for seed in 1..=3000u64 {
        let mut r = Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
        let n = 1 + r.below(512);
        // A block mixes a main kind with a sprinkle of others and NaN gaps.
        let main = r.below(8);
        let noise = r.below(4);
        let v: Vec<f64> = (0..n)
            .map(|_| match r.below(16) {
                0 if noise > 0 => f64::NAN,
                1 if noise > 1 => {
                    let k = r.below(8);
                    value(&mut r, k)
                }
                _ => value(&mut r, main),
            })
            .collect();
        round_trip(&v);
    }
}

#[test]
fn shaped_blocks_pick_small_forms() {
    let size = |v: &[f64]| {
        let mut e = Vec::new();
        encode(v, &mut e);
        round_trip(v);
        e.len()
    };
    // Idle: constant, all zero, all NaN.
    assert!(size(&[0.0; 512]) <= 3);
    assert!(size(&[42.0; 512]) <= 3);
    assert!(size(&[-0.0; 512]) <= 10);
    assert!(size(&[42.5; 512]) <= 10);
    assert_eq!(size(&[f64::NAN; 512]), 1);
    // Few distinct values: a dictionary.
    let few: Vec<f64> = (0..512).map(|i| [0.1, 7.25, -3.0][i % 3]).collect();
    assert!(size(&few) < 200, "{}", size(&few));
    // Two-decimal gauges and counters: decimal scaling, a few bits each.
    let temps: Vec<f64> = (0..512)
        .map(|i| 40.0 + ((i * 37) % 1000) as f64 / 100.0)
        .collect();
    assert!(size(&temps) < 512 * 2, "{}", size(&temps));
    let counter: Vec<f64> = (0..512).map(|i| 1e9 + (i * 1000 + i % 7) as f64).collect();
    assert!(size(&counter) < 512, "{}", size(&counter));
    // Gaps cost a bitmap or runs, not a value each.
    let mut gappy = temps.clone();
    gappy[100..300].fill(f64::NAN);
    assert!(size(&gappy) < size(&temps));
    // Noise: raw, and never much larger than raw.
    let mut r = Rng(7);
    let noise: Vec<f64> = (0..512).map(|_| f64::from_bits(r.next() >> 2)).collect();
    assert!(size(&noise) <= 512 * 8 + 2);
}

#[test]
fn decimal_exceptions_keep_specials_exact() {
    let mut v: Vec<f64> = (0..512).map(|i| i as f64 / 4.0).collect();
    v[3] = -0.0;
    v[10] = f64::INFINITY;
    v[200] = 1e300;
    round_trip(&v);
    let mut e = Vec::new();
    encode(&v, &mut e);
    assert!(e.len() < 1200, "{}", e.len());
}

#[test]
fn precision_rounds_to_significant_digits() {
    assert_eq!(round_to_digits(1234.5678, 5), 1234.6);
    assert_eq!(round_to_digits(0.000123456, 3), 0.000123);
    assert_eq!(round_to_digits(-98765432.1, 2), -99000000.0);
    assert_eq!(round_to_digits(0.0, 5), 0.0);
    assert!(round_to_digits(f64::NAN, 5).is_nan());
    // Rates whose low digits are timing noise become a few bits each.
    let rates: Vec<f64> = (0..512)
        .map(|i| round_to_digits(1000.0 / (600.0 + (i % 13) as f64 * 0.0013), 5))
        .collect();
    let mut e = Vec::new();
    encode(&rates, &mut e);
    assert!(e.len() < 512, "{}", e.len());
    round_trip(&rates);
}

#[test]
fn arbitrary_bytes_decode_or_fail_without_panic() {
    let mut r = Rng(0xDEAD_BEEF);
    let mut valid = 0;
    for _ in 0..20_000 {
        let len = r.below(80);
        let mut bytes: Vec<u8> = (0..len).map(|_| r.next() as u8).collect();
        // Steer half the inputs into known forms so the deeper checks run too.
        if len >= 2 && r.below(2) == 0 {
            bytes[0] = r.below(4) as u8;
            bytes[1] = r.below(7) as u8;
        }
        let n = r.below(513);
        let mut out = vec![0.0; n];
        if decode(&bytes, &mut out).is_ok() {
            valid += 1;
        }
    }
    // Mutations of real encodings (decimal, ratio, integer constant): flip bytes, truncate,
    // extend.
    let mut rr = Rng(11);
    let rates: Vec<f64> = (0..300).map(|_| rate(&mut rr)).collect();
    for v in [
        (0..300)
            .map(|i| (i % 17) as f64 * 0.5)
            .collect::<Vec<f64>>(),
        rates,
        vec![12.0; 300],
    ] {
        mutated(&v);
    }
    assert!(valid < 20_000);
}

fn mutated(v: &[f64]) {
    let mut enc = Vec::new();
    encode(v, &mut enc);
    for i in 0..enc.len() {
        for flip in [1u8, 0x80, 0xff] {
            let mut b = enc.clone();
            b[i] ^= flip;
            let _ = decode(&b, &mut vec![0.0; 300]);
        }
        assert!(decode(&enc[..i], &mut vec![0.0; 300]).is_err());
    }
    let mut longer = enc.clone();
    longer.push(0);
    assert_eq!(
        decode(&longer, &mut vec![0.0; 300]),
        Err(DecodeError::Trailing(1))
    );
    // A constant has no length of its own; every other form counts its values.
    if constant(&enc).is_none() {
        assert!(decode(&enc, &mut vec![0.0; 600]).is_err());
    }
}

#[test]
fn counter_rates_take_the_ratio_form() {
    let mut r = Rng(5);
    for step in [1.0, 10.0, 60.0, 300.0] {
        // Rates of one counter at one interval, with the timestamps' jitter and a missed poll.
        let mut t = 1_528_207_811.719_152f64;
        let v: Vec<f64> = (0..512)
            .map(|i| {
                let d = step * if i == 100 { 2.0 } else { 1.0 };
                let t2 = t + d + (r.below(3000) as f64 - 1500.0) * 1e-6;
                let x = r.below(20_000) as f64 / (t2 - t);
                t = t2;
                x
            })
            .collect();
        let mut e = Vec::new();
        encode(&v, &mut e);
        round_trip(&v);
        assert_eq!(e[1], 6, "step {step}: form {}", e[1]);
        assert!(e.len() < 512 * 5, "step {step}: {} bytes", e.len());
    }
}

/// Two-entry dictionaries (decoded by a select on each value's bit rather than a lookup):
/// every pair of specials and ordinary values, with and without NaN gaps, decode, decode
/// in part and add as the values they hold.
#[test]
fn two_entry_dictionaries_read_back_bit_for_bit() {
    let specials = [
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        5e-324,
        -5e-324,
        f64::MIN_POSITIVE / 3.0,
        f64::MAX,
        0.0033,
        1.0,
    ];
    let mut r = Rng(0x2D1C7);
    let mut dictionaries = 0;
    for (i, x) in specials.iter().enumerate() {
        for y in &specials[i + 1..] {
            for gaps in [false, true] {
                let n = 1 + r.below(512);
                // Mostly `x` (long runs of it, as an idle counter), some `y`; one `y` at least.
                let mut v: Vec<f64> = (0..n)
                    .map(|_| match r.below(16) {
                        0 => *y,
                        1 if gaps => f64::NAN,
                        _ => *x,
                    })
                    .collect();
                v[r.below(n)] = *y;
                let mut enc = Vec::new();
                encode(&v, &mut enc);
                if !gaps && enc.get(1) == Some(&1) {
                    dictionaries += 1;
                }
                round_trip(&v);
                if !gaps {
                    let a = r.below(n);
                    let b = a + r.below(n - a + 1);
                    adds_as_decoded(&enc, n, a, &v[a..b]);
                }
            }
        }
    }
    assert!(dictionaries > 20, "{dictionaries} dictionaries");
}
