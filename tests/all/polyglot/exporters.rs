//! Exporters (issue 21): the `--world exporter` scaffolds of every language build, pass the
//! check naming the world and send a batch as wasmon's sample JSON; the Python `otlp` exporter
//! writes what wasmon's own OTLP receiver decodes back to the samples it was given.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmon::ingest::Limits;
use wasmon::ingest::otlp::decode_protobuf;
use wasmon::sample::{Kind, Line, Metadata, Name, Sample, parse_line};

use super::checks::build_scaffold;
use super::{built, load_exporter};
use crate::common::guest_path;

fn sample(name: &str, resource: &str, unit: &str, kind: Kind, value: f64, ts: i64) -> Sample {
    Sample {
        unit: Name::new(unit),
        kind,
        ..Sample::new(name, resource, value, ts)
    }
}

fn with_metadata(mut s: Sample, pairs: &[(&str, &str)]) -> Sample {
    s.metadata = Metadata::new(
        pairs
            .iter()
            .map(|(k, v)| (Arc::from(*k), Arc::from(*v)))
            .collect(),
    );
    s
}

/// Every kind, units, shared and distinct metadata sets, strings JSON must escape,
/// nanosecond timestamps on both sides of the epoch.
fn batch() -> Vec<Sample> {
    let rack = [("rack", "r1"), ("zone", "a")];
    vec![
        with_metadata(
            sample(
                "disk.read",
                "sda",
                "B",
                Kind::Cumulative,
                1.5e9,
                1_700_000_000_123_456_789,
            ),
            &rack,
        ),
        sample(
            "cpu.busy",
            "host \"7\" é",
            "%",
            Kind::Gauge,
            0.1,
            1_700_000_000_000_000_000,
        ),
        with_metadata(
            sample(
                "disk.read",
                "sdb",
                "B",
                Kind::Cumulative,
                2.0,
                1_700_000_000_500_000_000,
            ),
            &rack,
        ),
        with_metadata(
            sample("net.rx", "", "", Kind::Delta, -300.25, -1_500_000_000),
            &[("note", "line\nbreak")],
        ),
        sample("cpu.busy", "h2", "%", Kind::Gauge, 12345678.9, 0),
        // OTLP calls it `host.name`; wasmon's receiver maps it back.
        with_metadata(
            sample(
                "disk.read",
                "sdc",
                "B",
                Kind::Cumulative,
                7.0,
                1_700_000_002_000_000_000,
            ),
            &[("hostname", "n1"), ("rack", "r2")],
        ),
    ]
}

