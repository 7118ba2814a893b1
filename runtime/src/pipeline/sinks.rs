//! Where a pipeline's output goes. The store and the notifier implement [`Sink`] too.

use std::sync::Mutex;

use crate::sample::Sample;

/// Receives the samples a pipeline emits, batch by batch, on the pipeline's thread, or on an
/// acknowledged sender's when the pipeline runs no stage: a sink must not block for long
/// (queue and return) and takes batches from several threads at once.
pub trait Sink: Send + Sync {
    fn name(&self) -> &str;
    fn accept(&self, pipeline: &str, samples: &[Sample]);
}

/// Writes every sample to the log at `info`, as a JSON line.
pub struct LogSink;

impl Sink for LogSink {
    fn name(&self) -> &str {
        "log"
    }
    fn accept(&self, pipeline: &str, samples: &[Sample]) {
        for s in samples {
            tracing::info!(target: "wasmon::sink::log", pipeline, "{}", crate::sample::to_line(s));
        }
    }
}

/// Writes every sample to the daemon's stdout as a JSON line (the log goes to stderr), for
/// piping into other tools.
pub struct StdoutSink;

impl Sink for StdoutSink {
    fn name(&self) -> &str {
        "stdout"
    }
    fn accept(&self, _pipeline: &str, samples: &[Sample]) {
        use std::io::Write;
        let mut out = std::io::stdout().lock();
        for s in samples {
            let _ = writeln!(out, "{}", crate::sample::to_line(s));
        }
        let _ = out.flush();
    }
}

/// Sends every batch to a channel (tests, the CLI).
pub struct ChannelSink {
    name: String,
    tx: Mutex<crossbeam_channel::Sender<Vec<Sample>>>,
}

impl ChannelSink {
    pub fn new(name: &str) -> (ChannelSink, crossbeam_channel::Receiver<Vec<Sample>>) {
        let (tx, rx) = crossbeam_channel::unbounded();
        (
            ChannelSink {
                name: name.to_string(),
                tx: Mutex::new(tx),
            },
            rx,
        )
    }
}

impl Sink for ChannelSink {
    fn name(&self) -> &str {
        &self.name
    }
    fn accept(&self, _pipeline: &str, samples: &[Sample]) {
        if !samples.is_empty() {
            let _ = crate::util::lock(&self.tx).send(samples.to_vec());
        }
    }
}
