//! `pipeline` owns the flow of samples between sources and sinks: named pipelines, each an
//! ordered chain of transformer guests with a flush interval, run on a thread of its own.
//! Batches, flushes and guest swaps travel down one channel, so a swap (hot reload) always
//! happens *between* batches: no sample is lost and none is processed twice. It calls guests
//! only through `host`, and knows sinks only through the [`Sink`] trait, but for its built-in
//! ones: `log`, `stdout` and `store` ([`StoreSink`], the store's write path from a pipeline).

pub mod levels;
mod sinks;
mod store_sink;
mod worker;

pub use sinks::{ChannelSink, LogSink, Sink, StdoutSink};
pub use store_sink::StoreSink;
pub use worker::{Flush, Pipeline, PipelineStats, Swap, SwapOutcome};
