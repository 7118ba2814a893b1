//! The OpenTelemetry Python SDK (PyPI's `opentelemetry-sdk` and
//! `opentelemetry-exporter-otlp-proto-http`, into a venv under `target/guest-toolchains`)
//! pushes a counter, an up-down counter, an observable gauge and a histogram, once with
//! cumulative temporality (plain protobuf, to `/api/pipelines/p/otlp`) and once with delta
//! (gzip, to `/v1/metrics`); and a hand-made OTLP/JSON body.

use std::path::PathBuf;
use std::process::Command;
use std::sync::OnceLock;

use serde_json::{Value, json};

use super::{daemon, samples_until};
use crate::common::*;

/// The SDK's version, pinned so that the test reads the same bytes every run.
const OTEL: &str = "1.27.0";

/// A venv with the SDK and the OTLP/HTTP exporter, installed once.
fn python() -> PathBuf {
    static PY: OnceLock<PathBuf> = OnceLock::new();
    PY.get_or_init(|| {
        ensure_debian_package("python3-venv", || {
            Command::new("python3")
                .args(["-c", "import venv, ensurepip"])
                .status()
                .is_ok_and(|s| s.success())
        });
        let venv = crate::polyglot::toolchains().join(format!("otel-python-{OTEL}"));
        let py = venv.join("bin/python");
        let stamp = venv.join(".installed");
        if !stamp.exists() {
            let ok = Command::new("python3")
                .args(["-m", "venv"])
                .arg(&venv)
                .status()
                .unwrap()
                .success();
            assert!(ok, "python3 -m venv {}", venv.display());
            output_ok(
                Command::new(&py)
                    .args(["-m", "pip", "install", "-q", "--disable-pip-version-check"])
                    .arg(format!("opentelemetry-sdk=={OTEL}"))
                    .arg(format!("opentelemetry-exporter-otlp-proto-http=={OTEL}")),
            );
            std::fs::write(&stamp, "").unwrap();
        }
        py
    })
    .clone()
}

const SCRIPT: &str = r#"
import sys
from opentelemetry.metrics import Observation
from opentelemetry.sdk.metrics import MeterProvider, Counter, UpDownCounter, Histogram
from opentelemetry.sdk.metrics.export import PeriodicExportingMetricReader, AggregationTemporality
from opentelemetry.sdk.resources import Resource
from opentelemetry.exporter.otlp.proto.http import Compression
from opentelemetry.exporter.otlp.proto.http.metric_exporter import OTLPMetricExporter

url, mode = sys.argv[1], sys.argv[2]
D = AggregationTemporality.DELTA
delta = mode == "delta"
exporter = OTLPMetricExporter(
    endpoint=url,
    preferred_temporality={Counter: D, UpDownCounter: D, Histogram: D} if delta else {},
    compression=Compression.Gzip if delta else Compression.NoCompression,
)
reader = PeriodicExportingMetricReader(exporter, export_interval_millis=3600000)
provider = MeterProvider(
    resource=Resource.create({"service.name": "shop-" + mode, "host.name": "node7"}),
    metric_readers=[reader],
)
m = provider.get_meter("wasmon.test")
orders = m.create_counter("orders", unit="{order}")
depth = m.create_up_down_counter("queue.depth", unit="{item}")
latency = m.create_histogram("latency", unit="ms")
m.create_observable_gauge(
    "temperature", unit="Cel", callbacks=[lambda o: [Observation(21.5, {"room": "a"})]]
)
orders.add(3, {"mode": mode})
orders.add(4, {"mode": mode})
depth.add(5)
depth.add(-2)
for v in (3, 7, 700):
    latency.record(v, {"route": "/x"})
assert provider.force_flush(), "first export"
orders.add(10, {"mode": mode})
assert provider.force_flush(), "second export"
provider.shutdown()
"#;

fn push(url: &str, mode: &str) {
    let tmp = tempfile::tempdir().unwrap();
    let script = tmp.path().join("push.py");
    std::fs::write(&script, SCRIPT).unwrap();
    output_ok(Command::new(python()).arg(&script).args([url, mode]));
}

fn named<'a>(got: &'a [Value], name: &str) -> Vec<&'a Value> {
    got.iter().filter(|s| s["name"] == name).collect()
}

fn bucket(got: &[Value], le: &str) -> f64 {
    let b = named(got, "latency_bucket");
    let b = b.iter().find(|s| s["metadata"]["le"] == le).unwrap();
    b["value"].as_f64().unwrap()
}

