//! Fuzz target: the receivers' protobuf reader (remote write, OTLP) must never panic or read
//! past its input, whatever a body declares: every field of every nested message is walked,
//! strings are checked, packed lists read both ways.
#![no_main]

use libfuzzer_sys::fuzz_target;

#[allow(dead_code)]
#[path = "../../runtime/src/ingest/pb.rs"]
mod pb;

use pb::{Reader, Wire, for_each_packed};

/// Walks `buf` as a message, nested messages to `depth`; returns the bytes seen.
fn walk(buf: &[u8], depth: u32) -> usize {
    let mut r = Reader::new(buf);
    let mut seen = 0;
    while let Ok(Some((field, v))) = r.next_field() {
        assert!(field >= 1);
        if let Wire::Bytes(b) = v {
            assert!(b.len() <= buf.len());
            seen += b.len();
            let _ = v.str("s");
            let _ = for_each_packed(v, "p", true, |_| Ok(()));
            let _ = for_each_packed(v, "p", false, |_| Ok(()));
            if depth > 0 {
                walk(b, depth - 1);
            }
        }
    }
    seen
}

fuzz_target!(|data: &[u8]| {
    assert!(walk(data, 8) <= data.len() * 9);
});
