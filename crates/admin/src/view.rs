//! What the admin API sees of one engine's core: a plain snapshot of pools,
//! backends, tenants and counters (never a credential), and the reload hook.
//! [`CoreView`] erases the engine type so one admin server serves both.

use std::collections::BTreeMap;
use std::sync::Arc;

use serde::Serialize;

use gatehouse_core::core::Core;
use gatehouse_core::engine::Engine;
use gatehouse_core::topology::Role;
use gatehouse_settings::config::Settings;

#[derive(Debug, Serialize)]
pub struct PoolView {
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
    pub idle: usize,
    pub leased: usize,
    /// Connections open (idle or lent): what the pool holds on the server.
    pub open: usize,
}

#[derive(Debug, Serialize)]
pub struct BackendView {
    pub cluster: String,
    pub backend: String,
    /// What the backend says it is: "writer", "reader" or "unknown".
    pub role: &'static str,
    pub up: bool,
    /// The cluster's elected writer (read/write endpoints route to it).
    pub elected: bool,
    /// A lost writer, not used as one until it reports read-only.
    pub fenced: bool,
    pub lag_seconds: Option<f64>,
    pub position: Option<String>,
    /// Leases outstanding on it now, and routed to it since start.
    pub leases: usize,
    pub routed: u64,
    pub max_connections: Option<u32>,
    pub last_error: Option<String>,
}

/// A cluster's writer, its waiting sessions and its failovers.
#[derive(Debug, Serialize)]
pub struct ClusterView {
    pub cluster: String,
    pub writer: Option<String>,
    /// Sessions waiting for a backend to route to (no writer, no replica).
    pub waiting: usize,
    /// Leases routed since start, by why the router chose their backend.
    pub routed: BTreeMap<&'static str, u64>,
    pub failovers: Vec<gatehouse_core::topology::FailoverEvent>,
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
    pub clusters: Vec<ClusterView>,
    pub pinned_sessions: BTreeMap<&'static str, u64>,
    pub errors: Vec<ErrorCount>,
    pub accepted_connections: u64,
}

/// Whether an endpoint could serve a transaction now, as the router sees
/// it (readiness).
#[derive(Debug, Clone, serde::Serialize)]
pub struct Readiness {
    pub endpoint: String,
    pub cluster: String,
    pub role: &'static str,
    pub ready: bool,
    /// The backend the next lease would get.
    pub backend: Option<String>,
    /// Why that backend (the router's reason), or why none: `paused`, or
    /// `no usable backend` (every one down, draining, fenced, lagging, or
    /// none elected writer).
    pub why: &'static str,
}

/// One engine's core, as the admin API and reloads use it.
pub trait CoreView: Send + Sync {
    fn snapshot(&self) -> CoreSnapshot;
    /// Each of this engine's endpoints: could it serve a transaction now.
    fn readiness(&self) -> Vec<Readiness>;
    /// Takes a reloaded configuration (see [`Core::reload`]).
    fn reload(self: Arc<Self>, settings: &Arc<Settings>) -> gatehouse_core::core::ReloadReport;
    /// An operator command (see [`gatehouse_core::topology::operate`]); `None`
    /// when the cluster or endpoint it names is not this engine's.
    fn operate(&self, op: &Operation) -> Option<Result<(), String>>;
    /// A switchover of `cluster` to `target`; `None` when the cluster is
    /// not this engine's. Resolves to the new writer.
    fn switchover<'a>(&'a self, cluster: &'a str, target: &'a str) -> Option<Switching<'a>>;
    /// The engine's per-digest statistics, heaviest first (at most
    /// `limit`); `None` when they are off.
    fn digests(&self, limit: Option<usize>) -> Option<Vec<gatehouse_core::digests::DigestRow>>;
    /// Forgets the engine's digest statistics.
    fn reset_digests(&self);
    /// The configuration the engine runs with now (its query rules).
    fn settings_now(&self) -> Arc<Settings>;
    /// The engine's name (`postgres`, `mysql`).
    fn engine_name(&self) -> &'static str;
    /// The engine's logged-in clients, by id.
    fn clients(&self) -> Vec<gatehouse_core::cancel::ClientRow>;
    /// The engine's idle backend connections (those lent out are the
    /// active clients' `server`).
    fn idle_servers(&self) -> Vec<IdleServer>;
    /// Sessions pinned now, by reason.
    fn pinned_now(&self) -> BTreeMap<&'static str, usize>;
    /// Asks client `id` of this engine to end; false when it has none.
    fn kill(&self, id: u32) -> bool;
    /// Closes `endpoint` to new logins or opens it again; `None` when it
    /// is not this engine's.
    fn set_disabled(&self, endpoint: &str, disabled: bool) -> Option<()>;
    /// Whether `endpoint` is closed to new logins.
    fn is_disabled(&self, endpoint: &str) -> bool;
    /// What the engine's sessions and pools counted ([`gatehouse_core::meter`]).
    fn traffic(&self) -> Traffic;
}

