//! Fuzz target: the store's buffer decoder (what a snapshot or archive file feeds it) must
//! never panic on any bytes, and values it encodes must decode bit for bit.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../runtime/src/store/codec.rs"]
mod codec;

fuzz_target!(|data: &[u8]| {
    // The first two bytes pick the slot count; the rest is an encoded buffer.
    if data.len() >= 2 {
        let n = u16::from_le_bytes([data[0], data[1]]) as usize % (codec::MAX_VALUES + 1);
        let mut out = vec![0.0; n];
        let _ = codec::decode(&data[2..], &mut out);
    }
    // The same bytes as f64 values: encode, decode, compare.
    let values: Vec<f64> = data
        .chunks_exact(8)
        .take(codec::MAX_VALUES)
        .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
        .collect();
    round_trip(&values);
    // The same bytes as counters' rates (the ratio form): each 8 bytes an increase and an
    // interval's jitter over epoch timestamps, as collectors compute them.
    let mut t = 1_500_000_000.123_456f64;
    let rates: Vec<f64> = data
        .chunks_exact(8)
        .take(codec::MAX_VALUES)
        .map(|c| {
            let n = i32::from_le_bytes(c[..4].try_into().unwrap()) as f64;
            let jitter = u16::from_le_bytes(c[4..6].try_into().unwrap()) as f64 * 1e-6;
            let t2 = t + [1.0, 10.0, 60.0, 300.0][c[6] as usize % 4] + jitter;
            let r = n / (t2 - t);
            t = t2;
            r
        })
        .collect();
    round_trip(&rates);
});

fn round_trip(values: &[f64]) {
    let mut enc = Vec::new();
    codec::encode(values, &mut enc);
    let mut out = vec![0.0; values.len()];
    codec::decode(&enc, &mut out).expect("own encoding decodes");
    for (a, b) in values.iter().zip(&out) {
        assert!((a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits());
    }
}
