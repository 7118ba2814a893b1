//! Guest sinks' exporters: an exporter guest (the `exporter` world) behind the sink's
//! [`Exporter`] trait, so that the sink keeps knowing no wasm. One instance per sink, called
//! by its sender one batch at a time. Beside them, the daemon's record of each running
//! exporter's version and counters ([`ExporterBook`]), which the fleet judges it by.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::Daemon;
use crate::config::Config;
use crate::host::{CallError, ExporterInstance, ExporterWorld, GuestStats, Image};
use crate::sample::Sample;
use crate::sink::{Encoding, Exporter, Request, SinkConfig};

struct GuestExporter {
    instance: Mutex<ExporterInstance>,
    identity: String,
}

impl Exporter for GuestExporter {
    fn encode(&self, samples: &[Sample]) -> Encoding {
        let mut instance = crate::util::lock(&self.instance);
        match instance.encode(samples) {
            Ok(Ok(requests)) => Encoding::Requests(
                requests
                    .into_iter()
                    .map(|r| Request {
                        suffix: r.suffix,
                        content_type: r.content_type,
                        headers: r.headers,
                        body: r.body.into(),
                    })
                    .collect(),
            ),
            Ok(Err(why)) => Encoding::Refused(why),
            Err(CallError::Quarantined(d)) => Encoding::Quarantined(d),
            Err(e) => Encoding::Failed(e.to_string()),
        }
    }

    fn identity(&self) -> String {
        self.identity.clone()
    }
}

/// The component hash and counters of every exporter made, by sink and exporter identity.
/// The sink knows its exporter only as a wasm-free [`Exporter`], so what the fleet needs to
/// judge a version (its hash, its calls and failures) is kept here, and looked up by the
/// identity of the exporter the sink runs: an exporter made by a reload that then failed, or
/// one dropped because the sink kept its own, is never the one looked up.
#[derive(Default)]
pub(super) struct ExporterBook(Mutex<HashMap<(String, String), Noted>>);

/// A made exporter's component hash and its image's counters.
type Noted = (String, Arc<GuestStats>);

impl ExporterBook {
    fn note(&self, sink: &str, identity: &str, hash: &str, stats: Arc<GuestStats>) {
        crate::util::lock(&self.0).insert(
            (sink.to_string(), identity.to_string()),
            (hash.to_string(), stats),
        );
    }

    /// The hash and counters of the exporter `identity` of sink `sink`.
    pub(super) fn get(&self, sink: &str, identity: &str) -> Option<Noted> {
        crate::util::lock(&self.0)
            .get(&(sink.to_string(), identity.to_string()))
            .cloned()
    }

    /// Forgets every exporter but the ones `running` says each sink runs (after a reload):
    /// the book holds one entry per guest sink, not one per reload.
    pub(super) fn keep_only(&self, running: impl Fn(&str) -> Option<String>) {
        crate::util::lock(&self.0)
            .retain(|(sink, identity), _| running(sink).as_deref() == Some(identity));
    }
}

impl Daemon {
    /// The exporter of the guest sink `sink`: resolved like any guest reference (the fleet's
    /// version first), compiled, linked against the exporter world and configured with the
    /// sink's `params`; a guest that is not an exporter or refuses its parameters is a
    /// config error naming the sink.
    pub(super) fn make_exporter(
        &self,
        config: &Config,
        sink: &SinkConfig,
    ) -> Result<Arc<dyn Exporter>> {
        let reference = sink
            .guest
            .as_deref()
            .context("a guest sink names its guest")?;
        let source = self.resolve(config, reference)?;
        let compiled = self.compile(&source)?;
        let name = format!("sink:{}:{reference}", sink.name);
        let limits = crate::config::GuestLimits {
            deadline: Some(sink.deadline),
            memory: Some(sink.memory),
            ..Default::default()
        };
        let guest = self.guest_config(config, &name, &sink.params, &limits)?;
        let identity = format!(
            "{} {} {:?} {}",
            compiled.hash, guest.params, guest.deadline, guest.memory
        );
        let instance = Image::<ExporterWorld>::load(&self.runtime, &compiled, guest)?;
        self.exporters.note(
            &sink.name,
            &identity,
            &compiled.hash,
            instance.image().stats().clone(),
        );
        Ok(Arc::new(GuestExporter {
            instance: Mutex::new(instance),
            identity,
        }))
    }
}
