//! `aggregator`: Ceilometer's `test_aggregator_*` (pipeline) and `AggregatorTransformerTestCase`
//! cases. wasmon samples have no user or project, so the cases that split series by them are
//! expressed with resources instead, and the policy cases check the single merged series.

use std::cell::Cell;

use serde_json::json;
use wasmon_guest::{Kind, Sample};

use super::*;
use crate::Aggregator;

thread_local! {
    static NOW: Cell<i64> = const { Cell::new(T0) };
}

fn fake_now() -> i64 {
    NOW.with(Cell::get)
}

fn aggregator(p: serde_json::Value) -> Aggregator {
    NOW.with(|n| n.set(T0));
    configure::<Aggregator>(p).with_clock(fake_now)
}

/// Ceilometer's `_do_test_aggregator` samples: one meter and resource, six deltas, metadata
/// versions 1.0, 2.0, 1.0, 2.0, 2.0, 3.0.
fn six_deltas() -> Vec<Sample> {
    [
        (26.0, "1.0"),
        (16.0, "2.0"),
        (53.0, "1.0"),
        (42.0, "2.0"),
        (15.0, "2.0"),
        (2.0, "3.0"),
    ]
    .iter()
    .enumerate()
    .map(|(i, (v, version))| {
        Sample::new(
            "storage.objects.incoming.bytes",
            "test_resource",
            Kind::Delta,
            *v,
            T0 + i as i64,
        )
        .with_unit("B")
        .with_metadata(&[("version", version)])
    })
    .collect()
}

fn aggregate_six(p: serde_json::Value) -> Sample {
    let mut t = aggregator(p);
    let mut out = handle(&mut t, six_deltas());
    out.extend(flush(&mut t));
    assert_eq!(out.len(), 1);
    let s = out.pop().unwrap();
    assert_eq!(
        (&*s.name, s.value, s.kind, &*s.unit),
        ("aggregated-bytes", 154.0, Kind::Delta, "B")
    );
    s
}

#[test]
fn metadata_policies() {
    for (policy, version) in [
        ("last", Some("3.0")),
        ("first", Some("1.0")),
        ("drop", None),
    ] {
        let s = aggregate_six(
            json!({"resource_metadata": policy, "user_id": "first", "project_id": "last", "target": {"name": "aggregated-bytes"}}),
        );
        assert_eq!(s.metadata.get("version"), version, "{policy}");
        if version.is_none() {
            assert!(s.metadata.is_empty());
        }
    }
}

#[test]
fn metadata_default_and_invalid_mean_last() {
    for p in [
        json!({"user_id": "last", "project_id": "last", "target": {"name": "aggregated-bytes"}}),
        json!({"resource_metadata": "invalid", "target": {"name": "aggregated-bytes"}}),
    ] {
        assert_eq!(aggregate_six(p).metadata.get("version"), Some("3.0"));
    }
}

#[test]
fn timestamp_policies() {
    for (p, ts) in [
        (json!({"target": {"name": "aggregated-bytes"}}), T0),
        (
            json!({"timestamp": "first", "target": {"name": "aggregated-bytes"}}),
            T0,
        ),
        (
            json!({"timestamp": "invalid_option", "target": {"name": "aggregated-bytes"}}),
            T0,
        ),
        (
            json!({"timestamp": "last", "target": {"name": "aggregated-bytes"}}),
            T0 + 5,
        ),
    ] {
        assert_eq!(aggregate_six(p).timestamp_ns, ts);
    }
}

#[test]
fn meter_types() {
    let mut t = aggregator(json!({"size": 9}));
    let mut input = Vec::new();
    for (name, kind) in [
        ("testgauge", Kind::Gauge),
        ("testcumulative", Kind::Cumulative),
        ("testdelta", Kind::Delta),
    ] {
        for (i, v) in [1.0, 2.0, 3.0].iter().enumerate() {
            input.push(Sample::new(name, "test_resource", kind, *v, T0 + i as i64).with_unit("B"));
        }
    }
    let mut out = handle(&mut t, input);
    out.extend(flush(&mut t));
    let got: Vec<_> = out.iter().map(|s| (&*s.name, s.value)).collect();
    assert_eq!(
        got,
        [
            ("testgauge", 2.0),
            ("testcumulative", 3.0),
            ("testdelta", 6.0)
        ]
    );
}

