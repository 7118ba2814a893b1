//! `delta`: Ceilometer's `test_delta_transformer*` cases.

use serde_json::json;
use wasmon_guest::{Kind, Sample};

use super::*;
use crate::Delta;

fn cpu(volume: f64, ts: i64, version: &str) -> Sample {
    Sample::new("cpu", "test_resource", Kind::Cumulative, volume, ts)
        .with_unit("ns")
        .with_metadata(&[("version", version)])
}

fn run(input: Vec<Sample>, growth_only: bool) -> Vec<Sample> {
    let mut t: Delta =
        configure(json!({"target": {"name": "new_meter"}, "growth_only": growth_only}));
    let mut out = handle(&mut t, input);
    out.extend(flush(&mut t));
    for s in &out {
        assert_eq!(
            (&*s.name, s.kind, &*s.unit, &*s.resource),
            ("new_meter", Kind::Delta, "ns", "test_resource")
        );
    }
    out
}

#[test]
fn delta_transformer() {
    let out = run(
        vec![
            cpu(26.0, T0, "1.0"),
            cpu(16.0, T0 + SEC, "2.0"),
            cpu(53.0, T0 + 2 * SEC, "1.0"),
        ],
        false,
    );
    assert_eq!(volumes(&out), [-10.0, 37.0]);
    assert_eq!(out[0].metadata.get("version"), Some("2.0"));
    assert_eq!(out[1].metadata.get("version"), Some("1.0"));
    assert_eq!(out[1].timestamp_ns, T0 + 2 * SEC);
}

#[test]
fn out_of_order_sample_is_dropped() {
    let out = run(
        vec![
            cpu(26.0, T0, "1.0"),
            cpu(16.0, T0 - 300 * SEC, "2.0"),
            cpu(53.0, T0 + SEC, "1.0"),
        ],
        false,
    );
    assert_eq!(volumes(&out), [27.0]);
    assert_eq!(out[0].metadata.get("version"), Some("1.0"));
}

#[test]
fn growth_only() {
    let out = run(
        vec![
            cpu(26.0, T0, "1.0"),
            cpu(16.0, T0 + SEC, "2.0"),
            cpu(53.0, T0 + 2 * SEC, "1.0"),
        ],
        true,
    );
    // The dropped negative delta still moved the reference to 16.
    assert_eq!(volumes(&out), [37.0]);
}

#[test]
fn first_sample_per_series_is_dropped() {
    let mut t: Delta = configure(json!({}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("a", "r1", Kind::Cumulative, 1.0, T0),
            Sample::new("a", "r2", Kind::Cumulative, 5.0, T0),
            Sample::new("b", "r1", Kind::Cumulative, 9.0, T0),
            Sample::new("a", "r1", Kind::Cumulative, 4.0, T0 + SEC),
            Sample::new("a", "r2", Kind::Cumulative, 5.0, T0 + SEC),
        ],
    );
    let got: Vec<_> = out
        .iter()
        .map(|s| (&*s.name, &*s.resource, s.value))
        .collect();
    assert_eq!(got, [("a", "r1", 3.0), ("a", "r2", 0.0)]);
}

#[test]
fn name_mapping() {
    let mut t: Delta = configure(json!({
        "source": {"map_from": {"name": "(.*)\\.total"}},
        "target": {"map_to": {"name": "\\1.delta"}},
    }));
    let out = handle(
        &mut t,
        vec![
            Sample::new("net.total", "r", Kind::Cumulative, 1.0, T0),
            Sample::new("net.total", "r", Kind::Cumulative, 3.0, T0 + SEC),
        ],
    );
    assert_eq!(&*out[0].name, "net.delta");
}

#[test]
fn growth_only_must_be_boolean() {
    let e = configure_err::<Delta>(json!({"growth_only": 3}));
    assert!(e.contains("growth_only"), "{e}");
}
