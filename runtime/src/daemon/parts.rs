//! The native parts the daemon runs beside its guests: the buffer store (restored at start,
//! with its retention/checkpoint workers), the notifier, NATS ingest, the process reader and
//! its detectors; and the pipeline sinks that feed the notifier and the forwarding sinks. These are
//! started once: their config sections take effect at the next start, not at a reload.

use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::notify::{Notifier, SampleRef, run_nats_sink};
use crate::pipeline::Sink;
use crate::sample::{Name, Sample};
use crate::store::Store;

/// The store, the notifier and the fabric agent.
pub struct Parts {
    pub store: Arc<Store>,
    /// The fabric agent (`[fabric] enabled`), for the API.
    pub fabric: Option<Arc<crate::fabric::FabricHandle>>,
    pub notifier: Arc<Notifier>,
    /// Cancelled after the pipelines have flushed into the store: the store's workers then
    /// write the final snapshot.
    store_shutdown: CancellationToken,
    store_workers: std::sync::Mutex<Option<tokio::task::JoinHandle<()>>>,
}

impl Parts {
    pub fn open(config: &Config, data_dir: &std::path::Path) -> Result<Parts> {
        let dir = data_dir.join("store");
        let store = Arc::new(
            Store::open(config.store.clone(), &dir)
                .with_context(|| format!("opening the store in {}", dir.display()))?,
        );
        let notifier = Arc::new(Notifier::new(config.notify.clone()));
        let fabric = config
            .fabric
            .enabled
            .then(|| crate::fabric::FabricHandle::new(config.fabric.clone()));
        Ok(Parts {
            fabric,
            store,
            notifier,
            store_shutdown: CancellationToken::new(),
            store_workers: std::sync::Mutex::new(None),
        })
    }

    /// Starts the background tasks: store workers, NATS ingest and sink, the process reader.
    pub fn spawn(
        &self,
        config: &Config,
        shutdown: &CancellationToken,
        procfs_samples: impl FnMut(Vec<Sample>) + Send + 'static,
    ) {
        let store = self.store.clone();
        let token = self.store_shutdown.clone();
        *crate::util::lock(&self.store_workers) =
            Some(tokio::spawn(crate::store::run_workers(store, token)));
        // Supervised: a run that fails (no server answers, a panic) starts again.
        if let Some(nats) = config.nats.clone() {
            let (store, token) = (self.store.clone(), shutdown.clone());
            crate::supervise::spawn("nats-ingest", shutdown.clone(), move |h| {
                let (store, nats, token) = (store.clone(), nats.clone(), token.clone());
                async move {
                    crate::ingest::run_nats_ingest(store, nats, token, h)
                        .await
                        .map_err(|e| e.to_string())
                }
            });
        }
        if let Some(nats) = config.notify.nats.clone() {
            let (notifier, token) = (self.notifier.clone(), shutdown.clone());
            crate::supervise::spawn("notify-nats", shutdown.clone(), move |h| {
                let (notifier, nats, token) = (notifier.clone(), nats.clone(), token.clone());
                async move {
                    h.working();
                    run_nats_sink(notifier, nats, token)
                        .await
                        .map_err(|e| e.to_string())
                }
            });
        }
        let (notifier, token, cfg) = (
            self.notifier.clone(),
            shutdown.clone(),
            config.procfs.clone(),
        );
        let to_pipeline = cfg.pipeline.is_some();
        let mut deliver = procfs_samples;
        tokio::spawn(async move {
            // Each process's and thread's resource is the same allocation pass after pass, and
            // the metric names are interned once: the store sink finds a process's level by
            // its resource's address, not by resolving it again per sample and pass.
            let mut resources = crate::sample::Resources::default();
            let mut names: Vec<(&'static str, Name)> = Vec::new();
            let on_snapshot = move |snap: &crate::procfs::Snapshot| {
                if !to_pipeline {
                    return;
                }
                let mut batch = Vec::with_capacity(snap.procs.len() * 8 + snap.threads.len() * 3);
                crate::procfs::for_each_sample(snap, |metric, instance, value| {
                    let name = match names.iter().find(|(m, _)| std::ptr::eq(*m, metric)) {
                        Some((_, n)) => *n,
                        None => {
                            let n = Name::new(metric);
                            names.push((metric, n));
                            n
                        }
                    };
                    batch.push(Sample {
                        name,
                        resource: resources.get(instance),
                        unit: Name::EMPTY,
                        kind: crate::sample::Kind::Gauge,
                        value,
                        timestamp_ns: snap.ts_ns,
                        metadata: crate::sample::Metadata::default(),
                    });
                });
                resources.next_poll();
                deliver(batch);
            };
            if let Err(e) =
                crate::procfs::run_detectors_with(notifier, cfg, token, on_snapshot).await
            {
                tracing::error!(error = %e, "process reader stopped");
            }
        });
    }

    /// Starts the fabric agent, if configured; `samples` feeds its pipeline.
    pub fn spawn_fabric(
        &self,
        shutdown: &CancellationToken,
        samples: impl FnMut(Vec<Sample>) + Send + 'static,
    ) {
        let Some(handle) = self.fabric.clone() else {
            return;
        };
        let (notifier, token) = (self.notifier.clone(), shutdown.clone());
        // Shared by the agent's runs: a restarted agent feeds the same pipeline.
        let samples = Arc::new(std::sync::Mutex::new(samples));
        crate::supervise::spawn("fabric", shutdown.clone(), move |h| {
            let (handle, notifier, token) = (handle.clone(), notifier.clone(), token.clone());
            let samples = samples.clone();
            let deliver = Box::new(move |batch: Vec<Sample>| (crate::util::lock(&samples))(batch));
            async move {
                crate::fabric::run_agent(handle, notifier, deliver, token, h)
                    .await
                    .map_err(|e| format!("{e:#}"))
            }
        });
    }

    /// After the pipelines' final flush: the store's last snapshot, awaited.
    pub async fn close(&self) {
        self.store_shutdown.cancel();
        let workers = crate::util::lock(&self.store_workers).take();
        if let Some(w) = workers {
            let _ = w.await;
        }
    }
}

/// Pipeline output into a forwarding sink's queue.
pub struct ForwardSink(pub Arc<crate::sink::Forwarder>);

impl Sink for ForwardSink {
    fn name(&self) -> &str {
        self.0.name()
    }

    fn accept(&self, _pipeline: &str, samples: &[Sample]) {
        self.0.accept(samples);
    }
}

/// Pipeline output into the notifier: metric = sample name, instance = resource.
pub struct NotifySink(pub Arc<Notifier>);

impl Sink for NotifySink {
    fn name(&self) -> &str {
        "notify"
    }

    fn accept(&self, _pipeline: &str, samples: &[Sample]) {
        self.0.observe_batch(samples.iter().map(|s| SampleRef {
            metric: &s.name,
            instance: &s.resource,
            value: s.value,
            ts_ns: s.timestamp_ns,
        }));
    }
}
