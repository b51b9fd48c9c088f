//! What the admin API sees of one engine's core: a plain snapshot of pools,
//! backends, tenants and counters (never a credential), and the reload hook.
//! [`CoreView`] erases the engine type so one admin server serves both.

use std::collections::BTreeMap;

use serde::Serialize;

use crate::config::Settings;
use crate::core::Core;
use crate::engine::Engine;
use crate::topology::Role;

#[derive(Debug, Serialize)]
pub struct PoolView {
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
    pub idle: usize,
    pub leased: usize,
}

#[derive(Debug, Serialize)]
pub struct BackendView {
    pub cluster: String,
    pub backend: String,
    pub role: &'static str,
    pub up: bool,
    pub max_connections: Option<u32>,
}

#[derive(Debug, Serialize)]
pub struct ErrorCount {
    pub kind: &'static str,
    pub condition: &'static str,
    pub count: u64,
}

#[derive(Debug, Serialize)]
pub struct CoreSnapshot {
    pub engine: &'static str,
    pub tenants: usize,
    pub pools: Vec<PoolView>,
    pub backends: Vec<BackendView>,
    pub pinned_sessions: BTreeMap<&'static str, u64>,
    pub errors: Vec<ErrorCount>,
    pub accepted_connections: u64,
}

/// One engine's core, as the admin API and reloads use it.
pub trait CoreView: Send + Sync {
    fn snapshot(&self) -> CoreSnapshot;
    /// Takes the tenants and secrets of `settings` (see [`Core::reload`]).
    fn reload(&self, settings: &Settings);
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Unknown => "unknown",
        Role::Writer => "writer",
        Role::Reader => "reader",
    }
}

impl<E: Engine> CoreView for Core<E> {
    fn snapshot(&self) -> CoreSnapshot {
        let mut pools: Vec<PoolView> = self
            .pools
            .all()
            .iter()
            .map(|p| {
                let k = p.key();
                PoolView {
                    cluster: k.cluster.clone(),
                    backend: k.backend.clone(),
                    user: k.user.clone(),
                    database: k.database.clone(),
                    idle: p.idle_count(),
                    leased: p.leased_count(),
                }
            })
            .collect();
        pools.sort_by(|a, b| {
            (&a.cluster, &a.backend, &a.user, &a.database).cmp(&(&b.cluster, &b.backend, &b.user, &b.database))
        });
        let mut backends = Vec::new();
        for cluster in self.settings.clusters.iter().filter(|c| c.engine == E::KIND) {
            if let Some(state) = self.topology.cluster(&cluster.name) {
                for b in &state.backends {
                    let h = b.health();
                    backends.push(BackendView {
                        cluster: cluster.name.clone(),
                        backend: b.addr.clone(),
                        role: role_name(h.role),
                        up: h.up,
                        max_connections: h.max_connections,
                    });
                }
            }
        }
        let errors = self
            .stats
            .errors()
            .into_iter()
            .map(|((kind, condition), count)| ErrorCount { kind, condition, count })
            .collect();
        CoreSnapshot {
            engine: E::NAME,
            tenants: self.tenants.len(),
            pools,
            backends,
            pinned_sessions: self.stats.pins(),
            errors,
            accepted_connections: self.stats.accepted(),
        }
    }

    fn reload(&self, settings: &Settings) {
        Core::reload(self, settings);
    }
}
