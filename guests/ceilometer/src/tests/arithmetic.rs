//! `arithmetic`: Ceilometer's `test_arithmetic_*` cases (each run for two resources) and the
//! wasmon acceptance cases.

use serde_json::json;
use wasmon_guest::{Kind, Sample};

use super::*;
use crate::Arithmetic;

const RESOURCES: [&str; 2] = ["test_resource1", "test_resource2"];

fn target(expr: &str) -> Arithmetic {
    configure(json!({"target": {"name": "new_meter", "unit": "%", "type": "gauge", "expr": expr}}))
}

/// Ceilometer's `_do_test_arithmetic`: for each resource, each scenario sample in turn; with
/// `flush_each` the pipeline is flushed after every sample, as Ceilometer's harness does,
/// else all are published and then flushed once. Returns each resource's output volumes and
/// checks the fixed fields.
fn run(expr: &str, scenario: &[(&str, f64)], flush_each: bool) -> Vec<Vec<f64>> {
    let mut t = target(expr);
    let mut out = Vec::new();
    let mut ts = T0;
    for r in RESOURCES {
        for (name, volume) in scenario {
            ts += SEC;
            let s = Sample::new(name, r, Kind::Cumulative, *volume, ts).with_unit("ns");
            out.extend(handle(&mut t, vec![s]));
            if flush_each {
                out.extend(flush(&mut t));
            }
        }
    }
    out.extend(flush(&mut t));
    RESOURCES
        .iter()
        .map(|r| {
            out.iter()
                .filter(|s| &*s.resource == *r)
                .map(|s| {
                    assert_eq!(
                        (&*s.name, &*s.unit, s.kind),
                        ("new_meter", "%", Kind::Gauge)
                    );
                    s.value
                })
                .collect()
        })
        .collect()
}

/// Both harnesses, expecting the same result from each.
fn check(expr: &str, scenario: &[(&str, f64)], expected: &[f64]) {
    for flush_each in [true, false] {
        let got = run(expr, scenario, flush_each);
        assert_eq!(
            got,
            [expected, expected],
            "{expr} (flush after each sample: {flush_each})"
        );
    }
}

const MEMORY: [(&str, f64); 2] = [("memory", 1024.0), ("memory.usage", 512.0)];

#[test]
fn memory_util() {
    check("100.0 * $(memory.usage) / $(memory)", &MEMORY, &[50.0]);
}

#[test]
fn empty_expression_is_a_config_error() {
    let e = configure_err::<Arithmetic>(json!({"target": {"name": "new_meter", "expr": ""}}));
    assert!(e.contains("empty"), "{e}");
    let e = configure_err::<Arithmetic>(json!({"target": {"name": "new_meter", "expr": "  "}}));
    assert!(e.contains("empty"), "{e}");
    let e = configure_err::<Arithmetic>(json!({"target": {"name": "new_meter"}}));
    assert!(e.contains("required"), "{e}");
}

#[test]
fn expression_without_meters_is_a_config_error() {
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "512.0 * 3"}}));
    assert!(e.contains("no meter") && e.contains("$(meter)"), "{e}");
}

#[test]
fn nan_yields_nothing() {
    check("float('nan') * $(memory.usage) / $(memory)", &MEMORY, &[]);
}

#[test]
fn infinity_yields_nothing() {
    check("float('inf') * $(memory.usage) / $(memory)", &MEMORY, &[]);
}

#[test]
fn division_by_zero_yields_nothing() {
    check("$(memory) / 0", &MEMORY, &[]);
}

#[test]
fn multiple_samples() {
    let scenario = [
        ("memory", 2048.0),
        ("memory.usage", 512.0),
        ("memory", 1024.0),
    ];
    let expr = "100.0 * $(memory.usage) / $(memory)";
    // Ceilometer flushes after every sample: the result is computed with memory=2048 as soon
    // as usage arrives; memory=1024 then waits alone for a usage sample.
    assert_eq!(run(expr, &scenario, true), [[25.0], [25.0]]);
    // Published together, the later memory sample replaces the earlier one.
    assert_eq!(run(expr, &scenario, false), [[50.0], [50.0]]);
}

#[test]
fn missing_meter_yields_nothing() {
    check(
        "100.0 * $(memory.usage) / $(memory)",
        &[("memory.usage", 512.0)],
        &[],
    );
}

#[test]
fn unrelated_meters_are_ignored() {
    let scenario = [
        ("memory", 1024.0),
        ("memory.usage", 512.0),
        ("cpu_util", 90.0),
    ];
    check("100.0 * $(memory.usage) / $(memory)", &scenario, &[50.0]);
}

#[test]
fn cache_is_cleared_at_flush() {
    let mut t: Arithmetic =
        configure(json!({"target": {"name": "new_meter", "expr": "$(memory.usage) + 2"}}));
    let s = Sample::new("memory.usage", "test_resource", Kind::Gauge, 1024.0, T0).with_unit("MB");
    assert!(handle(&mut t, vec![s.clone()]).is_empty());
    let out = flush(&mut t);
    assert_eq!(volumes(&out), [1026.0]);
    // Name from the target; unit and type from the sample, metadata too.
    assert_eq!(
        (&*out[0].name, &*out[0].unit, out[0].kind),
        ("new_meter", "MB", Kind::Gauge)
    );
    assert!(flush(&mut t).is_empty());
    let s2 = Sample {
        value: 2048.0,
        timestamp_ns: T0 + SEC,
        ..s
    };
    assert!(handle(&mut t, vec![s2]).is_empty());
    assert_eq!(volumes(&flush(&mut t)), [2050.0]);
}

