use super::*;
use crate::ingest::pb::enc;

const LIMITS: Limits = Limits {
    max_samples: 1000,
    max_body: 1 << 20,
};

fn label(out: &mut Vec<u8>, field: u32, k: &str, v: &str) {
    let mut l = Vec::new();
    enc::bytes(&mut l, 1, k.as_bytes());
    enc::bytes(&mut l, 2, v.as_bytes());
    enc::bytes(out, field, &l);
}

fn sample_msg(value: f64, ms: i64) -> Vec<u8> {
    let mut s = Vec::new();
    enc::double(&mut s, 1, value);
    enc::uint(&mut s, 2, ms as u64);
    s
}

/// A 1.0 `TimeSeries`.
fn series(labels: &[(&str, &str)], samples: &[(f64, i64)]) -> Vec<u8> {
    let mut ts = Vec::new();
    for (k, v) in labels {
        label(&mut ts, 1, k, v);
    }
    for &(v, ms) in samples {
        enc::bytes(&mut ts, 2, &sample_msg(v, ms));
    }
    ts
}

fn request(series: &[Vec<u8>]) -> Vec<u8> {
    let mut r = Vec::new();
    for s in series {
        enc::bytes(&mut r, 1, s);
    }
    r
}

fn snappy(raw: &[u8]) -> Vec<u8> {
    snap::raw::Encoder::new().compress_vec(raw).unwrap()
}

fn meta(s: &Sample) -> Vec<(String, String)> {
    s.metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

/// Prometheus' own fixture (storage/remote/codec_test.go `writeRequestFixture`): two series
/// of `test_metric1` with labels b, baz, d, foo, one sample each, an exemplar and native
/// histograms beside them.
#[test]
fn prometheus_write_request_fixture() {
    let labels = |b: &'static str| {
        [
            ("__name__", "test_metric1"),
            ("b", b),
            ("baz", "qux"),
            ("d", "e"),
            ("foo", "bar"),
        ]
    };
    let mut s1 = series(&labels("c"), &[(1.0, 0)]);
    let mut s2 = series(&labels("c"), &[(2.0, 1)]);
    for s in [&mut s1, &mut s2] {
        enc::bytes(s, 3, &[]); // an exemplar
        enc::bytes(s, 4, &[]); // a native histogram
    }
    let body = snappy(&request(&[s1, s2]));
    let d = decode(&body, Version::V1, LIMITS).unwrap();
    assert_eq!(d.samples.len(), 2);
    assert_eq!((d.exemplars, d.histograms), (2, 2));
    let s = &d.samples[1];
    assert_eq!(&*s.name, "test_metric1");
    assert_eq!(&*s.resource, "");
    assert_eq!(
        (s.value, s.timestamp_ns, s.kind),
        (2.0, 1_000_000, Kind::Gauge)
    );
    assert_eq!(
        meta(s),
        [("b", "c"), ("baz", "qux"), ("d", "e"), ("foo", "bar")]
            .map(|(k, v)| (k.to_string(), v.to_string()))
    );
}

/// A byte vector written out by hand from the proto (so the test's encoder is not checking
/// itself): `up{instance="h:9",job="j"} 1 @ 1000ms`, snappy literal-only.
#[test]
fn a_byte_vector_of_up() {
    #[rustfmt::skip]
    let raw: &[u8] = &[
        0x0a, 0x39,                                     // timeseries, 57 bytes
          0x0a, 0x0e, 0x0a, 0x08, b'_', b'_', b'n', b'a', b'm', b'e', b'_', b'_',
                      0x12, 0x02, b'u', b'p',          // __name__ = up
          0x0a, 0x0f, 0x0a, 0x08, b'i', b'n', b's', b't', b'a', b'n', b'c', b'e',
                      0x12, 0x03, b'h', b':', b'9',    // instance = h:9
          0x0a, 0x08, 0x0a, 0x03, b'j', b'o', b'b', 0x12, 0x01, b'j', // job = j
          0x12, 0x0c, 0x09, 0, 0, 0, 0, 0, 0, 0xf0, 0x3f, // value 1.0
                      0x10, 0xe8, 0x07,                // timestamp 1000
    ];
    // Snappy block: varint length 59, then one literal of 59 bytes (tag (59-1)<<2).
    let mut body = vec![59, (58 << 2) as u8];
    body.extend_from_slice(raw);
    let d = decode(&body, Version::V1, LIMITS).unwrap();
    let s = &d.samples[0];
    assert_eq!((&*s.name, &*s.resource, s.value), ("up", "h:9", 1.0));
    assert_eq!(s.timestamp_ns, 1_000_000_000);
    assert_eq!(meta(s), [("job".to_string(), "j".to_string())]);
}

