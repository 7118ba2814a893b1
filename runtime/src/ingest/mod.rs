//! `ingest` owns the ways samples come in over the network, knowing no HTTP: line protocol
//! into the buffer store (a body from `/api/write`, a NATS message or a JetStream message,
//! and the NATS and JetStream consumers that feed it), and the receivers' decoders,
//! Prometheus remote write ([`prom`]) and OTLP metrics ([`otlp`]), which turn a body into
//! samples for a pipeline, all or nothing, remembering what recent bodies' bytes decoded to
//! (`recent`). It stands on `lineproto`, `sample` and `store`:
//! the API hands it bodies, the daemon starts its consumers.

pub mod build;
mod lines;
pub mod nats;
pub mod otlp;
pub mod pb;
pub mod prom;
mod recent;

pub use build::{Limits, ReceiveError};
pub use lines::{IngestOutcome, LineError, ingest, ingest_durable, timestamp_secs};
pub use nats::{NatsConfig, NatsError, NatsSubscription, run_nats_ingest};
