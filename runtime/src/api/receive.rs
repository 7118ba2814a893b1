//! The receivers: Prometheus remote write and OTLP/HTTP metrics into a pipeline.
//!
//! - `POST /api/pipelines/{name}/prometheus` and `POST /api/v1/write` (into `[api]
//!   prometheus-pipeline`): remote write 1.0, or 2.0 when `Content-Type` asks for
//!   `proto=io.prometheus.write.v2.Request`; 204 once stored, with the 2.0 `...-Written`
//!   headers on 2.0 requests.
//! - `POST /api/pipelines/{name}/otlp` and `POST /v1/metrics` (into `[api] otlp-pipeline`):
//!   OTLP/HTTP metrics, `application/x-protobuf` or `application/json`, gzip or not; 200 with
//!   an `ExportMetricsServiceResponse` (a partial success names the rejected points).
//!
//! A body is decoded whole before anything is sent ([`crate::ingest`]): a malformed one is a
//! 400 naming what is wrong, one past a bound 413, and nothing of either reaches the
//! pipeline. The answer waits for `Pipeline::send_acked`, as `/samples` does: a 2xx means the
//! sinks, durable forwarding queues among them, hold the samples.

use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{MethodRouter, post};

use super::error::ApiError;
use crate::daemon::Daemon;
use crate::ingest::otlp::{self, OtlpDecoded};
use crate::ingest::prom::{self, PromDecoded, Version};
use crate::ingest::{Limits, ReceiveError};
use crate::pipeline::Pipeline;
use crate::sample::Sample;
use crate::telemetry::Counter;

/// What the receivers' handlers share; `[api]` settings are read at start.
pub struct Receivers {
    daemon: Arc<Daemon>,
    limits: Limits,
    prometheus_pipeline: Option<String>,
    otlp_pipeline: Option<String>,
    counters: Counters,
    /// What remote write 1.0 remembers across requests: families' types, series' heads.
    memory: prom::Memory,
    /// What OTLP remembers across protobuf requests: resources, metrics, attribute sets.
    otlp_memory: otlp::Memory,
}

struct Counters {
    prom_samples: Arc<Counter>,
    otlp_samples: Arc<Counter>,
    prom_refused: Arc<Counter>,
    otlp_refused: Arc<Counter>,
    histograms: Arc<Counter>,
    rejected_points: Arc<Counter>,
}

impl Counters {
    fn new() -> Counters {
        let r = crate::telemetry::registry();
        let samples = |p| {
            r.counter(
                "wasmon_receive_samples_total",
                "Samples the receivers handed to a pipeline (acknowledged).",
                &[("protocol", p)],
            )
        };
        let refused = |p| {
            r.counter(
                "wasmon_receive_refused_requests_total",
                "Receiver requests refused whole (malformed, past a bound, unsupported type).",
                &[("protocol", p)],
            )
        };
        Counters {
            prom_samples: samples("prometheus"),
            otlp_samples: samples("otlp"),
            prom_refused: refused("prometheus"),
            otlp_refused: refused("otlp"),
            histograms: r.counter(
                "wasmon_receive_native_histograms_dropped_total",
                "Prometheus native histogram samples not taken (remote write).",
                &[],
            ),
            rejected_points: r.counter(
                "wasmon_receive_otlp_rejected_points_total",
                "OTLP data points rejected and named in a partial-success answer.",
                &[],
            ),
        }
    }
}

/// The routes, to be mounted behind the API's authentication and body limit.
pub fn routes(daemon: Arc<Daemon>) -> Router {
    let api = daemon.config().api;
    let st = Arc::new(Receivers {
        limits: Limits {
            max_samples: api.max_receive_samples,
            max_body: daemon.parts().store.config().max_body_size,
        },
        prometheus_pipeline: api.prometheus_pipeline,
        otlp_pipeline: api.otlp_pipeline,
        daemon,
        counters: Counters::new(),
        memory: prom::Memory::default(),
        otlp_memory: otlp::Memory::default(),
    });
    Router::new()
        .route(
            "/api/pipelines/{name}/prometheus",
            receiver(Protocol::Prometheus),
        )
        .route("/api/v1/write", receiver(Protocol::Prometheus))
        .route("/api/pipelines/{name}/otlp", receiver(Protocol::Otlp))
        .route("/v1/metrics", receiver(Protocol::Otlp))
        .with_state(st)
}

/// What a receiver's route takes.
#[derive(Clone, Copy)]
enum Protocol {
    Prometheus,
    Otlp,
}

impl Protocol {
    /// The `[api]` setting naming the pipeline of its conventional path.
    fn setting(self) -> &'static str {
        match self {
            Protocol::Prometheus => "prometheus-pipeline",
            Protocol::Otlp => "otlp-pipeline",
        }
    }
}