/// Prometheus sends 1.0 metadata in requests of its own: a later request's counter is still
/// cumulative, and a family's type stated again replaces the one before.
#[test]
fn metadata_sent_apart_from_the_samples_is_remembered() {
    let metadata = |t: u64| {
        let mut m = Vec::new();
        enc::uint(&mut m, 1, t);
        enc::bytes(&mut m, 2, b"reqs_total");
        let mut raw = Vec::new();
        enc::bytes(&mut raw, 3, &m);
        snappy(&raw)
    };
    let samples = snappy(&request(&[series(
        &[("__name__", "reqs_total")],
        &[(5.0, 3)],
    )]));
    let known = Memory::default();
    let kind = |known: &Memory| {
        decode_with(&samples, Version::V1, LIMITS, known)
            .unwrap()
            .samples[0]
            .kind
    };
    assert_eq!(kind(&known), Kind::Gauge, "nothing stated yet");
    assert!(
        decode_with(&metadata(1), Version::V1, LIMITS, &known)
            .unwrap()
            .samples
            .is_empty()
    );
    assert_eq!(kind(&known), Kind::Cumulative);
    decode_with(&metadata(2), Version::V1, LIMITS, &known).unwrap(); // now a gauge
    assert_eq!(kind(&known), Kind::Gauge);
    assert_eq!(
        kind(&Memory::default()),
        Kind::Gauge,
        "memory is per receiver"
    );
}

#[test]
fn stale_markers_are_dropped_other_nans_kept_counters_cumulative() {
    let s = series(
        &[("__name__", "http_requests_total"), ("instance", "a")],
        &[(f64::from_bits(STALE_NAN), 1), (f64::NAN, 2), (5.0, 3)],
    );
    let mut raw = request(&[s]);
    // Metadata after the series, as Prometheus places field 3.
    let mut m = Vec::new();
    enc::uint(&mut m, 1, 1); // COUNTER
    enc::bytes(&mut m, 2, b"http_requests_total");
    enc::bytes(&mut raw, 3, &m);
    let d = decode(&snappy(&raw), Version::V1, LIMITS).unwrap();
    assert_eq!(d.stale, 1);
    assert_eq!(d.samples.len(), 2);
    assert!(d.samples[0].value.is_nan());
    assert!(d.samples.iter().all(|s| s.kind == Kind::Cumulative));
}

#[test]
fn version_two_reads_symbols_and_metadata() {
    let symbols = [
        "",
        "__name__",
        "bytes_total",
        "instance",
        "n1",
        "job",
        "node",
        "bytes",
    ];
    let mut raw = Vec::new();
    let mut ts = Vec::new();
    let mut refs = Vec::new();
    for r in [1u64, 2, 3, 4, 5, 6] {
        enc::varint(&mut refs, r);
    }
    enc::bytes(&mut ts, 1, &refs);
    enc::bytes(&mut ts, 2, &sample_msg(42.0, 5));
    let mut md = Vec::new();
    enc::uint(&mut md, 1, 1); // COUNTER
    enc::uint(&mut md, 4, 7); // unit "bytes"
    enc::bytes(&mut ts, 5, &md);
    // Series before symbols: the decoder must not care.
    enc::bytes(&mut raw, 5, &ts);
    for s in symbols {
        enc::bytes(&mut raw, 4, s.as_bytes());
    }
    let d = decode(&snappy(&raw), Version::V2, LIMITS).unwrap();
    let s = &d.samples[0];
    assert_eq!(
        (&*s.name, &*s.resource, &*s.unit),
        ("bytes_total", "n1", "bytes")
    );
    assert_eq!(
        (s.kind, s.value, s.timestamp_ns),
        (Kind::Cumulative, 42.0, 5_000_000)
    );
    assert_eq!(meta(s), [("job".to_string(), "node".to_string())]);

    // A reference past the table.
    let mut ts = Vec::new();
    enc::bytes(&mut ts, 1, &[1, 99]);
    enc::bytes(&mut ts, 2, &sample_msg(1.0, 1));
    let mut raw = Vec::new();
    enc::bytes(&mut raw, 4, b"");
    enc::bytes(&mut raw, 4, b"__name__");
    enc::bytes(&mut raw, 5, &ts);
    let e = decode(&snappy(&raw), Version::V2, LIMITS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "timeseries[0].labels_refs[0]: symbol 99 past the table's 2 entries"
    );
}

