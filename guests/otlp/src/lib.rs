//! The bundled `otlp` exporter: each batch as one OTLP/HTTP protobuf
//! `ExportMetricsServiceRequest` (content type `application/x-protobuf`), for any
//! OpenTelemetry collector or a receiving wasmon's `/api/pipelines/NAME/otlp`.
//!
//! ```toml
//! [[sink]]
//! type = "guest"
//! guest = "otlp"
//! url = "http://collector:4318/v1/metrics"
//! params = { resource = { "service.name" = "wasmon" } }
//! ```
//!
//! Parameters: `resource` (resource attributes, a JSON object of strings; default none) and
//! `suffix` (appended to the sink's URL; default none). The mapping is in [`encode_request`]'s
//! module. The encoding is plain Rust, used natively by the unit tests and as the baseline of
//! `benches/exporter.rs`.

mod encode;

pub use encode::{CONTENT_TYPE, Config, RESOURCE_KEY, encode_request, request};

use wasmon_guest::exporter::{Exporter, Request};
use wasmon_guest::{Input, Params};

pub struct Otlp {
    cfg: Config,
}

impl Exporter for Otlp {
    fn configure(params: &Params) -> Result<Self, String> {
        Ok(Otlp {
            cfg: Config::from_params(params)?,
        })
    }

    fn encode(&mut self, input: impl Input, out: &mut Vec<Request>) -> Result<(), String> {
        // Each sample is consumed as the SDK decodes it: none is kept.
        out.extend(request(input, &self.cfg));
        Ok(())
    }
}

wasmon_guest::export_exporter!(Otlp);

#[cfg(test)]
mod tests;
