//! Guest sinks' exporters: an exporter guest (the `exporter` world) behind the sink's
//! [`Exporter`] trait, so that the sink keeps knowing no wasm. One instance per sink, called
//! by its sender one batch at a time.

use std::sync::{Arc, Mutex};

use anyhow::{Context, Result};

use super::reload::Daemon;
use crate::config::Config;
use crate::host::{CallError, ExporterInstance, ExporterWorld, Image};
use crate::sample::Sample;
use crate::sink::{Encoding, Exporter, Request, SinkConfig};

struct GuestExporter {
    instance: Mutex<ExporterInstance>,
    identity: String,
}

impl Exporter for GuestExporter {
    fn encode(&self, samples: &[Sample]) -> Encoding {
        let mut instance = self.instance.lock().unwrap_or_else(|p| p.into_inner());
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
        let guest = self.guest_config(
            config,
            &name,
            &sink.params,
            Some(sink.deadline),
            Some(sink.memory),
            None,
            &crate::host::Grants::default(),
        )?;
        let identity = format!(
            "{} {} {:?} {}",
            compiled.hash, guest.params, guest.deadline, guest.memory
        );
        let instance = Image::<ExporterWorld>::load(&self.runtime, &compiled, guest)?;
        Ok(Arc::new(GuestExporter {
            instance: Mutex::new(instance),
            identity,
        }))
    }
}