#[test]
fn content_types() {
    let v = |ct| Version::from_content_type(ct);
    assert_eq!(v(None).unwrap(), Version::V1);
    assert_eq!(v(Some("application/x-protobuf")).unwrap(), Version::V1);
    assert_eq!(
        v(Some(
            "application/x-protobuf;proto=io.prometheus.write.v2.Request"
        ))
        .unwrap(),
        Version::V2
    );
    assert_eq!(
        v(Some(
            "application/x-protobuf; proto=prometheus.WriteRequest"
        ))
        .unwrap(),
        Version::V1
    );
    for bad in [
        "application/x-protobuf;proto=io.prometheus.write.v3.Request",
        "text/plain",
    ] {
        assert!(
            matches!(v(Some(bad)), Err(ReceiveError::Unsupported(_))),
            "{bad}"
        );
    }
}

#[test]
fn hostile_bodies_are_refused_naming_what_is_wrong() {
    // A snappy bomb: a few bytes declaring 4 GiB.
    let mut bomb = Vec::new();
    enc::varint(&mut bomb, u32::MAX as u64);
    bomb.extend_from_slice(&[0, 0, 0]);
    let e = decode(&bomb, Version::V1, LIMITS).unwrap_err();
    assert!(matches!(e, ReceiveError::TooLarge(_)), "{e}");
    assert!(e.to_string().contains("declares 4294967295 bytes"), "{e}");

    // A series declaring a billion bytes.
    let mut raw = vec![0x0a];
    enc::varint(&mut raw, 1_000_000_000);
    raw.extend_from_slice(&[0; 16]);
    let e = decode(&snappy(&raw), Version::V1, LIMITS).unwrap_err();
    assert!(matches!(e, ReceiveError::Malformed(_)));
    assert!(
        e.to_string()
            .contains("declares 1000000000 bytes, 16 are left"),
        "{e}"
    );

    // Invalid UTF-8 in a label value, named by series and label.
    let mut s = series(&[("__name__", "m")], &[(1.0, 1)]);
    let mut l = Vec::new();
    enc::bytes(&mut l, 1, b"k");
    enc::bytes(&mut l, 2, &[b'a', 0xff]);
    enc::bytes(&mut s, 1, &l);
    let e = decode(&snappy(&request(&[s])), Version::V1, LIMITS).unwrap_err();
    assert_eq!(
        e.to_string(),
        "timeseries[0].labels[1].value: invalid UTF-8 at byte 1 of the string"
    );

    // A label of 1 MB.
    let big = "x".repeat(1 << 20);
    let s = series(&[("__name__", "m"), ("k", &big)], &[(1.0, 1)]);
    let limits = Limits {
        max_body: 4 << 20,
        ..LIMITS
    };
    let e = decode(&snappy(&request(&[s])), Version::V1, limits).unwrap_err();
    assert!(
        e.to_string().contains("a label value of 1048576 bytes"),
        "{e}"
    );

    // No name.
    let s = series(&[("job", "j")], &[(1.0, 1)]);
    let e = decode(&snappy(&request(&[s])), Version::V1, LIMITS).unwrap_err();
    assert_eq!(e.to_string(), "timeseries[0]: no __name__ label");

    // More samples than a request may carry: 413, and nothing half-decoded returned.
    let many: Vec<Vec<u8>> = (0..1001)
        .map(|i| {
            series(
                &[("__name__", "m"), ("instance", &format!("i{i}"))],
                &[(1.0, 1)],
            )
        })
        .collect();
    let e = decode(&snappy(&request(&many)), Version::V1, LIMITS).unwrap_err();
    assert!(matches!(e, ReceiveError::TooLarge(_)));
    assert!(e.to_string().contains("more than 1000 samples"), "{e}");

    // Not snappy at all.
    let e = decode(b"\xff\xff\xff\xff\xff\xff", Version::V1, LIMITS).unwrap_err();
    assert!(e.to_string().starts_with("snappy body"), "{e}");
}