#[test]
fn incomplete_resources_wait_for_a_later_flush() {
    let mut t = target("$(a) - $(b)");
    handle(&mut t, vec![Sample::new("a", "r1", Kind::Gauge, 10.0, T0)]);
    assert!(flush(&mut t).is_empty());
    handle(
        &mut t,
        vec![Sample::new("b", "r1", Kind::Gauge, 3.0, T0 + SEC)],
    );
    assert_eq!(volumes(&flush(&mut t)), [7.0]);
    assert!(flush(&mut t).is_empty());
}

#[test]
fn metadata_access() {
    let expr = "$(cpu) / ($(cpu).resource_metadata.cpu_number or 1)";
    let mut t = target(expr);
    let cpu = |r: &str, meta: &[(&str, &str)]| {
        Sample::new("cpu", r, Kind::Cumulative, 8e9, T0).with_metadata(meta)
    };
    let input = vec![
        cpu("four", &[("cpu_number", "4")]),
        cpu("none", &[]),
        cpu("zero", &[("cpu_number", "0")]),
        cpu("text", &[("cpu_number", "many")]),
    ];
    handle(&mut t, input);
    let out = flush(&mut t);
    let got: Vec<(&str, f64)> = out.iter().map(|s| (&*s.resource, s.value)).collect();
    // "many" is not a number: a warning and no sample, the others in first-seen order.
    assert_eq!(got, [("four", 2e9), ("none", 8e9), ("zero", 8e9)]);
    assert_eq!(out[0].metadata.get("cpu_number"), Some("4"));

    // Without `or`, a missing key is an evaluation error.
    let mut t = target("$(cpu) / $(cpu).resource_metadata.cpu_number");
    handle(
        &mut t,
        vec![cpu("none", &[]), cpu("four", &[("cpu_number", "4")])],
    );
    assert_eq!(volumes(&flush(&mut t)), [2e9]);
}

#[test]
fn sample_fields_are_reachable() {
    let mut t = target("$(a).volume * (1 if $(a).unit == 'B' else 0) + $(b).timestamp - 100");
    handle(
        &mut t,
        vec![
            Sample::new("a", "r", Kind::Gauge, 5.0, 0).with_unit("B"),
            Sample::new("b", "r", Kind::Gauge, 0.0, 100 * SEC),
        ],
    );
    assert_eq!(volumes(&flush(&mut t)), [5.0]);
}

#[test]
fn awkward_meter_names_never_collide() {
    let mut t = target("$(a-b) + $(class) * 10 + $(a.b) * 100 + $(a_b) * 1000");
    let input = [("a-b", 1.0), ("class", 2.0), ("a.b", 3.0), ("a_b", 4.0)]
        .iter()
        .map(|(n, v)| Sample::new(n, "r", Kind::Gauge, *v, T0))
        .collect();
    handle(&mut t, input);
    assert_eq!(volumes(&flush(&mut t)), [4321.0]);
}

#[test]
fn python_operators() {
    let mut t =
        target("-2**2 * $(m) + 7 // 2 + -7 % 3 + 10**9 / 1e9 + max(1, abs(-4)) + round(2.5)");
    handle(&mut t, vec![Sample::new("m", "r", Kind::Gauge, 1.0, T0)]);
    // -4 + 3 + 2 + 1 + 4 + 2
    assert_eq!(volumes(&flush(&mut t)), [8.0]);
}

#[test]
fn output_fields() {
    // Defaults come from the first meter named; time is the newest of the samples used.
    let mut t: Arithmetic = configure(json!({"target": {"expr": "$(b) + $(a)"}}));
    handle(
        &mut t,
        vec![
            Sample::new("a", "r", Kind::Gauge, 1.0, T0 + 5 * SEC).with_unit("x"),
            Sample::new("b", "r", Kind::Delta, 2.0, T0)
                .with_unit("y")
                .with_metadata(&[("k", "v")]),
        ],
    );
    let out = flush(&mut t);
    assert_eq!(out.len(), 1);
    let s = &out[0];
    assert_eq!(
        (&*s.name, &*s.unit, s.kind, &*s.resource),
        ("b", "y", Kind::Delta, "r")
    );
    assert_eq!((s.value, s.timestamp_ns), (3.0, T0 + 5 * SEC));
    assert_eq!(s.metadata.get("k"), Some("v"));
}

#[test]
fn top_level_keys_are_accepted() {
    let mut t: Arithmetic =
        configure(json!({"name": "x2", "unit": "u", "type": "delta", "expr": "$(m) * 2"}));
    handle(&mut t, vec![Sample::new("m", "r", Kind::Gauge, 4.0, T0)]);
    let out = flush(&mut t);
    assert_eq!(
        (&*out[0].name, &*out[0].unit, out[0].kind, out[0].value),
        ("x2", "u", Kind::Delta, 8.0)
    );
}

#[test]
fn parse_errors_name_the_position() {
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "100 * $(memory"}}));
    assert!(
        e.contains("at character 14") && e.contains("expected ')'"),
        "{e}"
    );
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "100 * * $(memory)"}}));
    assert!(
        e.contains("at character 6") && e.contains("expected an operand"),
        "{e}"
    );
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "$(a) +"}}));
    assert!(
        e.contains("at character 6") && e.contains("end of the expression"),
        "{e}"
    );
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "$(a) $(b)"}}));
    assert!(e.contains("at character 5"), "{e}");
    let e = configure_err::<Arithmetic>(json!({"target": {"expr": "$(a)", "type": "counter"}}));
    assert!(e.contains("target.type"), "{e}");
}
