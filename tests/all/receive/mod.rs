//! The receivers (issue 21) with real senders: Debian's Prometheus 2.42 remote-writing its
//! own metrics, the OpenTelemetry Python SDK from PyPI pushing OTLP/HTTP, a hand-made
//! OTLP/JSON body, and hostile bodies that must cost the daemon nothing.

mod hostile;
mod otel;
mod prometheus;

use std::time::{Duration, Instant};

use serde_json::Value;

use crate::common::*;

/// A daemon whose pipeline `p` writes every sample to stdout and into the store, with the
/// conventional paths fed into it, and `extra` appended to its config.
fn daemon(dir: &std::path::Path, extra: &str) -> DaemonProcess {
    DaemonProcess::with_config(
        dir,
        &format!(
            "{NO_PROCFS}[api]\nprometheus-pipeline = \"p\"\notlp-pipeline = \"p\"\n{extra}\n\
             [[pipeline]]\nname = \"p\"\nsinks = [\"stdout\", \"store\"]\n"
        ),
    )
}

/// Samples from the daemon's stdout until `done` holds for what was read (30 s at most).
fn samples_until(d: &DaemonProcess, mut done: impl FnMut(&[Value]) -> bool) -> Vec<Value> {
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut got = Vec::new();
    while !done(&got) {
        let left = deadline.saturating_duration_since(Instant::now());
        match d.stdout.recv_timeout(left) {
            Ok(line) => got.push(serde_json::from_str(&line).unwrap()),
            Err(_) => panic!(
                "timed out; got {} samples; stderr:\n{}",
                got.len(),
                d.stderr.lock().unwrap()
            ),
        }
    }
    got
}

/// `samples-in` of pipeline `p`.
fn samples_in(d: &DaemonProcess) -> u64 {
    let v: Value = d.get("/api/pipelines").unwrap().json().unwrap();
    v[0]["samples-in"].as_u64().unwrap()
}

/// A protobuf encoder for the tests' hand-made bodies.
mod pb {
    pub fn varint(out: &mut Vec<u8>, mut v: u64) {
        while v >= 0x80 {
            out.push(v as u8 | 0x80);
            v >>= 7;
        }
        out.push(v as u8);
    }
    pub fn bytes(out: &mut Vec<u8>, field: u32, b: &[u8]) {
        varint(out, u64::from(field) << 3 | 2);
        varint(out, b.len() as u64);
        out.extend_from_slice(b);
    }
    /// A remote-write 1.0 `TimeSeries` of `labels` with one sample.
    pub fn series(labels: &[(&str, &[u8])], value: f64, ms: i64) -> Vec<u8> {
        let mut ts = Vec::new();
        for (k, v) in labels {
            let mut l = Vec::new();
            bytes(&mut l, 1, k.as_bytes());
            bytes(&mut l, 2, v);
            bytes(&mut ts, 1, &l);
        }
        let mut s = vec![0x09];
        s.extend_from_slice(&value.to_bits().to_le_bytes());
        varint(&mut s, 2 << 3);
        varint(&mut s, ms as u64);
        bytes(&mut ts, 2, &s);
        ts
    }
}
