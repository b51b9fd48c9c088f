//! The engine-agnostic state one proxy instance shares between its sessions:
//! the configuration snapshot, pools, topology, cancel registry and abuse
//! limits for one engine. Passed around as `Arc<Core<E>>`; nothing here is global.

use std::sync::Arc;

use tokio::sync::watch;

use crate::cancel::CancelRegistry;
use crate::config::Settings;
use crate::engine::Engine;
use crate::pool::Pools;
use crate::topology::Topology;

/// What a reload changed in one engine's core, and what it could not.
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct ReloadReport {
    pub applied: Vec<String>,
    pub not_applied: Vec<String>,
}

pub struct Core<E: Engine> {
    pub settings: Arc<Settings>,
    /// Who may log in; replaced on reload (see [`Core::reload`]).
    pub tenants: crate::tenants::Tenants,
    pub engine: Arc<E>,
    pub pools: Arc<Pools<E>>,
    /// Backend connections in use per (tenant, its limit), for tenants with
    /// `max_backend_connections` (a changed limit starts a new count).
    pub tenant_backend_slots: std::sync::Mutex<std::collections::HashMap<(String, u32), Arc<tokio::sync::Semaphore>>>,
    /// Client connections per tenant, for tenants with a limit.
    pub tenant_slots: std::sync::Mutex<std::collections::HashMap<String, Arc<tokio::sync::Semaphore>>>,
    pub topology: Topology,
    /// Failed-login and per-tenant connection-rate limiters.
    pub limits: crate::limits::Limits,
    pub cancels: Arc<CancelRegistry<E::CancelTarget>>,
    pub stats: crate::stats::Stats,
    /// Per-process seed for mock authentication of unknown users, so the
    /// same unknown name always sees the same salt.
    pub auth_mock_seed: [u8; 32],
    /// Bounds concurrent password hashing (PBKDF2) off the network thread.
    pub hashing: Arc<tokio::sync::Semaphore>,
    /// Becomes `true` when the proxy is shutting down.
    pub shutdown: watch::Receiver<bool>,
    /// Where idle sessions park, unless parking is off.
    pub parking: Option<crate::park::ParkingLot>,
}

impl<E: Engine> Core<E> {
    /// A client-connection slot for `tenant`, or `None` when it is at its limit.
    pub fn tenant_slot(&self, tenant: &crate::config::Tenant) -> Option<Option<tokio::sync::OwnedSemaphorePermit>> {
        let Some(limit) = tenant.max_client_connections else {
            return Some(None);
        };
        let sem = self
            .tenant_slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry(tenant.name.clone())
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(limit as usize)))
            .clone();
        sem.try_acquire_owned().ok().map(Some)
    }

    /// After authentication: the tenant's connection rate and client
    /// connection limit, checked only now so a stranger learns nothing of
    /// them. The slot is held for the session's life.
    pub fn admit_tenant(
        &self,
        tenant: &crate::config::Tenant,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, crate::error::ProxyError> {
        use crate::error::{Condition, ProxyError};
        if !self.limits.connection_allowed(&tenant.name, tenant.connection_rate) {
            return Err(ProxyError::new(
                Condition::TooManyConnections,
                format!("connection rate limit reached for user \"{}\"", tenant.name),
            ));
        }
        self.tenant_slot(tenant).ok_or_else(|| {
            ProxyError::new(
                Condition::TooManyConnections,
                format!(
                    "too many connections for tenant \"{}\" (limit {})",
                    tenant.name,
                    tenant.max_client_connections.unwrap_or(0)
                ),
            )
        })
    }

    /// Takes a reloaded configuration: tenants, backend credentials, and
    /// each cluster's backends (added ones are probed at once and take
    /// their share of new leases as soon as they answer; removed ones get
    /// no new lease, and their connections close as their leases end).
    /// What cannot change without a restart is listed, not applied.
    pub fn reload(&self, settings: &Settings) -> ReloadReport {
        self.tenants.replace(settings.tenants.clone());
        self.limits.retain_tenants(|name| settings.tenants.contains_key(name));
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
        self.reload_topology(settings, &mut report);
        tracing::info!(engine = E::NAME, tenants = settings.tenants.len(), applied = ?report.applied, not_applied = ?report.not_applied, "tenants, secrets and topology reloaded");
        report
    }

    fn reload_topology(&self, settings: &Settings, report: &mut ReloadReport) {
        let mine = |c: &&Arc<crate::config::ClusterSettings>| c.engine == E::KIND;
        for new in settings.clusters.iter().filter(mine) {
            let Some(old) = self.settings.clusters.iter().find(|c| c.name == new.name) else {
                report
                    .not_applied
                    .push(format!("cluster \"{}\" added (needs a restart)", new.name));
                continue;
            };
            if let Some(state) = self.topology.cluster(&new.name) {
                let (added, removed) = state.set_backends(&new.backends, old.monitor.is_some(), &new.weights);
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
                if !added.is_empty() {
                    state.probe_now.notify_one();
                }
            }
            for field in crate::config::cluster_changes(old, new) {
                report
                    .not_applied
                    .push(format!("cluster \"{}\": {field} changed (needs a restart)", new.name));
            }
        }
        for old in self.settings.clusters.iter().filter(mine) {
            if !settings.clusters.iter().any(|c| c.name == old.name) {
                report
                    .not_applied
                    .push(format!("cluster \"{}\" removed (needs a restart)", old.name));
            }
        }
        for change in crate::config::endpoint_changes(&self.settings.endpoints, &settings.endpoints, E::KIND) {
            report.not_applied.push(format!("{change} (needs a restart)"));
        }
    }

    /// The cap on `tenant`'s backend connections in use, if it has one.
    pub fn tenant_backend_cap(&self, tenant: &crate::config::Tenant) -> Option<crate::pool::TenantCap> {
        let limit = tenant.max_backend_connections?;
        let slots = self
            .tenant_backend_slots
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .entry((tenant.name.clone(), limit))
            .or_insert_with(|| Arc::new(tokio::sync::Semaphore::new(limit as usize)))
            .clone();
        Some(crate::pool::TenantCap {
            tenant: Arc::from(tenant.name.as_str()),
            limit,
            slots,
        })
    }

    pub fn new(
        settings: Arc<Settings>,
        engine: E,
        shutdown: watch::Receiver<bool>,
        parking: Option<crate::park::ParkingLot>,
    ) -> Self {
        let topology = Topology::new(&settings);
        Self {
            tenants: crate::tenants::Tenants::new(settings.tenants.clone()),
            pools: Arc::new(Pools::new()),
            tenant_slots: Default::default(),
            tenant_backend_slots: Default::default(),
            topology,
            limits: crate::limits::Limits::new(
                settings.proxy.auth_failures_per_minute_per_address,
                settings.proxy.auth_failures_per_minute_per_user,
            ),
            cancels: Arc::new(CancelRegistry::default()),
            stats: crate::stats::Stats::default(),
            engine: Arc::new(engine),
            settings,
            auth_mock_seed: rand::random(),
            hashing: Arc::new(tokio::sync::Semaphore::new(
                std::thread::available_parallelism().map_or(2, |n| n.get()),
            )),
            shutdown,
            parking,
        }
    }
}