/// A protocol's handler: the named route gives the pipeline, the conventional one (no path
/// parameter) the `[api]` section's default.
fn receiver(protocol: Protocol) -> MethodRouter<Arc<Receivers>> {
    post(
        move |State(st): State<Arc<Receivers>>,
              name: Option<Path<String>>,
              headers: HeaderMap,
              body: Bytes| async move {
            let name = name.map(|Path(n)| n);
            let pipeline = match pipeline(&st, name.as_deref(), protocol) {
                Ok(p) => p,
                Err(r) => return r,
            };
            let req = Received {
                content_type: headers
                    .get(header::CONTENT_TYPE)
                    .and_then(|v| v.to_str().ok()),
                encoding: headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()),
                bytes: body,
            };
            match protocol {
                Protocol::Prometheus => prometheus(&st, pipeline, req).await,
                Protocol::Otlp => otlp(&st, pipeline, req).await,
            }
        },
    )
}

/// The receivers' error reply: the API's one error, as plain text (see [`super::error`]).
fn text(code: StatusCode, msg: impl Into<String>) -> Response {
    ApiError::new(code, msg).plain()
}

fn status_of(e: &ReceiveError) -> StatusCode {
    match e {
        ReceiveError::Malformed(_) => StatusCode::BAD_REQUEST,
        ReceiveError::TooLarge(_) => StatusCode::PAYLOAD_TOO_LARGE,
        ReceiveError::Unsupported(_) => StatusCode::UNSUPPORTED_MEDIA_TYPE,
    }
}

/// A request's body and the headers that say how to read it.
struct Received<'a> {
    /// `Content-Type`, when it is text.
    content_type: Option<&'a str>,
    /// `Content-Encoding`.
    encoding: Option<&'a [u8]>,
    bytes: Bytes,
}

/// The pipeline named in the path, or in the protocol's `[api]` setting for a conventional
/// path.
#[allow(clippy::result_large_err)]
fn pipeline(
    st: &Receivers,
    name: Option<&str>,
    protocol: Protocol,
) -> Result<Arc<Pipeline>, Response> {
    let name = match name {
        Some(n) => n,
        None => {
            let configured = match protocol {
                Protocol::Prometheus => st.prometheus_pipeline.as_deref(),
                Protocol::Otlp => st.otlp_pipeline.as_deref(),
            };
            configured.ok_or_else(|| {
                text(
                    StatusCode::NOT_FOUND,
                    format!(
                        "no pipeline takes this path: set [api] {}",
                        protocol.setting()
                    ),
                )
            })?
        }
    };
    st.daemon
        .pipeline(name)
        .ok_or_else(|| text(StatusCode::NOT_FOUND, format!("no pipeline named {name:?}")))
}

/// Decodes on the blocking pool (a large body is milliseconds of CPU), then sends there
/// (`send_acked` blocks while the pipeline's queue is full: the backpressure we want).
async fn decode_and_send<T: Send + 'static>(
    pipeline: Arc<Pipeline>,
    decode: impl FnOnce() -> Result<T, ReceiveError> + Send + 'static,
    samples: impl FnOnce(&mut T) -> Vec<Sample> + Send + 'static,
) -> Result<Result<(T, usize), ReceiveError>, Response> {
    let r = tokio::task::spawn_blocking(move || {
        let mut decoded = match decode() {
            Ok(d) => d,
            Err(e) => return Ok(Err(e)),
        };
        let batch = samples(&mut decoded);
        let n = batch.len();
        if n > 0 && pipeline.send_acked(batch).is_err() {
            return Err(());
        }
        Ok(Ok((decoded, n)))
    })
    .await;
    match r {
        Ok(Ok(x)) => Ok(x),
        // A pipeline stopped by a reload between lookup and send: the sender may retry.
        _ => Err(text(
            StatusCode::SERVICE_UNAVAILABLE,
            "the pipeline stopped; retry",
        )),
    }
}

/// Remote write 1.0 or 2.0 into `pipeline`.
async fn prometheus(st: &Arc<Receivers>, pipeline: Arc<Pipeline>, req: Received<'_>) -> Response {
    let ct = req.content_type;
    let refused = |st: &Receivers, e: ReceiveError, v2: bool| {
        st.counters.prom_refused.inc();
        let mut r = text(status_of(&e), e.to_string());
        if v2 {
            written(r.headers_mut(), 0);
        }
        r
    };
    let version = match Version::from_content_type(ct) {
        Ok(v) => v,
        Err(e) => return refused(st, e, false),
    };
    let v2 = version == Version::V2;
    match req.encoding {
        None | Some(b"snappy") => {}
        Some(other) => {
            let e = ReceiveError::Unsupported(format!(
                "Content-Encoding {:?}: remote write is snappy",
                String::from_utf8_lossy(other)
            ));
            return refused(st, e, v2);
        }
    }
    let bytes = req.bytes;
    let limits = st.limits;
    let state = st.clone();
    let sent = decode_and_send(
        pipeline,
        move || prom::decode_with(&bytes, version, limits, &state.memory),
        |d: &mut PromDecoded| std::mem::take(&mut d.samples),
    )
    .await;
    let (decoded, n) = match sent {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => return refused(st, e, v2),
        Err(r) => return r,
    };
    st.counters.prom_samples.add(n as u64);
    if decoded.histograms > 0 {
        st.counters.histograms.add(decoded.histograms as u64);
        tracing::debug!(
            histograms = decoded.histograms,
            "remote write: native histograms are not taken"
        );
    }
    let mut r = StatusCode::NO_CONTENT.into_response();
    if v2 {
        written(r.headers_mut(), n);
    }
    r
}