/// The JSON-lines scaffold in every language: each line of its one request reads back as the sample it came from; the
/// string table carries over to a second batch; an empty batch sends nothing; a bad parameter
/// is refused, naming it.
#[test]
fn the_exporter_scaffolds_build_and_send_json_lines_that_read_back_exactly() {
    let root = tempfile::tempdir().unwrap();
    let input = batch();
    for lang in ["rust", "c", "python", "js"] {
        let (wasm, _) = build_scaffold(root.path(), lang, "exporter");
        let name = format!("my_{lang}_exporter");
        let mut e = load_exporter(&wasm, &name, r#"{"suffix": "/api/pipelines/main/samples"}"#)
            .unwrap_or_else(|e| panic!("{lang}: {e:#}"));
        for part in [&input[..], &input[1..3]] {
            let reqs = e.encode(part).unwrap().unwrap();
            assert_eq!(reqs.len(), 1, "{lang}");
            assert_eq!(reqs[0].content_type, "application/x-ndjson", "{lang}");
            assert_eq!(reqs[0].suffix, "/api/pipelines/main/samples", "{lang}");
            let text = std::str::from_utf8(&reqs[0].body).unwrap();
            assert!(text.ends_with('\n'), "{lang}: {text}");
            let got: Vec<Sample> = text
                .lines()
                .map(|l| match parse_line(l, 42) {
                    Ok(Line::Sample(s)) => s,
                    other => panic!("{lang}: {l:?}: {other:?}"),
                })
                .collect();
            assert_eq!(got, part, "{lang}: {text}");
        }
        assert!(e.encode(&[]).unwrap().unwrap().is_empty(), "{lang}");
        let err = format!(
            "{:#}",
            load_exporter(&wasm, &name, r#"{"suffix": 3}"#)
                .err()
                .expect("refused")
        );
        assert!(err.contains("`suffix`"), "{lang}: {err}");
    }
}

/// A sample as compared after the round trip: name, resource, unit, kind, value's bits,
/// timestamp, metadata (as a map: the receiver puts the resource's attributes first).
type Seen = (
    String,
    String,
    String,
    Kind,
    u64,
    i64,
    BTreeMap<String, String>,
);

fn seen(s: &Sample) -> Seen {
    let metadata = s
        .metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (
        s.name.to_string(),
        s.resource.to_string(),
        s.unit.to_string(),
        s.kind,
        s.value.to_bits(),
        s.timestamp_ns,
        metadata,
    )
}

/// What wasmon's OTLP receiver should make of `input` sent by the exporter: the samples, in
/// the order of their metrics (one per (name, unit, kind) in first-appearance order, points in
/// input order), each with the request's resource attributes (`host.name` as `hostname`)
/// under its metadata; the resource comes back from `wasmon.resource`.
fn expected(input: &[Sample]) -> Vec<Seen> {
    let mut groups: Vec<((String, String, Kind), Vec<Seen>)> = Vec::new();
    for s in input {
        let mut x = seen(s);
        x.6.entry("service.name".into()).or_insert("svc".into());
        x.6.entry("hostname".into()).or_insert("h9".into());
        let key = (x.0.clone(), x.2.clone(), x.3);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(x),
            None => groups.push((key, vec![x])),
        }
    }
    groups.into_iter().flat_map(|(_, v)| v).collect()
}

/// The Python `otlp` exporter: what it sends decodes through wasmon's OTLP receiver to the
/// samples it was given, and is byte for byte what the bundled Rust `otlp` exporter sends.
#[test]
fn python_otlp_exporter_decodes_through_wasmons_receiver_and_matches_the_rust_one() {
    let wasm = built("python", "otlp");
    let params = serde_json::json!({
        "resource": {"service.name": "svc", "host.name": "h9"},
        "suffix": "/v1/metrics",
    });
    let mut e = load_exporter(&wasm, "otlp", &params.to_string()).unwrap();
    let mut rust = load_exporter(&guest_path("otlp"), "otlp", &params.to_string()).unwrap();
    // Times after the epoch: OTLP's time is unsigned, and wasmon's receiver refuses 0 ("unset").
    let input: Vec<Sample> = batch()
        .into_iter()
        .enumerate()
        .map(|(i, mut s)| {
            if s.timestamp_ns <= 0 {
                s.timestamp_ns = 1_700_000_001_000_000_007 + i as i64;
            }
            s
        })
        .collect();
    let limits = Limits {
        max_samples: 1000,
        max_body: 1 << 20,
    };
    // The second batch reuses the string table the first one filled.
    for part in [&input[..], &input[2..]] {
        let reqs = e.encode(part).unwrap().unwrap();
        assert_eq!(reqs.len(), 1);
        assert_eq!(reqs[0].content_type, "application/x-protobuf");
        assert_eq!(reqs[0].suffix, "/v1/metrics");
        let d = decode_protobuf(&reqs[0].body, limits)
            .unwrap_or_else(|e| panic!("wasmon's OTLP decoder refused the body: {e}"));
        assert_eq!((d.rejected, d.no_value), (0, 0), "{}", d.error_message);
        let got: Vec<Seen> = d.samples.iter().map(seen).collect();
        assert_eq!(got, expected(part));
        let theirs = rust.encode(part).unwrap().unwrap();
        assert_eq!(theirs.len(), 1);
        assert!(
            theirs[0].body == reqs[0].body,
            "the Python and Rust otlp exporters differ:\npython {}\nrust   {}",
            hex::encode(&reqs[0].body),
            hex::encode(&theirs[0].body)
        );
    }
    assert!(e.encode(&[]).unwrap().unwrap().is_empty());
    let err = format!(
        "{:#}",
        load_exporter(&wasm, "otlp", r#"{"resource": {"a": 1}}"#)
            .err()
            .expect("refused")
    );
    assert!(err.contains("`resource.a`"), "{err}");
    let err = format!(
        "{:#}",
        load_exporter(&wasm, "otlp", r#"{"sufix": "/v1/metrics"}"#)
            .err()
            .expect("refused")
    );
    assert!(err.contains("unknown parameter `sufix`"), "{err}");
}

/// The acceptance's round trip, with the exporter written in Python: behind a sending
/// daemon's `[[sink]] type = "guest"`, into a receiving wasmon's OTLP route, every sample
/// arrives once and exact (the test the bundled Rust `otlp` passes, `export::`).
#[test]
fn python_otlp_exporter_round_trips_exactly_through_a_receiving_wasmon() {
    let wasm = built("python", "otlp");
    crate::export::round_trip(wasm.to_str().unwrap(), "/api/pipelines/p/otlp");
}
