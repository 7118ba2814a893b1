//! `rate_of_change`: Ceilometer's `test_rate_of_change_*` cases and the wasmon acceptance
//! cases.

use serde_json::json;
use wasmon_guest::{Kind, Sample};

use super::*;
use crate::{Aggregator, RateOfChange};

const CPU_UTIL: &str = "100.0 / (10**9 * (resource_metadata.cpu_number or 1))";

fn cpu(resource: &str, kind: Kind, volume: f64, ts: i64, cpus: &str) -> Sample {
    Sample::new("cpu", resource, kind, volume, ts)
        .with_unit("ns")
        .with_metadata(&[("cpu_number", cpus)])
}

/// Ceilometer's `_do_test_rate_of_change_conversion`: two resources with 4 and 2 CPUs, a
/// sample each at `now` and `offset_s` later; the second gets twice the first's rate.
fn conversion(
    prev: f64,
    curr: f64,
    kind: Kind,
    expected: f64,
    offset_s: i64,
    weight: Option<&str>,
) {
    let scale = "(resource_metadata.user_metadata.autoscaling_weight or 1.0)\
                 * (resource_metadata.non.existent or 1.0)\
                 * (100.0 / (10**9 * (resource_metadata.cpu_number or 1)))";
    let mut t: RateOfChange = configure(json!({
        "source": {},
        "target": {"name": "cpu_util", "unit": "%", "type": "gauge", "scale": scale},
    }));
    let s = |r: &str, v: f64, ts: i64, cpus: &str| {
        let mut meta = vec![("cpu_number", cpus)];
        if let Some(w) = weight {
            meta.push(("user_metadata.autoscaling_weight", w));
        }
        Sample::new("cpu", r, kind, v, ts)
            .with_unit("ns")
            .with_metadata(&meta)
    };
    let later = T0 + offset_s * SEC;
    let input = vec![
        s("test_resource", prev, T0, "4"),
        s("test_resource2", prev, T0, "2"),
        s("test_resource", curr, later, "4"),
        s("test_resource2", curr, later, "2"),
    ];
    let out = handle(&mut t, input);
    assert!(flush(&mut t).is_empty());
    assert_eq!(out.len(), 2);
    for (s, (r, v)) in out.iter().zip([
        ("test_resource", expected),
        ("test_resource2", expected * 2.0),
    ]) {
        assert_eq!(
            (&*s.name, &*s.resource, &*s.unit, s.kind),
            ("cpu_util", r, "%", Kind::Gauge)
        );
        assert_eq!(s.value, v);
        assert_eq!(s.timestamp_ns, later);
    }
}

#[test]
fn rate_of_change_conversion() {
    conversion(120e9, 180e9, Kind::Cumulative, 25.0, 60, None);
}

#[test]
fn rate_of_change_conversion_weight() {
    conversion(120e9, 180e9, Kind::Cumulative, 27.5, 60, Some("1.1"));
}

#[test]
fn falling_cumulative_counter_is_a_reset() {
    conversion(180e9, 120e9, Kind::Cumulative, 50.0, 60, None);
}

#[test]
fn falling_gauge_is_a_negative_rate() {
    conversion(180e9, 120e9, Kind::Gauge, -25.0, 60, None);
}

#[test]
fn zero_time_delta_gives_zero() {
    conversion(120e9, 120e9, Kind::Cumulative, 0.0, 0, None);
}

fn cpu_util(extra: serde_json::Value) -> RateOfChange {
    let mut target = json!({"name": "cpu_util", "unit": "%", "type": "gauge", "scale": CPU_UTIL});
    target
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().unwrap().clone());
    configure(json!({"source": {}, "target": target}))
}

#[test]
fn acceptance_two_cpus() {
    let mut t = cpu_util(json!({}));
    let out = handle(
        &mut t,
        vec![
            cpu("r", Kind::Cumulative, 120e9, T0, "2"),
            cpu("r", Kind::Cumulative, 180e9, T0 + 60 * SEC, "2"),
        ],
    );
    assert_eq!(volumes(&out), [50.0]);
}

#[test]
fn first_sample_has_no_predecessor() {
    let mut t = cpu_util(json!({}));
    assert!(handle(&mut t, vec![cpu("r", Kind::Cumulative, 120e9, T0, "4")]).is_empty());
    assert!(flush(&mut t).is_empty());
}

#[test]
fn max_clamps() {
    let mut t = cpu_util(json!({"max": 100}));
    let out = handle(
        &mut t,
        vec![
            cpu("r", Kind::Cumulative, 125e9, T0, "4"),
            cpu("r", Kind::Cumulative, 165e9 + 12345.0, T0 + 10 * SEC, "4"),
        ],
    );
    assert_eq!(volumes(&out), [100.0]);
}

