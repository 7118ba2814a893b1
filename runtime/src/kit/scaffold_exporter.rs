//! `wasmon guest new --world exporter`: an exporter that builds as is, in each language. It
//! sends each batch as one request of JSON lines, one line per sample in wasmon's sample JSON
//! (`sample::json`), so that a receiving wasmon's sample endpoint reads it back as it is.

use super::Lang;

/// What the scaffold is, for its doc comment.
const DOC: &str = "sends each batch as one request of JSON lines (`application/x-ndjson`), one \
line per sample in wasmon's sample JSON (what `wasmon transform` reads), to the sink's URL or \
subject plus `suffix`. Parameters: {\"suffix\": \"/api/pipelines/main/samples\"}";

/// The exporter's source.
pub(super) fn source(lang: Lang) -> String {
    lang.pick([RUST, PYTHON, JS, C]).replace("{DOC}", DOC)
}

const RUST: &str = r#"//! A wasmon exporter: {DOC}

use serde_json::{Value, json};
use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::{Input, Params, Sample};

pub struct Lines {
    suffix: String,
}

impl Exporter for Lines {
    fn configure(p: &Params) -> Result<Self, String> {
        let suffix = match p.get("suffix").filter(|v| !v.is_null()) {
            None => String::new(),
            Some(v) => v.as_str().ok_or(format!("`suffix` must be a string, got {v}"))?.into(),
        };
        Ok(Lines { suffix })
    }

    fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
        if input.len() == 0 {
            return Ok(()); // nothing to send
        }
        let mut body = Vec::new();
        for s in input {
            serde_json::to_writer(&mut body, &line(&s)).map_err(|e| e.to_string())?;
            body.push(b'\n');
        }
        out.push(Request {
            suffix: self.suffix.clone(),
            content_type: "application/x-ndjson".into(),
            headers: Vec::new(),
            body,
        });
        Ok(())
    }
}

/// A sample as wasmon's sample JSON. JSON has no NaN or infinity: wasmon writes them as strings.
fn line(s: &Sample) -> Value {
    let value = match s.value {
        v if v.is_finite() => json!(v),
        v if v.is_nan() => json!("NaN"),
        v if v > 0.0 => json!("inf"),
        _ => json!("-inf"),
    };
    let metadata: serde_json::Map<String, Value> =
        s.metadata.iter().map(|(k, v)| (k.to_string(), v.into())).collect();
    json!({
        "name": &*s.name,
        "resource": &*s.resource,
        "value": value,
        "unit": &*s.unit,
        "type": s.kind.as_str(),
        "timestamp": rfc3339(s.timestamp_ns),
        "metadata": metadata,
    })
}

/// Nanoseconds since the epoch as RFC 3339 in UTC, keeping every nanosecond (epoch seconds
/// as a JSON number would not). Days to a civil date: Howard Hinnant's `civil_from_days`.
fn rfc3339(ns: i64) -> String {
    let (secs, nanos) = (ns.div_euclid(1_000_000_000), ns.rem_euclid(1_000_000_000));
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s) = (sod / 3_600, sod / 60 % 60, sod % 60);
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{nanos:09}Z")
}

wasmon_guest::export_exporter!(Lines);
"#;

const PYTHON: &str = r#""""A wasmon exporter: {DOC}

Runs on the CPython 3.14 that componentize-py embeds. `wasmon guest build` builds it; name it
in a `[[sink]]` of `type = "guest"` to send a pipeline's samples through it.
"""

from wasmon_guest import Request, export_exporter, sample_json


class Lines:
    def __init__(self, params):
        self.suffix = params.string("suffix", "")

    def encode(self, samples):
        if not samples:
            return []  # nothing to send
        body = "".join(sample_json(s) + "\n" for s in samples)
        return [Request(body, content_type="application/x-ndjson", suffix=self.suffix)]


Encode = export_exporter(Lines)
"#;

const JS: &str = r#"// A wasmon exporter: {DOC}
//
// `wasmon guest build` builds it (componentize-js); name it in a `[[sink]]` of
// `type = "guest"` to send a pipeline's samples through it.
import { Request, exportExporter, sampleJson } from "./wasmon_guest.js";

class Lines {
  constructor(params) {
    this.suffix = params.string("suffix", "");
  }

  encode(samples) {
    if (samples.length === 0) return []; // nothing to send
    const body = samples.map((s) => sampleJson(s) + "\n").join("");
    return [new Request(body, { contentType: "application/x-ndjson", suffix: this.suffix })];
  }
}

export const encode = exportExporter(Lines);
"#;

const C: &str = r#"/* A wasmon exporter: {DOC}
 *
 * `wasmon guest build` builds it (clang-19, wasm32-wasip1, componentized with the preview1
 * adapter); name it in a `[[sink]]` of `type = "guest"` to send a pipeline's samples through
 * it. */
#include "wasmon_guest.h"

static const char *suffix;

const char *wg_exporter_configure(const wg_params *p) {
    return wg_param_string(p, "suffix", "", &suffix);
}

const char *wg_exporter_encode(const wg_sample *samples, size_t n, wg_requests *out) {
    if (n == 0) return NULL; /* nothing to send */
    wg_request *r = wg_request_new(out, "application/x-ndjson");
    wg_request_suffix(r, suffix);
    for (size_t i = 0; i < n; i++) {
        wg_request_sample_json(r, &samples[i]);
        wg_request_write(r, "\n", 1);
    }
    return NULL; /* NULL: encoded; else why the batch can never be */
}
"#;
