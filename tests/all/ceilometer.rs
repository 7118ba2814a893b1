//! Ceilometer's transformer cases, run through the real guests (one component each).

use serde_json::{Value, json};
use wasmon::host::TransformerInstance;
use wasmon::sample::{Kind, Sample};

use crate::common::*;

fn arithmetic(expr: &str) -> anyhow::Result<TransformerInstance> {
    load(
        "arithmetic",
        json!({"target": {"name": "new_meter", "unit": "%", "type": "gauge", "expr": expr}}),
    )
}

/// Ceilometer's `_do_test_arithmetic`: the scenario's samples for each of two resources, each
/// published and followed by a flush (a flush emits and forgets only the resources that have
/// every meter). Returns the output per resource, checking name, unit and type on the way.
fn publish_then_flush(expr: &str, meters: &[(&str, f64)]) -> Vec<Vec<f64>> {
    let mut g = arithmetic(expr).unwrap();
    let resources = ["res1", "res2"];
    let mut out = Vec::new();
    for r in resources {
        for (i, (m, v)) in meters.iter().enumerate() {
            let s = with_kind(sample(m, r, *v, 100.0 + i as f64), Kind::Cumulative);
            assert!(
                g.handle(&[s]).unwrap().is_empty(),
                "arithmetic emits only at flush"
            );
            out.extend(g.flush().unwrap());
        }
    }
    for s in &out {
        assert_eq!(
            (&*s.name, &*s.unit, s.kind),
            ("new_meter", "%", Kind::Gauge)
        );
    }
    resources
        .iter()
        .map(|r| {
            out.iter()
                .filter(|s| &*s.resource == *r)
                .map(|s| s.value)
                .collect()
        })
        .collect()
}

fn both(v: &[f64]) -> Vec<Vec<f64>> {
    vec![v.to_vec(), v.to_vec()]
}

/// The values of `out`, in order.
fn values(out: Vec<Sample>) -> Vec<f64> {
    out.iter().map(|s| s.value).collect()
}

#[test]
fn arithmetic_memory_utilisation() {
    let out = publish_then_flush(
        "100.0 * $(memory.usage) / $(memory)",
        &[("memory", 1024.0), ("memory.usage", 512.0)],
    );
    assert_eq!(out, both(&[50.0]));
}

#[test]
fn arithmetic_configuration_errors() {
    let e = format!("{:#}", arithmetic("").err().expect("empty expr refused"));
    assert!(e.contains("expr"), "{e}");
    let e = format!(
        "{:#}",
        arithmetic("512.0 * 3").err().expect("no meter refused")
    );
    assert!(e.to_lowercase().contains("meter"), "{e}");
    let e = format!(
        "{:#}",
        arithmetic("$(memory) * (2 +")
            .err()
            .expect("parse error refused")
    );
    assert!(
        e.contains("at character 16"),
        "the position of the error is named: {e}"
    );
}

#[test]
fn arithmetic_nan_division_by_zero_and_missing_meters_give_nothing() {
    let m = [("memory", 1024.0), ("memory.usage", 512.0)];
    assert_eq!(
        publish_then_flush("float('nan') * $(memory.usage) / $(memory)", &m),
        both(&[])
    );
    assert_eq!(publish_then_flush("$(memory) / 0", &m), both(&[]));
    assert_eq!(
        publish_then_flush(
            "100.0 * $(memory.usage) / $(memory)",
            &[("memory.usage", 512.0)]
        ),
        both(&[])
    );
}

#[test]
fn arithmetic_complete_resources_are_emitted_at_the_first_flush_that_sees_them() {
    let cases: [(&[(&str, f64)], f64); 2] = [
        (
            &[
                ("memory", 2048.0),
                ("memory.usage", 512.0),
                ("memory", 1024.0),
            ],
            25.0,
        ),
        (
            &[
                ("memory", 1024.0),
                ("memory.usage", 512.0),
                ("cpu_util", 90.0),
            ],
            50.0,
        ),
    ];
    for (published, want) in cases {
        let out = publish_then_flush("100.0 * $(memory.usage) / $(memory)", published);
        assert_eq!(out, both(&[want]), "{published:?}");
    }
}

#[test]
fn arithmetic_later_samples_overwrite_until_flush() {
    let mut g = arithmetic("100.0 * $(memory.usage) / $(memory)").unwrap();
    for r in ["res1", "res2"] {
        let batch = [
            sample("memory", r, 2048.0, 1.0),
            sample("memory.usage", r, 512.0, 2.0),
            sample("memory", r, 1024.0, 3.0),
        ];
        assert!(g.handle(&batch).unwrap().is_empty());
    }
    assert_eq!(values(g.flush().unwrap()), vec![50.0, 50.0]);
}

#[test]
fn arithmetic_caches_until_flush_and_clears_after() {
    let mut g = arithmetic("$(memory.usage)+2").unwrap();
    for r in ["res1", "res2"] {
        assert!(
            g.handle(&[sample("memory.usage", r, 1024.0, 1.0)])
                .unwrap()
                .is_empty()
        );
    }
    assert_eq!(values(g.flush().unwrap()), vec![1026.0, 1026.0]);
    assert!(g.flush().unwrap().is_empty(), "nothing at a second flush");
    assert!(
        g.handle(&[sample("memory.usage", "res1", 2048.0, 2.0)])
            .unwrap()
            .is_empty()
    );
    let out = g.flush().unwrap();
    assert_eq!(values(out.clone()), vec![2050.0]);
    assert_eq!(
        out[0].timestamp_ns, 2_000_000_000,
        "timestamp of the latest input"
    );
}

