//! `GET /api/sinks`: every forwarding sink's queue and delivery counters, and the queues kept on
//! disk for sinks no longer configured; `DELETE /api/sinks/{name}/queue` (admin) deletes such a
//! kept queue. [`render_prometheus`] puts the same figures into `/metrics`.

use std::fmt::Write;
use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::{Extension, Json};
use serde_json::json;

use super::auth::Caller;
use crate::daemon::Daemon;
use crate::sink::SinkStatus;

pub async fn list(State(d): State<Arc<Daemon>>) -> Response {
    Json(json!({
        "node-id": d.sinks().node_id(),
        "sinks": d.sinks().statuses(),
        "kept-queues": d.sinks().kept_queues(),
    }))
    .into_response()
}

pub async fn delete_queue(
    State(d): State<Arc<Daemon>>,
    Extension(caller): Extension<Caller>,
    Path(name): Path<String>,
) -> Response {
    if let Err(r) = caller.require_admin() {
        return r;
    }
    match d.sinks().delete_kept_queue(&name) {
        Ok(bytes) => Json(json!({"deleted": name, "bytes": bytes})).into_response(),
        Err(e) => super::error::error(StatusCode::CONFLICT, e),
    }
}

/// Per sink, as Prometheus text: gauges for the queue, counters for what happened to samples.
pub fn render_prometheus(sinks: &[SinkStatus], out: &mut String) {
    type Get = fn(&SinkStatus) -> f64;
    let series: [(&str, &str, &str, Get); 13] = [
        (
            "wasmon_sink_queued_records",
            "gauge",
            "Records in the sink's queue (in flight included).",
            |s| s.queued_records as f64,
        ),
        (
            "wasmon_sink_queued_samples",
            "gauge",
            "Samples in the sink's queue.",
            |s| s.queued_samples as f64,
        ),
        (
            "wasmon_sink_queued_bytes",
            "gauge",
            "Bytes of records in the sink's queue.",
            |s| s.queued_bytes as f64,
        ),
        (
            "wasmon_sink_oldest_sample_age_seconds",
            "gauge",
            "Age of the oldest queued sample (0: queue empty).",
            |s| s.oldest_age_seconds,
        ),
        (
            "wasmon_sink_accepted_samples_total",
            "counter",
            "Samples pipelines handed the sink.",
            |s| s.accepted as f64,
        ),
        (
            "wasmon_sink_sent_samples_total",
            "counter",
            "Samples the destination acknowledged.",
            |s| s.sent_samples as f64,
        ),
        (
            "wasmon_sink_sent_records_total",
            "counter",
            "Records (requests, messages) the destination acknowledged.",
            |s| s.sent_records as f64,
        ),
        (
            "wasmon_sink_attempts_total",
            "counter",
            "Delivery attempts.",
            |s| s.attempts as f64,
        ),
        (
            "wasmon_sink_retries_total",
            "counter",
            "Failed attempts that will be retried.",
            |s| s.retries as f64,
        ),
        (
            "wasmon_sink_encode_failures_total",
            "counter",
            "Failed calls of a guest sink's exporter (the batch stayed queued for a fresh instance).",
            |s| s.encode_failures as f64,
        ),
        (
            "wasmon_sink_dead_lettered_samples_total",
            "counter",
            "Samples the destination refused as malformed (dead-letter file).",
            |s| s.dead_lettered_samples as f64,
        ),
        (
            "wasmon_sink_damaged_records_total",
            "counter",
            "Records found damaged in the queue's files at start.",
            |s| s.damaged_records as f64,
        ),
        (
            "wasmon_sink_truncated_tail_records",
            "gauge",
            "Records cut from a torn tail of the queue at this start (pushes a crash interrupted).",
            |s| s.truncated_tail_records as f64,
        ),
    ];
    for (name, kind, help, get) in series {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for s in sinks {
            let _ = writeln!(out, "{name}{{sink=\"{}\"}} {}", s.name, get(s));
        }
    }
    let name = "wasmon_sink_dropped_samples_total";
    let _ = writeln!(
        out,
        "# HELP {name} Samples dropped, by reason (queue-size, queue-age, unencodable, queue-error).\n# TYPE {name} counter"
    );
    for s in sinks {
        let d = &s.dropped;
        for (reason, n) in [
            ("queue-size", d.queue_size),
            ("queue-age", d.queue_age),
            ("unencodable", d.unencodable),
            ("queue-error", d.queue_error),
        ] {
            let _ = writeln!(out, "{name}{{sink=\"{}\",reason=\"{reason}\"}} {n}", s.name);
        }
    }
}
