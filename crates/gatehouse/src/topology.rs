//! What the proxy knows about each backend: its role (discovered by probing,
//! never configured) and whether it is up, with thresholds so one failed
//! probe does not flap a backend down. One monitor task per cluster probes
//! through the engine; routers read the result.
//!
//! A cluster without `monitor_secret` cannot be probed: its first backend is
//! taken as the writer and the rest as readers, all assumed up.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use crate::config::{ClusterSettings, EndpointRole, Settings};
use crate::core::Core;
use crate::engine::Engine;
use crate::error::{Condition, ProxyError};

/// Consecutive failed probes before a backend is marked down.
pub const FAILURES_TO_MARK_DOWN: u32 = 2;
/// Consecutive successful probes before a down backend is marked up.
pub const SUCCESSES_TO_MARK_UP: u32 = 2;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    Unknown,
    Writer,
    Reader,
}

#[derive(Debug, Clone, Copy)]
pub struct Health {
    pub role: Role,
    pub up: bool,
    pub max_connections: Option<u32>,
    failures: u32,
    successes: u32,
}

pub struct BackendState {
    pub addr: String,
    health: Mutex<Health>,
}

impl BackendState {
    pub fn health(&self) -> Health {
        *self.health.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn record(&self, result: Result<crate::engine::Probe, &ProxyError>) {
        let mut h = self.health.lock().unwrap_or_else(PoisonError::into_inner);
        match result {
            Ok(p) => {
                let first = h.role == Role::Unknown;
                h.failures = 0;
                h.successes += 1;
                h.role = if p.writable { Role::Writer } else { Role::Reader };
                h.max_connections = p.max_connections;
                if !h.up && (first || h.successes >= SUCCESSES_TO_MARK_UP) {
                    h.up = true;
                }
            }
            Err(_) => {
                h.successes = 0;
                h.failures += 1;
                if h.failures >= FAILURES_TO_MARK_DOWN {
                    h.up = false;
                }
            }
        }
    }
}

pub struct ClusterState {
    pub backends: Vec<BackendState>,
    next_reader: AtomicUsize,
}

pub struct Topology {
    clusters: HashMap<String, Arc<ClusterState>>,
}

impl Topology {
    pub fn new(settings: &Settings) -> Self {
        let clusters = settings
            .clusters
            .iter()
            .map(|c| {
                let probed = c.monitor.is_some();
                let backends = c
                    .backends
                    .iter()
                    .enumerate()
                    .map(|(i, addr)| {
                        let role = match (probed, i) {
                            (true, _) => Role::Unknown,
                            (false, 0) => Role::Writer,
                            (false, _) => Role::Reader,
                        };
                        let health = Health {
                            role,
                            up: !probed,
                            max_connections: None,
                            failures: 0,
                            successes: 0,
                        };
                        BackendState {
                            addr: addr.clone(),
                            health: Mutex::new(health),
                        }
                    })
                    .collect();
                (
                    c.name.clone(),
                    Arc::new(ClusterState {
                        backends,
                        next_reader: AtomicUsize::new(0),
                    }),
                )
            })
            .collect();
        Self { clusters }
    }

    /// The server's own `max_connections`, when a probe has read it.
    pub fn max_connections(&self, cluster: &str, backend: &str) -> Option<u32> {
        self.clusters
            .get(cluster)?
            .backends
            .iter()
            .find(|b| b.addr == backend)?
            .health()
            .max_connections
    }

    pub fn cluster(&self, name: &str) -> Option<&Arc<ClusterState>> {
        self.clusters.get(name)
    }

    /// The backend that should serve the next client of an endpoint with
    /// `role`: the writer for read/write; readers in turn for read-only,
    /// falling back to the writer when no reader is up.
    pub fn route(&self, cluster: &str, role: EndpointRole) -> Result<String, ProxyError> {
        let state = self
            .clusters
            .get(cluster)
            .ok_or_else(|| ProxyError::new(Condition::Internal, "cluster not configured"))?;
        let up = |want: Role| {
            state.backends.iter().filter(move |b| {
                let h = b.health();
                h.up && h.role == want
            })
        };
        if role == EndpointRole::ReadOnly {
            let readers: Vec<&BackendState> = up(Role::Reader).collect();
            if !readers.is_empty() {
                let i = state.next_reader.fetch_add(1, Ordering::Relaxed) % readers.len();
                return Ok(readers[i].addr.clone());
            }
        }
        up(Role::Writer).next().map(|b| b.addr.clone()).ok_or_else(|| {
            ProxyError::new(
                Condition::NoBackendForRole,
                format!("no writable backend is available in cluster \"{cluster}\""),
            )
        })
    }
}

/// Probes every backend of `cluster` once and records the results.
pub async fn probe_once<E: Engine>(core: &Core<E>, cluster: &ClusterSettings) {
    let (Some(secret), Some(state)) = (&cluster.monitor, core.topology.cluster(&cluster.name)) else {
        return;
    };
    for backend in &state.backends {
        let result = core.engine.probe(&backend.addr, secret, cluster.connect_timeout).await;
        let before = backend.health();
        backend.record(result.as_ref().map(|p| *p));
        let after = backend.health();
        if before.up != after.up || before.role != after.role {
            match &result {
                Ok(_) => {
                    tracing::info!(cluster = %cluster.name, backend = %backend.addr, role = ?after.role, up = after.up, "backend state changed")
                }
                Err(e) => {
                    tracing::warn!(cluster = %cluster.name, backend = %backend.addr, error = %e, up = after.up, "backend probe failed")
                }
            }
        }
    }
}

/// Probes `cluster` every health-check interval until shutdown.
pub async fn monitor<E: Engine>(core: Arc<Core<E>>, cluster: Arc<ClusterSettings>) {
    if cluster.monitor.is_none() {
        return;
    }
    let mut shutdown = core.shutdown.clone();
    loop {
        tokio::select! {
            _ = tokio::time::sleep(cluster.health_check_interval) => {
                probe_once(&core, &cluster).await;
                core.pools.sweep();
            }
            _ = shutdown.changed() => return,
        }
    }
}
