//! The set of all pools of one engine ([`Pools`]): creates a pool on first
//! use, shares one [`BackendShare`] among the pools on a backend, and
//! applies reloads, retirements and the idle sweep across them.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize};
use std::sync::{Arc, Mutex, PoisonError};

use arc_swap::ArcSwap;

use super::{BackendShare, Capacity, Pool, PoolKey};
use crate::config::{ClusterSettings, Secret};
use crate::engine::Engine;

/// The backends' shares, by (cluster, backend).
type Shares<E> = HashMap<(String, String), Arc<BackendShare<E>>>;

/// All pools of one engine, created on first use.
pub struct Pools<E: Engine> {
    map: Mutex<HashMap<PoolKey, Arc<Pool<E>>>>,
    /// [`BackendShare`]'s counters are read from here too.
    pub(super) shares: Mutex<Shares<E>>,
}

impl<E: Engine> Default for Pools<E> {
    fn default() -> Self {
        Self::new()
    }
}

impl<E: Engine> Pools<E> {
    pub fn new() -> Self {
        Self {
            map: Mutex::new(HashMap::new()),
            shares: Mutex::new(HashMap::new()),
        }
    }

    /// Whether the pool for `key` exists now.
    pub fn contains(&self, key: &PoolKey) -> bool {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains_key(key)
    }

    /// Whether the pool for `key` exists and has an idle connection now.
    pub fn has_idle(&self, key: &PoolKey) -> bool {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(key)
            .is_some_and(|p| p.has_idle())
    }

    /// The pool for `key`, created with the cluster's settings if new.
    /// `server_max_connections` is the backend's own limit, when known;
    /// `backend_leases` the topology's count of leases on the backend.
    pub fn get(
        self: &Arc<Self>,
        engine: &Arc<E>,
        cluster: &Arc<ClusterSettings>,
        key: PoolKey,
        secret: &Arc<Secret>,
        server_max_connections: Option<u32>,
        backend_leases: &Arc<AtomicUsize>,
    ) -> Arc<Pool<E>> {
        let mut map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(p) = map.get(&key) {
            p.share.learn_server_max(server_max_connections);
            if p.rotate(secret) {
                tracing::info!(user = %p.key.user, database = %p.key.database, "backend credentials changed: new connections use them, old ones are replaced");
            }
            return p.clone();
        }
        let (permits, base) = if key.startup.is_empty() {
            (Arc::new(Capacity::new(cluster.pool_size as usize)), None)
        } else {
            drop(map);
            let shared = PoolKey {
                startup: Vec::new(),
                ..key.clone()
            };
            let base = self.get(engine, cluster, shared, secret, server_max_connections, backend_leases);
            map = self.map.lock().unwrap_or_else(PoisonError::into_inner);
            if let Some(p) = map.get(&key) {
                return p.clone();
            }
            (base.permits.clone(), Some(base))
        };
        let share = self.share(cluster, &key.backend, server_max_connections);
        let pool = Arc::new(Pool {
            key: key.clone(),
            route: Arc::new(crate::cancel::Route {
                cluster: key.cluster.clone(),
                user: key.user.clone(),
            }),
            secret: Mutex::new(secret.clone()),
            generation: AtomicU64::new(0),
            engine: engine.clone(),
            expiry: super::Expiry::new(cluster),
            cluster: ArcSwap::new(cluster.clone()),
            share,
            permits,
            _base: base,
            backend_leases: backend_leases.clone(),
            idle: Mutex::new(VecDeque::new()),
            idle_len: Arc::new(AtomicUsize::new(0)),
            open: Arc::new(AtomicUsize::new(0)),
            switch_failed: AtomicBool::new(false),
        });
        pool.share.register(&pool);
        map.insert(key, pool.clone());
        pool
    }

    fn share(&self, cluster: &ClusterSettings, backend: &str, max: Option<u32>) -> Arc<BackendShare<E>> {
        let mut shares = self.shares.lock().unwrap_or_else(PoisonError::into_inner);
        shares
            .entry((cluster.name.clone(), backend.to_owned()))
            .or_insert_with(|| Arc::new(BackendShare::new(cluster, backend, max)))
            .clone()
    }

    /// Tells the pools on `backend` of `cluster` the server's own
    /// `max_connections`, once a probe has read it.
    pub fn learn_server_max(&self, cluster: &str, backend: &str, server_max: Option<u32>) {
        let share = self
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .get(&(cluster.to_owned(), backend.to_owned()))
            .cloned();
        if let Some(share) = share {
            share.learn_server_max(server_max);
        }
    }

    /// Applies a reloaded cluster's settings to its pools in use and to
    /// its backends' shares (see [`Pool::reconfigure`],
    /// [`BackendShare::reconfigure`]).
    pub fn reconfigure(&self, cluster: &Arc<ClusterSettings>) {
        for p in self.all().iter().filter(|p| p.key.cluster == cluster.name) {
            p.reconfigure(cluster);
        }
        let shares: Vec<Arc<BackendShare<E>>> = self
            .shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .filter(|((c, _), _)| *c == cluster.name)
            .map(|(_, s)| s.clone())
            .collect();
        for s in shares {
            s.reconfigure(cluster);
        }
    }

    /// Retires every pool of `cluster` (removed, or replaced by a reload)
    /// and forgets its backends' shares; returns how many idle connections
    /// were closed.
    pub fn retire_cluster(&self, cluster: &str) -> usize {
        let closed = self
            .all()
            .iter()
            .filter(|p| p.key.cluster == cluster)
            .map(|p| p.retire())
            .sum();
        self.shares
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|(c, _), _| c != cluster);
        closed
    }

    /// Retires every pool on `backend` of `cluster` (see [`Pool::retire`]);
    /// returns how many idle connections were closed.
    pub fn retire_backend(&self, cluster: &str, backend: &str) -> usize {
        self.all()
            .iter()
            .filter(|p| p.key.cluster == cluster && p.key.backend == backend)
            .map(|p| p.retire())
            .sum()
    }

    /// A snapshot of every pool, for reports and tests.
    pub fn all(&self) -> Vec<Arc<Pool<E>>> {
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .values()
            .cloned()
            .collect()
    }

    /// Closes expired idle connections in every pool, then drops the pools
    /// nobody uses any more (no connection, no session holding them), so
    /// thousands of tenants that connected once cost nothing once idle.
    /// Returns how many connections were closed.
    pub fn sweep(&self) -> usize {
        let closed = self.all().iter().map(|p| p.sweep()).sum();
        self.map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|_, p| Arc::strong_count(p) > 1 || p.idle_count() > 0);
        closed
    }
}