#[test]
fn cumulative_keeps_the_newest_by_timestamp() {
    let mut t = aggregator(json!({"size": 3}));
    let c = |v: f64, ts: i64| Sample::new("c", "r", Kind::Cumulative, v, ts);
    assert!(handle(&mut t, vec![c(5.0, T0 + 2), c(9.0, T0 + 1), c(7.0, T0 + 3)]).is_empty());
    assert_eq!(volumes(&flush(&mut t)), [7.0]);
}

#[test]
fn sized_flush() {
    let mut t = aggregator(json!({"size": 2}));
    let d = |r: &str, v: f64| {
        Sample::new("storage.objects.incoming.bytes", r, Kind::Delta, v, T0).with_unit("B")
    };
    let mut out = handle(&mut t, vec![d("test_resource", 26.0)]);
    out.extend(flush(&mut t));
    assert!(out.is_empty());
    let mut out = handle(&mut t, vec![d("other_resource", 16.0)]);
    out.extend(flush(&mut t));
    assert_eq!(volumes(&out), [26.0, 16.0]);
}

#[test]
fn same_series_is_merged() {
    // Ceilometer's test_aggregator_without_authentication.
    let mut t = aggregator(json!({"size": 2}));
    let d = |v: f64, version: &str| {
        Sample::new(
            "storage.objects.outgoing.bytes",
            "test_resource",
            Kind::Delta,
            v,
            T0,
        )
        .with_metadata(&[("version", version)])
    };
    assert!(handle(&mut t, vec![d(26.0, "1.0")]).is_empty());
    assert!(flush(&mut t).is_empty());
    assert!(handle(&mut t, vec![d(16.0, "2.0")]).is_empty());
    let out = flush(&mut t);
    assert_eq!(volumes(&out), [42.0]);
    assert_eq!(&*out[0].resource, "test_resource");
}

#[test]
fn timed_flush() {
    let mut t = aggregator(json!({"size": 900, "retention_time": 60}));
    let s = Sample::new(
        "storage.objects.incoming.bytes",
        "test_resource",
        Kind::Delta,
        26.0,
        T0,
    );
    assert!(handle(&mut t, vec![s]).is_empty());
    assert!(flush(&mut t).is_empty());
    NOW.with(|n| n.set(T0 + 120 * SEC));
    assert_eq!(volumes(&flush(&mut t)), [26.0]);
    assert!(flush(&mut t).is_empty());
}

#[test]
fn timed_flush_without_samples() {
    let mut t = aggregator(json!({"size": 900, "retention_time": 60}));
    NOW.with(|n| n.set(T0 + 200 * SEC));
    assert!(flush(&mut t).is_empty());
}

fn hundred_resources() -> Vec<Sample> {
    (0..100)
        .map(|i| {
            Sample::new(
                "cpu",
                &format!("1ca738a1-c49c-4401-8346-5c60ebdb03f4{i}"),
                Kind::Cumulative,
                1234567.0,
                T0,
            )
            .with_unit("ns")
        })
        .collect()
}

#[test]
fn size_unbounded() {
    let mut t = aggregator(json!({"size": "0", "retention_time": "300"}));
    assert!(handle(&mut t, hundred_resources()).is_empty());
    assert!(flush(&mut t).is_empty());
}

#[test]
fn size_bounded() {
    let mut t = aggregator(json!({"size": "100"}));
    let mut out = handle(&mut t, hundred_resources());
    out.extend(flush(&mut t));
    assert_eq!(out.len(), 100);
}