/// Remote write 2.0's required answer headers: what was written (histograms and exemplars
/// never are).
fn written(h: &mut HeaderMap, samples: usize) {
    h.insert(
        "X-Prometheus-Remote-Write-Samples-Written",
        HeaderValue::from(samples),
    );
    for k in [
        "X-Prometheus-Remote-Write-Histograms-Written",
        "X-Prometheus-Remote-Write-Exemplars-Written",
    ] {
        h.insert(k, HeaderValue::from(0));
    }
}

#[derive(Clone, Copy, PartialEq)]
enum Format {
    Protobuf,
    Json,
}

/// An OTLP answer in the request's format.
fn otlp_answer(
    format: Format,
    code: StatusCode,
    protobuf: Vec<u8>,
    json: serde_json::Value,
) -> Response {
    match format {
        Format::Protobuf => (
            code,
            [(header::CONTENT_TYPE, "application/x-protobuf")],
            protobuf,
        )
            .into_response(),
        Format::Json => (code, axum::Json(json)).into_response(),
    }
}

/// A refusal as OTLP/HTTP gives it: a `google.rpc.Status` (code 3, INVALID_ARGUMENT, or 8,
/// RESOURCE_EXHAUSTED, for a bound) in the request's format.
fn otlp_refusal(format: Format, e: &ReceiveError) -> Response {
    let code = status_of(e);
    let rpc = if code == StatusCode::PAYLOAD_TOO_LARGE {
        8
    } else {
        3
    };
    let msg = e.to_string();
    otlp_answer(
        format,
        code,
        otlp::status_protobuf(rpc, &msg),
        serde_json::json!({"code": rpc, "message": msg}),
    )
}

/// OTLP/HTTP metrics (protobuf or JSON, gzip or not) into `pipeline`.
async fn otlp(st: &Arc<Receivers>, pipeline: Arc<Pipeline>, req: Received<'_>) -> Response {
    let ct = req.content_type.unwrap_or_default();
    let media = ct.split(';').next().unwrap_or_default().trim();
    let format = if media.eq_ignore_ascii_case("application/x-protobuf") {
        Format::Protobuf
    } else if media.eq_ignore_ascii_case("application/json") {
        Format::Json
    } else {
        st.counters.otlp_refused.inc();
        return text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("Content-Type {ct:?}: OTLP/HTTP is application/x-protobuf or application/json"),
        );
    };
    let gzip = match req.encoding {
        None | Some(b"identity") => false,
        Some(b"gzip") => true,
        Some(other) => {
            st.counters.otlp_refused.inc();
            let e = ReceiveError::Unsupported(format!(
                "Content-Encoding {:?}: only gzip is taken",
                String::from_utf8_lossy(other)
            ));
            return otlp_refusal(format, &e);
        }
    };
    let bytes = req.bytes;
    let limits = st.limits;
    let state = st.clone();
    let decode = move || {
        let raw = if gzip {
            super::ccms::inflate(&bytes, limits.max_body)?
        } else {
            bytes
        };
        match format {
            Format::Protobuf => otlp::decode_protobuf_with(&raw, limits, &state.otlp_memory),
            Format::Json => otlp::decode_json(&raw, limits),
        }
    };
    let sent = decode_and_send(pipeline, decode, |d: &mut OtlpDecoded| {
        std::mem::take(&mut d.samples)
    })
    .await;
    let (decoded, n) = match sent {
        Ok(Ok(x)) => x,
        Ok(Err(e)) => {
            st.counters.otlp_refused.inc();
            return otlp_refusal(format, &e);
        }
        Err(r) => return r,
    };
    st.counters.otlp_samples.add(n as u64);
    st.counters.rejected_points.add(decoded.rejected);
    otlp_answer(
        format,
        StatusCode::OK,
        otlp::response_protobuf(decoded.rejected, &decoded.error_message),
        otlp::response_json(decoded.rejected, &decoded.error_message),
    )
}
