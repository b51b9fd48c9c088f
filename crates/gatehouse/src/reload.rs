//! Configuration reload without a restart, shared by SIGHUP and the admin
//! API: read the file the proxy started from again, validate it, bind the
//! listeners it adds, then hand it to every engine's core (tenants with
//! the tenant directory, secrets with the secrets store, clusters with
//! their backends, health policy and pool settings) and switch the
//! endpoints ([`crate::endpoints`]). An invalid file, or an address that
//! cannot be bound, changes nothing; the answer lists what changed and
//! what needs a restart (the runtime, the admin listener, parking).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::admin::view::CoreView;
use crate::config::Settings;
use crate::endpoints::Endpoints;

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
    /// The configuration the proxy started with (what needs a restart is
    /// compared with it).
    started: Arc<Settings>,
    /// The configuration applied last (rule counters carry over from it).
    current: arc_swap::ArcSwap<Settings>,
    cores: Vec<Arc<dyn CoreView>>,
    endpoints: Arc<Endpoints>,
    /// One reload at a time: two would race to swap the tenant table.
    running: tokio::sync::Mutex<()>,
    /// The running logger's filter, when the process set one up.
    log: std::sync::OnceLock<crate::logging::LogControl>,
    succeeded: AtomicU64,
    refused: AtomicU64,
}

impl Reloader {
    pub fn new(started: Arc<Settings>, cores: Vec<Arc<dyn CoreView>>, endpoints: Arc<Endpoints>) -> Self {
        Self {
            source: started.source.clone(),
            current: arc_swap::ArcSwap::new(started.clone()),
            started,
            cores,
            endpoints,
            running: tokio::sync::Mutex::new(()),
            log: std::sync::OnceLock::new(),
            succeeded: AtomicU64::new(0),
            refused: AtomicU64::new(0),
        }
    }

    /// Hands over the logger's filter, for reloads to change; once (a
    /// second call is ignored).
    pub fn control_logging(&self, log: crate::logging::LogControl) {
        let _ = self.log.set(log);
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
        let current = self.current.load_full();
        // Once, before any core sees the new rules: identical rules keep counting.
        settings.rules.carry_counters_from(&current.rules);
        let settings = Arc::new(settings);
        let prepared = self
            .endpoints
            .prepare(&settings)
            .await
            .map_err(|e| ReloadError::Invalid(e.to_string()))?;
        let mut applied = crate::config::rules_changes(&current, &settings);
        let mut not_applied: Vec<String> = crate::config::restart_changes(&self.started, &settings)
            .into_iter()
            .map(|f| format!("{f} changed (needs a restart)"))
            .collect();
        if current.proxy.log_filter != settings.proxy.log_filter {
            // The file was checked: the filter parses.
            match self.log.get().map(|l| l.set_filter(&settings.proxy.log_filter)) {
                Some(Ok(true)) => applied.push(format!("proxy.log_filter changed to {:?}", settings.proxy.log_filter)),
                Some(Ok(false)) => not_applied.push("proxy.log_filter changed (RUST_LOG overrides it)".to_owned()),
                Some(Err(e)) => not_applied.push(format!("proxy.log_filter: {e}")),
                None => not_applied.push("proxy.log_filter changed (this process has no logger to change)".to_owned()),
            }
        }
        for core in &self.cores {
            let report = core.clone().reload(&settings);
            applied.extend(report.applied);
            not_applied.extend(report.not_applied);
        }
        let (changed, stopped) = self.endpoints.commit(&settings, prepared);
        applied.extend(changed);
        // The reload answers once the old accept loops are gone: a removed
        // endpoint no longer accepts connections by then.
        for task in stopped {
            let _ = task.await;
        }
        self.current.store(settings.clone());
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