#[test]
fn size_and_retention_from_strings() {
    let mut t = aggregator(json!({"size": "2", "retention_time": "15"}));
    let s = Sample::new("m", "r", Kind::Delta, 1.0, T0);
    assert!(handle(&mut t, vec![s.clone()]).is_empty());
    assert!(flush(&mut t).is_empty());
    NOW.with(|n| n.set(T0 + 16 * SEC));
    assert_eq!(volumes(&flush(&mut t)), [1.0]);
}

#[test]
fn neither_size_nor_retention_releases_everything() {
    // Ceilometer's `self.size = 1`: the flush releases all that was merged before it.
    for p in [
        json!({}),
        json!({"size": "0"}),
        json!({"size": 0, "retention_time": 0}),
    ] {
        let mut t = aggregator(p);
        let out = handle(
            &mut t,
            vec![
                Sample::new("m", "r", Kind::Delta, 1.0, T0),
                Sample::new("m", "r", Kind::Delta, 2.0, T0),
            ],
        );
        assert!(out.is_empty(), "handle never releases");
        assert_eq!(volumes(&flush(&mut t)), [3.0]);
    }
}

/// Samples of several series and kinds, in arrival order.
fn mixed(n: usize) -> Vec<Sample> {
    let kinds = [Kind::Delta, Kind::Gauge, Kind::Cumulative];
    (0..n)
        .map(|i| {
            let k = kinds[i % 3];
            let r = format!("r{}", i % 4);
            Sample::new("m", &r, k, (i * 7 % 11) as f64, T0 + i as i64 * SEC)
                .with_metadata(&[("seq", &i.to_string())])
        })
        .collect()
}

/// The output of `samples` handed over in batches of the given sizes (cycled), the pipeline
/// flushing after the samples at `flush_at` (its timer is not tied to batches) and at the end.
fn batched(
    p: serde_json::Value,
    samples: &[Sample],
    sizes: &[usize],
    flush_at: &[usize],
) -> Vec<String> {
    let mut t = aggregator(p);
    let mut out = Vec::new();
    let (mut i, mut k) = (0, 0);
    while i < samples.len() {
        // A batch never spans a flush: the flush comes between two batches.
        let next_flush = flush_at
            .iter()
            .copied()
            .find(|&f| f > i)
            .unwrap_or(samples.len());
        let n = sizes[k % sizes.len()].min(next_flush - i);
        out.extend(handle(&mut t, samples[i..i + n].to_vec()));
        i += n;
        k += 1;
        if flush_at.contains(&i) {
            // The clock runs with the samples: one second each.
            NOW.with(|now| now.set(T0 + i as i64 * SEC));
            out.extend(flush(&mut t));
        }
    }
    NOW.with(|now| now.set(T0 + samples.len() as i64 * SEC));
    out.extend(flush(&mut t));
    out.iter()
        .map(|s| {
            format!(
                "{} {} {:?} {} {} {:?}",
                s.name,
                s.resource,
                s.kind,
                s.value,
                s.timestamp_ns,
                s.metadata.get("seq")
            )
        })
        .collect()
}

#[test]
fn output_does_not_depend_on_batching() {
    // Issue 22 item 11: the same samples one at a time, in uneven batches and all at once
    // give the same aggregates, for a size limit, with retention, and with neither.
    let samples = mixed(200);
    let flushes = [40, 41, 130];
    for p in [
        json!({"size": 15}),
        json!({"size": 7, "timestamp": "last", "resource_metadata": "first"}),
        json!({"size": 1000, "retention_time": 60}),
        json!({}),
    ] {
        let one = batched(p.clone(), &samples, &[1], &flushes);
        assert!(!one.is_empty(), "{p}");
        for sizes in [&[2][..], &[3, 17, 1, 64], &[100], &[200]] {
            assert_eq!(
                batched(p.clone(), &samples, sizes, &flushes),
                one,
                "{p} in batches of {sizes:?}"
            );
        }
    }
    // size 15, flushes after 40, 41, 130 and 200 samples: each releases what was merged
    // since the one before (the flush after 41 had only one sample: under the size, kept).
    let out = batched(json!({"size": 15}), &samples, &[200], &flushes);
    assert_eq!(out.len(), 12 + 12 + 12);
}
