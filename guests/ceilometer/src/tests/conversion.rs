//! `unit_conversion`: Ceilometer's `test_global_unit_conversion` and
//! `test_unit_identified_source_unit_conversion`, plus renaming and parameter handling.

use serde_json::json;
use wasmon_guest::{Kind, Sample};

use super::*;
use crate::UnitConversion;

#[test]
fn global_unit_conversion() {
    let mut t: UnitConversion = configure(json!({
        "source": {},
        "target": {"name": "cpu_mins", "unit": "min", "scale": "volume / ((10**6) * 60)"},
    }));
    let s = Sample::new(
        "cpu",
        "test_resource",
        Kind::Cumulative,
        1_200_000_000.0,
        T0,
    )
    .with_unit("ns")
    .with_metadata(&[("k", "v")]);
    let out = handle(&mut t, vec![s]);
    assert!(flush(&mut t).is_empty());
    assert_eq!(out.len(), 1);
    let c = &out[0];
    assert_eq!(
        (&*c.name, &*c.unit, c.kind, c.value),
        ("cpu_mins", "min", Kind::Cumulative, 20.0)
    );
    assert_eq!((&*c.resource, c.timestamp_ns), ("test_resource", T0));
    assert_eq!(c.metadata.get("k"), Some("v"));
}

#[test]
fn unit_identified_source_unit_conversion() {
    let mut t: UnitConversion = configure(json!({
        "source": {"unit": "°C"},
        "target": {"unit": "°F", "scale": "(volume * 1.8) + 32"},
    }));
    let out = handle(
        &mut t,
        vec![
            Sample::new("core_temperature", "r", Kind::Gauge, 36.0, T0).with_unit("°C"),
            Sample::new("ambient_temperature", "r", Kind::Gauge, 88.8, T0).with_unit("°F"),
        ],
    );
    let got: Vec<_> = out.iter().map(|s| (&*s.name, &*s.unit)).collect();
    assert_eq!(
        got,
        [("core_temperature", "°F"), ("ambient_temperature", "°F")]
    );
    assert!((out[0].value - 96.8).abs() < 1e-9);
    // The sample in another unit passed through untouched.
    assert_eq!(out[1].value, 88.8);
}

#[test]
fn numeric_scale_and_type_and_max() {
    let mut t: UnitConversion =
        configure(json!({"target": {"scale": 0.5, "type": "gauge", "max": 10}}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("m", "r", Kind::Delta, 8.0, T0),
            Sample::new("m", "r", Kind::Delta, 80.0, T0),
        ],
    );
    assert_eq!(volumes(&out), [4.0, 10.0]);
    assert!(out.iter().all(|s| s.kind == Kind::Gauge && &*s.name == "m"));
}

#[test]
fn without_scale_the_volume_is_kept() {
    let mut t: UnitConversion = configure(json!({"name": "renamed"}));
    let out = handle(
        &mut t,
        vec![Sample::new("m", "r", Kind::Gauge, 3.0, T0).with_unit("B")],
    );
    assert_eq!(
        (&*out[0].name, &*out[0].unit, out[0].value),
        ("renamed", "B", 3.0)
    );
}

#[test]
fn regex_rename_with_backreferences() {
    let mut t: UnitConversion = configure(json!({
        "source": {"map_from": {"name": "disk\\.(read|write)\\.bytes", "unit": "B"}},
        "target": {"map_to": {"name": "disk.\\1.kilobytes", "unit": "KB"}, "scale": "volume / 1024"},
    }));
    let out = handle(
        &mut t,
        vec![
            Sample::new("disk.read.bytes", "r", Kind::Cumulative, 2048.0, T0).with_unit("B"),
            Sample::new("disk.write.bytes", "r", Kind::Cumulative, 1024.0, T0).with_unit("B"),
            // re.sub leaves a non-matching name as it is.
            Sample::new("network.incoming.bytes", "r", Kind::Cumulative, 512.0, T0).with_unit("B"),
        ],
    );
    let got: Vec<_> = out.iter().map(|s| (&*s.name, &*s.unit, s.value)).collect();
    assert_eq!(
        got,
        [
            ("disk.read.kilobytes", "KB", 2.0),
            ("disk.write.kilobytes", "KB", 1.0),
            ("network.incoming.bytes", "KB", 0.5),
        ]
    );
}

#[test]
fn scale_errors_drop_the_sample() {
    let mut t: UnitConversion =
        configure(json!({"target": {"scale": "volume * resource_metadata.factor"}}));
    let out = handle(
        &mut t,
        vec![
            Sample::new("m", "r", Kind::Gauge, 2.0, T0),
            Sample::new("m", "r", Kind::Gauge, 2.0, T0).with_metadata(&[("factor", "3")]),
        ],
    );
    assert_eq!(volumes(&out), [6.0]);
}

#[test]
fn config_errors_name_the_parameter() {
    let e = configure_err::<UnitConversion>(json!({"target": {"scale": "volume *"}}));
    assert!(
        e.contains("target.scale") && e.contains("at character 8"),
        "{e}"
    );
    let e = configure_err::<UnitConversion>(json!({"target": {"scale": "$(cpu) * 2"}}));
    assert!(e.contains("at character 0"), "{e}");
    let e = configure_err::<UnitConversion>(json!({"target": {"scale": [1]}}));
    assert!(e.contains("target.scale"), "{e}");
    let e = configure_err::<UnitConversion>(json!({"target": "x"}));
    assert!(e.contains("target"), "{e}");
    let e = configure_err::<UnitConversion>(json!({
        "source": {"map_from": {"name": "(a"}}, "target": {"map_to": {"name": "b"}},
    }));
    assert!(e.contains("map_from.name"), "{e}");
    let e = configure_err::<UnitConversion>(json!({
        "source": {"map_from": {"name": "(a)"}}, "target": {"map_to": {"name": "\\2"}},
    }));
    assert!(e.contains("group 2"), "{e}");
}
