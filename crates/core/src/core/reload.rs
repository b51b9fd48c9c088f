//! A reloaded configuration taken by one engine's core, in place: tenants
//! and their limits (client and backend connection places resized, held
//! places kept), backend credentials (each pool from its own secret), token
//! keys, proxy timeouts, the failed-login limits ([`crate::limits`]), and
//! the clusters of this engine: added ones are listed and
//! probed at once, removed ones are unlisted (their pools retired, their
//! monitor stopped), and kept ones take their new backends, health policy,
//! hold, weights and pool settings while sessions run on them. Endpoints
//! (listeners) are the binary's (`gatehouse::endpoints`).
//!
//! The configuration was validated before any of this runs; nothing here
//! can fail half-way.

use std::sync::Arc;

use super::Core;
use crate::config::{ClusterSettings, Settings};
use crate::engine::Engine;
use crate::topology::ClusterState;

/// What a reload changed in one engine's core, and what it could not.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReloadReport {
    pub applied: Vec<String>,
    pub not_applied: Vec<String>,
}

impl<E: Engine> Core<E> {
    /// Takes a reloaded, validated configuration (see the module comment).
    pub fn reload(self: &Arc<Self>, settings: &Arc<Settings>) -> ReloadReport {
        let old = self.settings.load_full();
        self.tenants.replace(settings.tenants.clone());
        self.limits.retain_tenants(|name| settings.tenants.contains_key(name));
        let tenant = |name: &str| settings.tenants.get(name).cloned();
        super::retune_slots(&self.tenant_slots, |n| tenant(n)?.max_client_connections);
        super::retune_slots(&self.tenant_backend_slots, |n| tenant(n)?.max_backend_connections);
        self.limits.set_failure_limits(
            settings.proxy.auth_failures_per_minute_per_address,
            settings.proxy.auth_failures_per_minute_per_user,
        );
        // Pools in use take the new credentials of their own secret now
        // (by its name: two secrets may share a backend user name, say one
        // for a PostgreSQL and one for a MariaDB cluster): sessions that
        // logged in before the reload keep working.
        for pool in self.pools.all() {
            if let Some(secret) = settings.secrets.get(&pool.secret_name())
                && pool.rotate(secret)
            {
                tracing::info!(user = %pool.key().user, database = %pool.key().database, "backend credentials rotated");
            }
        }
        let mut report = ReloadReport::default();
        self.reload_clusters(&old, settings, &mut report);
        if old.digests != settings.digests {
            self.digests.store(super::digest_store(settings));
        }
        self.settings.store(settings.clone());
        // Sessions take their views again from here on (after the stores).
        self.reloads.fetch_add(1, std::sync::atomic::Ordering::Release);
        tracing::info!(engine = E::NAME, tenants = settings.tenants.len(), applied = ?report.applied, not_applied = ?report.not_applied, "tenants, secrets and topology reloaded");
        report
    }

    fn reload_clusters(self: &Arc<Self>, old: &Settings, new: &Settings, report: &mut ReloadReport) {
        let mine = |c: &&Arc<ClusterSettings>| c.engine == E::KIND;
        for n in new.clusters.iter().filter(mine) {
            let current = self.topology.cluster(&n.name);
            let before = old.clusters.iter().find(|c| c.name == n.name && c.engine == E::KIND);
            match (current, before) {
                (Some(state), Some(o)) if o.monitor.is_some() == n.monitor.is_some() => {
                    self.reload_cluster(&state, o, n, report);
                }
                (current, _) => {
                    // New, or its roles go from probed to configured (or
                    // back): a fresh cluster state, its pools replaced.
                    let replaced = current.is_some();
                    if replaced {
                        self.pools.retire_cluster(&n.name);
                    }
                    let state = Arc::new(ClusterState::new(n));
                    self.topology.insert(state.clone());
                    if n.monitor.is_some() {
                        tokio::spawn(super::monitor::monitor(self.clone(), state, true));
                    }
                    report.applied.push(if replaced {
                        format!(
                            "cluster \"{}\": monitor_secret added or removed: roles rediscovered, connections replaced",
                            n.name
                        )
                    } else {
                        format!("cluster \"{}\" added", n.name)
                    });
                }
            }
        }
        for state in self.topology.all() {
            if !new.clusters.iter().filter(mine).any(|c| c.name == state.name) {
                self.topology.remove(&state.name);
                // Wakes its monitor, which sees it is gone and stops.
                state.probe_now.notify_one();
                let closed = self.pools.retire_cluster(&state.name);
                tracing::info!(cluster = %state.name, closed, "cluster removed");
                report.applied.push(format!("cluster \"{}\" removed", state.name));
            }
        }
    }

    /// A cluster kept by a reload takes its new settings in place.
    fn reload_cluster(
        &self,
        state: &ClusterState,
        old: &ClusterSettings,
        new: &Arc<ClusterSettings>,
        report: &mut ReloadReport,
    ) {
        let (added, removed) = state.set_backends(&new.backends, new.monitor.is_some(), &new.weights);
        state.set_settings(new);
        self.pools.reconfigure(new);
        for a in &added {
            report
                .applied
                .push(format!("cluster \"{}\": backend {a} added", new.name));
        }
        for r in &removed {
            self.pools.retire_backend(&new.name, r);
            report
                .applied
                .push(format!("cluster \"{}\": backend {r} removed", new.name));
        }
        let changed = crate::config::cluster_changes(old, new);
        if !added.is_empty()
            || changed
                .iter()
                .any(|f| f.starts_with("health_check") || *f == "monitor_secret")
        {
            // New backends are probed now, a new policy applies now.
            state.probe_now.notify_one();
        }
        for field in changed {
            report
                .applied
                .push(format!("cluster \"{}\": {field} changed", new.name));
        }
    }
}
