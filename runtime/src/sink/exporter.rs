//! What a guest sink asks of its exporter, as the sink sees it: samples in, requests out, or
//! why not. The sink knows no wasm: the daemon hands it an [`Exporter`] (a guest instance
//! behind this trait) and the sink owns the rest (queue, retries, transport, dead letters).

use std::time::Duration;

use crate::sample::Sample;

/// One request an exporter asks the sink to send.
#[derive(Debug, Clone, PartialEq)]
pub struct Request {
    /// Appended to the sink's URL, or to its subject.
    pub suffix: String,
    pub content_type: String,
    pub headers: Vec<(String, String)>,
    pub body: bytes::Bytes,
}

/// What became of one call.
#[derive(Debug)]
pub enum Encoding {
    /// The requests to send, in order.
    Requests(Vec<Request>),
    /// The exporter says this batch can never be encoded: dead-letter it.
    Refused(String),
    /// The call failed (a trap, its deadline, its memory cap, malformed requests): the batch
    /// stays queued and is tried again on a fresh instance.
    Failed(String),
    /// The exporter is quarantined after repeated failures for this long: try again then.
    Quarantined(Duration),
}

/// A guest sink's exporter. `encode` blocks (it runs a guest under its deadline): the sink
/// calls it on a blocking thread, one call at a time.
pub trait Exporter: Send + Sync {
    fn encode(&self, samples: &[Sample]) -> Encoding;
    /// What the exporter is (its component's hash and its parameters): a reload that changes
    /// it replaces the exporter, one that does not keeps it.
    fn identity(&self) -> String;
}
