//! Configuration reload without a restart, shared by SIGHUP and the admin
//! API: read the file the proxy started from again, validate it, bind the
//! listeners it adds, then hand it to every engine's core (tenants with
//! the tenant directory and their limits, secrets with the secrets store,
//! the failed-login limits, clusters with their backends, health policy
//! and pool settings) and switch the endpoints ([`crate::endpoints`]: their
//! settings, limits and TLS certificates). An invalid file (a certificate
//! that does not load, say), or an address that cannot be bound, changes
//! nothing. The answer names every setting that changed, in `applied` with
//! what changed, or in `not_applied` when it needs a restart (the runtime,
//! parking, the log format, the admin listener and token:
//! [`crate::config::process_changes`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::admin::view::CoreView;
use crate::config::{Settings, Takes};
use crate::endpoints::Endpoints;

/// What a reload answers, defined where the admin API shows it.
pub use gatehouse_admin::process::{ReloadError, ReloadOutcome};

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
        applied.extend(crate::config::credential_changes(&current, &settings));
        // What needs a restart is what differs from the configuration the
        // process started with; what applies, what differs from the last.
        let mut not_applied: Vec<String> = crate::config::process_changes(&self.started, &settings)
            .into_iter()
            .filter(|c| c.takes == Takes::Restart)
            .map(|c| format!("{} changed (needs a restart)", c.key))
            .collect();
        for change in crate::config::process_changes(&current, &settings) {
            match (change.takes, change.key) {
                (Takes::Restart, _) => {}
                // The file was checked: the filter parses.
                (Takes::Reload, "proxy.log_filter") => {
                    match self.log.get().map(|l| l.set_filter(&settings.proxy.log_filter)) {
                        Some(Ok(true)) => applied.push(change.detail),
                        Some(Ok(false)) => {
                            not_applied.push("proxy.log_filter changed (RUST_LOG overrides it)".to_owned())
                        }
                        Some(Err(e)) => not_applied.push(format!("proxy.log_filter: {e}")),
                        None => not_applied
                            .push("proxy.log_filter changed (this process has no logger to change)".to_owned()),
                    }
                }
                (Takes::Reload, _) => applied.push(change.detail),
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

impl gatehouse_admin::process::Reload for Reloader {
    fn reload(&self) -> gatehouse_admin::process::Reloading<'_> {
        Box::pin(Reloader::reload(self))
    }

    fn counts(&self) -> (u64, u64) {
        Reloader::counts(self)
    }
}