#[test]
fn out_of_order_sample_is_dropped() {
    let mut t = cpu_util(json!({}));
    let out = handle(
        &mut t,
        vec![
            cpu("r", Kind::Cumulative, 125e9, T0, "4"),
            cpu("r", Kind::Cumulative, 120e9, T0 - 10 * SEC, "4"),
            cpu("r", Kind::Cumulative, 130e9, T0 + 10 * SEC, "4"),
        ],
    );
    assert!(flush(&mut t).is_empty());
    assert_eq!(volumes(&out), [12.5]);
}

#[test]
fn meters_of_one_resource_are_rated_separately() {
    let mut t: RateOfChange = configure(json!({}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("a", "r", Kind::Cumulative, 10.0, T0),
            Sample::new("b", "r", Kind::Cumulative, 1000.0, T0),
            Sample::new("a", "r", Kind::Cumulative, 30.0, T0 + 10 * SEC),
        ],
    );
    assert_eq!(volumes(&out), [2.0]);
    // Defaults: name and unit kept, type gauge.
    assert_eq!((&*out[0].name, out[0].kind), ("a", Kind::Gauge));
}

#[test]
fn numeric_scale_is_a_factor() {
    let mut t: RateOfChange = configure(json!({"target": {"scale": 8}}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("bytes", "r", Kind::Cumulative, 0.0, T0),
            Sample::new("bytes", "r", Kind::Cumulative, 100.0, T0 + 10 * SEC),
        ],
    );
    assert_eq!(volumes(&out), [80.0]);
}

#[test]
fn scale_errors_drop_the_sample() {
    let mut t: RateOfChange = configure(json!({"target": {"scale": "1 / resource_metadata.cpus"}}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("cpu", "r", Kind::Cumulative, 0.0, T0),
            Sample::new("cpu", "r", Kind::Cumulative, 10.0, T0 + SEC),
            Sample::new("cpu", "r", Kind::Cumulative, 20.0, T0 + 2 * SEC)
                .with_metadata(&[("cpus", "2")]),
        ],
    );
    // The failed sample still became the reference for the next one.
    assert_eq!(volumes(&out), [5.0]);
}

/// Ceilometer's `_do_test_rate_of_change_mapping`.
#[test]
fn rate_of_change_mapping() {
    let mut t: RateOfChange = configure(json!({
        "source": {"map_from": {"name": "disk\\.(read|write)\\.(bytes|requests)", "unit": "(B|request)"}},
        "target": {"map_to": {"name": "disk.\\1.\\2.rate", "unit": "\\1/s"}, "type": "gauge"},
    }));
    let (base, offset, rate) = (1000.0, 7, 42.0);
    let later = T0 + offset * 60 * SEC;
    let mut input = Vec::new();
    for (v, ts) in [(base, T0), (base + (offset * 60) as f64 * rate, later)] {
        for (n, u, r) in [
            ("disk.read.bytes", "B", "resource1"),
            ("disk.write.requests", "request", "resource2"),
        ] {
            input.push(Sample::new(n, r, Kind::Cumulative, v, ts).with_unit(u));
        }
    }
    let out = handle(&mut t, input);
    assert!(flush(&mut t).is_empty());
    let got: Vec<_> = out
        .iter()
        .map(|s| (&*s.name, &*s.resource, &*s.unit, s.kind, s.value))
        .collect();
    assert_eq!(
        got,
        [
            (
                "disk.read.bytes.rate",
                "resource1",
                "B/s",
                Kind::Gauge,
                rate
            ),
            (
                "disk.write.requests.rate",
                "resource2",
                "request/s",
                Kind::Gauge,
                rate
            ),
        ]
    );
}

/// Ceilometer's `test_aggregator_to_rate_of_change_transformer_two_resources`.
#[test]
fn aggregator_into_rate_of_change_two_resources() {
    let ids = [
        "1ca738a1-c49c-4401-8346-5c60ebdb03f4",
        "5dd418a6-c6a9-49c9-9cef-b357d72c71dd",
    ];
    let mut agg: Aggregator = configure(json!({"size": "2", "timestamp": "last"}));
    let mut rate: RateOfChange = configure(json!({}));
    let counter =
        |r: &str, v: f64, ts: i64| Sample::new("a", r, Kind::Cumulative, v, ts).with_unit("ns");

    let mut ts = T0;
    let mut out = Vec::new();
    for v in 0..2 {
        out.extend(handle(&mut agg, vec![counter(ids[0], v as f64, ts)]));
        ts += SEC;
    }
    out.extend(flush(&mut agg));
    assert_eq!(out.len(), 1);
    assert_eq!(out[0].timestamp_ns, T0 + SEC);
    assert!(handle(&mut rate, out).is_empty());

    let mut out = Vec::new();
    for id in ids {
        out.extend(handle(&mut agg, vec![counter(id, 2.0, ts)]));
        ts += SEC;
    }
    out.extend(flush(&mut agg));
    assert_eq!(out.len(), 2);
    let first: Vec<Sample> = out.into_iter().filter(|s| &*s.resource == ids[0]).collect();
    assert_eq!(first[0].timestamp_ns, T0 + 2 * SEC);
    assert_eq!(volumes(&handle(&mut rate, first)), [1.0]);
}