#[test]
fn arithmetic_reaches_metadata_with_defaults() {
    let mut g = load(
        "arithmetic",
        json!({"target": {"name": "avg_cpu_per_core", "unit": "ns", "type": "cumulative",
                          "expr": "$(cpu) / ($(cpu).resource_metadata.cpu_number or 1)"}}),
    )
    .unwrap();
    let with4 = with_meta(sample("cpu", "h1", 400.0, 1.0), &[("cpu_number", "4")]);
    let without = sample("cpu", "h2", 400.0, 1.0);
    g.handle(&[with4, without]).unwrap();
    let mut out: Vec<(String, f64)> = g
        .flush()
        .unwrap()
        .iter()
        .map(|s| (s.resource.to_string(), s.value))
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    assert_eq!(out, vec![("h1".into(), 100.0), ("h2".into(), 400.0)]);
}

#[test]
fn arithmetic_meter_names_never_collide() {
    let mut g = arithmetic("$(a.b) * 10 + $(a_b) + $(class) * 0 + $(a-b) * 100").unwrap();
    g.handle(&[
        sample("a.b", "r", 1.0, 1.0),
        sample("a_b", "r", 2.0, 1.0),
        sample("class", "r", 5.0, 1.0),
        sample("a-b", "r", 3.0, 1.0),
    ])
    .unwrap();
    assert_eq!(values(g.flush().unwrap()), vec![312.0]);
}

#[test]
fn arithmetic_python_operators() {
    let v = |expr: &str| -> Vec<f64> {
        let mut g = arithmetic(expr).unwrap();
        g.handle(&[sample("x", "r", 3.0, 1.0)]).unwrap();
        values(g.flush().unwrap())
    };
    assert_eq!(v("-2**2 + $(x)"), vec![-1.0]);
    assert_eq!(v("2**3**2 + $(x) * 0"), vec![512.0]);
    assert_eq!(v("max($(x), 10) + min($(x), 1) + abs(-$(x))"), vec![14.0]);
    assert_eq!(v("($(x) + 1) * 2 % 5"), vec![3.0]);
}

fn rate(params: Value) -> TransformerInstance {
    load("rate_of_change", params).unwrap()
}

fn cpu(value: f64, ts: f64, cpus: &str) -> Sample {
    with_kind(
        with_meta(sample("cpu", "h1", value, ts), &[("cpu_number", cpus)]),
        Kind::Cumulative,
    )
}

const CPU_SCALE: &str = "100.0 / (10**9 * (resource_metadata.cpu_number or 1))";

#[test]
fn rate_of_change_cpu_utilisation() {
    for (cpus, want) in [("4", 25.0), ("2", 50.0)] {
        let mut g = rate(
            json!({"target": {"name": "cpu_util", "unit": "%", "type": "gauge", "scale": CPU_SCALE}}),
        );
        assert!(
            g.handle(&[cpu(120e9, 0.0, cpus)]).unwrap().is_empty(),
            "the first sample only primes"
        );
        let out = g.handle(&[cpu(180e9, 60.0, cpus)]).unwrap();
        assert_eq!(out.len(), 1);
        assert!(
            (out[0].value - want).abs() < 1e-9,
            "{cpus} cpus: {}",
            out[0].value
        );
        assert_eq!((&*out[0].name, &*out[0].unit), ("cpu_util", "%"));
    }
}

#[test]
fn rate_of_change_reset_clamp_and_order() {
    let mut g = rate(
        json!({"target": {"name": "cpu_util", "unit": "%", "type": "gauge", "scale": CPU_SCALE, "max": 100}}),
    );
    g.handle(&[cpu(125e9, 0.0, "1")]).unwrap();
    let out = g.handle(&[cpu(165e9, 10.0, "1")]).unwrap();
    assert_eq!(
        out.iter().map(|s| s.value).collect::<Vec<_>>(),
        vec![100.0],
        "400% clamped to max"
    );

    let mut g = rate(
        json!({"target": {"name": "cpu_util", "unit": "%", "type": "gauge", "scale": CPU_SCALE}}),
    );
    g.handle(&[cpu(100e9, 0.0, "1")]).unwrap();
    // The counter fell: a reset, so the new value itself is the growth since the reset.
    let out = g.handle(&[cpu(5e9, 10.0, "1")]).unwrap();
    assert_eq!(out.len(), 1);
    assert!((out[0].value - 50.0).abs() < 1e-9, "{}", out[0].value);
    assert!(
        g.handle(&[cpu(6e9, 5.0, "1")]).unwrap().is_empty(),
        "out of order dropped"
    );
    let out = g.handle(&[cpu(7e9, 10.0, "1")]).unwrap();
    assert_eq!(
        out.iter().map(|s| s.value).collect::<Vec<_>>(),
        vec![0.0],
        "zero time delta gives 0.0"
    );
}

#[test]
fn arithmetic_reaches_nested_json_metadata_as_ceilometer_sends_it() {
    // OpenStack's resource_metadata nests objects; the JSON-lines input flattens them to
    // dotted keys, so the expression reaches the value instead of taking its `or` default.
    let line = r#"{"name":"cpu","resource":"vm1","value":10,
        "metadata":{"user_metadata":{"autoscaling_weight":2.5}}}"#
        .replace('\n', "");
    let wasmon::sample::Line::Sample(s) = wasmon::sample::parse_line(&line, 1_000_000_000).unwrap()
    else {
        panic!("a sample")
    };
    let mut g =
        arithmetic("$(cpu) * ($(cpu).resource_metadata.user_metadata.autoscaling_weight or 1)")
            .unwrap();
    assert!(g.handle(&[s]).unwrap().is_empty());
    let out = g.flush().unwrap();
    assert_eq!(out.iter().map(|s| s.value).collect::<Vec<_>>(), [25.0]);
}