/// Consecutive series that differ only in `__name__` share their resource and metadata set;
/// another instance or another label value gets its own.
#[test]
fn consecutive_series_of_one_host_share_their_labels() {
    let s = |name: &str, instance: &str, host: &str| {
        series(
            &[
                ("__name__", name),
                ("hostname", host),
                ("instance", instance),
            ],
            &[(1.0, 1)],
        )
    };
    let body = snappy(&request(&[
        s("a", "i1", "h1"),
        s("b", "i1", "h1"),
        s("c", "i2", "h1"),
        s("d", "i2", "h2"),
    ]));
    let d = decode(&body, Version::V1, LIMITS).unwrap();
    let [a, b, c, e] = &d.samples[..] else {
        panic!("{:?}", d.samples)
    };
    assert!(a.metadata.same(&b.metadata) && Arc::ptr_eq(&a.resource, &b.resource));
    assert_eq!((&*b.name, &*c.resource), ("b", "i2"));
    assert!(
        b.metadata.same(&c.metadata),
        "the same labels, another instance"
    );
    assert!(!c.metadata.same(&e.metadata));
    assert_eq!(meta(e), [("hostname".to_string(), "h2".to_string())]);
}

/// A series sent again is read from memory: the same samples as a fresh decode, with the
/// same shared strings; labels that do not stand together, and a series whose labels now
/// differ by one byte, are decoded in full.
#[test]
fn series_sent_again_decode_from_memory_to_the_same_samples() {
    let a = series(
        &[("__name__", "up"), ("instance", "h1"), ("job", "n")],
        &[(1.0, 5)],
    );
    let b = series(
        &[("__name__", "up"), ("instance", "h2"), ("job", "n")],
        &[(2.0, 6)],
    );
    // Labels around a sample: not one span, never remembered.
    let mut split = Vec::new();
    label(&mut split, 1, "__name__", "load");
    enc::bytes(&mut split, 2, &sample_msg(3.0, 7));
    label(&mut split, 1, "job", "n");
    let body = snappy(&request(&[a.clone(), b, split]));
    let memory = Memory::default();
    let first = decode_with(&body, Version::V1, LIMITS, &memory).unwrap();
    assert_eq!(
        memory.series.len(),
        2,
        "the two series with their labels together"
    );
    let again = decode_with(&body, Version::V1, LIMITS, &memory).unwrap();
    assert_eq!(again.samples, first.samples);
    assert_eq!(
        again.samples,
        decode(&body, Version::V1, LIMITS).unwrap().samples
    );
    assert!(Arc::ptr_eq(
        &first.samples[0].resource,
        &again.samples[0].resource
    ));
    assert!(again.samples[0].metadata.same(&first.samples[0].metadata));
    assert_eq!(meta(&again.samples[2]), [("job".into(), "n".into())]);
    // One byte of a label changed: another series.
    let c = series(
        &[("__name__", "up"), ("instance", "h1"), ("job", "m")],
        &[(4.0, 8)],
    );
    let third = decode_with(&snappy(&request(&[c])), Version::V1, LIMITS, &memory).unwrap();
    assert_eq!(meta(&third.samples[0]), [("job".into(), "m".into())]);
    // A refused request teaches nothing.
    let bad = series(&[("__name__", "up"), ("", "x")], &[(1.0, 1)]);
    let n = memory.series.len();
    assert!(decode_with(&snappy(&request(&[a, bad])), Version::V1, LIMITS, &memory).is_err());
    assert_eq!(memory.series.len(), n);
}

/// The fast read of a `Sample` as senders write it gives what the general one gives, and
/// leaves every other shape to it.
#[test]
fn samples_as_sent_read_as_the_general_decoder_reads_them() {
    for ms in [
        0,
        1,
        (1 << 35) - 1,
        1 << 35,
        1_700_000_000_123,
        (1 << 42) - 1,
        1 << 42,
        -1,
    ] {
        for v in [0.0, -2.5, f64::from_bits(STALE_NAN), f64::MAX] {
            let s = sample_msg(v, ms);
            let (value, got) = sample(&s).unwrap();
            assert_eq!((value.to_bits(), got), (v.to_bits(), ms), "{ms} {v}");
            let fast = sample_as_sent(&s);
            assert_eq!(fast.is_some(), s.len() == 16, "{ms}");
            if let Some((value, got)) = fast {
                assert_eq!((value.to_bits(), got), (v.to_bits(), ms));
            }
        }
    }
    // Fields swapped: the general decoder's.
    let mut s = Vec::new();
    enc::uint(&mut s, 2, 1_700_000_000_123);
    enc::double(&mut s, 1, 4.0);
    assert_eq!(sample_as_sent(&s), None);
    assert_eq!(sample(&s).unwrap(), (4.0, 1_700_000_000_123));
}
