//! Hostile bodies on the receivers: a snappy bomb, a length past the body, a billion-byte
//! declared field, a 1 MB label, invalid UTF-8, 10^6 series in one request. Each is a 4xx
//! naming what is wrong, in well under a second; the daemon's memory stays flat and nothing
//! reaches the pipeline. Then a valid request is taken as usual.

use std::time::{Duration, Instant};

use super::{daemon, pb, samples_in};
use crate::common::*;

fn rss_kb(d: &DaemonProcess) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{}/status", d.child.id())).unwrap();
    let line = s.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

fn snappy(raw: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(raw).unwrap()
}

fn request(series: impl IntoIterator<Item = Vec<u8>>) -> Vec<u8> {
    let mut r = Vec::new();
    for s in series {
        pb::bytes(&mut r, 1, &s);
    }
    r
}

/// POSTs `body` as remote write 1.0; (status, answer, time taken).
fn remote_write(d: &DaemonProcess, body: Vec<u8>) -> (u16, String, Duration) {
    let t = Instant::now();
    let r = reqwest::blocking::Client::new()
        .post(d.url("/api/pipelines/p/prometheus"))
        .header("content-type", "application/x-protobuf")
        .header("content-encoding", "snappy")
        .header("x-prometheus-remote-write-version", "0.1.0")
        .body(body)
        .send()
        .unwrap();
    let status = r.status().as_u16();
    (status, r.text().unwrap(), t.elapsed())
}

#[test]
fn receive_hostile_bodies_cost_nothing_and_store_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(tmp.path(), "");
    let now = chrono::Utc::now().timestamp_millis();
    // Warm up the paths the cases take (first allocations, thread pools) before measuring.
    let _ = remote_write(&d, snappy(&request([pb::series(&[], 1.0, now)])));
    let rss0 = rss_kb(&d);

    let mut bomb = Vec::new();
    pb::varint(&mut bomb, u32::MAX as u64);
    bomb.extend_from_slice(&[0, 0, 0, 0]);
    let mut billion = vec![0x0a];
    pb::varint(&mut billion, 1_000_000_000);
    billion.extend_from_slice(&[0x0a, 0x00]);
    let mut packed_series = vec![0x0a];
    pb::varint(&mut packed_series, 1 << 30);
    let big = vec![b'x'; 1 << 20];
    let many = request((0..1_000_000).map(|i| {
        pb::series(
            &[("__name__", b"m"), ("instance", format!("i{i}").as_bytes())],
            1.0,
            now,
        )
    }));
    let cases: Vec<(&str, Vec<u8>, u16, &str)> = vec![
        (
            "a snappy bomb",
            bomb,
            413,
            "declares 4294967295 bytes uncompressed",
        ),
        (
            "a billion bytes declared",
            snappy(&billion),
            400,
            "declares 1000000000 bytes, 2 are left",
        ),
        (
            "a series declaring 2^30 bytes of labels",
            snappy(&packed_series),
            400,
            "declares 1073741824 bytes, 0 are left",
        ),
        (
            "a label of 1 MB",
            snappy(&request([pb::series(
                &[("__name__", b"m"), ("k", &big)],
                1.0,
                now,
            )])),
            400,
            "timeseries[0].labels[1]: a label value of 1048576 bytes",
        ),
        (
            "invalid UTF-8",
            snappy(&request([pb::series(
                &[("__name__", b"m"), ("k", b"\xff\xfe")],
                1.0,
                now,
            )])),
            400,
            "timeseries[0].labels[1].value: invalid UTF-8",
        ),
        (
            "10^6 series",
            snappy(&many),
            413,
            "more than 100000 samples",
        ),
    ];
    let before = samples_in(&d);
    for (what, body, status, says) in cases {
        let (got, answer, took) = remote_write(&d, body);
        assert_eq!(got, status, "{what}: {answer}");
        assert!(answer.contains(says), "{what}: {answer}");
        assert!(took < Duration::from_secs(1), "{what} took {took:?}");
    }
    assert_eq!(samples_in(&d), before, "nothing reached the pipeline");
    let grown = rss_kb(&d).saturating_sub(rss0);
    // Measured: 4-5 MB (allocator arenas of the request threads). The 10^6-series body is
    // 56 MB decompressed: keeping it, or the bomb's 4 GiB, would show.
    assert!(grown < 32 << 10, "RSS grew by {grown} kB");

    // The same hostile shapes in OTLP: invalid UTF-8 in protobuf, a gzip bomb in JSON.
    let mut kv = Vec::new();
    pb::bytes(&mut kv, 1, b"k");
    let mut any = Vec::new();
    pb::bytes(&mut any, 1, b"\xc3");
    pb::bytes(&mut kv, 2, &any);
    let mut res = Vec::new();
    pb::bytes(&mut res, 1, &kv);
    let mut rm = Vec::new();
    pb::bytes(&mut rm, 1, &res);
    let mut req = Vec::new();
    pb::bytes(&mut req, 1, &rm);
    let r = reqwest::blocking::Client::new()
        .post(d.url("/api/pipelines/p/otlp"))
        .header("content-type", "application/x-protobuf")
        .body(req)
        .send()
        .unwrap();
    assert_eq!(r.status(), 400);
    let status = r.bytes().unwrap();
    assert!(
        String::from_utf8_lossy(&status).contains(
            "resource_metrics[0].resource.attributes[0].value.string_value: invalid UTF-8"
        ),
        "{status:?}"
    );
    let mut z = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut z, &vec![b' '; 100 << 20]).unwrap();
    let gz = z.finish().unwrap();
    let t = Instant::now();
    let r = reqwest::blocking::Client::new()
        .post(d.url("/v1/metrics"))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(gz)
        .send()
        .unwrap();
    assert_eq!(r.status(), 413);
    assert!(t.elapsed() < Duration::from_secs(1), "{:?}", t.elapsed());
    let v: serde_json::Value = r.json().unwrap();
    assert_eq!(v["code"], 8, "{v}");
    assert_eq!(samples_in(&d), before, "nothing reached the pipeline");

    // A valid request after all that.
    let ok = request([pb::series(
        &[("__name__", b"after"), ("instance", b"h")],
        2.0,
        now,
    )]);
    let (status, answer, _) = remote_write(&d, snappy(&ok));
    assert_eq!(status, 204, "{answer}");
    assert_eq!(samples_in(&d), before + 1);
}

/// A body sent where no pipeline takes it is refused with 404 naming why, whichever of the
/// four receiver routes it came by, and nothing reaches the pipeline that does exist.
#[test]
fn a_receiver_without_its_pipeline_answers_404_naming_what_is_missing() {
    let dir = tempfile::tempdir().unwrap();
    // Only a named pipeline: neither conventional path is fed.
    let d = DaemonProcess::with_config(
        dir.path(),
        &format!("{NO_PROCFS}[[pipeline]]\nname = \"p\"\nsinks = [\"stdout\", \"store\"]\n"),
    );
    for (path, why) in [
        (
            "/api/v1/write",
            "no pipeline takes this path: set [api] prometheus-pipeline",
        ),
        (
            "/v1/metrics",
            "no pipeline takes this path: set [api] otlp-pipeline",
        ),
        (
            "/api/pipelines/nope/prometheus",
            "no pipeline named \"nope\"",
        ),
        ("/api/pipelines/nope/otlp", "no pipeline named \"nope\""),
    ] {
        let r = d.post(path, "x");
        assert_eq!(r.status(), 404, "{path}");
        assert!(r.text().unwrap().contains(why), "{path}: not {why:?}");
    }
    assert_eq!(samples_in(&d), 0);
}
