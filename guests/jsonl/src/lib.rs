//! The bundled `jsonl` exporter, the kind a site writes for its own backend: each batch as
//! JSON lines (`application/x-ndjson`), one line per sample in wasmon's own sample JSON
//! (`runtime/src/sample/json.rs`), so that a receiving wasmon's
//! `POST /api/pipelines/NAME/samples` reads the samples back as they were sent:
//!
//! ```json
//! {"name":"cpu","resource":"h1","value":1.5,"unit":"ns","type":"cumulative","timestamp":"2024-01-01T00:00:00.000000001Z","metadata":{"cpu":"0"}}
//! ```
//!
//! Timestamps are RFC 3339 in UTC with all nine fractional digits (nanoseconds survive).
//! Metadata is a JSON object, so a receiver keeps one value per key, in key order.
//!
//! Parameters:
//! - `suffix`: appended to the sink's URL (default none);
//! - `max-lines`: lines per request at most (default: the whole batch in one); a larger batch
//!   becomes several requests, sent in order (a receiver's body cap or per-request name
//!   budget may want smaller ones);
//! - `non-finite`: what to do with NaN and ±infinity, which JSON numbers cannot carry:
//!   `"string"` (default) writes `"NaN"`, `"inf"`, `"-inf"` as wasmon's own JSON does and its
//!   parser reads back; `"skip"` leaves such samples out, for consumers that want only numbers,
//!   with one log line per batch that says how many.

use std::io::Write as _;

use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::params::{self, ParamError};
use wasmon_guest::{Input, Params, Sample};

pub const CONTENT_TYPE: &str = "application/x-ndjson";

/// What to do with values JSON numbers cannot carry.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NonFinite {
    /// `"NaN"`, `"inf"`, `"-inf"`, as wasmon writes and reads them.
    #[default]
    String,
    /// Left out (and counted in a log line).
    Skip,
}

/// The exporter's parameters.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Config {
    pub suffix: String,
    /// Lines per request at most; `None`: one request per batch.
    pub max_lines: Option<usize>,
    pub non_finite: NonFinite,
}

impl Config {
    pub const KNOWN: &[&str] = &["suffix", "max-lines", "non-finite"];

    pub fn from_params(p: &Params) -> Result<Config, ParamError> {
        params::refuse_unknown(p, Self::KNOWN)?;
        let non_finite = match params::string(p, "non-finite", "string")?.as_str() {
            "string" => NonFinite::String,
            "skip" => NonFinite::Skip,
            other => {
                return Err(ParamError::Invalid {
                    field: "non-finite".into(),
                    why: format!("must be \"string\" or \"skip\", got {other:?}"),
                });
            }
        };
        Ok(Config {
            suffix: params::string(p, "suffix", "")?,
            max_lines: params::positive(p, "max-lines")?.map(|n| n as usize),
            non_finite,
        })
    }
}

pub struct Jsonl {
    cfg: Config,
}

impl Exporter for Jsonl {
    fn configure(params: &Params) -> Result<Self, String> {
        Ok(Jsonl {
            cfg: Config::from_params(params)?,
        })
    }

    fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
        let skipped = encode(input, &self.cfg, out);
        if skipped > 0 {
            wasmon_guest::warn!("left out {skipped} samples whose value is NaN or infinite");
        }
        Ok(())
    }
}

/// Pushes the requests that carry `samples`; returns how many samples were skipped.
pub fn encode(
    samples: impl Iterator<Item = Sample>,
    cfg: &Config,
    out: &mut Vec<Request>,
) -> usize {
    let max = cfg.max_lines.unwrap_or(usize::MAX);
    let (mut body, mut lines, mut skipped) = (Vec::new(), 0, 0);
    let mut send = |body: &mut Vec<u8>| {
        out.push(Request {
            suffix: cfg.suffix.clone(),
            content_type: CONTENT_TYPE.into(),
            headers: Vec::new(),
            body: std::mem::take(body),
        })
    };
    for s in samples {
        if !s.value.is_finite() && cfg.non_finite == NonFinite::Skip {
            skipped += 1;
            continue;
        }
        write_line(&mut body, &s);
        lines += 1;
        if lines == max {
            send(&mut body);
            lines = 0;
        }
    }
    if lines > 0 {
        send(&mut body);
    }
    skipped
}

/// One sample as a line of wasmon's sample JSON, newline included.
pub fn write_line(out: &mut Vec<u8>, s: &Sample) {
    out.extend_from_slice(b"{\"name\":");
    string(out, &s.name);
    out.extend_from_slice(b",\"resource\":");
    string(out, &s.resource);
    out.extend_from_slice(b",\"value\":");
    if s.value.is_finite() {
        serde_json::to_writer(&mut *out, &s.value).expect("writing to a vector");
    } else {
        // The spellings wasmon's `to_line` writes and its parser accepts.
        let text: &[u8] = match s.value {
            v if v.is_nan() => b"\"NaN\"",
            v if v > 0.0 => b"\"inf\"",
            _ => b"\"-inf\"",
        };
        out.extend_from_slice(text);
    }
    out.extend_from_slice(b",\"unit\":");
    string(out, &s.unit);
    let _ = write!(out, ",\"type\":\"{}\",\"timestamp\":\"", s.kind.as_str());
    rfc3339(out, s.timestamp_ns);
    out.extend_from_slice(b"\",\"metadata\":{");
    for (i, (k, v)) in s.metadata.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        string(out, k);
        out.push(b':');
        string(out, v);
    }
    out.extend_from_slice(b"}}\n");
}

/// A JSON string, escaped.
fn string(out: &mut Vec<u8>, s: &str) {
    serde_json::to_writer(&mut *out, s).expect("writing to a vector");
}

/// `YYYY-MM-DDTHH:MM:SS.nnnnnnnnnZ` for nanoseconds since the epoch (any i64: 1677 to 2262).
pub fn rfc3339(out: &mut Vec<u8>, ns: i64) {
    let secs = ns.div_euclid(1_000_000_000);
    let nanos = ns.rem_euclid(1_000_000_000);
    let (days, sod) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    let _ = write!(
        out,
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{nanos:09}Z",
        sod / 3600,
        sod / 60 % 60,
        sod % 60
    );
}

/// The proleptic Gregorian date of a day number (days since 1970-01-01): Howard Hinnant's
/// `civil_from_days`, exact for every day an i64 of nanoseconds reaches.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

wasmon_guest::export_exporter!(Jsonl);

#[cfg(test)]
mod tests;
