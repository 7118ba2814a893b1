//! `ingest` owns line protocol's way into the buffer store: a body of lines (from
//! `/api/write`, a NATS message or a JetStream message) resolved to levels and written, and the
//! NATS and JetStream consumers that feed it. It stands on `lineproto` and `store` and knows no
//! HTTP: the API hands it bodies, the daemon starts its consumers.

mod lines;
pub mod nats;

pub use lines::{IngestOutcome, LineError, ingest, ingest_durable, timestamp_secs};
pub use nats::{NatsConfig, NatsError, NatsSubscription, run_nats_ingest};
