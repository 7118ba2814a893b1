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
    ]
}

/// The JSON-lines scaffold in C, Python and JS (the Rust one is built with the Rust SDK's
/// exporter module): each line of its one request reads back as the sample it came from; the
/// string table carries over to a second batch; an empty batch sends nothing; a bad parameter
/// is refused, naming it.
#[test]
fn the_exporter_scaffolds_build_and_send_json_lines_that_read_back_exactly() {
    let root = tempfile::tempdir().unwrap();
    let input = batch();
    for lang in ["c", "python", "js"] {
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

/// What wasmon's OTLP receiver should make of `s` sent by the exporter: no resource (OTLP
/// points have none), the request's resource attributes (`host.name` as `hostname`) under
/// the sample's metadata and `wasmon.resource`.
type Seen = (String, String, Kind, u64, i64, BTreeMap<String, String>);

fn seen(s: &Sample) -> Seen {
    let metadata = s
        .metadata
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    (
        s.name.to_string(),
        s.unit.to_string(),
        s.kind,
        s.value.to_bits(),
        s.timestamp_ns,
        metadata,
    )
}

fn expected(input: &[Sample]) -> Vec<Seen> {
    // One metric per (name, unit, kind) in first-appearance order, points in input order.
    let mut groups: Vec<((String, String, Kind), Vec<Seen>)> = Vec::new();
    for s in input {
        let mut x = seen(s);
        x.5.insert("service.name".into(), "svc".into());
        x.5.insert("hostname".into(), "h9".into());
        if !s.resource.is_empty() {
            x.5.insert("wasmon.resource".into(), s.resource.to_string());
        }
        let key = (x.0.clone(), x.1.clone(), x.2);
        match groups.iter_mut().find(|(k, _)| *k == key) {
            Some((_, v)) => v.push(x),
            None => groups.push((key, vec![x])),
        }
    }
    groups.into_iter().flat_map(|(_, v)| v).collect()
}

#[test]
fn python_otlp_exporter_output_decodes_through_wasmons_otlp_receiver() {
    let wasm = built("python", "otlp");
    let params = serde_json::json!({
        "resource": {"service.name": "svc", "host.name": "h9"},
        "suffix": "/v1/metrics",
    });
    let mut e = load_exporter(&wasm, "otlp", &params.to_string()).unwrap();
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
        assert!(d.samples.iter().all(|s| s.resource.is_empty()));
        let got: Vec<Seen> = d.samples.iter().map(seen).collect();
        assert_eq!(got, expected(part));
    }
    assert!(e.encode(&[]).unwrap().unwrap().is_empty());
    let err = format!(
        "{:#}",
        load_exporter(&wasm, "otlp", r#"{"resource": {"a": 1}}"#)
            .err()
            .expect("refused")
    );
    assert!(err.contains("`resource`"), "{err}");
}