#[test]
fn receive_otlp_from_the_python_sdk_both_temporalities() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(tmp.path(), "");
    for (mode, path, kind) in [
        ("cumulative", "/api/pipelines/p/otlp", "cumulative"),
        ("delta", "/v1/metrics", "delta"),
    ] {
        push(&d.url(path), mode);
        // Both exports (this run's: the service names the mode).
        let service = format!("shop-{mode}");
        let mine = |s: &[Value]| -> Vec<Value> {
            s.iter()
                .filter(|s| s["metadata"]["service.name"] == service.as_str())
                .cloned()
                .collect()
        };
        let got = mine(&samples_until(&d, |s| named(&mine(s), "orders").len() == 2));
        let orders = named(&got, "orders");
        let values: Vec<f64> = orders
            .iter()
            .map(|s| s["value"].as_f64().unwrap())
            .collect();
        let want = if mode == "delta" {
            [7.0, 10.0]
        } else {
            [7.0, 17.0]
        };
        assert_eq!(values, want, "{mode}");
        let o = orders[0];
        assert_eq!(
            (&o["type"], &o["unit"]),
            (&json!(kind), &json!("{order}")),
            "{o}"
        );
        assert_eq!(o["metadata"]["mode"], mode);
        // Resource attributes: host.name is the hostname the store sink reads.
        assert_eq!(o["metadata"]["hostname"], "node7", "{o}");
        assert_eq!(o["resource"], "");

        // The up-down counter: a level when cumulative, a change when delta.
        let q = named(&got, "queue.depth")[0];
        let kind_q = if mode == "delta" { "delta" } else { "gauge" };
        assert_eq!(
            (&q["value"], &q["type"]),
            (&json!(3.0), &json!(kind_q)),
            "{q}"
        );
        assert_eq!(q["unit"], "{item}");

        let t = named(&got, "temperature")[0];
        assert_eq!(
            (&t["value"], &t["type"], &t["unit"]),
            (&json!(21.5), &json!("gauge"), &json!("Cel"))
        );
        assert_eq!(t["metadata"]["room"], "a");

        // The histogram, SDK default bounds 0, 5, 10, 25, ... 750, 1000, ...: 3, 7, 700.
        let count = named(&got, "latency_count")[0];
        assert_eq!(
            (&count["value"], &count["type"], &count["unit"]),
            (&json!(3.0), &json!(kind), &json!("ms"))
        );
        assert_eq!(named(&got, "latency_sum")[0]["value"], 710.0);
        assert_eq!(
            ["0", "5", "10", "500", "750", "+Inf"].map(|le| bucket(&got, le)),
            [0.0, 1.0, 2.0, 2.0, 3.0, 3.0]
        );
        assert_eq!(named(&got, "latency_bucket")[0]["metadata"]["route"], "/x");
    }
    // The store sink put them at the host the resource's host.name names.
    let q = json!({"cluster": "local", "from": 0, "to": i64::MAX / 2,
        "queries": [{"metric": "temperature", "host": "node7"}]});
    let r: Value =
        serde_json::from_str(&d.post("/api/query", &q.to_string()).text().unwrap()).unwrap();
    let data = r["results"][0][0]["data"]
        .as_array()
        .cloned()
        .unwrap_or_default();
    assert!(data.contains(&json!(21.5)), "{r}");
}

/// OTLP/JSON as the spec's example has it (the Python exporter speaks protobuf only), with
/// a point the receiver cannot take: a partial success naming it, the rest stored.
#[test]
fn receive_otlp_json_with_a_partial_success() {
    let tmp = tempfile::tempdir().unwrap();
    let d = daemon(tmp.path(), "");
    let t = (chrono::Utc::now().timestamp_nanos_opt().unwrap()).to_string();
    let body = json!({"resourceMetrics": [{
        "resource": {"attributes": [{"key": "host.name", "value": {"stringValue": "n1"}}]},
        "scopeMetrics": [{"scope": {"name": "s"}, "metrics": [
            {"name": "my.counter", "unit": "1", "sum": {"aggregationTemporality": 2, "isMonotonic": true,
              "dataPoints": [{"asInt": "5", "timeUnixNano": t,
                "attributes": [{"key": "a", "value": {"intValue": "7"}}]}]}},
            {"name": "broken", "unit": "1", "sum": {"aggregationTemporality": 0,
              "dataPoints": [{"asDouble": 1.5, "timeUnixNano": t}]}}
        ]}]
    }]});
    let r = reqwest::blocking::Client::new()
        .post(d.url("/v1/metrics"))
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .unwrap();
    assert_eq!(r.status(), 200);
    let answer: Value = r.json().unwrap();
    assert_eq!(
        answer,
        json!({"partialSuccess": {"rejectedDataPoints": "1",
            "errorMessage": "metric \"broken\": aggregation temporality unspecified"}})
    );
    let got = samples_until(&d, |s| !s.is_empty());
    assert_eq!(got[0]["name"], "my.counter");
    assert_eq!(
        (&got[0]["value"], &got[0]["type"]),
        (&json!(5.0), &json!("cumulative"))
    );
    assert_eq!(got[0]["metadata"], json!({"hostname": "n1", "a": "7"}));

    // An unknown content type: 415 naming the two that are taken.
    let r = reqwest::blocking::Client::new()
        .post(d.url("/v1/metrics"))
        .header("content-type", "text/plain")
        .body("x")
        .send()
        .unwrap();
    assert_eq!(r.status(), 415);
    assert!(
        r.text()
            .unwrap()
            .contains("application/x-protobuf or application/json")
    );
}
