//! What a reload did, pipeline by pipeline and part by part: returned by the admin endpoint,
//! logged on SIGHUP and file changes, and kept for the live view.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::pipeline::SwapOutcome;

/// What a reload did to one pipeline.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "kebab-case", tag = "result")]
pub enum PipelineOutcome {
    Started,
    Swapped(SwapOutcome),
    Stopped,
    /// The new version was refused; the old one (if any) keeps running.
    Rejected {
        error: String,
    },
}

/// What a reload did.
#[derive(Debug, Clone, Serialize, Default)]
pub struct ReloadOutcome {
    /// The config itself was refused (nothing changed).
    pub config_error: Option<String>,
    pub pipelines: BTreeMap<String, PipelineOutcome>,
    /// The namespace and agents were refused (the running ones are kept).
    pub agents_error: Option<String>,
    /// Agents (re)started by this reload; unchanged ones keep running.
    pub agents_started: Vec<String>,
    /// Changed settings that take effect only at the next start; until then the running
    /// values stay (and are what `GET /api/config` reports).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub restart_required: Vec<String>,
    /// Forwarding sinks started, reconfigured or stopped.
    pub sinks: crate::sink::SinksOutcome,
    /// Whether quarantined guests were let out (only when the reload asked for it).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub released: bool,
}

impl ReloadOutcome {
    /// Whether everything asked for was applied.
    pub fn ok(&self) -> bool {
        self.config_error.is_none()
            && self.agents_error.is_none()
            && !self
                .pipelines
                .values()
                .any(|p| matches!(p, PipelineOutcome::Rejected { .. }))
    }

    pub fn log(&self) {
        if let Some(e) = &self.config_error {
            tracing::error!(error = %e, "reload refused: the config is invalid; the running version is kept");
        }
        if let Some(e) = &self.agents_error {
            tracing::error!(error = %e, "agents refused; the running namespace and agents are kept");
        }
        if !self.agents_started.is_empty() {
            tracing::info!(agents = ?self.agents_started, "agents started");
        }
        if !self.restart_required.is_empty() {
            tracing::warn!(settings = ?self.restart_required, "changed settings take effect at the next start; the running values are kept");
        }
        for (name, p) in &self.pipelines {
            match p {
                PipelineOutcome::Rejected { error } => {
                    tracing::error!(pipeline = %name, %error, "reload of pipeline refused; the running version is kept")
                }
                PipelineOutcome::Swapped(s) if s.replaced.is_empty() => {}
                other => tracing::info!(pipeline = %name, outcome = ?other, "reloaded"),
            }
        }
    }
}