/// An idle backend connection in a pool.
#[derive(Debug, Clone)]
pub struct IdleServer {
    pub cluster: String,
    pub backend: String,
    pub user: String,
    pub database: String,
    pub server_id: u32,
    /// What its TLS session agreed on; `None` in plain text.
    pub tls: Option<Arc<str>>,
    pub age: std::time::Duration,
    pub idle_for: std::time::Duration,
    /// How many times it moved to another tenant's pool.
    pub switches: u32,
}

/// One engine's counters for `/metrics`: per endpoint (each of its
/// configured endpoints, used or not), per tenant (all of them: the top N
/// are chosen across engines), and backend connections opened per backend.
#[derive(Debug)]
pub struct Traffic {
    pub engine: &'static str,
    pub endpoints: Vec<gatehouse_core::meter::EndpointCounts>,
    pub tenants: Vec<gatehouse_core::meter::TenantCounts>,
    pub backends: Vec<gatehouse_core::pool::BackendConnects>,
}

/// A switchover under way: resolves to the new writer, or why it failed.
pub type Switching<'a> = std::pin::Pin<Box<dyn std::future::Future<Output = Result<String, String>> + Send + 'a>>;

/// Operator commands that take effect at once.
#[derive(Debug, Clone)]
pub enum Operation {
    PauseCluster {
        cluster: String,
        paused: bool,
    },
    PauseEndpoint {
        endpoint: String,
        paused: bool,
    },
    Drain {
        cluster: String,
        backend: String,
        draining: bool,
    },
}

fn endpoint_role_name(role: gatehouse_settings::config::EndpointRole) -> &'static str {
    match role {
        gatehouse_settings::config::EndpointRole::ReadWrite => "read_write",
        gatehouse_settings::config::EndpointRole::ReadOnly => "read_only",
        gatehouse_settings::config::EndpointRole::Split => "split",
    }
}

fn role_name(role: Role) -> &'static str {
    match role {
        Role::Unknown => "unknown",
        Role::Writer => "writer",
        Role::Reader => "reader",
    }
}

impl<E: Engine> CoreView for Core<E> {
    fn digests(&self, limit: Option<usize>) -> Option<Vec<gatehouse_core::digests::DigestRow>> {
        self.digests.load().as_ref().map(|d| d.snapshot(limit))
    }

    fn reset_digests(&self) {
        if let Some(d) = self.digests.load().as_ref() {
            d.reset();
        }
    }

    fn settings_now(&self) -> Arc<Settings> {
        self.settings_arc()
    }

