//! Configuration reload without a restart, shared by SIGHUP and the admin
//! API: read the file the proxy started from again, validate it, and hand
//! its tenants (with the tenant directory) and secrets (with the secrets
//! store) to every engine's core. An invalid file changes nothing.

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

/// What a successful reload took.
#[derive(Debug, Clone, Copy, serde::Serialize)]
pub struct ReloadOutcome {
    pub tenants: usize,
    pub secrets: usize,
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
                tracing::info!(tenants = o.tenants, secrets = o.secrets, "configuration reloaded");
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
        for core in &self.cores {
            core.reload(&settings);
        }
        Ok(ReloadOutcome {
            tenants: settings.tenants.len(),
            secrets: settings.secrets.len(),
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
