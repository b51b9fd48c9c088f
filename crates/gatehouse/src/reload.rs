//! Configuration reload without a restart, shared by SIGHUP and the admin
//! API: read the file the proxy started from again, validate it, and hand
//! its tenants (with the tenant directory), secrets (with the secrets
//! store) and clusters' backends to every engine's core. An invalid file
//! changes nothing; the answer lists what changed in the topology and what
//! needs a restart (new clusters and endpoints, pool settings).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::admin::view::CoreView;

#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error("the configuration was not read from a file, so there is nothing to reload")]
    NoSource,
    #[error("reload refused, the running configuration is kept:\n{0}")]
    Invalid(String),
    #[error("reload failed: {0}")]
    Failed(String),
}

/// What a successful reload took, what it changed in the topology, and
/// what needs a restart to take effect.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ReloadOutcome {
    pub tenants: usize,
    pub secrets: usize,
    pub applied: Vec<String>,
    pub not_applied: Vec<String>,
}

pub struct Reloader {
    source: Option<PathBuf>,
    cores: Vec<Arc<dyn CoreView>>,
    /// One reload at a time: two would race to swap the tenant table.
    running: tokio::sync::Mutex<()>,
    succeeded: AtomicU64,
    refused: AtomicU64,
}

impl Reloader {
    pub fn new(source: Option<PathBuf>, cores: Vec<Arc<dyn CoreView>>) -> Self {
        Self {
            source,
            cores,
            running: tokio::sync::Mutex::new(()),
            succeeded: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Reads the configuration file again and applies it.
    pub async fn reload(&self) -> Result<ReloadOutcome, ReloadError> {
        let _one = self.running.lock().await;
        let result = self.load_and_apply().await;
        match &result {
            Ok(o) => {
                self.succeeded.fetch_add(1, Ordering::Relaxed);
                tracing::info!(tenants = o.tenants, secrets = o.secrets, applied = ?o.applied, not_applied = ?o.not_applied, "configuration reloaded");
                for change in &o.not_applied {
                    tracing::warn!(change, "configuration change not applied: it needs a restart");
                }
            }
            Err(e) => {
                self.refused.fetch_add(1, Ordering::Relaxed);
                tracing::warn!(error = %e, "configuration reload refused");
            }
        }
        result
    }

    async fn load_and_apply(&self) -> Result<ReloadOutcome, ReloadError> {
        let path = self.source.clone().ok_or(ReloadError::NoSource)?;
        let settings = tokio::task::spawn_blocking(move || crate::config::load(&path))
            .await
            .map_err(|e| ReloadError::Failed(e.to_string()))?
            .map_err(|problems| ReloadError::Invalid(problems.to_string()))?;
        let mut applied = Vec::new();
        let mut not_applied = Vec::new();
        for core in &self.cores {
            let report = core.reload(&settings);
            applied.extend(report.applied);
            not_applied.extend(report.not_applied);
        }
        Ok(ReloadOutcome {
            tenants: settings.tenants.len(),
            secrets: settings.secrets.len(),
            applied,
            not_applied,
        })
    }

    /// Reloads so far: (applied, refused).
    pub fn counts(&self) -> (u64, u64) {
        (
            self.succeeded.load(Ordering::Relaxed),
            self.refused.load(Ordering::Relaxed),
        )
    }
}