    fn engine_name(&self) -> &'static str {
        E::NAME
    }

    fn clients(&self) -> Vec<gatehouse_core::cancel::ClientRow> {
        self.cancels.clients()
    }

    fn idle_servers(&self) -> Vec<IdleServer> {
        let mut out = Vec::new();
        for p in self.pools.all() {
            let k = p.key();
            for c in p.idle_servers() {
                out.push(IdleServer {
                    cluster: k.cluster.clone(),
                    backend: k.backend.clone(),
                    user: k.user.clone(),
                    database: k.database.clone(),
                    server_id: c.server_id,
                    tls: c.tls,
                    age: c.age,
                    idle_for: c.idle_for,
                    switches: c.switches,
                });
            }
        }
        out
    }

    fn pinned_now(&self) -> BTreeMap<&'static str, usize> {
        self.cancels.pinned_now()
    }

    fn kill(&self, id: u32) -> bool {
        self.cancels.terminate(id)
    }

    fn set_disabled(&self, endpoint: &str, disabled: bool) -> Option<()> {
        let settings = self.settings();
        settings
            .endpoints
            .iter()
            .find(|e| e.name == endpoint && e.cluster.engine == E::KIND)?;
        let mut set = self.disabled.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if disabled {
            set.insert(endpoint.to_owned());
        } else {
            set.remove(endpoint);
        }
        Some(())
    }

    fn is_disabled(&self, endpoint: &str) -> bool {
        Core::is_disabled(self, endpoint)
    }

    fn traffic(&self) -> Traffic {
        let settings = self.settings_arc();
        let mine = settings.endpoints.iter().filter(|e| e.cluster.engine == E::KIND);
        Traffic {
            engine: E::NAME,
            endpoints: self.meters.endpoints(mine.map(|e| e.name.as_str())),
            tenants: self.meters.tenants(),
            backends: self.pools.backend_connects(),
        }
    }

    fn readiness(&self) -> Vec<Readiness> {
        let settings = self.settings_arc();
        settings
            .endpoints
            .iter()
            .filter_map(|e| {
                let state = self.topology.cluster(&e.cluster.name)?;
                let choice = state.peek(e, &|_| false);
                let why = match &choice {
                    Some(c) => c.why.name(),
                    None if state.holds(&e.name) => "paused",
                    None => "no usable backend",
                };
                Some(Readiness {
                    endpoint: e.name.clone(),
                    cluster: e.cluster.name.clone(),
                    role: endpoint_role_name(e.role),
                    ready: choice.is_some(),
                    backend: choice.map(|c| c.backend.addr.clone()),
                    why,
                })
            })
            .collect()
    }

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
                    open: p.open_count(),
                }
            })
            .collect();
        pools.sort_by(|a, b| {
            (&a.cluster, &a.backend, &a.user, &a.database).cmp(&(&b.cluster, &b.backend, &b.user, &b.database))
        });
        // The pools of one key with other startup parameters (see
        // `PoolKey::startup`) show as one: their connections add up, their
        // leases are counted once (they share the key's permits).
        pools.dedup_by(|later, kept| {
            let same = (&later.cluster, &later.backend, &later.user, &later.database)
                == (&kept.cluster, &kept.backend, &kept.user, &kept.database);
            if same {
                kept.idle += later.idle;
                kept.open += later.open;
                kept.leased = kept.leased.max(later.leased);
            }
            same
        });
        let mut backends = Vec::new();
        let mut clusters = Vec::new();
        let mut states = self.topology.all();
        states.sort_by(|a, b| a.name.cmp(&b.name));
        for state in states {
            let cluster = &state;
            {
                let writer = state.writer();
                for b in state.backends().iter() {
                    let h = b.health();
                    backends.push(BackendView {
                        cluster: cluster.name.clone(),
                        backend: b.addr.clone(),
                        role: role_name(h.role),
                        up: h.up,
                        elected: writer.as_ref().is_some_and(|w| std::sync::Arc::ptr_eq(w, b)),
                        fenced: h.fence != gatehouse_core::topology::Fence::None,
                        lag_seconds: h.lag.map(|l| l.as_secs_f64()),
                        position: h.position,
                        leases: b.leases.load(std::sync::atomic::Ordering::Relaxed),
                        routed: b.routed.load(std::sync::atomic::Ordering::Relaxed),
                        max_connections: h.max_connections,
                        last_error: h.last_error,
                    });
                }
                clusters.push(ClusterView {
                    cluster: cluster.name.clone(),
                    writer: writer.as_ref().map(|w| w.addr.clone()),
                    waiting: state.waiting.load(std::sync::atomic::Ordering::Relaxed),
                    routed: state.routed_by_reason().into_iter().collect(),
                    failovers: state.events(),
                });
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
            clusters,
            pinned_sessions: self.stats.pins(),
            errors,
            accepted_connections: self.stats.accepted(),
        }
    }

    fn reload(self: Arc<Self>, settings: &Arc<Settings>) -> gatehouse_core::core::ReloadReport {
        Core::reload(&self, settings)
    }

    fn operate(&self, op: &Operation) -> Option<Result<(), String>> {
        let cluster_of = |name: &str| self.topology.cluster(name);
        match op {
            Operation::PauseCluster { cluster, paused } => {
                cluster_of(cluster)?.set_paused(*paused);
                Some(Ok(()))
            }
            Operation::PauseEndpoint { endpoint, paused } => {
                let settings = self.settings();
                let e = settings
                    .endpoints
                    .iter()
                    .find(|e| &e.name == endpoint && e.cluster.engine == E::KIND)?;
                cluster_of(&e.cluster.name)?.set_endpoint_paused(endpoint, *paused);
                Some(Ok(()))
            }
            Operation::Drain {
                cluster,
                backend,
                draining,
            } => {
                let state = cluster_of(cluster)?;
                Some(gatehouse_core::core::operate::drain(self, &state, backend, *draining).map_err(|e| e.to_string()))
            }
        }
    }

    fn switchover<'a>(&'a self, cluster: &'a str, target: &'a str) -> Option<Switching<'a>> {
        let state = self.topology.cluster(cluster)?;
        Some(Box::pin(async move {
            gatehouse_core::core::operate::switchover(self, &state, target)
                .await
                .map_err(|e| e.to_string())
        }))
    }
}
