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
    let mut enc = Vec::new();
    codec::encode(&values, &mut enc);
    let mut out = vec![0.0; values.len()];
    codec::decode(&enc, &mut out).expect("own encoding decodes");
    for (a, b) in values.iter().zip(&out) {
        assert!((a.is_nan() && b.is_nan()) || a.to_bits() == b.to_bits());
    }
});
